// The fusion groups of a program as device steps: each group's kernel generated, compiled for
// the device's architecture through the kernel cache (several at once), loaded once per process
// (cudaLibraryLoadData, context-independent) and launched on the device's stream.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/codegen/emitter.h"
#include "backends/cuda/program.h"
#include "compiler/fusion.h"

namespace cujax::cuda::codegen {

struct FusedKernels {
  // Per group of the plan; null where `generate` said no.
  std::vector<std::shared_ptr<const FusionKernel>> kernels;
  std::vector<DeviceKernel> launchers;
};

// Generates the kernels of the groups with generate[g] set; with a device, compiles and loads
// them for its architecture. Without one (a null device) only generates: nothing can launch.
FusedKernels build_fused_kernels(const ir::Block& block, const compiler::FusionPlan& plan,
                                 const std::vector<bool>& generate,
                                 const std::shared_ptr<Device>& device);

// Compiles every kernel for `arch` through the process's kernel cache, several at once.
void compile_all(const std::vector<std::shared_ptr<const FusionKernel>>& kernels,
                 const std::string& arch);

// On unless CUJAX_CUDA_FUSION=0, or unless NVRTC cannot be loaded on a machine with a device
// (said once on stderr; the ops then run as they would unfused). Without a device, kernels are
// generated whether NVRTC is there or not.
bool fusion_enabled(const std::shared_ptr<Device>& device);

}  // namespace cujax::cuda::codegen
