#include "compiler/backend_passes.h"

#include "compiler/annotations.h"
#include "compiler/chlo_decompose.h"
#include "compiler/narrow_types.h"
#include "compiler/quantized.h"

namespace cujax::compiler {

std::unique_ptr<ir::Module> run_backend_passes(const ir::Module& module) {
  std::unique_ptr<ir::Module> lowered =
      has_annotations(module) ? lower_annotations(module) : nullptr;
  if (has_quantized(lowered ? *lowered : module))
    lowered = lower_quantized_types(lowered ? *lowered : module);
  if (has_chlo(lowered ? *lowered : module)) lowered = decompose_chlo(lowered ? *lowered : module);
  if (has_narrow(lowered ? *lowered : module))
    lowered = widen_narrow_types(lowered ? *lowered : module);
  return lowered;
}

}  // namespace cujax::compiler
