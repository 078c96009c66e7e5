// Batching rules of the StableHLO ops (private): registration and helpers shared by the rule
// files.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cujax/lax.h"
#include "cujax/vmap.h"

namespace cujax::trace::batching {

using Rules = std::unordered_map<std::string, BatchRule>;

void register_elementwise_rules(Rules& rules);
void register_shape_rules(Rules& rules);
void register_reduction_rules(Rules& rules);
void register_window_rules(Rules& rules);
void register_control_rules(Rules& rules);

using Lookup = std::function<Batched(ir::Value*)>;

// Moves dimension `from` of x to position `to` (a transpose; x itself when from == to).
Array move_axis(const Array& x, int64_t from, int64_t to);
// x with its batch dimension at `to`; an unbatched x is broadcast to `size` there.
Array batch_at(const Array& x, Bdim bdim, int64_t size, int64_t to = 0);
// Dimension d of an unbatched value, counted in the batched value with its batch dimension at b.
inline int64_t skip(int64_t d, int64_t b) {
  return d < b ? d : d + 1;
}
std::vector<int64_t> skip_all(const std::vector<int64_t>& dims, int64_t b);
// `shape` with `size` inserted at position `at`.
Shape insert_dim(Shape shape, int64_t at, int64_t size);
// Results of the op at its operands' batch dimension 0 (all results batched there).
std::vector<Batched> at_front(const std::vector<Array>& results);

// Records an op like `op` (its name, attributes with `overrides` replacing same-named ones, its
// regions copied) on new operands and result types.
std::vector<Array> rebind(const ir::Operation& op, const std::vector<Array>& operands,
                          const std::vector<ir::Type>& result_types,
                          const std::vector<ir::NamedAttribute>& overrides = {});
// The op's result types with `size` inserted at position `at`.
std::vector<ir::Type> batched_types(const ir::Operation& op, int64_t size, int64_t at = 0);
// The computation of the op's first region (a reduce body, a scatter combiner), replayed on
// new arguments: for lax::reduce, lax::reduce_window and lax::scatter_apply.
lax::Computation region_computation(const ir::Operation& op);

// Batches the ops of a region's block into the block being traced (a new region, or the current
// block to inline it): `args` stand for the block's arguments, values from outside come from
// `outer` (BatchArgs::lookup). Every op is recorded again, unbatched ones as they are. Returns
// the batched stablehlo.return operands.
std::vector<Batched> batch_block(const ir::Block& block, const std::vector<Batched>& args,
                                 const Lookup& outer, int64_t size);
// The batched form of `outputs`, values of `block`, given those of `seeds` (values of the block
// whose producing ops are then not recorded again); ops that need a value of the block neither
// seeded nor computed from the seeds are skipped. For a scan's f inside its loop body.
std::vector<Batched> batch_values(const ir::Block& block,
                                  const std::unordered_map<const ir::Value*, Batched>& seeds,
                                  const std::vector<const ir::Value*>& outputs, const Lookup& outer,
                                  int64_t size);
// Which of the block's stablehlo.return operands depend on a batched value, given which block
// arguments are batched (`outer` for the rest). Conservative, as every rule batches a result
// when an operand is batched: the values a loop carries must not be found batched later.
std::vector<bool> batched_results(const ir::Block& block, const std::vector<bool>& args,
                                  const Lookup& outer);

// "vmap: no batching rule for <op> with <what>".
[[noreturn]] void unsupported(const ir::Operation& op, const std::string& what);

}  // namespace cujax::trace::batching
