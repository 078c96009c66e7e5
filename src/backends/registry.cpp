#include "backends/cpu/cpu_backend.h"
#include "cujax/core/error.h"

namespace cujax::runtime {

const Backend& get_backend(std::string_view platform) {
  static const cpu::CpuBackend cpu_backend;
  if (platform == "cpu") return cpu_backend;
  std::string known;
  for (const auto& p : available_platforms()) known += (known.empty() ? "" : ", ") + p;
  throw Error("unknown platform '" + std::string(platform) + "' (available: " + known + ")");
}

std::vector<std::string> available_platforms() {
  return {"cpu"};
}

}  // namespace cujax::runtime
