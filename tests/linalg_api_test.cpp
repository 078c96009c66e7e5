// The linear-algebra API under JAX's names (lax::linalg, numpy::linalg, scipy::linalg): each
// factorization against its defining identity, recomputed here in complex double arithmetic
// (L L^H = A, P L U = A, Q R = A with Q^H Q = I, A V = V diag(w), U diag(S) V^H = A, A x = b),
// over f32, f64, complex64 and complex128 and a batch of two; NaNs for a failed factorization;
// errors naming the shapes; the custom-call targets of the lowered program.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <string>
#include <vector>

#include "cujax/grad.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/parser.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/linalg.h"
#include "cujax/numpy.h"
#include "cujax/runtime/backend.h"
#include "cujax/vmap.h"
#include "host_matrix.h"
#include "linalg_test_util.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
namespace ll = cujax::lax::linalg;
using cd = std::complex<double>;

using testutil::adjoint;
using testutil::diag;
using testutil::expect_grad_matches;
using testutil::eye;
using testutil::hpd;
using testutil::Mat;
using testutil::matmul;
using testutil::mats;
using testutil::max_diff;
using testutil::numeric_grad;
using testutil::random;
using testutil::tol;
using testutil::values;
using testutil::weighted_sum;

class LinalgTest : public ::testing::TestWithParam<DType> {};

INSTANTIATE_TEST_SUITE_P(Dtypes, LinalgTest,
                         ::testing::Values(DType::F32, DType::F64, DType::C64, DType::C128),
                         [](const auto& info) {
                           return std::string(mlir_name(info.param)) == "f32" ? std::string("f32")
                                  : info.param == DType::F64                  ? "f64"
                                  : info.param == DType::C64                  ? "c64"
                                                                              : "c128";
                         });

TEST_P(LinalgTest, CholeskyGivesLowerFactor) {
  const DType t = GetParam();
  const Array a = hpd({2, 4, 4}, t, 1);
  const Array l = ll::cholesky(a);
  EXPECT_EQ(l.dtype(), t);
  const auto as = mats(a), ls = mats(l);
  ASSERT_EQ(ls.size(), 2u);
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_LT(max_diff(matmul(ls[b], adjoint(ls[b])), as[b]), tol(t) * 10);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = i + 1; j < 4; ++j) EXPECT_EQ(ls[b](i, j), cd(0));
  }
}

TEST_P(LinalgTest, CholeskyOfIndefiniteMatrixIsNaN) {
  const DType t = GetParam();
  // Batch element 1 is -A: not positive definite; element 0 must be unaffected.
  const Array a = hpd({1, 3, 3}, t, 2);
  const Array both = jnp::concatenate({a, -a}, 0);
  const auto ls = mats(ll::cholesky(both));
  EXPECT_LT(max_diff(matmul(ls[0], adjoint(ls[0])), mats(a)[0]), tol(t) * 10);
  // JAX's lowering: NaN, then tril (the upper triangle stays zero).
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j)
      EXPECT_EQ(std::isnan(ls[1](i, j).real()), j <= i) << i << "," << j;
}

TEST_P(LinalgTest, LuGivesPermutedFactors) {
  const DType t = GetParam();
  for (const Shape& s : {Shape{2, 4, 4}, Shape{2, 3, 5}, Shape{5, 3}}) {
    const Array a = random(s, t, 3);
    auto [lu, pivots, perm] = ll::lu(a);
    const int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
    EXPECT_EQ(pivots.shape().back(), k);
    EXPECT_EQ(perm.shape().back(), m);
    const auto as = mats(a), lus = mats(lu);
    const std::vector<int32_t> p = perm.to_vector<int32_t>();
    for (size_t b = 0; b < lus.size(); ++b) {
      Mat l(m, k), u(k, n), pa(m, n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          if (j < k) l(i, j) = i == j ? cd(1) : i > j ? lus[b](i, j) : cd(0);
          if (i < k) u(i, j) = j >= i ? lus[b](i, j) : cd(0);
          pa(i, j) = as[b](p[b * m + i], j);
        }
      EXPECT_LT(max_diff(matmul(l, u), pa), tol(t) * 10) << shape_to_string(s);
    }
  }
}

TEST_P(LinalgTest, QrGivesOrthonormalQ) {
  const DType t = GetParam();
  for (const Shape& s : {Shape{2, 5, 3}, Shape{2, 3, 5}, Shape{4, 4}})
    for (bool full : {true, false}) {
      const Array a = random(s, t, 4);
      auto [q, r] = ll::qr(a, full);
      const int64_t m = s[s.size() - 2], n = s.back(), k = std::min(m, n);
      EXPECT_EQ(q.shape().back(), full ? m : k);
      EXPECT_EQ(r.shape()[r.ndim() - 2], full ? m : k);
      const auto as = mats(a), qs = mats(q), rs = mats(r);
      for (size_t b = 0; b < qs.size(); ++b) {
        EXPECT_LT(max_diff(matmul(qs[b], rs[b]), as[b]), tol(t) * 10);
        EXPECT_LT(max_diff(matmul(adjoint(qs[b]), qs[b]), eye(qs[b].cols)), tol(t) * 10);
        for (int64_t i = 0; i < rs[b].rows; ++i)
          for (int64_t j = 0; j < std::min(i, rs[b].cols); ++j) EXPECT_EQ(rs[b](i, j), cd(0));
      }
    }
}

