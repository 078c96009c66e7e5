// nn.dot_product_attention against a naive per-head loop in f64, causal vs an explicit mask,
// grouped-query attention vs repeated heads, gradients vs finite differences, errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/random.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;

Array rand(uint32_t seed, const Shape& s, DType t = DType::F64) {
  return random::normal(random::PRNGKey(seed), s, t);
}

// softmax(scale q.k + bias, masked) v for each (b, t, n), with key head n / (N / K).
std::vector<double> naive(const std::vector<double>& q, const std::vector<double>& k,
                          const std::vector<double>& v, const std::vector<double>* bias,
                          const std::vector<bool>* mask, int64_t B, int64_t T, int64_t S, int64_t N,
                          int64_t K, int64_t H, double scale) {
  std::vector<double> out(B * T * N * H, 0.0);
  const int64_t G = N / K;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> logit(S);
        double mx = -1e300;
        for (int64_t s = 0; s < S; ++s) {
          double d = 0;
          for (int64_t h = 0; h < H; ++h)
            d += q[((b * T + t) * N + n) * H + h] * k[((b * S + s) * K + n / G) * H + h];
          d *= scale;
          const int64_t i = ((b * N + n) * T + t) * S + s;
          if (bias) d += (*bias)[i];
          if (mask && !(*mask)[i]) d = -0.7 * 1.7976931348623157e308;
          logit[s] = d;
          mx = std::max(mx, d);
        }
        double z = 0;
        for (auto& l : logit) z += (l = std::exp(l - mx));
        for (int64_t s = 0; s < S; ++s)
          for (int64_t h = 0; h < H; ++h)
            out[((b * T + t) * N + n) * H + h] +=
                logit[s] / z * v[((b * S + s) * K + n / G) * H + h];
      }
  return out;
}

void expect_near_all(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

TEST(Attention, MatchesNaiveLoopWithBiasMaskAndGqa) {
  const int64_t B = 2, T = 3, S = 5, N = 4, K = 2, H = 8;
  const Array q = rand(1, {B, T, N, H}), k = rand(2, {B, S, K, H}), v = rand(3, {B, S, K, H});
  const Array bias = rand(4, {B, N, T, S});
  const Array mask = jnp::greater(rand(5, {B, N, T, S}), -0.8);
  const auto out = nn::dot_product_attention(q, k, v, bias, mask, 0.3).to_vector<double>();
  const auto b = bias.to_vector<double>();
  const auto mh = mask.to_vector<bool>();
  const std::vector<bool> m(mh.begin(), mh.end());
  expect_near_all(out,
                  naive(q.to_vector<double>(), k.to_vector<double>(), v.to_vector<double>(), &b, &m,
                        B, T, S, N, K, H, 0.3),
                  1e-12);
  // Default scale 1/sqrt(H), no bias or mask, rank-3 inputs.
  const auto plain = nn::dot_product_attention(jnp::at(q, {0}), jnp::at(k, {0}), jnp::at(v, {0}))
                         .to_vector<double>();
  const auto ref = naive(q.to_vector<double>(), k.to_vector<double>(), v.to_vector<double>(),
                         nullptr, nullptr, B, T, S, N, K, H, 1 / std::sqrt(8.0));
  expect_near_all(plain, std::vector<double>(ref.begin(), ref.begin() + T * N * H), 1e-12);
}

TEST(Attention, CausalEqualsExplicitTrilMask) {
  const Array q = rand(6, {2, 6, 2, 8}), k = rand(7, {2, 6, 2, 8}), v = rand(8, {2, 6, 2, 8});
  const Array tril =
      jnp::reshape(jnp::astype(jnp::tril(jnp::ones({6, 6})), DType::Bool), {1, 1, 6, 6});
  const auto causal =
      nn::dot_product_attention(q, k, v, std::nullopt, std::nullopt, std::nullopt, true);
  const auto masked = nn::dot_product_attention(q, k, v, std::nullopt, tril);
  expect_near_all(causal.to_vector<double>(), masked.to_vector<double>(), 0);
  // The first query sees only the first key: its output is v[:, 0].
  const auto first = jnp::at(causal, {numpy::Slice(), 0}).to_vector<double>();
  expect_near_all(first, jnp::at(v, {numpy::Slice(), 0}).to_vector<double>(), 1e-12);
}

TEST(Attention, GroupedQueryEqualsRepeatedHeads) {
  const Array q = rand(9, {1, 4, 6, 8}), k = rand(10, {1, 5, 2, 8}), v = rand(11, {1, 5, 2, 8});
  const auto gqa =
      nn::dot_product_attention(q, k, v, std::nullopt, std::nullopt, std::nullopt, true);
  // Query heads 0-2 use key head 0, 3-5 key head 1.
  const auto full = nn::dot_product_attention(q, jnp::repeat(k, 3, 2), jnp::repeat(v, 3, 2),
                                              std::nullopt, std::nullopt, std::nullopt, true);
  expect_near_all(gqa.to_vector<double>(), full.to_vector<double>(), 1e-12);
}

TEST(Attention, LowPrecisionMatchesF32WithinRounding) {
  const Array q = rand(12, {1, 4, 2, 16}, DType::F32), k = rand(13, {1, 4, 2, 16}, DType::F32);
  const Array v = rand(14, {1, 4, 2, 16}, DType::F32);
  const Array ref = nn::dot_product_attention(q, k, v);
  const Array h = nn::dot_product_attention(
      jnp::astype(q, DType::BF16), jnp::astype(k, DType::BF16), jnp::astype(v, DType::BF16));
  EXPECT_EQ(h.dtype(), DType::BF16);
  expect_near_all(jnp::astype(h, DType::F64).to_vector<double>(),
                  jnp::astype(ref, DType::F64).to_vector<double>(), 0.05);
}

TEST(Attention, GradientsMatchFiniteDifferences) {
  const Array q = rand(15, {1, 3, 2, 4}), k = rand(16, {1, 3, 1, 4}), v = rand(17, {1, 3, 1, 4});
  const Array w = rand(18, {1, 3, 2, 4});
  auto loss = [&](const Array& qq, const Array& kk, const Array& vv) {
    return jnp::sum(jnp::multiply(
        nn::dot_product_attention(qq, kk, vv, std::nullopt, std::nullopt, std::nullopt, true), w));
  };
  auto [gq, gk, gv] = grad(loss, argnums<0, 1, 2>)(q, k, v);
  const std::vector<Array> args{q, k, v};
  const std::vector<Array> grads{gq, gk, gv};
  const double eps = 1e-6;
  for (int which = 0; which < 3; ++which) {
    const auto x = args[which].to_vector<double>();
    const auto g = grads[which].to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) {
      auto at = [&](double d) {
        auto xs = x;
        xs[i] += d;
        std::vector<Array> a = args;
        a[which] = jnp::array(xs, args[which].shape());
        return loss(a[0], a[1], a[2]).item<double>();
      };
      EXPECT_NEAR(g[i], (at(eps) - at(-eps)) / (2 * eps), 1e-6) << which << " " << i;
    }
  }
}

