#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

// `cujax compile FILE.mlir --platform cuda [--arch sm_80|sm_90] [--no-host-fallback]`: compiles
// a module without running it (no GPU needed) and prints its steps, its buffers' peak size and
// every op that would run on the host. Exit 1 under --no-host-fallback when there is one.
int compile_command(const std::vector<std::string>& args);

}  // namespace cujax::cli
