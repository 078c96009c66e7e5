// The kernels of linalg_launch.h: JAX's cu_* helpers of its cuSOLVER lowerings and the masking
// of stablehlo.cholesky. They mirror the cpu backend's host versions (lapack_factor_kernels.cpp,
// linalg_kernels.cpp) element for element.
#include <cmath>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/linalg_launch.h"

namespace cujax::cuda {

namespace {

__global__ void pivots_to_permutation_kernel(const int32_t* pivots, int32_t* perm, int64_t batch,
                                             int64_t k, int64_t p) {
  for (int64_t b = thread_begin(); b < batch; b += thread_stride()) {
    int32_t* pb = perm + b * p;
    for (int64_t i = 0; i < p; ++i) pb[i] = static_cast<int32_t>(i);
    const int64_t steps = k < p ? k : p;
    for (int64_t i = 0; i < steps; ++i) {
      const int64_t j = pivots[b * k + i];
      if (j >= 0 && j < p) {
        const int32_t t = pb[i];
        pb[i] = pb[j];
        pb[j] = t;
      }
    }
  }
}

__device__ inline uint32_t rotl(uint32_t v, int r) {
  return (v << r) | (v >> (32 - r));
}

__global__ void threefry_kernel(ThreefryOperands ops, uint32_t* out0, uint32_t* out1, int64_t n) {
  const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  for (int64_t e = thread_begin(); e < n; e += thread_stride()) {
    uint32_t v[4];
    for (int i = 0; i < 4; ++i) v[i] = ops.in[i][ops.scalar[i] ? 0 : e];
    const uint32_t ks[3] = {v[0], v[1], v[0] ^ v[1] ^ 0x1BD11BDAu};
    uint32_t x0 = v[2] + ks[0], x1 = v[3] + ks[1];
    for (int g = 0; g < 5; ++g) {
      for (int r = 0; r < 4; ++r) {
        x0 += x1;
        x1 = rotl(x1, rot[g % 2][r]) ^ x0;
      }
      x0 += ks[(g + 1) % 3];
      x1 += ks[(g + 2) % 3] + static_cast<uint32_t>(g + 1);
    }
    out0[e] = x0;
    out1[e] = x1;
  }
}

// R: the real component type; C: components per element (1 real, 2 complex).
template <class R, int C>
__global__ void cholesky_mask_kernel(R* a, const int32_t* info, int64_t batch, int64_t n,
                                     bool lower) {
  const int64_t total = batch * n * n;
  for (int64_t e = thread_begin(); e < total; e += thread_stride()) {
    const int64_t b = e / (n * n), i = (e / n) % n, j = e % n;
    R* v = a + e * C;
    if (info[b] != 0) {
      for (int c = 0; c < C; ++c) v[c] = R(NAN);
    } else if (lower ? j > i : j < i) {
      for (int c = 0; c < C; ++c) v[c] = R(0);
    }
  }
}

}  // namespace

void launch_pivots_to_permutation(const int32_t* pivots, int32_t* perm, int64_t batch, int64_t k,
                                  int64_t p, cudaStream_t s) {
  if (batch == 0 || p == 0) return;
  pivots_to_permutation_kernel<<<grid_for(batch), kBlock, 0, s>>>(pivots, perm, batch, k, p);
  CUJAX_CUDA_CHECK_LAUNCH("pivots_to_permutation_kernel");
}

void launch_threefry(const ThreefryOperands& ops, uint32_t* out0, uint32_t* out1, int64_t n,
                     cudaStream_t s) {
  if (n == 0) return;
  threefry_kernel<<<grid_for(n), kBlock, 0, s>>>(ops, out0, out1, n);
  CUJAX_CUDA_CHECK_LAUNCH("threefry_kernel");
}

void launch_cholesky_mask(DType t, void* a, const int32_t* info, int64_t batch, int64_t n,
                          bool lower, cudaStream_t s) {
  const int64_t total = batch * n * n;
  if (total == 0) return;
  const unsigned grid = grid_for(total);
  switch (t) {
    case DType::F32:
      cholesky_mask_kernel<float, 1>
          <<<grid, kBlock, 0, s>>>(static_cast<float*>(a), info, batch, n, lower);
      break;
    case DType::F64:
      cholesky_mask_kernel<double, 1>
          <<<grid, kBlock, 0, s>>>(static_cast<double*>(a), info, batch, n, lower);
      break;
    case DType::C64:
      cholesky_mask_kernel<float, 2>
          <<<grid, kBlock, 0, s>>>(static_cast<float*>(a), info, batch, n, lower);
      break;
    default:  // C128
      cholesky_mask_kernel<double, 2>
          <<<grid, kBlock, 0, s>>>(static_cast<double*>(a), info, batch, n, lower);
      break;
  }
  CUJAX_CUDA_CHECK_LAUNCH("cholesky_mask_kernel");
}

}  // namespace cujax::cuda
