// The narrow element types (int4, float8_e4m3fn, ...) on the device: after
// compiler::widen_narrow_types only constants and converts keep narrow values, and these run
// here with the CPU backend's per-element code (core/narrow_convert.h). bitcast_convert of
// narrow values (bit fields packed into bytes) and the control flow that carries them take the
// host path.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cujax/core/dtype.h"

namespace cujax::cuda {

// out = convert(in) for the pairs compiler::is_native_convert admits with a narrow side.
void launch_narrow_convert(DType from, DType to, const void* in, void* out, int64_t n,
                           cudaStream_t s);

}  // namespace cujax::cuda
