// Whether values of an op, a region or a module have a type of some kind (narrow, quantized,
// complex, ...): the question passes and backends ask before deciding to rewrite or dispatch.
#pragma once

#include "cujax/ir/ir.h"

namespace cujax::ir {

// Whether an operand or result of `op` has a type for which `pred` holds.
template <class Pred>
bool op_has_type(const Operation& op, Pred pred) {
  for (const Value* v : op.operands)
    if (pred(v->type)) return true;
  for (const auto& r : op.results)
    if (pred(r->type)) return true;
  return false;
}

// Whether a block argument, operand or result in `region` (nested regions included) has one.
template <class Pred>
bool region_has_type(const Region& region, Pred pred) {
  for (const auto& block : region.blocks) {
    for (const auto& a : block->arguments)
      if (pred(a->type)) return true;
    for (const auto& o : block->ops) {
      if (op_has_type(*o, pred)) return true;
      for (const auto& nested : o->regions)
        if (region_has_type(*nested, pred)) return true;
    }
  }
  return false;
}

// Whether any function of `module` has one (its results are those of its returns).
template <class Pred>
bool module_has_type(const Module& module, Pred pred) {
  for (const auto& f : module.functions)
    if (region_has_type(f->body, pred)) return true;
  return false;
}

}  // namespace cujax::ir
