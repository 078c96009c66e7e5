// Flax's pooling functions (flax.linen.pooling, exported by nnx): windows over the spatial
// axes of (*batch, spatial..., features) inputs, channels last.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "cujax/array.h"
#include "cujax/lax.h"

namespace cujax::nnx {

// "VALID", "SAME", or (low, high) per spatial dimension.
using PoolPadding = std::variant<std::string, lax::Padding>;

// Reduces windows of `window_shape` (one entry per spatial axis) moved by `strides` (default
// 1), starting from `init`, with the binary `reduce_fn` (Flax's nn.pool).
Array pool(const Array& x, double init, const lax::Computation& reduce_fn,
           const std::vector<int64_t>& window_shape, std::vector<int64_t> strides = {},
           const PoolPadding& padding = std::string("VALID"));
// The window's mean. count_include_pad: divide by the window size (padding counts as zeros);
// else by the number of input elements in each window.
Array avg_pool(const Array& x, const std::vector<int64_t>& window_shape,
               std::vector<int64_t> strides = {}, const PoolPadding& padding = std::string("VALID"),
               bool count_include_pad = true);
// The window's maximum (padding is -inf) and minimum (+inf); floating inputs.
Array max_pool(const Array& x, const std::vector<int64_t>& window_shape,
               std::vector<int64_t> strides = {},
               const PoolPadding& padding = std::string("VALID"));
Array min_pool(const Array& x, const std::vector<int64_t>& window_shape,
               std::vector<int64_t> strides = {},
               const PoolPadding& padding = std::string("VALID"));

}  // namespace cujax::nnx
