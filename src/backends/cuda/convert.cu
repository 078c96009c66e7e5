// stablehlo.convert between all 13 element types (169 kernels, in a file of their own so that
// they compile in parallel with the math kernels).
#include "backends/common/elementwise.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace cujax::cuda {

namespace {

template <class To, class From>
__global__ void convert_kernel(const From* in, To* out, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride())
    out[i] = ew::convert<To, From>(in[i]);
}

}  // namespace

void launch_convert(DType from, DType to, const void* in, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(from, [&](auto ftag) {
    visit_dtype(to, [&](auto ttag) {
      using From = typename decltype(ftag)::type;
      using To = typename decltype(ttag)::type;
      convert_kernel<To, From>
          <<<grid_for(n), kBlock, 0, s>>>(static_cast<const From*>(in), static_cast<To*>(out), n);
      CUJAX_CUDA_CHECK_LAUNCH("convert_kernel");
    });
  });
}

}  // namespace cujax::cuda