TEST(Attention, UnderJitEqualsEager) {
  const Array q = rand(19, {2, 4, 2, 8}, DType::F32), k = rand(20, {2, 4, 2, 8}, DType::F32);
  auto f = jit([](const Array& a, const Array& b) {
    return nn::dot_product_attention(a, b, b, std::nullopt, std::nullopt, std::nullopt, true,
                                     std::string("xla"));
  });
  expect_near_all(jnp::astype(f(q, k), DType::F64).to_vector<double>(),
                  jnp::astype(nn::dot_product_attention(q, k, k, std::nullopt, std::nullopt,
                                                        std::nullopt, true),
                              DType::F64)
                      .to_vector<double>(),
                  1e-6);
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    FAIL() << "no error, expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Attention, CudnnRequirementsAndBadInputs) {
  auto call = [](DType t, int64_t h) {
    const Array x = jnp::zeros({1, 4, 2, h}, t);
    return nn::dot_product_attention(x, x, x, std::nullopt, std::nullopt, std::nullopt, false,
                                     std::string("cudnn"));
  };
  expect_error([&] { call(DType::F32, 64); }, "float16 or bfloat16, got f32");
  expect_error([&] { call(DType::BF16, 12); }, "multiple of 8 and at most 128");
  // On the cpu backend the requirements hold: the custom call runs its reference kernel
  // (cudnn_attention_test checks its values and the device requirements).
  EXPECT_EQ(call(DType::BF16, 64).shape(), (Shape{1, 4, 2, 64}));
  const Array x = jnp::zeros({1, 4, 3, 8});
  const Array y = jnp::zeros({1, 4, 2, 8});
  expect_error([&] { nn::dot_product_attention(x, y, y); }, "multiple of key/value heads");
  expect_error(
      [&] {
        nn::dot_product_attention(y, y, y, std::nullopt, std::nullopt, std::nullopt, false,
                                  std::string("flash"));
      },
      "implementation must be");
  expect_error(
      [&] {
        nn::dot_product_attention(y, y, y, std::nullopt, jnp::ones({1, 1, 4, 4}));
      },
      "mask must be bool");
  expect_error(
      [&] {
        nn::dot_product_attention(y, y, y, jnp::ones({1, 3, 4, 4}));
      },
      "does not broadcast");
}

}  // namespace
}  // namespace cujax
