// vmap on the traced IR: in_axes/out_axes resolution, the size check, the forward batching walk,
// the rule registry and the helpers the rule files share.
#include <algorithm>
#include <mutex>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "trace/autodiff_markers.h"
#include "trace/batching_rules.h"
#include "trace/replay.h"
#include "trace/vjp_rules.h"

namespace cujax {

std::vector<Axis> MapAxes::per_leaf(const std::vector<size_t>& part_leaves,
                                    const std::string& what) const {
  std::vector<Axis> out;
  if (broadcast_) {
    for (size_t n : part_leaves) out.insert(out.end(), n, entries_[0].axes[0]);
    return out;
  }
  const std::string parts = what == "in_axes" ? "arguments" : "output elements";
  if (entries_.size() != part_leaves.size())
    throw Error("vmap " + what + " has " + std::to_string(entries_.size()) + " entries for " +
                std::to_string(part_leaves.size()) + " " + parts +
                "; give one per element or a single int");
  for (size_t k = 0; k < part_leaves.size(); ++k) {
    const AxisSpec& e = entries_[k];
    if (!e.leafwise) {
      out.insert(out.end(), part_leaves[k], e.axes[0]);
      continue;
    }
    if (e.axes.size() != part_leaves[k])
      throw Error("vmap " + what + " entry " + std::to_string(k) + " has " +
                  std::to_string(e.axes.size()) + " leaf axes for a tree of " +
                  std::to_string(part_leaves[k]) + " leaves");
    out.insert(out.end(), e.axes.begin(), e.axes.end());
  }
  return out;
}

namespace trace {

namespace batching {
void register_custom_call_rules(Rules& rules);  // trace/sdpa_rules.cpp
}  // namespace batching

// A custom function recorded under grad, on batched inputs: its outputs
// (trace/batching_custom.cpp).
std::vector<Batched> batch_custom(const ir::Operation& marker,
                                  const std::function<Batched(ir::Value*)>& get, int64_t size);

namespace {

batching::Rules& batch_rules() {
  static batching::Rules r = [] {
    batching::Rules x;
    batching::register_elementwise_rules(x);
    batching::register_shape_rules(x);
    batching::register_reduction_rules(x);
    batching::register_window_rules(x);
    batching::register_control_rules(x);
    batching::register_custom_call_rules(x);
    return x;
  }();
  return r;
}
std::mutex& batch_rules_mutex() {
  static std::mutex mu;
  return mu;
}

std::string value_type_text(const ir::Type& t) {
  return std::string(mlir_name(t.dtype)) + shape_to_string(t.shape);
}

}  // namespace

void register_batch_rule(const std::string& op_name, BatchRule rule) {
  std::lock_guard<std::mutex> lock(batch_rules_mutex());
  batch_rules()[op_name] = std::move(rule);
}

bool has_batch_rule(const std::string& op_name) {
  std::lock_guard<std::mutex> lock(batch_rules_mutex());
  return batch_rules().count(op_name) > 0;
}

int64_t mapped_size(const std::vector<Array>& leaves, const std::vector<Axis>& axes,
                    const std::vector<std::string>& names) {
  std::vector<std::string> sizes;
  std::optional<int64_t> size;
  bool consistent = true;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!axes[i]) continue;
    const Array& x = leaves[i];
    if (!x.valid()) throw Error("vmap: " + names[i] + " is an uninitialized Array");
    const int64_t rank = x.ndim();
    const int64_t axis = *axes[i];
    if (axis < -rank || axis >= rank)
      throw Error("vmap was requested to map " + names[i] + " along axis " + std::to_string(axis) +
                  ", which implies that its rank should be at least " +
                  std::to_string(axis < 0 ? -axis : axis + 1) + ", but it is only " +
                  std::to_string(rank) + " (its shape is " + shape_to_string(x.shape()) + ")");
    const int64_t n = x.shape()[axis < 0 ? axis + rank : axis];
    sizes.push_back(names[i] + " axis " + std::to_string(axis) + " has size " + std::to_string(n));
    if (size && *size != n) consistent = false;
    size = size.value_or(n);
  }
  if (!size) throw Error("vmap must have at least one non-None value in in_axes");
  if (!consistent) {
    std::string msg = "vmap got inconsistent sizes for array axes to be mapped: ";
    for (size_t i = 0; i < sizes.size(); ++i) msg += (i ? ", " : "") + sizes[i];
    throw Error(msg);
  }
  return *size;
}

