// Element types, named as StableHLO names them (i1, i8 ... ui64, f16, bf16, f32, f64,
// complex<f32>, complex<f64>, and the narrow i2/i4/ui2/ui4, f8*, f6* and f4 types).
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "cujax/core/error.h"
#include "cujax/core/half.h"

namespace cujax {

enum class DType : uint8_t {
  Bool,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64,
  F16,
  BF16,
  F32,
  F64,
  C64,   // complex<f32>: std::complex<float>, real part first
  C128,  // complex<f64>: std::complex<double>
  // Narrow types: one byte per element, as ml_dtypes stores them. The integers hold their value
  // (i2/i4 sign-extended to 8 bits); the floats hold their bit pattern in the low bits, the rest
  // zero. cujax/core/narrow_types.h encodes and decodes them; visit_dtype does not visit them.
  I2,
  I4,
  U2,
  U4,
  F8E4M3FN,       // no infinity, NaN S.1111.111, max 448
  F8E5M2,         // IEEE-like, max 57344
  F8E4M3FNUZ,     // bias 8, no infinity or -0, NaN 0x80, max 240
  F8E5M2FNUZ,     // bias 16, no infinity or -0, NaN 0x80, max 57344
  F8E4M3B11FNUZ,  // bias 11, no infinity or -0, NaN 0x80, max 30
  F8E3M4,         // IEEE-like, max 15.5
  F8E4M3,         // IEEE-like, max 240
  F8E8M0FNU,      // 2^(bits - 127): no sign, no zero, NaN 0xFF
  F6E2M3FN,       // no infinity or NaN, max 7.5
  F6E3M2FN,       // no infinity or NaN, max 28
  F4E2M1FN,       // no infinity or NaN, max 6
};

// The real element types: the ones visit_dtype visits.

inline constexpr DType kAllDTypes[] = {DType::Bool, DType::I8,  DType::I16, DType::I32, DType::I64,
                                       DType::U8,   DType::U16, DType::U32, DType::U64, DType::F16,
                                       DType::BF16, DType::F32, DType::F64};
inline constexpr DType kComplexDTypes[] = {DType::C64, DType::C128};
inline constexpr DType kNarrowIntDTypes[] = {DType::I2, DType::I4, DType::U2, DType::U4};
inline constexpr DType kNarrowFloatDTypes[] = {
    DType::F8E4M3FN,      DType::F8E5M2,   DType::F8E4M3FNUZ, DType::F8E5M2FNUZ,
    DType::F8E4M3B11FNUZ, DType::F8E3M4,   DType::F8E4M3,     DType::F8E8M0FNU,
    DType::F6E2M3FN,      DType::F6E3M2FN, DType::F4E2M1FN};

constexpr bool is_narrow_int(DType t) {
  return t == DType::I2 || t == DType::I4 || t == DType::U2 || t == DType::U4;
}
constexpr bool is_narrow_float(DType t) {
  return t >= DType::F8E4M3FN && t <= DType::F4E2M1FN;
}
// The types that visit_dtype does not visit because no C++ arithmetic type holds them.
constexpr bool is_narrow(DType t) {
  return is_narrow_int(t) || is_narrow_float(t);
}

constexpr size_t size_of(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::I8:
    case DType::U8:
    case DType::I2:
    case DType::I4:
    case DType::U2:
    case DType::U4:
    case DType::F8E4M3FN:
    case DType::F8E5M2:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2FNUZ:
    case DType::F8E4M3B11FNUZ:
    case DType::F8E3M4:
    case DType::F8E4M3:
    case DType::F8E8M0FNU:
    case DType::F6E2M3FN:
    case DType::F6E3M2FN:
    case DType::F4E2M1FN:
      return 1;
    case DType::I16:
    case DType::U16:
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I32:
    case DType::U32:
    case DType::F32:
      return 4;
    case DType::I64:
    case DType::U64:
    case DType::F64:
    case DType::C64:
      return 8;
    case DType::C128:
      return 16;
  }
  return 0;
}

constexpr bool is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64 ||
         is_narrow_float(t);
}
constexpr bool is_complex(DType t) {
  return t == DType::C64 || t == DType::C128;
}
// complex64 -> f32, complex128 -> f64; other types are their own component type.
constexpr DType complex_component(DType t) {
  return t == DType::C64 ? DType::F32 : t == DType::C128 ? DType::F64 : t;
}
// The complex type a real `t` converts to (JAX's dtypes.to_complex_dtype): complex128 for f64,
// complex64 for every other real type.
constexpr DType to_complex(DType t) {
  return t == DType::F64 ? DType::C128 : DType::C64;
}
constexpr bool is_signed_int(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64 ||
         t == DType::I2 || t == DType::I4;
}
constexpr bool is_unsigned_int(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64 ||
         t == DType::U2 || t == DType::U4;
}
constexpr bool is_integer(DType t) {
  return is_signed_int(t) || is_unsigned_int(t);
}
constexpr int bit_width(DType t) {
  switch (t) {
    case DType::Bool:
      return 1;
    case DType::I2:
    case DType::U2:
      return 2;
    case DType::I4:
    case DType::U4:
    case DType::F4E2M1FN:
      return 4;
    case DType::F6E2M3FN:
    case DType::F6E3M2FN:
      return 6;
    default:
      return static_cast<int>(size_of(t) * 8);
  }
}

