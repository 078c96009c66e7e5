// The rewrites every backend runs on a module before compiling it, in order: placement and
// sharding annotations to the values they annotate (annotations.h), quantized types to
// their stored integers (quantized.h), chlo ops to StableHLO (chlo_decompose.h), narrow types to
// wide ones (narrow_types.h). Each runs only where the module needs it.
#pragma once

#include <memory>

#include "cujax/ir/ir.h"

namespace cujax::compiler {

// The rewritten module, or nullptr when `module` needs none of the rewrites.
std::unique_ptr<ir::Module> run_backend_passes(const ir::Module& module);

}  // namespace cujax::compiler
