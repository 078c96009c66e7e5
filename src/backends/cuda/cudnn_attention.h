// cuDNN's fused attention (the custom calls of compiler/sdpa_call.h) through cuDNN 9's graph API
// with backend descriptors. libcudnn is loaded with dlopen on first use; graphs and execution
// plans are built once per shape, dtype, mask and layout and cached for the process.
#pragma once

#include <memory>
#include <string>

#include "backends/cuda/program.h"
#include "cujax/ir/ir.h"
#include "runtime/fused_attention.h"

namespace cujax::cuda {

// The loaded cuDNN's version (91900 for 9.19.0), or 0 with `error` saying why it did not load.
long cudnn_version(std::string* error);
// What a device of `compute_capability` offers cuDNN attention with the cuDNN that loads.
runtime::FusedAttentionSupport cudnn_attention_support(int compute_capability);
// The device kernel of a @cujax.cudnn_sdpa or @cujax.cudnn_sdpa_bwd call; `device` null:
// compiling only. Throws UnsupportedError naming the call when its config is malformed.
DeviceKernel cudnn_sdpa_kernel(const ir::Operation& op, const std::shared_ptr<Device>& device);
// How many execution plans the cache holds.
size_t cudnn_plan_count();

}  // namespace cujax::cuda
