// JAX's type promotion lattice, weak types, and the scalar and ArrayLike wrappers.
#include <array>
#include <cmath>
#include <limits>

#include "cujax/trace/trace.h"
#include "numpy/internal.h"

namespace cujax {

namespace {

// Lattice nodes (https://docs.jax.dev/en/latest/type_promotion.html).
enum Node : int {
  kB1,
  kU8,
  kU16,
  kU32,
  kU64,
  kIWeak,
  kI8,
  kI16,
  kI32,
  kI64,
  kFWeak,
  kBF16,
  kF16,
  kF32,
  kF64,
  kCWeak,
  kC64,
  kC128,
  kNumNodes
};

struct Lattice {
  std::array<uint32_t, kNumNodes> upper{};  // bit set of the nodes above each node (itself too)
  std::array<std::array<int, kNumNodes>, kNumNodes> join{};

  Lattice() {
    std::array<std::vector<int>, kNumNodes> edges;
    edges[kB1] = {kIWeak};
    edges[kIWeak] = {kU8, kI8};
    edges[kU8] = {kU16, kI16};
    edges[kU16] = {kU32, kI32};
    edges[kU32] = {kU64, kI64};
    edges[kU64] = {kFWeak};
    edges[kI8] = {kI16};
    edges[kI16] = {kI32};
    edges[kI32] = {kI64};
    edges[kI64] = {kFWeak};
    edges[kFWeak] = {kBF16, kF16, kCWeak};
    edges[kBF16] = {kF32};
    edges[kF16] = {kF32};
    edges[kF32] = {kF64, kC64};
    edges[kF64] = {kC128};
    edges[kCWeak] = {kC64};
    edges[kC64] = {kC128};
    for (int n = 0; n < kNumNodes; ++n) {
      std::vector<int> stack{n};
      while (!stack.empty()) {
        const int m = stack.back();
        stack.pop_back();
        if (upper[n] & (1u << m)) continue;
        upper[n] |= 1u << m;
        for (int e : edges[m]) stack.push_back(e);
      }
    }
    for (int a = 0; a < kNumNodes; ++a)
      for (int b = 0; b < kNumNodes; ++b) {
        const uint32_t common = upper[a] & upper[b];
        join[a][b] = -1;
        for (int c = 0; c < kNumNodes; ++c)
          if ((common & (1u << c)) && (upper[c] & common) == common) join[a][b] = c;
      }
  }
};

const Lattice& lattice() {
  static const Lattice l;
  return l;
}

int node_of(DType t) {
  switch (t) {
    case DType::Bool:
      return kB1;
    case DType::U8:
      return kU8;
    case DType::U16:
      return kU16;
    case DType::U32:
      return kU32;
    case DType::U64:
      return kU64;
    case DType::I8:
      return kI8;
    case DType::I16:
      return kI16;
    case DType::I32:
      return kI32;
    case DType::I64:
      return kI64;
    case DType::BF16:
      return kBF16;
    case DType::F16:
      return kF16;
    case DType::F32:
      return kF32;
    case DType::F64:
      return kF64;
    case DType::C64:
      return kC64;
    case DType::C128:
      return kC128;
    default:
      throw UnsupportedError("type promotion: " + std::string(numpy_name(t)) +
                             " is not supported by the numpy API");
  }
  return kF32;
}

// JAX's _jax_type: a weak value stands for the Python type of its kind (bool stays bool).
int node_of(const WeakDType& t) {
  if (t.weak_type) {
    if (is_float(t.dtype)) return kFWeak;
    if (is_complex(t.dtype)) return kCWeak;
    if (is_integer(t.dtype)) return kIWeak;
  }
  return node_of(t.dtype);
}

WeakDType type_of_node(int n) {
  static constexpr DType kDTypes[kNumNodes] = {
      DType::Bool, DType::U8,  DType::U16, DType::U32, DType::U64, DType::I32,
      DType::I8,   DType::I16, DType::I32, DType::I64, DType::F32, DType::BF16,
      DType::F16,  DType::F32, DType::F64, DType::C64, DType::C64, DType::C128};
  return WeakDType{kDTypes[n], n == kIWeak || n == kFWeak || n == kCWeak};
}

}  // namespace

std::string WeakDType::str() const {
  return std::string(mlir_name(dtype)) + (weak_type ? "{weak}" : "");
}

WeakDType Scalar::dtype() const {
  switch (kind) {
    case Kind::Bool:
      return {DType::Bool, false};
    case Kind::Int:
      return {DType::I32, true};
    case Kind::Complex:
      return {DType::C64, true};
    case Kind::Float:
      break;
  }
  return {DType::F32, true};
}

std::string Scalar::str() const {
  switch (kind) {
    case Kind::Bool:
      return i ? "true" : "false";
    case Kind::Int:
      return std::to_string(i);
    case Kind::Complex:
      return "(" + std::to_string(f) + (imag < 0 ? "" : "+") + std::to_string(imag) + "j)";
    case Kind::Float:
      break;
  }
  std::string s = std::to_string(f);
  return s;
}

WeakDType ArrayLike::dtype() const {
  if (is_scalar_) return scalar_.dtype();
  return {array_.dtype(), array_.weak_type()};
}

Shape ArrayLike::shape() const {
  return is_scalar_ ? Shape{} : array_.shape();
}

namespace {

template <class T>
void check_int_range(const std::string& fn, int64_t v, DType t) {
  using L = std::numeric_limits<T>;
  bool ok;
  if constexpr (std::is_signed_v<T>) {
    ok = v >= static_cast<int64_t>(L::min()) && v <= static_cast<int64_t>(L::max());
  } else {
    ok = v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(L::max());
  }
  if (!ok)
    numpy::detail::fail(fn, "C++ integer " + std::to_string(v) + " is out of range for " +
                                std::string(numpy_name(t)));
}

}  // namespace

Array ArrayLike::to_array(std::optional<DType> as, const char* fn) const {
  std::string name = fn;
  if (name.rfind("numpy.", 0) == 0) name = name.substr(6);
  if (!is_scalar_) {
    if (!as || *as == array_.dtype()) return array_;
    return numpy::detail::convert(array_, *as);
  }
  const WeakDType wt = scalar_.dtype();
  const DType t = as.value_or(wt.dtype);
  HostTensor h(t, {});
  const bool inexact = scalar_.kind == Scalar::Kind::Float || scalar_.kind == Scalar::Kind::Complex;
  visit_dtype_with_complex(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_complex_v<T>) {
      using R = typename T::value_type;
      h.data_as<T>()[0] = T(static_cast<R>(scalar_.as_double()), static_cast<R>(scalar_.imag));
    } else if constexpr (std::is_same_v<T, bool>) {
      h.data_as<bool>()[0] = inexact ? (scalar_.f != 0 || scalar_.imag != 0) : scalar_.i != 0;
    } else if constexpr (std::is_integral_v<T>) {
      if (inexact) {  // a complex scalar converts its real part, as NumPy does
        h.data_as<T>()[0] = static_cast<T>(scalar_.f);
      } else {
        check_int_range<T>(name, scalar_.i, t);
        h.data_as<T>()[0] = static_cast<T>(scalar_.i);
      }
    } else {
      h.data_as<T>()[0] = static_cast<T>(scalar_.as_double());
    }
  });
  return cujax::array(h, !as.has_value() && wt.weak_type);
}

