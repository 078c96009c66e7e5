#include "compiler/module_copy.h"

namespace cujax::compiler {

std::unique_ptr<ir::Module> copy_signatures(const ir::Module& module) {
  auto out = std::make_unique<ir::Module>();
  out->name = module.name;
  out->attributes = module.attributes;
  out->loc = module.loc;
  out->aliases = module.aliases;
  for (const auto& f : module.functions) {
    ir::Function& nf = out->add_function(f->name);
    nf.visibility = f->visibility;
    nf.arg_attrs = f->arg_attrs;
    nf.result_types = f->result_types;
    nf.result_attrs = f->result_attrs;
    nf.attributes = f->attributes;
    nf.loc = f->loc;
    nf.body.blocks.clear();
  }
  return out;
}

}  // namespace cujax::compiler
