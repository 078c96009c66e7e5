// Element types, named as StableHLO names them (i1, i8 ... ui64, f16, bf16, f32, f64).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cujax/core/half.h"

namespace cujax {

enum class DType : uint8_t { Bool, I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64 };

inline constexpr DType kAllDTypes[] = {DType::Bool, DType::I8,  DType::I16, DType::I32, DType::I64,
                                       DType::U8,   DType::U16, DType::U32, DType::U64, DType::F16,
                                       DType::BF16, DType::F32, DType::F64};

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
      return 8;
  }
  return 0;
}

constexpr bool is_float(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
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

// StableHLO spelling: "i1", "i32", "ui8", "bf16", ...
std::string_view mlir_name(DType t);
std::optional<DType> dtype_from_mlir_name(std::string_view name);
// NumPy/JAX spelling: "bool", "int32", "uint8", "bfloat16", ...
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

// Calls f(TypeTag<T>{}) with the C++ storage type of `t`:
//   visit_dtype(t, [&](auto tag) { using T = typename decltype(tag)::type; ... });
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
  }
  return f(TypeTag<float>{});  // unreachable: every enumerator is handled above
}

}  // namespace cujax
