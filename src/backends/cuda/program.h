// The cuda backend's compiled programs, for code that keeps arrays on the device (the
// benchmarks); runtime::Executable wraps them with host transfers.
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/device.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax::cuda {

struct Program;

// Throws UnsupportedError naming the first op that neither the cuda nor the cpu kernels cover.
// Compiling touches no CUDA API: with a null `device` the program cannot run, but host_steps()
// says which ops have kernels (tests check that on machines without a GPU).
std::shared_ptr<const Program> compile_program(const ir::Module& module, const ir::Function& fn,
                                               const std::shared_ptr<Device>& device);
// Enqueues the program on the device's stream; results are ready when the stream is.
std::vector<DeviceArray> run_program(const Program& program, Device& device,
                                     std::vector<DeviceArray> args,
                                     const runtime::ExecuteOptions& options = {});
// How many of the program's ops run on the host (no CUDA kernel for their types/attributes).
int host_steps(const Program& program);

}  // namespace cujax::cuda
