// Host-callable launchers of the cuda backend's kernels (defined in the .cu files). Pointers are
// device pointers; every launcher enqueues on `stream` and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/common/index.h"
#include "cujax/core/dtype.h"

namespace cujax::cuda {

enum class UnaryOp {
  Abs,
  Negate,
  Sign,
  Not,
  Popcnt,
  Clz,
  Ceil,
  Floor,
  RoundAfz,
  RoundEven,
  Sqrt,
  Rsqrt,
  Cbrt,
  Exp,
  Expm1,
  Log,
  Log1p,
  Logistic,
  Sin,
  Cos,
  Tan,
  Tanh
};
enum class BinaryOp {
  Add,
  Subtract,
  Multiply,
  Divide,
  Remainder,
  Maximum,
  Minimum,
  Power,
  Atan2,
  And,
  Or,
  Xor,
  ShiftLeft,
  ShiftRightLogical,
  ShiftRightArithmetic
};
enum class CompareOp { EQ, NE, GE, GT, LE, LT };

// Whether the kernels exist for this op and element type (the CPU backend's type rules).
bool supports_unary(UnaryOp op, DType t);
bool supports_binary(BinaryOp op, DType t);

void launch_unary(UnaryOp op, DType t, const void* in, void* out, int64_t n, cudaStream_t s);
void launch_binary(BinaryOp op, DType t, const void* a, const void* b, void* out, int64_t n,
                   cudaStream_t s);
// out (bool) = a <dir> b; `total_order` compares floats by TOTALORDER.
void launch_compare(CompareOp op, DType t, bool total_order, const void* a, const void* b,
                    bool* out, int64_t n, cudaStream_t s);
// out = pred ? on_true : on_false; a scalar pred (pred_scalar) selects whole arrays.
void launch_select(size_t element_bytes, const bool* pred, bool pred_scalar, const void* on_true,
                   const void* on_false, void* out, int64_t n, cudaStream_t s);
void launch_convert(DType from, DType to, const void* in, void* out, int64_t n, cudaStream_t s);

// The box copy of backends/common/index.h, for elements of 1, 2, 4, 8 or 16 bytes.
void launch_strided_copy(size_t element_bytes, const index::StridedCopy& c, const void* src,
                         void* dst, cudaStream_t s);
// dst[i] = *value (a device pointer to one element), i < n.
void launch_fill(size_t element_bytes, const void* value, void* dst, int64_t n, cudaStream_t s);
// out[i] = index of element i along `dim` of `dims`, as element type t.
void launch_iota(DType t, void* out, const int64_t* dims, int rank, int dim, cudaStream_t s);

// Throws CudaError when this build has no kernel image (SASS or PTX) that the current device
// can run, e.g. a 7.5 GPU with this sm_80/sm_90 build.
void check_kernel_image(int device_ordinal);

enum class ReduceOp { Add, Multiply, Maximum, Minimum, And, Or, Xor };
bool supports_reduce(ReduceOp op, DType t);
// Reduces `in` (`rank` dims) over the dimensions flagged in `reduced`, starting from the scalar
// *init (device pointer); out holds the kept dimensions in order. One thread per result.
void launch_reduce(ReduceOp op, DType t, const void* in, const void* init, void* out,
                   const int64_t* dims, const bool* reduced, int rank, cudaStream_t s);

}  // namespace cujax::cuda
