// Helpers shared by the cujax::random sources.
#pragma once

#include <string>

#include "cujax/array.h"
#include "cujax/lax.h"

namespace cujax::random::detail {

[[noreturn]] void fail(const std::string& fn, const std::string& msg);
// Throws unless `key` is a single raw key: u32[2].
void check_key(const std::string& fn, const Array& key);
// x broadcast (NumPy rules, right-aligned) to `shape`; throws naming `fn` when it cannot be.
Array broadcast_to(const std::string& fn, const Array& x, const Shape& shape);
// The unsigned integer dtype of a bit width (8, 16, 32, 64).
DType uint_dtype(int bits);
// The next representable value after x toward +inf (up) or -inf, element-wise (lax.nextafter).
Array nextafter(const Array& x, bool up);

}  // namespace cujax::random::detail
