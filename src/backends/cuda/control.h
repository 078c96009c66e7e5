// while, case and func.call on the device: their regions and callees are compiled into cuda
// programs of their own, which run on the same stream. A while loop's predicate and a case's
// index are read back to the host (one scalar, one stream synchronisation per iteration or
// branch: about 10-20 us on current GPUs, small next to a loop body of real work); CUDA's
// conditional graph nodes would keep them on the device once executables run as graphs.
#pragma once

#include "backends/cuda/op_kernels.h"

namespace cujax::cuda {

// A kernel for stablehlo.while, stablehlo.case or func.call, or empty for any other op; it
// adds the programs it runs to ctx.nested.
DeviceKernel control_kernel(const ir::Operation& op, const OpKernelContext& ctx);

}  // namespace cujax::cuda
