// What a platform's devices offer cuDNN's fused attention, for nn::dot_product_attention's
// requirement checks. A backend that runs it with cuDNN registers a probe; platforms without one
// run the custom calls' reference kernels and have no device requirement.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace cujax::runtime {

struct FusedAttentionSupport {
  bool reference = true;       // the reference kernels: no device requirement
  int compute_capability = 0;  // 90 for 9.0
  long cudnn_version = 0;      // 91900 for 9.19.0; 0 when cuDNN did not load
  std::string cudnn_error;     // why cuDNN did not load
};

using FusedAttentionProbe = std::function<FusedAttentionSupport(int device)>;
void register_fused_attention_probe(std::string platform, FusedAttentionProbe probe);
FusedAttentionSupport fused_attention_support(std::string_view platform, int device);

}  // namespace cujax::runtime
