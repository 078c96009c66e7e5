// nnx.LayerNorm and nnx.RMSNorm over the last axis, nnx.BatchNorm over every axis but the
// feature axis, nnx.GroupNorm over groups of channels and nnx.InstanceNorm per example and
// channel; statistics in at least f32.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

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

struct GroupNormOptions {
  // Exactly one of num_groups and group_size (Flax: pass num_groups=None with group_size).
  std::optional<int64_t> num_groups = 32;
  std::optional<int64_t> group_size;
  double epsilon = 1e-6;
  std::optional<DType> dtype;
  DType param_dtype = DType::F32;
  bool use_bias = true;
  bool use_scale = true;
  nn::initializers::Initializer bias_init = nn::initializers::zeros();
  nn::initializers::Initializer scale_init = nn::initializers::ones();
  // The axes of the statistics, which must include the last (feature) axis; empty means every
  // axis but the first (the batch axis), as Flax's reduction_axes=None.
  std::vector<int64_t> reduction_axes;
  bool use_fast_variance = true;
};

// nnx.GroupNorm: the last axis holds num_groups groups of group_size channels; each group is
// normalized with its mean and variance over the reduction axes (per example by default), then
// scaled and shifted per channel. scale (n,) ones, bias (n,) zeros.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_features, Rngs& rngs, const GroupNormOptions& options = {});
  Array operator()(const Array& x) const;
  int64_t num_features, num_groups, group_size;
  double epsilon;
  bool use_fast_variance;
  std::vector<int64_t> reduction_axes;
  Variable* scale = nullptr;
  Variable* bias = nullptr;

 private:
  std::optional<DType> dtype_;
};

struct InstanceNormOptions {
  double epsilon = 1e-6;
  std::optional<DType> dtype;
  DType param_dtype = DType::F32;
  bool use_bias = true;
  bool use_scale = true;
  nn::initializers::Initializer bias_init = nn::initializers::zeros();
  nn::initializers::Initializer scale_init = nn::initializers::ones();
  int64_t feature_axis = -1;  // Flax's feature_axes; never the leading (batch) axis
  bool use_fast_variance = true;
};

// nnx.InstanceNorm: each example's channels normalized over every other non-batch axis (the
// statistics over axes 1.. except feature_axis), then scaled and shifted per channel.
class InstanceNorm : public Module {
 public:
  InstanceNorm(int64_t num_features, Rngs& rngs, const InstanceNormOptions& options = {});
  Array operator()(const Array& x) const;
  int64_t num_features, feature_axis;
  double epsilon;
  bool use_fast_variance;
  Variable* scale = nullptr;
  Variable* bias = nullptr;

 private:
  std::optional<DType> dtype_;
};

}  // namespace cujax::nnx
