// Element-wise ops: unary and binary math, logical and bit ops, compare, select, clamp,
// convert, bitcast_convert, reduce_precision, is_finite. The per-element math lives in
// backends/common/elementwise.h (shared with the CUDA backend); this file validates the op
// once, picks a loop specialised on the element type and the functor, and runs it over
// contiguous arrays, split across threads when they are large.
#include <string>
#include <type_traits>
#include <utility>

#include "backends/common/elementwise.h"
#include "backends/cpu/elementwise_ops.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/strided_copy.h"

namespace cujax::cpu {

namespace {

// Elements per task: cheap ops are memory bound; transcendental ones cost ~20-100 ns each.
constexpr int64_t kGrain = int64_t{1} << 15;
constexpr int64_t kGrainPrecise = int64_t{1} << 11;

template <class F>
constexpr int64_t grain_of() {
  return F::kPrecise ? kGrainPrecise : kGrain;
}

std::string dtype_name(DType t) {
  return std::string(mlir_name(t));
}

void require_arity(const ir::Operation& op, size_t operands, size_t results = 1) {
  if (op.operands.size() != operands || op.num_results() != results)
    unsupported(op, "expects " + std::to_string(operands) + " operands and " +
                        std::to_string(results) + " result(s), got " +
                        std::to_string(op.operands.size()) + " and " +
                        std::to_string(op.num_results()));
  for (const ir::Value* v : op.operands)
    if (v->type.is_token) unsupported(op, "operands must be tensors");
  for (const auto& r : op.results)
    if (r->type.is_token) unsupported(op, "results must be tensors");
}

const ir::Type& operand_type(const ir::Operation& op, size_t i) {
  return op.operands[i]->type;
}
const ir::Type& result_type(const ir::Operation& op) {
  return op.result(0)->type;
}

[[noreturn]] void unsupported_dtype(const ir::Operation& op, DType t) {
  unsupported(op, "element type " + dtype_name(t) + " is not supported by this op");
}

// The operand's data after checking that it has the type the op was compiled for.
template <class T>
const T* operand(std::span<const HostTensor> in, size_t i, const Shape& shape) {
  if (i >= in.size()) throw RuntimeError("missing operand #" + std::to_string(i));
  const HostTensor& t = in[i];
  if (t.dtype() != dtype_of<T>() || t.shape() != shape)
    throw RuntimeError("operand #" + std::to_string(i) + " is " + t.type_string() + ", expected " +
                       dtype_name(dtype_of<T>()) + shape_to_string(shape));
  return t.data_as<T>();
}

// Runs body(begin, end) over [0, n), on several threads when n is large.
template <class Body>
void for_elements(int64_t n, int64_t grain, const Body& body) {
  if (n < 2 * grain) {
    if (n > 0) body(int64_t{0}, n);
    return;
  }
  parallel_for(n, grain, body);
}

std::vector<HostTensor> one(HostTensor t) {
  std::vector<HostTensor> v;
  v.push_back(std::move(t));
  return v;
}

// out[i] = fn(a[i]), out of element type R.
template <class R, class T, class Fn>
Kernel map1(Shape shape, int64_t grain, Fn fn) {
  return [shape = std::move(shape), grain, fn](std::span<const HostTensor> in, ExecContext& ctx) {
    const T* a = operand<T>(in, 0, shape);
    HostTensor out = reuse_or_allocate(in, {0}, dtype_of<R>(), shape, ctx);
    R* o = out.data_as<R>();  // may be `a`: each element is read before it is written
    for_elements(out.size(), grain, [a, o, fn](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = fn(a[i]);
    });
    return one(std::move(out));
  };
}

// out[i] = fn(a[i], b[i]), out of element type R.
template <class R, class T, class Fn>
Kernel map2(Shape shape, int64_t grain, Fn fn) {
  return [shape = std::move(shape), grain, fn](std::span<const HostTensor> in, ExecContext& ctx) {
    const T* a = operand<T>(in, 0, shape);
    const T* b = operand<T>(in, 1, shape);
    HostTensor out = reuse_or_allocate(in, {0, 1}, dtype_of<R>(), shape, ctx);
    R* o = out.data_as<R>();  // may be `a` or `b`: each element is read before it is written
    for_elements(out.size(), grain, [a, b, o, fn](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) o[i] = fn(a[i], b[i]);
    });
    return one(std::move(out));
  };
}

// ---------------------------------------------------------------------------------------------
// Unary and binary ops whose result type is the operand type.

template <class F>
Kernel unary_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 1);
  const ir::Type& a = operand_type(op, 0);
  const ir::Type& r = result_type(op);
  if (a != r) unsupported(op, "result type " + r.str() + " differs from operand type " + a.str());
  Kernel k;
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (ew::supports<F, T>())
      k = map1<T, T>(r.shape, grain_of<F>(), [](T x) { return ew::apply(F{}, x); });
  });
  if (!k) unsupported_dtype(op, a.dtype);
  return k;
}

