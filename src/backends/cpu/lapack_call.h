// What the LAPACK families (lapack_factor_kernels.cpp, lapack_eigen_kernels.cpp) share when
// they read a call: the element type as a C++ type, the checked matrix operand, character
// fields of backend_config and LAPACK's 32-bit dimensions.
#pragma once

#include <cstring>
#include <limits>
#include <string>

#include "backends/cpu/lapack.h"
#include "backends/cpu/linalg_kernels.h"
#include "cujax/core/npy.h"

namespace cujax::cpu {

// Calls make(tag) with T the operand's element type (f32, f64, complex64, complex128).
template <class F>
LinalgBody with_lapack_type(const LinalgCall& call, F make) {
  switch (call.dtype) {
    case DType::F32:
      return make(TypeTag<float>{});
    case DType::F64:
      return make(TypeTag<double>{});
    case DType::C64:
      return make(TypeTag<lapack::c64>{});
    case DType::C128:
      return make(TypeTag<lapack::c128>{});
    default:
      call.require(false, "operand of type " + std::string(numpy_name(call.dtype)) +
                              "; LAPACK takes float32, float64, complex64 or complex128");
      return {};
  }
}

// `v` as LAPACK's INTEGER, or an UnsupportedError naming the call.
inline lapack::fint to_fint(const LinalgCall& call, int64_t v) {
  call.require(v >= 0 && v <= std::numeric_limits<lapack::fint>::max(),
               "dimension " + std::to_string(v) + " exceeds LAPACK's 32-bit integers");
  return static_cast<lapack::fint>(v);
}

// The matrix operand 0, checked: rank >= 2, square when `square`, and dimensions whose
// workspaces (a few times rows x cols) still fit LAPACK's 32-bit integers.
inline MatrixDims matrix_operand(const LinalgCall& call, bool square) {
  const Shape& s = call.operands.at(0);
  call.require(s.size() >= 2, "operand " + ir::Type::tensor(s, call.dtype).str() +
                                  " is not a (batch of) matri(x/ces)");
  const MatrixDims d = matrix_dims(s);
  call.require(!square || d.rows == d.cols,
               "operand " + ir::Type::tensor(s, call.dtype).str() + " is not square");
  call.require(d.rows <= std::numeric_limits<lapack::fint>::max() / 8 &&
                   d.cols <= std::numeric_limits<lapack::fint>::max() / 8,
               "dimensions exceed LAPACK's 32-bit integers");
  return d;
}

// Character code of a backend_config field (uplo = 76 : ui8 is 'L'), one of `allowed`.
inline lapack::fchar char_field(const LinalgCall& call, const char* name, lapack::fchar fallback,
                                const char* allowed) {
  const int64_t v = call.int_field(name, fallback);
  const bool ok = v > 0 && v < 128 && std::strchr(allowed, static_cast<int>(v)) != nullptr;
  call.require(ok, std::string("backend_config ") + name + " = " + std::to_string(v) +
                       " is not one of '" + allowed + "'");
  return static_cast<lapack::fchar>(v);
}

}  // namespace cujax::cpu
