// Kernels for the ops that keep narrow element types (i2, i4, ui2, ui4, the f8/f6/f4 formats)
// after compiler::widen_narrow_types: convert between a narrow type and f32/f64 or another
// integer type, and bitcast_convert. register_narrow_kernels wraps the factories registered
// before it, as the complex kernels do; every other op computes on wide types by then.
#include <cstring>
#include <string>
#include <type_traits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "compiler/narrow_types.h"
#include "core/narrow_convert.h"
#include "cujax/core/narrow_types.h"

namespace cujax::cpu {

namespace {

constexpr int64_t kGrain = int64_t{1} << 12;

void check_input(const HostTensor& t, const ir::Type& type, const std::string& where) {
  if (t.dtype() != type.dtype || t.shape() != type.shape)
    throw RuntimeError(where + ": operand is " + t.type_string() + ", expected " + type.str());
}

// out = convert(in), for the pairs compiler::is_native_convert admits (in.dtype() to out.dtype()).
void convert_elements(const HostTensor& in, HostTensor& out) {
  const DType s = in.dtype(), d = out.dtype();
  const int64_t n = in.size();
  const auto* x = static_cast<const uint8_t*>(in.data());
  auto each = [n](auto fn) {
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) fn(i);
    });
  };
  if (s == d) {
    if (in.nbytes()) std::memcpy(out.data(), in.data(), in.nbytes());
    return;
  }
  if (is_narrow_float(s)) {  // to f32 or f64: exact
    double table[256];
    for (int b = 0; b < 256; ++b) table[b] = narrow_float_to_double(s, static_cast<uint8_t>(b));
    if (d == DType::F32) {
      float* o = out.data_as<float>();
      each([&](int64_t i) { o[i] = static_cast<float>(table[x[i]]); });
    } else {
      double* o = out.data_as<double>();
      each([&](int64_t i) { o[i] = table[x[i]]; });
    }
    return;
  }
  auto* o8 = static_cast<uint8_t*>(out.data());
  if (is_narrow_float(d)) {  // from f32 or f64: rounded once
    if (s == DType::F32) {
      const float* f = in.data_as<float>();
      each([&](int64_t i) { o8[i] = narrow_float_from_double(d, f[i]); });
    } else {
      const double* f = in.data_as<double>();
      each([&](int64_t i) { o8[i] = narrow_float_from_double(d, f[i]); });
    }
    return;
  }
  if (is_narrow_int(d) && is_float(s)) {
    // Truncated toward zero and saturated to the type's range, NaN to 0, as XLA converts.
    const narrow::IntFormat fmt = narrow::int_format(d);
    if (s == DType::F32) {
      const float* f = in.data_as<float>();
      each([&](int64_t i) { o8[i] = narrow::from_float(fmt, f[i]); });
    } else {
      const double* f = in.data_as<double>();
      each([&](int64_t i) { o8[i] = narrow::from_float(fmt, f[i]); });
    }
    return;
  }
  if (is_narrow_int(s) && is_narrow_int(d)) {
    each([&](int64_t i) { o8[i] = narrow_int_from_int64(d, narrow_int_to_int64(s, x[i])); });
    return;
  }
  if (is_narrow_int(s)) {  // to an integer or i1: sign- or zero-extended, then wrapped
    visit_dtype(d, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T>) {  // is_native_convert admits integers and i1 only
        T* o = out.data_as<T>();
        each([&](int64_t i) { o[i] = static_cast<T>(narrow_int_to_int64(s, x[i])); });
      }
    });
    return;
  }
  // From an integer or i1 to a narrow integer: wrapped to its width.
  visit_dtype(s, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      const T* v = in.data_as<T>();
      each([&](int64_t i) { o8[i] = narrow_int_from_int64(d, static_cast<int64_t>(v[i])); });
    }
  });
}

