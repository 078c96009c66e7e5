// Precision and scaling around cuFFT's double-precision transforms (fft.cpp): out = in * scale,
// between float and double scalars (a complex value is two of them).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/fft_launch.h"
#include "backends/cuda/launch.cuh"

namespace cujax::cuda {

namespace {

template <class To, class From>
__global__ void scale_convert_kernel(const From* in, To* out, int64_t n, double scale) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride())
    out[i] = static_cast<To>(static_cast<double>(in[i]) * scale);
}

template <class To, class From>
void launch(const void* in, void* out, int64_t n, double scale, cudaStream_t s) {
  scale_convert_kernel<To, From><<<grid_for(n), kBlock, 0, s>>>(static_cast<const From*>(in),
                                                                static_cast<To*>(out), n, scale);
  CUJAX_CUDA_CHECK_LAUNCH("scale_convert_kernel");
}

}  // namespace

void launch_scale_convert(bool from_double, const void* in, bool to_double, void* out, int64_t n,
                          double scale, cudaStream_t s) {
  if (n == 0) return;
  if (from_double && to_double) return launch<double, double>(in, out, n, scale, s);
  if (from_double) return launch<float, double>(in, out, n, scale, s);
  if (to_double) return launch<double, float>(in, out, n, scale, s);
  launch<float, float>(in, out, n, scale, s);
}

}  // namespace cujax::cuda
