#include "runtime/fused_attention.h"

#include <map>
#include <mutex>

namespace cujax::runtime {

namespace {

std::mutex& probes_mutex() {
  static std::mutex m;
  return m;
}

std::map<std::string, FusedAttentionProbe, std::less<>>& probes() {
  static std::map<std::string, FusedAttentionProbe, std::less<>> p;
  return p;
}

}  // namespace

void register_fused_attention_probe(std::string platform, FusedAttentionProbe probe) {
  std::lock_guard<std::mutex> lock(probes_mutex());
  probes()[std::move(platform)] = std::move(probe);
}

FusedAttentionSupport fused_attention_support(std::string_view platform, int device) {
  FusedAttentionProbe probe;
  {
    std::lock_guard<std::mutex> lock(probes_mutex());
    auto it = probes().find(platform);
    if (it == probes().end()) return {};
    probe = it->second;
  }
  return probe(device);
}

}  // namespace cujax::runtime
