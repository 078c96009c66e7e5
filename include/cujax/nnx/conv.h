// nnx.Conv and nnx.ConvTranspose: convolutions over 1-3 spatial dimensions with channels last
// (NHWC inputs, HWIO kernels), Flax NNX's parameter names, shapes, initializers and defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cujax/lax.h"
#include "cujax/nn/initializers.h"
#include "cujax/nnx/module.h"
#include "cujax/nnx/rngs.h"

namespace cujax::nnx {

// Flax's padding argument: "SAME", "VALID", "CIRCULAR" (periodic), "CAUSAL" (1-d), an int p
// for (p, p) on every spatial dimension, or (low, high) per spatial dimension.
using ConvPadding = std::variant<std::string, int64_t, lax::Padding>;

struct ConvOptions {
  // Per spatial dimension; one value is broadcast (Flax's int); empty means 1.
  std::vector<int64_t> strides;
  ConvPadding padding = std::string("SAME");
  std::vector<int64_t> input_dilation;   // lhs dilation (transposed-conv style upsampling)
  std::vector<int64_t> kernel_dilation;  // rhs (atrous) dilation
  int64_t feature_group_count = 1;
  bool use_bias = true;
  std::optional<DType> dtype;  // computation dtype (default: inputs and params promoted)
  DType param_dtype = DType::F32;
  nn::initializers::Initializer kernel_init = nn::initializers::lecun_normal();
  nn::initializers::Initializer bias_init = nn::initializers::zeros();
};

// y = conv(x, kernel) + bias. x is (*batch, spatial..., in_features) with any number of batch
// dimensions (none included); kernel (kernel_size..., in_features / feature_group_count,
// out_features), bias (out_features,).
class Conv : public Module {
 public:
  Conv(int64_t in_features, int64_t out_features, std::vector<int64_t> kernel_size, Rngs& rngs,
       const ConvOptions& options = {});
  Array operator()(const Array& x) const;
  int64_t in_features, out_features;
  std::vector<int64_t> kernel_size, strides, input_dilation, kernel_dilation;
  ConvPadding padding;
  int64_t feature_group_count;
  Variable* kernel;
  Variable* bias = nullptr;

 private:
  std::optional<DType> dtype_;
};

struct ConvTransposeOptions {
  std::vector<int64_t> strides;  // per spatial dimension, one value broadcast, empty means 1
  // "SAME" (output = input * stride), "VALID", "CIRCULAR" or explicit padding of the dilated
  // input, as Conv's (CAUSAL is not Flax's for ConvTranspose).
  ConvPadding padding = std::string("SAME");
  std::vector<int64_t> kernel_dilation;
  bool use_bias = true;
  // Flips the kernel's spatial axes and swaps its in/out axes: the kernel is then (k...,
  // out_features, in_features) and the layer is the transpose (gradient) of a Conv with it.
  bool transpose_kernel = false;
  std::optional<DType> dtype;
  DType param_dtype = DType::F32;
  nn::initializers::Initializer kernel_init = nn::initializers::lecun_normal();
  nn::initializers::Initializer bias_init = nn::initializers::zeros();
};

// nnx.ConvTranspose: lax::conv_transpose of x (*batch, spatial..., in_features) with kernel
// (kernel_size..., in_features, out_features) (or (..., out, in) with transpose_kernel), plus
// bias (out_features,). CIRCULAR runs VALID and wraps the result onto a period of input *
// stride per spatial dimension, as Flax does.
class ConvTranspose : public Module {
 public:
  ConvTranspose(int64_t in_features, int64_t out_features, std::vector<int64_t> kernel_size,
                Rngs& rngs, const ConvTransposeOptions& options = {});
  Array operator()(const Array& x) const;
  int64_t in_features, out_features;
  std::vector<int64_t> kernel_size, strides, kernel_dilation;
  ConvPadding padding;
  bool transpose_kernel;
  Variable* kernel;
  Variable* bias = nullptr;

 private:
  std::optional<DType> dtype_;
};

// Flax's wrap-around padding of `x`'s spatial axes 1..n (CIRCULAR), as jnp.pad(mode="wrap").
Array pad_wrap(const Array& x, const std::vector<int64_t>& axes, const lax::Padding& pads);

}  // namespace cujax::nnx
