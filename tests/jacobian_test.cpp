// jacfwd, jacrev, jacobian, hessian and linearize against hand-derived matrices and each other.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "cujax/jacobian.h"
#include "cujax/jit.h"
#include "cujax/linearize.h"
#include "cujax/numpy.h"

namespace jacobian_test {
struct Affine {
  cujax::Array w, b;
};
}  // namespace jacobian_test
CUJAX_REGISTER_TREE(jacobian_test::Affine, w, b);

namespace cujax {
namespace {

namespace jnp = cujax::numpy;

Array scalar(double v) {
  return jnp::array({v}, Shape{});
}

std::vector<double> f64(const Array& a) {
  return jnp::astype(a, DType::F64).to_vector<double>();
}

void expect_close(const Array& a, const std::vector<double>& want, double tol) {
  const auto got = f64(a);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "at " << i;
}

// f(x) = [x0 x1, sin(x2), x0^2 + x1 x2]
Array f3(const Array& x) {
  const Array a = x[0], b = x[1], c = x[2];
  return jnp::stack({a * b, jnp::sin(c), a * a + b * c});
}

TEST(Jacobian, ForwardAndReverseMatchTheHandDerivedMatrix) {
  const Array x = jnp::array({0.5, -1.5, 2.0});
  const double a = 0.5, b = -1.5, c = 2.0;
  const std::vector<double> want = {b, a, 0, 0, 0, std::cos(c), 2 * a, c, b};
  const Array jr = jacrev(f3)(x), jf = jacfwd(f3)(x);
  ASSERT_EQ(jr.shape(), (Shape{3, 3}));
  ASSERT_EQ(jf.shape(), (Shape{3, 3}));
  expect_close(jr, want, 1e-6);
  expect_close(jf, want, 1e-6);
  expect_close(jacobian(f3)(x), want, 1e-6);
  // Under jit, the same.
  expect_close(jit([](const Array& v) { return jacfwd(f3)(v); })(x), want, 1e-6);
}

TEST(Jacobian, MatrixArgumentKeepsJaxLayout) {
  // d(A A)_ij / dA_kl = [i == k] A_lj + A_ik [j == l]
  auto square = [](const Array& m) { return jnp::matmul(m, m); };
  const std::vector<double> A = {1, 2, -3, 0.5};
  const Array m = jnp::reshape(jnp::array({1.0, 2.0, -3.0, 0.5}), {2, 2});
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 2; ++k)
        for (int l = 0; l < 2; ++l)
          want.push_back((i == k) * A[l * 2 + j] + A[i * 2 + k] * (j == l));
  const Array jr = jacrev(square)(m), jf = jacfwd(square)(m);
  ASSERT_EQ(jr.shape(), (Shape{2, 2, 2, 2}));
  expect_close(jr, want, 1e-5);
  expect_close(jf, want, 1e-5);
}

TEST(Jacobian, HessianOfACubicAndAQuadratic) {
  // g(x) = sum(x^3) + x0 x1: H = diag(6 x) + [0 1; 1 0] in the first block
  auto g = [](const Array& x) { return jnp::sum(x * x * x) + x[0] * x[1]; };
  const Array x = jnp::array({1.0, -2.0, 0.5});
  const Array h = hessian(g)(x);
  ASSERT_EQ(h.shape(), (Shape{3, 3}));
  expect_close(h, {6, 1, 0, 1, -12, 0, 0, 0, 3}, 1e-4);
  // 0.5 x^T Q x: H = (Q + Q^T) / 2, also as jacrev of jacrev.
  const Array Q = jnp::reshape(jnp::array({2.0, 1.0, 0.0, 3.0, 4.0, -1.0, 0.5, 0.0, 1.0}), {3, 3});
  auto quad = [Q](const Array& v) { return 0.5 * jnp::dot(v, jnp::matmul(Q, v)); };
  const std::vector<double> q = f64(Q);
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) want.push_back((q[i * 3 + j] + q[j * 3 + i]) / 2);
  expect_close(hessian(quad)(x), want, 1e-4);
  expect_close(jacrev(jacrev(quad))(x), want, 1e-4);
}

// f(x, y) = [x0 y0, x1 y1^2, sin(x0) y1]: df/dx = [[y0, 0], [0, y1^2], [cos(x0) y1, 0]],
// df/dy = [[x0, 0], [0, 2 x1 y1], [0, sin(x0)]].
Array f2(const Array& x, const Array& y) {
  return jnp::stack({x[0] * y[0], x[1] * y[1] * y[1], jnp::sin(x[0]) * y[1]});
}

