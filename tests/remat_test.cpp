// remat: the same gradient as without it, and a smaller compiled peak memory (the backward
// keeps each block's input instead of its intermediates).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/jit.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "cujax/remat.h"

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
