// Matrix products through cuBLASLt, which is loaded with dlopen on first use (a CUDA build
// starts without it and says so when a dot_general needs it). Each distinct product (element
// types, batch, m, n, k, TF32 or not; operands always untransposed row-major here) gets a plan
// once: its descriptors and the heuristic's algorithm, cached for the process. The workspace is
// the device's (Device::workspace), one per device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device.h"

namespace cujax::cuda {

// Whether cuBLASLt runs products of `in` operands into `out` results: f16, bf16, f32, f64 into
// the same type, and f16/bf16 into f32 (mixed precision, as bf16 training emits).
bool cublaslt_supports(DType in, DType out);

struct MatmulShape {
  DType in = DType::F32, out = DType::F32;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  // f32 products only: TensorFloat-32 tensor cores allowed (tf32_allowed in op_kernels.h).
  bool tf32 = false;
  bool operator<(const MatmulShape& o) const;
};

// Row-major, batch-strided C[b] = A[b] (m x k) * B[b] (k x n), accumulating in f32 for
// f16/bf16/f32 and f64 for f64. Enqueued on the device's stream.
void cublaslt_matmul(Device& device, const MatmulShape& shape, const void* a, const void* b,
                     void* c);

// How many plans the cache holds (tests check that a repeated shape adds none).
size_t cublaslt_plan_count();

}  // namespace cujax::cuda
