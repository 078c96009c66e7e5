// <cujax/cujax.h> alone brings the public API: names from each of JAX's modules, under the
// aliases the header documents, give the results that a second computation gives; and every
// header under include/cujax is reachable from the umbrella.
#include "cujax/cujax.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

// The aliases of cujax.h's comment, at global scope as a program would write them.
namespace jnp = cujax::numpy;
namespace lax = cujax::lax;
namespace jr = cujax::random;
namespace nn = cujax::nn;
namespace nnx = cujax::nnx;
namespace optax = cujax::optax;
namespace ocp = cujax::checkpoint;
namespace jax = cujax;

namespace {

namespace fs = std::filesystem;
using cujax::Array;

std::vector<float> values(const Array& x) {
  return jnp::astype(x, cujax::DType::F32).to_vector<float>();
}

void expect_near(const Array& got, const Array& want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  const auto g = values(got), w = values(want);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol) << "element " << i;
}

TEST(Umbrella, EveryPublicHeaderIsReachable) {
  const fs::path include = fs::path(CUJAX_SOURCE_DIR) / "include";
  const std::regex include_line("#include \"(cujax/[^\"]+)\"");
  std::set<std::string> reached, pending = {"cujax/cujax.h"};
  while (!pending.empty()) {
    const std::string header = *pending.begin();
    pending.erase(pending.begin());
    if (!reached.insert(header).second) continue;
    std::ifstream in(include / header);
    ASSERT_TRUE(in) << "cannot read " << (include / header);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::sregex_iterator m(text.begin(), text.end(), include_line), end; m != end; ++m)
      pending.insert((*m)[1]);
  }
  int headers = 0;
  for (const auto& entry : fs::recursive_directory_iterator(include / "cujax")) {
    if (entry.path().extension() != ".h") continue;
    ++headers;
    const std::string name = fs::relative(entry.path(), include).generic_string();
    EXPECT_TRUE(reached.count(name)) << name << " is not included by cujax/cujax.h";
  }
  EXPECT_GT(headers, 40);
}

TEST(Umbrella, NamesFromEachModule) {
  // jax.numpy and jax.lax: the same sum two ways.
  const Array x = jnp::reshape(jnp::astype(jnp::arange(6), cujax::DType::F32) - 2.0, {2, 3});
  expect_near(lax::add(x, x), x * 2.0);
  const Array total = lax::fori_loop(
      0, 4, [](const Array& i, const Array& v) { return v + jnp::astype(i, cujax::DType::F32); },
      x);
  expect_near(total, x + 6.0);  // 0 + 1 + 2 + 3

  // jax.nn against its definition; jax.grad against the derivative by hand.
  expect_near(nn::relu(x), jnp::maximum(x, 0.0));
  const Array g = jax::grad([](const Array& v) { return jnp::sum(v * v * v); })(x);
  expect_near(g, x * x * 3.0, 1e-4);

  // jax.random: a key gives the same numbers twice, split keys give different ones, in [0, 1).
  const Array key = jr::key(0);
  const Array keys = jr::split(key);
  const auto u0 = values(jr::uniform(jr::key_at(keys, 0), {64}));
  const auto u1 = values(jr::uniform(jr::key_at(keys, 1), {64}));
  EXPECT_EQ(u0, values(jr::uniform(jr::key_at(jr::split(jr::key(0)), 0), {64})));
  EXPECT_NE(u0, u1);
  for (float u : u0) EXPECT_TRUE(u >= 0.0f && u < 1.0f) << u;

  // flax.nnx: Linear is x @ kernel + bias.
  nnx::Rngs rngs(0);
  nnx::Linear linear(3, 4, rngs);
  expect_near(linear(x), jnp::matmul(x, linear.kernel->value) + linear.bias->value);
  const cujax::State params = nnx::state(linear, nnx::VariableKind::Param);
  ASSERT_EQ(params.size(), 2u);

  // optax: one SGD step is params - lr * grads.
  const auto tx = optax::sgd(0.5);
  cujax::State grads;
  for (const auto& [path, value] : params) grads.set(path, jnp::ones_like(value));
  const auto [updates, opt_state] = tx.update(grads, tx.init(params), params);
  const cujax::State stepped = optax::apply_updates(params, updates);
  for (const auto& [path, value] : params) expect_near(stepped.at(path), value - 0.5);

  // orbax.checkpoint: a round trip through a folder.
  const fs::path dir = fs::temp_directory_path() / ("cujax_umbrella_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ocp::StandardCheckpointer checkpointer;
  checkpointer.save(dir.string(), stepped);
  const cujax::State restored = checkpointer.restore(dir.string(), stepped);
  fs::remove_all(dir);
  for (const auto& [path, value] : stepped) expect_near(restored.at(path), value, 0.0);

  // jax.export: the artifact survives serialization with its calling convention.
  cujax::JitOptions options;
  options.name = "affine";
  auto affine = jax::jit([](const Array& v) { return v * 2.0 + 1.0; }, options);
  const cujax::Exported exported =
      cujax::export_(affine, cujax::ShapeDtype{{2, 3}, cujax::DType::F32});
  const cujax::Exported back = cujax::Exported::deserialize(exported.serialize());
  EXPECT_EQ(back.checksum(), exported.checksum());
  ASSERT_EQ(back.out_avals().size(), 1u);
  EXPECT_EQ(back.out_avals()[0].shape, (cujax::Shape{2, 3}));
  EXPECT_NE(back.mlir_module().find("stablehlo.multiply"), std::string::npos);
}

}  // namespace
