// Linear regression by gradient descent, data-parallel on one mesh of every device of every
// process, as multi-process JAX. Alone it runs on this process's devices; under mpirun each
// process runs its own and the gradient is summed across all of them:
//   CUJAX_NUM_CPU_DEVICES=2 build-cpu/examples/example_data_parallel
//   mpirun -np 2 build-cpu/examples/example_data_parallel       (as root, docs/sharding.md)
// Every process builds the same global batch (the same seed) and device_put keeps its rows;
// the step is the one-device code. Exits non-zero unless w ends within 0.01 of the true one
// (the noise added to y).
#include <cmath>
#include <cstdio>

#include "cujax/distributed.h"
#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "cujax/sharding.h"

namespace jnp = cujax::numpy;
namespace jr = cujax::random;
using cujax::Array;
using cujax::P;

int main() {
  namespace distributed = cujax::distributed;
  distributed::initialize();  // mpirun's processes, or this one alone
  const int64_t devices = distributed::process_count() * distributed::local_device_count();
  const cujax::Mesh mesh = cujax::make_mesh({devices}, {"data"});

  const Array keys = jr::split(jr::PRNGKey(0), 2);
  const Array true_w = jnp::array({1.5, -2.0, 0.5}, cujax::Shape{3, 1});
  const Array x = jr::normal(jr::key_at(keys, 0), {64 * devices, 3});
  const Array y =
      jnp::matmul(x, true_w) + 0.01f * jr::normal(jr::key_at(keys, 1), {64 * devices, 1});
  const auto rows = cujax::NamedSharding(mesh, P("data", std::nullopt));
  const Array xs = cujax::device_put(x, rows), ys = cujax::device_put(y, rows);
  Array w = cujax::device_put(jnp::zeros({3, 1}), cujax::NamedSharding(mesh, P()));

  auto loss = [](const Array& w, const Array& x, const Array& y) {
    const Array d = jnp::matmul(x, w) - y;
    return jnp::mean(d * d);
  };
  auto step = cujax::jit([&](const Array& w, const Array& x, const Array& y) {
    auto [value, g] = cujax::value_and_grad(loss)(w, x, y);
    return std::pair{w - 0.1f * g, value};
  });
  float first = 0, last = 0;
  for (int i = 0; i < 100; ++i) {
    auto [next, value] = step(w, xs, ys);
    w = next;
    if (i == 0) first = value.item<float>();
    last = value.item<float>();  // replicated: every process can fetch it
  }
  // w is replicated on every device, so each process holds all of it.
  const auto got = w.to_vector<float>(), want = true_w.to_vector<float>();
  double error = 0;
  for (size_t i = 0; i < got.size(); ++i)
    error = std::max(error, std::abs(double(got[i]) - want[i]));
  if (distributed::process_index() == 0)
    std::printf("%d process(es) x %d device(s), mesh %s: loss %.4f -> %.6f, |w - w_true| %.2g\n",
                distributed::process_count(), distributed::local_device_count(), mesh.str().c_str(),
                first, last, error);
  distributed::shutdown();
  return error < 0.01 ? 0 : 1;
}
