// nnx: variable paths and shapes as Flax NNX names them, state/update/split/merge,
// functional_call under jit (tracers in, concrete values restored), layers against their
// formulas, Rngs streams against cujax::random, and the decode cache against full attention.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cujax/checkpoint.h"
#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/nn.h"
#include "cujax/nnx.h"
#include "cujax/numpy.h"
#include "cujax/optax.h"
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

namespace cujax {
namespace {

// ----- Modules that would fail silently, and Flax NNX's training names ---------------------

// A two-layer MLP as Flax's NNX tutorials write it, registering both layers.
struct TwoLayers : nnx::Module {
  nnx::Linear linear1, linear2;
  explicit TwoLayers(nnx::Rngs& rngs) : linear1(3, 4, rngs), linear2(4, 2, rngs) {
    child("linear1", linear1);
    child("linear2", linear2);
  }
  Array operator()(const Array& x) const { return linear2(nn::relu(linear1(x))); }
};

// The case: a submodule never registered (state() used to be silently empty).
struct NothingRegistered : nnx::Module {
  nnx::Linear linear;
  explicit NothingRegistered(nnx::Rngs& rngs) : linear(3, 4, rngs) {}
};

// One of two layers forgotten.
struct SecondForgotten : nnx::Module {
  nnx::Linear linear1, linear2;
  explicit SecondForgotten(nnx::Rngs& rngs) : linear1(3, 4, rngs), linear2(4, 2, rngs) {
    child("linear1", linear1);
  }
};

// A Variable member instead of param(...).
struct VariableMember : nnx::Module {
  nnx::Variable scale{VariableKind::Param, jnp::ones({3})};
};

// A registered child that itself forgot a member: found from the outer module too.
struct Outer : nnx::Module {
  SecondForgotten inner;
  explicit Outer(nnx::Rngs& rngs) : inner(rngs) { child("inner", inner); }
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

size_t offset_in(const void* object, const void* member) {
  return static_cast<size_t>(static_cast<const char*>(member) - static_cast<const char*>(object));
}

TEST(NnxMembers, UnregisteredMembersAreErrorsNamingThem) {
  nnx::Rngs rngs(0);
  TwoLayers good(rngs);
  EXPECT_EQ(nnx::state(good).size(), 4u);

  NothingRegistered none_registered(rngs);
  const std::string e1 = message_of([&] { (void)nnx::state(none_registered); });
  EXPECT_NE(e1.find("NothingRegistered holds a cujax::nnx::Linear member (at byte " +
                    std::to_string(offset_in(&none_registered, &none_registered.linear)) + " of "),
            std::string::npos)
      << e1;
  EXPECT_NE(e1.find("child(\"name\", member)"), std::string::npos) << e1;

  SecondForgotten forgot(rngs);
  const std::string e2 = message_of([&] { (void)nnx::split(forgot); });
  EXPECT_NE(e2.find("at byte " + std::to_string(offset_in(&forgot, &forgot.linear2))),
            std::string::npos)
      << e2;

  VariableMember var;
  const std::string e3 = message_of([&] { (void)nnx::state(var); });
  EXPECT_NE(e3.find("holds a cujax::nnx::Variable member"), std::string::npos) << e3;
  EXPECT_NE(e3.find("param(\"name\", value)"), std::string::npos) << e3;

  Outer outer(rngs);
  const std::string e4 = message_of([&] {
    (void)nnx::functional_call(outer, nnx::state(static_cast<nnx::Module&>(outer)),
                               [] { return 0; });
  });
  EXPECT_NE(e4.find("Outer holds a cujax::nnx::Linear member (at byte " +
                    std::to_string(offset_in(&outer, &outer.inner.linear2))),
            std::string::npos)
      << e4;
}

// Flax's idiom of nnx.merge inside jit would leave tracers in the module: refused, pointing to
// functional_call, and the module keeps its concrete values.
TEST(NnxMembers, MergeUnderATraceIsAnError) {
  nnx::Rngs rngs(0);
  nnx::Linear lin(2, 3, rngs);
  auto [graphdef, states] = nnx::split(lin);
  auto f = jit([&, graphdef = graphdef](const State& params, const Array& x) {
    nnx::merge(graphdef, {params});
    return lin(x);
  });
  const std::string e = message_of([&] { (void)f(states[0], jnp::ones({1, 2})); });
  EXPECT_NE(e.find("nnx.merge: 'kernel' is a tracer"), std::string::npos) << e;
  EXPECT_NE(e.find("nnx::functional_call(model, state, fn)"), std::string::npos) << e;
  EXPECT_FALSE(lin.kernel->value.is_tracer());
  // Eagerly, merge still puts concrete states back.
  State doubled = states[0];
  doubled.set("kernel", states[0].at("kernel") * 2.0);
  nnx::merge(graphdef, {doubled});
  expect_close(lin.kernel->value, states[0].at("kernel") * 2.0, 0);
}

TEST(NnxTraining, ValueAndGradMatchesTheFunctionalForm) {
  nnx::Rngs rngs(1);
  TwoLayers model(rngs);
  const Array x = jnp::reshape(jnp::linspace(-1.0, 1.0, 15), {5, 3});
  const Array y = jnp::reshape(jnp::linspace(0.0, 1.0, 10), {5, 2});
  auto loss_fn = [](TwoLayers& m, const Array& xs, const Array& ys) {
    return jnp::mean(jnp::square(m(xs) - ys));
  };
  auto grad_fn = nnx::value_and_grad(loss_fn);
  auto [loss, grads] = grad_fn(model, x, y);
  // The reference: the loss as a function of the parameter State, differentiated by cujax::grad.
  const State params = nnx::state(model, VariableKind::Param);
  auto [want_loss, want] = cujax::value_and_grad([&](const State& p) {
    return nnx::functional_call(model, p, [&] { return loss_fn(model, x, y); });
  })(params);
  expect_close(loss, want_loss, 1e-6);
  ASSERT_EQ(grads.size(), 4u);
  for (const auto& [path, g] : want) expect_close(grads.at(path), g, 1e-6);
  expect_close(nnx::grad(loss_fn)(model, x, y).at("linear2.kernel"), want.at("linear2.kernel"),
               1e-6);
  EXPECT_FALSE(model.linear1.kernel->value.is_tracer());
}

// argnums as Flax and JAX: 0 is the module (the gradient of its Params, a State), i > 0 the
// i-th other argument; one argnum gives its gradient, several a tuple. References: the
// functional form differentiated by cujax::value_and_grad, and finite differences in x.
TEST(NnxTraining, ValueAndGradWithArgnums) {
  nnx::Rngs rngs(1);
  TwoLayers model(rngs);
  const Array x = jnp::reshape(jnp::linspace(-1.0, 1.0, 15), {5, 3});
  const Array y = jnp::reshape(jnp::linspace(0.0, 1.0, 10), {5, 2});
  auto loss_fn = [](TwoLayers& m, const Array& xs, const Array& ys) {
    return jnp::mean(jnp::square(m(xs) - ys));
  };
  const State params = nnx::state(model, VariableKind::Param);
  auto [want_loss, want] = cujax::value_and_grad(
      [&](const State& p, const Array& xs, const Array& ys) {
        return nnx::functional_call(model, p, [&] { return loss_fn(model, xs, ys); });
      },
      argnums<0, 1, 2>)(params, x, y);
  auto [loss, gx] = nnx::value_and_grad(loss_fn, argnums<1>)(model, x, y);
  expect_close(loss, want_loss, 1e-6);
  ASSERT_EQ(gx.shape(), x.shape());
  expect_close(gx, std::get<1>(want), 1e-6);
  // d loss / d x[2, 1] by central differences in f64.
  const Array x64 = jnp::astype(x, DType::F64);
  auto at = [&](double eps) {
    std::vector<double> v = x64.to_vector<double>();
    v[2 * 3 + 1] += eps;
    return loss_fn(model, jnp::reshape(jnp::array(v), {5, 3}), y).item<double>();
  };
  EXPECT_NEAR(gx.to_vector<float>()[2 * 3 + 1], (at(1e-6) - at(-1e-6)) / 2e-6, 1e-5);
  auto [gp, gy] = nnx::grad(loss_fn, argnums<0, 2>)(model, x, y);
  ASSERT_EQ(gp.size(), 4u);
  for (const auto& [path, g] : std::get<0>(want)) expect_close(gp.at(path), g, 1e-6);
  expect_close(gy, std::get<2>(want), 1e-6);
  // With has_aux: ((loss, aux), (grads...)) and (grads, aux).
  auto aux_fn = [](TwoLayers& m, const Array& xs, const Array& ys) {
    const Array out = m(xs);
    return std::make_pair(jnp::mean(jnp::square(out - ys)), out);
  };
  auto r = nnx::value_and_grad(aux_fn, argnums<0, 1>, has_aux)(model, x, y);
  expect_close(r.first.first, want_loss, 1e-6);
  expect_close(r.first.second, model(x), 1e-6);
  expect_close(std::get<0>(r.second).at("linear1.kernel"), std::get<0>(want).at("linear1.kernel"),
               1e-6);
  expect_close(std::get<1>(r.second), std::get<1>(want), 1e-6);
  auto [gx2, aux] = nnx::grad(aux_fn, argnums<1>, has_aux)(model, x, y);
  expect_close(gx2, std::get<1>(want), 1e-6);
  expect_close(aux, model(x), 1e-6);
  EXPECT_FALSE(model.linear1.kernel->value.is_tracer());
}

TEST(NnxTraining, OptimizerUpdatesTheModelInPlace) {
  nnx::Rngs rngs(2);
  TwoLayers model(rngs);
  const Array x = jnp::reshape(jnp::linspace(-1.0, 1.0, 15), {5, 3});
  const Array y = jnp::reshape(jnp::linspace(0.0, 1.0, 10), {5, 2});
  auto loss_fn = [&](TwoLayers& m) { return jnp::mean(jnp::square(m(x) - y)); };
  nnx::Optimizer optimizer(model, optax::sgd(0.1));
  const State before = nnx::state(model);
  auto [loss, grads] = nnx::value_and_grad(loss_fn)(model);
  optimizer.update(grads);
  EXPECT_EQ(optimizer.step.value.dtype(), DType::U32);  // Flax's nnx.OptState(uint32)
  EXPECT_EQ(optimizer.step.value.item<uint32_t>(), 1u);
  EXPECT_EQ(optimizer.step.kind, VariableKind::OptState);
  for (const auto& [path, p] : nnx::state(model))
    expect_close(p, before.at(path) - 0.1 * grads.at(path), 1e-6);
  // Training lowers the loss.
  auto grad_fn = nnx::value_and_grad(loss_fn);
  for (int i = 0; i < 20; ++i) optimizer.update(model, grad_fn(model).second);
  EXPECT_LT(grad_fn(model).first.item<float>(), loss.item<float>());
  TwoLayers other(rngs);
  EXPECT_NE(message_of([&] { optimizer.update(other, grads); }).find("not the one"),
            std::string::npos);
  State wrong = grads;
  wrong.set("linear3.kernel", jnp::ones({1}));
  EXPECT_NE(message_of([&] { optimizer.update(wrong); }).find("grads has 5 entries"),
            std::string::npos);
}

}  // namespace
}  // namespace cujax

namespace cujax {
namespace {

// nnx::jit of a whole training step (value_and_grad and optimizer.update inside) against the
// same steps taken eagerly on an identical model.
TEST(NnxJit, TrainStepMatchesEagerStepsAndTracesOnce) {
  nnx::Rngs rngs_a(3), rngs_b(3);
  TwoLayers jitted_model(rngs_a), eager_model(rngs_b);
  const Array x = jnp::reshape(jnp::linspace(-1.0, 1.0, 15), {5, 3});
  const Array y = jnp::reshape(jnp::linspace(0.0, 1.0, 10), {5, 2});
  auto loss_fn = [](TwoLayers& m, const Array& xs, const Array& ys) {
    return jnp::mean(jnp::square(m(xs) - ys));
  };
  nnx::Optimizer jitted_opt(jitted_model, optax::adam(0.05));
  nnx::Optimizer eager_opt(eager_model, optax::adam(0.05));
  int traces = 0;
  auto train_step =
      nnx::jit([&](TwoLayers& model, nnx::Optimizer& optimizer, const Array& xs, const Array& ys) {
        ++traces;
        auto [loss, grads] = nnx::value_and_grad(loss_fn)(model, xs, ys);
        optimizer.update(grads);
        return loss;
      });
  auto eager_grad = nnx::value_and_grad(loss_fn);
  for (int step = 0; step < 5; ++step) {
    const Array loss = train_step(jitted_model, jitted_opt, x, y);
    auto [want_loss, grads] = eager_grad(eager_model, x, y);
    eager_opt.update(grads);
    expect_close(loss, want_loss, 1e-5);
  }
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(jitted_opt.step.value.item<uint32_t>(), 5u);  // counted inside the program
  EXPECT_FALSE(jitted_opt.step.value.is_tracer());
  const State want = nnx::state(eager_model);
  for (const auto& [path, p] : nnx::state(jitted_model)) {
    EXPECT_FALSE(p.is_tracer()) << path;
    expect_close(p, want.at(path), 1e-5);
  }
  for (const auto& [path, s] : jitted_opt.opt_state()) {
    EXPECT_FALSE(s.is_tracer()) << path;
    expect_close(s, eager_opt.opt_state().at(path), 1e-5);
  }
  // A new batch shape traces again; the same model at a new address is a new cache entry.
  train_step(jitted_model, jitted_opt, jnp::ones({2, 3}), jnp::ones({2, 2}));
  EXPECT_EQ(traces, 2);
}

TEST(NnxJit, AnOptimizerWithoutItsModelIsAnError) {
  nnx::Rngs rngs(4);
  TwoLayers model(rngs);
  nnx::Optimizer optimizer(model, optax::sgd(0.1));
  auto step = nnx::jit([](nnx::Optimizer& opt, const Array& g) {
    State grads = nnx::state(opt.model(), VariableKind::Param);
    for (auto& [path, v] : grads) v = v * 0.0 + g;
    opt.update(grads);
    return g;
  });
  const State before = nnx::state(model);
  EXPECT_NE(message_of([&] { step(optimizer, jnp::ones({})); }).find("without its model"),
            std::string::npos);
  for (const auto& [path, p] : nnx::state(model)) {
    EXPECT_FALSE(p.is_tracer()) << path;
    expect_close(p, before.at(path), 0);
  }
  EXPECT_EQ(optimizer.step.value.item<uint32_t>(), 0u);
}

// Dropout's RNG count is state the step changes: under nnx::jit it advances each call as it
// does eagerly, so consecutive calls draw different masks (a stale key would repeat one).
struct DropoutModel : nnx::Module {
  nnx::Rngs rngs;
  nnx::Dropout dropout;
  DropoutModel() : rngs(7), dropout(0.5, false, &rngs) {
    child("rngs", rngs);
    child("dropout", dropout);
  }
  Array operator()(const Array& x) const { return dropout(x); }
};

TEST(NnxJit, RngStateAdvancesAsEagerly) {
  DropoutModel jitted_model, eager_model;
  auto forward = nnx::jit([](DropoutModel& m, const Array& x) { return m(x); });
  const Array x = jnp::ones({64});
  const Array first = forward(jitted_model, x);
  const Array second = forward(jitted_model, x);
  expect_close(first, eager_model(x), 0);
  expect_close(second, eager_model(x), 0);
  EXPECT_GT(jnp::sum(jnp::abs(first - second)).item<float>(), 0.0f);
}

// nnx.eval_shape's abstract state is a restore target: no parameter is computed first.
TEST(NnxJit, EvalShapeIsARestoreTarget) {
  nnx::Rngs rngs(5);
  TwoLayers model(rngs);
  const std::string dir = ::testing::TempDir() + "/nnx_eval_shape_ckpt";
  std::filesystem::remove_all(dir);
  checkpoint::StandardCheckpointer ckpt;
  ckpt.save(dir, nnx::state(model));
  const auto abstract = nnx::eval_shape([] {
    nnx::Rngs r(99);
    return std::make_unique<TwoLayers>(r);
  });
  const State restored = ckpt.restore(dir, abstract);
  const State want = nnx::state(model);
  ASSERT_EQ(restored.size(), want.size());
  for (const auto& [path, p] : want) expect_close(restored.at(path), p, 0);
  nnx::update(model, restored);
  std::filesystem::remove_all(dir);
}

// Flax's restore into an abstract model: eval_shape's model, split for the restore target, merged
// with the restored state. Before the merge its values are abstract (reading or computing with
// one throws); after it the model computes what the saved one did.
TEST(NnxJit, MergeIntoAnAbstractModel) {
  nnx::Rngs rngs(5);
  TwoLayers model(rngs);
  const std::string dir = ::testing::TempDir() + "/nnx_abstract_model_ckpt";
  std::filesystem::remove_all(dir);
  checkpoint::StandardCheckpointer ckpt;
  ckpt.save(dir, nnx::state(model));
  auto abstract = nnx::abstract_model([] {
    nnx::Rngs r(99);
    return std::make_unique<TwoLayers>(r);
  });
  static_assert(std::is_same_v<decltype(abstract), std::unique_ptr<TwoLayers>>);
  const Array& k = abstract->linear1.kernel->value;
  EXPECT_EQ(k.aval().str(), "f32[3,4]");
  EXPECT_TRUE(k.is_tracer());
  EXPECT_THROW(k.to_host(), ConcretizationError);
  const Array x = jnp::reshape(jnp::linspace(-1.0, 1.0, 6), {2, 3});
  EXPECT_NE(message_of([&] { (*abstract)(x); }).find("outside of its trace"), std::string::npos);
  // A jitted call on the abstract model throws too: its values have no concrete value.
  auto forward = nnx::jit([](TwoLayers& m, const Array& in) { return m(in); });
  EXPECT_NE(message_of([&] { forward(*abstract, x); }).find("has no concrete value"),
            std::string::npos);

  auto [graphdef, abstract_state] = nnx::split(*abstract);
  ASSERT_EQ(abstract_state.size(), 1u);
  const State restored = ckpt.restore(dir, abstract_state[0]);
  TwoLayers& merged = static_cast<TwoLayers&>(nnx::merge(graphdef, {restored}));
  EXPECT_EQ(&merged, abstract.get());
  EXPECT_FALSE(merged.linear1.kernel->value.is_tracer());
  expect_close(merged(x), model(x), 0);
  expect_close(forward(merged, x), model(x), 0);
  std::filesystem::remove_all(dir);
}

// nnx::state(optimizer) holds the step and the optimizer state: checkpointed with the model's
// and restored into a new optimizer, training goes on exactly as it would have.
TEST(NnxJit, OptimizerStepAndStateCheckpointAndResume) {
  nnx::Rngs rngs_a(6), rngs_b(6);
  TwoLayers model(rngs_a), resumed_model(rngs_b);
  const Array x = jnp::reshape(jnp::linspace(-1.0, 1.0, 15), {5, 3});
  const Array y = jnp::reshape(jnp::linspace(0.0, 1.0, 10), {5, 2});
  auto loss_fn = [](TwoLayers& m, const Array& xs, const Array& ys) {
    return jnp::mean(jnp::square(m(xs) - ys));
  };
  nnx::Optimizer optimizer(model, optax::adam(0.05));
  auto train_step =
      nnx::jit([&](TwoLayers& m, nnx::Optimizer& opt, const Array& xs, const Array& ys) {
        auto [loss, grads] = nnx::value_and_grad(loss_fn)(m, xs, ys);
        opt.update(grads);
        return loss;
      });
  for (int i = 0; i < 3; ++i) train_step(model, optimizer, x, y);
  const State opt_state = nnx::state(optimizer);
  EXPECT_EQ(opt_state.at("step").item<uint32_t>(), 3u);
  EXPECT_EQ(opt_state.size(), 1 + optimizer.opt_state().size());
  const std::string dir = ::testing::TempDir() + "/nnx_optimizer_ckpt";
  std::filesystem::remove_all(dir);
  checkpoint::StandardCheckpointer ckpt;
  ckpt.save(dir + "/model", nnx::state(model));
  ckpt.save(dir + "/optimizer", opt_state);

  nnx::Optimizer resumed(resumed_model, optax::adam(0.05));
  nnx::update(resumed_model, ckpt.restore(dir + "/model", nnx::state(resumed_model)));
  nnx::update(resumed, ckpt.restore(dir + "/optimizer", nnx::state(resumed)));
  EXPECT_EQ(resumed.step.value.item<uint32_t>(), 3u);
  for (int i = 0; i < 2; ++i) {
    const Array want = train_step(model, optimizer, x, y);
    expect_close(train_step(resumed_model, resumed, x, y), want, 0);
  }
  EXPECT_EQ(resumed.step.value.item<uint32_t>(), 5u);
  for (const auto& [path, p] : nnx::state(model))
    expect_close(nnx::state(resumed_model).at(path), p, 0);
  State wrong = nnx::state(resumed);
  wrong.set("step", jnp::zeros({}, DType::I32));
  EXPECT_NE(message_of([&] { nnx::update(resumed, wrong); }).find("'step' is i32[]"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cujax
