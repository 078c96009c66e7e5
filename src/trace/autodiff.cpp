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
#include "trace/batching_rules.h"
#include "trace/replay.h"
#include "trace/vjp_rules.h"

namespace cujax {
namespace trace {

namespace vjp {
void register_custom_call_rules(Rules& rules);  // trace/sdpa_rules.cpp
}  // namespace vjp

namespace {

struct CustomRecord {
  std::string what;  // "custom_vjp" or "custom_jvp", for messages
  std::vector<Array> inputs;
  std::vector<Array> residuals;
  CustomBwd bwd;
  std::unordered_set<const ir::Operation*> fwd_ops;
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

vjp::Rules& rules() {
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
std::mutex& rules_mutex() {
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

std::string type_of(const Array& a) {
  return std::string(mlir_name(a.dtype())) + shape_to_string(a.shape());
}

}  // namespace

void register_vjp_rule(const std::string& op_name, VjpRule rule) {
  std::lock_guard<std::mutex> lock(rules_mutex());
  rules()[op_name] = std::move(rule);
}

bool has_vjp_rule(const std::string& op_name) {
  std::lock_guard<std::mutex> lock(rules_mutex());
  return rules().count(op_name) > 0;
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
    throw Error("grad requires real-valued outputs, but the function returned " + type_of(y) +
                " (complex); for f'(z) of a holomorphic f pass `holomorphic` "
                "(grad(f, argnums<0>, holomorphic)), or differentiate real(f) or abs(f)");
  if (!y.shape().empty() || !is_float(y.dtype()))
    throw Error("grad requires real scalar outputs, but the function returned " + type_of(y) +
                "; use vjp for non-scalar outputs");
}

void check_holomorphic(const Array& y, const std::vector<Array>& inputs) {
  if (!y.valid()) throw Error("grad: the function returned an uninitialized Array");
  if (!y.shape().empty() || !is_complex(y.dtype()))
    throw Error(
        "grad with holomorphic requires a complex scalar output, but the function returned " +
        type_of(y));
  for (const Array& x : inputs)
    if (!is_complex(x.dtype()))
      throw Error("grad with holomorphic requires complex inputs, got " + type_of(x));
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
      throw Error(what + ": leaf " + std::to_string(i) + " should be " + type_of(outputs[i]) +
                  ", got " + (cts[i].valid() ? type_of(cts[i]) : std::string("an invalid Array")));
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

Array record_custom_vjp(const Mark& start, const std::vector<Array>& inputs, const Array& out,
                        const std::vector<Array>& residuals, CustomBwd bwd) {
  auto rec = std::make_shared<CustomRecord>();
  rec->what = "custom_vjp";
  const std::vector<ir::Operation*> fwd_ops = ops_since(start);
  for (ir::Operation* op : fwd_ops) {
    rec->fwd_ops.insert(op);
    state().custom_inner.insert(op);
  }
  rec->closed_over = closed_over(fwd_ops, inputs);
  rec->inputs = inputs;
  rec->residuals = residuals;
  rec->bwd = std::move(bwd);
  Array y = identity(out);
  state().customs[y.tracer_value()->defining_op] = rec;
  return y;
}

Array record_custom_jvp(const Mark& start, const std::vector<Array>& inputs,
                        const std::vector<Array>& tangents, const Array& out,
                        const Array& tangent_out) {
  if (!out.valid() || !tangent_out.valid())
    throw Error("custom_jvp: the JVP rule returned an uninitialized Array");
  if (tangent_out.shape() != out.shape() || tangent_out.dtype() != out.dtype())
    throw Error("custom_jvp: the JVP rule's tangent output is " + type_of(tangent_out) +
                ", its primal output " + type_of(out));
  auto rec = std::make_shared<CustomRecord>();
  rec->what = "custom_jvp";
  rec->inputs = inputs;
  // The rule's ops are not hidden from the walk (unlike custom_vjp's fwd): only the marker cuts
  // the naive path, and the rule's own ops carry higher derivatives.
  const std::vector<ir::Operation*> rule_ops = ops_since(start);
  std::vector<Array> known = inputs;
  known.insert(known.end(), tangents.begin(), tangents.end());
  rec->closed_over = closed_over(rule_ops, known);
  rec->bwd = [rule_ops, tangents, tangent_out](const std::vector<Array>&, const Array& g) {
    return backward(rule_ops, tangents, {tangent_out}, {g});
  };
  Array y = identity(out);
  state().customs[y.tracer_value()->defining_op] = rec;
  return y;
}

Batched batch_custom_vjp_marker(const ir::Operation* op, int64_t size,
                                const std::function<Batched(ir::Value*)>& get) {
  const std::shared_ptr<CustomRecord> rec = state().customs.at(op);
  if (rec->what != "custom_vjp")
    throw Error("vmap of a custom_jvp function under grad is not supported yet");
  TraceContext& tc = active("vmap");
  // Everything with the batch dimension first (unbatched values broadcast), so that the new
  // record's bwd is the recorded one vmapped over axis 0 of every argument.
  const auto front = [&](ir::Value* v) {
    const Batched b = get(v);
    return batching::batch_at(b.value, b.bdim, size, 0);
  };
  std::vector<Array> inputs, residuals;
  for (const Array& x : rec->inputs) inputs.push_back(front(tc.value_of(x)));
  for (const Array& r : rec->residuals) residuals.push_back(front(tc.value_of(r)));
  std::vector<ShapeDtype> per_example;
  for (const Array& x : rec->inputs) per_example.push_back({x.shape(), x.dtype()});
  const CustomBwd inner = rec->bwd;
  // bwd may leave a cotangent out (an invalid Array); vmap needs every output, so zeros.
  const auto one = [inner, per_example](const std::vector<Array>& res, const Array& g) {
    std::vector<Array> gs = inner(res, g);
    for (size_t i = 0; i < gs.size() && i < per_example.size(); ++i)
      if (!gs[i].valid()) gs[i] = lax::full(per_example[i].shape, 0.0, per_example[i].dtype);
    return gs;
  };
  // The output is moved before the mark: no op of the new record's (empty) forward part may
  // read a value from outside it.
  const Array y = front(op->operands[0]);
  const Mark start = mark();
  Batched out{record_custom_vjp(start, inputs, y, residuals,
                                [one](const std::vector<Array>& res, const Array& g) {
                                  return vmap(one)(res, g);
                                }),
              0};
  // A value the function closes over is refused under grad as before, in its batched form.
  const std::shared_ptr<CustomRecord> batched =
      state().customs.at(tc.value_of(out.value)->defining_op);
  for (const ir::Value* v : rec->closed_over)
    batched->closed_over.push_back(tc.value_of(get(const_cast<ir::Value*>(v)).value));
  return out;
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
      for (const ir::Value* v : rec.closed_over)
        if (reach.count(v))
          throw Error(rec.what + ": differentiated with respect to a " + v->type.str() +
                      " value the function closes over; its rule only differentiates the "
                      "function's explicit arguments, so pass that value as an argument");
      const Array g = ct.at(op->result(0));
      std::vector<Array> gs = rec.bwd(rec.residuals, g);
      if (gs.size() != rec.inputs.size())
        throw Error("custom_vjp: bwd returned " + std::to_string(gs.size()) +
                    " cotangents for a function of " + std::to_string(rec.inputs.size()) +
                    " arguments");
      for (size_t i = 0; i < gs.size(); ++i) {
        ir::Value* v = tc.value_of(rec.inputs[i]);
        if (!gs[i].valid() || !reach.count(v)) continue;
        if (gs[i].shape() != rec.inputs[i].shape() || gs[i].dtype() != rec.inputs[i].dtype())
          throw Error("custom_vjp: bwd's cotangent " + std::to_string(i) + " is " + type_of(gs[i]) +
                      ", the argument is " + type_of(rec.inputs[i]));
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
      std::lock_guard<std::mutex> lock(rules_mutex());
      auto r = rules().find(op->name);
      if (r != rules().end()) rule = r->second;
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
                    type_of(g) + " for operand " + std::to_string(i) + " of type " + t.str());
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
