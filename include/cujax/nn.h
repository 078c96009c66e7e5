// cujax::nn: activation functions and friends under jax.nn's names, written with cujax::lax
// (so they work eagerly and under jit, and lower to the same StableHLO JAX gives). Inputs are
// floating-point arrays unless noted; results keep the input's dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cujax/array.h"

namespace cujax::nn {

Array relu(const Array& x);  // max(x, 0)
// approximate: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); exact: x (1 + erf(x/sqrt 2)) / 2.
Array gelu(const Array& x, bool approximate = true);
Array sigmoid(const Array& x);  // logistic
Array silu(const Array& x);     // x * sigmoid(x)
// exp(x - max) / sum(exp(x - max)) along `axis` (or `axes`).
Array softmax(const Array& x, int64_t axis = -1);
Array softmax(const Array& x, const std::vector<int64_t>& axes);
// x - max - log(sum(exp(x - max))) along `axis` (or `axes`).
Array log_softmax(const Array& x, int64_t axis = -1);
Array log_softmax(const Array& x, const std::vector<int64_t>& axes);
// log(sum(exp(x))) over `axes`, computed as max + log(sum(exp(x - max))) so that large inputs do
// not overflow; a non-finite max is replaced by 0 in the shift, as in JAX.
Array logsumexp(const Array& x, const std::vector<int64_t>& axes, bool keepdims = false);
// indices[..., None] == arange(num_classes), as `dtype`; out-of-range indices give all zeros.
Array one_hot(const Array& indices, int64_t num_classes, DType dtype = DType::F32);

// jax.nn.dot_product_attention: softmax(scale * q k^T + bias, masked) v in JAX's layouts:
// query (B, T, N, H), key and value (B, S, K, H) with N a multiple of K (grouped-query
// attention: query head n uses key head n / (N / K)); rank-3 inputs drop B. `bias` and `mask`
// (bool, true = attend) are rank 4 and broadcast to the logits (B, N, T, S); `scale` defaults
// to 1 / sqrt(H); `is_causal` lets query t attend to keys s <= t. Masked logits become
// -0.7 * finfo.max (finite, as JAX). `implementation`: none or "xla" materialize the logits in
// at least f32 and take the softmax there (f16/bf16 inputs are cast back after it); "cudnn"
// checks cuDNN's requirements (f16/bf16, head dim a multiple of 8 and <= 128, or <= 256 on
// compute capability >= 9.0, a CUDA device of compute capability >= 8.0) and throws naming the
// first unmet one; the CPU backend never meets the last.
Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const std::optional<Array>& bias = std::nullopt,
                            const std::optional<Array>& mask = std::nullopt,
                            std::optional<double> scale = std::nullopt, bool is_causal = false,
                            const std::optional<std::string>& implementation = std::nullopt);

}  // namespace cujax::nn
