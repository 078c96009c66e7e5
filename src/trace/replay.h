// Replaying recorded ops (private): control-flow VJP rules differentiate a loop body or a cond
// branch by recording its region's ops again (as JAX differentiates a jaxpr) instead of calling
// the user's function again, whose closures may be gone by the time the backward walk runs.
#pragma once

#include <unordered_map>
#include <vector>

#include "cujax/array.h"
#include "cujax/ir/ir.h"

namespace cujax::trace {

using ValueEnv = std::unordered_map<const ir::Value*, Array>;

// Records the ops of `block` again in the active trace, its values mapped through `env` (block
// arguments and values defined in it; values from outside the block that env lacks are used as
// they are). An op that needs a value of the block missing from env is skipped, and so are its
// users. Adds the new values to env and returns the block's stablehlo.return operands (an
// invalid Array for a skipped one). Nested regions are copied with their captures remapped and
// stop_gradient markers and scan records carried over.
std::vector<Array> replay(const ir::Block& block, ValueEnv& env);

// Records `op` again on `operands`, its regions copied with `captures` remapping the values they
// use from outside (a stop_gradient marker becomes stop_gradient; scan records carried over).
std::vector<Array> replay_op(const ir::Operation& op, const std::vector<Array>& operands,
                             const std::unordered_map<const ir::Value*, ir::Value*>& captures);

// The value standing for v after replay: env's entry, or v itself when v is from outside.
Array replayed(const ValueEnv& env, const ir::Value* v);

// The values that `op`'s regions use from outside the op (their captures), in first-use order.
std::vector<ir::Value*> region_captures(const ir::Operation& op);

}  // namespace cujax::trace
