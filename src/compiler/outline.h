// Fusion groups as functions of their own, so that a plan can be checked on any backend: the
// outlined program computes exactly what the original does, one call per group.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "compiler/fusion.h"
#include "cujax/ir/ir.h"

namespace cujax::compiler {

using ValueMap = std::unordered_map<const ir::Value*, ir::Value*>;

// Appends a copy of `op` (regions included) to `into`, its operands read through `map`, and
// maps its results to the copy's.
ir::Operation& clone_op(const ir::Operation& op, ValueMap& map, ir::Block& into);

// A function `name` of `module` taking the group's inputs and returning its outputs.
ir::Function& outline_group(ir::Module& module, const std::string& name, const ir::Block& block,
                            const FusionGroup& group);

// A module with the other functions of `module` copied and `fn` rewritten as the plan runs it:
// each group called as a private function @fusion_<n>, the other ops copied, in schedule order.
std::unique_ptr<ir::Module> outline_plan(const ir::Module& module, const ir::Function& fn,
                                         const FusionPlan& plan);

}  // namespace cujax::compiler
