// Dynamic dimensions: a size known only when a program is called (`?` in `tensor<?x4xf32>`).
// Shape-polymorphic programs that JAX exports have them until refined to their inputs' shapes
// (compiler/refine_shapes.h); shape_to_string prints one as `?`.
#pragma once

#include <cstdint>

#include "cujax/core/shape.h"

namespace cujax {

inline constexpr int64_t kDynamicDim = -1;

bool is_dynamic(const Shape& shape);
// Whether `concrete` fits `pattern`: same rank, and equal sizes where `pattern`'s is not dynamic.
bool shape_fits(const Shape& concrete, const Shape& pattern);

}  // namespace cujax
