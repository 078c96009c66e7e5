// remat: the same gradient as without it, and a smaller compiled peak memory (the backward
// keeps each block's input instead of its intermediates).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/jit.h"
#include "cujax/nn.h"
#include "cujax/nnx.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "cujax/remat.h"
#include "cujax/vmap.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;

TEST(Remat, SameGradientLessPeakMemory) {
  const int64_t n = 128;
  const Array w = jnp::multiply(random::normal(random::PRNGKey(1), {n, n}), 0.1);
  // Six matmuls per block: their results are what the backward pass needs.
  auto block = [w](const Array& x) {
    Array y = x;
    for (int i = 0; i < 6; ++i) y = jnp::tanh(jnp::matmul(y, w));
    return y;
  };
  auto rematted = remat(block);
  auto loss_plain = [&](const Array& x) {
    Array y = x;
    for (int b = 0; b < 4; ++b) y = block(y);
    return jnp::sum(y);
  };
  auto loss_remat = [&](const Array& x) {
    Array y = x;
    for (int b = 0; b < 4; ++b) y = rematted(y);
    return jnp::sum(y);
  };
  auto g_plain = jit(grad(loss_plain));
  auto g_remat = jit(grad(loss_remat));
  const Array x = random::normal(random::PRNGKey(2), {n, n});
  const auto a = g_plain(x).to_vector<float>(), b = g_remat(x).to_vector<float>();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
  // The values are equal; eagerly too.
  EXPECT_NEAR(loss_plain(x).item<float>(), loss_remat(x).item<float>(), 1e-4);
  const ShapeDtype spec{{n, n}, DType::F32};
  const int64_t plain = g_plain.lower(spec).compile().memory_analysis().peak_memory_in_bytes;
  const int64_t with_remat = g_remat.lower(spec).compile().memory_analysis().peak_memory_in_bytes;
  const int64_t matrix = n * n * 4;
  std::printf("peak memory: %lld bytes without remat, %lld with (%lld per activation)\n",
              static_cast<long long>(plain), static_cast<long long>(with_remat),
              static_cast<long long>(matrix));
  // Without remat the 24 activations are live at the turn; with it, the 4 block inputs and one
  // block's 6 recomputed activations.
  EXPECT_GE(plain, 20 * matrix);
  EXPECT_LT(with_remat, plain - 8 * matrix);
}

}  // namespace
}  // namespace cujax

