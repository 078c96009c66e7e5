// Checks a module against the StableHLO type and shape rules of each op.
#pragma once

#include "cujax/ir/ir.h"

namespace cujax::ir {

// Throws VerifyError naming the op (with its line and column when parsed), the operand or
// attribute at fault, and the types involved. Undefined callees and wrong return types too.
void verify(const Module& module);

}  // namespace cujax::ir
