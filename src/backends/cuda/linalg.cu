// convolution and triangular_solve as plain kernels (see op_launch.h): every form the CPU
// backend runs, with sums in double so that the single rounding lands within the conformance
// checks whatever order the CPU's BLAS used.
#include "backends/common/elementwise.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/op_launch.h"

namespace cujax::cuda {

namespace {

template <class T>
__global__ void convolution_kernel(ConvGeometry g, const T* lhs, const T* rhs, T* out, int64_t n) {
  int64_t idx[index::kMaxRank], k[index::kMaxRank];
  for (int64_t e = thread_begin(); e < n; e += thread_stride()) {
    index::unravel(e, g.out_dims, g.out_rank, idx);
    const int64_t b = idx[g.out_batch_dim], o = idx[g.out_feature_dim];
    const int64_t group = o / g.Og;
    const int64_t in_batch = (g.batch_groups > 1 ? group * g.Nout : 0) + b;
    const int64_t feature0 = (g.feature_groups > 1 ? group : 0) * g.Cg;
    int64_t taps = 1;
    for (int d = 0; d < g.nsp; ++d) taps *= g.k_spatial[d];
    double acc = 0;
    for (int64_t t = 0; t < taps; ++t) {
      index::unravel(t, g.k_spatial, g.nsp, k);
      int64_t in_off = in_batch * g.in_batch_stride, k_off = o * g.k_out_stride;
      bool valid = true;
      for (int d = 0; d < g.nsp && valid; ++d) {
        const int64_t q =
            idx[g.out_spatial_dim[d]] * g.stride[d] + k[d] * g.rhs_dilation[d] - g.pad_low[d];
        valid = q >= 0 && q % g.lhs_dilation[d] == 0 && q / g.lhs_dilation[d] < g.in_spatial[d];
        in_off += (q / g.lhs_dilation[d]) * g.in_spatial_stride[d];
        const int64_t kd = g.reverse[d] ? g.k_spatial[d] - 1 - k[d] : k[d];
        k_off += kd * g.k_spatial_stride[d];
      }
      if (!valid) continue;
      for (int64_t c = 0; c < g.Cg; ++c)
        acc += ew::to_compute<double>(lhs[in_off + (feature0 + c) * g.in_feature_stride]) *
               ew::to_compute<double>(rhs[k_off + c * g.k_in_stride]);
    }
    out[e] = ew::convert<T, double>(acc);
  }
}

template <class T>
__global__ void triangular_solve_kernel(TriangularSolve p, const T* a, T* x) {
  // The system solved per right-hand side: M y = r with M = op(a) on the left and op(a)^T on
  // the right, so M reads a transposed when exactly one of the two applies.
  const bool flip = p.transpose != !p.left;
  const bool m_lower = p.lower != flip;
  const int64_t systems = p.batch * (p.left ? p.cols : p.rows);
  for (int64_t s = thread_begin(); s < systems; s += thread_stride()) {
    const int64_t per = p.left ? p.cols : p.rows;
    const int64_t bi = s / per, j = s % per;
    const T* A = a + bi * p.m * p.m;
    T* X = x + bi * p.rows * p.cols;
    // element i of this right-hand side
    auto at = [&](int64_t i) -> T& { return p.left ? X[i * p.cols + j] : X[j * p.cols + i]; };
    auto m = [&](int64_t r, int64_t c) {
      return ew::to_compute<double>(flip ? A[c * p.m + r] : A[r * p.m + c]);
    };
    for (int64_t step = 0; step < p.m; ++step) {
      const int64_t r = m_lower ? step : p.m - 1 - step;
      double v = ew::to_compute<double>(at(r));
      if (m_lower)
        for (int64_t c = 0; c < r; ++c) v -= m(r, c) * ew::to_compute<double>(at(c));
      else
        for (int64_t c = r + 1; c < p.m; ++c) v -= m(r, c) * ew::to_compute<double>(at(c));
      if (!p.unit) v /= m(r, r);
      at(r) = ew::convert<T, double>(v);
    }
  }
}

}  // namespace

void launch_convolution(DType t, const ConvGeometry& g, const void* lhs, const void* rhs, void* out,
                        int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (ew::is_float_v<T>) {
      convolution_kernel<T><<<grid_for(n), kBlock, 0, s>>>(
          g, static_cast<const T*>(lhs), static_cast<const T*>(rhs), static_cast<T*>(out), n);
      CUJAX_CUDA_CHECK_LAUNCH("convolution_kernel");
    } else {
      throw UnsupportedError("cuda convolution: floating-point operands only");
    }
  });
}

void launch_triangular_solve(DType t, const TriangularSolve& p, const void* a, const void* b,
                             void* x, cudaStream_t s) {
  const int64_t n = p.batch * p.rows * p.cols;
  if (n == 0) return;
  CUJAX_CUDA_CHECK(
      cudaMemcpyAsync(x, b, static_cast<size_t>(n) * size_of(t), cudaMemcpyDeviceToDevice, s));
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (ew::is_float_v<T>) {
      const int64_t systems = p.batch * (p.left ? p.cols : p.rows);
      triangular_solve_kernel<T>
          <<<grid_for(systems), kBlock, 0, s>>>(p, static_cast<const T*>(a), static_cast<T*>(x));
      CUJAX_CUDA_CHECK_LAUNCH("triangular_solve_kernel");
    } else {
      throw UnsupportedError("cuda triangular_solve: floating-point operands only");
    }
  });
}

}  // namespace cujax::cuda
