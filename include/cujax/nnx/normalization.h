// nnx.LayerNorm and nnx.RMSNorm over the last axis; statistics in at least f32.
#pragma once

#include <cstdint>
#include <optional>

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

}  // namespace cujax::nnx
