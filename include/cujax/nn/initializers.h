// cujax::nn::initializers: parameter initializers under jax.nn.initializers' (and so Flax's
// flax.nnx.initializers') names and semantics, built on cujax::random, so that the same key
// gives the same parameters as in JAX.
//
//   auto init = cujax::nn::initializers::lecun_normal();   // Flax's default kernel_init
//   Array w = init(key, {784, 128});                        // f32[784,128]
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cujax/array.h"

namespace cujax::nn::initializers {

// An initializer: (key, shape, dtype) -> array; the dtype defaults to the one it was made with.
class Initializer {
 public:
  using Fn = std::function<Array(const Array& key, const Shape& shape, DType dtype)>;
  Initializer(Fn fn, DType dtype) : fn_(std::move(fn)), dtype_(dtype) {}
  Array operator()(const Array& key, const Shape& shape) const { return fn_(key, shape, dtype_); }
  Array operator()(const Array& key, const Shape& shape, DType dtype) const {
    return fn_(key, shape, dtype);
  }
  DType dtype() const { return dtype_; }

 private:
  Fn fn_;
  DType dtype_;
};

// (fan_in, fan_out) as jax.nn.initializers._compute_fans: in_size = prod(shape[in_axis]),
// out_size = prod(shape[out_axis]), and the receptive field (every other dimension but the
// batch axes) multiplies both. Needs a rank of at least 2.
std::pair<double, double> compute_fans(const Shape& shape,
                                       const std::vector<int64_t>& in_axis = {-2},
                                       const std::vector<int64_t>& out_axis = {-1},
                                       const std::vector<int64_t>& batch_axis = {});

Initializer zeros(DType dtype = DType::F32);
Initializer ones(DType dtype = DType::F32);
Initializer constant(double value, DType dtype = DType::F32);
// normal(key, shape) * stddev; uniform(key, shape) * scale in [0, scale).
Initializer normal(double stddev = 1e-2, DType dtype = DType::F32);
Initializer uniform(double scale = 1e-2, DType dtype = DType::F32);
Initializer truncated_normal(double stddev = 1e-2, DType dtype = DType::F32, double lower = -2.0,
                             double upper = 2.0);

// variance = scale / n with n = fan_in, fan_out, (fan_in + fan_out) / 2 ("fan_avg") or
// sqrt(fan_in * fan_out) ("fan_geo_avg"); distribution "truncated_normal" (on (-2, 2), stddev
// sqrt(variance) / 0.87962566103423978, the stddev of a standard normal truncated there),
// "normal" or "uniform" (on [-sqrt(3 variance), sqrt(3 variance))).
Initializer variance_scaling(double scale, const std::string& mode, const std::string& distribution,
                             std::vector<int64_t> in_axis = {-2},
                             std::vector<int64_t> out_axis = {-1},
                             std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32);

// variance_scaling(1, "fan_in", "truncated_normal"): Flax's default kernel initializer.
Initializer lecun_normal(std::vector<int64_t> in_axis = {-2}, std::vector<int64_t> out_axis = {-1},
                         std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32);
Initializer lecun_uniform(std::vector<int64_t> in_axis = {-2}, std::vector<int64_t> out_axis = {-1},
                          std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32);
// variance_scaling(1, "fan_avg", "uniform" / "truncated_normal").
Initializer glorot_uniform(std::vector<int64_t> in_axis = {-2},
                           std::vector<int64_t> out_axis = {-1},
                           std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32);
Initializer glorot_normal(std::vector<int64_t> in_axis = {-2}, std::vector<int64_t> out_axis = {-1},
                          std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32);
inline Initializer xavier_uniform(std::vector<int64_t> in_axis = {-2},
                                  std::vector<int64_t> out_axis = {-1},
                                  std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32) {
  return glorot_uniform(std::move(in_axis), std::move(out_axis), std::move(batch_axis), dtype);
}
inline Initializer xavier_normal(std::vector<int64_t> in_axis = {-2},
                                 std::vector<int64_t> out_axis = {-1},
                                 std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32) {
  return glorot_normal(std::move(in_axis), std::move(out_axis), std::move(batch_axis), dtype);
}
// variance_scaling(2, "fan_in", "truncated_normal" / "uniform").
Initializer he_normal(std::vector<int64_t> in_axis = {-2}, std::vector<int64_t> out_axis = {-1},
                      std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32);
Initializer he_uniform(std::vector<int64_t> in_axis = {-2}, std::vector<int64_t> out_axis = {-1},
                       std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32);
inline Initializer kaiming_normal(std::vector<int64_t> in_axis = {-2},
                                  std::vector<int64_t> out_axis = {-1},
                                  std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32) {
  return he_normal(std::move(in_axis), std::move(out_axis), std::move(batch_axis), dtype);
}
inline Initializer kaiming_uniform(std::vector<int64_t> in_axis = {-2},
                                   std::vector<int64_t> out_axis = {-1},
                                   std::vector<int64_t> batch_axis = {}, DType dtype = DType::F32) {
  return he_uniform(std::move(in_axis), std::move(out_axis), std::move(batch_axis), dtype);
}

}  // namespace cujax::nn::initializers
