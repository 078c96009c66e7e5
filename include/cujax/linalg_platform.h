// Which platform's custom calls lax.linalg lowers to, as JAX picks its lowering by platform:
// "cpu" gives LAPACK's `lapack_?*_ffi` calls, "cuda" cuSOLVER's `cusolver_*_ffi`, cuSPARSE's
// `cusparse_gtsv2_ffi` and `cu_lu_pivots_to_permutation`, with the operands, layouts,
// backend_config and results JAX's cuda lowering gives them. Both backends run both sets (the
// cpu backend runs the cuda targets on the host; the cuda backend runs the cuda targets on the
// device and the LAPACK ones on the host), so the choice only decides where the work happens.
//
//   {
//     cujax::lax::linalg::LoweringPlatform cuda("cuda");   // as jax.jit(f).trace(x).lower(
//     text = cujax::jit(f).lower(x).as_text();             //   lowering_platforms=("cuda",))
//   }
#pragma once

#include <string>

namespace cujax::lax::linalg {

// The innermost LoweringPlatform on this thread, else default_backend() ("cuda" on a machine
// whose default backend is a GPU, so that jit lowers for where it runs by default).
std::string lowering_platform();

// Sets lowering_platform() for this thread while it lives. Throws Error for a platform other
// than "cpu" or "cuda".
class LoweringPlatform {
 public:
  explicit LoweringPlatform(const std::string& platform);
  ~LoweringPlatform();
  LoweringPlatform(const LoweringPlatform&) = delete;
  LoweringPlatform& operator=(const LoweringPlatform&) = delete;
};

}  // namespace cujax::lax::linalg
