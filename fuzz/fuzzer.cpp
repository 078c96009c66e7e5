// libFuzzer entry for the target named by CUJAX_FUZZ_TARGET (fuzz/CMakeLists.txt builds one
// binary per target). With CUJAX_FUZZ_WRITE_SEEDS=<dir> in the environment it writes the
// target's seed corpus there and exits.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "targets.h"

namespace {
const cujax::fuzz::Target& self() {
  static const cujax::fuzz::Target& t = cujax::fuzz::target(CUJAX_FUZZ_TARGET);
  return t;
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("CUJAX_FUZZ_WRITE_SEEDS")) {
    self().seeds(dir);
    std::printf("wrote the %s seeds to %s\n", self().name, dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cujax::fuzz::run_one(self(), std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