TEST_P(LinalgTest, EighGivesEigenpairs) {
  const DType t = GetParam();
  const Array a = hpd({2, 5, 5}, t, 5) - jnp::astype(jnp::eye(5), t) * 6;
  auto [v, w] = ll::eigh(a);
  EXPECT_EQ(w.dtype(), complex_component(t));
  const auto as = mats(a), vs = mats(v), ws = mats(w, true);
  for (size_t b = 0; b < 2; ++b) {
    EXPECT_LT(max_diff(matmul(as[b], vs[b]), matmul(vs[b], diag(ws[b], 5, 5))), tol(t) * 50);
    EXPECT_LT(max_diff(matmul(adjoint(vs[b]), vs[b]), eye(5)), tol(t) * 10);
    for (int64_t i = 1; i < 5; ++i) EXPECT_LE(ws[b](i - 1, 0).real(), ws[b](i, 0).real());
  }
}

TEST_P(LinalgTest, SvdReconstructs) {
  const DType t = GetParam();
  for (const Shape& s : {Shape{2, 5, 3}, Shape{2, 3, 5}})
    for (bool full : {true, false}) {
      const Array a = random(s, t, 6);
      const ll::SvdResult r = ll::svd(a, full);
      const int64_t m = s[1], n = s[2], k = std::min(m, n);
      const auto as = mats(a), us = mats(r.u), ss = mats(r.s, true), vs = mats(r.vh);
      for (size_t b = 0; b < 2; ++b) {
        EXPECT_LT(
            max_diff(matmul(matmul(us[b], diag(ss[b], us[b].cols, vs[b].rows)), vs[b]), as[b]),
            tol(t) * 10);
        EXPECT_LT(max_diff(matmul(adjoint(us[b]), us[b]), eye(full ? m : k)), tol(t) * 10);
        for (int64_t i = 1; i < k; ++i) EXPECT_GE(ss[b](i - 1, 0).real(), ss[b](i, 0).real());
      }
      const ll::SvdResult only_s = ll::svd(a, full, false);
      EXPECT_FALSE(only_s.u.valid());
      EXPECT_LT(max_diff(mats(only_s.s, true)[1], ss[1]), tol(t) * 10);
    }
}

TEST_P(LinalgTest, TriangularSolveEveryVariant) {
  const DType t = GetParam();
  const Array a = random({2, 4, 4}, t, 7) + jnp::astype(jnp::eye(4), t) * 4;
  for (bool left : {true, false})
    for (bool lower : {true, false})
      for (bool trans : {true, false})
        for (bool conj : {true, false})
          for (bool unit : {true, false}) {
            const Array b = random(left ? Shape{2, 4, 3} : Shape{2, 3, 4}, t, 8);
            const Array x = ll::triangular_solve(a, b, left, lower, trans, conj, unit);
            const auto as = mats(a), bs = mats(b), xs = mats(x);
            for (size_t k = 0; k < 2; ++k) {
              Mat op(4, 4);
              for (int64_t i = 0; i < 4; ++i)
                for (int64_t j = 0; j < 4; ++j) {
                  const bool in = lower ? j <= i : j >= i;
                  cd v = i == j && unit ? cd(1) : in ? as[k](i, j) : cd(0);
                  if (conj) v = std::conj(v);
                  if (trans)
                    op(j, i) = v;
                  else
                    op(i, j) = v;
                }
              const Mat got = left ? matmul(op, xs[k]) : matmul(xs[k], op);
              EXPECT_LT(max_diff(got, bs[k]), tol(t) * 10)
                  << left << lower << trans << conj << unit;
            }
          }
}

// ----- jnp.linalg and jax.scipy.linalg

namespace jl = cujax::numpy::linalg;
namespace sl = cujax::scipy::linalg;

Array mT(const Array& x) {
  return jnp::swapaxes(x, -1, -2);
}
Array mH(const Array& x) {
  return jnp::conj(mT(x));
}

// The determinant by Gaussian elimination with partial pivoting, in complex doubles.
cd host_det(Mat a) {
  cd d = 1;
  for (int64_t c = 0; c < a.rows; ++c) {
    int64_t p = c;
    for (int64_t r = c + 1; r < a.rows; ++r)
      if (std::abs(a(r, c)) > std::abs(a(p, c))) p = r;
    if (p != c) {
      for (int64_t j = 0; j < a.cols; ++j) std::swap(a(p, j), a(c, j));
      d = -d;
    }
    d *= a(c, c);
    for (int64_t r = c + 1; r < a.rows; ++r) {
      const cd f = a(r, c) / a(c, c);
      for (int64_t j = c; j < a.cols; ++j) a(r, j) -= f * a(c, j);
    }
  }
  return d;
}

TEST_P(LinalgTest, SolveAndInv) {
  const DType t = GetParam();
  const Array a = random({2, 4, 4}, t, 9) + jnp::astype(jnp::eye(4), t) * 2;
  const Array b = random({2, 4, 3}, t, 10);
  const auto as = mats(a), bs = mats(b), xs = mats(jl::solve(a, b)), is = mats(jl::inv(a));
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_LT(max_diff(matmul(as[k], xs[k]), bs[k]), tol(t) * 10);
    EXPECT_LT(max_diff(matmul(as[k], is[k]), eye(4)), tol(t) * 10);
  }
  // A vector right-hand side, broadcast against the batch of matrices.
  const Array v = random({4}, t, 11);
  const Array xv = jl::solve(a, v);
  EXPECT_EQ(xv.shape(), (Shape{2, 4}));
  const auto xvs = mats(xv, true);
  const Mat vm = mats(v, true)[0];
  for (size_t k = 0; k < 2; ++k) EXPECT_LT(max_diff(matmul(as[k], xvs[k]), vm), tol(t) * 10);
}

