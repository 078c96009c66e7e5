// cujax::nn: activation functions and friends under jax.nn's names, written with cujax::lax
// (so they work eagerly and under jit, and lower to the same StableHLO JAX gives). Inputs are
// floating-point arrays unless noted; results keep the input's dtype.
#pragma once

#include <cstdint>
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

}  // namespace cujax::nn
