// stablehlo.fft on the device through cuFFT (loaded with dlopen on first use, as cuBLASLt is).
#pragma once

#include "backends/cuda/program.h"
#include "cujax/ir/ir.h"

namespace cujax::cuda {

// A kernel for `op` (FFT, IFFT, RFFT or IRFFT on 1 to 3 trailing axes of complex64/complex128
// or float32/float64 values), or an empty function where the host path must take it (a zero
// length). The transform runs in double precision and rounds once, as the CPU backend's does,
// so both backends agree to the last bits on the conformance checks; IFFT and IRFFT divide by
// the product of the lengths, as the spec says and cuFFT does not.
DeviceKernel fft_kernel(const ir::Operation& op, Device* device);

}  // namespace cujax::cuda
