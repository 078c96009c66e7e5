#include <cstdlib>
#include <string>

#include "cujax/core/error.h"
#include "cujax/runtime/backend.h"

namespace cujax::runtime {

HostFallback host_fallback_from_env() {
  const char* v = std::getenv("CUJAX_HOST_FALLBACK");
  if (!v || !*v) return HostFallback::Log;
  const std::string s = v;
  if (s == "log") return HostFallback::Log;
  if (s == "error") return HostFallback::Error;
  if (s == "allow") return HostFallback::Allow;
  throw Error("CUJAX_HOST_FALLBACK='" + s + "' is not one of log, error, allow");
}

}  // namespace cujax::runtime
