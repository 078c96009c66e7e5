// Fusion planning on StableHLO, decided once for every backend that emits fused kernels.
//
// A fusion group is a set of ops of one block computed by one kernel: element-wise ops,
// converts, broadcast_in_dim, reshape, splat constants and iota around reductions of one shape
// (the group's "heroes", as XLA calls them; several only when they read a common value and
// neither depends on the other, as layer norm's sums of x and x^2). Values inside a group never
// reach memory, except the group's outputs: the values that ops outside it (or the block's return)
// read.
//
//   loop fusion            one thread per element of the outputs, which all have the group's
//                          element count; smaller members (behind a broadcast) are recomputed
//                          per element.
//   row reduction          the hero reduces the innermost dimensions ([M, K] -> [M]: softmax,
//                          layer norm, cross-entropy); producers of its operand are computed
//                          while reading it, element-wise consumers of its result (the
//                          "epilogue") when writing it.
//   column reduction       the hero reduces a middle or leading dimension ([O, R, I] -> [O, I]:
//                          bias gradients), with producers and epilogue as above.
//
// Grouping runs from the last op to the first, as XLA's instruction fusion does: an op joins the
// group of its users when all of them are in that group, or, as an extra output, when it has the
// group's element count and joining cannot make the groups depend on each other in a cycle.
// Splat constants and iota have no operands, so they are copied into every group that reads
// them. Reductions of the same fold that read a common value then merge into one group when
// neither needs the other's result before its epilogue. The plan's schedule orders groups and
// the remaining ops so that every value exists before use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cujax/ir/ir.h"

namespace cujax::compiler {

enum class FusionKind { Loop, RowReduction, ColumnReduction };
const char* fusion_kind_name(FusionKind kind);  // "loop", "row reduction", "column reduction"

// How a reduction's operand folds: the input as [outer, reduced, inner] after size-1 dimensions
// are dropped and neighbours of the same kind merged. Row: inner == 1. Column: inner > 1.
struct ReductionShape {
  int64_t outer = 1, reduced = 1, inner = 1;
  bool operator==(const ReductionShape&) const = default;
};

struct FusionGroup {
  FusionKind kind = FusionKind::Loop;
  std::vector<size_t> ops;                // members in program order (constants/iota included)
  std::vector<const ir::Value*> inputs;   // read from outside, in first-use order
  std::vector<const ir::Value*> outputs;  // used after the group, in program order
  std::vector<size_t> heroes;             // reductions: the reduce ops (several when siblings)
  ReductionShape reduction;               // for reductions
  int64_t elements = 0;                   // loop: the outputs' element count; reductions: the
                                          // hero operand's
};

struct FusionPlan {
  // One step each: a group (group >= 0) or an op of the block run on its own.
  struct Item {
    int group = -1;
    size_t op = 0;
  };
  std::vector<FusionGroup> groups;
  std::vector<Item> schedule;
  // Per op: the group that computes it (-1 for none). A constant or iota copied into several
  // groups names the last; `standalone` says whether it also runs on its own.
  std::vector<int> group_of;
  std::vector<bool> standalone;
};

// Plans the first `num_ops` ops of `block` (its terminator excluded).
FusionPlan plan_fusion(const ir::Block& block, size_t num_ops);
// Every op of the first `num_ops` on its own, in program order (fusion switched off).
FusionPlan unfused_plan(size_t num_ops);

// Why `op` cannot be a member of any fusion group, or "" when it can (whether it joins one
// depends on its neighbours).
std::string why_not_fusible(const ir::Operation& op);

// The fold of a reduce op that a fusion can compute (row or column), or why not in `why`.
bool reduction_shape(const ir::Operation& reduce, ReductionShape* out, std::string* why);

// "stablehlo.add" for a reduce whose body is `return add(a, b)` (either operand order for the
// commutative ops), else "".
std::string reduction_body(const ir::Operation& reduce);

}  // namespace cujax::compiler
