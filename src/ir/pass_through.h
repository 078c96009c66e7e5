// Ops that pass their operands' values along without computing on them.
#pragma once

#include <string>

#include "cujax/ir/ir.h"

namespace cujax::ir {

// Control flow (while, if, case, optimization_barrier), custom calls, region returns, and every
// op outside the stablehlo and chlo dialects (func.call, func.return, the interpreter's ops):
// what they carry, they do not read as numbers.
inline bool passes_values_along(const Operation& op) {
  const std::string& n = op.name;
  if (!n.starts_with("stablehlo.") && !n.starts_with("chlo.")) return true;
  return n == "stablehlo.while" || n == "stablehlo.if" || n == "stablehlo.case" ||
         n == "stablehlo.optimization_barrier" || n == "stablehlo.custom_call" ||
         n == "stablehlo.return";
}

}  // namespace cujax::ir