TEST_P(LinalgTest, DetAndSlogdetMatchElimination) {
  const DType t = GetParam();
  const Array a = random({3, 5, 5}, t, 12);
  const std::vector<cd> d = values(jl::det(a));
  auto [sign, logabs] = jl::slogdet(a);
  const std::vector<cd> s = values(sign), l = values(logabs);
  const auto as = mats(a);
  for (size_t k = 0; k < 3; ++k) {
    const cd want = host_det(as[k]);
    EXPECT_LT(std::abs(d[k] - want), tol(t) * 10 * std::max(1.0, std::abs(want)));
    EXPECT_LT(std::abs(s[k] * std::exp(l[k]) - want), tol(t) * 10 * std::max(1.0, std::abs(want)));
  }
  // Singular: sign 0, log|det| -inf.
  const Array z = jnp::zeros({3, 3}, t);
  auto [zs, zl] = jl::slogdet(z);
  EXPECT_EQ(values(zs)[0], cd(0));
  EXPECT_TRUE(std::isinf(values(zl)[0].real()));
  EXPECT_EQ(values(jl::det(z))[0], cd(0));
}

TEST_P(LinalgTest, LstsqPinvRank) {
  const DType t = GetParam();
  const Array a = random({6, 3}, t, 13);
  const Array b = random({6, 2}, t, 14);
  auto [x, resid, rank, s] = jl::lstsq(a, b);
  EXPECT_EQ(rank.item<int32_t>(), 3);
  const Mat am = mats(a)[0], bm = mats(b)[0], xm = mats(x)[0];
  Mat r = matmul(am, xm);
  for (size_t i = 0; i < r.v.size(); ++i) r.v[i] -= bm.v[i];
  // Normal equations: A^H (A x - b) = 0.
  EXPECT_LT(max_diff(matmul(adjoint(am), r), Mat(3, 2)), tol(t) * 10);
  const std::vector<cd> rs = values(resid);
  for (int64_t j = 0; j < 2; ++j) {
    double want = 0;
    for (int64_t i = 0; i < 6; ++i) want += std::norm(r(i, j));
    EXPECT_NEAR(rs[j].real(), want, tol(t) * 10);
  }
  const Mat pm = mats(jl::pinv(a))[0];
  EXPECT_LT(max_diff(matmul(matmul(am, pm), am), am), tol(t) * 10);
  // Rank 2: the third column is the sum of the first two.
  const Array c = jnp::concatenate(
      {a[{jnp::Slice(), jnp::Slice(0, 2)}], jnp::sum(a[{jnp::Slice(), jnp::Slice(0, 2)}], 1, true)},
      1);
  EXPECT_EQ(jl::matrix_rank(c).item<int32_t>(), 2);
  EXPECT_EQ(jl::matrix_rank(a).item<int32_t>(), 3);
}

TEST_P(LinalgTest, MatrixPowerAndMultiDot) {
  const DType t = GetParam();
  const Array a = random({4, 4}, t, 15) + jnp::astype(jnp::eye(4), t) * 2;
  const Mat am = mats(a)[0];
  EXPECT_LT(
      max_diff(mats(jl::matrix_power(a, 5))[0], matmul(matmul(matmul(matmul(am, am), am), am), am)),
      tol(t) * 100);
  EXPECT_LT(max_diff(matmul(mats(jl::matrix_power(a, -2))[0], matmul(am, am)), eye(4)),
            tol(t) * 100);
  EXPECT_EQ(max_diff(mats(jl::matrix_power(a, 0))[0], eye(4)), 0);
  const Array b = random({4, 2}, t, 16), c = random({2, 3}, t, 17);
  EXPECT_LT(max_diff(mats(jl::multi_dot({a, b, c}))[0], matmul(matmul(am, mats(b)[0]), mats(c)[0])),
            tol(t) * 10);
}

TEST_P(LinalgTest, NormsOfEveryOrder) {
  const DType t = GetParam();
  const Array a = random({3, 4}, t, 18);
  const Mat am = mats(a)[0];
  const auto val = [](const Array& x) { return values(x)[0].real(); };
  double fro = 0, one = 0, inf = 0, minus_one = 1e300, minus_inf = 1e300;
  for (int64_t j = 0; j < 4; ++j) {
    double c = 0;
    for (int64_t i = 0; i < 3; ++i) c += std::abs(am(i, j));
    one = std::max(one, c), minus_one = std::min(minus_one, c);
  }
  for (int64_t i = 0; i < 3; ++i) {
    double r = 0;
    for (int64_t j = 0; j < 4; ++j) r += std::abs(am(i, j)), fro += std::norm(am(i, j));
    inf = std::max(inf, r), minus_inf = std::min(minus_inf, r);
  }
  const double e = tol(t) * 10, kInf = std::numeric_limits<double>::infinity();
  EXPECT_NEAR(val(jl::norm(a)), std::sqrt(fro), e);
  EXPECT_NEAR(val(jl::norm(a, std::string("fro"))), std::sqrt(fro), e);
  EXPECT_NEAR(val(jl::norm(a, 1.0)), one, e);
  EXPECT_NEAR(val(jl::norm(a, -1.0)), minus_one, e);
  EXPECT_NEAR(val(jl::norm(a, kInf)), inf, e);
  EXPECT_NEAR(val(jl::norm(a, -kInf)), minus_inf, e);
  // 2, -2 and nuc from the singular values (checked by SvdReconstructs).
  const std::vector<cd> s = values(ll::svd(a, false, false).s);
  EXPECT_NEAR(val(jl::norm(a, 2.0)), s[0].real(), e);
  EXPECT_NEAR(val(jl::norm(a, -2.0)), s[2].real(), e);
  EXPECT_NEAR(val(jl::norm(a, std::string("nuc"))), (s[0] + s[1] + s[2]).real(), e);
  EXPECT_NEAR(val(jl::cond(a)), s[0].real() / s[2].real(), e * 10);
  // Vector norms along axis 1.
  const std::vector<int64_t> ax{1};
  for (double p : {0.0, 1.0, 2.0, 3.0, kInf, -kInf}) {
    const std::vector<cd> got = values(jl::norm(a, p, ax));
    for (int64_t i = 0; i < 3; ++i) {
      double want = std::isinf(p) ? (p > 0 ? 0 : 1e300) : 0;
      for (int64_t j = 0; j < 4; ++j) {
        const double x = std::abs(am(i, j));
        if (std::isinf(p))
          want = p > 0 ? std::max(want, x) : std::min(want, x);
        else
          want += p == 0 ? (x != 0) : std::pow(x, p);
      }
      if (p != 0 && !std::isinf(p)) want = std::pow(want, 1 / p);
      EXPECT_NEAR(got[i].real(), want, e) << "ord " << p;
    }
  }
  EXPECT_EQ(jl::norm(a, 1.0, ax, true).shape(), (Shape{3, 1}));
  EXPECT_EQ(jl::norm(a, {}, std::vector<int64_t>{0, 1}, true).shape(), (Shape{1, 1}));
  // cond in the 1-norm: |A|_1 |A^-1|_1.
  const Array sq = random({4, 4}, t, 19) + jnp::astype(jnp::eye(4), t) * 2;
  EXPECT_NEAR(val(jl::cond(sq, 1.0)), val(jl::norm(sq, 1.0)) * val(jl::norm(jl::inv(sq), 1.0)),
              e * 100);
}

