#include "cujax/nnx/linear.h"

#include <algorithm>

#include "cujax/lax.h"
#include "cujax/numpy.h"

namespace cujax::nnx {

namespace jnp = cujax::numpy;

namespace {

// Flax's promote_dtype: the explicit dtype, else the inputs' and parameters' common dtype.
DType compute_dtype(const std::optional<DType>& dtype, const Array& x, const Array& kernel) {
  return dtype ? *dtype : jnp::promote_types(x.dtype(), kernel.dtype());
}

// Initializes a parameter of `shape` as the initializer sees it flattened to `flat`.
Array init_flat(const nn::initializers::Initializer& init, const Array& key, const Shape& flat,
                const Shape& shape, DType dtype) {
  return lax::reshape(init(key, flat, dtype), shape);
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, Rngs& rngs, const LinearOptions& options)
    : in_features(in), out_features(out), dtype_(options.dtype) {
  kernel = param("kernel", options.kernel_init(rngs.params(), {in, out}, options.param_dtype));
  if (options.use_bias)
    bias = param("bias", options.bias_init(rngs.params(), {out}, options.param_dtype));
}

Array Linear::operator()(const Array& x) const {
  if (x.ndim() < 1 || x.shape().back() != in_features)
    throw Error("nnx.Linear: input " + x.aval().str() + " does not end with in_features " +
                std::to_string(in_features));
  const DType t = compute_dtype(dtype_, x, kernel->value);
  lax::DotDimensionNumbers dims;
  dims.lhs_contracting_dimensions = {x.ndim() - 1};
  dims.rhs_contracting_dimensions = {0};
  Array y = lax::dot_general(jnp::astype(x, t), jnp::astype(kernel->value, t), dims);
  if (bias) y = jnp::add(y, jnp::astype(bias->value, t));
  return y;
}

LinearGeneral::LinearGeneral(Shape in, Shape out, Rngs& rngs, std::vector<int64_t> ax,
                             const LinearOptions& options)
    : in_features(std::move(in)),
      out_features(std::move(out)),
      axis(std::move(ax)),
      dtype_(options.dtype) {
  if (axis.size() != in_features.size())
    throw Error("nnx.LinearGeneral: " + std::to_string(axis.size()) + " axes for in_features " +
                shape_to_string(in_features));
  Shape shape = in_features;
  shape.insert(shape.end(), out_features.begin(), out_features.end());
  const int64_t n_in = num_elements(in_features), n_out = num_elements(out_features);
  kernel = param("kernel", init_flat(options.kernel_init, rngs.params(), {n_in, n_out}, shape,
                                     options.param_dtype));
  if (options.use_bias)
    bias = param("bias", init_flat(options.bias_init, rngs.params(), {n_out}, out_features,
                                   options.param_dtype));
}

Array LinearGeneral::operator()(const Array& x) const {
  lax::DotDimensionNumbers dims;
  for (size_t i = 0; i < axis.size(); ++i) {
    const int64_t a = axis[i] < 0 ? axis[i] + x.ndim() : axis[i];
    if (a < 0 || a >= x.ndim() || x.shape()[a] != in_features[i])
      throw Error("nnx.LinearGeneral: input " + x.aval().str() + " does not have in_features " +
                  shape_to_string(in_features) + " at axes of the layer");
    dims.lhs_contracting_dimensions.push_back(a);
    dims.rhs_contracting_dimensions.push_back(static_cast<int64_t>(i));
  }
  const DType t = compute_dtype(dtype_, x, kernel->value);
  Array y = lax::dot_general(jnp::astype(x, t), jnp::astype(kernel->value, t), dims);
  if (bias) y = jnp::add(y, jnp::astype(bias->value, t));
  return y;
}

}  // namespace cujax::nnx
