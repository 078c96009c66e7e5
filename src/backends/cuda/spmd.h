// compile_spmd on the cuda backend: one program per local GPU, collectives over NCCL.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "backends/cuda/device.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/spmd.h"

namespace cujax::cuda {

// `devices`: this process's GPUs. Global device id g runs in process g / devices.size() on its
// GPU g % devices.size() (every process has as many GPUs). NCCL communicators for the module's
// process groups are made here, their unique ids sent to the other processes of a group through
// the process group's transport (runtime/process_group.h, set by distributed::initialize).
std::unique_ptr<runtime::SpmdExecutable> compile_cuda_spmd(
    const std::vector<std::shared_ptr<Device>>& devices, const ir::Module& module,
    std::vector<int> device_ids, std::string_view entry);

}  // namespace cujax::cuda
