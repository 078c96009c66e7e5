// nnx: variable paths and shapes as Flax NNX names them, state/update/split/merge,
// functional_call under jit (tracers in, concrete values restored), layers against their
// formulas, Rngs streams against cujax::random, and the decode cache against full attention.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "cujax/jit.h"
#include "cujax/nn.h"
#include "cujax/nnx.h"
#include "cujax/numpy.h"
#include "cujax/random.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using nnx::VariableKind;

std::vector<double> f64(const Array& a) {
  return jnp::astype(a, DType::F64).to_vector<double>();
}

void expect_close(const Array& a, const Array& b, double tol) {
  ASSERT_EQ(a.shape(), b.shape());
  const auto x = f64(a), y = f64(b);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol) << "at " << i;
}

TEST(Nnx, MultiHeadAttentionPathsAndShapesAsFlax) {
  nnx::Rngs rngs(0);
  nnx::MultiHeadAttentionOptions o;
  o.qkv_features = 16;
  o.out_features = 6;
  nnx::MultiHeadAttention mha(4, 8, rngs, o);
  const State s = nnx::state(mha, VariableKind::Param);
  std::vector<std::pair<std::string, Shape>> want{
      {"query.kernel", {8, 4, 4}}, {"query.bias", {4, 4}},
      {"key.kernel", {8, 4, 4}},   {"key.bias", {4, 4}},
      {"value.kernel", {8, 4, 4}}, {"value.bias", {4, 4}},
      {"out.kernel", {4, 4, 6}},   {"out.bias", {6}}};
  ASSERT_EQ(s.size(), want.size());
  size_t i = 0;
  for (const auto& [path, value] : s) {
    EXPECT_EQ(path, want[i].first);
    EXPECT_EQ(value.shape(), want[i].second) << path;
    ++i;
  }
  EXPECT_EQ(nnx::count(mha), 3 * (8 * 16 + 16) + 16 * 6 + 6);
  mha.init_cache({2, 5, 8});
  const State c = nnx::state(mha, VariableKind::Cache);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c.at("cached_key").shape(), (Shape{2, 5, 4, 4}));
  EXPECT_EQ(c.at("cache_index").dtype(), DType::I32);
}

TEST(Nnx, LinearAndInitializersAsFlax) {
  nnx::Rngs rngs(3);
  nnx::Linear lin(5, 7, rngs);
  // Flax draws the kernel from rngs.params() = fold_in(key(3), 0) with lecun_normal.
  const Array expect =
      nn::initializers::lecun_normal()(random::fold_in(random::PRNGKey(3), 0u), {5, 7});
  expect_close(lin.kernel->value, expect, 0);
  EXPECT_EQ(f64(lin.bias->value), std::vector<double>(7, 0.0));
  const Array x = random::normal(random::PRNGKey(1), {2, 3, 5});
  lin.bias->value = random::normal(random::PRNGKey(2), {7});
  expect_close(lin(x), jnp::add(jnp::matmul(x, lin.kernel->value), lin.bias->value), 1e-5);
  EXPECT_EQ(f64(rngs.find_variable("default.count")->value), std::vector<double>{2.0});
}

TEST(Nnx, NormsEmbedAndDropoutFormulas) {
  nnx::Rngs rngs(0);
  const Array x = random::normal(random::PRNGKey(4), {3, 6});
  nnx::LayerNorm ln(6, rngs);
  const auto xv = f64(x);
  const auto y = f64(ln(x));
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 6; ++j) m += xv[r * 6 + j] / 6;
    for (int j = 0; j < 6; ++j) v += (xv[r * 6 + j] - m) * (xv[r * 6 + j] - m) / 6;
    for (int j = 0; j < 6; ++j)
      EXPECT_NEAR(y[r * 6 + j], (xv[r * 6 + j] - m) / std::sqrt(v + 1e-6), 1e-5);
  }
  nnx::RMSNorm rms(6, rngs);
  const auto z = f64(rms(x));
  for (int r = 0; r < 3; ++r) {
    double ms = 0;
    for (int j = 0; j < 6; ++j) ms += xv[r * 6 + j] * xv[r * 6 + j] / 6;
    for (int j = 0; j < 6; ++j)
      EXPECT_NEAR(z[r * 6 + j], xv[r * 6 + j] / std::sqrt(ms + 1e-6), 1e-5);
  }
  nnx::Embed emb(10, 4, rngs);
  const Array rows = emb(jnp::array({3, 0, 9}));
  expect_close(jnp::at(rows, {1}), jnp::at(emb.embedding->value, {0}), 0);
  expect_close(emb.attend(rows), jnp::matmul(rows, jnp::transpose(emb.embedding->value)), 1e-6);
  nnx::Dropout drop(0.5, false, &rngs);
  const Array d = drop(jnp::ones({1000}));
  const auto dv = f64(d);
  int kept = 0;
  for (double e : dv) {
    EXPECT_TRUE(e == 0.0 || e == 2.0);
    kept += e == 2.0;
  }
  EXPECT_GT(kept, 400);
  EXPECT_LT(kept, 600);
  expect_close(drop(x, true), x, 0);
}

