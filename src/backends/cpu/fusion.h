// Element-wise fusion in the CPU backend. A run of consecutive element-wise ops on f32 or i1
// tensors of one shape becomes one step that computes them tile by tile: each op's tile stays
// in L1 for the next op instead of costing a pass over memory. A broadcast_in_dim of a smaller
// operand (a scalar, a bias, a per-row statistic) is read through an index map instead of being
// materialized. A reduce over trailing dimensions joins the run with the element-wise ops on its
// per-row results and their broadcasts back along the rows (softmax, layer norm,
// cross-entropy), and the step then runs over tiles of whole rows. Every element is computed by
// the same functor as the per-op kernel, and every row folded in the same order as the reduce
// kernel, so the results are bit-identical. CUJAX_CPU_FUSION=0 switches it off.
#pragma once

#include <string>
#include <vector>

#include "backends/cpu/kernels.h"

namespace cujax::cpu {

struct FusedStep {
  std::vector<const ir::Value*> inputs;   // full-size operands, then broadcast sources
  std::vector<const ir::Value*> outputs;  // the group's values that are used after it
  Kernel kernel;
  std::string where;
  std::vector<const ir::Operation*> ops;  // the fused ops, for the step's cost in traces
};

struct FusionPlan {
  std::vector<int> step_at;    // per op: the fused step emitted in its place, or -1
  std::vector<bool> absorbed;  // per op: computed by a fused step, so no step of its own
  std::vector<FusedStep> steps;
};

// Plans the fusion of the first `num_ops` ops of `block` (its terminator excluded).
FusionPlan plan_fusion(const ir::Block& block, size_t num_ops);

// On unless CUJAX_CPU_FUSION=0; tests switch it to compare both paths.
bool fusion_enabled();
void set_fusion_enabled(bool on);

}  // namespace cujax::cpu