TEST(Jacobian, ArgnumsAndHasAuxMatchTheHandDerivedMatrices) {
  const double x0 = 0.7, x1 = -1.2, y0 = 1.5, y1 = -0.4;
  const Array x = jnp::array({x0, x1}), y = jnp::array({y0, y1});
  const std::vector<double> dx = {y0, 0, 0, y1 * y1, std::cos(x0) * y1, 0};
  const std::vector<double> dy = {x0, 0, 0, 2 * x1 * y1, 0, std::sin(x0)};
  auto [rx, ry] = jacrev(f2, argnums<0, 1>)(x, y);
  auto [fx, fy] = jacfwd(f2, argnums<0, 1>)(x, y);
  ASSERT_EQ(rx.shape(), (Shape{3, 2}));
  ASSERT_EQ(fy.shape(), (Shape{3, 2}));
  expect_close(rx, dx, 1e-6);
  expect_close(ry, dy, 1e-6);
  expect_close(fx, dx, 1e-6);
  expect_close(fy, dy, 1e-6);
  // One argnum gives that Jacobian alone, also in reverse order of the arguments.
  const Array only_y = jacfwd(f2, argnums<1>)(x, y);
  expect_close(only_y, dy, 1e-6);
  auto [ry2, rx2] = jacobian(f2, argnums<1, 0>)(x, y);
  expect_close(ry2, dy, 1e-6);
  expect_close(rx2, dx, 1e-6);
  // has_aux: (Jacobian, aux) with aux as f returned it.
  auto with_aux = [](const Array& a, const Array& b) {
    return std::make_pair(f2(a, b), jnp::sum(a * b));
  };
  auto [jr, aux_r] = jacrev(with_aux, argnums<0>, has_aux)(x, y);
  auto [jf, aux_f] = jacfwd(with_aux, argnums<1>, has_aux)(x, y);
  expect_close(jr, dx, 1e-6);
  expect_close(jf, dy, 1e-6);
  expect_close(aux_r, {x0 * y0 + x1 * y1}, 1e-6);
  expect_close(aux_f, {x0 * y0 + x1 * y1}, 1e-6);
  // Under jit, the same.
  expect_close(
      jit([](const Array& a, const Array& b) { return jacrev(f2, argnums<1>)(a, b); })(x, y), dy,
      1e-6);
}

TEST(Jacobian, HessianWithRespectToOneArgument) {
  // g(x, y) = sum(x * y^3): d2g/dy2 = diag(6 x y), d2g/dx2 = 0.
  auto g = [](const Array& x, const Array& y) { return jnp::sum(x * y * y * y); };
  const Array x = jnp::array({0.5, -2.0, 1.5}), y = jnp::array({1.0, 0.3, -0.7});
  const Array hy = hessian(g, argnums<1>)(x, y);
  ASSERT_EQ(hy.shape(), (Shape{3, 3}));
  std::vector<double> want(9, 0.0);
  const std::vector<double> xv = {0.5, -2.0, 1.5}, yv = {1.0, 0.3, -0.7};
  for (int i = 0; i < 3; ++i) want[i * 4] = 6 * xv[i] * yv[i];
  expect_close(hy, want, 1e-6);
  expect_close(hessian(g, argnums<0>)(x, y), std::vector<double>(9, 0.0), 1e-6);
}

// linearize(f2, x, y): the value, and J_x tx + J_y ty from the hand-derived matrices, for two
// tangents, eagerly and under jit.
TEST(Jacobian, LinearizeIsTheJvpAtThePrimals) {
  const double x0 = 0.7, x1 = -1.2, y0 = 1.5, y1 = -0.4;
  const Array x = jnp::array({x0, x1}), y = jnp::array({y0, y1});
  const std::vector<std::vector<double>> dx = {{y0, 0}, {0, y1 * y1}, {std::cos(x0) * y1, 0}};
  const std::vector<std::vector<double>> dy = {{x0, 0}, {0, 2 * x1 * y1}, {0, std::sin(x0)}};
  auto [value, f_jvp] = linearize(f2, x, y);
  expect_close(value, {x0 * y0, x1 * y1 * y1, std::sin(x0) * y1}, 1e-6);
  for (const auto& [tx, ty] : std::vector<std::pair<std::vector<double>, std::vector<double>>>{
           {{1.0, 0.0}, {0.0, 0.0}}, {{0.3, -2.0}, {1.5, 0.25}}}) {
    std::vector<double> want(3, 0.0);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) want[i] += dx[i][j] * tx[j] + dy[i][j] * ty[j];
    // Tangents of the primals' dtype (f32), as JAX requires.
    const Array ta = jnp::astype(jnp::array(tx), DType::F32),
                tb = jnp::astype(jnp::array(ty), DType::F32);
    expect_close(f_jvp(ta, tb), want, 1e-6);
    expect_close(jit([&](const Array& a, const Array& b) { return f_jvp(a, b); })(ta, tb), want,
                 1e-6);
  }
}

