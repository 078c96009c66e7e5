// `cujax stablehlo-translate FILE [--deserialize] [--print-stablehlo-version]`: StableHLO
// portable artifacts (MLIR bytecode of VHLO) read as StableHLO's own tool reads them.
#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

// Exit codes: 0 done, 1 FILE cannot be read or converted, 2 usage.
int stablehlo_translate_command(const std::vector<std::string>& args);

}  // namespace cujax::cli