template <class F>
Kernel binary_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 2);
  const ir::Type& a = operand_type(op, 0);
  const ir::Type& b = operand_type(op, 1);
  const ir::Type& r = result_type(op);
  if (a != r || b != r)
    unsupported(op, "operand types " + a.str() + " and " + b.str() +
                        " must both equal the result type " + r.str());
  Kernel k;
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (ew::supports<F, T>())
      k = map2<T, T>(r.shape, grain_of<F>(), [](T x, T y) { return ew::apply(F{}, x, y); });
  });
  if (!k) unsupported_dtype(op, a.dtype);
  return k;
}

// ---------------------------------------------------------------------------------------------
// Float predicates and parts.

Kernel is_finite_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 1);
  const ir::Type& a = operand_type(op, 0);
  const ir::Type& r = result_type(op);
  if (r.dtype != DType::Bool || r.shape != a.shape)
    unsupported(op, "result must be tensor of i1 with the operand's shape, got " + r.str());
  Kernel k;
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (ew::is_float_v<T>)
      k = map1<bool, T>(r.shape, kGrain, [](T x) { return ew::IsFinite{}(x); });
  });
  if (!k) unsupported_dtype(op, a.dtype);
  return k;
}

// real(x) = x and imag(x) = 0 for real floating-point operands (there is no complex type).
Kernel real_imag_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 1);
  const ir::Type& a = operand_type(op, 0);
  const ir::Type& r = result_type(op);
  if (!is_float(a.dtype)) unsupported_dtype(op, a.dtype);
  if (a != r) unsupported(op, "result type " + r.str() + " differs from operand type " + a.str());
  const bool imag = op.name == "stablehlo.imag";
  const Shape shape = r.shape;
  const DType dt = r.dtype;
  return [imag, shape, dt](std::span<const HostTensor> in, ExecContext&) {
    if (in.empty() || in[0].dtype() != dt || in[0].shape() != shape)
      throw RuntimeError("operand does not have the compiled type");
    return one(imag ? HostTensor(dt, shape) : in[0]);
  };
}

Kernel reduce_precision_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 1);
  const ir::Type& a = operand_type(op, 0);
  const ir::Type& r = result_type(op);
  if (a != r) unsupported(op, "result type " + r.str() + " differs from operand type " + a.str());
  const ir::Attribute* eb = op.attr("exponent_bits");
  const ir::Attribute* mb = op.attr("mantissa_bits");
  if (!eb || !mb || eb->kind != ir::Attribute::Kind::Integer ||
      mb->kind != ir::Attribute::Kind::Integer)
    unsupported(op, "needs integer attributes exponent_bits and mantissa_bits");
  if (eb->integer < 1 || mb->integer < 0 || eb->integer > 64 || mb->integer > 64)
    unsupported(op, "exponent_bits must be >= 1 and mantissa_bits >= 0, got " +
                        std::to_string(eb->integer) + " and " + std::to_string(mb->integer));
  ew::ReducePrecision rp;
  rp.exponent_bits = static_cast<int>(eb->integer);
  rp.mantissa_bits = static_cast<int>(mb->integer);
  Kernel k;
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (ew::is_float_v<T>) k = map1<T, T>(r.shape, kGrain, [rp](T x) { return rp(x); });
  });
  if (!k) unsupported_dtype(op, a.dtype);
  return k;
}

