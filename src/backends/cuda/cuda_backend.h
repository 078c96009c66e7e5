// The cuda backend: compiles StableHLO into a list of steps run on one device's stream. Ops with
// a CUDA kernel run on the device; the rest run on the host through the CPU backend's kernel,
// with their operands copied down and their results copied back (counted per executable).
// Toolkit-free header: registry.cpp includes it.
#pragma once

#include <memory>

#include "backends/cuda/driver/driver.h"
#include "cujax/runtime/backend.h"

namespace cujax::cuda {

// Throws Error when the CUDA runtime cannot start on the driver's devices.
std::unique_ptr<runtime::Backend> make_cuda_backend(const Driver& driver);

}  // namespace cujax::cuda
