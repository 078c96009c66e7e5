// The autodiff markers of the active trace (private), for transformations that re-emit ops.
#pragma once

#include <functional>

#include "cujax/ir/ir.h"
#include "cujax/vmap.h"

namespace cujax::trace {

// Whether `op` is a stop_gradient marker / a custom_vjp output marker recorded inside an open
// AutodiffWindow (false once the outermost window has closed); custom_jvp markers count as
// custom_vjp ones.
bool is_stop_gradient_marker(const ir::Operation* op);
bool is_custom_vjp_marker(const ir::Operation* op);
// Makes `op` (an identity op, the copy of a marker) a stop_gradient marker.
void mark_stop_gradient(const ir::Operation* op);
// vmap under grad: the batched form of the custom_vjp marker `op`, its arguments, output and
// residuals looked up batched with `get`: a new marker (batch dimension first) whose bwd is the
// recorded bwd vmapped. custom_jvp markers are refused (their bwd replays unbatched ops).
Batched batch_custom_vjp_marker(const ir::Operation* op, int64_t size,
                                const std::function<Batched(ir::Value*)>& get);

}  // namespace cujax::trace