TEST_P(LinalgTest, NumpyDecompositionsFollowJaxConventions) {
  const DType t = GetParam();
  const Array a = hpd({2, 4, 4}, t, 20);
  const auto as = mats(a);
  const Mat u = mats(jl::cholesky(a, true))[1];
  EXPECT_LT(max_diff(matmul(adjoint(u), u), as[1]), tol(t) * 10);
  // UPLO "U" without symmetrizing reads only the upper triangle.
  const Array upper_only = jnp::triu(a);
  auto [w, v] = jl::eigh(upper_only, "U", false);
  const Mat vm = mats(v)[0];
  EXPECT_LT(max_diff(matmul(as[0], vm), matmul(vm, diag(mats(w, true)[0], 4, 4))), tol(t) * 50);
  EXPECT_LT(max_diff(mats(jl::eigvalsh(a), true)[0], mats(w, true)[0]), tol(t) * 50);
  for (const std::string mode : {"reduced", "complete", "r"}) {
    const Array x = random({5, 3}, t, 21);
    auto [q, r] = jl::qr(x, mode);
    EXPECT_EQ(r.shape(), (Shape{mode == "complete" ? 5 : 3, 3})) << mode;
    EXPECT_EQ(q.valid(), mode != "r");
    if (q.valid()) {
      EXPECT_LT(max_diff(matmul(mats(q)[0], mats(r)[0]), mats(x)[0]), tol(t) * 10);
    }
  }
  // hermitian=True: an indefinite Hermitian matrix through eigh.
  const Array h = a - jnp::astype(jnp::eye(4), t) * 8;
  const ll::SvdResult r = jl::svd(h, false, true, true);
  const auto hs = mats(h), us = mats(r.u), ss = mats(r.s, true), vs = mats(r.vh);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_LT(max_diff(matmul(matmul(us[k], diag(ss[k], 4, 4)), vs[k]), hs[k]), tol(t) * 50);
    for (int64_t i = 1; i < 4; ++i) EXPECT_GE(ss[k](i - 1, 0).real(), ss[k](i, 0).real());
  }
}

TEST_P(LinalgTest, ScipySolvers) {
  const DType t = GetParam();
  const Array a = random({2, 4, 4}, t, 22) + jnp::astype(jnp::eye(4), t) * 3;
  const Array b = random({2, 4, 2}, t, 23);
  const auto as = mats(a), bs = mats(b);
  // solve_triangular reads one triangle; trans 0, 1, 2 solve A, A^T, A^H.
  for (int trans : {0, 1, 2})
    for (bool lower : {true, false}) {
      const auto xs = mats(sl::solve_triangular(a, b, trans, lower));
      for (size_t k = 0; k < 2; ++k) {
        Mat tri(4, 4);
        for (int64_t i = 0; i < 4; ++i)
          for (int64_t j = 0; j < 4; ++j)
            if (lower ? j <= i : j >= i) {
              const cd v = trans == 2 ? std::conj(as[k](i, j)) : as[k](i, j);
              if (trans)
                tri(j, i) = v;
              else
                tri(i, j) = v;
            }
        EXPECT_LT(max_diff(matmul(tri, xs[k]), bs[k]), tol(t) * 10) << trans << lower;
      }
    }
  const Array p = hpd({2, 4, 4}, t, 24);
  const auto ps = mats(p);
  for (bool lower : {true, false}) {
    const auto xs = mats(sl::cho_solve(sl::cho_factor(p, lower), b));
    for (size_t k = 0; k < 2; ++k) EXPECT_LT(max_diff(matmul(ps[k], xs[k]), bs[k]), tol(t) * 10);
  }
  const auto f = sl::lu_factor(a);
  for (int trans : {0, 1, 2}) {
    const auto xs = mats(sl::lu_solve(f, b, trans));
    for (size_t k = 0; k < 2; ++k) {
      const Mat op = trans == 0   ? as[k]
                     : trans == 2 ? adjoint(as[k])
                                  : [&] {
                                      Mat m(4, 4);
                                      for (int64_t i = 0; i < 4; ++i)
                                        for (int64_t j = 0; j < 4; ++j) m(j, i) = as[k](i, j);
                                      return m;
                                    }();
      EXPECT_LT(max_diff(matmul(op, xs[k]), bs[k]), tol(t) * 10) << trans;
    }
  }
  for (const Shape& s : {Shape{4, 4}, Shape{3, 5}, Shape{5, 3}}) {
    const Array x = random(s, t, 25);
    auto [pm, l, u] = sl::lu(x);
    EXPECT_LT(max_diff(matmul(matmul(mats(pm)[0], mats(l)[0]), mats(u)[0]), mats(x)[0]),
              tol(t) * 10)
        << shape_to_string(s);
    auto [pl, u2, none] = sl::lu(x, true);
    EXPECT_FALSE(none.valid());
    EXPECT_LT(max_diff(matmul(mats(pl)[0], mats(u2)[0]), mats(x)[0]), tol(t) * 10);
    auto [q, r] = sl::qr(x, "economic");
    EXPECT_LT(max_diff(matmul(mats(q)[0], mats(r)[0]), mats(x)[0]), tol(t) * 10);
    EXPECT_EQ(sl::qr(x).first.shape(), (Shape{s[0], s[0]}));
  }
}

