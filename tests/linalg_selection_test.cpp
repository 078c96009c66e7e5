// Eigenvalue selection and pivoting: lax::linalg::eigh's and svd's subset_by_index, the eigenvalues
// of a tridiagonal matrix (scipy::linalg::eigh_tridiagonal, bisection) and the column-pivoted QR
// (scipy::linalg::qr with pivoting, lapack_?geqp3_ffi), each against a reference computed
// another way: the full decomposition, the dense matrix's eigvalsh, and the identities
// A[:, p] = Q R with Q^H Q = I and |diag(R)| non-increasing, in complex double arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cujax/grad.h"
#include "cujax/jit.h"
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
using testutil::adjoint;
using testutil::cd;
using testutil::diag;
using testutil::expect_grad_matches;
using testutil::eye;
using testutil::hpd;
using testutil::Mat;
using testutil::matmul;
using testutil::mats;
using testutil::max_diff;
using testutil::random;
using testutil::tol;
using testutil::values;
using testutil::weighted_sum;

class LinalgSelectionTest : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(Dtypes, LinalgSelectionTest,
                         ::testing::Values(DType::F32, DType::F64, DType::C64, DType::C128),
                         [](const auto& info) {
                           return info.param == DType::F32   ? "f32"
                                  : info.param == DType::F64 ? "f64"
                                  : info.param == DType::C64 ? "c64"
                                                             : "c128";
                         });

// ----- eigh(subset_by_index)

TEST_P(LinalgSelectionTest, EighSubsetIsTheFullDecompositionsSlice) {
  const DType t = GetParam();
  const Array a = hpd({2, 5, 5}, t, 80);
  auto [v_all, w_all] = ll::eigh(a);
  auto [v, w] = ll::eigh(a, true, true, true, std::pair<int64_t, int64_t>{1, 4});
  ASSERT_EQ(w.shape(), (Shape{2, 3}));
  ASSERT_EQ(v.shape(), (Shape{2, 5, 3}));
  const std::vector<Mat> as = mats(a), vs = mats(v), ws = mats(w, true), wall = mats(w_all, true);
  for (size_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 3; ++i) EXPECT_LT(std::abs(ws[b](i, 0) - wall[b](i + 1, 0)), tol(t));
    // A V = V diag(w) and V^H V = I for the selected eigenpairs.
    EXPECT_LT(max_diff(matmul(as[b], vs[b]), matmul(vs[b], diag(ws[b], 3, 3))), tol(t) * 20);
    EXPECT_LT(max_diff(matmul(adjoint(vs[b]), vs[b]), eye(3)), tol(t));
  }
  EXPECT_THROW(ll::eigh(a, true, true, true, std::pair<int64_t, int64_t>{3, 3}), Error);
  EXPECT_THROW(ll::eigh(a, true, true, true, std::pair<int64_t, int64_t>{0, 6}), Error);
}

TEST(LinalgSelection, EighSubsetGradient) {
  for (DType t : {DType::F64, DType::C128})
    expect_grad_matches(
        [](const Array& x) {
          return weighted_sum(
              ll::eigh(x, true, true, true, std::pair<int64_t, int64_t>{2, 4}).second);
        },
        hpd({2, 4, 4}, t, 81));
}

// ----- svd(subset_by_index)

TEST_P(LinalgSelectionTest, SvdSubsetIsTheFullDecompositionsSlice) {
  const DType t = GetParam();
  for (const Shape& shape : {Shape{2, 5, 3}, Shape{2, 3, 5}}) {
    const Array a = random(shape, t, 89);
    const ll::SvdResult all = ll::svd(a, false);
    const ll::SvdResult r = ll::svd(a, false, true, std::pair<int64_t, int64_t>{1, 3});
    ASSERT_EQ(r.s.shape(), (Shape{2, 2}));
    const std::vector<Mat> as = mats(a), us = mats(r.u), vhs = mats(r.vh), ss = mats(r.s, true);
    const std::vector<Mat> sall = mats(all.s, true);
    for (size_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < 2; ++i) EXPECT_LT(std::abs(ss[b](i, 0) - sall[b](i + 1, 0)), tol(t));
      // A v_i = s_i u_i for the selected triplets, with orthonormal u's and v's.
      EXPECT_LT(max_diff(matmul(as[b], adjoint(vhs[b])), matmul(us[b], diag(ss[b], 2, 2))),
                tol(t) * 10);
      EXPECT_LT(max_diff(matmul(adjoint(us[b]), us[b]), eye(2)), tol(t) * 10);
    }
    // Without vectors (gesdd's mode 'N'): the same values, to rounding.
    const std::vector<cd> s_only =
        values(ll::svd(a, false, false, std::pair<int64_t, int64_t>{1, 3}).s);
    const std::vector<cd> s_uv = values(r.s);
    ASSERT_EQ(s_only.size(), s_uv.size());
    for (size_t i = 0; i < s_uv.size(); ++i) EXPECT_LT(std::abs(s_only[i] - s_uv[i]), tol(t));
  }
  const Array a = random({4, 3}, t, 90);
  EXPECT_THROW(ll::svd(a, true, true, std::pair<int64_t, int64_t>{1, 3}), Error);
  EXPECT_THROW(ll::svd(a, false, true, std::pair<int64_t, int64_t>{2, 4}), Error);
  // The whole range is the plain SVD, with full_matrices too.
  EXPECT_EQ(ll::svd(a, true, true, std::pair<int64_t, int64_t>{0, 3}).u.shape(), (Shape{4, 4}));
}

