#include "cujax/core/shape.h"

#include "cujax/core/dynamic_shape.h"

#include <algorithm>

#include "cujax/core/error.h"

namespace cujax {

int64_t num_elements(const Shape& shape) {
  // A zero dimension makes any product empty, however large the others.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      throw Error("shape " + shape_to_string(shape) + " has more elements than int64 holds");
  return n;
}

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    if (i > 0 && __builtin_mul_overflow(s, shape[i], &s))
      throw Error("shape " + shape_to_string(shape) + " has strides larger than int64 holds");
  }
  return strides;
}

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

std::string shape_pattern_to_string(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += shape[i] == kDynamicDim ? std::string("?") : std::to_string(shape[i]);
  }
  return out + "]";
}

bool is_dynamic(const Shape& shape) {
  for (int64_t d : shape)
    if (d == kDynamicDim) return true;
  return false;
}

bool shape_fits(const Shape& concrete, const Shape& pattern) {
  if (concrete.size() != pattern.size()) return false;
  for (size_t i = 0; i < pattern.size(); ++i)
    if (pattern[i] != kDynamicDim && pattern[i] != concrete[i]) return false;
  return true;
}

}  // namespace cujax
