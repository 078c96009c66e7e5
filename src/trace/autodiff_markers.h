// The autodiff markers of the active trace (private), for transformations that re-emit ops.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "cujax/grad.h"
#include "cujax/ir/ir.h"
#include "trace/replay.h"

namespace cujax::trace {

// Whether `op` is a stop_gradient marker / a custom_vjp output marker recorded inside an open
// AutodiffWindow (false once the outermost window has closed); custom_jvp markers count as
// custom_vjp ones.
bool is_stop_gradient_marker(const ir::Operation* op);
bool is_custom_vjp_marker(const ir::Operation* op);
// Whether `op` is part of a custom_vjp's forward (hidden from the backward walk).
bool is_custom_inner(const ir::Operation* op);
// Makes `op` (an identity op, the copy of a marker) a stop_gradient marker.
void mark_stop_gradient(const ir::Operation* op);

// A recorded custom function, for vmap: its inputs, its output markers, the values it closes
// over, and its functions: jvp for custom_jvp, fwd and bwd for custom_vjp, recall for remat
// (the call again with f replaced by its vmapped form); fun empty for the values remat saves.
struct CustomParts {
  std::string what;
  std::vector<Array> inputs;
  std::vector<const ir::Operation*> markers;
  std::vector<const ir::Value*> closed_over;
  FlatFn fun;
  FlatPairFn jvp;
  FlatFwd fwd;
  FlatBwd bwd;
  std::function<std::vector<Array>(const FlatFn& f, const std::vector<Array>& args)> recall;
};
// The custom function whose output `marker` is (nullopt for other ops).
std::optional<CustomParts> custom_parts(const ir::Operation* marker);
// record_custom_vjp for several outputs (one marker each); `what` names it in messages.
std::vector<Array> record_custom_vjp(const Mark& start, const std::vector<Array>& inputs,
                                     const std::vector<Array>& outs,
                                     const std::vector<Array>& residuals, FlatBwd bwd,
                                     const std::string& what);
// Sets how a custom function whose output `marker` is calls itself again on other arguments,
// with f replaced (remat's record, for vmap).
void set_recall(const ir::Operation* marker, const FlatFn& f,
                std::function<std::vector<Array>(const FlatFn&, const std::vector<Array>&)> recall);
// `saved` (a result of `op` computed earlier) standing for op's result on `operands`: its
// cotangent goes to the operands through op's VJP rule, so the op is not computed again.
Array record_saved(const ir::Operation& op, const std::vector<Array>& operands, const Array& saved);
// Records `ops` again with values mapped through env (as replay does), keeping what they mean
// to the backward walk: custom functions inside get their rules on the replayed inputs, the
// ops of a custom_vjp's forward (`hidden`, taken before the ops were recorded as a custom
// function themselves) stay hidden, stop_gradient stays a cut. An op whose result is a key of
// `saved` is not recomputed: record_saved gives the saved value.
void replay_differentiable(const std::vector<ir::Operation*>& ops, ValueEnv& env,
                           const ValueEnv& saved,
                           const std::unordered_set<const ir::Operation*>& hidden);

}  // namespace cujax::trace
