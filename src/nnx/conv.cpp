#include "cujax/nnx/conv.h"

#include "cujax/numpy.h"

namespace cujax::nnx {

namespace jnp = cujax::numpy;

namespace {

// Flax's canonicalize of an int-or-sequence argument: one value is broadcast, none means 1.
std::vector<int64_t> per_dim(const char* name, std::vector<int64_t> v, size_t n,
                             const char* op = "nnx.Conv") {
  if (v.empty()) return std::vector<int64_t>(n, 1);
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  if (v.size() != n)
    throw Error(std::string(op) + ": " + name + " has " + std::to_string(v.size()) +
                " values for " + std::to_string(n) + " spatial dimensions");
  for (int64_t x : v)
    if (x < 1) throw Error(std::string(op) + ": " + name + " must be positive");
  return v;
}

// (*batch, spatial..., features) as (one batch dim, spatial..., features), and the batch dims.
std::pair<Array, Shape> flatten_batch(const Array& input, int64_t nd) {
  const Shape& in_shape = input.shape();
  const Shape batch(in_shape.begin(), in_shape.end() - nd - 1);
  Shape flat = {num_elements(batch)};
  flat.insert(flat.end(), in_shape.end() - nd - 1, in_shape.end());
  return {jnp::reshape(input, flat), batch};
}

Array unflatten_batch(const Array& y, const Shape& batch) {
  Shape out_shape = batch;
  out_shape.insert(out_shape.end(), y.shape().begin() + 1, y.shape().end());
  return jnp::reshape(y, out_shape);
}

std::string layout(size_t n, bool kernel) {
  static const char* spatial[] = {"W", "HW", "DHW"};
  return kernel ? std::string(spatial[n - 1]) + "IO" : "N" + std::string(spatial[n - 1]) + "C";
}

}  // namespace

Array pad_wrap(const Array& x, const std::vector<int64_t>& axes, const lax::Padding& pads) {
  Array y = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto [low, high] = pads[i];
    if (low == 0 && high == 0) continue;
    const int64_t size = y.shape()[axes[i]];
    if (low < 0 || high < 0 || size == 0)
      throw Error("nnx.Conv: circular padding needs a non-empty axis and non-negative pads");
    std::vector<int32_t> idx;
    for (int64_t j = -low; j < size + high; ++j)
      idx.push_back(static_cast<int32_t>(((j % size) + size) % size));
    y = jnp::take(y, jnp::array(idx), axes[i]);
  }
  return y;
}

Conv::Conv(int64_t in, int64_t out, std::vector<int64_t> ks, Rngs& rngs, const ConvOptions& o)
    : in_features(in),
      out_features(out),
      kernel_size(std::move(ks)),
      padding(o.padding),
      feature_group_count(o.feature_group_count),
      dtype_(o.dtype) {
  const size_t n = kernel_size.size();
  if (n < 1 || n > 3)
    throw Error("nnx.Conv: kernel_size must have 1 to 3 spatial dimensions, got " +
                std::to_string(n));
  for (int64_t k : kernel_size)
    if (k < 1) throw Error("nnx.Conv: kernel_size must be positive");
  strides = per_dim("strides", o.strides, n);
  input_dilation = per_dim("input_dilation", o.input_dilation, n);
  kernel_dilation = per_dim("kernel_dilation", o.kernel_dilation, n);
  if (feature_group_count < 1 || in % feature_group_count || out % feature_group_count)
    throw Error("nnx.Conv: in_features " + std::to_string(in) + " and out_features " +
                std::to_string(out) + " must be multiples of feature_group_count " +
                std::to_string(feature_group_count));
  if (const auto* p = std::get_if<lax::Padding>(&padding); p && p->size() != n)
    throw Error("nnx.Conv: padding has " + std::to_string(p->size()) + " pairs for " +
                std::to_string(n) + " spatial dimensions");
  if (const auto* s = std::get_if<std::string>(&padding)) {
    if (*s != "SAME" && *s != "VALID" && *s != "CIRCULAR" && *s != "CAUSAL")
      throw Error("nnx.Conv: padding must be SAME, VALID, CIRCULAR, CAUSAL, an int or pairs, got " +
                  *s);
    if (*s == "CAUSAL" && n != 1) throw Error("nnx.Conv: CAUSAL padding is for 1-d convolutions");
  }
  Shape shape = kernel_size;
  shape.push_back(in / feature_group_count);
  shape.push_back(out);
  kernel = param("kernel", o.kernel_init(rngs.params(), shape, o.param_dtype));
  if (o.use_bias) bias = param("bias", o.bias_init(rngs.params(), {out}, o.param_dtype));
}

