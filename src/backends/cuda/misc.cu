// Element-wise ops outside elementwise.cu's tables (is_finite, reduce_precision) and the
// matrix products cuBLASLt does not run (integers, booleans): the functors of elementwise.h.
#include "backends/common/elementwise.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/op_launch.h"

namespace cujax::cuda {

namespace {

template <class T>
__global__ void dot_naive_kernel(const T* a, const T* b, T* c, int64_t batch, int64_t m, int64_t n,
                                 int64_t k) {
  using C = ew::compute_t<T, false>;
  const int64_t total = batch * m * n;
  for (int64_t e = thread_begin(); e < total; e += thread_stride()) {
    const int64_t j = e % n, i = (e / n) % m, bb = e / (m * n);
    const T* ar = a + (bb * m + i) * k;
    const T* bc = b + bb * k * n + j;
    C acc = ew::to_compute<C>(T{});
    for (int64_t p = 0; p < k; ++p)
      acc = ew::Add{}(acc, ew::Multiply{}(ew::to_compute<C>(ar[p]), ew::to_compute<C>(bc[p * n])));
    c[e] = ew::from_compute<T>(acc);
  }
}

template <class T>
__global__ void is_finite_kernel(const T* in, bool* out, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) out[i] = ew::IsFinite{}(in[i]);
}

template <class T>
__global__ void reduce_precision_kernel(ew::ReducePrecision f, const T* in, T* out, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) out[i] = f(in[i]);
}

}  // namespace

void launch_dot_naive(DType t, const void* a, const void* b, void* c, int64_t batch, int64_t m,
                      int64_t n, int64_t k, cudaStream_t s) {
  const int64_t total = batch * m * n;
  if (total == 0) return;
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dot_naive_kernel<T><<<grid_for(total), kBlock, 0, s>>>(
        static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(c), batch, m, n, k);
  });
  CUJAX_CUDA_CHECK_LAUNCH("dot_naive_kernel");
}

void launch_is_finite(DType t, const void* in, bool* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (ew::is_float_v<T>) {
      is_finite_kernel<T><<<grid_for(n), kBlock, 0, s>>>(static_cast<const T*>(in), out, n);
      CUJAX_CUDA_CHECK_LAUNCH("is_finite_kernel");
    } else {
      throw UnsupportedError("is_finite takes floating-point operands");
    }
  });
}

void launch_reduce_precision(DType t, int exponent_bits, int mantissa_bits, const void* in,
                             void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (ew::is_float_v<T>) {
      ew::ReducePrecision f;
      f.exponent_bits = exponent_bits;
      f.mantissa_bits = mantissa_bits;
      reduce_precision_kernel<T>
          <<<grid_for(n), kBlock, 0, s>>>(f, static_cast<const T*>(in), static_cast<T*>(out), n);
      CUJAX_CUDA_CHECK_LAUNCH("reduce_precision_kernel");
    } else {
      throw UnsupportedError("reduce_precision takes floating-point operands");
    }
  });
}

}  // namespace cujax::cuda