TEST_P(LinalgTest, EigSchurHessenberg) {
  const DType t = GetParam();
  const Array a = random({2, 4, 4}, t, 26);
  const auto as = mats(a);
  const ll::EigResult e = ll::eig(a);
  EXPECT_EQ(e.w.dtype(), is_complex(t) ? t : to_complex(t));
  const auto ws = mats(e.w, true), vls = mats(e.vl), vrs = mats(e.vr);
  for (size_t k = 0; k < 2; ++k) {
    const Mat d = diag(ws[k], 4, 4);
    EXPECT_LT(max_diff(matmul(as[k], vrs[k]), matmul(vrs[k], d)), tol(t) * 50);
    EXPECT_LT(max_diff(matmul(adjoint(vls[k]), as[k]), matmul(d, adjoint(vls[k]))), tol(t) * 50);
  }
  auto [w2, v2] = jl::eig(a);
  EXPECT_LT(max_diff(mats(w2, true)[1], ws[1]), tol(t) * 10);
  EXPECT_LT(max_diff(mats(jl::eigvals(a), true)[1], ws[1]), tol(t) * 10);
  EXPECT_FALSE(ll::eig(a, false, false).vr.valid());
  for (const std::string output : {"real", "complex"}) {
    auto [tm, z] = sl::schur(a, output);
    const auto ts = mats(tm), zs = mats(z);
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_LT(max_diff(matmul(matmul(zs[k], ts[k]), adjoint(zs[k])), as[k]), tol(t) * 50)
          << output;
      EXPECT_LT(max_diff(matmul(adjoint(zs[k]), zs[k]), eye(4)), tol(t) * 10);
      // Triangular, but for the 2x2 blocks of a real Schur form.
      const int64_t below = output == "real" && !is_complex(t) ? 2 : 1;
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t j = 0; j + below <= i; ++j) EXPECT_EQ(ts[k](i, j), cd(0)) << output;
    }
  }
  auto [h, q] = sl::hessenberg(a, true);
  const auto hs = mats(h), qs = mats(q);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_LT(max_diff(matmul(matmul(qs[k], hs[k]), adjoint(qs[k])), as[k]), tol(t) * 50);
    EXPECT_LT(max_diff(matmul(adjoint(qs[k]), qs[k]), eye(4)), tol(t) * 10);
    for (int64_t i = 2; i < 4; ++i)
      for (int64_t j = 0; j + 1 < i; ++j) EXPECT_EQ(hs[k](i, j), cd(0));
  }
}

TEST_P(LinalgTest, TensorSolveAndInv) {
  const DType t = GetParam();
  const Array a =
      random({2, 3, 6}, t, 27) + jnp::reshape(jnp::astype(jnp::eye(6), t), {2, 3, 6}) * 3;
  const Array b = random({2, 3}, t, 28);
  const Array x = jl::tensorsolve(a, b);
  EXPECT_EQ(x.shape(), (Shape{6}));
  EXPECT_LT(max_diff(mats(jnp::reshape(jnp::tensordot(a, x, 1), {6, 1}))[0],
                     mats(jnp::reshape(b, {6, 1}))[0]),
            tol(t) * 10);
  const Array sq = jnp::reshape(a, {2, 3, 3, 2});
  const Array inv = jl::tensorinv(sq, 2);
  EXPECT_EQ(inv.shape(), (Shape{3, 2, 2, 3}));
  EXPECT_LT(max_diff(mats(jnp::reshape(jnp::tensordot(inv, sq, 2), {6, 6}))[0], eye(6)),
            tol(t) * 10);
  EXPECT_THROW(jl::tensorinv(a, 1), Error);
}

// The m x m tridiagonal matrix of dl (from its second element), d and du.
Mat tridiagonal_matrix(const Mat& dl, const Mat& d, const Mat& du) {
  const int64_t m = d.rows;
  Mat a(m, m);
  for (int64_t i = 0; i < m; ++i) {
    a(i, i) = d(i, 0);
    if (i > 0) a(i, i - 1) = dl(i, 0);
    if (i + 1 < m) a(i, i + 1) = du(i, 0);
  }
  return a;
}

