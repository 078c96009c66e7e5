#include "trace/passes.h"

#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "cujax/ir/printer.h"
#include "cujax/runtime/backend.h"

namespace cujax::trace {

namespace {

bool has_side_effects(const ir::Operation& op) {
  if (op.name == "func.return" || op.name == "stablehlo.return" || op.name == "func.call")
    return true;  // calls may reach custom calls with effects
  if (op.name == "stablehlo.custom_call") return true;
  if (op.name == "stablehlo.rng_bit_generator") return false;
  if (op.name.rfind("stablehlo.", 0) != 0) return true;  // unknown dialects: keep
  for (const auto& r : op.regions)
    for (const auto& b : r->blocks)
      for (const auto& inner : b->ops)
        if (inner->name != "stablehlo.return" && has_side_effects(*inner)) return true;
  return false;
}

template <class F>
void for_each_block(ir::Region& region, F&& f) {
  for (auto& b : region.blocks) {
    f(*b);
    for (auto& op : b->ops)
      for (auto& r : op->regions) for_each_block(*r, f);
  }
}

template <class F>
void for_each_block(ir::Module& module, F&& f) {
  for (auto& fn : module.functions) for_each_block(fn->body, f);
}

void replace_uses(ir::Module& module, const std::unordered_map<ir::Value*, ir::Value*>& repl) {
  if (repl.empty()) return;
  for_each_block(module, [&](ir::Block& b) {
    for (auto& op : b.ops)
      for (auto& v : op->operands) {
        auto it = repl.find(v);
        if (it != repl.end()) v = it->second;
      }
  });
}

std::string attributes_key(const ir::Operation& op) {
  std::string key;
  for (const auto& a : op.attributes) key += a.name + "=" + ir::print_attribute(*a.value) + ";";
  return key;
}

}  // namespace

int64_t eliminate_dead_code(ir::Module& module) {
  int64_t removed = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    std::unordered_set<const ir::Value*> used;
    for_each_block(module, [&](ir::Block& b) {
      for (auto& op : b.ops)
        for (auto* v : op->operands) used.insert(v);
    });
    for_each_block(module, [&](ir::Block& b) {
      for (size_t i = b.ops.size(); i-- > 0;) {
        ir::Operation& op = *b.ops[i];
        if (has_side_effects(op)) continue;
        bool live = false;
        for (const auto& r : op.results) live = live || used.count(r.get());
        if (live) continue;
        b.ops.erase(b.ops.begin() + static_cast<std::ptrdiff_t>(i));
        ++removed;
        changed = true;
      }
    });
  }
  return removed;
}

int64_t eliminate_common_subexpressions(ir::Module& module) {
  int64_t merged = 0;
  std::unordered_map<ir::Value*, ir::Value*> repl;
  for_each_block(module, [&](ir::Block& b) {
    std::map<std::string, ir::Operation*> seen;
    for (auto& op : b.ops) {
      for (auto& v : op->operands) {
        auto it = repl.find(v);
        if (it != repl.end()) v = it->second;
      }
      if (!op->regions.empty() || has_side_effects(*op) || op->results.empty()) continue;
      std::string key = op->name + "(";
      for (auto* v : op->operands) key += std::to_string(reinterpret_cast<uintptr_t>(v)) + ",";
      key += ")" + attributes_key(*op) + ":";
      for (const auto& r : op->results) key += r->type.str() + ",";
      auto [it, inserted] = seen.emplace(key, op.get());
      if (inserted) continue;
      for (size_t i = 0; i < op->results.size(); ++i) repl[op->result(i)] = it->second->result(i);
      ++merged;
    }
  });
  replace_uses(module, repl);
  return merged;
}

int64_t fold_constants(ir::Module& module, int64_t max_elements) {
  int64_t folded = 0;
  const runtime::Backend& cpu = runtime::get_backend("cpu");
  std::vector<std::unique_ptr<ir::Operation>> replaced;  // kept alive until uses are rewritten
  for_each_block(module, [&](ir::Block& b) {
    for (size_t i = 0; i < b.ops.size(); ++i) {
      ir::Operation& op = *b.ops[i];
      if (op.name == "stablehlo.constant" || !op.regions.empty() || has_side_effects(op) ||
          op.operands.empty() || op.results.size() != 1 || op.result(0)->type.is_token ||
          op.result(0)->type.num_elements() > max_elements)
        continue;
      std::vector<HostTensor> inputs;
      for (auto* v : op.operands) {
        if (!v->defining_op || v->defining_op->name != "stablehlo.constant") break;
        inputs.push_back(v->defining_op->attr("value")->tensor);
      }
      if (inputs.size() != op.operands.size()) continue;
      // Evaluate the op alone on the CPU backend: the reference semantics, by construction.
      ir::Module one;
      ir::Function& fn = one.add_function("main");
      std::vector<ir::Value*> args;
      for (auto* v : op.operands) args.push_back(fn.entry().add_argument(v->type));
      auto copy = ir::make_op(op.name, args, {op.result(0)->type});
      copy->attributes = op.attributes;
      ir::Value* r = fn.entry().push_back(std::move(copy))->result(0);
      fn.entry().push_back(ir::make_op("func.return", {r}, {}));
      fn.result_types = {r->type};
      std::vector<HostTensor> out;
      try {
        std::vector<runtime::DeviceBuffer> args;
        for (const HostTensor& t : inputs) args.push_back(runtime::DeviceBuffer::on_cpu(t));
        for (const auto& r : cpu.compile(one, "main")->execute(std::move(args)))
          out.push_back(r.as_host_tensor());
      } catch (const std::exception&) {
        continue;  // leave ops the backend rejects to fail (or not) at run time
      }
      auto constant = ir::make_op("stablehlo.constant", {}, {op.result(0)->type});
      constant->set_attr("value", ir::Attribute::dense_elements(out.at(0)));
      constant->parent = &b;
      constant->loc = op.loc;
      const std::unordered_map<ir::Value*, ir::Value*> repl{{op.result(0), constant->result(0)}};
      replaced.push_back(std::move(b.ops[i]));
      b.ops[i] = std::move(constant);
      replace_uses(module, repl);
      ++folded;
    }
  });
  return folded;
}

PassStatistics optimize(ir::Module& module) {
  PassStatistics s;
  s.folded_constants = fold_constants(module);
  s.merged_common = eliminate_common_subexpressions(module);
  s.removed_dead = eliminate_dead_code(module);
  return s;
}

}  // namespace cujax::trace