// f([a, b]) = (a b, sum(a^2) + sin b) for a vector a and a scalar b: a tuple of lists, as JAX's
// jacrev returns ((d0/da, d0/db), (d1/da, d1/db)).
TEST(Jacobian, PytreeInputsAndOutputsNestAsJax) {
  auto f = [](const std::vector<Array>& v) {
    const Array& a = v[0];
    const Array& b = v[1];
    return std::make_tuple(a * b, jnp::sum(a * a) + jnp::sin(b));
  };
  const std::vector<Array> x = {jnp::array({0.5, -2.0}), scalar(1.25)};
  const double a0 = 0.5, a1 = -2.0, b = 1.25;
  for (const auto& J : {jacrev(f)(x), jacfwd(f)(x)}) {
    const std::vector<Array>& d0 = std::get<0>(J);
    const std::vector<Array>& d1 = std::get<1>(J);
    ASSERT_EQ(d0.size(), 2u);
    ASSERT_EQ(d1.size(), 2u);
    EXPECT_EQ(d0[0].shape(), (Shape{2, 2}));
    EXPECT_EQ(d0[1].shape(), (Shape{2}));
    EXPECT_EQ(d1[0].shape(), (Shape{2}));
    EXPECT_EQ(d1[1].shape(), (Shape{}));
    expect_close(d0[0], {b, 0, 0, b}, 1e-6);
    expect_close(d0[1], {a0, a1}, 1e-6);
    expect_close(d1[0], {2 * a0, 2 * a1}, 1e-6);
    expect_close(d1[1], {std::cos(b)}, 1e-6);
  }
}

// A registered struct argument: d(w x + b)/dw[i, k, l] = delta_ik x_l, d/db = I.
TEST(Jacobian, StructArgumentGivesAStructOfJacobians) {
  const Array xv = jnp::array({2.0, -1.0});
  auto f = [xv](const jacobian_test::Affine& p) { return jnp::matmul(p.w, xv) + p.b; };
  const jacobian_test::Affine p{jnp::reshape(jnp::array({1.0, 2.0, 3.0, 4.0}), {2, 2}),
                                jnp::array({0.5, 0.25})};
  std::vector<double> dw(8, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int l = 0; l < 2; ++l) dw[i * 4 + i * 2 + l] = l == 0 ? 2.0 : -1.0;
  for (const jacobian_test::Affine& J : {jacrev(f)(p), jacfwd(f)(p)}) {
    EXPECT_EQ(J.w.shape(), (Shape{2, 2, 2}));
    EXPECT_EQ(J.b.shape(), (Shape{2, 2}));
    expect_close(J.w, dw, 1e-6);
    expect_close(J.b, {1, 0, 0, 1}, 1e-6);
  }
}

// hessian of f([a, b]) = a^2 b (scalars): a list of lists, H[i][j] = d2f/dx_i dx_j.
TEST(Jacobian, HessianOfAListIsAListOfLists) {
  auto f = [](const std::vector<Array>& v) { return v[0] * v[0] * v[1]; };
  const double a = 1.5, b = -0.5;
  const std::vector<std::vector<Array>> H = hessian(f)(std::vector<Array>{scalar(a), scalar(b)});
  ASSERT_EQ(H.size(), 2u);
  ASSERT_EQ(H[0].size(), 2u);
  expect_close(H[0][0], {2 * b}, 1e-6);
  expect_close(H[0][1], {2 * a}, 1e-6);
  expect_close(H[1][0], {2 * a}, 1e-6);
  expect_close(H[1][1], {0}, 1e-6);
  // Against jacrev of jacrev.
  const std::vector<std::vector<Array>> H2 =
      jacrev(jacrev(f))(std::vector<Array>{scalar(a), scalar(b)});
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 2; ++j) expect_close(H2[i][j], f64(H[i][j]), 1e-6);
}

