// The element-wise kernel behind fft.cpp (defined in fft.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cujax::cuda {

// out[i] = in[i] * scale for n scalars, each float or double (a complex element is two); the
// product is formed in double and rounded once. `in` may be `out`.
void launch_scale_convert(bool from_double, const void* in, bool to_double, void* out, int64_t n,
                          double scale, cudaStream_t s);

}  // namespace cujax::cuda