Kernel narrow_convert_kernel(const ir::Operation& op) {
  if (op.operands.size() != 1 || op.num_results() != 1) unsupported(op, "expects one operand");
  const ir::Type a = op.operands[0]->type;
  const ir::Type r = op.result(0)->type;
  if (a.shape != r.shape) unsupported(op, "operand and result shapes differ");
  if (!compiler::is_native_convert(a.dtype, r.dtype))
    unsupported(op, "no direct conversion from " + std::string(mlir_name(a.dtype)) + " to " +
                        std::string(mlir_name(r.dtype)) +
                        " (compiler::widen_narrow_types splits it into two)");
  const std::string where = op.where();
  return [a, r, where](std::span<const HostTensor> in, ExecContext&) {
    check_input(in[0], a, where);
    std::vector<HostTensor> out;
    out.emplace_back(r.dtype, r.shape);
    convert_elements(in[0], out[0]);
    return out;
  };
}

// The low `width` bits of element i, and the element with those bits as a type stores them.
uint64_t element_bits(const HostTensor& t, int64_t i, int width) {
  uint64_t v = 0;
  const size_t size = size_of(t.dtype());
  std::memcpy(&v, static_cast<const std::byte*>(t.data()) + i * size, size);
  return width >= 64 ? v : v & ((uint64_t{1} << width) - 1);
}
void store_bits(HostTensor& t, int64_t i, uint64_t bits) {
  const DType d = t.dtype();
  if (is_narrow_int(d)) bits = narrow_int_from_int64(d, static_cast<int64_t>(bits));
  std::memcpy(static_cast<std::byte*>(t.data()) + i * size_of(d), &bits, size_of(d));
}

// bitcast_convert with a narrow operand or result: the operand's elements as one little-endian
// stream of bit_width-bit fields (element 0 lowest), read back as the result's elements. Equal
// widths keep the shape; otherwise the narrower side has a minor dimension of the width ratio.
Kernel narrow_bitcast_kernel(const ir::Operation& op) {
  if (op.operands.size() != 1 || op.num_results() != 1) unsupported(op, "expects one operand");
  const ir::Type a = op.operands[0]->type;
  const ir::Type r = op.result(0)->type;
  for (DType t : {a.dtype, r.dtype})
    if (t == DType::Bool || is_complex(t))
      unsupported(op, "cannot bitcast " + std::string(mlir_name(t)) + " to or from a narrow type");
  const int wa = bit_width(a.dtype), wr = bit_width(r.dtype);
  Shape expect = a.shape;
  if (wa > wr) {
    if (wa % wr) unsupported(op, "operand width is not a multiple of the result's");
    expect.push_back(wa / wr);
  } else if (wa < wr) {
    if (wr % wa || expect.empty() || expect.back() != wr / wa)
      unsupported(op, "operand needs a minor dimension of " + std::to_string(wr / wa));
    expect.pop_back();
  }
  if (expect != r.shape)
    unsupported(op, "result shape must be " + shape_to_string(expect) + ", got " + r.str());
  const std::string where = op.where();
  return [a, r, wa, wr, where](std::span<const HostTensor> in, ExecContext&) {
    check_input(in[0], a, where);
    std::vector<HostTensor> out;
    out.emplace_back(r.dtype, r.shape);
    const int64_t n = out[0].size();
    for (int64_t j = 0; j < n; ++j) {
      uint64_t bits = 0;
      for (int k = 0; k < wr;) {  // gather bits [j*wr, (j+1)*wr) of the stream
        const int64_t p = j * wr + k;
        const int64_t i = p / wa;
        const int off = static_cast<int>(p % wa);
        const int take = std::min(wr - k, wa - off);
        const uint64_t field = element_bits(in[0], i, wa) >> off;
        const uint64_t mask = take >= 64 ? ~uint64_t{0} : (uint64_t{1} << take) - 1;
        bits |= (field & mask) << k;
        k += take;
      }
      store_bits(out[0], j, bits);
    }
    return out;
  };
}

}  // namespace

void register_narrow_kernels(KernelRegistry& r) {
  auto wrap = [&r](const std::string& name, Kernel (*narrow)(const ir::Operation&)) {
    const KernelFactory* existing = r.find(name);
    KernelFactory other = existing ? *existing : KernelFactory{};
    r.add(name, [other, narrow](const ir::Operation& op, Compiler& cc) {
      if (compiler::touches_narrow(op)) return narrow(op);
      if (!other) unsupported(op, "has no CPU kernel");
      return other(op, cc);
    });
  };
  wrap("stablehlo.convert", narrow_convert_kernel);
  wrap("stablehlo.bitcast_convert", narrow_bitcast_kernel);
}

}  // namespace cujax::cpu
