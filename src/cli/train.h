// `cujax train`: trains a TransformerLM preset on a text corpus (see docs/training.md).
#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

int train_command(const std::vector<std::string>& args);

}  // namespace cujax::cli
