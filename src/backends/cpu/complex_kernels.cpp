// Kernels for complex64/complex128 operands and results. register_complex_kernels wraps the
// factories that the other kernel files registered: an op whose operand or result type is
// complex compiles to a kernel from this file, any other op to the original one. The math is
// done in a wider type (complex<double> for complex64, complex<long double> for complex128) and
// rounded once, so results stay within the conformance checks' 3 ULP per part.
#include <kissfft/kissfft.hh>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>

#include "backends/cpu/complex_kernels.h"

#include "backends/common/complex_math.h"
#include "backends/cpu/elementwise_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "compiler/chlo_decompose.h"
#include "ir/type_walk.h"

namespace cujax::cpu {

namespace {

using C64 = std::complex<float>;
using C128 = std::complex<double>;

template <class C>
struct WideOf;
template <>
struct WideOf<C64> {
  using type = std::complex<double>;
};
template <>
struct WideOf<C128> {
  using type = std::complex<long double>;
};
template <class C>
using Wide = typename WideOf<C>::type;

template <class C>
C narrow(const Wide<C>& w) {
  using R = typename C::value_type;
  return {static_cast<R>(w.real()), static_cast<R>(w.imag())};
}
template <class C>
Wide<C> widen(const C& c) {
  using W = typename Wide<C>::value_type;
  return {static_cast<W>(c.real()), static_cast<W>(c.imag())};
}

// Calls f(TypeTag<C>{}) for a complex dtype.
template <class F>
void visit_complex(DType t, F&& f) {
  switch (t) {
    case DType::C64:
      f(TypeTag<C64>{});
      return;
    case DType::C128:
      f(TypeTag<C128>{});
      return;
    default:
      throw Error("visit_complex: " + std::string(mlir_name(t)) + " is not a complex type");
  }
}

std::vector<HostTensor> one(HostTensor t) {
  std::vector<HostTensor> v;
  v.push_back(std::move(t));
  return v;
}

const ir::Type& operand_type(const ir::Operation& op, size_t i) {
  if (i >= op.operands.size()) unsupported(op, "missing operand #" + std::to_string(i));
  return op.operands[i]->type;
}
const ir::Type& result_type(const ir::Operation& op, size_t i = 0) {
  if (i >= op.num_results()) unsupported(op, "missing result #" + std::to_string(i));
  return op.result(i)->type;
}

void check_input(const HostTensor& t, const ir::Type& type, const std::string& where) {
  if (t.dtype() != type.dtype || t.shape() != type.shape)
    throw RuntimeError(where + ": operand is " + t.type_string() + ", expected " + type.str());
}

constexpr int64_t kGrain = int64_t{1} << 11;

// out[i] = fn(a[i]) over the operand's elements.
template <class R, class T, class Fn>
Kernel map1(const ir::Operation& op, Fn fn) {
  const ir::Type a = operand_type(op, 0);
  const ir::Type r = result_type(op);
  if (a.shape != r.shape) unsupported(op, "operand and result shapes differ");
  std::string where = op.where();
  return [a, r, fn, where](std::span<const HostTensor> in, ExecContext&) {
    check_input(in[0], a, where);
    HostTensor out(r.dtype, r.shape);
    const T* x = in[0].data_as<T>();
    R* o = out.data_as<R>();
    parallel_for(out.size(), kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = fn(x[i]);
    });
    return one(std::move(out));
  };
}

// out[i] = fn(a[i], b[i]).
template <class R, class T, class Fn>
Kernel map2(const ir::Operation& op, Fn fn) {
  const ir::Type a = operand_type(op, 0);
  const ir::Type b = operand_type(op, 1);
  const ir::Type r = result_type(op);
  if (a.shape != r.shape || b.shape != r.shape) unsupported(op, "operand and result shapes differ");
  std::string where = op.where();
  return [a, b, r, fn, where](std::span<const HostTensor> in, ExecContext&) {
    check_input(in[0], a, where);
    check_input(in[1], b, where);
    HostTensor out(r.dtype, r.shape);
    const T* x = in[0].data_as<T>();
    const T* y = in[1].data_as<T>();
    R* o = out.data_as<R>();
    parallel_for(out.size(), kGrain, [&](int64_t b0, int64_t e) {
      for (int64_t i = b0; i < e; ++i) o[i] = fn(x[i], y[i]);
    });
    return one(std::move(out));
  };
}

// ---------------------------------------------------------------------------------------------
// Element functions on the wide type W = std::complex<long double or double>.

// complex_math.h's formulas, shared with the cuda backend, in W's part type.
template <class W>
W on_parts(cplx::PartsOf<typename W::value_type> (*fn)(cplx::PartsOf<typename W::value_type>),
           const W& z) {
  const auto p = fn({z.real(), z.imag()});
  return {p.re, p.im};
}

template <class W>
W logistic_c(const W& z) {
  return W(1) / (W(1) + std::exp(-z));
}

// maximum and minimum: complex_math.h's order, in C's part type (comparisons are exact).
template <class C>
C lexicographic_pick(C x, C y, bool larger) {
  using P = cplx::PartsOf<typename C::value_type>;
  return cplx::picks_first(P{x.real(), x.imag()}, P{y.real(), y.imag()}, larger) ? x : y;
}

// Unary ops whose result type is the operand's complex type; nullptr for others.
template <class C>
Kernel complex_unary(const ir::Operation& op) {
  using W = Wide<C>;
  auto wide = [&](auto fn) {
    return map1<C, C>(op, [fn](C x) { return narrow<C>(fn(widen(x))); });
  };
  const std::string& n = op.name;
  if (n == "stablehlo.negate") return map1<C, C>(op, [](C x) { return -x; });
  if (n == "stablehlo.exponential") return wide([](W z) { return std::exp(z); });
  if (n == "stablehlo.exponential_minus_one")
    return wide([](W z) { return on_parts(cplx::expm1, z); });
  if (n == "stablehlo.log") return wide([](W z) { return std::log(z); });
  if (n == "stablehlo.log_plus_one") return wide([](W z) { return on_parts(cplx::log1p, z); });
  if (n == "stablehlo.sqrt") return wide([](W z) { return std::sqrt(z); });
  if (n == "stablehlo.rsqrt") return wide([](W z) { return W(1) / std::sqrt(z); });
  if (n == "stablehlo.sign") return wide([](W z) { return on_parts(cplx::sign, z); });
  if (n == "stablehlo.sine") return wide([](W z) { return std::sin(z); });
  if (n == "stablehlo.cosine") return wide([](W z) { return std::cos(z); });
  if (n == "stablehlo.tan") return wide([](W z) { return std::tan(z); });
  if (n == "stablehlo.tanh") return wide([](W z) { return std::tanh(z); });
  if (n == "stablehlo.logistic") return wide([](W z) { return logistic_c(z); });
  // The principal cube root, as the spec's reference interpreter computes it.
  if (n == "stablehlo.cbrt")
    return wide([](W z) { return std::polar(std::cbrt(std::abs(z)), std::arg(z) / 3); });
  // compiler::kComplexChloOps, kept by chlo decomposition for complex operands. The C library's
  // complex functions put the branch cuts where the StableHLO spec, XLA and NumPy do.
  if (n == "chlo.tan") return wide([](W z) { return std::tan(z); });
  if (n == "chlo.sinh") return wide([](W z) { return std::sinh(z); });
  if (n == "chlo.cosh") return wide([](W z) { return std::cosh(z); });
  if (n == "chlo.asin") return wide([](W z) { return std::asin(z); });
  if (n == "chlo.acos") return wide([](W z) { return std::acos(z); });
  if (n == "chlo.atan") return wide([](W z) { return std::atan(z); });
  if (n == "chlo.asinh") return wide([](W z) { return std::asinh(z); });
  if (n == "chlo.acosh") return wide([](W z) { return std::acosh(z); });
  if (n == "chlo.atanh") return wide([](W z) { return std::atanh(z); });
  return nullptr;
}

template <class C>
Kernel complex_binary(const ir::Operation& op) {
  using W = Wide<C>;
  auto wide = [&](auto fn) {
    return map2<C, C>(op, [fn](C x, C y) { return narrow<C>(fn(widen(x), widen(y))); });
  };
  const std::string& n = op.name;
  if (n == "stablehlo.add") return map2<C, C>(op, [](C x, C y) { return x + y; });
  if (n == "stablehlo.subtract") return map2<C, C>(op, [](C x, C y) { return x - y; });
  if (n == "stablehlo.multiply") return wide([](W x, W y) { return x * y; });
  if (n == "stablehlo.divide") return wide([](W x, W y) { return x / y; });
  if (n == "stablehlo.power") return wide([](W x, W y) { return std::pow(x, y); });
  // The spec's complex atan2(y, x): -i log((x + iy) / sqrt(x^2 + y^2)).
  if (n == "stablehlo.atan2")
    return wide(
        [](W y, W x) { return W(0, -1) * std::log((x + W(0, 1) * y) / std::sqrt(x * x + y * y)); });
  // maximum and minimum order complex numbers lexicographically by (real, imaginary), as the
  // spec says; a NaN part propagates, as for floats.
  if (n == "stablehlo.maximum")
    return map2<C, C>(op, [](C x, C y) { return lexicographic_pick(x, y, true); });
  if (n == "stablehlo.minimum")
    return map2<C, C>(op, [](C x, C y) { return lexicographic_pick(x, y, false); });
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Element-wise kernels, by op.

Kernel elementwise_complex_kernel(const ir::Operation& op) {
  const std::string& n = op.name;
  const ir::Type& r = result_type(op);
  if (n == "stablehlo.real" || n == "stablehlo.imag" || n == "stablehlo.abs") {
    const DType a = operand_type(op, 0).dtype;
    if (!is_complex(a) || r.dtype != complex_component(a))
      unsupported(op, "needs a complex operand and a result of its part type, got " +
                          operand_type(op, 0).str() + " -> " + r.str());
    Kernel k;
    visit_complex(a, [&](auto tag) {
      using C = typename decltype(tag)::type;
      using R = typename C::value_type;
      if (n == "stablehlo.real") k = map1<R, C>(op, [](C x) { return x.real(); });
      if (n == "stablehlo.imag") k = map1<R, C>(op, [](C x) { return x.imag(); });
      if (n == "stablehlo.abs")
        k = map1<R, C>(op, [](C x) { return static_cast<R>(std::abs(widen(x))); });
    });
    return k;
  }
  if (n == "stablehlo.complex") {
    const ir::Type& a = operand_type(op, 0);
    if (!is_complex(r.dtype) || a.dtype != complex_component(r.dtype) ||
        operand_type(op, 1).dtype != a.dtype)
      unsupported(op, "needs two operands of the result's part type, got " + a.str() + ", " +
                          operand_type(op, 1).str() + " -> " + r.str());
    Kernel k;
    visit_complex(r.dtype, [&](auto tag) {
      using C = typename decltype(tag)::type;
      using R = typename C::value_type;
      k = map2<C, R>(op, [](R x, R y) { return C(x, y); });
    });
    return k;
  }
  if (n == "stablehlo.compare") {
    const ir::Attribute* d = op.attr("comparison_direction");
    const std::string dir = d ? d->enum_value : "";
    if (dir != "EQ" && dir != "NE")
      unsupported(op, "complex operands compare only with EQ or NE, got " + dir);
    const bool eq = dir == "EQ";
    Kernel k;
    visit_complex(operand_type(op, 0).dtype, [&](auto tag) {
      using C = typename decltype(tag)::type;
      k = map2<bool, C>(op, [eq](C x, C y) { return (x == y) == eq; });
    });
    return k;
  }
  if (n == "stablehlo.convert") {
    const DType from = operand_type(op, 0).dtype, to = r.dtype;
    Kernel k;
    // To complex: the value becomes the real part. From complex to a real type: the real part
    // converts (the imaginary part is dropped), as XLA does.
    visit_dtype_with_complex(from, [&](auto ft) {
      using F = typename decltype(ft)::type;
      visit_dtype_with_complex(to, [&](auto tt) {
        using T = typename decltype(tt)::type;
        if constexpr (is_complex_v<F> && is_complex_v<T>) {
          k = map1<T, F>(op, [](F x) { return T(x); });
        } else if constexpr (is_complex_v<T>) {
          using R = typename T::value_type;
          k = map1<T, F>(op, [](F x) { return T(ew::convert<R>(x), R(0)); });
        } else if constexpr (is_complex_v<F>) {
          using R = typename F::value_type;
          k = map1<T, F>(op, [](F x) { return ew::convert<T>(static_cast<R>(x.real())); });
        }
      });
    });
    return k;
  }
  if (op.operands.size() == 1 && operand_type(op, 0) == r && is_complex(r.dtype)) {
    Kernel k;
    visit_complex(r.dtype, [&](auto tag) { k = complex_unary<typename decltype(tag)::type>(op); });
    if (k) return k;
  }
  if (op.operands.size() == 2 && operand_type(op, 0) == r && operand_type(op, 1) == r &&
      is_complex(r.dtype)) {
    Kernel k;
    visit_complex(r.dtype, [&](auto tag) { k = complex_binary<typename decltype(tag)::type>(op); });
    if (k) return k;
  }
  unsupported(op, "is not defined for element type " + std::string(mlir_name(r.dtype)) +
                      " (complex operands: " + operand_type(op, 0).str() + ")");
}

// ---------------------------------------------------------------------------------------------
// dot_general: result dims are batch, lhs free, rhs free; accumulates in the wide type.

std::vector<int64_t> struct_ints(const ir::Attribute* s, const char* name) {
  const ir::Attribute* f = s->field(name);
  if (!f) return {};
  if (f->kind == ir::Attribute::Kind::Integer) return {f->integer};
  return ir::as_ints(*f);
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

Kernel dot_general_complex_kernel(const ir::Operation& op) {
  const ir::Type lt = operand_type(op, 0), rt = operand_type(op, 1), ot = result_type(op);
  if (lt.dtype != ot.dtype || rt.dtype != ot.dtype)
    unsupported(op, "complex dot_general needs operands of the result's type, got " + lt.str() +
                        ", " + rt.str() + " -> " + ot.str());
  const ir::Attribute* dn = op.attr("dot_dimension_numbers");
  if (!dn || dn->kind != ir::Attribute::Kind::Struct)
    unsupported(op, "dot_dimension_numbers must be a #stablehlo.dot attribute");
  const auto lb = struct_ints(dn, "lhs_batching_dimensions");
  const auto rb = struct_ints(dn, "rhs_batching_dimensions");
  const auto lc = struct_ints(dn, "lhs_contracting_dimensions");
  const auto rc = struct_ints(dn, "rhs_contracting_dimensions");
  if (lb.size() != rb.size() || lc.size() != rc.size())
    unsupported(op, "batching/contracting dimension lists differ in length");
  auto free_of = [](int64_t rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    std::vector<int64_t> f;
    for (int64_t d = 0; d < rank; ++d)
      if (std::find(a.begin(), a.end(), d) == a.end() &&
          std::find(b.begin(), b.end(), d) == b.end())
        f.push_back(d);
    return f;
  };
  const auto lf = free_of(lt.rank(), lb, lc), rf = free_of(rt.rank(), rb, rc);
  // Iteration space: batch..., lhs free..., rhs free..., contracting...; strides per operand.
  std::vector<int64_t> sizes, ls, rs;
  const auto lst = strides_of(lt.shape), rst = strides_of(rt.shape);
  for (size_t i = 0; i < lb.size(); ++i) {
    sizes.push_back(lt.shape[lb[i]]);
    ls.push_back(lst[lb[i]]);
    rs.push_back(rst[rb[i]]);
  }
  for (int64_t d : lf) {
    sizes.push_back(lt.shape[d]);
    ls.push_back(lst[d]);
    rs.push_back(0);
  }
  for (int64_t d : rf) {
    sizes.push_back(rt.shape[d]);
    ls.push_back(0);
    rs.push_back(rst[d]);
  }
  const size_t out_rank = sizes.size();
  int64_t k_total = 1;
  std::vector<int64_t> ksize, kls, krs;
  for (size_t i = 0; i < lc.size(); ++i) {
    if (lt.shape[lc[i]] != rt.shape[rc[i]]) unsupported(op, "contracting dimensions differ");
    ksize.push_back(lt.shape[lc[i]]);
    kls.push_back(lst[lc[i]]);
    krs.push_back(rst[rc[i]]);
    k_total *= lt.shape[lc[i]];
  }
  if (Shape(sizes.begin(), sizes.end()) != ot.shape)
    unsupported(op, "result type " + ot.str() + " does not match the dimension numbers");
  const std::string where = op.where();
  Kernel k;
  visit_complex(ot.dtype, [&](auto tag) {
    using C = typename decltype(tag)::type;
    k = [=](std::span<const HostTensor> in, ExecContext&) {
      check_input(in[0], lt, where);
      check_input(in[1], rt, where);
      const C* a = in[0].data_as<C>();
      const C* b = in[1].data_as<C>();
      HostTensor out(ot.dtype, ot.shape);
      C* o = out.data_as<C>();
      parallel_for(out.size(), 64, [&](int64_t begin, int64_t end) {
        std::vector<int64_t> idx(out_rank), kidx(ksize.size());
        for (int64_t i = begin; i < end; ++i) {
          int64_t rem = i, la = 0, rb0 = 0;
          for (size_t d = out_rank; d-- > 0;) {
            idx[d] = rem % sizes[d];
            rem /= sizes[d];
            la += idx[d] * ls[d];
            rb0 += idx[d] * rs[d];
          }
          C acc = 0;
          for (int64_t kk = 0; kk < k_total; ++kk) {
            int64_t r2 = kk, ka = 0, kb = 0;
            for (size_t d = ksize.size(); d-- > 0;) {
              const int64_t v = r2 % ksize[d];
              r2 /= ksize[d];
              ka += v * kls[d];
              kb += v * krs[d];
            }
            acc += a[la + ka] * b[rb0 + kb];
          }
          o[i] = acc;
        }
      });
      return one(std::move(out));
    };
  });
  return k;
}

// ---------------------------------------------------------------------------------------------
// fft: kissfft's mixed-radix transform (any length), one 1-D transform per axis, run in the
// wide type. RFFT keeps the first n/2+1 outputs of a full transform; IRFFT rebuilds the
// Hermitian spectrum and keeps the real part.

template <class W>
void fft_axis(std::vector<W>& data, const Shape& shape, size_t axis, bool inverse) {
  const int64_t n = shape[axis];
  if (n <= 1) return;
  int64_t inner = 1, outer = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  using R = typename W::value_type;
  const kissfft<R> plan(static_cast<std::size_t>(n), inverse);
  std::vector<W> line(static_cast<size_t>(n)), res(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      W* base = data.data() + o * n * inner + i;
      for (int64_t j = 0; j < n; ++j) line[j] = base[j * inner];
      plan.transform(line.data(), res.data());
      for (int64_t j = 0; j < n; ++j) base[j * inner] = inverse ? res[j] / R(n) : res[j];
    }
}

Kernel fft_kernel_complex(const ir::Operation& op) {
  const ir::Type a = operand_type(op, 0), r = result_type(op);
  const std::string type(op.enum_attr("fft_type"));
  const std::vector<int64_t> len = op.ints("fft_length");
  const size_t k = len.size();
  if (k < 1 || k > 3 || a.rank() < static_cast<int64_t>(k))
    unsupported(op, "fft_length must have 1 to 3 entries, at most the operand's rank");
  const size_t lead = static_cast<size_t>(a.rank()) - k;
  const bool rfft = type == "RFFT", irfft = type == "IRFFT";
  if (type != "FFT" && type != "IFFT" && !rfft && !irfft)
    unsupported(op, "unknown fft_type " + type);
  // The full complex shape the transforms run on.
  Shape full = a.shape;
  for (size_t i = 0; i < k; ++i) full[lead + i] = len[i];
  Shape expect = full;
  if (rfft) expect.back() = len.back() / 2 + 1;
  if (rfft    ? (a.shape != full || is_complex(a.dtype) || !is_complex(r.dtype) ||
              r.dtype != (a.dtype == DType::F32 ? DType::C64 : DType::C128) || r.shape != expect)
      : irfft ? (!is_complex(a.dtype) || r.dtype != complex_component(a.dtype) || r.shape != full ||
                 a.shape.back() != len.back() / 2 + 1)
              : (!is_complex(a.dtype) || a != r || a.shape != full))
    unsupported(op, type + " with fft_length " + shape_to_string(len) + " does not fit " + a.str() +
                        " -> " + r.str());
  const DType cdt = is_complex(a.dtype) ? a.dtype : r.dtype;
  const std::string where = op.where();
  Kernel kern;
  visit_complex(cdt, [&](auto tag) {
    using C = typename decltype(tag)::type;
    using W = Wide<C>;
    using R = typename C::value_type;
    kern = [=](std::span<const HostTensor> in, ExecContext&) {
      check_input(in[0], a, where);
      const int64_t total = num_elements(full);
      std::vector<W> data(static_cast<size_t>(total));
      const int64_t last = full.back();
      if (rfft) {
        const R* x = in[0].data_as<R>();
        for (int64_t i = 0; i < total; ++i) data[i] = W(x[i], 0);
      } else if (irfft) {
        // Rows of last/2+1 entries -> full Hermitian rows (X[n-j] = conj(X[j])), after the
        // inner axes are inverse-transformed.
        const C* x = in[0].data_as<C>();
        const int64_t half = a.shape.back();
        const int64_t rows = total / std::max<int64_t>(last, 1);
        std::vector<W> part(static_cast<size_t>(rows * half));
        for (int64_t i = 0; i < rows * half; ++i) part[i] = widen(x[i]);
        Shape part_shape = full;
        part_shape.back() = half;
        for (size_t ax = lead; ax + 1 < full.size(); ++ax) fft_axis(part, part_shape, ax, true);
        for (int64_t row = 0; row < rows; ++row)
          for (int64_t j = 0; j < last; ++j)
            data[row * last + j] =
                j < half ? part[row * half + j] : std::conj(part[row * half + (last - j)]);
        // The imaginary parts of X[0] (and X[n/2] for even n) do not contribute, as in numpy.
        for (int64_t row = 0; row < rows && last > 0; ++row) {
          data[row * last] = W(data[row * last].real(), 0);
          if (last % 2 == 0) data[row * last + last / 2] = W(data[row * last + last / 2].real(), 0);
        }
        fft_axis(data, full, full.size() - 1, true);
        HostTensor out(r.dtype, r.shape);
        R* o = out.data_as<R>();
        for (int64_t i = 0; i < total; ++i) o[i] = static_cast<R>(data[i].real());
        return one(std::move(out));
      } else {
        const C* x = in[0].data_as<C>();
        for (int64_t i = 0; i < total; ++i) data[i] = widen(x[i]);
      }
      const bool inverse = type == "IFFT";
      for (size_t ax = lead; ax < full.size(); ++ax) fft_axis(data, full, ax, inverse);
      HostTensor out(r.dtype, r.shape);
      C* o = out.data_as<C>();
      if (rfft) {
        const int64_t keep = r.shape.back();
        for (int64_t row = 0; row < total / std::max<int64_t>(last, 1); ++row)
          for (int64_t j = 0; j < keep; ++j) o[row * keep + j] = narrow<C>(data[row * last + j]);
      } else {
        for (int64_t i = 0; i < total; ++i) o[i] = narrow<C>(data[i]);
      }
      return one(std::move(out));
    };
  });
  return kern;
}

// ---------------------------------------------------------------------------------------------
// reduce, reduce_window and sort with complex operands: the region runs as a program on scalar
// tensors (the fast paths of reduction_kernels.cpp hold scalars in 64 bits).

HostTensor scalar_of(const HostTensor& t, int64_t i) {
  const size_t w = size_of(t.dtype());
  return HostTensor::from_bytes(t.dtype(), {},
                                {static_cast<const std::byte*>(t.data()) + i * w, w});
}
void store_scalar(HostTensor& t, int64_t i, const HostTensor& s) {
  const size_t w = size_of(t.dtype());
  if (s.dtype() != t.dtype() || s.size() != 1)
    throw RuntimeError("region returned " + s.type_string() + ", expected a " +
                       std::string(mlir_name(t.dtype())) + " scalar");
  std::memcpy(static_cast<std::byte*>(t.data()) + i * w, s.data(), w);
}

Kernel reduce_complex_kernel(const ir::Operation& op, Compiler& cc) {
  const size_t n = op.operands.size() / 2;
  if (n == 0 || op.operands.size() != 2 * n || op.num_results() != n || op.regions.size() != 1)
    unsupported(op, "expects N inputs, N init values, N results and a body");
  if (!captured_values(op).empty()) unsupported(op, "complex reduce bodies cannot capture values");
  const std::vector<int64_t> dims = op.ints("dimensions");
  const ir::Type in0 = operand_type(op, 0);
  std::vector<bool> reduced(in0.shape.size(), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= in0.rank()) unsupported(op, "dimension out of range");
    reduced[d] = true;
  }
  std::vector<ir::Type> in_types, out_types;
  for (size_t i = 0; i < n; ++i) {
    in_types.push_back(operand_type(op, i));
    out_types.push_back(result_type(op, i));
  }
  auto program = cc.compile_region(*op.regions[0]);
  const std::string where = op.where();
  return [=](std::span<const HostTensor> in, ExecContext& ctx) {
    for (size_t i = 0; i < n; ++i) check_input(in[i], in_types[i], where);
    std::vector<HostTensor> out;
    const int64_t out_size = num_elements(out_types[0].shape);
    for (size_t i = 0; i < n; ++i) {
      out.emplace_back(out_types[i].dtype, out_types[i].shape);
      for (int64_t j = 0; j < out_size; ++j) store_scalar(out[i], j, in[n + i]);
    }
    const Shape& shape = in_types[0].shape;
    const int64_t total = num_elements(shape);
    std::vector<int64_t> idx(shape.size());
    for (int64_t e = 0; e < total; ++e) {
      int64_t rem = e, o = 0;
      for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = rem % shape[d];
        rem /= shape[d];
      }
      for (size_t d = 0; d < shape.size(); ++d)
        if (!reduced[d]) o = o * shape[d] + idx[d];
      std::vector<HostTensor> args;
      for (size_t i = 0; i < n; ++i) args.push_back(scalar_of(out[i], o));
      for (size_t i = 0; i < n; ++i) args.push_back(scalar_of(in[i], e));
      std::vector<HostTensor> res = program->run(std::move(args), ctx);
      if (res.size() != n) throw RuntimeError(where + ": body returned the wrong number of values");
      for (size_t i = 0; i < n; ++i) store_scalar(out[i], o, res[i]);
    }
    return out;
  };
}

Kernel reduce_window_complex_kernel(const ir::Operation& op, Compiler& cc) {
  const size_t n = op.operands.size() / 2;
  if (n == 0 || op.operands.size() != 2 * n || op.num_results() != n || op.regions.size() != 1)
    unsupported(op, "expects N inputs, N init values, N results and a body");
  if (!captured_values(op).empty()) unsupported(op, "complex reduce_window bodies cannot capture");
  const ir::Type in0 = operand_type(op, 0);
  const size_t rank = in0.shape.size();
  const std::vector<int64_t> wdims = op.ints("window_dimensions");
  auto ints_or = [&](const char* name, int64_t dflt) {
    auto v = op.ints_if_present(name);
    return v ? *v : std::vector<int64_t>(rank, dflt);
  };
  const std::vector<int64_t> wstr = ints_or("window_strides", 1);
  const std::vector<int64_t> bdil = ints_or("base_dilations", 1);
  const std::vector<int64_t> wdil = ints_or("window_dilations", 1);
  std::vector<int64_t> pad(2 * rank, 0);
  if (const ir::Attribute* p = op.attr("padding")) {
    if (p->kind != ir::Attribute::Kind::DenseElements) unsupported(op, "padding must be dense");
    const HostTensor& t = p->tensor;
    if (t.size() != static_cast<int64_t>(2 * rank) || t.dtype() != DType::I64)
      unsupported(op, "padding must be a rank x 2 tensor of i64");
    std::copy(t.data_as<int64_t>(), t.data_as<int64_t>() + 2 * rank, pad.begin());
  }
  if (wdims.size() != rank || wstr.size() != rank || bdil.size() != rank || wdil.size() != rank)
    unsupported(op, "window attributes must have one entry per dimension");
  std::vector<ir::Type> in_types, out_types;
  for (size_t i = 0; i < n; ++i) {
    in_types.push_back(operand_type(op, i));
    out_types.push_back(result_type(op, i));
  }
  auto program = cc.compile_region(*op.regions[0]);
  const std::string where = op.where();
  return [=](std::span<const HostTensor> in, ExecContext& ctx) {
    for (size_t i = 0; i < n; ++i) check_input(in[i], in_types[i], where);
    const Shape& ishape = in_types[0].shape;
    const Shape& oshape = out_types[0].shape;
    const auto ist = strides_of(ishape);
    std::vector<HostTensor> out;
    for (size_t i = 0; i < n; ++i) out.emplace_back(out_types[i].dtype, out_types[i].shape);
    const int64_t total = num_elements(oshape), wtotal = num_elements(wdims);
    std::vector<int64_t> oi(rank), wi(rank);
    for (int64_t e = 0; e < total; ++e) {
      int64_t rem = e;
      for (size_t d = rank; d-- > 0;) {
        oi[d] = rem % oshape[d];
        rem /= oshape[d];
      }
      std::vector<HostTensor> acc;
      for (size_t i = 0; i < n; ++i) acc.push_back(in[n + i]);
      for (int64_t w = 0; w < wtotal; ++w) {
        int64_t r2 = w, off = 0;
        bool inside = true;
        for (size_t d = rank; d-- > 0;) {
          wi[d] = r2 % wdims[d];
          r2 /= wdims[d];
          // Position in the padded, dilated base.
          const int64_t p = oi[d] * wstr[d] + wi[d] * wdil[d] - pad[2 * d];
          if (p < 0 || p % bdil[d] != 0 || p / bdil[d] >= ishape[d]) {
            inside = false;
          } else {
            off += (p / bdil[d]) * ist[d];
          }
        }
        if (!inside) continue;
        std::vector<HostTensor> args = acc;
        for (size_t i = 0; i < n; ++i) args.push_back(scalar_of(in[i], off));
        acc = program->run(std::move(args), ctx);
        if (acc.size() != n)
          throw RuntimeError(where + ": body returned the wrong number of values");
      }
      for (size_t i = 0; i < n; ++i) store_scalar(out[i], e, acc[i]);
    }
    return out;
  };
}

Kernel sort_complex_kernel(const ir::Operation& op, Compiler& cc) {
  const size_t n = op.operands.size();
  if (n == 0 || op.num_results() != n || op.regions.size() != 1)
    unsupported(op, "expects N inputs, N results and a comparator");
  if (!captured_values(op).empty()) unsupported(op, "complex sort comparators cannot capture");
  const ir::Type in0 = operand_type(op, 0);
  int64_t dim = op.attr("dimension") ? op.int_attr("dimension") : -1;
  if (dim < 0) dim += in0.rank();
  if (dim < 0 || dim >= in0.rank()) unsupported(op, "dimension out of range");
  const bool stable = op.attr("is_stable") && op.attr("is_stable")->boolean;
  std::vector<ir::Type> types;
  for (size_t i = 0; i < n; ++i) types.push_back(operand_type(op, i));
  auto program = cc.compile_region(*op.regions[0]);
  const std::string where = op.where();
  return [=](std::span<const HostTensor> in, ExecContext& ctx) {
    for (size_t i = 0; i < n; ++i) check_input(in[i], types[i], where);
    const Shape& shape = types[0].shape;
    const int64_t len = shape[dim];
    int64_t inner = 1, outer = 1;
    for (size_t d = static_cast<size_t>(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
    for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
    std::vector<HostTensor> out;
    for (size_t i = 0; i < n; ++i) out.emplace_back(types[i].dtype, types[i].shape);
    std::vector<int64_t> perm(static_cast<size_t>(len));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t base = o * len * inner + j;
        std::iota(perm.begin(), perm.end(), int64_t{0});
        auto less = [&](int64_t x, int64_t y) {
          std::vector<HostTensor> args;
          for (size_t i = 0; i < n; ++i) {
            args.push_back(scalar_of(in[i], base + x * inner));
            args.push_back(scalar_of(in[i], base + y * inner));
          }
          std::vector<HostTensor> r = program->run(std::move(args), ctx);
          if (r.size() != 1 || r[0].dtype() != DType::Bool)
            throw RuntimeError(where + ": comparator must return one i1");
          return *r[0].data_as<bool>();
        };
        if (stable) {
          std::stable_sort(perm.begin(), perm.end(), less);
        } else {
          std::sort(perm.begin(), perm.end(), less);
        }
        for (size_t i = 0; i < n; ++i)
          for (int64_t p = 0; p < len; ++p)
            store_scalar(out[i], base + p * inner, scalar_of(in[i], base + perm[p] * inner));
      }
    return out;
  };
}

// Ops that the element-wise kernel above handles for complex types.
constexpr const char* kElementwiseOps[] = {
    "stablehlo.negate",   "stablehlo.exponential",  "stablehlo.exponential_minus_one",
    "stablehlo.log",      "stablehlo.log_plus_one", "stablehlo.sqrt",
    "stablehlo.rsqrt",    "stablehlo.sign",         "stablehlo.sine",
    "stablehlo.cosine",   "stablehlo.tan",          "stablehlo.tanh",
    "stablehlo.logistic", "stablehlo.add",          "stablehlo.subtract",
    "stablehlo.multiply", "stablehlo.divide",       "stablehlo.power",
    "stablehlo.real",     "stablehlo.imag",         "stablehlo.abs",
    "stablehlo.compare",  "stablehlo.convert",      "stablehlo.complex",
    "stablehlo.atan2",    "stablehlo.maximum",      "stablehlo.minimum",
    "stablehlo.cbrt"};

// triangular_solve: substitution in the wide type, one rounding per element of the solution.
// ADJOINT is the conjugate transpose; the ignored triangle of a is never read.

bool flag_attr(const ir::Operation& op, const char* name) {
  const ir::Attribute* a = op.attr(name);
  if (!a) unsupported(op, std::string("needs the ") + name + " attribute");
  if (a->kind == ir::Attribute::Kind::Bool) return a->boolean;
  if (a->kind == ir::Attribute::Kind::Unit) return true;
  unsupported(op, std::string(name) + " must be a boolean");
}

Kernel triangular_solve_complex_kernel(const ir::Operation& op) {
  const ir::Type at = operand_type(op, 0), bt = operand_type(op, 1);
  if (at.dtype != bt.dtype || result_type(op) != bt)
    unsupported(op,
                "needs a, b and the result of one complex type, got " + at.str() + ", " + bt.str());
  const int64_t rank = at.rank();
  if (rank < 2 || bt.rank() != rank) unsupported(op, "operands need the same rank >= 2");
  const int64_t n = at.shape[rank - 1];
  if (at.shape[rank - 2] != n) unsupported(op, "a must be square in its last two dims");
  int64_t batch = 1;
  for (int64_t d = 0; d < rank - 2; ++d) {
    if (at.shape[d] != bt.shape[d]) unsupported(op, "batch dimensions of a and b differ");
    batch *= at.shape[d];
  }
  const bool left = flag_attr(op, "left_side"), lower = flag_attr(op, "lower"),
             unit = flag_attr(op, "unit_diagonal");
  std::string t = "NO_TRANSPOSE";
  if (const ir::Attribute* tr = op.attr("transpose_a"))
    t = tr->kind == ir::Attribute::Kind::Enum ? tr->enum_value : tr->text;
  if (t != "NO_TRANSPOSE" && t != "TRANSPOSE" && t != "ADJOINT")
    unsupported(op, "unknown transpose_a value " + t);
  const bool transpose = t != "NO_TRANSPOSE", adjoint = t == "ADJOINT";
  const int64_t rows = bt.shape[rank - 2], cols = bt.shape[rank - 1];
  if ((left ? rows : cols) != n)
    unsupported(op, "b's " + std::string(left ? "rows" : "columns") + " must match a");
  const DType dtype = bt.dtype;
  const Shape b_shape = bt.shape;
  return [=](std::span<const HostTensor> in, ExecContext&) {
    HostTensor out(dtype, b_shape);
    visit_complex(dtype, [&](auto tag) {
      using C = typename decltype(tag)::type;
      using W = Wide<C>;
      const C* a = in[0].data_as<C>();
      const C* b = in[1].data_as<C>();
      C* x = out.data_as<C>();
      // op(a)[i][j], reading only the triangle `lower` names.
      auto op_a = [&](const C* m, int64_t i, int64_t j) {
        const int64_t r = transpose ? j : i, c = transpose ? i : j;
        if (r == c && unit) return W(1);
        if (lower ? c > r : c < r) return W(0);
        const W v = widen(m[r * n + c]);
        return adjoint ? std::conj(v) : v;
      };
      const bool op_lower = lower != transpose;
      parallel_for(batch, 1, [&](int64_t b0, int64_t b1) {
        std::vector<W> sol(rows * cols);
        for (int64_t q = b0; q < b1; ++q) {
          const C* m = a + q * n * n;
          for (int64_t i = 0; i < rows * cols; ++i) sol[i] = widen(b[q * rows * cols + i]);
          // Left: op(a) X = B, solved per column; right: X op(a) = B, per row.
          const bool forward = left ? op_lower : !op_lower;
          const int64_t lines = left ? cols : rows;
          for (int64_t line = 0; line < lines; ++line) {
            auto at = [&](int64_t k) -> W& {
              return left ? sol[k * cols + line] : sol[line * cols + k];
            };
            for (int64_t s = 0; s < n; ++s) {
              const int64_t j = forward ? s : n - 1 - s;
              W acc = at(j);
              const int64_t k0 = forward ? 0 : j + 1, k1 = forward ? j : n;
              for (int64_t k = k0; k < k1; ++k)
                acc -= (left ? op_a(m, j, k) : op_a(m, k, j)) * at(k);
              at(j) = acc / op_a(m, j, j);
            }
          }
          for (int64_t i = 0; i < rows * cols; ++i) x[q * rows * cols + i] = narrow<C>(sol[i]);
        }
      });
    });
    return std::vector<HostTensor>{out};
  };
}

// Ops of the spec that are not defined on complex numbers: a clear error instead of a
// misleading one from a real-typed kernel.
constexpr const char* kRealOnlyOps[] = {"stablehlo.remainder",
                                        "stablehlo.floor",
                                        "stablehlo.ceil",
                                        "stablehlo.round_nearest_afz",
                                        "stablehlo.round_nearest_even",
                                        "stablehlo.is_finite",
                                        "stablehlo.clamp",
                                        "stablehlo.reduce_precision",
                                        "stablehlo.convolution",
                                        "stablehlo.select_and_scatter"};

}  // namespace

bool touches_complex(const ir::Operation& op) {
  return ir::op_has_type(op, [](const ir::Type& t) { return !t.is_token && is_complex(t.dtype); });
}

void register_complex_kernels(KernelRegistry& r) {
  auto wrap = [&r](const std::string& name, KernelFactory complex_factory) {
    const KernelFactory* existing = r.find(name);
    KernelFactory real_factory = existing ? *existing : KernelFactory{};
    r.add(name, [real_factory, complex_factory, name](const ir::Operation& op, Compiler& cc) {
      if (touches_complex(op)) return complex_factory(op, cc);
      if (!real_factory) unsupported(op, "has no CPU kernel");
      return real_factory(op, cc);
    });
  };
  for (const char* name : kElementwiseOps)
    wrap(name, [](const ir::Operation& op, Compiler&) { return elementwise_complex_kernel(op); });
  // The chlo ops that chlo decomposition keeps for complex operands (complex_unary has them).
  for (const char* name : compiler::kComplexChloOps)
    wrap(name, [](const ir::Operation& op, Compiler&) { return elementwise_complex_kernel(op); });
  for (const char* name : kRealOnlyOps)
    wrap(name, [](const ir::Operation& op, Compiler&) -> Kernel {
      unsupported(op, "is not defined for complex element types");
    });
  wrap("stablehlo.dot_general",
       [](const ir::Operation& op, Compiler&) { return dot_general_complex_kernel(op); });
  wrap("stablehlo.triangular_solve",
       [](const ir::Operation& op, Compiler&) { return triangular_solve_complex_kernel(op); });
  wrap("stablehlo.fft", [](const ir::Operation& op, Compiler&) { return fft_kernel_complex(op); });
  wrap("stablehlo.reduce", reduce_complex_kernel);
  wrap("stablehlo.reduce_window", reduce_window_complex_kernel);
  wrap("stablehlo.sort", sort_complex_kernel);
}

}  // namespace cujax::cpu