Array stand_in(const Array& x, int axis) {
  Shape s = x.shape();
  s.erase(s.begin() + axis);
  return with_weak_type(fresh(lax::full(s, 0.0, x.dtype())), x.weak_type());
}

Array place_output(const Batched& y, Axis out_axis, int64_t size, const Array& traced) {
  if (!out_axis) {
    if (y.bdim) throw Error("vmap has mapped output but out_axes is None (not_mapped)");
    return y.value;
  }
  const int64_t rank = traced.ndim() + 1;
  const int64_t a = *out_axis < 0 ? *out_axis + rank : *out_axis;
  if (a < 0 || a >= rank)
    throw Error("vmap out_axes " + std::to_string(*out_axis) + " is out of range for an output " +
                "of rank " + std::to_string(rank) + " (shape " +
                shape_to_string(batching::insert_dim(traced.shape(), 0, size)) +
                " with the mapped axis first)");
  return with_weak_type(batching::batch_at(y.value, y.bdim, size, a), traced.weak_type());
}

namespace {

// The forward batching walk. At the top level (no outer lookup) an op on unbatched values is
// kept as recorded; inside a region being re-recorded every op is emitted again.
struct Walk {
  TraceContext& tc;
  int64_t size;
  std::function<Batched(ir::Value*)> outer;
  std::unordered_map<const ir::Value*, Batched> env;
  // In a region: the values defined in its block. An op using one that env lacks is skipped
  // (as replay does), so are its users.
  std::unordered_set<const ir::Value*> local;

  Batched get(ir::Value* v) const {
    auto it = env.find(v);
    if (it != env.end()) return it->second;
    return outer ? outer(v) : Batched{tc.tracer(v, false), std::nullopt};
  }
  bool batched(ir::Value* v) const {
    auto it = env.find(v);
    if (it != env.end()) return it->second.bdim.has_value();
    return outer && outer(v).bdim.has_value();
  }

  void run(ir::Operation* op) {
    bool any = false;
    for (ir::Value* v : op->operands) any = any || batched(v);
    // A region closing over a batched value (a loop body using a mapped argument) makes the op
    // batched too, else it would be kept with the unbatched stand-in.
    const std::vector<ir::Value*> captures =
        op->regions.empty() ? std::vector<ir::Value*>{} : region_captures(*op);
    for (ir::Value* v : captures) any = any || batched(v);
    auto missing = [&](ir::Value* v) { return local.count(v) && !env.count(v); };
    if (std::any_of(op->operands.begin(), op->operands.end(), missing) ||
        std::any_of(captures.begin(), captures.end(), missing))
      return;
    if (!any) {
      // An op on unbatched values is the same for every example: keep it as recorded.
      if (!outer) return;
      std::vector<Array> operands;
      for (ir::Value* v : op->operands) operands.push_back(get(v).value);
      std::unordered_map<const ir::Value*, ir::Value*> map;
      for (ir::Value* v : captures) map[v] = tc.value_of(get(v).value);
      const std::vector<Array> rs = replay_op(*op, operands, map);
      for (size_t i = 0; i < rs.size(); ++i) env[op->result(i)] = Batched{rs[i], std::nullopt};
      return;
    }
    if (is_custom_vjp_marker(op)) {
      // The function's outputs are all batched at its first marker.
      if (env.count(op->result(0))) return;
      const std::vector<Batched> rs = batch_custom(
          *op, [this](ir::Value* v) { return get(v); }, size);
      const std::vector<const ir::Operation*> markers = custom_parts(op)->markers;
      for (size_t k = 0; k < markers.size(); ++k) env[markers[k]->result(0)] = rs.at(k);
      return;
    }
    if (is_stop_gradient_marker(op)) {
      const Batched x = get(op->operands[0]);
      env[op->result(0)] = Batched{stop_gradient(x.value), x.bdim};
      return;
    }
    BatchRule rule;
    {
      std::lock_guard<std::mutex> lock(batch_rules_mutex());
      auto r = batch_rules().find(op->name);
      if (r != batch_rules().end()) rule = r->second;
    }
    if (!rule) throw Error("vmap: no batching rule for " + op->name);
    BatchArgs args{tc, *op, {}, {}, size, [this](ir::Value* v) { return get(v); }};
    for (ir::Value* v : op->operands) {
      const Batched b = get(v);
      args.operands.push_back(b.value);
      args.bdims.push_back(b.bdim);
    }
    const std::vector<Batched> rs = rule(args);
    if (rs.size() != op->num_results())
      throw Error("internal error: the batching rule of " + op->name + " gave " +
                  std::to_string(rs.size()) + " results for " + std::to_string(op->num_results()));
    for (size_t i = 0; i < rs.size(); ++i) {
      const ir::Type& t = op->result(i)->type;
      Shape s = rs[i].value.shape();
      if (rs[i].bdim) {
        if (*rs[i].bdim < 0 || *rs[i].bdim >= static_cast<int64_t>(s.size()) ||
            s[*rs[i].bdim] != size)
          throw Error("internal error: the batching rule of " + op->name +
                      " put the batch dimension at " + std::to_string(*rs[i].bdim) + " of " +
                      shape_to_string(s));
        s.erase(s.begin() + *rs[i].bdim);
      }
      if (s != t.shape || rs[i].value.dtype() != t.dtype)
        throw Error("internal error: the batching rule of " + op->name + " gave " +
                    std::string(mlir_name(rs[i].value.dtype())) + shape_to_string(s) +
                    " per example for result " + std::to_string(i) + " of type " + value_type_text(t));
      env[op->result(i)] = rs[i];
    }
  }
};

}  // namespace

