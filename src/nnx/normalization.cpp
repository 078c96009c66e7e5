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
  attribute("epsilon", epsilon);
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

BatchNorm::BatchNorm(int64_t n, Rngs& rngs, const BatchNormOptions& o)
    : num_features(n),
      use_running_average(o.use_running_average),
      axis(o.axis),
      momentum(o.momentum),
      epsilon(o.epsilon),
      use_fast_variance(o.use_fast_variance),
      dtype_(o.dtype) {
  mean = variable("mean", VariableKind::BatchStat, jnp::zeros({n}, o.param_dtype));
  var = variable("var", VariableKind::BatchStat, jnp::ones({n}, o.param_dtype));
  if (o.use_scale) scale = param("scale", o.scale_init(rngs.params(), {n}, o.param_dtype));
  if (o.use_bias) bias = param("bias", o.bias_init(rngs.params(), {n}, o.param_dtype));
  attribute("use_running_average", use_running_average);
  attribute("momentum", momentum);
  attribute("epsilon", epsilon);
  attribute("use_fast_variance", use_fast_variance);
}

Array BatchNorm::operator()(const Array& x, std::optional<bool> running) {
  const int64_t a = axis < 0 ? axis + x.ndim() : axis;
  if (a < 0 || a >= x.ndim() || x.shape()[a] != num_features)
    throw Error("nnx.BatchNorm: input " + x.aval().str() + " does not have num_features " +
                std::to_string(num_features) + " at axis " + std::to_string(axis));
  std::vector<int64_t> reduce;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (i != a) reduce.push_back(i);
  // (num_features,) broadcast along `a`.
  Shape feature_shape(x.ndim(), 1);
  feature_shape[a] = num_features;
  auto bcast = [&](const Array& v) { return jnp::reshape(v, feature_shape); };

  const Array xs = jnp::astype(x, stats_dtype(x.dtype()));
  Array m, v;
  if (running.value_or(use_running_average)) {
    m = mean->value;
    v = var->value;
  } else {
    m = jnp::mean(xs, reduce);
    if (use_fast_variance)
      v = jnp::maximum(jnp::subtract(jnp::mean(jnp::square(xs), reduce), jnp::square(m)), 0.0);
    else
      v = jnp::mean(jnp::square(jnp::subtract(xs, bcast(m))), reduce);
    // The running averages, in their own dtype, as Flax's ra_mean.value = ...
    const DType mt = mean->value.dtype(), vt = var->value.dtype();
    mean->value = jnp::astype(
        jnp::add(jnp::multiply(mean->value, momentum), jnp::multiply(m, 1.0 - momentum)), mt);
    var->value = jnp::astype(
        jnp::add(jnp::multiply(var->value, momentum), jnp::multiply(v, 1.0 - momentum)), vt);
  }
  Array mul = jnp::rsqrt(jnp::add(v, epsilon));
  DType t = dtype_ ? *dtype_ : x.dtype();
  if (scale) {
    mul = jnp::multiply(mul, scale->value);
    if (!dtype_) t = jnp::promote_types(t, scale->value.dtype());
  }
  Array y = jnp::multiply(jnp::subtract(xs, bcast(m)), bcast(mul));
  if (bias) {
    y = jnp::add(y, bcast(bias->value));
    if (!dtype_) t = jnp::promote_types(t, bias->value.dtype());
  }
  return jnp::astype(y, t);
}

}  // namespace cujax::nnx
