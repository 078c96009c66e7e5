// Matrix products through cuBLASLt, which is loaded with dlopen on first use (a CUDA build
// starts without it and says so when a dot_general needs it).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device.h"

namespace cujax::cuda {

// Whether cuBLASLt runs products of this element type (f16, bf16, f32, f64).
bool cublaslt_supports(DType t);

// Row-major, batch-strided C[b] = A[b] (m x k) * B[b] (k x n) of element type t, accumulating
// in f32 for f16/bf16/f32 (no TF32) and f64 for f64. Enqueued on the device's stream.
void cublaslt_matmul(Device& device, DType t, const void* a, const void* b, void* c, int64_t batch,
                     int64_t m, int64_t n, int64_t k);

}  // namespace cujax::cuda
