// The VJP and batching rules of lax.linalg's custom calls (private; trace/linalg_rules.cpp).
// The custom_call rules of trace/sdpa_rules.cpp hand these calls over.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cujax/grad.h"
#include "cujax/vmap.h"

namespace cujax::trace {

// The call_target_name of a stablehlo.custom_call ("" when it has none).
std::string custom_call_target(const ir::Operation& op);
// Whether op is a stablehlo.custom_call to a lapack_*_ffi target.
bool is_linalg_call(const ir::Operation& op);
std::vector<std::optional<Array>> linalg_vjp(const VjpArgs& a);
std::vector<Batched> linalg_batch(const BatchArgs& a);

}  // namespace cujax::trace