std::vector<Batched> batch(const std::vector<ir::Operation*>& ops,
                           const std::vector<Array>& stand_ins, const std::vector<Batched>& inputs,
                           const std::vector<Array>& outputs, int64_t size) {
  TraceContext* tc = current_trace();
  if (!tc) throw Error("vmap needs an active trace");
  Walk w{*tc, size, nullptr, {}, {}};
  for (size_t i = 0; i < stand_ins.size(); ++i) w.env[tc->value_of(stand_ins[i])] = inputs[i];
  for (ir::Operation* op : ops) w.run(op);
  std::vector<Batched> out;
  for (const Array& y : outputs) {
    if (!y.valid()) throw Error("vmap: the function returned an uninitialized Array");
    auto it = y.is_tracer() ? w.env.find(tc->value_of(y)) : w.env.end();
    out.push_back(it != w.env.end() ? it->second : Batched{y, std::nullopt});
  }
  return out;
}

namespace batching {

std::vector<int64_t> skip_all(const std::vector<int64_t>& dims, int64_t b) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(skip(d, b));
  return out;
}

Shape insert_dim(Shape shape, int64_t at, int64_t size) {
  shape.insert(shape.begin() + at, size);
  return shape;
}

Array move_axis(const Array& x, int64_t from, int64_t to) {
  if (from == to) return x;
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.ndim(); ++d)
    if (d != from) perm.push_back(d);
  perm.insert(perm.begin() + to, from);
  return lax::transpose(x, perm);
}

Array batch_at(const Array& x, Bdim bdim, int64_t size, int64_t to) {
  if (bdim) return move_axis(x, *bdim, to);
  std::vector<int64_t> dims(static_cast<size_t>(x.ndim()));
  std::iota(dims.begin(), dims.end(), 0);
  return lax::broadcast_in_dim(x, insert_dim(x.shape(), to, size), skip_all(dims, to));
}

std::vector<Batched> at_front(const std::vector<Array>& results) {
  std::vector<Batched> out;
  for (const Array& r : results) out.push_back(Batched{r, 0});
  return out;
}

std::vector<ir::Type> batched_types(const ir::Operation& op, int64_t size, int64_t at) {
  std::vector<ir::Type> out;
  for (const auto& r : op.results)
    out.push_back(ir::Type::tensor(insert_dim(r->type.shape, at, size), r->type.dtype));
  return out;
}

std::vector<Array> rebind(const ir::Operation& op, const std::vector<Array>& operands,
                          const std::vector<ir::Type>& result_types,
                          const std::vector<ir::NamedAttribute>& overrides) {
  OpSpec s;
  s.name = op.name;
  s.attributes = op.attributes;
  for (const auto& o : overrides) {
    bool replaced = false;
    for (auto& a : s.attributes)
      if (a.name == o.name) {
        a.value = o.value;
        replaced = true;
      }
    if (!replaced) s.attributes.push_back(o);
  }
  s.result_types = result_types;
  for (const auto& region : op.regions) {
    const ir::Region* src = region.get();
    s.regions.push_back([src](TraceContext&, ir::Block& block) {
      std::unordered_map<const ir::Value*, ir::Value*> map;
      vjp::clone_block(src->front(), block, map);
    });
  }
  return trace::bind(s, operands);
}