TEST(LinalgSelection, SvdSubsetGradient) {
  for (DType t : {DType::F64, DType::C128})
    expect_grad_matches(
        [](const Array& x) {
          return weighted_sum(ll::svd(x, false, false, std::pair<int64_t, int64_t>{0, 2}).s);
        },
        random({2, 4, 3}, t, 91));
}

// ----- eigh_tridiagonal

// The dense matrix with diagonal d and off-diagonal e (conjugated below).
Array dense_tridiagonal(const Array& d, const Array& e) {
  const int64_t n = d.shape()[0];
  const Array upper =
      jnp::pad(jnp::expand_dims(e, 0) * jnp::astype(jnp::eye(n - 1), e.dtype()), {{0, 1}, {1, 0}});
  return jnp::astype(jnp::eye(n), d.dtype()) * jnp::expand_dims(d, 0) + upper +
         jnp::conj(jnp::swapaxes(upper, 0, 1));
}

TEST_P(LinalgSelectionTest, EighTridiagonalMatchesDenseEigvalsh) {
  const DType t = GetParam();
  for (int64_t n : {1, 2, 6}) {
    Array d = random({n}, t, 82);
    if (is_complex(t)) d = jnp::astype(jnp::real(d), t);  // a Hermitian matrix's real diagonal
    const Array e = random({std::max<int64_t>(n - 1, 0)}, t, 83);
    const Array w = sl::eigh_tridiagonal(d, e, true);
    ASSERT_EQ(w.shape(), (Shape{n}));
    ASSERT_EQ(w.dtype(), complex_component(t));
    const std::vector<cd> got = values(w);
    const std::vector<cd> want =
        n == 1 ? values(jnp::real(d)) : values(jl::eigvalsh(dense_tridiagonal(d, e)));
    for (int64_t i = 0; i < n; ++i)
      EXPECT_LT(std::abs(got[i] - want[i]), tol(t) * 10) << n << " " << i;
    if (n < 6) continue;
    // select 'i': eigenvalues 2 to 4 (inclusive).
    const std::vector<cd> some = values(sl::eigh_tridiagonal(d, e, true, "i", std::pair{2.0, 4.0}));
    ASSERT_EQ(some.size(), 3u);
    for (int64_t i = 0; i < 3; ++i) EXPECT_LT(std::abs(some[i] - want[i + 2]), tol(t) * 10);
  }
}

TEST(LinalgSelection, EighTridiagonalUnderJitAndVmap) {
  const Array d = random({3, 5}, DType::F64, 84), e = random({3, 4}, DType::F64, 85);
  const auto f = [](const Array& x, const Array& y) { return sl::eigh_tridiagonal(x, y, true); };
  const Array batched = vmap(f)(d, e);
  for (int64_t k = 0; k < 3; ++k) {
    const std::vector<cd> got = values(batched[k]);
    const std::vector<cd> want = values(jl::eigvalsh(dense_tridiagonal(d[k], e[k])));
    for (size_t i = 0; i < want.size(); ++i) EXPECT_LT(std::abs(got[i] - want[i]), 1e-10) << k;
  }
  const std::vector<cd> jitted = values(jit(f)(d[0], e[0]));
  const std::vector<cd> eager = values(f(d[0], e[0]));
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_EQ(jitted[i], eager[i]);
}

