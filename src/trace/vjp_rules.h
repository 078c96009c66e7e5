// VJP rules of the StableHLO ops (private): registration and helpers shared by the rule files.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cujax/grad.h"
#include "cujax/lax.h"

namespace cujax::trace::vjp {

using Rules = std::unordered_map<std::string, VjpRule>;
using Cts = std::vector<std::optional<Array>>;

void register_elementwise_rules(Rules& rules);
void register_shape_rules(Rules& rules);
void register_reduction_rules(Rules& rules);
void register_control_rules(Rules& rules);
// real, imag, complex and fft (vjp_rules_complex.cpp).
void register_complex_rules(Rules& rules);
// After register_reduction_rules (it extends the reduce_window rule).
void register_window_rules(Rules& rules);

// A scalar constant of x's dtype broadcast to x's shape.
Array like(const Array& x, double value);
Array zeros(const Shape& shape, DType dtype);
// Sums `g` down to `shape` over the dimensions that broadcast_in_dim(x, g.shape, bdims)
// created or stretched, then reshapes (and transposes) it to `shape`.
Array unbroadcast(const Array& g, const Shape& shape, const std::vector<int64_t>& bdims);
// The name of the single computation in a reduce/scatter/reduce_window body
// ("stablehlo.add"), "select_update" for a body returning its second argument, or "" when the
// body is anything else.
std::string body_kind(const ir::Operation& op);
// The extent of `s` elements with dilation `d` (0 stays 0).
inline int64_t dilate(int64_t s, int64_t d) {
  return s == 0 ? 0 : 1 + d * (s - 1);
}
std::vector<int64_t> ints_or(const ir::Operation& op, const std::string& name,
                             std::vector<int64_t> dflt);
std::vector<int64_t> struct_ints(const ir::Attribute* s, const std::string& field);
int64_t struct_int(const ir::Attribute* s, const std::string& field, int64_t dflt);
// Copies `src` (with its nested regions) into `dst`, mapping values through `map`; cloned ops
// keep their stop_gradient markers and scan records (copy_annotations).
void clone_block(const ir::Block& src, ir::Block& dst,
                 std::unordered_map<const ir::Value*, ir::Value*>& map);
// Gives `copy` (a clone of `op` whose values are mapped through `map`) op's stop_gradient marker
// and scan record, so that a replayed or cloned program is differentiated like the original.
void copy_annotations(const ir::Operation& op, const ir::Operation& copy,
                      const std::unordered_map<const ir::Value*, ir::Value*>& map);

}  // namespace cujax::trace::vjp