namespace numpy {

DType promote_types(DType a, DType b) {
  return type_of_node(lattice().join[node_of(a)][node_of(b)]).dtype;
}

WeakDType promote_types(WeakDType a, WeakDType b) {
  return result_type(std::vector<WeakDType>{a, b});
}

WeakDType result_type(const std::vector<WeakDType>& types) {
  if (types.empty()) throw Error("numpy.result_type: at least one dtype is required");
  WeakDType out;
  bool all_weak = true, all_same = true;
  for (const auto& t : types) {
    all_weak = all_weak && t.weak_type;
    all_same = all_same && t.dtype == types[0].dtype;
  }
  if (types.size() == 1) {
    out = types[0];
  } else if (all_same && !all_weak) {
    out = {types[0].dtype, false};
  } else if (all_weak) {
    // The join of the strong counterparts, marked weak (JAX avoids non-canonical weak types).
    int n = node_of(types[0].dtype);
    for (const auto& t : types) n = lattice().join[n][node_of(t.dtype)];
    out = {type_of_node(n).dtype, true};
  } else {
    int n = node_of(types[0]);
    for (const auto& t : types) n = lattice().join[n][node_of(t)];
    out = type_of_node(n);
  }
  out.weak_type = out.weak_type && out.dtype != DType::Bool;
  return out;
}

WeakDType result_type(const std::vector<ArrayLike>& operands) {
  std::vector<WeakDType> types;
  types.reserve(operands.size());
  for (const auto& o : operands) types.push_back(o.dtype());
  return result_type(types);
}

bool can_cast(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  if (to == DType::Bool) return false;
  if (is_complex(from)) return to == DType::C128;  // complex64 -> complex128
  if (is_complex(to)) return can_cast(from, complex_component(to));
  auto mantissa = [](DType t) {
    switch (t) {
      case DType::F16:
        return 11;
      case DType::BF16:
        return 8;
      case DType::F32:
        return 24;
      default:
        return 53;
    }
  };
  if (is_float(from)) {
    if (!is_float(to)) return false;
    if (from == DType::F16 || from == DType::BF16) return to == DType::F32 || to == DType::F64;
    return from == DType::F32 && to == DType::F64;
  }
  if (is_float(to)) {
    const int bits = bit_width(from) - (is_signed_int(from) ? 1 : 0);
    return bits <= mantissa(to);
  }
  if (is_unsigned_int(from))
    return is_unsigned_int(to) ? bit_width(to) >= bit_width(from) : bit_width(to) > bit_width(from);
  // signed -> integer
  return is_signed_int(to) && bit_width(to) >= bit_width(from);
}

DType inexact_dtype(DType t) {
  return is_float(t) || is_complex(t) ? t : DType::F32;
}

}  // namespace numpy
}  // namespace cujax
