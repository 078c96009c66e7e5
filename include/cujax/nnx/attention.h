// nnx.MultiHeadAttention with Flax NNX's parameters: query/key/value LinearGeneral kernels
// (in_features, num_heads, head_dim) and biases (num_heads, head_dim), out kernel
// (num_heads, head_dim, out_features) and bias (out_features,). attention_fn is pluggable
// (nn::dot_product_attention by default). In decode mode each call takes one position, writes
// its key and value into the cache (cached_key, cached_value (batch, max_len, num_heads,
// head_dim), cache_index i32: Cache variables made by init_cache) and attends to positions
// <= cache_index, as Flax's autoregressive cache.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cujax/nnx/linear.h"
#include "cujax/nnx/module.h"
#include "cujax/nnx/rngs.h"

namespace cujax::nnx {

// jax.nn.dot_product_attention's signature: (query, key, value, bias, mask, scale, is_causal,
// implementation).
using AttentionFn = std::function<Array(
    const Array&, const Array&, const Array&, const std::optional<Array>&,
    const std::optional<Array>&, std::optional<double>, bool, const std::optional<std::string>&)>;

struct MultiHeadAttentionOptions {
  std::optional<int64_t> qkv_features;  // default in_features
  std::optional<int64_t> out_features;  // default in_features
  std::optional<int64_t> in_kv_features;
  bool use_bias = true;
  std::optional<DType> dtype;
  DType param_dtype = DType::F32;
  nn::initializers::Initializer kernel_init = nn::initializers::lecun_normal();
  nn::initializers::Initializer bias_init = nn::initializers::zeros();
  AttentionFn attention_fn;  // default nn::dot_product_attention
  bool decode = false;
};

class MultiHeadAttention : public Module {
 public:
  MultiHeadAttention(int64_t num_heads, int64_t in_features, Rngs& rngs,
                     const MultiHeadAttentionOptions& options = {});
  // Self-attention when inputs_k/inputs_v are absent; mask (bool, broadcastable to
  // (batch, num_heads, T, S)) is passed on to attention_fn. `decode` overrides the option.
  Array operator()(const Array& inputs_q, const std::optional<Array>& inputs_k = std::nullopt,
                   const std::optional<Array>& inputs_v = std::nullopt,
                   const std::optional<Array>& mask = std::nullopt,
                   std::optional<bool> decode = std::nullopt);
  // Zeroed cache for inputs of shape (batch, max_len, in_features).
  void init_cache(const Shape& input_shape, DType dtype = DType::F32);

  int64_t num_heads, in_features, qkv_features, out_features, head_dim;
  bool decode;
  AttentionFn attention_fn;
  LinearGeneral query, key, value, out;
  Variable* cached_key = nullptr;
  Variable* cached_value = nullptr;
  Variable* cache_index = nullptr;
};

}  // namespace cujax::nnx
