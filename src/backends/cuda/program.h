// The cuda backend's compiled programs, for code that keeps arrays on the device (the
// benchmarks, SPMD executables); runtime::Executable wraps them with host transfers.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backends/cuda/device.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax::cpu {
class Compiler;
}

namespace cujax::cuda {

namespace codegen {
struct FusionKernel;
}

struct Program;

using DeviceKernel = std::function<std::vector<DeviceArray>(std::span<const DeviceArray>)>;

// What a program compiled for one device of an SPMD run (spmd.cpp) needs: the process grid its
// collectives address, and the kernels of the ops whose results depend on the device
// (collectives over NCCL, partition_id, replica_id).
struct SpmdContext {
  int num_replicas = 1;
  int num_partitions = 1;
  // A device kernel for such an op, or an empty function for any other op. Throws
  // UnsupportedError for one it cannot run.
  std::function<DeviceKernel(const ir::Operation&, cpu::Compiler&)> device_kernel;
};

// Throws UnsupportedError naming the first op that neither the cuda nor the cpu kernels cover.
// Compiling touches no CUDA API: with a null `device` the program cannot run, but host_steps()
// says which ops have kernels (tests check that on machines without a GPU).
std::shared_ptr<const Program> compile_program(const ir::Module& module, const ir::Function& fn,
                                               const std::shared_ptr<Device>& device,
                                               const SpmdContext* spmd = nullptr);
// Enqueues the program on the device's stream; results are ready when the stream is.
std::vector<DeviceArray> run_program(const Program& program, Device& device,
                                     std::vector<DeviceArray> args,
                                     const runtime::ExecuteOptions& options = {});
// Kernels trust their operands' types: what comes from outside is checked once. Throws
// RuntimeError naming the argument.
void check_arguments(const Program& program, std::span<const HostTensor> args);
// How many of the program's ops run on the host (no CUDA kernel for their types/attributes).
int host_steps(const Program& program);
// The kernels generated for the program's fusions (codegen/emitter.h), in step order; compiled
// for the device when there is one (codegen::compile_all compiles them for any architecture).
const std::vector<std::shared_ptr<const codegen::FusionKernel>>& fusion_kernels(
    const Program& program);

}  // namespace cujax::cuda