TEST(Nnx, StateUpdateSplitMerge) {
  nnx::Rngs rngs(0);
  nnx::Sequential seq;
  seq.add(std::make_unique<nnx::Linear>(3, 4, rngs));
  seq.add([](const Array& a) { return nn::relu(a); });
  seq.add(std::make_unique<nnx::Linear>(4, 2, rngs));
  const State s = nnx::state(seq);
  std::vector<std::string> paths;
  for (const auto& [p, v] : s) paths.push_back(p);
  EXPECT_EQ(paths, (std::vector<std::string>{"layers.0.kernel", "layers.0.bias", "layers.2.kernel",
                                             "layers.2.bias"}));
  State zero;
  zero.set("layers.2.bias", jnp::ones({2}));
  nnx::update(seq, zero);
  EXPECT_EQ(f64(seq.find_variable("layers.2.bias")->value), (std::vector<double>{1, 1}));
  State bad;
  bad.set("layers.2.bias", jnp::ones({3}));
  EXPECT_THROW(nnx::update(seq, bad), Error);
  auto [graphdef, states] = nnx::split(seq);
  ASSERT_EQ(states.size(), 1u);
  State doubled;
  for (const auto& [p, v] : states[0]) doubled.set(p, jnp::multiply(v, 2.0));
  nnx::merge(graphdef, {doubled});
  expect_close(seq.find_variable("layers.0.kernel")->value,
               jnp::multiply(s.at("layers.0.kernel"), 2.0), 0);
  State partial;
  partial.set("layers.0.kernel", doubled.at("layers.0.kernel"));
  EXPECT_THROW(nnx::merge(graphdef, {partial}), Error);
}

TEST(Nnx, FunctionalCallUnderJitRestoresConcreteValues) {
  nnx::Rngs rngs(1);
  nnx::Linear lin(3, 2, rngs);
  const Array kernel_before = lin.kernel->value;
  auto f = jit([&](const State& params, const Array& x) {
    return nnx::functional_call(lin, params, [&] {
      EXPECT_TRUE(lin.kernel->value.is_tracer());
      return lin(x);
    });
  });
  const Array x = random::normal(random::PRNGKey(5), {4, 3});
  State p;
  p.set("kernel", jnp::ones({3, 2}));
  p.set("bias", jnp::zeros({2}));
  expect_close(f(p, x), jnp::matmul(x, jnp::ones({3, 2})), 1e-6);
  EXPECT_FALSE(lin.kernel->value.is_tracer());
  EXPECT_EQ(lin.kernel->value.impl(), kernel_before.impl());
  // Different values, same signature: no retrace, and the new values are used.
  p.set("kernel", jnp::multiply(jnp::ones({3, 2}), 2.0));
  expect_close(f(p, x), jnp::multiply(jnp::matmul(x, jnp::ones({3, 2})), 2.0), 1e-5);
  EXPECT_EQ(f.compile_count(), 1);
}

TEST(Nnx, FunctionalCallRejectsUnreturnedChanges) {
  nnx::Rngs rngs(0);
  nnx::MultiHeadAttentionOptions o;
  o.decode = true;
  nnx::MultiHeadAttention mha(2, 4, rngs, o);
  mha.init_cache({1, 3, 4});
  const Array x = jnp::ones({1, 1, 4});
  EXPECT_THROW(
      nnx::functional_call(mha, nnx::state(mha, VariableKind::Param), [&] { return mha(x); }),
      Error);
  EXPECT_EQ(mha.cache_index->value.item<int32_t>(), 0);  // restored after the throw
  auto [y, cache] = nnx::functional_call(mha, nnx::state(mha, VariableKind::Param),
                                         VariableKind::Cache, [&] { return mha(x); });
  EXPECT_EQ(cache.at("cache_index").item<int32_t>(), 1);
  EXPECT_EQ(mha.cache_index->value.item<int32_t>(), 0);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4}));
}

TEST(Nnx, DecodeCacheMatchesCausalFullAttention) {
  nnx::Rngs rngs(2);
  nnx::MultiHeadAttentionOptions o;
  o.attention_fn = [](const Array& q, const Array& k, const Array& v,
                      const std::optional<Array>& bias, const std::optional<Array>& mask,
                      std::optional<double> scale, bool, const std::optional<std::string>& impl) {
    return nn::dot_product_attention(q, k, v, bias, mask, scale, !mask, impl);
  };
  nnx::MultiHeadAttention mha(2, 8, rngs, o);
  const Array x = random::normal(random::PRNGKey(7), {2, 5, 8});
  const Array full = mha(x);
  mha.init_cache({2, 5, 8});
  for (int64_t t = 0; t < 5; ++t) {
    const Array step = mha(jnp::at(x, {numpy::Slice(), numpy::Slice(t, t + 1)}), std::nullopt,
                           std::nullopt, std::nullopt, true);
    expect_close(step, jnp::at(full, {numpy::Slice(), numpy::Slice(t, t + 1)}), 1e-5);
  }
  EXPECT_EQ(mha.cache_index->value.item<int32_t>(), 5);
  EXPECT_THROW(mha(x, std::nullopt, std::nullopt, std::nullopt, true), Error);
}

TEST(Nnx, EvalShapeComputesNoValues) {
  const auto avals = nnx::eval_shape([] {
    nnx::Rngs rngs(0);
    return std::make_unique<nnx::Linear>(1000, 3000, rngs);
  });
  ASSERT_EQ(avals.size(), 2u);
  EXPECT_EQ(avals[0].first, "kernel");
  EXPECT_EQ(avals[0].second.shape, (Shape{1000, 3000}));
}

}  // namespace
}  // namespace cujax