lax::Computation region_computation(const ir::Operation& op) {
  const ir::Block* body = &op.regions.at(0)->front();
  return [body](const std::vector<Array>& args) {
    TraceContext* tc = current_trace();
    std::unordered_map<const ir::Value*, Array> env;
    for (size_t i = 0; i < body->arguments.size() && i < args.size(); ++i)
      env[body->arguments[i].get()] = args[i];
    auto get = [&](ir::Value* v) {
      auto it = env.find(v);
      return it != env.end() ? it->second : tc->tracer(v, false);
    };
    for (const auto& o : body->ops) {
      std::vector<Array> operands;
      for (ir::Value* v : o->operands) operands.push_back(get(v));
      if (o->name == "stablehlo.return") return operands;
      std::vector<ir::Type> types;
      for (const auto& r : o->results) types.push_back(r->type);
      const std::vector<Array> rs = rebind(*o, operands, types);
      for (size_t i = 0; i < rs.size(); ++i) env[o->result(i)] = rs[i];
    }
    throw Error("internal error: a region without stablehlo.return");
  };
}

std::vector<Batched> batch_values(const ir::Block& block,
                                  const std::unordered_map<const ir::Value*, Batched>& seeds,
                                  const std::vector<const ir::Value*>& outputs, const Lookup& outer,
                                  int64_t size) {
  TraceContext* tc = current_trace();
  if (!tc) throw Error("internal error: vmap needs an active trace");
  Walk w{*tc, size, outer, seeds, {}};
  for (const auto& a : block.arguments) w.local.insert(a.get());
  for (const auto& op : block.ops)
    for (const auto& r : op->results) w.local.insert(r.get());
  for (const auto& op : block.ops)
    if (op->name != "stablehlo.return" &&
        (op->results.empty() ||
         !std::all_of(op->results.begin(), op->results.end(),
                      [&](const auto& r) { return seeds.count(r.get()) > 0; })))
      w.run(op.get());
  std::vector<Batched> out;
  for (const ir::Value* v : outputs) {
    if (w.local.count(v) && !w.env.count(v))
      throw Error("internal error: vmap could not batch a value of a region from the given ones");
    out.push_back(w.get(const_cast<ir::Value*>(v)));
  }
  return out;
}

std::vector<Batched> batch_block(const ir::Block& block, const std::vector<Batched>& args,
                                 const Lookup& outer, int64_t size) {
  std::unordered_map<const ir::Value*, Batched> seeds;
  for (size_t i = 0; i < args.size(); ++i) seeds[block.arguments.at(i).get()] = args[i];
  const ir::Operation& ret = *block.ops.back();
  if (ret.name != "stablehlo.return")
    throw Error("internal error: a region without stablehlo.return");
  return batch_values(block, seeds, {ret.operands.begin(), ret.operands.end()}, outer, size);
}

std::vector<bool> batched_results(const ir::Block& block, const std::vector<bool>& args,
                                  const Lookup& outer) {
  std::unordered_set<const ir::Value*> local, batched;
  for (size_t i = 0; i < block.arguments.size(); ++i) {
    local.insert(block.arguments[i].get());
    if (args.at(i)) batched.insert(block.arguments[i].get());
  }
  auto is_batched = [&](ir::Value* v) {
    return local.count(v) ? batched.count(v) > 0 : outer(v).bdim.has_value();
  };
  for (const auto& op : block.ops) {
    bool any = false;
    for (ir::Value* v : op->operands) any = any || is_batched(v);
    if (op->name == "stablehlo.return") {
      std::vector<bool> out;
      for (ir::Value* v : op->operands) out.push_back(is_batched(v));
      return out;
    }
    if (!op->regions.empty())
      for (ir::Value* v : region_captures(*op)) any = any || is_batched(v);
    for (const auto& r : op->results) {
      local.insert(r.get());
      if (any) batched.insert(r.get());
    }
  }
  throw Error("internal error: a region without stablehlo.return");
}

void unsupported(const ir::Operation& op, const std::string& what) {
  throw Error("vmap: no batching rule for " + op.name + " with " + what);
}

}  // namespace batching
}  // namespace trace
}  // namespace cujax
