// What decides whether an op takes the complex kernels (complex_kernels.cpp) on the CPU, and the
// host path on backends without complex kernels.
#pragma once

#include "cujax/ir/ir.h"

namespace cujax::cpu {

// Whether an operand or result of `op` has a complex element type (tokens aside).
bool touches_complex(const ir::Operation& op);

}  // namespace cujax::cpu
