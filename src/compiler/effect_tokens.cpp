#include "compiler/effect_tokens.h"

#include <string>

#include "cujax/core/error.h"

namespace cujax::compiler {

bool main_has_tokens(const ir::Module& module) {
  const ir::Function* main = module.lookup("main");
  if (!main) return false;
  for (const ir::Type& t : main->arg_types())
    if (t.is_token) return true;
  for (const ir::Type& t : main->result_types)
    if (t.is_token) return true;
  return false;
}

std::unique_ptr<ir::Module> drop_main_tokens(std::unique_ptr<ir::Module> module) {
  if (!main_has_tokens(*module)) return module;
  ir::Function* inner = module->lookup("main");
  std::string name = "main_with_effect_tokens";
  while (module->lookup(name)) name += "_";
  inner->name = name;
  inner->visibility = "private";
  const std::vector<ir::Type> args = inner->arg_types();
  const std::vector<ir::Type> results = inner->result_types;
  inner->arg_attrs.resize(args.size());
  inner->result_attrs.resize(results.size());

  ir::Function& main = module->add_function("main");
  main.visibility = "public";
  ir::Block& entry = main.body.blocks.empty() ? main.body.add_block() : main.entry();
  std::vector<ir::Value*> operands;
  ir::Value* token = nullptr;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_token) {
      if (!token) {
        auto op = ir::make_op("stablehlo.after_all", {}, {ir::Type::token()});
        token = entry.push_back(std::move(op))->result();
      }
      operands.push_back(token);
      continue;
    }
    operands.push_back(entry.add_argument(args[i]));
    main.arg_attrs.push_back(inner->arg_attrs[i]);
  }
  auto call = ir::make_op("func.call", operands, results);
  call->set_attr("callee", ir::Attribute::symbol(name));
  ir::Operation* c = entry.push_back(std::move(call));
  std::vector<ir::Value*> out;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].is_token) continue;
    out.push_back(c->result(i));
    main.result_types.push_back(results[i]);
    main.result_attrs.push_back(inner->result_attrs[i]);
  }
  entry.push_back(ir::make_op("func.return", out, {}));
  return module;
}

}  // namespace cujax::compiler
