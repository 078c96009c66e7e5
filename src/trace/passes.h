// IR passes that jit runs on a traced module before handing it to a backend.
#pragma once

#include <cstdint>

#include "cujax/ir/ir.h"

namespace cujax::trace {

struct PassStatistics {
  int64_t removed_dead = 0;      // ops whose results nobody used
  int64_t merged_common = 0;     // ops identical to an earlier one
  int64_t folded_constants = 0;  // ops on constants evaluated at compile time
};

// Dead-code elimination: drops side-effect-free ops whose results are unused.
int64_t eliminate_dead_code(ir::Module& module);
// Common-subexpression elimination: an op with the same name, operands, attributes and result
// types as an earlier op in the same block (and no regions or side effects) is replaced by it.
int64_t eliminate_common_subexpressions(ir::Module& module);
// Evaluates ops whose operands are all constants and whose results have at most
// `max_elements` elements, replacing them with constants.
int64_t fold_constants(ir::Module& module, int64_t max_elements = 64);

// Folding, then CSE, then DCE.
PassStatistics optimize(ir::Module& module);

}  // namespace cujax::trace
