#include "cujax/linalg_platform.h"

#include <vector>

#include "cujax/core/error.h"
#include "cujax/devices.h"

namespace cujax::lax::linalg {

namespace {
thread_local std::vector<std::string> scopes;
}  // namespace

std::string lowering_platform() {
  return scopes.empty() ? default_backend() : scopes.back();
}

LoweringPlatform::LoweringPlatform(const std::string& platform) {
  if (platform != "cpu" && platform != "cuda")
    throw Error("lax.linalg: lowering platform '" + platform + "' is not one of cpu, cuda");
  scopes.push_back(platform);
}

LoweringPlatform::~LoweringPlatform() {
  scopes.pop_back();
}

}  // namespace cujax::lax::linalg
