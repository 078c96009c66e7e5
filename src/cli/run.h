// `cujax run FILE --input x.npy ... --output out.npy ... [--print]`: runs an exported artifact
// on .npy inputs and writes its outputs as .npy.
#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

// Exit codes: 0 done, 2 bad input (usage, missing or corrupt file, wrong shape or dtype).
int run_artifact(const std::vector<std::string>& args);

}  // namespace cujax::cli
