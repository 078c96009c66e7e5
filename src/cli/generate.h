// `cujax generate`: samples text from a model trained by `cujax train`.
#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

int generate_command(const std::vector<std::string>& args);

}  // namespace cujax::cli
