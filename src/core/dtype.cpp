#include "cujax/core/dtype.h"

#include <iterator>

namespace cujax {

namespace {
struct Names {
  DType dtype;
  std::string_view mlir;
  std::string_view numpy;
};
constexpr Names kNames[] = {
    {DType::Bool, "i1", "bool"},
    {DType::I8, "i8", "int8"},
    {DType::I16, "i16", "int16"},
    {DType::I32, "i32", "int32"},
    {DType::I64, "i64", "int64"},
    {DType::U8, "ui8", "uint8"},
    {DType::U16, "ui16", "uint16"},
    {DType::U32, "ui32", "uint32"},
    {DType::U64, "ui64", "uint64"},
    {DType::F16, "f16", "float16"},
    {DType::BF16, "bf16", "bfloat16"},
    {DType::F32, "f32", "float32"},
    {DType::F64, "f64", "float64"},
    {DType::C64, "complex<f32>", "complex64"},
    {DType::C128, "complex<f64>", "complex128"},
    {DType::I2, "i2", "int2"},
    {DType::I4, "i4", "int4"},
    {DType::U2, "ui2", "uint2"},
    {DType::U4, "ui4", "uint4"},
    {DType::F8E4M3FN, "f8E4M3FN", "float8_e4m3fn"},
    {DType::F8E5M2, "f8E5M2", "float8_e5m2"},
    {DType::F8E4M3FNUZ, "f8E4M3FNUZ", "float8_e4m3fnuz"},
    {DType::F8E5M2FNUZ, "f8E5M2FNUZ", "float8_e5m2fnuz"},
    {DType::F8E4M3B11FNUZ, "f8E4M3B11FNUZ", "float8_e4m3b11fnuz"},
    {DType::F8E3M4, "f8E3M4", "float8_e3m4"},
    {DType::F8E4M3, "f8E4M3", "float8_e4m3"},
    {DType::F8E8M0FNU, "f8E8M0FNU", "float8_e8m0fnu"},
    {DType::F6E2M3FN, "f6E2M3FN", "float6_e2m3fn"},
    {DType::F6E3M2FN, "f6E3M2FN", "float6_e3m2fn"},
    {DType::F4E2M1FN, "f4E2M1FN", "float4_e2m1fn"},
};
static_assert(std::size(kNames) == static_cast<size_t>(DType::F4E2M1FN) + 1);
constexpr bool names_in_enum_order() {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (static_cast<size_t>(kNames[i].dtype) != i) return false;
  return true;
}
static_assert(names_in_enum_order());
}  // namespace

void throw_complex_unsupported(DType t) {
  throw UnsupportedError(std::string(numpy_name(t)) +
                         " is not supported here (complex numbers "
                         "run on the CPU backend's complex kernels only)");
}

void throw_narrow_unsupported(DType t) {
  throw UnsupportedError(std::string(numpy_name(t)) +
                         " is not supported here (the narrow integer and float types run on "
                         "the CPU backend, computed in a wider type, and convert to others)");
}

std::string_view mlir_name(DType t) {
  return kNames[static_cast<int>(t)].mlir;
}
std::string_view numpy_name(DType t) {
  return kNames[static_cast<int>(t)].numpy;
}

std::optional<DType> dtype_from_mlir_name(std::string_view name) {
  for (const auto& n : kNames)
    if (n.mlir == name) return n.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_from_numpy_name(std::string_view name) {
  for (const auto& n : kNames)
    if (n.numpy == name) return n.dtype;
  return std::nullopt;
}

}  // namespace cujax
