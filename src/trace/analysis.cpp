#include "trace/analysis.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "compiler/op_cost.h"
#include "profiler/source_location.h"

namespace cujax::trace {

namespace {

int64_t bytes_of(const ir::Type& t) {
  return t.is_token ? 0 : t.num_elements() * static_cast<int64_t>(size_of(t.dtype));
}

void count(const ir::Module& module, const ir::Block& block, CostAnalysis& cost,
           std::set<const ir::Function*>& active) {
  for (const auto& op : block.ops) {
    const compiler::OpCost c = compiler::op_cost(*op);
    cost.flops += c.flops;
    cost.transcendentals += c.transcendentals;
    cost.bytes_accessed += c.bytes;
    if (op->name == "func.call") {
      if (const ir::Attribute* callee = op->attr("callee"))
        if (const ir::Function* fn = module.lookup(callee->text); fn && !active.count(fn)) {
          active.insert(fn);
          count(module, fn->entry(), cost, active);
          active.erase(fn);
        }
    }
    if (op->name != "stablehlo.reduce" && op->name != "stablehlo.reduce_window" &&
        op->name != "stablehlo.scatter" && op->name != "stablehlo.sort" &&
        op->name != "stablehlo.select_and_scatter")
      for (const auto& r : op->regions)
        for (const auto& b : r->blocks) count(module, *b, cost, active);
  }
}

}  // namespace

CostAnalysis cost_analysis(const ir::Module& module) {
  CostAnalysis cost;
  const ir::Function* main = module.lookup("main");
  if (!main) return cost;
  std::set<const ir::Function*> active{main};
  count(module, main->entry(), cost, active);
  return cost;
}

namespace {

// The liveness walk over @main's entry block behind memory_analysis. A value lives from its
// definition to its last use; results of @main live to the end, and so do arguments, which the
// caller holds, except donated ones. With `live`, it records the buffers alive (a value and its
// bytes) and stops right after op `stop_at` allocated its results (-1: before the first op).
struct Liveness {
  MemoryAnalysis m;
  long peak_at = -1;  // the first op whose results reached the peak
};

Liveness walk(const ir::Function& main, long stop_at = -2,
              std::unordered_map<const ir::Value*, int64_t>* live_set = nullptr) {
  Liveness out;
  MemoryAnalysis& m = out.m;
  const ir::Block& entry = main.entry();
  for (const auto& a : entry.arguments) m.argument_size_in_bytes += bytes_of(a->type);
  for (const auto& t : main.result_types) m.output_size_in_bytes += bytes_of(t);
  if (live_set)
    for (const auto& a : entry.arguments) (*live_set)[a.get()] = bytes_of(a->type);
  std::unordered_map<const ir::Value*, size_t> last_use;
  for (size_t i = 0; i < entry.ops.size(); ++i)
    for (const auto* v : entry.ops[i]->operands) last_use[v] = i;
  std::set<const ir::Value*> outputs;
  const ir::Operation* ret = entry.terminator();
  if (ret)
    for (const auto* v : ret->operands) outputs.insert(v);
  // A donated argument aliases the first result of its type not taken yet (as XLA pairs
  // input_output_alias): that result is written into the argument's memory, so it adds none.
  std::unordered_map<const ir::Value*, const ir::Value*> alias_of_result;
  if (ret) {
    std::set<size_t> taken;
    for (size_t a = 0; a < entry.arguments.size(); ++a) {
      bool donor = false;
      if (a < main.arg_attrs.size())
        for (const auto& attr : main.arg_attrs[a])
          donor = donor || attr.name == "jax.buffer_donor" || attr.name == "tf.aliasing_output";
      if (!donor) continue;
      const ir::Value* arg = entry.arguments[a].get();
      for (size_t r = 0; r < ret->operands.size(); ++r) {
        const ir::Value* result = ret->operands[r];
        if (taken.count(r) || result->type != arg->type || !result->defining_op ||
            alias_of_result.count(result))
          continue;
        taken.insert(r);
        alias_of_result[result] = arg;
        m.alias_size_in_bytes += bytes_of(arg->type);
        break;
      }
    }
  }
  std::set<const ir::Value*> aliased_args;
  for (const auto& [result, arg] : alias_of_result) aliased_args.insert(arg);
  int64_t live = m.argument_size_in_bytes, peak = live, temp_peak = 0, temp_live = 0;
  if (stop_at == -1) return out;
  std::vector<std::vector<const ir::Value*>> dies(entry.ops.size());
  for (const auto& [v, i] : last_use)
    if (!outputs.count(v) && (v->defining_op || aliased_args.count(v))) dies[i].push_back(v);
  std::set<const ir::Value*> freed;  // donated arguments whose memory went back
  for (size_t i = 0; i < entry.ops.size(); ++i) {
    for (const auto& r : entry.ops[i]->results) {
      auto alias = alias_of_result.find(r.get());
      // Written into its donated argument's memory while the argument lives (in place);
      // after the argument died, a new buffer as any other.
      if (alias != alias_of_result.end() && !freed.count(alias->second)) {
        freed.insert(alias->second);  // the memory now belongs to the result
        if (live_set) {
          live_set->erase(alias->second);
          (*live_set)[r.get()] = bytes_of(r->type);
        }
        continue;
      }
      live += bytes_of(r->type);
      if (live_set) (*live_set)[r.get()] = bytes_of(r->type);
      if (!outputs.count(r.get())) temp_live += bytes_of(r->type);
    }
    if (live > peak) out.peak_at = static_cast<long>(i);
    peak = std::max(peak, live);
    temp_peak = std::max(temp_peak, temp_live);
    if (static_cast<long>(i) == stop_at) return out;
    for (const auto* v : dies[i]) {
      if (aliased_args.count(v)) {
        // A donated argument's memory is freed at its last use, unless its result took it.
        if (!freed.insert(v).second) continue;
        live -= bytes_of(v->type);
        if (live_set) live_set->erase(v);
        continue;
      }
      live -= bytes_of(v->type);
      temp_live -= bytes_of(v->type);
      if (live_set) live_set->erase(v);
    }
  }
  m.temp_size_in_bytes = temp_peak;
  m.peak_memory_in_bytes = peak;
  return out;
}

std::string type_text(const ir::Type& t) {
  std::string s = std::string(mlir_name(t.dtype)) + "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
  return s + "]";
}

}  // namespace

MemoryAnalysis memory_analysis(const ir::Module& module) {
  const ir::Function* main = module.lookup("main");
  return main ? walk(*main).m : MemoryAnalysis{};
}

profiler::MemoryProfile memory_profile(const ir::Module& module, const std::string& platform) {
  profiler::MemoryProfile p;
  p.program = module.name;
  p.platform = platform;
  const ir::Function* main = module.lookup("main");
  if (!main) return p;
  const Liveness plan = walk(*main);
  p.peak_bytes = plan.m.peak_memory_in_bytes;
  p.argument_bytes = plan.m.argument_size_in_bytes;
  p.output_bytes = plan.m.output_size_in_bytes;
  p.alias_bytes = plan.m.alias_size_in_bytes;
  p.temp_bytes = plan.m.temp_size_in_bytes;
  std::unordered_map<const ir::Value*, int64_t> live;
  walk(*main, plan.peak_at, &live);
  const ir::Block& entry = main->entry();
  std::unordered_map<const ir::Operation*, size_t> index;
  for (size_t i = 0; i < entry.ops.size(); ++i) index[entry.ops[i].get()] = i;
  std::set<const ir::Value*> outputs;
  if (const ir::Operation* ret = entry.terminator())
    outputs.insert(ret->operands.begin(), ret->operands.end());
  const profiler::LocationTable locations(module.aliases);
  auto describe = [&](const ir::Operation& op) {
    return op.name + " (op " + std::to_string(index[&op]) + " of @main" +
           (op.line ? ", line " + std::to_string(op.line) : std::string()) + ")";
  };
  if (plan.peak_at >= 0) p.peak_op = describe(*entry.ops[plan.peak_at]);
  for (const auto& [v, bytes] : live) {
    profiler::LiveBuffer b;
    b.bytes = bytes;
    b.type = type_text(v->type);
    if (!v->defining_op) {
      size_t a = 0;
      while (a < entry.arguments.size() && entry.arguments[a].get() != v) ++a;
      b.kind = "argument";
      b.op = "argument " + std::to_string(a);
      b.source = locations.resolve(v->loc);
    } else {
      b.kind = outputs.count(v) ? "output" : "temporary";
      b.op = describe(*v->defining_op);
      b.source = locations.resolve(v->defining_op->loc);
    }
    p.live_at_peak.push_back(std::move(b));
  }
  std::sort(p.live_at_peak.begin(), p.live_at_peak.end(),
            [](const profiler::LiveBuffer& a, const profiler::LiveBuffer& b) {
              return a.bytes != b.bytes ? a.bytes > b.bytes : a.op < b.op;
            });
  if (p.live_at_peak.size() > profiler::MemoryProfile::kMaxLiveBuffers) {
    profiler::LiveBuffer rest;
    rest.kind = "rest";
    const size_t keep = profiler::MemoryProfile::kMaxLiveBuffers - 1;
    for (size_t i = keep; i < p.live_at_peak.size(); ++i) rest.bytes += p.live_at_peak[i].bytes;
    rest.type = std::to_string(p.live_at_peak.size() - keep) + " smaller buffers";
    p.live_at_peak.resize(keep);
    p.live_at_peak.push_back(std::move(rest));
  }
  return p;
}

}  // namespace cujax::trace
