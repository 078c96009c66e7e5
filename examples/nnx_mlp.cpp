// Flax's NNX MLP tutorial in cujax: a user-defined nnx::Module, nnx::Optimizer, nnx::jit and
// nnx::value_and_grad. The Flax program it follows:
//
//   class MLP(nnx.Module):
//     def __init__(self, din, dmid, dout, *, rngs):
//       self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
//       self.linear2 = nnx.Linear(dmid, dout, rngs=rngs)
//     def __call__(self, x):
//       return self.linear2(nnx.gelu(self.linear1(x)))
//
//   model = MLP(1, 32, 1, rngs=nnx.Rngs(0))
//   optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
//   def loss_fn(model, x, y): return ((model(x) - y) ** 2).mean()
//   @nnx.jit
//   def train_step(model, optimizer, x, y):
//     loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
//     optimizer.update(model, grads)
//     return loss
//
// It fits y = sin(2x) on [-1.5, 1.5] and exits non-zero unless the loss falls at least tenfold.
#include <cstdio>

#include "cujax/nn.h"
#include "cujax/nnx.h"
#include "cujax/numpy.h"
#include "cujax/optax.h"
#include "cujax/random.h"

namespace jnp = cujax::numpy;
namespace nnx = cujax::nnx;
namespace optax = cujax::optax;
using cujax::Array;

// Python's attributes register themselves; in C++ the constructor names each submodule (a
// forgotten child(...) is an error the first time the model's state is taken).
struct MLP : nnx::Module {
  nnx::Linear linear1, linear2;
  MLP(int64_t din, int64_t dmid, int64_t dout, nnx::Rngs& rngs)
      : linear1(din, dmid, rngs), linear2(dmid, dout, rngs) {
    child("linear1", linear1);
    child("linear2", linear2);
  }
  Array operator()(const Array& x) const { return linear2(cujax::nn::gelu(linear1(x))); }
};

int main() {
  nnx::Rngs rngs(0);
  MLP model(1, 32, 1, rngs);
  nnx::Optimizer optimizer(model, optax::adam(1e-2));

  auto [data_key, _] = cujax::random::split(cujax::random::PRNGKey(1));
  const Array x = cujax::random::uniform(data_key, {128, 1}, cujax::DType::F32, -1.5, 1.5);
  const Array y = jnp::sin(2.0 * x);

  auto loss_fn = [](MLP& m, const Array& xs, const Array& ys) {
    return jnp::mean(jnp::square(m(xs) - ys));
  };
  auto grad_fn = nnx::value_and_grad(loss_fn);  // jitted once, reused every step

  double first = 0, last = 0;
  for (int step = 0; step <= 300; ++step) {
    auto [loss, grads] = grad_fn(model, x, y);
    optimizer.update(model, grads);
    if (step == 0) first = loss.item<float>();
    if (step % 100 == 0) {
      last = loss.item<float>();
      std::printf("step %3d  loss %.6f\n", step, last);
    }
  }
  std::printf("loss fell %.1fx in %lld steps (%lld parameters)\n", first / last,
              static_cast<long long>(optimizer.step.value.item<uint32_t>()),
              static_cast<long long>(nnx::count(model)));
  if (!(last * 10 <= first)) {
    std::printf("FAILED: the loss did not fall tenfold\n");
    return 1;
  }
  return 0;
}
