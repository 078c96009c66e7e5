// JAX's cuda linear-algebra custom calls on the device (cusolver_{potrf,getrf,geqrf,orgqr,syevd,
// gesvd,gesvdj,sytrd}_ffi through cuSOLVER, cusparse_gtsv2_ffi through cuSPARSE,
// cu_lu_pivots_to_permutation and cu_threefry2x32_ffi as kernels), lapack_{s,d}trsm_ffi (the
// triangular solve lax.linalg emits on every platform) and stablehlo.cholesky. They
// read the same backend_config fields, layouts and shapes as the cpu backend's host versions
// of the same targets (backends/cpu/linalg_kernels.h) and write the same results, `info`
// included; a call they do not cover gets no kernel and takes the host path, whose factory
// names what is wrong.
#pragma once

#include <string>
#include <vector>

#include "backends/cuda/program.h"
#include "cujax/ir/ir.h"

namespace cujax::cuda {

// A device kernel for `op` (a stablehlo.custom_call to one of device_linalg_targets()), or an
// empty function. Touches no CUDA API until it runs: cuSOLVER/cuSPARSE load on the first call.
DeviceKernel linalg_call_kernel(const ir::Operation& op, Device* device);

// stablehlo.cholesky of f32, f64, complex64 or complex128 [..., n, n] through cuSOLVER's potrf;
// a matrix that is not positive definite becomes all NaN, as on the cpu backend.
DeviceKernel cholesky_kernel(const ir::Operation& op, Device* device);

// The call_target_names linalg_call_kernel runs.
const std::vector<std::string>& device_linalg_targets();

}  // namespace cujax::cuda
