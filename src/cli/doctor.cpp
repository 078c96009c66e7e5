#include "cli/doctor.h"

#include <cstdio>

#include "backends/cuda/driver/doctor.h"
#include "cujax/core/error.h"
#include "cujax/devices.h"
#include "cujax/runtime/backend.h"

namespace cujax::cli {

int doctor_command() {
  const cuda::Diagnosis d = cuda::diagnose(cuda::system_environment());
  std::fputs(cuda::format_diagnosis(d).c_str(), stdout);
  // CUJAX_PLATFORMS may keep a usable GPU out.
  bool ok = false;
  std::printf("%s\n", default_backend_line(ok).c_str());
  return 0;
}

std::string default_backend_line(bool& ok) {
  std::string chosen;
  try {
    chosen = default_backend();
  } catch (const Error& e) {
    ok = false;
    return std::string("default backend: none (") + e.what() + ")";
  }
  ok = true;
  const std::string why = runtime::unavailable_reason("cuda");
  if (chosen == "cpu" && !why.empty())
    return "default backend: cpu (cuda unavailable: " + why + "; see `cujax doctor`)";
  if (chosen == "cpu") return "default backend: cpu (CUJAX_PLATFORMS puts it before cuda)";
  return "default backend: " + chosen;
}

}  // namespace cujax::cli
