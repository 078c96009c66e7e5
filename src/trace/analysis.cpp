#include "trace/analysis.h"

#include <set>
#include <unordered_map>

namespace cujax::trace {

namespace {

int64_t bytes_of(const ir::Type& t) {
  return t.is_token ? 0 : t.num_elements() * static_cast<int64_t>(size_of(t.dtype));
}

bool is_transcendental(const std::string& name) {
  static const std::set<std::string> kOps = {
      "stablehlo.exponential", "stablehlo.exponential_minus_one",
      "stablehlo.log",         "stablehlo.log_plus_one",
      "stablehlo.logistic",    "stablehlo.tanh",
      "stablehlo.tan",         "stablehlo.sine",
      "stablehlo.cosine",      "stablehlo.atan2",
      "stablehlo.power",       "stablehlo.sqrt",
      "stablehlo.rsqrt",       "stablehlo.cbrt"};
  return kOps.count(name) > 0;
}

bool is_arithmetic(const std::string& name) {
  static const std::set<std::string> kOps = {"stablehlo.add",
                                             "stablehlo.subtract",
                                             "stablehlo.multiply",
                                             "stablehlo.divide",
                                             "stablehlo.remainder",
                                             "stablehlo.maximum",
                                             "stablehlo.minimum",
                                             "stablehlo.negate",
                                             "stablehlo.abs",
                                             "stablehlo.compare",
                                             "stablehlo.select",
                                             "stablehlo.clamp",
                                             "stablehlo.sign",
                                             "stablehlo.floor",
                                             "stablehlo.ceil",
                                             "stablehlo.round_nearest_even",
                                             "stablehlo.round_nearest_afz",
                                             "stablehlo.and",
                                             "stablehlo.or",
                                             "stablehlo.xor",
                                             "stablehlo.not"};
  return kOps.count(name) > 0;
}

void count(const ir::Module& module, const ir::Block& block, CostAnalysis& cost,
           std::set<const ir::Function*>& active) {
  for (const auto& op : block.ops) {
    int64_t out_elems = 0;
    for (const auto& r : op->results) out_elems += r->type.num_elements();
    if (op->name == "stablehlo.dot_general") {
      const auto& lhs = op->operands[0]->type;
      int64_t k = 1;
      if (const ir::Attribute* dn = op->attr("dot_dimension_numbers"))
        if (const ir::Attribute* c = dn->field("lhs_contracting_dimensions"))
          for (int64_t d : ir::as_ints(*c)) k *= lhs.shape.at(d);
      cost.flops += 2.0 * static_cast<double>(out_elems) * static_cast<double>(k);
    } else if (op->name == "stablehlo.convolution") {
      const auto& kernel = op->operands[1]->type;
      // Each output element reads one kernel window of input features.
      int64_t window = kernel.num_elements();
      if (const ir::Attribute* dn = op->attr("dimension_numbers"))
        if (const ir::Attribute* o = dn->field("kernel_output_feature_dimension"))
          window /= std::max<int64_t>(1, kernel.shape.at(o->integer));
      cost.flops += 2.0 * static_cast<double>(out_elems) * static_cast<double>(window);
    } else if (op->name == "stablehlo.reduce" || op->name == "stablehlo.reduce_window") {
      for (const auto& v : op->operands)
        cost.flops += static_cast<double>(v->type.num_elements()) / 2;
    } else if (is_transcendental(op->name)) {
      cost.transcendentals += static_cast<double>(out_elems);
    } else if (is_arithmetic(op->name)) {
      cost.flops += static_cast<double>(out_elems);
    }
    if (op->name != "stablehlo.constant" && op->name != "func.call") {
      for (const auto* v : op->operands)
        cost.bytes_accessed += static_cast<double>(bytes_of(v->type));
      for (const auto& r : op->results)
        cost.bytes_accessed += static_cast<double>(bytes_of(r->type));
    }
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

MemoryAnalysis memory_analysis(const ir::Module& module) {
  MemoryAnalysis m;
  const ir::Function* main = module.lookup("main");
  if (!main) return m;
  const ir::Block& entry = main->entry();
  for (const auto& a : entry.arguments) m.argument_size_in_bytes += bytes_of(a->type);
  for (const auto& t : main->result_types) m.output_size_in_bytes += bytes_of(t);
  // Liveness over the entry block: a value lives from its definition to its last use; results
  // of @main live to the end, and so do arguments, which the caller holds, except donated ones.
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
      if (a < main->arg_attrs.size())
        for (const auto& attr : main->arg_attrs[a])
          donor = donor || attr.name == "jax.buffer_donor" || attr.name == "tf.aliasing_output";
      if (!donor) continue;
      const ir::Value* arg = entry.arguments[a].get();
      for (size_t r = 0; r < ret->operands.size(); ++r) {
        const ir::Value* out = ret->operands[r];
        if (taken.count(r) || out->type != arg->type || !out->defining_op ||
            alias_of_result.count(out))
          continue;
        taken.insert(r);
        alias_of_result[out] = arg;
        m.alias_size_in_bytes += bytes_of(arg->type);
        break;
      }
    }
  }
  std::set<const ir::Value*> aliased_args;
  for (const auto& [out, arg] : alias_of_result) aliased_args.insert(arg);
  int64_t live = m.argument_size_in_bytes, peak = live, temp_peak = 0, temp_live = 0;
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
        continue;
      }
      live += bytes_of(r->type);
      if (!outputs.count(r.get())) temp_live += bytes_of(r->type);
    }
    peak = std::max(peak, live);
    temp_peak = std::max(temp_peak, temp_live);
    for (const auto* v : dies[i]) {
      if (aliased_args.count(v)) {
        // A donated argument's memory is freed at its last use, unless its result took it.
        if (!freed.insert(v).second) continue;
        live -= bytes_of(v->type);
        continue;
      }
      live -= bytes_of(v->type);
      temp_live -= bytes_of(v->type);
    }
  }
  m.temp_size_in_bytes = temp_peak;
  m.peak_memory_in_bytes = peak;
  return m;
}

}  // namespace cujax::trace