namespace cujax {
namespace {

namespace jnp = cujax::numpy;

// Parameters passed as arguments get the gradient they get without remat.
TEST(Remat, GradientOfEveryArgument) {
  const Array x = random::normal(random::PRNGKey(2), {4, 5});
  const Array w = jnp::multiply(random::normal(random::PRNGKey(3), {5, 5}), 0.5);
  auto block = [](const Array& v, const Array& m) { return jnp::tanh(jnp::matmul(v, m)); };
  auto rematted = remat(block);
  auto plain = [&](const Array& v, const Array& m) { return jnp::sum(block(block(v, m), m)); };
  auto with = [&](const Array& v, const Array& m) { return jnp::sum(rematted(rematted(v, m), m)); };
  const auto [gx, gw] = grad(plain, argnums<0, 1>)(x, w);
  const auto [rx, rw] = grad(with, argnums<0, 1>)(x, w);
  const auto a = gw.to_vector<float>(), b = rw.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
  const auto c = gx.to_vector<float>(), d = rx.to_vector<float>();
  for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(c[i], d[i], 1e-5) << i;
  // The weight's gradient is not zero: a lost cotangent would show here.
  float norm = 0;
  for (float v : b) norm += v * v;
  EXPECT_GT(norm, 1e-3f);
}

// A rematted or custom-VJP function that closes over the value being differentiated has no rule
// for it: refused, where a silent zero gradient would be wrong.
TEST(Remat, ClosingOverADifferentiatedValueIsRefused) {
  const Array x = random::normal(random::PRNGKey(2), {4, 4});
  const Array w0 = random::normal(random::PRNGKey(3), {4, 4});
  auto loss = [&](const Array& w) {
    auto block = remat([w](const Array& v) { return jnp::tanh(jnp::matmul(v, w)); });
    return jnp::sum(block(x));
  };
  try {
    (void)grad(loss)(w0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closes over"), std::string::npos) << e.what();
  }
  // Closing over a value that is not differentiated is fine.
  auto loss_x = [&](const Array& v) {
    auto block = remat([w0](const Array& u) { return jnp::tanh(jnp::matmul(u, w0)); });
    return jnp::sum(block(v));
  };
  auto plain_x = [&](const Array& v) { return jnp::sum(jnp::tanh(jnp::matmul(v, w0))); };
  const auto a = grad(plain_x)(x).to_vector<float>(), b = grad(loss_x)(x).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
}

}  // namespace
}  // namespace cujax

namespace cujax {
namespace {

namespace jnp = cujax::numpy;

void expect_close(const Array& a, const Array& b, double tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol) << what << " at " << i;
}

// The peak bytes of jit(grad(loss)) for an (n, n) or (b, n, n) float32 argument.
template <class G>
int64_t peak_of(G&& g, const Shape& shape) {
  return g.lower(ShapeDtype{shape, DType::F32}).compile().memory_analysis().peak_memory_in_bytes;
}

// The policy decides what the backward keeps: with dots_saveable every matmul result is saved
// (the tanh after it is recomputed from it), with nothing_saveable only the block inputs, with
// everything_saveable all of it, as without remat. The gradients are the same in every case.
TEST(RematPolicy, ChangesWhatIsSavedNotTheGradient) {
  const int64_t n = 128;
  const Array w = jnp::multiply(random::normal(random::PRNGKey(1), {n, n}), 0.1);
  auto block = [w](const Array& x) {
    Array y = x;
    for (int i = 0; i < 6; ++i) y = jnp::tanh(jnp::matmul(y, w));
    return y;
  };
  auto loss_with = [&](const RematOptions& o) {
    auto rematted = remat(block, o);
    return [rematted](const Array& x) {
      Array y = x;
      for (int b = 0; b < 4; ++b) y = rematted(y);
      return jnp::sum(y);
    };
  };
  auto plain = [&](const Array& x) {
    Array y = x;
    for (int b = 0; b < 4; ++b) y = block(y);
    return jnp::sum(y);
  };
  const Array x = random::normal(random::PRNGKey(2), {n, n});
  const Array expected = jit(grad(plain))(x);
  const int64_t matrix = n * n * 4;
  std::vector<std::pair<std::string, CheckpointPolicy>> policies = {
      {"nothing_saveable", checkpoint_policies::nothing_saveable},
      {"dots_saveable", checkpoint_policies::dots_saveable},
      {"dots_with_no_batch_dims_saveable", checkpoint_policies::dots_with_no_batch_dims_saveable},
      {"everything_saveable", checkpoint_policies::everything_saveable}};
  std::map<std::string, int64_t> peak;
  for (const auto& [name, policy] : policies) {
    auto g = jit(grad(loss_with({.prevent_cse = true, .policy = policy})));
    expect_close(g(x), expected, 1e-5, name);
    peak[name] = peak_of(g, {n, n});
    std::printf("%s: peak %lld bytes (%lld per activation)\n", name.c_str(),
                static_cast<long long>(peak[name]), static_cast<long long>(matrix));
  }
  // Without the barrier the compiler's CSE may merge the recomputation into the forward pass.
  auto g_cse = jit(grad(loss_with({.prevent_cse = false, .policy = nullptr})));
  expect_close(g_cse(x), expected, 1e-5, "prevent_cse=false");
  const int64_t merged = peak_of(g_cse, {n, n});
  std::printf("nothing_saveable, prevent_cse=false: peak %lld bytes\n",
              static_cast<long long>(merged));
  // 24 saved matmul results against 4 block inputs and one block's recomputation.
  EXPECT_GE(peak["dots_saveable"], peak["nothing_saveable"] + 12 * matrix);
  // A 2-D matmul has no batch dimensions: saved as by dots_saveable.
  EXPECT_EQ(peak["dots_with_no_batch_dims_saveable"], peak["dots_saveable"]);
  EXPECT_GE(peak["everything_saveable"], peak["nothing_saveable"] + 12 * matrix);
  EXPECT_GE(peak_of(jit(grad(plain)), {n, n}), 20 * matrix);
  // The recomputation merged back into the forward pass keeps the activations alive.
  EXPECT_GE(merged, peak["nothing_saveable"] + 12 * matrix);
}

// dots_with_no_batch_dims_saveable leaves batched matmuls (attention scores) to be recomputed.
TEST(RematPolicy, BatchedMatmulsAreNotSavedByNoBatchDims) {
  const int64_t b = 4, n = 64;
  const Array w = jnp::multiply(random::normal(random::PRNGKey(1), {b, n, n}), 0.1);
  auto block = [w](const Array& x) {
    Array y = x;
    for (int i = 0; i < 6; ++i) y = jnp::tanh(jnp::matmul(y, w));  // batch dimension 0
    return y;
  };
  auto loss_with = [&](CheckpointPolicy policy) {
    auto rematted = remat(block, {.policy = policy});
    return [rematted](const Array& x) {
      Array y = x;
      for (int k = 0; k < 4; ++k) y = rematted(y);
      return jnp::sum(y);
    };
  };
  const Array x = random::normal(random::PRNGKey(2), {b, n, n});
  auto plain = [&](const Array& v) {
    Array y = v;
    for (int k = 0; k < 4; ++k) y = block(y);
    return jnp::sum(y);
  };
  const Array expected = jit(grad(plain))(x);
  auto g_dots = jit(grad(loss_with(checkpoint_policies::dots_saveable)));
  auto g_no_batch = jit(grad(loss_with(checkpoint_policies::dots_with_no_batch_dims_saveable)));
  auto g_nothing = jit(grad(loss_with(checkpoint_policies::nothing_saveable)));
  expect_close(g_dots(x), expected, 1e-5, "dots_saveable");
  expect_close(g_no_batch(x), expected, 1e-5, "dots_with_no_batch_dims_saveable");
  const int64_t matrix = b * n * n * 4;
  const int64_t dots = peak_of(g_dots, {b, n, n}), no_batch = peak_of(g_no_batch, {b, n, n}),
                nothing = peak_of(g_nothing, {b, n, n});
  std::printf(
      "batched: dots_saveable %lld, dots_with_no_batch_dims_saveable %lld, "
      "nothing_saveable %lld bytes\n",
      static_cast<long long>(dots), static_cast<long long>(no_batch),
      static_cast<long long>(nothing));
  EXPECT_GE(dots, no_batch + 12 * matrix);
  EXPECT_EQ(no_batch, nothing);
}

int count_of(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

// prevent_cse: the recomputation starts from an optimization_barrier, so CSE cannot fold it
// into the forward; without it there is no barrier.
TEST(RematPolicy, PreventCsePutsABarrierBeforeTheRecomputation) {
  const Array w = jnp::multiply(random::normal(random::PRNGKey(1), {8, 8}), 0.3);
  auto block = [w](const Array& x) { return jnp::tanh(jnp::matmul(jnp::tanh(x), w)); };
  auto lowered = [&](bool prevent_cse) {
    auto rematted = remat(block, {.prevent_cse = prevent_cse});
    auto g = jit(grad([rematted](const Array& x) { return jnp::sum(rematted(rematted(x))); }));
    const Array x = random::normal(random::PRNGKey(2), {8, 8});
    auto plain = [&](const Array& v) { return jnp::sum(block(block(v))); };
    expect_close(g(x), grad(plain)(x), 1e-5, prevent_cse ? "prevent_cse" : "no prevent_cse");
    return g.lower(ShapeDtype{{8, 8}, DType::F32}).as_text();
  };
  EXPECT_EQ(count_of(lowered(true), "optimization_barrier"), 2);
  EXPECT_EQ(count_of(lowered(false), "optimization_barrier"), 0);
}

// jax.checkpoint under the name JAX gives it, on pytree arguments and outputs.
TEST(RematPolicy, CheckpointSpellingWithPytrees) {
  const Array x = random::normal(random::PRNGKey(4), {3, 4});
  const std::vector<Array> ws = {jnp::multiply(random::normal(random::PRNGKey(5), {4, 4}), 0.5),
                                 jnp::multiply(random::normal(random::PRNGKey(6), {4, 2}), 0.5)};
  auto f = [](const std::vector<Array>& w, const Array& v) {
    const Array h = jnp::tanh(jnp::matmul(v, w[0]));
    return std::make_pair(jnp::sin(jnp::matmul(h, w[1])), jnp::multiply(h, h));
  };
  namespace jax = cujax;
  auto ck = jax::ad_checkpoint::checkpoint(f, {.policy = checkpoint_policies::dots_saveable});
  auto loss = [](const auto& fn) {
    return [fn](const std::vector<Array>& w, const Array& v) {
      const auto [a, b] = fn(w, v);
      return jnp::add(jnp::sum(jnp::multiply(a, a)), jnp::sum(b));
    };
  };
  const auto [gw, gx] = grad(loss(f), argnums<0, 1>)(ws, x);
  const auto [cw, cx] = grad(loss(ck), argnums<0, 1>)(ws, x);
  expect_close(cx, gx, 1e-5, "d/dx");
  expect_close(cw[0], gw[0], 1e-5, "d/dw0");
  expect_close(cw[1], gw[1], 1e-5, "d/dw1");
  // Eagerly it is f.
  expect_close(ck(ws, x).first, f(ws, x).first, 0, "value");
}

// A rematted custom_vjp keeps its rule: the replay records the rule again (here it clips).
TEST(RematPolicy, CustomRuleInsideIsKept) {
  auto clip = custom_vjp([](const Array& v) { return v; },
                         [](const Array& v) { return std::pair<Array, std::vector<Array>>(v, {}); },
                         [](const std::vector<Array>&, const Array& g) {
                           return std::vector<Array>{jnp::clip(g, -0.5, 0.5)};
                         });
  auto f = [clip](const Array& v) { return jnp::multiply(clip(jnp::multiply(v, 3.0)), 2.0); };
  const Array x = random::normal(random::PRNGKey(7), {5});
  auto plain = grad([&](const Array& v) { return jnp::sum(f(v)); })(x);
  auto rm = remat(f);
  auto with = grad([&](const Array& v) { return jnp::sum(rm(v)); })(x);
  expect_close(with, plain, 1e-6, "clipped");
  // d/dx = 3 * clip(2, -0.5, 0.5) = 1.5 everywhere.
  expect_close(with, jnp::full({5}, 1.5, DType::F32), 1e-6, "hand");
}

// A rematted function vmapped inside grad is rematted again in its vmapped form: the gradients
// are those of the plain function, for a mapped and an unmapped argument, with every policy.
TEST(RematPolicy, GradOfVmapOfRemat) {
  const Array xs = random::normal(random::PRNGKey(9), {4, 3, 5});
  const Array w = jnp::multiply(random::normal(random::PRNGKey(10), {5, 5}), 0.5);
  auto block = [](const Array& x, const Array& m) {
    return jnp::tanh(jnp::matmul(jnp::tanh(jnp::matmul(x, m)), m));
  };
  auto loss = [](const auto& fn) {
    return [fn](const Array& x, const Array& m) {
      return jnp::sum(vmap(fn, {0, not_mapped})(x, m));
    };
  };
  const auto [gx, gw] = grad(loss(block), argnums<0, 1>)(xs, w);
  for (const CheckpointPolicy& policy : {CheckpointPolicy(checkpoint_policies::nothing_saveable),
                                         CheckpointPolicy(checkpoint_policies::dots_saveable)}) {
    const auto [rx, rw] = grad(loss(remat(block, {.policy = policy})), argnums<0, 1>)(xs, w);
    expect_close(rx, gx, 1e-5, "d/dx");
    expect_close(rw, gw, 1e-5, "d/dw");
  }
}

struct RematMlp : nnx::Module {
  nnx::Linear linear1, linear2;
  nnx::BatchNorm bn;
  explicit RematMlp(nnx::Rngs& rngs) : linear1(6, 16, rngs), linear2(16, 3, rngs), bn(16, rngs) {
    child("linear1", linear1);
    child("linear2", linear2);
    child("bn", bn);
  }
  Array operator()(const Array& x) { return linear2(nn::relu(bn(linear1(x)))); }
};

// nnx.remat on a module: the parameters' gradients and the batch statistics it updates are
// those of the same model without remat.
TEST(RematPolicy, NnxRematOfAModule) {
  nnx::Rngs r1(0), r2(0);
  RematMlp a(r1), b(r2);
  const Array x = random::normal(random::PRNGKey(8), {8, 6});
  auto loss_plain = [](RematMlp& m, const Array& v) { return jnp::mean(jnp::square(m(v))); };
  auto block = nnx::remat([](RematMlp& m, const Array& v) { return m(v); },
                          {.policy = checkpoint_policies::dots_saveable});
  auto loss_remat = [block](RematMlp& m, const Array& v) {
    return jnp::mean(jnp::square(block(m, v)));
  };
  const auto [va, ga] = nnx::value_and_grad(loss_plain)(a, x);
  const auto [vb, gb] = nnx::value_and_grad(loss_remat)(b, x);
  EXPECT_NEAR(va.item<float>(), vb.item<float>(), 1e-6);
  ASSERT_EQ(ga.size(), gb.size());
  for (const auto& [path, g] : ga) expect_close(gb.at(path), g, 1e-5, path);
  // The batch statistics moved, the same way.
  const State sa = nnx::state(a, nnx::VariableKind::BatchStat),
              sb = nnx::state(b, nnx::VariableKind::BatchStat);
  for (const auto& [path, v] : sa) expect_close(sb.at(path), v, 1e-6, path);
  EXPECT_GT(jnp::max(jnp::abs(sa.at("bn.mean"))).item<float>(), 0.0f);
  // Eagerly, the rematted call is the call.
  b.eval();
  a.eval();
  expect_close(block(b, x), a(x), 1e-6, "eval");
}

}  // namespace
}  // namespace cujax
