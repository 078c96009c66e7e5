#include "cujax/nnx/pooling.h"

#include <limits>

#include "cujax/numpy.h"

namespace cujax::nnx {

namespace jnp = cujax::numpy;

namespace {

lax::WindowConfig window_config(const char* op, const Shape& shape,
                                const std::vector<int64_t>& window_shape,
                                std::vector<int64_t> strides, const PoolPadding& padding) {
  const int64_t n = static_cast<int64_t>(window_shape.size());
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (n < 1 || rank < n + 1)
    throw Error(std::string("nnx.") + op + ": input " + shape_to_string(shape) +
                " needs (*batch, " + std::to_string(n) + " spatial dims, features)");
  if (strides.empty()) strides.assign(n, 1);
  if (static_cast<int64_t>(strides.size()) != n)
    throw Error(std::string("nnx.") + op + ": " + std::to_string(strides.size()) +
                " strides for a window of rank " + std::to_string(n));
  for (size_t i = 0; i < window_shape.size(); ++i)
    if (window_shape[i] < 1 || strides[i] < 1)
      throw Error(std::string("nnx.") + op + ": window_shape and strides must be positive");
  const int64_t batch = rank - n - 1;
  lax::WindowConfig w;
  w.window_dimensions.assign(batch, 1);
  w.window_dimensions.insert(w.window_dimensions.end(), window_shape.begin(), window_shape.end());
  w.window_dimensions.push_back(1);
  w.window_strides.assign(batch, 1);
  w.window_strides.insert(w.window_strides.end(), strides.begin(), strides.end());
  w.window_strides.push_back(1);
  lax::Padding spatial;
  if (const auto* s = std::get_if<std::string>(&padding)) {
    if (*s != "SAME" && *s != "VALID")
      throw Error(std::string("nnx.") + op + ": padding must be SAME, VALID or pairs, got " + *s);
    spatial = lax::padtype_to_pads(std::vector<int64_t>(shape.begin() + batch, shape.end() - 1),
                                   window_shape, strides, *s);
  } else {
    spatial = std::get<lax::Padding>(padding);
    if (static_cast<int64_t>(spatial.size()) != n)
      throw Error(std::string("nnx.") + op + ": padding has " + std::to_string(spatial.size()) +
                  " pairs for a window of rank " + std::to_string(n));
  }
  w.padding.assign(batch, {0, 0});
  w.padding.insert(w.padding.end(), spatial.begin(), spatial.end());
  w.padding.emplace_back(0, 0);
  return w;
}

Array pool_impl(const char* op, const Array& x, double init, const lax::Computation& fn,
                const std::vector<int64_t>& window_shape, std::vector<int64_t> strides,
                const PoolPadding& padding) {
  const lax::WindowConfig w =
      window_config(op, x.shape(), window_shape, std::move(strides), padding);
  return lax::reduce_window({x}, {jnp::full({}, init, x.dtype())}, fn, w)[0];
}

void check_floating(const char* op, const Array& x) {
  if (!is_float(x.dtype()))
    throw Error(std::string("nnx.") + op + ": needs a floating input, got " + x.aval().str());
}

}  // namespace

Array pool(const Array& x, double init, const lax::Computation& reduce_fn,
           const std::vector<int64_t>& window_shape, std::vector<int64_t> strides,
           const PoolPadding& padding) {
  return pool_impl("pool", x, init, reduce_fn, window_shape, std::move(strides), padding);
}

Array avg_pool(const Array& x, const std::vector<int64_t>& window_shape,
               std::vector<int64_t> strides, const PoolPadding& padding, bool count_include_pad) {
  check_floating("avg_pool", x);
  const lax::Computation add = [](const std::vector<Array>& a) {
    return std::vector<Array>{lax::add(a[0], a[1])};
  };
  const Array sum = pool_impl("avg_pool", x, 0.0, add, window_shape, strides, padding);
  if (count_include_pad) {
    int64_t size = 1;
    for (int64_t k : window_shape) size *= k;
    return jnp::divide(sum, static_cast<double>(size));
  }
  // Input elements per window: the same pool over ones of the spatial shape.
  Shape ones_shape(x.ndim(), 1);
  const int64_t n = static_cast<int64_t>(window_shape.size());
  for (int64_t i = x.ndim() - n - 1; i < x.ndim() - 1; ++i) ones_shape[i] = x.shape()[i];
  const Array count = pool_impl("avg_pool", jnp::ones(ones_shape, x.dtype()), 0.0, add,
                                window_shape, strides, padding);
  return jnp::divide(sum, count);
}

Array max_pool(const Array& x, const std::vector<int64_t>& window_shape,
               std::vector<int64_t> strides, const PoolPadding& padding) {
  check_floating("max_pool", x);
  return pool_impl(
      "max_pool", x, -std::numeric_limits<double>::infinity(),
      [](const std::vector<Array>& a) { return std::vector<Array>{lax::max(a[0], a[1])}; },
      window_shape, std::move(strides), padding);
}

Array min_pool(const Array& x, const std::vector<int64_t>& window_shape,
               std::vector<int64_t> strides, const PoolPadding& padding) {
  check_floating("min_pool", x);
  return pool_impl(
      "min_pool", x, std::numeric_limits<double>::infinity(),
      [](const std::vector<Array>& a) { return std::vector<Array>{lax::min(a[0], a[1])}; },
      window_shape, std::move(strides), padding);
}

}  // namespace cujax::nnx
