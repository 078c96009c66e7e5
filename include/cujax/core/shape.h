// Shapes are row-major dimension lists; a scalar has the empty shape.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cujax {

using Shape = std::vector<int64_t>;

int64_t num_elements(const Shape& shape);
// Row-major strides in elements.
std::vector<int64_t> row_major_strides(const Shape& shape);
// "[2,3]" for diagnostics.
std::string shape_to_string(const Shape& shape);

}  // namespace cujax
