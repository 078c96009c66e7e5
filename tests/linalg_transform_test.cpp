// The linear-algebra transformations compose: grad of a vmapped loss, vmap of per-example grads
// and vmap of jvp, each against a loop over the examples, for every differentiable lax.linalg
// call (cholesky, qr, svd, eigh, lu, triangular_solve, det/slogdet, solve, inv, eig's
// eigenvalues, tridiagonal_solve) in f64 and complex128; the rules JAX has that cujax added
// later (eig's eigenvalues, LU of non-square matrices) against central differences; and JAX's
// refusals (eigenvectors of eig, schur, hessenberg, tridiagonal, householder_product).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cujax/grad.h"
#include "cujax/linalg.h"
#include "cujax/numpy.h"
#include "cujax/vmap.h"
#include "linalg_test_util.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
namespace jl = cujax::numpy::linalg;
namespace sl = cujax::scipy::linalg;
namespace ll = cujax::lax::linalg;
using testutil::cd;
using testutil::expect_grad_matches;
using testutil::hpd;
using testutil::random;
using testutil::values;
using testutil::weighted_sum;

Array mH(const Array& x) {
  return jnp::conj(jnp::swapaxes(x, -1, -2));
}

struct Case {
  const char* name;
  std::function<Array(const Array&)> loss;  // one example [n, n] -> a real scalar
  bool hermitian_input;                     // hpd input, else a well-conditioned general one
};

// Every differentiable call, as a scalar loss of one matrix.
std::vector<Case> cases(DType t) {
  const Array b = random({4, 2}, t, 70);
  const auto d = [](const Array& x) {
    return jnp::astype(jnp::array({1.0, -2.0, 0.5, 3.0}), x.dtype());
  };
  return {
      {"cholesky", [](const Array& x) { return weighted_sum(jl::cholesky(x)); }, true},
      {"qr.q", [](const Array& x) { return weighted_sum(jl::qr(x).first); }, false},
      {"qr.r", [](const Array& x) { return weighted_sum(jl::qr(x).second); }, false},
      {"svd.s", [](const Array& x) { return weighted_sum(ll::svd(x, false, false).s); }, false},
      {"svd.uv",
       [d](const Array& x) {
         const ll::SvdResult r = ll::svd(x, false);
         return weighted_sum(jnp::matmul(jnp::multiply(r.u, d(x)), r.vh));
       },
       false},
      {"eigvalsh", [](const Array& x) { return weighted_sum(jl::eigvalsh(x)); }, true},
      {"eigh.v",
       [d](const Array& x) {
         const Array v = jl::eigh(x).second;
         return weighted_sum(jnp::matmul(jnp::multiply(v, d(x)), mH(v)));
       },
       true},
      {"lu", [](const Array& x) { return weighted_sum(std::get<0>(ll::lu(x))); }, false},
      {"solve_triangular.a",
       [b](const Array& x) { return weighted_sum(sl::solve_triangular(x, b, 0, true)); }, false},
      {"det", [](const Array& x) { return weighted_sum(jl::det(x)); }, false},
      {"slogdet", [](const Array& x) { return weighted_sum(jl::slogdet(x).second); }, false},
      {"solve", [b](const Array& x) { return weighted_sum(jl::solve(x, b)); }, false},
      {"inv", [](const Array& x) { return weighted_sum(jl::inv(x)); }, false},
      {"eigvals", [](const Array& x) { return weighted_sum(jl::eigvals(x)); }, false},
      {"tridiagonal_solve",
       [b](const Array& x) { return weighted_sum(ll::tridiagonal_solve(x[0], x[1] + 4, x[2], b)); },
       false},
  };
}

Array input(const Case& c, DType t, uint32_t seed) {
  if (c.hermitian_input) return hpd({3, 4, 4}, t, seed);
  return random({3, 4, 4}, t, seed) + jnp::astype(jnp::eye(4), t) * 2;
}

void expect_close(const Array& got, const Array& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<cd> g = values(got), w = values(want);
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_LT(std::abs(g[i] - w[i]), 1e-9 * std::max(1.0, std::abs(w[i])))
        << what << " element " << i << ": " << g[i] << " vs " << w[i];
}

class LinalgTransformTest : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(Dtypes, LinalgTransformTest, ::testing::Values(DType::F64, DType::C128),
                         [](const auto& info) {
                           return info.param == DType::F64 ? "f64" : "c128";
                         });

// grad(sum(vmap(f))) and vmap(grad(f)) against the per-example grads of a loop.
TEST_P(LinalgTransformTest, GradOfVmapAndVmapOfGradMatchLoop) {
  const DType t = GetParam();
  for (const Case& c : cases(t)) {
    const Array a = input(c, t, 71);
    std::vector<Array> loop;
    for (int64_t k = 0; k < 3; ++k) loop.push_back(grad(c.loss)(a[k]));
    const Array want = jnp::stack(loop);
    const auto f = c.loss;
    expect_close(grad([f](const Array& x) { return jnp::sum(vmap(f)(x)); })(a), want,
                 std::string(c.name) + " grad(vmap)");
    expect_close(vmap(grad(f))(a), want, std::string(c.name) + " vmap(grad)");
  }
}

