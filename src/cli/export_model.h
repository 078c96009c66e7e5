// `cujax export`: a trained model as a portable artifact (see docs/export.md).
#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

int export_command(const std::vector<std::string>& args);

}  // namespace cujax::cli
