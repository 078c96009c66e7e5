// Device kernels for the ops that cuda_backend.cpp's device_kernel() does not cover (constants,
// clamp, gather, scatter, dynamic slices, sort, control flow, ...), chosen once per op at
// compile time, and the host-fallback switch's reporting.
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/program.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax::cuda {

struct OpKernelContext {
  const ir::Module& module;
  const std::shared_ptr<Device>& device;  // null: compiling only (no GPU), nothing runs
  const runtime::CompileOptions& options;
  const SpmdContext* spmd;  // set for one device of an SPMD program: no device control flow
  // Where a control-flow kernel puts the programs it runs, for describe().
  std::vector<std::shared_ptr<const Program>>* nested;
};

// A device kernel for `op`, or an empty function when it has none for these types/attributes.
DeviceKernel op_kernel(const ir::Operation& op, const OpKernelContext& ctx);

// A device kernel for an op on narrow values (int4, float8_e4m3fn, ...) that
// compiler::widen_narrow_types leaves: constants and the converts to and from wide types; an
// empty function for any other (bitcast_convert, control flow: the host path).
DeviceKernel narrow_kernel(const ir::Operation& op, const OpKernelContext& ctx);

// Whether an f32 dot_general may use TensorFloat-32 (10-bit mantissa products, f32 sums), as
// jax_default_matmul_precision decides: the op's precision_config when it says HIGH or HIGHEST
// (HIGH allows TF32, HIGHEST does not), else CUJAX_DEFAULT_MATMUL_PRECISION ("default", "high",
// "tensorfloat32", "bfloat16" allow it; "highest", "float32" do not). Unset, TF32 is off:
// results then match the CPU backend and the conformance suite's 3-ULP checks, where JAX on a
// GPU would default to TF32 and be about 8x faster on f32 products.
bool tf32_allowed(const ir::Operation& op);

// A check.* custom call or op (the conformance suites' assertions): it reads its operands on the
// host by design, so it is not a host fallback.
bool is_check(const ir::Operation& op);

// What the host-fallback switch does for `op`, which has no device kernel: logs it (once per op
// name for the process), throws UnsupportedError naming it and its location, or nothing.
void report_host_fallback(const ir::Operation& op, runtime::HostFallback mode);

}  // namespace cujax::cuda
