#include "backends/cpu/kernels.h"

namespace cujax::cpu {

void register_shape_kernels(KernelRegistry&) {}

}  // namespace cujax::cpu
