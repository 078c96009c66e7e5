// Memory profiles of compiled programs: each compiled program registers its profile, which
// lives as long as the program; device_memory_profile lists those still alive.
#include <algorithm>
#include <memory>
#include <mutex>

#include "profiler/hooks.h"

namespace cujax::profiler {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::weak_ptr<const MemoryProfile>> profiles;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

json::Value MemoryProfile::to_json() const {
  json::Value live = json::Value(json::Value::Array{});
  for (const LiveBuffer& b : live_at_peak) {
    json::Value e =
        json::Value::object({{"bytes", b.bytes}, {"type", b.type}, {"kind", b.kind}, {"op", b.op}});
    if (!b.source.empty()) e.set("source", b.source);
    live.push_back(std::move(e));
  }
  return json::Value::object({{"program", program},
                              {"platform", platform},
                              {"peak_bytes", peak_bytes},
                              {"argument_bytes", argument_bytes},
                              {"output_bytes", output_bytes},
                              {"alias_bytes", alias_bytes},
                              {"temp_bytes", temp_bytes},
                              {"peak_op", peak_op},
                              {"live_at_peak", std::move(live)}});
}

std::string device_memory_profile() {
  json::Value programs = json::Value(json::Value::Array{});
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& weak : r.profiles)
      if (auto p = weak.lock()) programs.push_back(p->to_json());
  }
  return json::dump(json::Value::object(
             {{"format", "cujax.device_memory_profile.v1"}, {"programs", std::move(programs)}})) +
         "\n";
}

namespace detail {

void memory_profile(std::shared_ptr<const MemoryProfile> profile) {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    std::erase_if(r.profiles, [](const auto& w) { return w.expired(); });
    r.profiles.push_back(profile);
  }
  if (active()) instant("memory", "memory " + profile->program, profile->to_json());
}

}  // namespace detail

}  // namespace cujax::profiler