// ---------------------------------------------------------------------------------------------
// compare

Kernel compare_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 2);
  const ir::Type& a = operand_type(op, 0);
  const ir::Type& b = operand_type(op, 1);
  const ir::Type& r = result_type(op);
  if (a != b) unsupported(op, "operand types " + a.str() + " and " + b.str() + " differ");
  if (r.dtype != DType::Bool || r.shape != a.shape)
    unsupported(op, "result must be tensor of i1 with the operands' shape, got " + r.str());

  const ir::Attribute* dir_attr = op.attr("comparison_direction");
  if (!dir_attr || dir_attr->kind != ir::Attribute::Kind::Enum)
    unsupported(op, "needs a comparison_direction");
  const std::string& d = dir_attr->enum_value;
  const std::optional<ew::CompareDirection> parsed = parse_compare_direction(d);
  if (!parsed) unsupported(op, "unknown comparison_direction " + d);
  const ew::CompareDirection dir = *parsed;
  using D = ew::CompareDirection;

  std::string compare_type;
  if (const ir::Attribute* ct = op.attr("compare_type")) {
    if (ct->kind != ir::Attribute::Kind::Enum) unsupported(op, "compare_type must be an enum");
    compare_type = ct->enum_value;
    if (compare_type != "FLOAT" && compare_type != "TOTALORDER" && compare_type != "SIGNED" &&
        compare_type != "UNSIGNED" && compare_type != "NOTYPE")
      unsupported(op, "unknown compare_type " + compare_type);
  }
  const bool total = compare_type == "TOTALORDER";
  if (total && !is_float(a.dtype))
    unsupported(
        op, "compare_type TOTALORDER needs a floating-point operand, got " + dtype_name(a.dtype));

  Kernel k;
  visit_dtype(a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    with_direction(dir, [&](auto dtag) {
      constexpr D kDir = decltype(dtag)::value;
      if constexpr (ew::is_float_v<T>) {
        if (total) {
          k = map2<bool, T>(r.shape, kGrain, [](T x, T y) {
            return ew::Compare<kDir>{}(ew::total_order_key(x), ew::total_order_key(y));
          });
          return;
        }
      }
      using C = ew::compute_t<T, false>;
      k = map2<bool, T>(r.shape, kGrain, [](T x, T y) {
        return ew::Compare<kDir>{}(ew::to_compute<C>(x), ew::to_compute<C>(y));
      });
    });
  });
  return k;
}

// ---------------------------------------------------------------------------------------------
// select and clamp

template <class Fn>
void visit_width(size_t bytes, Fn&& fn) {
  switch (bytes) {
    case 1:
      return fn(TypeTag<uint8_t>{});
    case 2:
      return fn(TypeTag<uint16_t>{});
    case 4:
      return fn(TypeTag<uint32_t>{});
    case 8:
      return fn(TypeTag<uint64_t>{});
    default:  // 16: complex<f64>
      return fn(TypeTag<Word128>{});
  }
}