// Pytree arguments picked by argnums, pytree outputs and has_aux together, nested as JAX does:
// for each output leaf, the tuple (d/dp, d/dy) with d/dp of p's structure (a dict).
//   out["u"] = p["a"] * y          (2,)   d/da = diag(y), d/db = 0, d/dy = diag(a)
//   out["v"] = sum(p["b"]^2) + a.y ()     d/da = y, d/db = 2 b, d/dy = a
TEST(Jacobian, PytreeArgnumsWithHasAuxNestAsJax) {
  using Dict = std::map<std::string, Array>;
  auto f = [](const Dict& p, const Array& y, double scale) {
    const Array& a = p.at("a");
    const Array& b = p.at("b");
    Dict out;
    out.emplace("u", a * y);
    out.emplace("v", jnp::sum(b * b) + jnp::sum(a * y));
    return std::make_pair(out, jnp::multiply(jnp::sum(a), scale));  // aux
  };
  const Dict p = {{"a", jnp::array({0.5, -1.0})}, {"b", jnp::array({2.0, 0.25, -3.0})}};
  const Array y = jnp::array({1.5, 4.0});
  const double a0 = 0.5, a1 = -1.0, y0 = 1.5, y1 = 4.0;
  const std::vector<double> b = {2.0, 0.25, -3.0};
  auto check = [&](const auto& J) {
    const auto& [du_dp, du_dy] = J.at("u");
    const auto& [dv_dp, dv_dy] = J.at("v");
    EXPECT_EQ(du_dp.at("a").shape(), (Shape{2, 2}));
    EXPECT_EQ(du_dp.at("b").shape(), (Shape{2, 3}));
    EXPECT_EQ(dv_dp.at("b").shape(), (Shape{3}));
    expect_close(du_dp.at("a"), {y0, 0, 0, y1}, 1e-6);
    expect_close(du_dp.at("b"), std::vector<double>(6, 0.0), 1e-6);
    expect_close(du_dy, {a0, 0, 0, a1}, 1e-6);
    expect_close(dv_dp.at("a"), {y0, y1}, 1e-6);
    expect_close(dv_dp.at("b"), {2 * b[0], 2 * b[1], 2 * b[2]}, 1e-6);
    expect_close(dv_dy, {a0, a1}, 1e-6);
  };
  const auto [jr, aux_r] = jacrev(f, argnums<0, 1>, has_aux)(p, y, 3.0);
  const auto [jf, aux_f] = jacfwd(f, argnums<0, 1>, has_aux)(p, y, 3.0);
  check(jr);
  check(jf);
  expect_close(aux_r, {3.0 * (a0 + a1)}, 1e-6);
  expect_close(aux_f, {3.0 * (a0 + a1)}, 1e-6);
  // One argnum: the argument's structure alone per output leaf.
  const auto jp = jacobian(f, argnums<0>, has_aux)(p, y, 3.0).first;
  expect_close(jp.at("v").at("b"), {2 * b[0], 2 * b[1], 2 * b[2]}, 1e-6);
  // A struct argument in second position, under jit.
  auto g = [](const Array& x, const jacobian_test::Affine& q) { return jnp::matmul(q.w, x) + q.b; };
  const jacobian_test::Affine q{jnp::reshape(jnp::array({1.0, 2.0, 3.0, 4.0}), {2, 2}),
                                jnp::array({0.5, 0.25})};
  const Array xv = jnp::array({2.0, -1.0});
  const auto [jx, jq] = jit([&](const Array& x, const jacobian_test::Affine& qq) {
    return jacfwd(g, argnums<0, 1>)(x, qq);
  })(xv, q);
  expect_close(jx, {1, 2, 3, 4}, 1e-6);  // d(w x)/dx = w
  const auto [rx, rq] = jacrev(g, argnums<0, 1>)(xv, q);
  expect_close(rq.w, f64(jq.w), 1e-6);
  expect_close(rq.b, {1, 0, 0, 1}, 1e-6);
  expect_close(rx, f64(jx), 1e-6);
}

// hessian with two argnums: JAX's ((H_xx, H_xy), (H_yx, H_yy)). For f = sum(x^2 y + sin x),
// H_xx = diag(2 y - sin x), H_xy = H_yx = diag(2 x), H_yy = 0; against jacrev of jacrev.
TEST(Jacobian, HessianWithTwoArgnumsIsATupleOfTuples) {
  auto f = [](const Array& x, const Array& y) { return jnp::sum(x * x * y + jnp::sin(x)); };
  const std::vector<double> xv = {0.3, -1.1}, yv = {2.0, 0.7};
  const Array x = jnp::array(xv), y = jnp::array(yv);
  const auto H = hessian(f, argnums<0, 1>)(x, y);
  std::vector<double> hxx(4, 0.0), hxy(4, 0.0);
  for (int i = 0; i < 2; ++i) {
    hxx[i * 3] = 2 * yv[i] - std::sin(xv[i]);
    hxy[i * 3] = 2 * xv[i];
  }
  expect_close(std::get<0>(std::get<0>(H)), hxx, 1e-5);
  expect_close(std::get<1>(std::get<0>(H)), hxy, 1e-5);
  expect_close(std::get<0>(std::get<1>(H)), hxy, 1e-5);
  expect_close(std::get<1>(std::get<1>(H)), std::vector<double>(4, 0.0), 1e-5);
  const auto H2 = jacrev(jacrev(f, argnums<0, 1>), argnums<0, 1>)(x, y);
  expect_close(std::get<1>(std::get<0>(H2)), hxy, 1e-5);
  expect_close(std::get<0>(std::get<0>(H2)), hxx, 1e-5);
}

}  // namespace
}  // namespace cujax
