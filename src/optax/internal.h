// Helpers shared by the optax transformations: prefixed sub-states and per-leaf maps.
#pragma once

#include <string>

#include "cujax/optax.h"

namespace cujax::optax::detail {

// The entries of `state` under `prefix` ("mu" selects "mu" and "mu.*"), with the prefix removed.
State sub_state(const State& state, const std::string& prefix);
// `inner`'s entries with `prefix` joined in front of their paths, appended to `out`.
void add_prefixed(State& out, const std::string& prefix, const State& inner);
// The entry `path` of `state`, or an error naming the transformation and the path.
const Array& entry(const State& state, const std::string& path, const char* who);
// A zero of each param's shape and dtype.
State zeros_like(const State& params);
// The scalar int32 zero that starts a step count.
Array zero_count();
// count + 1, saturating at the int32 maximum (Optax's numerics.safe_increment).
Array safe_increment(const Array& count);

}  // namespace cujax::optax::detail
