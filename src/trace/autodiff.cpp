// Reverse-mode autodiff on the traced IR: the backward walk, the rule registry, stop_gradient,
// custom_vjp and custom_jvp markers.
//
// Markers. stop_gradient and custom_vjp results are identity ops (a same-shape
// stablehlo.reshape, a no-op) remembered in a thread-local side table
// while an AutodiffWindow is open: the walk treats a stop_gradient marker as a cut, and a
// custom_vjp marker as "call bwd, skip the ops of fwd" (a custom_jvp marker's bwd transposes
// the recorded JVP rule's tangent ops). The table holds op pointers of the
// active trace only; it is cleared when the outermost window closes, before those ops can be
// freed.
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "cujax/lax.h"
#include "trace/autodiff_markers.h"
#include "trace/replay.h"
#include "trace/vjp_rules.h"

namespace cujax {
namespace trace {

namespace vjp {
void register_custom_call_rules(Rules& rules);  // trace/sdpa_rules.cpp
}  // namespace vjp

namespace {

struct CustomRecord {
  std::string what;  // "custom_vjp", "custom_jvp" or "remat", for messages
  std::vector<Array> inputs;
  std::vector<Array> residuals;
  FlatBwd bwd;
  // What vmap needs to record the function again on batched inputs (set for custom_jvp and
  // custom_vjp functions).
  FlatFn fun;
  FlatPairFn jvp;
  FlatFwd fwd;
  std::function<std::vector<Array>(const FlatFn&, const std::vector<Array>&)> recall;
  // One identity op per output leaf, recorded together: the walk calls bwd once, at the first
  // of them it meets, with the cotangents of all.
  std::vector<const ir::Operation*> markers;
  // Values the function's ops read that are neither its arguments nor made inside it: the rule
  // gives no cotangent for them, so differentiating with respect to one is refused.
  std::vector<const ir::Value*> closed_over;
};

struct AdState {
  int depth = 0;
  std::unordered_set<const ir::Operation*> stops;
  std::unordered_map<const ir::Operation*, std::shared_ptr<CustomRecord>> customs;
  std::unordered_set<const ir::Operation*> custom_inner;
  std::unordered_map<const ir::Operation*, std::any> annotations;
};

AdState& state() {
  thread_local AdState s;
  return s;
}

vjp::Rules& vjp_rules() {
  static vjp::Rules r = [] {
    vjp::Rules x;
    vjp::register_elementwise_rules(x);
    vjp::register_shape_rules(x);
    vjp::register_reduction_rules(x);
    vjp::register_control_rules(x);
    vjp::register_custom_call_rules(x);
    vjp::register_window_rules(x);
    vjp::register_complex_rules(x);
    return x;
  }();
  return r;
}
std::mutex& vjp_rules_mutex() {
  static std::mutex mu;
  return mu;
}

TraceContext& active(const char* what) {
  TraceContext* tc = current_trace();
  if (!tc) throw Error(std::string(what) + " needs an active trace");
  return *tc;
}

Array identity(const Array& x) {
  OpSpec s;
  s.name = "stablehlo.reshape";
  s.result_types = {ir_type(x.aval())};
  return with_weak_type(bind1(s, {x}), x.weak_type());
}

bool differentiable(const ir::Value* v) {
  return !v->type.is_token && (is_float(v->type.dtype) || is_complex(v->type.dtype));
}

// The op's operands, then the values its regions use from outside it (cond branches and loop
// bodies capture the arrays they close over): gradients flow to both.
std::vector<ir::Value*> inputs_of(const ir::Operation& op) {
  std::vector<ir::Value*> out = op.operands;
  // Only control flow captures; other regions (reduce, sort) are computations on their
  // arguments and their rules read exactly the op's operands.
  if (op.name != "stablehlo.case" && op.name != "stablehlo.while") return out;
  // A value both passed and captured (a scan's xs that its body also closes over) is listed
  // twice: each use gets its cotangent, and backward sums them.
  const std::vector<ir::Value*> captured = region_captures(op);
  out.insert(out.end(), captured.begin(), captured.end());
  return out;
}

std::string array_type_text(const Array& a) {
  return std::string(mlir_name(a.dtype())) + shape_to_string(a.shape());
}

// The marked outputs of a custom function: one identity op per output, all of `rec`.
std::vector<Array> mark_outputs(const std::shared_ptr<CustomRecord>& rec,
                                const std::vector<Array>& outs) {
  std::vector<Array> ys;
  for (const Array& out : outs) {
    if (!out.valid()) throw Error(rec->what + ": the function returned an uninitialized Array");
    Array y = identity(out);
    const ir::Operation* op = y.tracer_value()->defining_op;
    rec->markers.push_back(op);
    state().customs[op] = rec;
    ys.push_back(y);
  }
  return ys;
}

}  // namespace

void register_vjp_rule(const std::string& op_name, VjpRule rule) {
  std::lock_guard<std::mutex> lock(vjp_rules_mutex());
  vjp_rules()[op_name] = std::move(rule);
}

bool has_vjp_rule(const std::string& op_name) {
  std::lock_guard<std::mutex> lock(vjp_rules_mutex());
  return vjp_rules().count(op_name) > 0;
}

AutodiffWindow::AutodiffWindow() {
  ++state().depth;
}
AutodiffWindow::~AutodiffWindow() {
  AdState& s = state();
  if (--s.depth == 0) {
    s.stops.clear();
    s.customs.clear();
    s.custom_inner.clear();
    s.annotations.clear();
  }
}
void annotate(const ir::Operation* op, std::any data) {
  if (AutodiffWindow::active()) state().annotations[op] = std::move(data);
}

const std::any* annotation(const ir::Operation* op) {
  auto it = state().annotations.find(op);
  return it == state().annotations.end() ? nullptr : &it->second;
}

bool AutodiffWindow::active() {
  return state().depth > 0;
}

bool is_stop_gradient_marker(const ir::Operation* op) {
  return state().stops.count(op) > 0;
}
void mark_stop_gradient(const ir::Operation* op) {
  if (AutodiffWindow::active()) state().stops.insert(op);
}
bool is_custom_vjp_marker(const ir::Operation* op) {
  return state().customs.count(op) > 0;
}
bool is_custom_inner(const ir::Operation* op) {
  return state().custom_inner.count(op) > 0;
}

Mark mark() {
  TraceContext& tc = active("autodiff");
  ir::Block& b = tc.current_block();
  return Mark{&b, b.ops.empty() ? nullptr : b.ops.back().get(), b.ops.size()};
}

std::vector<ir::Operation*> ops_since(const Mark& m) {
  std::vector<ir::Operation*> out;
  auto& ops = m.block->ops;
  size_t start = 0;
  if (m.last) {
    // Constants are inserted at the front of the entry block, so find the mark by identity,
    // from the end (it only moves towards the end).
    size_t i = ops.size();
    while (i > 0 && ops[i - 1].get() != m.last) --i;
    start = i;
  }
  for (size_t i = start; i < ops.size(); ++i) out.push_back(ops[i].get());
  return out;
}

Array fresh(const Array& x) {
  active("autodiff");
  return identity(x);
}

Array zeros_like(const Array& x) {
  return lax::full(x.shape(), 0.0, x.dtype());
}

Array ones_like_scalar(const Array& y) {
  return lax::full(y.shape(), 1.0, y.dtype());
}

void check_scalar_output(const Array& y) {
  if (!y.valid()) throw Error("grad: the function returned an uninitialized Array");
  if (is_complex(y.dtype()))
    throw Error("grad requires real-valued outputs, but the function returned " + array_type_text(y) +
                " (complex); for f'(z) of a holomorphic f pass `holomorphic` "
                "(grad(f, argnums<0>, holomorphic)), or differentiate real(f) or abs(f)");
  if (!y.shape().empty() || !is_float(y.dtype()))
    throw Error("grad requires real scalar outputs, but the function returned " + array_type_text(y) +
                "; use vjp for non-scalar outputs");
}

void check_holomorphic(const Array& y, const std::vector<Array>& inputs) {
  if (!y.valid()) throw Error("grad: the function returned an uninitialized Array");
  if (!y.shape().empty() || !is_complex(y.dtype()))
    throw Error(
        "grad with holomorphic requires a complex scalar output, but the function returned " +
        array_type_text(y));
  for (const Array& x : inputs)
    if (!is_complex(x.dtype()))
      throw Error("grad with holomorphic requires complex inputs, got " + array_type_text(x));
}

void check_cotangents(const std::vector<Array>& outputs, const std::vector<Array>& cts,
                      const std::string& what) {
  if (outputs.size() != cts.size())
    throw Error(what + ": expected " + std::to_string(outputs.size()) + " cotangent leaves, got " +
                std::to_string(cts.size()));
  for (size_t i = 0; i < cts.size(); ++i)
    if (!cts[i].valid() || cts[i].shape() != outputs[i].shape() ||
        (cts[i].dtype() != outputs[i].dtype() &&
         (is_float(outputs[i].dtype()) || is_complex(outputs[i].dtype()))))
      throw Error(what + ": leaf " + std::to_string(i) + " should be " + array_type_text(outputs[i]) +
                  ", got " + (cts[i].valid() ? array_type_text(cts[i]) : std::string("an invalid Array")));
}

// The values `ops` read from outside themselves, other than `inputs`.
std::vector<const ir::Value*> closed_over(const std::vector<ir::Operation*>& ops,
                                          const std::vector<Array>& inputs) {
  TraceContext& tc = active("autodiff");
  std::unordered_set<const ir::Operation*> inside(ops.begin(), ops.end());
  std::unordered_set<const ir::Value*> args, seen;
  for (const Array& x : inputs) args.insert(tc.value_of(x));
  std::vector<const ir::Value*> out;
  for (ir::Operation* op : ops)
    for (ir::Value* v : inputs_of(*op))
      if (!args.count(v) && !(v->defining_op && inside.count(v->defining_op)) &&
          differentiable(v) && seen.insert(v).second)
        out.push_back(v);
  return out;
}

std::vector<Array> record_custom_vjp(const Mark& start, const std::vector<Array>& inputs,
                                     const std::vector<Array>& outs,
                                     const std::vector<Array>& residuals, FlatBwd bwd,
                                     const std::string& what) {
  auto rec = std::make_shared<CustomRecord>();
  rec->what = what;
  const std::vector<ir::Operation*> fwd_ops = ops_since(start);
  for (ir::Operation* op : fwd_ops) state().custom_inner.insert(op);
  rec->closed_over = closed_over(fwd_ops, inputs);
  rec->inputs = inputs;
  rec->residuals = residuals;
  rec->bwd = std::move(bwd);
  return mark_outputs(rec, outs);
}

namespace {
std::vector<Array> record_custom_jvp(const Mark& start, const std::vector<Array>& inputs,
                                     const std::vector<Array>& tangents,
                                     const std::vector<Array>& outs,
                                     const std::vector<Array>& tangent_outs, const FlatFn& fun,
                                     const FlatPairFn& rule) {
  if (outs.size() != tangent_outs.size())
    throw Error("custom_jvp: the JVP rule returned " + std::to_string(outs.size()) +
                " primal output leaves and " + std::to_string(tangent_outs.size()) +
                " tangent output leaves");
  for (size_t i = 0; i < outs.size(); ++i) {
    if (!outs[i].valid() || !tangent_outs[i].valid())
      throw Error("custom_jvp: the JVP rule returned an uninitialized Array");
    if (tangent_outs[i].shape() != outs[i].shape() || tangent_outs[i].dtype() != outs[i].dtype())
      throw Error("custom_jvp: the JVP rule's tangent output " + std::to_string(i) + " is " +
                  array_type_text(tangent_outs[i]) + ", its primal output " + array_type_text(outs[i]));
  }
  auto rec = std::make_shared<CustomRecord>();
  rec->what = "custom_jvp";
  rec->inputs = inputs;
  // The rule's ops are not hidden from the walk (unlike custom_vjp's fwd): only the marker cuts
  // the naive path, and the rule's own ops carry higher derivatives.
  const std::vector<ir::Operation*> rule_ops = ops_since(start);
  std::vector<Array> known = inputs;
  known.insert(known.end(), tangents.begin(), tangents.end());
  rec->closed_over = closed_over(rule_ops, known);
  rec->bwd = [rule_ops, tangents, tangent_outs](const std::vector<Array>&,
                                                const std::vector<Array>& gs) {
    return backward(rule_ops, tangents, tangent_outs, gs);
  };
  rec->fun = fun;
  rec->jvp = rule;
  return mark_outputs(rec, outs);
}
}  // namespace

std::vector<Array> custom_jvp_call(const FlatFn& f, const FlatPairFn& jvp,
                                   const std::vector<Array>& args) {
  if (!current_trace() || !AutodiffWindow::active()) return f(args);
  std::vector<Array> tangents;
  for (const Array& x : args) tangents.push_back(fresh(zeros_like(x)));
  const Mark m = mark();
  const auto [outs, tangent_outs] = jvp(args, tangents);
  return record_custom_jvp(m, args, tangents, outs, tangent_outs, f, jvp);
}

std::vector<Array> custom_vjp_call(const FlatFn& f, const FlatFwd& fwd, const FlatBwd& bwd,
                                   const std::vector<Array>& args) {
  if (!current_trace() || !AutodiffWindow::active()) return f(args);
  const Mark m = mark();
  const auto [outs, residuals] = fwd(args);
  std::vector<Array> ys = record_custom_vjp(m, args, outs, residuals, bwd, "custom_vjp");
  const auto& rec = state().customs.at(ys.at(0).tracer_value()->defining_op);
  rec->fun = f;
  rec->fwd = fwd;
  return ys;
}

std::optional<CustomParts> custom_parts(const ir::Operation* marker) {
  auto it = state().customs.find(marker);
  if (it == state().customs.end()) return std::nullopt;
  const CustomRecord& r = *it->second;
  return CustomParts{r.what, r.inputs, r.markers, r.closed_over, r.fun,
                     r.jvp,  r.fwd,    r.bwd,     r.recall};
}

void set_recall(
    const ir::Operation* marker, const FlatFn& f,
    std::function<std::vector<Array>(const FlatFn&, const std::vector<Array>&)> recall) {
  CustomRecord& r = *state().customs.at(marker);
  r.fun = f;
  r.recall = std::move(recall);
}

Array record_saved(const ir::Operation& op, const std::vector<Array>& operands,
                   const Array& saved) {
  VjpRule rule;
  {
    std::lock_guard<std::mutex> lock(vjp_rules_mutex());
    auto r = vjp_rules().find(op.name);
    if (r != vjp_rules().end()) rule = r->second;
  }
  if (!rule) throw Error("grad of " + op.name + " is not supported yet (it has no VJP rule)");
  auto rec = std::make_shared<CustomRecord>();
  rec->what = "remat";
  rec->inputs = operands;
  const ir::Operation* o = &op;
  rec->bwd = [o, rule, operands, saved](const std::vector<Array>&, const std::vector<Array>& gs) {
    TraceContext& tc = active("remat");
    VjpArgs args{tc, *o, operands, {saved}, gs, {}};
    for (const Array& x : operands)
      args.needed.push_back(is_float(x.dtype()) || is_complex(x.dtype()));
    const std::vector<std::optional<Array>> cts = rule(args);
    std::vector<Array> out(operands.size());
    for (size_t i = 0; i < cts.size() && i < out.size(); ++i)
      if (args.needed[i] && cts[i]) out[i] = *cts[i];
    return out;
  };
  return mark_outputs(rec, {saved})[0];
}

void replay_differentiable(const std::vector<ir::Operation*>& ops, ValueEnv& env,
                           const ValueEnv& saved,
                           const std::unordered_set<const ir::Operation*>& hidden) {
  TraceContext& tc = active("remat");
  AdState& st = state();
  std::unordered_map<const CustomRecord*, std::shared_ptr<CustomRecord>> copies;
  auto map_value = [&](const Array& a) { return replayed(env, tc.value_of(a)); };
  for (ir::Operation* op : ops) {
    std::vector<Array> operands;
    for (ir::Value* v : op->operands) operands.push_back(replayed(env, v));
    if (op->num_results() == 1) {
      auto s = saved.find(op->result(0));
      if (s != saved.end()) {
        env[op->result(0)] = record_saved(*op, operands, s->second);
        continue;
      }
    }
    auto custom = st.customs.find(op);
    if (custom != st.customs.end()) {
      // A custom function inside: the same rule on the replayed inputs and residuals.
      std::shared_ptr<CustomRecord>& copy = copies[custom->second.get()];
      if (!copy) {
        copy = std::make_shared<CustomRecord>(*custom->second);
        copy->markers.clear();
        for (Array& a : copy->inputs) a = map_value(a);
        for (Array& a : copy->residuals) a = map_value(a);
        for (const ir::Value*& v : copy->closed_over) {
          auto it = env.find(v);
          if (it != env.end()) v = tc.value_of(it->second);
        }
      }
      env[op->result(0)] = mark_outputs(copy, {operands[0]})[0];
      continue;
    }
    std::unordered_map<const ir::Value*, ir::Value*> captures;
    for (ir::Value* v : region_captures(*op))
      if (env.count(v)) captures[v] = tc.value_of(env.at(v));
    const std::vector<Array> rs = replay_op(*op, operands, captures);
    if (!rs.empty() && hidden.count(op)) st.custom_inner.insert(rs[0].tracer_value()->defining_op);
    for (size_t i = 0; i < rs.size(); ++i) env[op->result(i)] = rs[i];
  }
}

std::vector<Array> backward(const std::vector<ir::Operation*>& ops,
                            const std::vector<Array>& inputs, const std::vector<Array>& outputs,
                            const std::vector<Array>& out_cts) {
  TraceContext& tc = active("autodiff");
  AdState& st = state();
  // Forward reachability from the inputs.
  std::unordered_set<const ir::Value*> reach;
  std::vector<ir::Value*> in_values;
  for (const auto& x : inputs) {
    ir::Value* v = tc.value_of(x);
    in_values.push_back(v);
    if (differentiable(v)) reach.insert(v);
  }
  std::unordered_map<const ir::Operation*, std::vector<ir::Value*>> op_inputs;
  for (ir::Operation* op : ops) op_inputs[op] = inputs_of(*op);
  for (ir::Operation* op : ops) {
    if (st.stops.count(op)) continue;
    bool any = false;
    auto custom = st.customs.find(op);
    if (custom != st.customs.end()) {
      for (const auto& a : custom->second->inputs) any = any || reach.count(tc.value_of(a)) > 0;
    }
    for (ir::Value* v : op_inputs[op]) any = any || reach.count(v) > 0;
    if (!any) continue;
    for (const auto& r : op->results)
      if (differentiable(r.get())) reach.insert(r.get());
  }
  // Cotangents, summed over uses.
  std::unordered_map<const ir::Value*, Array> ct;
  std::unordered_set<const CustomRecord*> done;  // custom functions already pulled back
  auto accumulate = [&](const ir::Value* v, const Array& g) {
    auto it = ct.find(v);
    if (it == ct.end())
      ct.emplace(v, g);
    else
      it->second = lax::add(it->second, g);
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    ir::Value* v = tc.value_of(outputs[i]);
    if (reach.count(v)) accumulate(v, with_weak_type(out_cts[i], false));
  }
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    ir::Operation* op = *it;
    if (st.stops.count(op) || st.custom_inner.count(op)) continue;
    bool has_ct = false;
    for (const auto& r : op->results) has_ct = has_ct || ct.count(r.get()) > 0;
    if (!has_ct) continue;
    auto custom = st.customs.find(op);
    if (custom != st.customs.end()) {
      const CustomRecord& rec = *custom->second;
      if (!done.insert(&rec).second) continue;
      for (const ir::Value* v : rec.closed_over)
        if (reach.count(v))
          throw Error(rec.what + ": differentiated with respect to a " + v->type.str() +
                      " value the function closes over; its rule only differentiates the "
                      "function's explicit arguments, so pass that value as an argument");
      std::vector<Array> out_cts;
      for (const ir::Operation* m : rec.markers) {
        auto c = ct.find(m->results[0].get());
        out_cts.push_back(
            c != ct.end() ? c->second
                          : lax::full(m->results[0]->type.shape, 0.0, m->results[0]->type.dtype));
      }
      std::vector<Array> gs = rec.bwd(rec.residuals, out_cts);
      if (gs.size() != rec.inputs.size())
        throw Error(rec.what + ": bwd returned " + std::to_string(gs.size()) +
                    " cotangents for a function of " + std::to_string(rec.inputs.size()) +
                    " arguments");
      for (size_t i = 0; i < gs.size(); ++i) {
        ir::Value* v = tc.value_of(rec.inputs[i]);
        if (!gs[i].valid() || !reach.count(v)) continue;
        if (gs[i].shape() != rec.inputs[i].shape() || gs[i].dtype() != rec.inputs[i].dtype())
          throw Error(rec.what + ": bwd's cotangent " + std::to_string(i) + " is " +
                      array_type_text(gs[i]) + ", the argument is " + array_type_text(rec.inputs[i]));
        accumulate(v, with_weak_type(gs[i], false));
      }
      continue;
    }
    const std::vector<ir::Value*>& in = op_inputs[op];
    std::vector<bool> needed;
    bool any_needed = false;
    for (ir::Value* v : in) {
      needed.push_back(reach.count(v) > 0);
      any_needed = any_needed || needed.back();
    }
    if (!any_needed) continue;
    VjpRule rule;
    {
      std::lock_guard<std::mutex> lock(vjp_rules_mutex());
      auto r = vjp_rules().find(op->name);
      if (r != vjp_rules().end()) rule = r->second;
    }
    if (!rule) throw Error("grad of " + op->name + " is not supported yet (it has no VJP rule)");
    VjpArgs args{tc, *op, {}, {}, {}, needed};
    for (ir::Value* v : in) args.operands.push_back(tc.tracer(v, false));
    for (const auto& r : op->results) {
      args.results.push_back(tc.tracer(r.get(), false));
      auto c = ct.find(r.get());
      if (c != ct.end())
        args.cts.push_back(c->second);
      else if (r->type.is_token)
        args.cts.push_back(Array());
      else
        args.cts.push_back(lax::full(r->type.shape, 0.0, r->type.dtype));
    }
    const std::vector<std::optional<Array>> gs = rule(args);
    for (size_t i = 0; i < in.size() && i < gs.size(); ++i) {
      if (!needed[i] || !gs[i]) continue;
      const Array& g = *gs[i];
      const ir::Type& t = in[i]->type;
      if (g.shape() != t.shape || g.dtype() != t.dtype)
        throw Error("internal error: the VJP rule of " + op->name + " gave a cotangent " +
                    array_type_text(g) + " for operand " + std::to_string(i) + " of type " + t.str());
      accumulate(in[i], g);
    }
  }
  std::vector<Array> result;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto c = ct.find(in_values[i]);
    result.push_back(c != ct.end() ? c->second : zeros_like(inputs[i]));
  }
  return result;
}

}  // namespace trace

Array stop_gradient(const Array& x) {
  if (!x.valid()) throw Error("stop_gradient: an uninitialized Array");
  if (!trace::current_trace() || !trace::AutodiffWindow::active()) return x;
  Array y = trace::identity(x);
  trace::state().stops.insert(y.tracer_value()->defining_op);
  return y;
}

}  // namespace cujax
