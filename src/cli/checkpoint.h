// `cujax checkpoint show PATH [--values]`: every leaf of a checkpoint in any format cujax reads.
#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

int checkpoint_command(const std::vector<std::string>& args);

}  // namespace cujax::cli