TEST_P(LinalgTest, TridiagonalSolveAndReduction) {
  const DType t = GetParam();
  const Array dl = random({2, 5}, t, 50), du = random({2, 5}, t, 51);
  const Array d = random({2, 5}, t, 52) + 4;
  const Array b = random({2, 5, 3}, t, 53);
  const auto xs = mats(ll::tridiagonal_solve(dl, d, du, b));
  const auto dls = mats(dl, true), ds = mats(d, true), dus = mats(du, true), bs = mats(b);
  for (size_t k = 0; k < 2; ++k)
    EXPECT_LT(max_diff(matmul(tridiagonal_matrix(dls[k], ds[k], dus[k]), xs[k]), bs[k]),
              tol(t) * 10);
  // A singular system (a zero row) gives NaNs.
  const Array z = jnp::zeros({1, 5}, t);
  const std::vector<cd> nan = values(ll::tridiagonal_solve(z, z, z, jnp::ones({1, 5, 1}, t)));
  for (cd v : nan) EXPECT_TRUE(std::isnan(v.real()));
  // T = Q^H A Q has A's eigenvalues.
  const Array a = hpd({2, 4, 4}, t, 54);
  for (bool lower : {true, false}) {
    const ll::TridiagonalResult r = ll::tridiagonal(a, lower);
    EXPECT_EQ(r.d.dtype(), complex_component(t));
    const auto dd = mats(r.d, true), ee = mats(r.e, true), ws = mats(jl::eigvalsh(a), true);
    for (size_t k = 0; k < 2; ++k) {
      Mat sub(4, 1);
      for (int64_t i = 1; i < 4; ++i) sub(i, 0) = ee[k](i - 1, 0);
      Mat sup(4, 1);
      for (int64_t i = 0; i < 3; ++i) sup(i, 0) = ee[k](i, 0);
      const Mat tm = tridiagonal_matrix(sub, dd[k], sup);
      std::vector<double> re;
      for (cd v : tm.v) re.push_back(v.real());
      const Array tarr = jnp::array(re, Shape{4, 4}, DType::F64);
      EXPECT_LT(max_diff(mats(jl::eigvalsh(tarr), true)[0], ws[k]), tol(t) * 50) << lower;
    }
  }
}

// exp(A) in complex doubles: Taylor series of A / 2^s, squared s times.
Mat host_expm(const Mat& a) {
  double norm = 0;
  for (cd v : a.v) norm = std::max(norm, std::abs(v));
  int s = 0;
  while (norm * a.rows / std::pow(2.0, s) > 0.5) ++s;
  Mat x = a;
  for (cd& v : x.v) v /= std::pow(2.0, s);
  Mat r = eye(a.rows), term = eye(a.rows);
  for (int k = 1; k < 30; ++k) {
    term = matmul(term, x);
    for (cd& v : term.v) v /= k;
    for (size_t i = 0; i < r.v.size(); ++i) r.v[i] += term.v[i];
  }
  for (int i = 0; i < s; ++i) r = matmul(r, r);
  return r;
}

TEST_P(LinalgTest, ExpmMatchesScaledTaylorSeries) {
  const DType t = GetParam();
  // Norms that pick each Padé degree, and one that needs squarings.
  for (double scale : {0.005, 0.1, 0.5, 1.5, 4.0, 20.0}) {
    const Array a = random({2, 4, 4}, t, 60) * (scale / 4);
    const auto got = mats(sl::expm(a)), as = mats(a);
    for (size_t k = 0; k < 2; ++k) {
      const Mat want = host_expm(as[k]);
      double size = 1;
      for (cd v : want.v) size = std::max(size, std::abs(v));
      EXPECT_LT(max_diff(got[k], want), tol(t) * 50 * size) << scale;
    }
  }
  const std::vector<cd> nan = values(sl::expm(jnp::astype(jnp::eye(2), t) * 1e8, 4));
  for (cd v : nan) EXPECT_TRUE(std::isnan(v.real()));
}

TEST(LinalgApi, BlockDiag) {
  const Array d = sl::block_diag({jnp::ones({2, 2}), jnp::array({5.0}), jnp::full({1, 3}, 7)});
  EXPECT_EQ(d.shape(), (Shape{4, 6}));
  EXPECT_EQ(d.to_vector<float>(), (std::vector<float>{1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0,  //
                                                      0, 0, 5, 0, 0, 0, 0, 0, 0, 7, 7, 7}));
}

// ----- gradients against central finite differences, vmap against a loop

class LinalgGradTest : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(Dtypes, LinalgGradTest, ::testing::Values(DType::F64, DType::C128),
                         [](const auto& info) {
                           return info.param == DType::F64 ? "f64" : "c128";
                         });

TEST_P(LinalgGradTest, Cholesky) {
  const DType t = GetParam();
  expect_grad_matches([](const Array& a) { return weighted_sum(jl::cholesky(a)); },
                      hpd({2, 3, 3}, t, 30));
}

TEST_P(LinalgGradTest, TriangularSolveBothOperands) {
  const DType t = GetParam();
  const Array a = random({3, 3}, t, 31) + jnp::astype(jnp::eye(3), t) * 3;
  const Array b = random({3, 2}, t, 32);
  for (bool lower : {true, false})
    for (int trans : {0, 1, 2}) {
      expect_grad_matches(
          [&](const Array& x) { return weighted_sum(sl::solve_triangular(x, b, trans, lower)); },
          a);
      expect_grad_matches(
          [&](const Array& x) { return weighted_sum(sl::solve_triangular(a, x, trans, lower)); },
          b);
    }
  // The right side and a unit diagonal.
  expect_grad_matches(
      [&](const Array& x) {
        return weighted_sum(ll::triangular_solve(x, mT(b), false, true, false, false, true));
      },
      a);
}

TEST_P(LinalgGradTest, LuSolveInvDet) {
  const DType t = GetParam();
  const Array a = random({2, 3, 3}, t, 33) + jnp::astype(jnp::eye(3), t) * 2;
  const Array b = random({2, 3, 2}, t, 34);
  expect_grad_matches([](const Array& x) { return weighted_sum(std::get<0>(ll::lu(x))); }, a);
  expect_grad_matches([&](const Array& x) { return weighted_sum(jl::solve(x, b)); }, a);
  expect_grad_matches([](const Array& x) { return weighted_sum(jl::inv(x)); }, a);
  expect_grad_matches([](const Array& x) { return weighted_sum(jl::det(x)); }, a);
  expect_grad_matches([](const Array& x) { return weighted_sum(jl::slogdet(x).second); }, a);
}