// vmap of jvp (the transposed VJP) and jvp of a vmapped function against a loop of jvps.
TEST_P(LinalgTransformTest, VmapOfJvpMatchesLoop) {
  const DType t = GetParam();
  for (const Case& c : cases(t)) {
    const Array a = input(c, t, 72);
    const Array da = random({3, 4, 4}, t, 73);
    std::vector<Array> loop;
    for (int64_t k = 0; k < 3; ++k) loop.push_back(jvp(c.loss, a[k], da[k]).second);
    const Array want = jnp::stack(loop);
    const auto f = c.loss;
    expect_close(vmap([f](const Array& x, const Array& dx) { return jvp(f, x, dx).second; })(a, da),
                 want, std::string(c.name) + " vmap(jvp)");
    expect_close(jvp(vmap(f), a, da).second, want, std::string(c.name) + " jvp(vmap)");
  }
}

// The mechanism QR's gradient relies on, on its own: a custom_vjp of two arguments under vmap
// (one argument mapped, one not) under grad keeps its rule, which here is deliberately not the
// function's derivative (d/dx gets 3 g y, d/dy gets g), against a loop of the rule.
TEST(LinalgTransform, CustomVjpUnderVmapUnderGradKeepsItsRule) {
  auto f = custom_vjp([](const Array& x, const Array& y) { return jnp::sin(x) * y; },
                      [](const Array& x, const Array& y) {
                        return std::make_pair(jnp::sin(x) * y, std::vector<Array>{x, y});
                      },
                      [](const std::vector<Array>& res, const Array& g) {
                        return std::vector<Array>{g * res[1] * 3.0, g + res[0] * 0.0};
                      });
  const Array x = random({3, 2}, DType::F64, 78), y = random({2}, DType::F64, 79);
  const auto loss = [&](const Array& xs, const Array& ys) {
    return jnp::sum(vmap([&](const Array& a, const Array& b) { return weighted_sum(f(a, b)); },
                         {0, not_mapped})(xs, ys));
  };
  const auto [gx, gy] = grad(loss, argnums<0, 1>)(x, y);
  // Per example: d/dx = 3 w y, d/dy = w, with w the weights weighted_sum uses.
  const Array w = testutil::weights({2}, DType::F64);
  expect_close(gx, jnp::stack({w * y * 3.0, w * y * 3.0, w * y * 3.0}), "x");
  expect_close(gy, w * 3.0, "y");
}

// eig_jvp_rule: the eigenvalues' derivative diag(V^-1 A' V), real and complex inputs.
TEST_P(LinalgTransformTest, EigenvaluesOfGeneralMatrix) {
  const DType t = GetParam();
  // Distinct eigenvalues (a shifted diagonal dominates), so their order survives the steps.
  const Array shift = jnp::astype(jnp::multiply(jnp::eye(3), jnp::array({0.0, 3.0, 6.0})), t);
  const Array a = random({2, 3, 3}, t, 74) + shift;
  expect_grad_matches([](const Array& x) { return weighted_sum(jl::eigvals(x)); }, a, 1e-5);
  expect_grad_matches(
      [](const Array& x) { return weighted_sum(jnp::imag(ll::eig(x, false, false).w)); }, a, 1e-5);
}

TEST(LinalgTransform, EigenvectorsOfGeneralMatrixAreRefusedAsInJax) {
  for (bool left : {false, true}) {
    auto g = grad([left](const Array& x) {
      const ll::EigResult r = ll::eig(x, left, !left);
      return weighted_sum(left ? r.vl : r.vr);
    });
    try {
      g(random({3, 3}, DType::F64, 75));
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("derivatives of eigenvectors are not implemented"),
                std::string::npos)
          << e.what();
    }
  }
}

// lu_jvp_rule for wide and tall matrices: L padded to m x m, U to n x n.
TEST_P(LinalgTransformTest, LuOfNonSquareMatrix) {
  const DType t = GetParam();
  for (const Shape& s : {Shape{2, 3, 5}, Shape{2, 5, 3}}) {
    const Array a = random(s, t, 76);
    expect_grad_matches([](const Array& x) { return weighted_sum(std::get<0>(ll::lu(x))); }, a);
    // And scipy's (p, l, u) through it.
    expect_grad_matches(
        [](const Array& x) {
          auto [p, l, u] = sl::lu(x);
          return weighted_sum(l) + weighted_sum(u);
        },
        a);
  }
}

// JAX defines no derivative for schur, hessenberg, tridiagonal or householder_product.
TEST(LinalgTransform, UndifferentiableCallsGiveJaxError) {
  const Array a = random({3, 3}, DType::F64, 77);
  const std::vector<std::pair<std::string, std::function<Array(const Array&)>>> calls = {
      {"schur", [](const Array& x) { return weighted_sum(ll::schur(x).first); }},
      {"hessenberg", [](const Array& x) { return weighted_sum(ll::hessenberg(x).first); }},
      {"tridiagonal", [](const Array& x) { return weighted_sum(ll::tridiagonal(x).d); }},
      {"householder_product",
       [](const Array& x) { return weighted_sum(ll::householder_product(x, x[0])); }},
  };
  for (const auto& [name, f] : calls) {
    try {
      grad(f)(a);
      FAIL() << name << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(
          std::string(e.what()).find("Differentiation rule for '" + name + "' not implemented"),
          std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace cujax
