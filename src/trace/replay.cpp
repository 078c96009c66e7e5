// Replaying a recorded block op by op (see replay.h).
#include "trace/replay.h"

#include <memory>
#include <unordered_set>

#include "cujax/grad.h"
#include "cujax/trace/trace.h"
#include "trace/autodiff_markers.h"
#include "trace/vjp_rules.h"

namespace cujax::trace {

namespace {

void collect(const ir::Region& region, std::unordered_set<const ir::Value*>& defined,
             std::unordered_set<const ir::Value*>& seen, std::vector<ir::Value*>& out) {
  for (const auto& block : region.blocks) {
    for (const auto& a : block->arguments) defined.insert(a.get());
    for (const auto& op : block->ops) {
      for (ir::Value* v : op->operands)
        if (!defined.count(v) && seen.insert(v).second) out.push_back(v);
      for (const auto& r : op->regions) collect(*r, defined, seen, out);
      for (const auto& r : op->results) defined.insert(r.get());
    }
  }
}

}  // namespace

std::vector<ir::Value*> region_captures(const ir::Operation& op) {
  std::unordered_set<const ir::Value*> defined, seen;
  std::vector<ir::Value*> out;
  for (const auto& r : op.regions) collect(*r, defined, seen, out);
  return out;
}

Array replayed(const ValueEnv& env, const ir::Value* v) {
  auto it = env.find(v);
  if (it != env.end()) return it->second;
  TraceContext* tc = current_trace();
  if (!tc) throw Error("internal error: replay needs an active trace");
  return tc->tracer(const_cast<ir::Value*>(v), false);
}

std::vector<Array> replay_op(const ir::Operation& op, const std::vector<Array>& operands,
                             const std::unordered_map<const ir::Value*, ir::Value*>& captures) {
  if (is_stop_gradient_marker(&op)) return {cujax::stop_gradient(operands[0])};
  auto map = std::make_shared<std::unordered_map<const ir::Value*, ir::Value*>>(captures);
  OpSpec s;
  s.name = op.name;
  s.attributes = op.attributes;
  for (const auto& r : op.results) s.result_types.push_back(r->type);
  for (const auto& region : op.regions) {
    const ir::Region* src = region.get();
    s.regions.push_back(
        [src, map](TraceContext&, ir::Block& b) { vjp::clone_block(src->front(), b, *map); });
  }
  const std::vector<Array> rs = trace::bind(s, operands);
  if (!rs.empty()) vjp::copy_annotations(op, *rs[0].tracer_value()->defining_op, *map);
  return rs;
}

std::vector<Array> replay(const ir::Block& block, ValueEnv& env) {
  TraceContext* tc = current_trace();
  if (!tc) throw Error("internal error: replay needs an active trace");
  std::unordered_set<const ir::Value*> local;
  for (const auto& a : block.arguments) local.insert(a.get());
  for (const auto& op : block.ops)
    for (const auto& r : op->results) local.insert(r.get());
  auto available = [&](const ir::Value* v) { return !local.count(v) || env.count(v); };
  for (const auto& op : block.ops) {
    if (op->name == "stablehlo.return") {
      std::vector<Array> out;
      for (ir::Value* v : op->operands) out.push_back(available(v) ? replayed(env, v) : Array());
      return out;
    }
    const std::vector<ir::Value*> captures = region_captures(*op);
    bool ok = true;
    for (ir::Value* v : op->operands) ok = ok && available(v);
    for (ir::Value* v : captures) ok = ok && available(v);
    if (!ok) continue;
    std::vector<Array> operands;
    for (ir::Value* v : op->operands) operands.push_back(replayed(env, v));
    // Captures that were replayed are remapped inside the copied regions.
    std::unordered_map<const ir::Value*, ir::Value*> map;
    for (ir::Value* v : captures)
      if (env.count(v)) map[v] = tc->value_of(env.at(v));
    const std::vector<Array> rs = replay_op(*op, operands, map);
    for (size_t i = 0; i < rs.size(); ++i) env[op->result(i)] = rs[i];
  }
  throw Error("internal error: a region without stablehlo.return");
}

}  // namespace cujax::trace
