// The cuda backend's compiled programs, for code that keeps arrays on the device (the
// benchmarks, SPMD executables); runtime::Executable wraps them with device buffers.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
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

// Throws UnsupportedError naming the first op that neither the cuda nor the cpu kernels cover,
// and, under HostFallback::Error, the first op that would run on the host. Compiling touches
// no CUDA API when `device` is null: the program cannot run, but host_fallbacks() and
// describe() say where each op runs (tests and `cujax compile` check that without a GPU).
std::shared_ptr<const Program> compile_program(const ir::Module& module, const ir::Function& fn,
                                               const std::shared_ptr<Device>& device,
                                               const SpmdContext* spmd = nullptr,
                                               const runtime::CompileOptions& options = {});
// The program of a region's block (a while body, a case branch, a function body): its
// arguments are the block's, then `captures` (values of enclosing blocks it reads).
std::shared_ptr<const Program> compile_block(const ir::Module& module, const ir::Block& block,
                                             std::span<const ir::Value* const> captures,
                                             const std::shared_ptr<Device>& device,
                                             const runtime::CompileOptions& options);
// Enqueues the program on the device's stream; results are ready when the stream is.
std::vector<DeviceArray> run_program(const Program& program, Device& device,
                                     std::vector<DeviceArray> args,
                                     const runtime::ExecuteOptions& options = {});
// Kernels trust their operands' types: what comes from outside is checked once. Throws
// RuntimeError naming the argument when its type or device is not the program's.
void check_arguments(const Program& program, std::span<const runtime::DeviceBuffer> args,
                     int device);
// A runtime buffer on this backend as the kernels see it, and back (no copies).
DeviceArray as_device_array(runtime::DeviceBuffer buffer);
runtime::DeviceBuffer as_buffer(DeviceArray array, int device,
                                std::shared_ptr<const runtime::DeviceEvent> ready);
// An event recorded now on the device's stream: what it has enqueued is ready when it is.
std::shared_ptr<const runtime::DeviceEvent> stream_event(Device& device);
// How many of the program's ops run on the host (no CUDA kernel for their types/attributes),
// nested programs (loop bodies, branches, callees) included; check.* assertions not counted.
int host_steps(const Program& program);
// The kernels generated for the program's fusions (codegen/emitter.h), in step order; compiled
// for the device when there is one (codegen::compile_all compiles them for any architecture).
const std::vector<std::shared_ptr<const codegen::FusionKernel>>& fusion_kernels(
    const Program& program);

// An op that runs on the host: its name and location ("stablehlo.foo at 3:5").
struct HostFallbackOp {
  std::string op;
  std::string where;
};
std::vector<HostFallbackOp> host_fallbacks(const Program& program);

// One line per step, nested programs indented under their op: where it runs ("device", "host"
// for a fallback, "check" for a check.* assertion, which reads its operands on the host by
// design), the op and its location.
std::vector<std::string> describe(const Program& program);
// The most bytes the program's buffers hold at once, arguments included, from the steps'
// result sizes and the points where each value dies (nested programs' own buffers not counted;
// views such as reshape counted as new buffers).
int64_t peak_buffer_bytes(const Program& program);

}  // namespace cujax::cuda
