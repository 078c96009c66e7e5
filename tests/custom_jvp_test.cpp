// custom_jvp: JAX's log1pexp example (a rule that keeps the derivative finite where the naive
// one is NaN) through grad, jvp, vjp, linearize, the Jacobians, vmap and jit; rules that differ
// from f's true derivative (so the tests fail if f's own ops are differentiated); two arguments;
// second derivatives through the rule; a malformed rule; grad of vmap. Pytrees, nondiff_argnums
// and custom_vjp under vmap: custom_functions_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cujax/grad.h"
#include "cujax/jacobian.h"
#include "cujax/jit.h"
#include "cujax/linearize.h"
#include "cujax/numpy.h"
#include "cujax/vmap.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using Vec = std::vector<Array>;

Array f64(std::vector<double> v) {
  const Shape s{static_cast<int64_t>(v.size())};
  return array(HostTensor::from_vector(v, s));
}
Array f32(std::vector<float> v) {
  const Shape s{static_cast<int64_t>(v.size())};
  return array(HostTensor::from_vector(v, s));
}
std::vector<double> host(const Array& a) {
  return jnp::astype(a, DType::F64).to_vector<double>();
}

Array log1pexp_naive(const Array& x) {
  return jnp::log(jnp::exp(x) + 1.0);
}
// JAX's docs example: d/dx log(1 + e^x) = 1 - 1/(1 + e^x), finite for every x.
const auto log1pexp =
    custom_jvp(log1pexp_naive).defjvp([](const Vec& primals, const Vec& tangents) {
      const Array& x = primals[0];
      return std::pair{log1pexp_naive(x), (1.0 - 1.0 / (jnp::exp(x) + 1.0)) * tangents[0]};
    });

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}
double log1pexp_host(double x) {
  return std::log1p(std::exp(x));
}

const std::vector<double> kPoints = {-4.0, -1.25, -0.3, 0.0, 0.7, 2.5, 6.0};

TEST(CustomJvp, NaiveGradientIsNaNWhereTheRuleIsFinite) {
  auto sum_of = [](auto fn) { return [fn](const Array& x) { return jnp::sum(fn(x)); }; };
  const Array x = f32({100.0f, -100.0f, 0.0f});
  const auto naive = host(grad(sum_of(log1pexp_naive))(x));
  EXPECT_TRUE(std::isnan(naive[0])) << naive[0];
  const auto g = host(grad(sum_of(log1pexp))(x));
  EXPECT_EQ(g[0], 1.0);
  EXPECT_NEAR(g[1], 0.0, 1e-30);
  EXPECT_NEAR(g[2], 0.5, 1e-7);
  // Outside differentiation f runs as written.
  EXPECT_EQ(host(log1pexp(f32({1.0f})))[0], host(log1pexp_naive(f32({1.0f})))[0]);
}

TEST(CustomJvp, GradMatchesTheAnalyticDerivativeAndFiniteDifferences) {
  const Array x = f64(kPoints);
  const auto g = host(grad([](const Array& v) { return jnp::sum(log1pexp(v)); })(x));
  const double h = 1e-6;
  for (size_t i = 0; i < kPoints.size(); ++i) {
    const double p = kPoints[i];
    EXPECT_NEAR(g[i], sigmoid(p), 1e-14) << "at " << p;
    const double fd = (log1pexp_host(p + h) - log1pexp_host(p - h)) / (2 * h);
    EXPECT_NEAR(g[i], fd, 1e-8) << "at " << p;
  }
}

TEST(CustomJvp, JvpVjpAndLinearizeUseTheRule) {
  const Array x = f64(kPoints);
  const Array t = f64({1.0, -2.0, 0.5, 3.0, -1.0, 0.25, 2.0});
  const auto tv = host(t);
  auto [y, ty] = jvp(log1pexp, x, t);
  const auto yv = host(y), tyv = host(ty);
  for (size_t i = 0; i < kPoints.size(); ++i) {
    EXPECT_NEAR(yv[i], log1pexp_host(kPoints[i]), 1e-14);
    EXPECT_NEAR(tyv[i], sigmoid(kPoints[i]) * tv[i], 1e-14);
  }
  auto [y2, vjp_fn] = vjp(log1pexp, x);
  const auto ct = host(std::get<0>(vjp_fn(t)));
  auto [y3, f_jvp] = linearize(log1pexp, x);
  const auto lin = host(f_jvp(t));
  for (size_t i = 0; i < kPoints.size(); ++i) {
    EXPECT_NEAR(ct[i], sigmoid(kPoints[i]) * tv[i], 1e-14);
    EXPECT_NEAR(lin[i], tyv[i], 1e-14);
  }
  // Large inputs in f32: the rule's tangent is finite.
  auto [yb, tyb] = jvp(log1pexp, f32({100.0f}), f32({2.0f}));
  EXPECT_EQ(host(tyb)[0], 2.0);
}

