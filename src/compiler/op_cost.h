// The cost of one op, as cost_analysis counts it: FLOPs, transcendentals and the bytes of its
// operands and results. Regions and called functions are not included (their ops count
// themselves), so a backend can attach the cost to each step it runs.
#pragma once

#include "cujax/ir/ir.h"

namespace cujax::compiler {

struct OpCost {
  double flops = 0;
  double transcendentals = 0;
  double bytes = 0;
};

OpCost op_cost(const ir::Operation& op);
// The bytes of a value's buffer (0 for tokens).
double value_bytes(const ir::Value& v);

}  // namespace cujax::compiler