TEST_P(LinalgGradTest, Eigh) {
  const DType t = GetParam();
  const Array a = hpd({2, 3, 3}, t, 35);
  // Eigenvalues, and the eigenvectors through V diag(d) V^H (unchanged by their phases).
  expect_grad_matches([](const Array& x) { return weighted_sum(jl::eigvalsh(x)); }, a);
  expect_grad_matches(
      [](const Array& x) {
        auto [w, v] = jl::eigh(x);
        const Array d = jnp::astype(jnp::array({1.0, -2.0, 0.5}), v.dtype());
        return weighted_sum(jnp::matmul(jnp::multiply(v, d), mH(v)));
      },
      a, 1e-4);
}

TEST_P(LinalgGradTest, Svd) {
  const DType t = GetParam();
  for (const Shape& s : {Shape{4, 3}, Shape{3, 4}, Shape{3, 3}}) {
    const Array a = random(s, t, 36);
    expect_grad_matches([](const Array& x) { return weighted_sum(ll::svd(x, false, false).s); }, a);
    expect_grad_matches(
        [](const Array& x) {
          const ll::SvdResult r = ll::svd(x, false);
          const Array d = jnp::astype(jnp::array({1.0, -2.0, 0.5}), x.dtype());
          return weighted_sum(jnp::matmul(jnp::multiply(r.u, d), r.vh));
        },
        a, 1e-4);
  }
}

TEST_P(LinalgGradTest, Qr) {
  const DType t = GetParam();
  for (const Shape& s : {Shape{2, 4, 3}, Shape{3, 3}})
    for (const std::string mode : {"reduced", "complete"}) {
      if (mode == "complete" && s[s.size() - 2] != s.back()) continue;
      const Array a = random(s, t, 37);
      expect_grad_matches([&](const Array& x) { return weighted_sum(jl::qr(x, mode).second); }, a);
      expect_grad_matches([&](const Array& x) { return weighted_sum(jl::qr(x, mode).first); }, a);
    }
}

// jvp is the transposed VJP: the rules' own ops must be differentiable.
TEST(LinalgApi, JvpMatchesDirectionalDifference) {
  const Array a = hpd({3, 3}, DType::F64, 38);
  const Array da = random({3, 3}, DType::F64, 39);
  const auto check = [&](auto f, const char* what) {
    const Array tangent = jvp(f, a, da).second;
    auto jf = jit(f);
    const double h = 1e-6;
    const std::vector<double> up = jf(a + da * h).template to_vector<double>();
    const std::vector<double> down = jf(a - da * h).template to_vector<double>();
    const std::vector<double> got = tangent.to_vector<double>();
    ASSERT_EQ(got.size(), up.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], (up[i] - down[i]) / (2 * h), 1e-5 * std::max(1.0, std::abs(got[i])))
          << what << " " << i;
  };
  check([](const Array& x) { return jl::cholesky(x); }, "cholesky");
  check([](const Array& x) { return jl::det(x); }, "det");
  check([](const Array& x) { return jl::eigvalsh(x); }, "eigvalsh");
  check([](const Array& x) { return jl::qr(x).second; }, "qr");
  check([](const Array& x) { return ll::svd(x, false, false).s; }, "svd");
}

TEST_P(LinalgGradTest, TridiagonalSolveAllOperands) {
  const DType t = GetParam();
  const Array dl = random({2, 4}, t, 55), du = random({2, 4}, t, 56);
  const Array d = random({2, 4}, t, 57) + 4;
  const Array b = random({2, 4, 2}, t, 58);
  expect_grad_matches(
      [&](const Array& x) { return weighted_sum(ll::tridiagonal_solve(x, d, du, b)); }, dl);
  expect_grad_matches(
      [&](const Array& x) { return weighted_sum(ll::tridiagonal_solve(dl, x, du, b)); }, d);
  expect_grad_matches(
      [&](const Array& x) { return weighted_sum(ll::tridiagonal_solve(dl, d, x, b)); }, du);
  expect_grad_matches(
      [&](const Array& x) { return weighted_sum(ll::tridiagonal_solve(dl, d, du, x)); }, b);
}

TEST_P(LinalgGradTest, Expm) {
  const DType t = GetParam();
  for (double scale : {0.3, 8.0})  // without and with squarings
    expect_grad_matches([](const Array& x) { return weighted_sum(sl::expm(x)); },
                        random({3, 3}, t, 61) * scale, 1e-4);
}

// The transformations compose: grad of a vmapped loss, and per-element grads by vmap(grad),
// against a loop of grads.
TEST(LinalgApi, GradAndVmapCompose) {
  const Array a = hpd({2, 3, 3}, DType::F64, 62);
  for (int which = 0; which < 3; ++which) {
    const auto f = [which](const Array& x) {
      if (which == 0) return weighted_sum(jl::cholesky(x));
      if (which == 1) return weighted_sum(jl::inv(x));
      return weighted_sum(jl::qr(x).second);
    };
    const Array per_element = vmap(grad(f))(a);
    const Array of_vmap = grad([&](const Array& x) { return jnp::sum(vmap(f)(x)); })(a);
    for (int64_t k = 0; k < 2; ++k) {
      const std::vector<double> want = grad(f)(a[k]).to_vector<double>();
      const std::vector<double> got = per_element[k].to_vector<double>();
      const std::vector<double> got2 = of_vmap[k].to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_NEAR(got[i], want[i], 1e-9) << which;
        EXPECT_NEAR(got2[i], want[i], 1e-9) << which;
      }
    }
  }
}

