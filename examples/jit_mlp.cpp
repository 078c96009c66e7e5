// A jitted MLP forward pass: parameters in a registered struct, a batch in, logits out.
#include <cstdio>

#include "cujax/jit.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"

namespace jnp = cujax::numpy;
using cujax::Array;

struct Mlp {
  Array w1, b1, w2, b2;
};
CUJAX_REGISTER_TREE(Mlp, w1, b1, w2, b2);

// Deterministic small weights (the PRNG arrives with the autodiff issue).
Array weights(int64_t rows, int64_t cols, double scale) {
  Array i = jnp::astype(jnp::arange(rows * cols), cujax::DType::F32);
  return jnp::reshape(jnp::sin(i * 0.37) * scale, {rows, cols});
}

int main() {
  Mlp params{weights(784, 128, 0.05), jnp::zeros({128}), weights(128, 10, 0.1), jnp::zeros({10})};
  cujax::JitOptions options;
  options.name = "mlp_forward";
  auto forward = cujax::jit(
      [](const Mlp& p, const Array& x) {
        Array h = cujax::nn::relu(jnp::matmul(x, p.w1) + p.b1);
        return jnp::matmul(h, p.w2) + p.b2;
      },
      options);
  Array x = weights(32, 784, 1.0);
  Array logits = forward(params, x);
  Array predictions = jnp::argmax(logits, -1);
  std::printf("logits %s, first row:", logits.aval().str().c_str());
  const auto values = logits.to_vector<float>();
  for (int j = 0; j < 10; ++j) std::printf(" %.4f", values[j]);
  std::printf("\npredicted classes of the first 8 inputs:");
  const auto pred = predictions.to_vector<int32_t>();
  for (int i = 0; i < 8; ++i) std::printf(" %d", pred[i]);
  forward(params, x);  // same shapes: served from the cache
  std::printf("\ncompilations: %lld (two calls, one signature)\n",
              static_cast<long long>(forward.compile_count()));
  return forward.compile_count() == 1 ? 0 : 1;
}