// pred is a scalar (picks a whole operand) or has the operands' shape.
Kernel select_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 3);
  const ir::Type& p = operand_type(op, 0);
  const ir::Type& t = operand_type(op, 1);
  const ir::Type& f = operand_type(op, 2);
  const ir::Type& r = result_type(op);
  if (p.dtype != DType::Bool) unsupported(op, "pred must be a tensor of i1, got " + p.str());
  if (t != r || f != r)
    unsupported(op, "on_true " + t.str() + " and on_false " + f.str() +
                        " must both equal the result type " + r.str());
  const Shape shape = r.shape;
  const DType dt = r.dtype;
  if (p.rank() == 0) {
    return [shape, dt](std::span<const HostTensor> in, ExecContext&) {
      const bool* pred = operand<bool>(in, 0, {});
      const HostTensor& chosen = in[*pred ? 1 : 2];
      if (chosen.dtype() != dt || chosen.shape() != shape)
        throw RuntimeError("operand is " + chosen.type_string() + ", expected " + dtype_name(dt) +
                           shape_to_string(shape));
      return one(chosen);
    };
  }
  if (p.shape != r.shape)
    unsupported(op, "pred shape " + shape_to_string(p.shape) +
                        " must be scalar or equal the result shape " + shape_to_string(r.shape));
  Kernel k;
  visit_width(size_of(dt), [&](auto tag) {
    using W = typename decltype(tag)::type;
    k = [shape, dt](std::span<const HostTensor> in, ExecContext& ctx) {
      const bool* __restrict pred = operand<bool>(in, 0, shape);
      for (size_t i = 1; i < 3; ++i)
        if (in[i].dtype() != dt || in[i].shape() != shape)
          throw RuntimeError("operand #" + std::to_string(i) + " is " + in[i].type_string() +
                             ", expected " + dtype_name(dt) + shape_to_string(shape));
      const W* a = in[1].data_as<W>();
      const W* b = in[2].data_as<W>();
      HostTensor out = reuse_or_allocate(in, {1, 2}, dt, shape, ctx);
      W* o = out.data_as<W>();  // may be `a` or `b`: each element is read before it is written
      for_elements(out.size(), kGrain, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) o[i] = pred[i] ? a[i] : b[i];
      });
      return one(std::move(out));
    };
  });
  return k;
}

// clamp(min, operand, max) = minimum(maximum(operand, min), max); min and max are scalars or
// have the operand's shape.
Kernel clamp_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 3);
  const ir::Type& lo = operand_type(op, 0);
  const ir::Type& x = operand_type(op, 1);
  const ir::Type& hi = operand_type(op, 2);
  const ir::Type& r = result_type(op);
  if (x != r) unsupported(op, "result type " + r.str() + " differs from operand type " + x.str());
  for (const ir::Type* bound : {&lo, &hi}) {
    if (bound->dtype != x.dtype || (bound->shape != x.shape && bound->rank() != 0))
      unsupported(op, "min/max " + bound->str() + " must be scalars or match operand " + x.str());
  }
  const Shape shape = x.shape, lo_shape = lo.shape, hi_shape = hi.shape;
  const int64_t lo_step = lo.shape == x.shape ? 1 : 0;
  const int64_t hi_step = hi.shape == x.shape ? 1 : 0;
  Kernel k;
  visit_dtype(x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ew::compute_t<T, false>;
    k = [=](std::span<const HostTensor> in, ExecContext& ctx) {
      const T* l = operand<T>(in, 0, lo_shape);
      const T* a = operand<T>(in, 1, shape);
      const T* h = operand<T>(in, 2, hi_shape);
      HostTensor out = reuse_or_allocate(in, {1}, dtype_of<T>(), shape, ctx);
      T* o = out.data_as<T>();  // may be `a`: each element is read before it is written
      for_elements(out.size(), kGrain, [=](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const C v = ew::Maximum{}(ew::to_compute<C>(a[i]), ew::to_compute<C>(l[i * lo_step]));
          o[i] = ew::from_compute<T>(ew::Minimum{}(v, ew::to_compute<C>(h[i * hi_step])));
        }
      });
      return one(std::move(out));
    };
  });
  return k;
}

// ---------------------------------------------------------------------------------------------
// convert and bitcast_convert