TEST(LinalgSelection, EighTridiagonalErrorsAsJax) {
  const Array d = jnp::ones({3}), e = jnp::ones({2});
  const auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { sl::eigh_tridiagonal(d, e); }).find("eigenvectors is not implemented"),
            std::string::npos);
  EXPECT_NE(message([&] { sl::eigh_tridiagonal(d, e, true, "v"); }).find("'v' is not implemented"),
            std::string::npos);
  EXPECT_NE(message([&] { sl::eigh_tridiagonal(d, e, true, "i"); }).find("select_range"),
            std::string::npos);
  EXPECT_NE(message([&] { sl::eigh_tridiagonal(d, jnp::ones({3}), true); }).find("[3]"),
            std::string::npos);
  EXPECT_NE(message([&] {
              sl::eigh_tridiagonal(d, jnp::ones({2}, DType::F64), true);
            }).find("same dtype"),
            std::string::npos);
}

// ----- qr(pivoting=True)

TEST_P(LinalgSelectionTest, PivotedQrIdentities) {
  const DType t = GetParam();
  for (const Shape& s : {Shape{2, 5, 3}, Shape{3, 5}, Shape{4, 4}})
    for (const std::string mode : {"full", "economic", "r"}) {
      const Array a = random(s, t, 86);
      const ll::QrResult r = sl::qr(a, mode, true);
      const int64_t m = s[s.size() - 2], n = s.back(), k = mode == "economic" ? std::min(m, n) : m;
      ASSERT_EQ(r.p.dtype(), DType::I32);
      ASSERT_EQ(r.r.shape().back(), n);
      ASSERT_EQ(r.r.shape()[r.r.ndim() - 2], k);
      const std::vector<Mat> as = mats(a), rs = mats(r.r);
      const std::vector<Mat> ps = mats(jnp::astype(r.p, DType::F64), true);
      const std::vector<Mat> qs = mode == "r" ? std::vector<Mat>{} : mats(r.q);
      for (size_t b = 0; b < as.size(); ++b) {
        // p is a permutation; |diag(R)| does not increase.
        std::vector<int64_t> cols;
        for (int64_t j = 0; j < n; ++j) cols.push_back(static_cast<int64_t>(ps[b](j, 0).real()));
        std::vector<int64_t> sorted = cols;
        std::sort(sorted.begin(), sorted.end());
        for (int64_t j = 0; j < n; ++j) ASSERT_EQ(sorted[j], j) << mode;
        for (int64_t i = 1; i < std::min(m, n); ++i)
          EXPECT_LE(std::abs(rs[b](i, i)), std::abs(rs[b](i - 1, i - 1)) * (1 + tol(t))) << mode;
        if (mode == "r") continue;
        Mat ap(m, n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) ap(i, j) = as[b](i, cols[j]);
        EXPECT_LT(max_diff(matmul(qs[b], rs[b]), ap), tol(t) * 10) << mode;
        EXPECT_LT(max_diff(matmul(adjoint(qs[b]), qs[b]), eye(k)), tol(t) * 10) << mode;
      }
      if (mode == "r") {
        EXPECT_FALSE(r.q.valid());
      }
    }
  // Without pivoting p is absent and (q, r) are the plain QR's.
  EXPECT_FALSE(sl::qr(random({3, 3}, t, 87), "full", false).p.valid());
}

TEST(LinalgSelection, PivotedQrLowersToGeqp3) {
  auto f = jit([](const Array& a) {
    const ll::QrResult r = ll::qr(a, false, true);
    return r.r;
  });
  const std::string text = f.lower(ShapeDtype{{2, 5, 3}, DType::F32}).as_text();
  EXPECT_NE(text.find("stablehlo.custom_call @lapack_sgeqp3_ffi"), std::string::npos) << text;
  EXPECT_NE(text.find("num_batch_dims = \"1\""), std::string::npos) << text;
}

// JAX's qr_jvp_rule with pivoting: the rule at the permuted columns x[:, p] = Q R.
TEST(LinalgSelection, PivotedQrGradient) {
  for (DType t : {DType::F64, DType::C128})
    for (const Shape& s : {Shape{2, 5, 3}, Shape{3, 3}}) {
      const Array a = random(s, t, 88);
      expect_grad_matches(
          [](const Array& x) { return weighted_sum(sl::qr(x, "economic", true).q); }, a);
      expect_grad_matches(
          [](const Array& x) { return weighted_sum(sl::qr(x, "economic", true).r); }, a);
      // And under vmap (a custom_vjp under grad).
      expect_grad_matches(
          [](const Array& x) {
            return jnp::sum(vmap([](const Array& y) {
              return weighted_sum(ll::qr(y, false, true).r);
            })(jnp::stack({x, x * 2})));
          },
          a);
    }
}

}  // namespace
}  // namespace cujax