TEST(CustomJvp, ComposesWithVmapJitAndTheJacobians) {
  const Array x = f64(kPoints);
  auto dfdx = grad([](const Array& v) { return log1pexp(v); });
  const auto per_example = host(vmap(dfdx)(x));
  const auto jitted = host(jit([&](const Array& v) { return vmap(dfdx)(v); })(x));
  const auto grad_of_jit = host(grad([](const Array& v) { return jnp::sum(jit(log1pexp)(v)); })(x));
  const auto mapped = host(vmap(log1pexp)(x));

  for (size_t i = 0; i < kPoints.size(); ++i) {
    EXPECT_NEAR(per_example[i], sigmoid(kPoints[i]), 1e-14);
    EXPECT_NEAR(jitted[i], sigmoid(kPoints[i]), 1e-14);
    EXPECT_NEAR(grad_of_jit[i], sigmoid(kPoints[i]), 1e-14);
    EXPECT_NEAR(mapped[i], log1pexp_host(kPoints[i]), 1e-14);
  }
  // The Jacobian of an elementwise function is diagonal.
  const Array xs = f64({-1.0, 0.5, 3.0});
  const auto jr = host(jacrev(log1pexp)(xs)), jf = host(jacfwd(log1pexp)(xs));
  const std::vector<double> p = host(xs);
  for (size_t i = 0; i < 3; ++i)
    for (size_t j = 0; j < 3; ++j) {
      const double want = i == j ? sigmoid(p[i]) : 0.0;
      EXPECT_NEAR(jr[i * 3 + j], want, 1e-14) << i << "," << j;
      EXPECT_NEAR(jf[i * 3 + j], want, 1e-14) << i << "," << j;
    }
}

// A rule that is not f's derivative shows which one every transformation uses.
TEST(CustomJvp, TheRuleNotTheFunctionDefinesTheDerivative) {
  auto f = custom_jvp([](const Array& x) { return jnp::sin(x); },
                      [](const Vec& p, const Vec& t) {
                        return std::pair{jnp::sin(p[0]), 3.0 * t[0] * p[0]};
                      });
  const Array x = f64({0.5, -2.0});
  const auto g = host(grad([&](const Array& v) { return jnp::sum(f(v)); })(x));
  EXPECT_NEAR(g[0], 1.5, 1e-15);
  EXPECT_NEAR(g[1], -6.0, 1e-15);
  const auto ty = host(jvp(f, x, f64({2.0, 1.0})).second);
  EXPECT_NEAR(ty[0], 3.0, 1e-15);
  EXPECT_NEAR(ty[1], -6.0, 1e-15);
  // Second derivative: the rule is differentiated, d/dx (3 x) = 3.
  auto df = grad([&](const Array& v) { return f(v); });
  EXPECT_NEAR(host(grad(df)(jnp::reshape(f64({0.5}), {})))[0], 3.0, 1e-15);
}

TEST(CustomJvp, SeveralArgumentsAndSecondDerivatives) {
  // f(x, y) = x sin(y), with the rule's tangent sin(y) tx + x cos(y) ty.
  auto f = custom_jvp([](const Array& x, const Array& y) { return x * jnp::sin(y); },
                      [](const Vec& p, const Vec& t) {
                        return std::pair{p[0] * jnp::sin(p[1]),
                                         jnp::sin(p[1]) * t[0] + p[0] * jnp::cos(p[1]) * t[1]};
                      });
  const Array x = f64({1.5, -0.5}), y = f64({0.3, 2.0});
  auto [gx, gy] =
      grad([&](const Array& a, const Array& b) { return jnp::sum(f(a, b)); }, argnums<0, 1>)(x, y);
  const auto gxv = host(gx), gyv = host(gy);
  const std::vector<double> xv{1.5, -0.5}, yv{0.3, 2.0};
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(gxv[i], std::sin(yv[i]), 1e-15);
    EXPECT_NEAR(gyv[i], xv[i] * std::cos(yv[i]), 1e-15);
  }
  // d2/dx2 log1pexp = sigmoid (1 - sigmoid), from differentiating the rule.
  auto d1 = grad([](const Array& v) { return log1pexp(v); });
  auto d2 = grad([&](const Array& v) { return d1(v); });
  for (double p : {-2.0, 0.0, 1.5}) {
    const double s = sigmoid(p);
    EXPECT_NEAR(host(d2(jnp::reshape(f64({p}), {})))[0], s * (1 - s), 1e-14) << "at " << p;
  }
}

TEST(CustomJvp, ARuleWithAMismatchedTangentIsAnError) {
  auto f = custom_jvp([](const Array& x) { return x * 2.0; },
                      [](const Vec& p, const Vec& t) {
                        return std::pair{p[0] * 2.0, jnp::sum(t[0])};
                      });
  try {
    grad([&](const Array& v) { return jnp::sum(f(v)); })(f64({1.0, 2.0}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("custom_jvp"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f64[]"), std::string::npos) << e.what();
  }
}

// hessian is jacfwd of jacrev: vmap of the VJP inside a JVP, the rule differentiated once more.
TEST(CustomJvp, HessianDifferentiatesTheRule) {
  const std::vector<double> p = {0.5, -1.0};
  const auto h = host(hessian([](const Array& v) { return jnp::sum(log1pexp(v)); })(f64(p)));
  ASSERT_EQ(h.size(), 4u);
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 2; ++j) {
      const double s = sigmoid(p[i]);
      EXPECT_NEAR(h[i * 2 + j], i == j ? s * (1 - s) : 0.0, 1e-14) << i << "," << j;
    }
}

// vmap inside a differentiated function batches the rule: at x = 100 the naive derivative is
// NaN, the rule's is 1; elsewhere the sigmoid, example by example.
TEST(CustomJvp, GradOfVmapUsesTheRulePerExample) {
  const std::vector<double> p = {100.0, 0.5, -1.0};
  const auto g = host(grad([](const Array& v) { return jnp::sum(vmap(log1pexp)(v)); })(f64(p)));
  ASSERT_EQ(g.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(g[i], sigmoid(p[i]), 1e-14) << i;
}

}  // namespace
}  // namespace cujax
