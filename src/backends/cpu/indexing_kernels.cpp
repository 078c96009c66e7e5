#include "backends/cpu/kernels.h"

namespace cujax::cpu {

void register_indexing_kernels(KernelRegistry&) {}

}  // namespace cujax::cpu
