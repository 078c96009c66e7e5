#include "compiler/outline.h"

#include "compiler/module_copy.h"
#include "cujax/core/error.h"

namespace cujax::compiler {

namespace {

ir::Value* lookup(ValueMap& map, const ir::Value* v) {
  auto it = map.find(v);
  if (it == map.end()) throw Error("outlining: a value is used outside its scope");
  return it->second;
}

void clone_region(const ir::Region& from, ir::Region& to, ValueMap& map) {
  for (const auto& block : from.blocks) {
    ir::Block& nb = to.add_block();
    for (const auto& a : block->arguments) {
      ir::Value* na = nb.add_argument(a->type);
      na->name_hint = a->name_hint;
      na->loc = a->loc;
      map[a.get()] = na;
    }
    for (const auto& o : block->ops) clone_op(*o, map, nb);
  }
}

}  // namespace

ir::Operation& clone_op(const ir::Operation& op, ValueMap& map, ir::Block& into) {
  std::vector<ir::Value*> operands;
  for (const ir::Value* v : op.operands) operands.push_back(lookup(map, v));
  std::vector<ir::Type> types;
  for (const auto& r : op.results) types.push_back(r->type);
  auto copy = ir::make_op(op.name, std::move(operands), types);
  copy->attributes = op.attributes;
  copy->loc = op.loc;
  copy->line = op.line;
  copy->column = op.column;
  for (const auto& region : op.regions) clone_region(*region, copy->add_region(), map);
  for (size_t i = 0; i < op.results.size(); ++i) {
    copy->results[i]->name_hint = op.results[i]->name_hint;
    map[op.results[i].get()] = copy->results[i].get();
  }
  return *into.push_back(std::move(copy));
}

ir::Function& outline_group(ir::Module& module, const std::string& name, const ir::Block& block,
                            const FusionGroup& group) {
  ir::Function& f = module.add_function(name);
  f.visibility = "private";
  ir::Block& body = f.entry();
  ValueMap map;
  for (const ir::Value* v : group.inputs) map[v] = body.add_argument(v->type);
  f.arg_attrs.resize(group.inputs.size());
  for (size_t m : group.ops) clone_op(*block.ops[m], map, body);
  std::vector<ir::Value*> results;
  for (const ir::Value* v : group.outputs) {
    results.push_back(lookup(map, v));
    f.result_types.push_back(v->type);
  }
  f.result_attrs.resize(group.outputs.size());
  body.push_back(ir::make_op("func.return", std::move(results), {}));
  return f;
}

std::unique_ptr<ir::Module> outline_plan(const ir::Module& module, const ir::Function& fn,
                                         const FusionPlan& plan) {
  std::unique_ptr<ir::Module> out = copy_signatures(module);
  ValueMap map;
  for (size_t i = 0; i < module.functions.size(); ++i)
    if (module.functions[i].get() != &fn)
      clone_region(module.functions[i]->body, out->functions[i]->body, map);
  ir::Function& main = *out->lookup(fn.name);
  const ir::Block& block = fn.entry();
  ir::Block& body = main.body.add_block();
  for (const auto& a : block.arguments) map[a.get()] = body.add_argument(a->type);
  for (const FusionPlan::Item& item : plan.schedule) {
    if (item.group < 0) {
      clone_op(*block.ops[item.op], map, body);
      continue;
    }
    const FusionGroup& g = plan.groups[item.group];
    const std::string name = "fusion_" + std::to_string(item.group);
    outline_group(*out, name, block, g);
    std::vector<ir::Value*> args;
    for (const ir::Value* v : g.inputs) args.push_back(lookup(map, v));
    std::vector<ir::Type> types;
    for (const ir::Value* v : g.outputs) types.push_back(v->type);
    auto call = ir::make_op("func.call", std::move(args), types);
    call->set_attr("callee", ir::Attribute::symbol(name));
    for (size_t i = 0; i < g.outputs.size(); ++i) map[g.outputs[i]] = call->results[i].get();
    body.push_back(std::move(call));
  }
  const size_t num_ops = plan.group_of.size();
  for (size_t i = num_ops; i < block.ops.size(); ++i) clone_op(*block.ops[i], map, body);
  return out;
}

}  // namespace cujax::compiler