// StableHLO spelling: "i1", "i32", "ui8", "bf16", "complex<f32>", ...
std::string_view mlir_name(DType t);
std::optional<DType> dtype_from_mlir_name(std::string_view name);
// NumPy/JAX spelling: "bool", "int32", "uint8", "bfloat16", "complex64", ...
std::string_view numpy_name(DType t);
std::optional<DType> dtype_from_numpy_name(std::string_view name);

template <class T>
struct TypeTag {
  using type = T;
};

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<bool>() {
  return DType::Bool;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::I8;
}
template <>
constexpr DType dtype_of<int16_t>() {
  return DType::I16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::I32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::I64;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::U8;
}
template <>
constexpr DType dtype_of<uint16_t>() {
  return DType::U16;
}
template <>
constexpr DType dtype_of<uint32_t>() {
  return DType::U32;
}
template <>
constexpr DType dtype_of<uint64_t>() {
  return DType::U64;
}
template <>
constexpr DType dtype_of<float16>() {
  return DType::F16;
}
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::BF16;
}
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::F64;
}
template <>
constexpr DType dtype_of<std::complex<float>>() {
  return DType::C64;
}
template <>
constexpr DType dtype_of<std::complex<double>>() {
  return DType::C128;
}

template <class T>
struct is_complex_type : std::false_type {};
template <class T>
struct is_complex_type<std::complex<T>> : std::true_type {};
template <class T>
inline constexpr bool is_complex_v = is_complex_type<T>::value;

// The error a real-only visit gives a complex dtype.
[[noreturn]] void throw_complex_unsupported(DType t);
// The error visit_dtype gives a narrow dtype (is_narrow).
[[noreturn]] void throw_narrow_unsupported(DType t);

// Calls f(TypeTag<T>{}) with the C++ storage type of a real `t`:
//   visit_dtype(t, [&](auto tag) { using T = typename decltype(tag)::type; ... });
// A complex `t` throws UnsupportedError ("complex64 is not supported here"): code that handles
// complex numbers checks is_complex first or uses visit_dtype_with_complex. A narrow `t`
// (is_narrow) throws UnsupportedError naming it: no kernel treats int4 as int8 by accident.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool:
      return f(TypeTag<bool>{});
    case DType::I8:
      return f(TypeTag<int8_t>{});
    case DType::I16:
      return f(TypeTag<int16_t>{});
    case DType::I32:
      return f(TypeTag<int32_t>{});
    case DType::I64:
      return f(TypeTag<int64_t>{});
    case DType::U8:
      return f(TypeTag<uint8_t>{});
    case DType::U16:
      return f(TypeTag<uint16_t>{});
    case DType::U32:
      return f(TypeTag<uint32_t>{});
    case DType::U64:
      return f(TypeTag<uint64_t>{});
    case DType::F16:
      return f(TypeTag<float16>{});
    case DType::BF16:
      return f(TypeTag<bfloat16>{});
    case DType::F32:
      return f(TypeTag<float>{});
    case DType::F64:
      return f(TypeTag<double>{});
    case DType::C64:
    case DType::C128:
      throw_complex_unsupported(t);
    case DType::I2:
    case DType::I4:
    case DType::U2:
    case DType::U4:
    case DType::F8E4M3FN:
    case DType::F8E5M2:
    case DType::F8E4M3FNUZ:
    case DType::F8E5M2FNUZ:
    case DType::F8E4M3B11FNUZ:
    case DType::F8E3M4:
    case DType::F8E4M3:
    case DType::F8E8M0FNU:
    case DType::F6E2M3FN:
    case DType::F6E3M2FN:
    case DType::F4E2M1FN:
      throw_narrow_unsupported(t);
  }
  return f(TypeTag<float>{});  // unreachable: every enumerator is handled above
}

// visit_dtype over every dtype: complex64/complex128 visit std::complex<float>/<double>.
template <class F>
decltype(auto) visit_dtype_with_complex(DType t, F&& f) {
  if (t == DType::C64) return f(TypeTag<std::complex<float>>{});
  if (t == DType::C128) return f(TypeTag<std::complex<double>>{});
  return visit_dtype(t, std::forward<F>(f));
}

}  // namespace cujax
