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
};
static_assert(std::size(kNames) == static_cast<size_t>(DType::C128) + 1);
}  // namespace

void throw_complex_unsupported(DType t) {
  throw UnsupportedError(std::string(numpy_name(t)) +
                         " is not supported here (complex numbers "
                         "run on the CPU backend's complex kernels only)");
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
