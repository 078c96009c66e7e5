// Reads StableHLO text: the pretty syntax JAX prints and MLIR's generic op form.
#pragma once

#include <memory>
#include <string_view>

#include "cujax/ir/ir.h"

namespace cujax::ir {

// Parses one `module ... { func.func ... }` (or bare functions, which form an anonymous
// module). Throws ParseError with the 1-based line and column of the first problem.
std::unique_ptr<Module> parse_module(std::string_view text);

}  // namespace cujax::ir
