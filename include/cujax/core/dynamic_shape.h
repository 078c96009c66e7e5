// Dynamic dimensions: a size known only when a program is called (`?` in `tensor<?x4xf32>`).
// Shape-polymorphic programs that JAX exports have them until refined to their inputs' shapes
// (compiler/refine_shapes.h). A -1 elsewhere (jnp::reshape's inferred size, a user's error) is
// not dynamic, so only avals print it as `?`, through shape_pattern_to_string.
#pragma once

#include <cstdint>
#include <string>

#include "cujax/core/shape.h"

namespace cujax {

inline constexpr int64_t kDynamicDim = -1;

bool is_dynamic(const Shape& shape);
// "[?,4]": shape_to_string with dynamic dimensions as `?`.
std::string shape_pattern_to_string(const Shape& shape);
// Whether `concrete` fits `pattern`: same rank, and equal sizes where `pattern`'s is not dynamic.
bool shape_fits(const Shape& concrete, const Shape& pattern);

}  // namespace cujax