Kernel convert_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 1);
  const ir::Type& a = operand_type(op, 0);
  const ir::Type& r = result_type(op);
  if (a.shape != r.shape)
    unsupported(op, "operand shape " + shape_to_string(a.shape) + " differs from result shape " +
                        shape_to_string(r.shape));
  const Shape shape = r.shape;
  if (a.dtype == r.dtype) {
    const DType dt = a.dtype;
    return [shape, dt](std::span<const HostTensor> in, ExecContext&) {
      if (in.empty() || in[0].dtype() != dt || in[0].shape() != shape)
        throw RuntimeError("operand does not have the compiled type");
      return one(in[0]);
    };
  }
  Kernel k;
  visit_dtype(a.dtype, [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    visit_dtype(r.dtype, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      k = map1<To, From>(shape, kGrain, [](From x) { return ew::convert<To>(x); });
    });
  });
  return k;
}

// Reinterprets the bits. Same width: same shape. A wider operand splits into a new minor
// dimension of narrower elements (least significant first, as memory on a little-endian host
// holds them); a narrower operand's minor dimension joins into one wider element.
Kernel bitcast_convert_kernel(const ir::Operation& op, Compiler&) {
  require_arity(op, 1);
  const ir::Type& a = operand_type(op, 0);
  const ir::Type& r = result_type(op);
  if ((a.dtype == DType::Bool) != (r.dtype == DType::Bool))
    unsupported(op, "cannot bitcast between i1 and " +
                        dtype_name(a.dtype == DType::Bool ? r.dtype : a.dtype));
  const size_t wa = size_of(a.dtype), wr = size_of(r.dtype);
  const Shape in_shape = a.shape, out_shape = r.shape;
  const DType in_dt = a.dtype, out_dt = r.dtype;
  if (wa == wr) {
    if (a.shape != r.shape)
      unsupported(op, "same-width bitcast must keep the shape: " + a.str() + " -> " + r.str());
  } else {
    const Shape& wide = wa > wr ? a.shape : r.shape;
    const Shape& narrow = wa > wr ? r.shape : a.shape;
    const int64_t ratio = static_cast<int64_t>(wa > wr ? wa / wr : wr / wa);
    Shape expected = wide;
    expected.push_back(ratio);
    if (narrow != expected)
      unsupported(op, "bitcast from " + a.str() + " to " + r.str() +
                          " needs the narrow side to have the wide shape plus a minor dimension "
                          "of " +
                          std::to_string(ratio));
  }
  return [=](std::span<const HostTensor> in, ExecContext&) {
    if (in.empty() || in[0].dtype() != in_dt || in[0].shape() != in_shape)
      throw RuntimeError("operand does not have the compiled type");
    if (wa == wr) return one(in[0].bitcast(out_dt));
    const auto* bytes = static_cast<const std::byte*>(in[0].data());
    return one(HostTensor::from_bytes(out_dt, out_shape, {bytes, in[0].nbytes()}));
  };
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& r) {
  // Unary math.
#define CUJAX_ADD_UNARY(name, F) r.add(name, unary_kernel<ew::F>);
  CUJAX_CPU_UNARY_OPS(CUJAX_ADD_UNARY)
#undef CUJAX_ADD_UNARY
  r.add("stablehlo.is_finite", is_finite_kernel);
  r.add("stablehlo.real", real_imag_kernel);
  r.add("stablehlo.imag", real_imag_kernel);
  r.add("stablehlo.reduce_precision", reduce_precision_kernel);

  // Binary math, logic and bit ops.
#define CUJAX_ADD_BINARY(name, F) r.add(name, binary_kernel<ew::F>);
  CUJAX_CPU_BINARY_OPS(CUJAX_ADD_BINARY)
#undef CUJAX_ADD_BINARY

  r.add("stablehlo.compare", compare_kernel);
  r.add("stablehlo.select", select_kernel);
  r.add("stablehlo.clamp", clamp_kernel);
  r.add("stablehlo.convert", convert_kernel);
  r.add("stablehlo.bitcast_convert", bitcast_convert_kernel);
}

}  // namespace cujax::cpu