Array Conv::operator()(const Array& input) const {
  const size_t n = kernel_size.size();
  const int64_t nd = static_cast<int64_t>(n);
  if (input.ndim() < nd + 1 || input.shape().back() != in_features)
    throw Error("nnx.Conv: input " + input.aval().str() + " is not (*batch, " + std::to_string(n) +
                " spatial dims, " + std::to_string(in_features) + ")");
  // One batch dimension for lax: add it, or flatten several (Flax does the same).
  auto [x, batch] = flatten_batch(input, nd);

  std::vector<int64_t> spatial_axes;
  for (int64_t i = 1; i <= nd; ++i) spatial_axes.push_back(i);
  std::vector<int64_t> dilated(n);
  for (size_t i = 0; i < n; ++i) dilated[i] = (kernel_size[i] - 1) * kernel_dilation[i] + 1;
  lax::Padding pads;
  if (const auto* s = std::get_if<std::string>(&padding)) {
    if (*s == "CIRCULAR") {
      lax::Padding wrap;
      for (size_t i = 0; i < n; ++i) wrap.emplace_back((dilated[i] - 1) / 2, dilated[i] / 2);
      x = pad_wrap(x, spatial_axes, wrap);
      pads.assign(n, {0, 0});
    } else if (*s == "CAUSAL") {
      pads = {{dilated[0] - 1, 0}};
    } else {
      // As lax.conv_general_dilated with a string: the input's own spatial sizes and the
      // dilated kernel.
      std::vector<int64_t> sizes(x.shape().begin() + 1, x.shape().end() - 1);
      pads = lax::padtype_to_pads(sizes, dilated, strides, *s);
    }
  } else if (const auto* p = std::get_if<int64_t>(&padding)) {
    pads.assign(n, {*p, *p});
  } else {
    pads = std::get<lax::Padding>(padding);
  }

  const DType t = dtype_ ? *dtype_ : jnp::promote_types(x.dtype(), kernel->value.dtype());
  Array y = lax::conv_general_dilated(
      jnp::astype(x, t), jnp::astype(kernel->value, t), strides, pads, input_dilation,
      kernel_dilation, {layout(n, false), layout(n, true), layout(n, false)}, feature_group_count);
  if (bias) y = jnp::add(y, jnp::astype(bias->value, t));
  return unflatten_batch(y, batch);
}

ConvTranspose::ConvTranspose(int64_t in, int64_t out, std::vector<int64_t> ks, Rngs& rngs,
                             const ConvTransposeOptions& o)
    : in_features(in),
      out_features(out),
      kernel_size(std::move(ks)),
      padding(o.padding),
      transpose_kernel(o.transpose_kernel),
      dtype_(o.dtype) {
  const char* op = "nnx.ConvTranspose";
  const size_t n = kernel_size.size();
  if (n < 1 || n > 3)
    throw Error(std::string(op) + ": kernel_size must have 1 to 3 spatial dimensions, got " +
                std::to_string(n));
  for (int64_t k : kernel_size)
    if (k < 1) throw Error(std::string(op) + ": kernel_size must be positive");
  strides = per_dim("strides", o.strides, n, op);
  kernel_dilation = per_dim("kernel_dilation", o.kernel_dilation, n, op);
  if (const auto* p = std::get_if<lax::Padding>(&padding); p && p->size() != n)
    throw Error(std::string(op) + ": padding has " + std::to_string(p->size()) + " pairs for " +
                std::to_string(n) + " spatial dimensions");
  if (const auto* s = std::get_if<std::string>(&padding);
      s && *s != "SAME" && *s != "VALID" && *s != "CIRCULAR")
    throw Error(std::string(op) + ": padding must be SAME, VALID, CIRCULAR, an int or pairs, got " +
                *s);
  Shape shape = kernel_size;
  shape.push_back(transpose_kernel ? out : in);
  shape.push_back(transpose_kernel ? in : out);
  kernel = param("kernel", o.kernel_init(rngs.params(), shape, o.param_dtype));
  if (o.use_bias) bias = param("bias", o.bias_init(rngs.params(), {out}, o.param_dtype));
}

Array ConvTranspose::operator()(const Array& input) const {
  const size_t n = kernel_size.size();
  const int64_t nd = static_cast<int64_t>(n);
  if (input.ndim() < nd + 1 || input.shape().back() != in_features)
    throw Error("nnx.ConvTranspose: input " + input.aval().str() + " is not (*batch, " +
                std::to_string(n) + " spatial dims, " + std::to_string(in_features) + ")");
  auto [x, batch] = flatten_batch(input, nd);
  const std::string* mode = std::get_if<std::string>(&padding);
  const bool circular = mode && *mode == "CIRCULAR";
  std::variant<std::string, lax::Padding> pads;
  if (mode)
    pads = circular ? std::string("VALID") : *mode;
  else if (const auto* p = std::get_if<int64_t>(&padding))
    pads = lax::Padding(n, {*p, *p});
  else
    pads = std::get<lax::Padding>(padding);
  const DType t = dtype_ ? *dtype_ : jnp::promote_types(x.dtype(), kernel->value.dtype());
  Array y = lax::conv_transpose(
      jnp::astype(x, t), jnp::astype(kernel->value, t), strides, pads, kernel_dilation,
      {layout(n, false), layout(n, true), layout(n, false)}, transpose_kernel);
  if (circular) {
    // Wrap onto the period input * stride: pad each spatial axis to a whole number of periods
    // with the input's start on a period boundary, then sum the periods. The odd pad goes low
    // (high with transpose_kernel, mirroring Conv's CIRCULAR).
    for (size_t i = 0; i < n; ++i) {
      const int64_t axis = static_cast<int64_t>(i) + 1;
      const int64_t period = x.shape()[axis] * strides[i], size = y.shape()[axis];
      const int64_t diff = ((period - size) % (2 * period) + 2 * period) % (2 * period);
      const int64_t low = transpose_kernel ? diff / 2 : (diff + 1) / 2;
      std::vector<std::pair<int64_t, int64_t>> widths(static_cast<size_t>(y.ndim()), {0, 0});
      widths[axis] = {low, diff - low};
      y = jnp::pad(y, widths);
      Shape split = y.shape();
      split[axis] = (size + diff) / period;
      split.insert(split.begin() + axis + 1, period);
      y = jnp::sum(jnp::reshape(y, split), std::vector<int64_t>{axis});
    }
  }
  if (bias) y = jnp::add(y, jnp::astype(bias->value, t));
  return unflatten_batch(y, batch);
}

}  // namespace cujax::nnx
