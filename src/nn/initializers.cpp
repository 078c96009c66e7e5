// jax.nn.initializers (jax/_src/nn/initializers.py), on cujax::random.
#include "cujax/nn/initializers.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "cujax/lax.h"
#include "cujax/random.h"

namespace cujax::nn::initializers {

namespace {

[[noreturn]] void fail(const std::string& msg) {
  throw Error("nn.initializers: " + msg);
}

int64_t axis_of(int64_t a, int64_t rank) {
  if (a < -rank || a >= rank)
    fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return a < 0 ? a + rank : a;
}

double prod_of(const Shape& shape, const std::vector<int64_t>& axes) {
  double p = 1;
  const int64_t rank = static_cast<int64_t>(shape.size());
  for (int64_t a : axes) p *= static_cast<double>(shape[axis_of(a, rank)]);
  return p;
}

// A scalar of `dtype` times x, as `x * jnp.array(v, dtype)`.
Array scale_by(const Array& x, const Array& s) {
  return lax::mul(x, lax::broadcast_in_dim(s, x.shape(), {}));
}

void check_float(const char* what, DType dtype) {
  if (!is_float(dtype))
    fail(std::string(what) + " needs a floating-point dtype, got " +
         std::string(numpy_name(dtype)));
}

}  // namespace

std::pair<double, double> compute_fans(const Shape& shape, const std::vector<int64_t>& in_axis,
                                       const std::vector<int64_t>& out_axis,
                                       const std::vector<int64_t>& batch_axis) {
  if (shape.size() <= 1)
    fail("can't compute input and output sizes of a " + std::to_string(shape.size()) +
         "-dimensional weights tensor; must be at least 2D");
  const double in_size = prod_of(shape, in_axis);
  const double out_size = prod_of(shape, out_axis);
  const double batch_size = prod_of(shape, batch_axis);
  const double receptive_field =
      static_cast<double>(num_elements(shape)) / in_size / out_size / batch_size;
  return {in_size * receptive_field, out_size * receptive_field};
}

Initializer zeros(DType dtype) {
  return Initializer([](const Array&, const Shape& s, DType t) { return lax::full(s, 0, t); },
                     dtype);
}

Initializer ones(DType dtype) {
  return Initializer([](const Array&, const Shape& s, DType t) { return lax::full(s, 1, t); },
                     dtype);
}

Initializer constant(double value, DType dtype) {
  return Initializer(
      [value](const Array&, const Shape& s, DType t) { return lax::full(s, value, t); }, dtype);
}

Initializer normal(double stddev, DType dtype) {
  return Initializer(
      [stddev](const Array& key, const Shape& s, DType t) {
        check_float("normal", t);
        return scale_by(random::normal(key, s, t), lax::full({}, stddev, t));
      },
      dtype);
}

Initializer uniform(double scale, DType dtype) {
  return Initializer(
      [scale](const Array& key, const Shape& s, DType t) {
        check_float("uniform", t);
        return scale_by(random::uniform(key, s, t), lax::full({}, scale, t));
      },
      dtype);
}

Initializer truncated_normal(double stddev, DType dtype, double lower, double upper) {
  return Initializer(
      [=](const Array& key, const Shape& s, DType t) {
        check_float("truncated_normal", t);
        return scale_by(random::truncated_normal(key, lower, upper, s, t),
                        lax::full({}, stddev, t));
      },
      dtype);
}

Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution,
                             std::vector<int64_t> in_axis, std::vector<int64_t> out_axis,
                             std::vector<int64_t> batch_axis, DType dtype) {
  if (mode != "fan_in" && mode != "fan_out" && mode != "fan_avg" && mode != "fan_geo_avg")
    fail("invalid mode for variance scaling initializer: " + mode);
  if (distribution != "truncated_normal" && distribution != "normal" && distribution != "uniform")
    fail("invalid distribution for variance scaling initializer: " + distribution);
  return Initializer(
      [=](const Array& key, const Shape& s, DType t) {
        check_float("variance_scaling", t);
        const auto [fan_in, fan_out] = compute_fans(s, in_axis, out_axis, batch_axis);
        double denominator = fan_in;
        if (mode == "fan_out") denominator = fan_out;
        if (mode == "fan_avg") denominator = (fan_in + fan_out) / 2;
        if (mode == "fan_geo_avg") denominator = std::sqrt(fan_in * fan_out);
        // variance = jnp.array(scale / denominator, dtype): rounded to dtype, then sqrt there.
        const Array variance = lax::full({}, scale / denominator, t);
        if (distribution == "truncated_normal") {
          // The stddev of a standard normal truncated to (-2, 2).
          const Array stddev = lax::div(lax::sqrt(variance), lax::full({}, .87962566103423978, t));
          return scale_by(random::truncated_normal(key, -2.0, 2.0, s, t), stddev);
        }
        if (distribution == "normal")
          return scale_by(random::normal(key, s, t), lax::sqrt(variance));
        return scale_by(random::uniform(key, s, t, -1.0, 1.0),
                        lax::sqrt(lax::mul(lax::full({}, 3, t), variance)));
      },
      dtype);
}

Initializer lecun_normal(std::vector<int64_t> in_axis, std::vector<int64_t> out_axis,
                         std::vector<int64_t> batch_axis, DType dtype) {
  return variance_scaling(1.0, "fan_in", "truncated_normal", std::move(in_axis),
                          std::move(out_axis), std::move(batch_axis), dtype);
}

Initializer lecun_uniform(std::vector<int64_t> in_axis, std::vector<int64_t> out_axis,
                          std::vector<int64_t> batch_axis, DType dtype) {
  return variance_scaling(1.0, "fan_in", "uniform", std::move(in_axis), std::move(out_axis),
                          std::move(batch_axis), dtype);
}

Initializer glorot_uniform(std::vector<int64_t> in_axis, std::vector<int64_t> out_axis,
                           std::vector<int64_t> batch_axis, DType dtype) {
  return variance_scaling(1.0, "fan_avg", "uniform", std::move(in_axis), std::move(out_axis),
                          std::move(batch_axis), dtype);
}

Initializer glorot_normal(std::vector<int64_t> in_axis, std::vector<int64_t> out_axis,
                          std::vector<int64_t> batch_axis, DType dtype) {
  return variance_scaling(1.0, "fan_avg", "truncated_normal", std::move(in_axis),
                          std::move(out_axis), std::move(batch_axis), dtype);
}

Initializer he_normal(std::vector<int64_t> in_axis, std::vector<int64_t> out_axis,
                      std::vector<int64_t> batch_axis, DType dtype) {
  return variance_scaling(2.0, "fan_in", "truncated_normal", std::move(in_axis),
                          std::move(out_axis), std::move(batch_axis), dtype);
}

Initializer he_uniform(std::vector<int64_t> in_axis, std::vector<int64_t> out_axis,
                       std::vector<int64_t> batch_axis, DType dtype) {
  return variance_scaling(2.0, "fan_in", "uniform", std::move(in_axis), std::move(out_axis),
                          std::move(batch_axis), dtype);
}

}  // namespace cujax::nn::initializers
