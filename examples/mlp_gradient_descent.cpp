// Fits y = sin(x) with a 1-32-32-1 tanh MLP by plain gradient descent: parameters initialized
// with Flax's defaults from JAX's PRNG, one jitted value_and_grad step, and the loss fetched to
// the host only every 100 steps (no hidden device-to-host syncs in the loop). Exits non-zero
// unless the loss falls at least 20-fold.
#include <cmath>
#include <cstdio>
#include <utility>
#include <vector>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/nn/initializers.h"
#include "cujax/numpy.h"
#include "cujax/random.h"

namespace jnp = cujax::numpy;
namespace jr = cujax::random;
namespace init = cujax::nn::initializers;
using cujax::Array;

struct Mlp {
  Array w1, b1, w2, b2, w3, b3;
};
CUJAX_REGISTER_TREE(Mlp, w1, b1, w2, b2, w3, b3);

Array forward(const Mlp& p, const Array& x) {
  Array h = jnp::tanh(jnp::matmul(x, p.w1) + p.b1);
  h = jnp::tanh(jnp::matmul(h, p.w2) + p.b2);
  return jnp::matmul(h, p.w3) + p.b3;
}

Array loss(const Mlp& p, const Array& x, const Array& y) {
  Array d = forward(p, x) - y;
  return jnp::mean(d * d);
}

int main() {
  Array keys = jr::split(jr::PRNGKey(0), 4);
  auto kernel = init::lecun_normal();
  Mlp params{kernel(jr::key_at(keys, 0), {1, 32}),  jnp::zeros({32}),
             kernel(jr::key_at(keys, 1), {32, 32}), jnp::zeros({32}),
             kernel(jr::key_at(keys, 2), {32, 1}),  jnp::zeros({1})};
  // 256 points on [-pi, pi].
  Array x = jr::uniform(jr::key_at(keys, 3), {256, 1}) * (2 * M_PI) - M_PI;
  Array y = jnp::sin(x);

  const double learning_rate = 0.03;
  cujax::JitOptions options;
  options.name = "train_step";
  auto step = cujax::jit(
      [learning_rate](const Mlp& p, const Array& x, const Array& y) {
        auto [value, g] = cujax::value_and_grad(loss)(p, x, y);
        std::vector<Array> w = cujax::tree_leaves(p), dw = cujax::tree_leaves(g);
        for (size_t i = 0; i < w.size(); ++i) w[i] = w[i] - learning_rate * dw[i];
        Mlp next = cujax::tree_unflatten(p, w);
        return std::pair{next, value};
      },
      options);

  double first = 0, last = 0;
  for (int i = 0; i <= 2000; ++i) {
    auto [next, value] = step(params, x, y);
    params = next;
    if (i % 100 == 0) {
      last = value.item<float>();
      if (i == 0) first = last;
      std::printf("step %4d  loss %.6f\n", i, last);
    }
  }
  std::printf("loss fell from %.4f to %.6f (%.0fx); compilations: %lld\n", first, last,
              first / last, static_cast<long long>(step.compile_count()));
  return last * 20 < first && step.compile_count() == 1 ? 0 : 1;
}
