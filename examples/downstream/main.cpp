// Trains a one-hidden-layer MLP on y = sin(x) with a jitted Optax step, using only the installed
// <cujax/cujax.h>. Exits non-zero unless the jitted x + 1 is right and the loss falls tenfold.
#include <cujax/cujax.h>

#include <cmath>
#include <cstdio>
#include <tuple>

namespace jnp = cujax::numpy;
namespace nnx = cujax::nnx;
namespace optax = cujax::optax;
using cujax::Array;
using cujax::State;

struct Mlp : nnx::Module {
  explicit Mlp(nnx::Rngs& rngs) : hidden(1, 32, rngs), out(32, 1, rngs) {
    child("hidden", hidden);
    child("out", out);
  }
  Array operator()(const Array& x) const { return out(jnp::tanh(hidden(x))); }
  nnx::Linear hidden, out;
};

int main() {
  auto plus_one = cujax::jit([](const Array& x) { return x + 1.0; });
  const auto got = plus_one(jnp::arange(4.0)).to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    if (got[i] != i + 1.0f) {
      std::printf("jit(x + 1)[%d] = %g, expected %d\n", i, got[i], i + 1);
      return 1;
    }
  }

  nnx::Rngs rngs(0);
  Mlp model(rngs);
  const Array x = jnp::reshape(jnp::linspace(-3.0, 3.0, 64), {64, 1});
  const Array y = jnp::sin(x);
  const auto tx = optax::adam(0.01);
  auto loss_fn = [&](const State& params) {
    return nnx::functional_call(model, params,
                                [&] { return jnp::mean(jnp::square(model(x) - y)); });
  };
  auto step = cujax::jit([&](const State& params, const State& opt_state) {
    auto [loss, grads] = cujax::value_and_grad(loss_fn)(params);
    auto [updates, new_state] = tx.update(grads, opt_state, params);
    return std::tuple{optax::apply_updates(params, updates), new_state, loss};
  });

  State params = nnx::state(model, nnx::VariableKind::Param);
  State opt_state = tx.init(params);
  float first = 0, last = 0;
  for (int i = 0; i < 300; ++i) {
    Array loss;
    std::tie(params, opt_state, loss) = step(params, opt_state);
    last = loss.item<float>();
    if (i == 0) first = last;
  }
  std::printf("jit(x + 1) ok; MLP loss %.4f -> %.5f in 300 steps (%lld compilation)\n", first, last,
              static_cast<long long>(step.compile_count()));
  return std::isfinite(last) && last < first / 10 ? 0 : 1;
}
