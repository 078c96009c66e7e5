// remat (jax.checkpoint): f is recorded as a custom function whose residuals are its arguments
// and the results the policy saves; its backward replays f's recorded ops on the residuals
// (the saved ops are not recomputed) and differentiates the replay. Replaying the recorded ops,
// rather than calling f again, reproduces exactly the forward computation (the same random
// keys, the same custom rules inside).
#include <unordered_set>

#include "cujax/lax.h"
#include "cujax/remat.h"
#include "trace/autodiff_markers.h"
#include "trace/vjp_rules.h"

namespace cujax {

namespace checkpoint_policies {

bool dots_saveable(const ir::Operation& op) {
  return op.name == "stablehlo.dot_general" || op.name == "stablehlo.convolution";
}

bool dots_with_no_batch_dims_saveable(const ir::Operation& op) {
  if (op.name != "stablehlo.dot_general") return false;
  const ir::Attribute* dn = op.attr("dot_dimension_numbers");
  return trace::vjp::struct_ints(dn, "lhs_batching_dimensions").empty() &&
         trace::vjp::struct_ints(dn, "rhs_batching_dimensions").empty();
}

}  // namespace checkpoint_policies

namespace trace {

namespace {

// Ops whose result the policy may save: one floating result and no regions (the saved value
// stands for the op in the backward, whose VJP rule then sees it as the op's result).
bool saveable(const ir::Operation& op) {
  if (op.num_results() != 1 || !op.regions.empty() || is_stop_gradient_marker(&op) ||
      is_custom_vjp_marker(&op) || is_custom_inner(&op))
    return false;
  const ir::Type& t = op.result(0)->type;
  return !t.is_token && (is_float(t.dtype) || is_complex(t.dtype));
}

}  // namespace

std::vector<Array> remat_call(const std::function<std::vector<Array>(const std::vector<Array>&)>& f,
                              const std::vector<Array>& args, const RematOptions& options) {
  if (!current_trace() || !AutodiffWindow::active()) return f(args);
  TraceContext& tc = *current_trace();
  const Mark start = mark();
  // Fresh values, so that the recorded ops read values the replay can map.
  std::vector<Array> inputs;
  for (const Array& a : args) inputs.push_back(fresh(a));
  const std::vector<Array> outs = f(inputs);
  // f's ops, after the n fresh identities.
  const std::vector<ir::Operation*> all = ops_since(start);
  const std::vector<ir::Operation*> ops(all.begin() + static_cast<ptrdiff_t>(args.size()),
                                        all.end());
  // The ops of custom functions inside f, hidden from the walk (before f's own are).
  std::unordered_set<const ir::Operation*> hidden;
  for (ir::Operation* op : ops)
    if (is_custom_inner(op)) hidden.insert(op);
  std::vector<Array> residuals = args;
  std::vector<const ir::Value*> saved;
  if (options.policy) {
    // Only ops of f itself: those inside a custom function inside it are hidden from the walk.
    for (ir::Operation* op : ops) {
      if (!saveable(*op) || !options.policy(*op)) continue;
      saved.push_back(op->result(0));
      residuals.push_back(tc.tracer(op->result(0), false));
    }
  }
  const bool prevent_cse = options.prevent_cse;
  auto bwd = [ops, inputs, outs, saved, hidden, prevent_cse](const std::vector<Array>& res,
                                                             const std::vector<Array>& cts) {
    TraceContext& t = *current_trace();
    AutodiffWindow window;
    const size_t n = inputs.size();
    std::vector<Array> xs(res.begin(), res.begin() + static_cast<ptrdiff_t>(n));
    if (prevent_cse && !xs.empty()) xs = lax::optimization_barrier(xs);
    ValueEnv env, kept;
    std::vector<Array> ins;
    for (size_t i = 0; i < n; ++i) {
      ins.push_back(fresh(xs[i]));
      env[t.value_of(inputs[i])] = ins.back();
    }
    for (size_t k = 0; k < saved.size(); ++k) kept[saved[k]] = res[n + k];
    const Mark m = mark();
    replay_differentiable(ops, env, kept, hidden);
    std::vector<Array> ys;
    for (const Array& y : outs) ys.push_back(replayed(env, t.value_of(y)));
    return backward(ops_since(m), ins, ys, cts);
  };
  std::vector<Array> ys = record_custom_vjp(start, args, outs, residuals, bwd, "remat");
  if (!ys.empty())
    set_recall(ys[0].tracer_value()->defining_op, f,
               [options](const FlatFn& g, const std::vector<Array>& xs) {
                 return remat_call(g, xs, options);
               });
  return ys;
}

}  // namespace trace
}  // namespace cujax
