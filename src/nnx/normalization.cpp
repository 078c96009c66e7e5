#include "cujax/nnx/normalization.h"

#include <algorithm>

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

// Normalizes xs (statistics dtype) over `axes` with its own mean and variance, as Flax's
// _compute_stats and _normalize; keeps xs's shape.
Array standardize(const Array& xs, const std::vector<int64_t>& axes, double epsilon,
                  bool fast_variance) {
  const Array m = jnp::mean(xs, axes, true);
  const Array v =
      fast_variance
          ? jnp::maximum(jnp::subtract(jnp::mean(jnp::square(xs), axes, true), jnp::square(m)), 0.0)
          : jnp::mean(jnp::square(jnp::subtract(xs, m)), axes, true);
  return jnp::multiply(jnp::subtract(xs, m), jnp::rsqrt(jnp::add(v, epsilon)));
}

// y * scale + bias with (n,) parameters along `axis`, and the result's dtype as Flax's
// canonicalize_dtype of the input and the parameters.
Array scale_and_shift(Array y, const Array& x, int64_t axis, const Variable* scale,
                      const Variable* bias, const std::optional<DType>& dtype) {
  Shape feature_shape(static_cast<size_t>(x.ndim()), 1);
  feature_shape[axis] = x.shape()[axis];
  DType t = dtype ? *dtype : x.dtype();
  if (scale) {
    y = jnp::multiply(y, jnp::reshape(scale->value, feature_shape));
    if (!dtype) t = jnp::promote_types(t, scale->value.dtype());
  }
  if (bias) {
    y = jnp::add(y, jnp::reshape(bias->value, feature_shape));
    if (!dtype) t = jnp::promote_types(t, bias->value.dtype());
  }
  return jnp::astype(y, t);
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

GroupNorm::GroupNorm(int64_t n, Rngs& rngs, const GroupNormOptions& o)
    : num_features(n),
      epsilon(o.epsilon),
      use_fast_variance(o.use_fast_variance),
      reduction_axes(o.reduction_axes),
      dtype_(o.dtype) {
  if (o.num_groups.has_value() == o.group_size.has_value())
    throw Error(
        "nnx.GroupNorm: give either num_groups or group_size (for group_size, set num_groups to "
        "std::nullopt: it defaults to 32)");
  if (o.group_size) {
    if (*o.group_size <= 0 || n % *o.group_size != 0)
      throw Error("nnx.GroupNorm: num_features " + std::to_string(n) +
                  " is not a multiple of group_size " + std::to_string(*o.group_size));
    group_size = *o.group_size;
    num_groups = n / group_size;
  } else {
    if (*o.num_groups <= 0 || n % *o.num_groups != 0)
      throw Error("nnx.GroupNorm: num_groups " + std::to_string(*o.num_groups) +
                  " does not divide num_features " + std::to_string(n));
    num_groups = *o.num_groups;
    group_size = n / num_groups;
  }
  if (o.use_scale) scale = param("scale", o.scale_init(rngs.params(), {n}, o.param_dtype));
  if (o.use_bias) bias = param("bias", o.bias_init(rngs.params(), {n}, o.param_dtype));
  attribute("epsilon", epsilon);
  attribute("use_fast_variance", use_fast_variance);
}

Array GroupNorm::operator()(const Array& x) const {
  check_features("GroupNorm", x, num_features);
  const int64_t nd = x.ndim();
  // The statistics' axes of x, then the same with the channel axis split into (groups, size):
  // the axes before it keep their numbers and the group's own channels are axis nd.
  std::vector<int64_t> axes;
  if (reduction_axes.empty()) {
    for (int64_t i = 1; i < nd; ++i) axes.push_back(i);
    if (nd == 1) axes.push_back(0);
  } else {
    for (int64_t a : reduction_axes) {
      const int64_t c = a < 0 ? a + nd : a;
      if (c < 0 || c >= nd)
        throw Error("nnx.GroupNorm: reduction axis " + std::to_string(a) + " is out of range for " +
                    x.aval().str());
      if (std::find(axes.begin(), axes.end(), c) == axes.end()) axes.push_back(c);
    }
    if (std::find(axes.begin(), axes.end(), nd - 1) == axes.end())
      throw Error("nnx.GroupNorm: reduction_axes must include the last (feature) axis");
  }
  std::vector<int64_t> group_axes;
  for (int64_t a : axes)
    if (a != nd - 1) group_axes.push_back(a);
  group_axes.push_back(nd);
  Shape group_shape(x.shape().begin(), x.shape().end() - 1);
  group_shape.push_back(num_groups);
  group_shape.push_back(group_size);
  const Array xs = jnp::reshape(jnp::astype(x, stats_dtype(x.dtype())), group_shape);
  const Array y = jnp::reshape(standardize(xs, group_axes, epsilon, use_fast_variance), x.shape());
  return scale_and_shift(y, x, nd - 1, scale, bias, dtype_);
}

InstanceNorm::InstanceNorm(int64_t n, Rngs& rngs, const InstanceNormOptions& o)
    : num_features(n),
      feature_axis(o.feature_axis),
      epsilon(o.epsilon),
      use_fast_variance(o.use_fast_variance),
      dtype_(o.dtype) {
  if (o.use_scale) scale = param("scale", o.scale_init(rngs.params(), {n}, o.param_dtype));
  if (o.use_bias) bias = param("bias", o.bias_init(rngs.params(), {n}, o.param_dtype));
  attribute("epsilon", epsilon);
  attribute("use_fast_variance", use_fast_variance);
}

Array InstanceNorm::operator()(const Array& x) const {
  const int64_t nd = x.ndim();
  const int64_t f = feature_axis < 0 ? feature_axis + nd : feature_axis;
  if (f < 0 || f >= nd || x.shape()[f] != num_features)
    throw Error("nnx.InstanceNorm: input " + x.aval().str() + " does not have num_features " +
                std::to_string(num_features) + " at axis " + std::to_string(feature_axis));
  if (f == 0)
    throw Error(
        "nnx.InstanceNorm: the feature axis cannot be the leading axis, which is the batch axis");
  std::vector<int64_t> axes;
  for (int64_t i = 1; i < nd; ++i)
    if (i != f) axes.push_back(i);
  const Array xs = jnp::astype(x, stats_dtype(x.dtype()));
  const Array y =
      axes.empty() ? jnp::zeros_like(xs) : standardize(xs, axes, epsilon, use_fast_variance);
  return scale_and_shift(y, x, f, scale, bias, dtype_);
}

}  // namespace cujax::nnx
