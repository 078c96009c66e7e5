// Status checks for CUDA runtime calls: every failure becomes a CudaError naming the call, the
// error and the source location.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "backends/cuda/driver/driver.h"

namespace cujax::cuda {

[[noreturn]] void throw_cuda_error(const std::string& call, const std::string& error,
                                   const char* file, int line);

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw_cuda_error(call, std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")",
                     file, line);
}

}  // namespace cujax::cuda

#define CUJAX_CUDA_CHECK(call) ::cujax::cuda::check_cuda((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch errors (no kernel image for this device, bad configuration).
#define CUJAX_CUDA_CHECK_LAUNCH(what) \
  ::cujax::cuda::check_cuda(cudaGetLastError(), what, __FILE__, __LINE__)
