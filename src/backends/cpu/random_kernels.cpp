#include "backends/cpu/kernels.h"

namespace cujax::cpu {

void register_random_kernels(KernelRegistry&) {}

}  // namespace cujax::cpu
