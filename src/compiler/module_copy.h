// What the passes that rewrite function bodies (quantized-type lowering, chlo decomposition,
// narrow-type widening, outlining) copy unchanged from the module they read.
#pragma once

#include <memory>

#include "cujax/ir/ir.h"

namespace cujax::compiler {

// A module with `module`'s name, attributes, location and aliases, and for each of its
// functions one with the same name and signature (visibility, argument and result attributes,
// result types, attributes, location) whose body has no blocks yet.
std::unique_ptr<ir::Module> copy_signatures(const ir::Module& module);

}  // namespace cujax::compiler
