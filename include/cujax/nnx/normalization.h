// nnx.LayerNorm and nnx.RMSNorm over the last axis, nnx.BatchNorm over every axis but the
// feature axis; statistics in at least f32.
#pragma once

#include <cstdint>
#include <optional>

#include "cujax/nn/initializers.h"
#include "cujax/nnx/module.h"
#include "cujax/nnx/rngs.h"

namespace cujax::nnx {

struct NormOptions {
  double epsilon = 1e-6;
  bool use_bias = true;  // LayerNorm only
  bool use_scale = true;
  std::optional<DType> dtype;
  DType param_dtype = DType::F32;
};

// (x - mean) / sqrt(var + eps) * scale + bias, var = max(mean(x^2) - mean^2, 0) (Flax's fast
// variance); scale (n,) ones, bias (n,) zeros.
class LayerNorm : public Module {
 public:
  LayerNorm(int64_t num_features, Rngs& rngs, const NormOptions& options = {});
  Array operator()(const Array& x) const;
  int64_t num_features;
  double epsilon;
  Variable* scale = nullptr;
  Variable* bias = nullptr;

 private:
  std::optional<DType> dtype_;
};

// x / sqrt(mean(x^2) + eps) * scale; scale (n,) ones.
class RMSNorm : public Module {
 public:
  RMSNorm(int64_t num_features, Rngs& rngs, const NormOptions& options = {});
  Array operator()(const Array& x) const;
  int64_t num_features;
  double epsilon;
  Variable* scale = nullptr;

 private:
  std::optional<DType> dtype_;
};

struct BatchNormOptions {
  bool use_running_average = false;
  int64_t axis = -1;  // the feature axis
  double momentum = 0.99;
  double epsilon = 1e-5;
  std::optional<DType> dtype;
  DType param_dtype = DType::F32;
  bool use_bias = true;
  bool use_scale = true;
  nn::initializers::Initializer bias_init = nn::initializers::zeros();
  nn::initializers::Initializer scale_init = nn::initializers::ones();
  bool use_fast_variance = true;  // var = mean(x^2) - mean^2, else mean((x - mean)^2)
};

// nnx.BatchNorm: variables mean (BatchStat, zeros), var (BatchStat, ones), scale (ones), bias
// (zeros), each (num_features,). In training (use_running_average false) it normalizes with the
// batch's statistics over every axis but `axis` and moves mean and var toward them by
// 1 - momentum, in place (under nnx::jit the new values come out of the program); with
// use_running_average it normalizes with mean and var. use_running_average is a static
// attribute: model.train() / model.eval() set it.
class BatchNorm : public Module {
 public:
  BatchNorm(int64_t num_features, Rngs& rngs, const BatchNormOptions& options = {});
  Array operator()(const Array& x, std::optional<bool> use_running_average = std::nullopt);
  int64_t num_features;
  bool use_running_average;
  int64_t axis;
  double momentum, epsilon;
  bool use_fast_variance;
  Variable* mean;
  Variable* var;
  Variable* scale = nullptr;
  Variable* bias = nullptr;

 private:
  std::optional<DType> dtype_;
};

}  // namespace cujax::nnx
