// nnx.Linear and nnx.LinearGeneral: Flax NNX's parameter names, shapes and initializers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "cujax/nn/initializers.h"
#include "cujax/nnx/module.h"
#include "cujax/nnx/rngs.h"

namespace cujax::nnx {

struct LinearOptions {
  bool use_bias = true;
  std::optional<DType> dtype;  // computation dtype (default: inputs and params promoted)
  DType param_dtype = DType::F32;
  nn::initializers::Initializer kernel_init = nn::initializers::lecun_normal();
  nn::initializers::Initializer bias_init = nn::initializers::zeros();
};

// y = x @ kernel + bias over x's last axis; kernel (in, out), bias (out,).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, Rngs& rngs, const LinearOptions& options = {});
  Array operator()(const Array& x) const;
  int64_t in_features, out_features;
  Variable* kernel;
  Variable* bias = nullptr;

 private:
  std::optional<DType> dtype_;
};

// Contracts x's `axis` dimensions (of sizes in_features) with the kernel's leading ones:
// kernel in_features + out_features, bias out_features. The initializers see the kernel
// flattened to (prod(in), prod(out)), as Flax's.
class LinearGeneral : public Module {
 public:
  LinearGeneral(Shape in_features, Shape out_features, Rngs& rngs, std::vector<int64_t> axis = {-1},
                const LinearOptions& options = {});
  Array operator()(const Array& x) const;
  Shape in_features, out_features;
  std::vector<int64_t> axis;
  Variable* kernel;
  Variable* bias = nullptr;

 private:
  std::optional<DType> dtype_;
};

}  // namespace cujax::nnx
