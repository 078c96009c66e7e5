// Element types, named as StableHLO names them (i1, i8 ... ui64, f16, bf16, f32, f64,
// complex<f32>, complex<f64>).
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
};

// The real element types: the ones visit_dtype visits.

inline constexpr DType kAllDTypes[] = {DType::Bool, DType::I8,  DType::I16, DType::I32, DType::I64,
                                       DType::U8,   DType::U16, DType::U32, DType::U64, DType::F16,
                                       DType::BF16, DType::F32, DType::F64};
inline constexpr DType kComplexDTypes[] = {DType::C64, DType::C128};

constexpr size_t size_of(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::I8:
    case DType::U8:
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
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}
constexpr bool is_complex(DType t) {
  return t == DType::C64 || t == DType::C128;
}
// complex64 -> f32, complex128 -> f64; other types are their own component type.
constexpr DType complex_component(DType t) {
  return t == DType::C64 ? DType::F32 : t == DType::C128 ? DType::F64 : t;
}
constexpr bool is_signed_int(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}
constexpr bool is_unsigned_int(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}
constexpr bool is_integer(DType t) {
  return is_signed_int(t) || is_unsigned_int(t);
}
constexpr int bit_width(DType t) {
  return t == DType::Bool ? 1 : static_cast<int>(size_of(t) * 8);
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

// Calls f(TypeTag<T>{}) with the C++ storage type of a real `t`:
//   visit_dtype(t, [&](auto tag) { using T = typename decltype(tag)::type; ... });
// A complex `t` throws UnsupportedError ("complex64 is not supported here"): code that handles
// complex numbers checks is_complex first or uses visit_dtype_with_complex.
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