TEST(LinalgApi, GradOfWideQrIsRefused) {
  // As in JAX: QR is differentiable only where R is square (m >= n).
  auto g = grad([](const Array& x) { return jnp::sum(jl::qr(x).second); });
  try {
    g(jnp::ones({2, 3}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("geqrf"), std::string::npos) << e.what();
  }
}

TEST_P(LinalgTest, VmapMatchesLoop) {
  const DType t = GetParam();
  const Array a = hpd({3, 4, 4}, t, 40);
  const Array b = random({3, 4, 2}, t, 41);
  const auto per_element = [&](auto f, const Array& x) {
    std::vector<Array> outs;
    for (int64_t i = 0; i < 3; ++i) outs.push_back(f(x[i]));
    return jnp::stack(outs);
  };
  const auto check = [&](auto f, const Array& x, const char* what) {
    const Array got = vmap(f)(x);
    const Array want = per_element(f, x);
    ASSERT_EQ(got.shape(), want.shape()) << what;
    const std::vector<cd> g = values(got), w = values(want);
    for (size_t i = 0; i < g.size(); ++i) EXPECT_LT(std::abs(g[i] - w[i]), tol(t) * 10) << what;
  };
  check([](const Array& x) { return jl::cholesky(x); }, a, "cholesky");
  check([](const Array& x) { return jl::det(x); }, a, "det");
  check([](const Array& x) { return jl::inv(x); }, a, "inv");
  check([](const Array& x) { return jl::eigvalsh(x); }, a, "eigvalsh");
  check([](const Array& x) { return ll::svd(x, false, false).s; }, a, "svd");
  check([](const Array& x) { return jl::qr(x, "r").second; }, a, "qr");
  check([](const Array& x) { return std::get<0>(ll::lu(x)); }, a, "lu");
  check([](const Array& x) { return jl::eigvals(x); }, a, "eigvals");
  check([](const Array& x) { return ll::schur(x).first; }, a, "schur");
  check([](const Array& x) { return ll::hessenberg(x).first; }, a, "hessenberg");
  check([](const Array& x) { return ll::tridiagonal(x).d; }, a, "tridiagonal");
  check(
      [](const Array& x) {
        return ll::tridiagonal_solve(x[0], x[1] + 4, x[2], jnp::expand_dims(x[3], -1));
      },
      a, "tridiagonal_solve");
  check([](const Array& x) { return std::get<0>(jl::lstsq(x, jnp::ones({4}))); }, a, "lstsq");
  // A batched right-hand side against one matrix: the matrix is broadcast over the batch.
  const Array a0 = a[0];
  check([&](const Array& y) { return sl::solve_triangular(a0, y, 0, true); }, b, "trsm");
  // vmap of a batched call: the mapped dimension joins the call's own batch.
  check([](const Array& x) { return jl::cholesky(jnp::stack({x, x})); }, a, "nested");
}

TEST(LinalgApi, PivotsToPermutationAppliesSwapsInOrder) {
  const Array pivots = jnp::array({2, 2, 3}, Shape{3}, DType::I32);
  // iota 0 1 2 3 4; swap 0<->2: 2 1 0 3 4; swap 1<->2: 2 0 1 3 4; swap 2<->3: 2 0 3 1 4.
  EXPECT_EQ(ll::lu_pivots_to_permutation(pivots, 5).to_vector<int32_t>(),
            (std::vector<int32_t>{2, 0, 3, 1, 4}));
}

TEST(LinalgApi, NonSquareOperandNamesTheShape) {
  try {
    ll::cholesky(jnp::zeros({2, 3, 4}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[2,3,4]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(jnp::linalg::solve(jnp::eye(3), jnp::ones({4})), Error);
  EXPECT_THROW(jnp::linalg::det(jnp::ones({2, 3})), Error);
  try {
    jnp::linalg::cholesky(jnp::zeros({2, 3, 4}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2,3,4]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cholesky"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ll::eigh(jnp::zeros({3}, DType::F64)), Error);
  EXPECT_THROW(ll::qr(jnp::zeros({3, 3}, DType::I32)), Error);
  EXPECT_THROW(ll::triangular_solve(jnp::eye(3), jnp::zeros({4, 2}), true), Error);
}

TEST(LinalgApi, LoweredCholeskyUsesJaxTarget) {
  auto f = jit([](const Array& a) { return jnp::linalg::cholesky(a); });
  const std::string text = f.lower(ShapeDtype{{4, 4}, DType::F32}).as_text();
  EXPECT_NE(text.find("stablehlo.custom_call @lapack_spotrf_ffi"), std::string::npos) << text;
  EXPECT_NE(text.find("uplo = 76 : ui8"), std::string::npos) << text;
  EXPECT_NE(text.find("operand_layouts = [dense<[0, 1]> : tensor<2xindex>]"), std::string::npos)
      << text;
  // The printed program parses back and runs on the cpu backend (a program JAX would run too).
  const Array a = hpd({4, 4}, DType::F32, 42);
  auto module = ir::parse_module(text);
  const std::vector<HostTensor> in{a.to_host()};
  const std::vector<HostTensor> out =
      runtime::get_backend("cpu").compile(*module)->execute_on_host(in);
  ASSERT_EQ(out.size(), 1u);
  const std::vector<float> got = out[0].to_vector<float>();
  const std::vector<float> want = jnp::linalg::cholesky(a).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  EXPECT_NE(
      text.find("output_operand_aliases = [#stablehlo.output_operand_alias<"
                "output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>]"),
      std::string::npos)
      << text;
  // Through the portable artifact (the VHLO bytecode jax.export holds) and back.
  const std::string bytes = ir::write_bytecode(*module, ir::default_portable_artifact_target());
  auto back = ir::read_bytecode(bytes, "cholesky.mlirbc");
  const std::vector<float> again =
      runtime::get_backend("cpu").compile(*back)->execute_on_host(in)[0].to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(again[i], got[i]) << i;
  const std::string batched = f.lower(ShapeDtype{{3, 4, 4}, DType::C128}).as_text();
  EXPECT_NE(batched.find("@lapack_zpotrf_ffi"), std::string::npos) << batched;
  EXPECT_NE(batched.find("dense<[1, 2, 0]> : tensor<3xindex>"), std::string::npos) << batched;
}

}  // namespace
}  // namespace cujax
