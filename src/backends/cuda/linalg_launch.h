// Launchers of linalg_calls.cu: the small kernels around cuSOLVER's routines (the helpers JAX
// runs as cu_* custom calls, and stablehlo.cholesky's masking). Pointers are device pointers;
// each enqueues on `s` and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cujax/core/dtype.h"

namespace cujax::cuda {

// cu_lu_pivots_to_permutation: perm[b] = iota(p) with the swaps i <-> pivots[b, i] (0-based)
// applied in order, i < min(k, p); out-of-range pivots are skipped, as on the cpu backend.
void launch_pivots_to_permutation(const int32_t* pivots, int32_t* perm, int64_t batch, int64_t k,
                                  int64_t p, cudaStream_t s);

// cu_threefry2x32: Threefry-2x32 (20 rounds) per element of n; an operand flagged scalar is
// read at index 0 for every element.
struct ThreefryOperands {
  const uint32_t* in[4];  // key 0, key 1, count 0, count 1
  bool scalar[4];
};
void launch_threefry(const ThreefryOperands& ops, uint32_t* out0, uint32_t* out1, int64_t n,
                     cudaStream_t s);

// stablehlo.cholesky after potrf on `batch` row-major n x n matrices: zeros above (lower) or
// below the diagonal, and NaN in every element of a matrix whose info is nonzero. t is f32,
// f64, complex64 or complex128.
void launch_cholesky_mask(DType t, void* a, const int32_t* info, int64_t batch, int64_t n,
                          bool lower, cudaStream_t s);

}  // namespace cujax::cuda
