#include "cujax/nnx/normalization.h"

#include "cujax/numpy.h"

namespace cujax::nnx {

namespace jnp = cujax::numpy;

namespace {

void check_features(const char* op, const Array& x, int64_t n) {
  if (x.ndim() < 1 || x.shape().back() != n)
    throw Error(std::string("nnx.") + op + ": input " + x.aval().str() +
                " does not end with num_features " + std::to_string(n));
}

// The statistics' dtype: at least f32, as Flax's _compute_stats.
DType stats_dtype(DType t) {
  return t == DType::F64 ? DType::F64 : DType::F32;
}

}  // namespace

LayerNorm::LayerNorm(int64_t n, Rngs&, const NormOptions& options)
    : num_features(n), epsilon(options.epsilon), dtype_(options.dtype) {
  if (options.use_scale) scale = param("scale", jnp::ones({n}, options.param_dtype));
  if (options.use_bias) bias = param("bias", jnp::zeros({n}, options.param_dtype));
}

Array LayerNorm::operator()(const Array& x) const {
  check_features("LayerNorm", x, num_features);
  const Array xs = jnp::astype(x, stats_dtype(x.dtype()));
  const Array mean = jnp::mean(xs, -1, true);
  const Array var =
      jnp::maximum(jnp::subtract(jnp::mean(jnp::square(xs), -1, true), jnp::square(mean)), 0.0);
  Array y = jnp::multiply(jnp::subtract(xs, mean), jnp::rsqrt(jnp::add(var, epsilon)));
  DType t = dtype_ ? *dtype_ : x.dtype();
  if (scale) {
    y = jnp::multiply(y, scale->value);
    if (!dtype_) t = jnp::promote_types(t, scale->value.dtype());
  }
  if (bias) {
    y = jnp::add(y, bias->value);
    if (!dtype_) t = jnp::promote_types(t, bias->value.dtype());
  }
  return jnp::astype(y, t);
}

RMSNorm::RMSNorm(int64_t n, Rngs&, const NormOptions& options)
    : num_features(n), epsilon(options.epsilon), dtype_(options.dtype) {
  if (options.use_scale) scale = param("scale", jnp::ones({n}, options.param_dtype));
}

Array RMSNorm::operator()(const Array& x) const {
  check_features("RMSNorm", x, num_features);
  const Array xs = jnp::astype(x, stats_dtype(x.dtype()));
  const Array ms = jnp::mean(jnp::square(xs), -1, true);
  Array y = jnp::multiply(xs, jnp::rsqrt(jnp::add(ms, epsilon)));
  DType t = dtype_ ? *dtype_ : x.dtype();
  if (scale) {
    y = jnp::multiply(y, scale->value);
    if (!dtype_) t = jnp::promote_types(t, scale->value.dtype());
  }
  return jnp::astype(y, t);
}

}  // namespace cujax::nnx
