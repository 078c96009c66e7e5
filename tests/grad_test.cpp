// Autodiff: every VJP rule against central finite differences in f64, higher derivatives,
// grad under jit, value_and_grad, vjp/jvp against hand-computed Jacobian products,
// stop_gradient, custom_vjp, trees and argnums, and errors.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"

namespace grad_test {
struct Params {
  cujax::Array w, b;
};
}  // namespace grad_test
CUJAX_REGISTER_TREE(grad_test::Params, w, b);

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using grad_test::Params;
using VecFn = std::function<Array(const std::vector<Array>&)>;

// Deterministic values in [lo, hi).
Array rnd(const Shape& shape, double lo = -1, double hi = 1, uint32_t seed = 1) {
  std::vector<double> v(static_cast<size_t>(num_elements(shape)));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * ((s >> 8) / double(1u << 24));
  }
  return array(HostTensor::from_vector(v, shape));
}

Array f64(std::vector<double> v, Shape s) {
  return array(HostTensor::from_vector(v, std::move(s)));
}

// A fixed weighting that turns an array-valued op into a scalar with a full VJP.
Array wsum(const Array& y) {
  Array w = rnd(y.shape(), 0.5, 1.5, 99);
  if (y.dtype() != DType::F64) w = jnp::astype(w, y.dtype());
  return jnp::sum(y * w);
}

// grad(f)(xs) against central differences, leaf by leaf, element by element.
void check_grad(const VecFn& f, const std::vector<Array>& xs, double tol = 1e-6) {
  const std::vector<Array> g = grad(f)(xs);
  ASSERT_EQ(g.size(), xs.size());
  auto jf = jit(f);
  const double h = 1e-5;
  for (size_t k = 0; k < xs.size(); ++k) {
    ASSERT_EQ(g[k].shape(), xs[k].shape());
    ASSERT_EQ(g[k].dtype(), xs[k].dtype());
    if (!is_float(xs[k].dtype())) continue;
    const std::vector<double> x = xs[k].to_vector<double>();
    const std::vector<double> gv = g[k].to_vector<double>();
    std::vector<double> fd(x.size());
    double scale = 1e-3, err = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      std::vector<Array> p = xs, m = xs;
      std::vector<double> xp = x, xm = x;
      xp[i] += h;
      xm[i] -= h;
      p[k] = f64(xp, xs[k].shape());
      m[k] = f64(xm, xs[k].shape());
      fd[i] = (jf(p).item<double>() - jf(m).item<double>()) / (2 * h);
      scale = std::max(scale, std::abs(fd[i]));
    }
    for (size_t i = 0; i < x.size(); ++i) err = std::max(err, std::abs(gv[i] - fd[i]));
    EXPECT_LT(err / scale, tol) << "argument " << k << ": relative error " << err / scale;
  }
}

void check_unary(Array (*op)(const Array&), const Array& x, double tol = 1e-6) {
  check_grad([op](const std::vector<Array>& v) { return wsum(op(v[0])); }, {x}, tol);
}

void check_binary(Array (*op)(const Array&, const Array&), const Array& x, const Array& y) {
  check_grad([op](const std::vector<Array>& v) { return wsum(op(v[0], v[1])); }, {x, y});
}

// ---------------------------------------------------------------- element-wise

TEST(Grad, ElementwiseUnary) {
  const Shape s{2, 3};
  const Array x = rnd(s), pos = rnd(s, 0.2, 2.0);
  check_unary(lax::neg, x);
  check_unary(lax::abs, x);
  check_unary(lax::exp, x);
  check_unary(lax::expm1, x);
  check_unary(lax::log, pos);
  check_unary(lax::log1p, pos);
  check_unary(lax::tanh, x);
  check_unary(lax::logistic, x);
  check_unary(lax::sin, x);
  check_unary(lax::cos, x);
  check_unary(lax::tan, x);
  check_unary(lax::sqrt, pos);
  check_unary(lax::rsqrt, pos);
  check_unary(lax::cbrt, pos);
  check_unary(lax::erf, x);
  check_unary(lax::square, x);
  check_unary(lax::reciprocal, pos);
  check_unary(lax::sinh, x);
  check_unary(lax::cosh, x);
  check_unary(lax::atan, x);
  check_unary(lax::asin, rnd(s, -0.8, 0.8));
  check_unary(lax::log1p, pos);
}

TEST(Grad, CheckerCatchesAWrongRule) {
  // The finite-difference check is sharp enough to see a rule off by a factor of 2.
  auto right = [](const trace::VjpArgs& a) -> std::vector<std::optional<Array>> {
    return {lax::mul(a.cts[0], lax::cos(a.operands[0]))};
  };
  trace::register_vjp_rule("stablehlo.sine", [](const trace::VjpArgs& a) {
    return std::vector<std::optional<Array>>{
        lax::mul(a.cts[0], lax::add(lax::cos(a.operands[0]), lax::cos(a.operands[0])))};
  });
  EXPECT_NONFATAL_FAILURE(check_unary(lax::sin, rnd({3})), "relative error");
  trace::register_vjp_rule("stablehlo.sine", right);
  check_unary(lax::sin, rnd({3}));
}

TEST(Grad, ZeroGradientOps) {
  const Array x = rnd({4}, 0.1, 3.0);
  for (auto op : {lax::sign, lax::floor, lax::ceil}) {
    Array g = grad([op](const Array& v) { return jnp::sum(op(v)); })(x);
    EXPECT_EQ(g.to_vector<double>(), std::vector<double>(4, 0.0));
  }
}

TEST(Grad, ElementwiseBinary) {
  const Shape s{3, 2};
  const Array x = rnd(s, -1, 1, 3), y = rnd(s, -1, 1, 4), pos = rnd(s, 0.3, 2.0, 5);
  check_binary(lax::add, x, y);
  check_binary(lax::sub, x, y);
  check_binary(lax::mul, x, y);
  check_binary(lax::div, x, pos);
  check_binary(lax::pow, pos, y);
  check_binary(lax::max, x, y);
  check_binary(lax::min, x, y);
  check_binary(lax::atan2, x, y);
  check_binary(lax::rem, x, pos);
}

TEST(Grad, MaxMinTiesSplitEvenly) {
  const Array x = f64({1, 2, 3}, {3});
  auto [gx, gy] = grad([](const Array& a, const Array& b) { return jnp::sum(lax::max(a, b)); },
                       argnums<0, 1>)(x, x);
  EXPECT_EQ(gx.to_vector<double>(), (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_EQ(gy.to_vector<double>(), (std::vector<double>{0.5, 0.5, 0.5}));
  Array g = grad([](const Array& a) { return jnp::sum(jnp::minimum(a, a)); })(x);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 1, 1}));
  // jnp.max over ties shares the cotangent.
  Array m = grad([](const Array& a) { return jnp::max(a); })(f64({3, 1, 3}, {3}));
  EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{0.5, 0, 0.5}));
}

TEST(Grad, SelectClampConvert) {
  const Array x = rnd({5}, -2, 2, 7), y = rnd({5}, -2, 2, 8);
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::select(lax::gt(v[0], v[1]), lax::mul(v[0], v[1]), lax::sin(v[1])));
      },
      {x, y});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(
            lax::clamp(lax::full({}, -0.5, DType::F64), v[0], lax::full({}, 0.7, DType::F64)));
      },
      {x});
  check_grad([](const std::vector<Array>& v) { return wsum(lax::clamp(v[1], v[0], v[2])); },
             {x, lax::sub(y, lax::full({5}, 1.0, DType::F64)),
              lax::add(y, lax::full({5}, 1.0, DType::F64))});
  // f32 -> f64: the cotangent is converted back.
  const Array x32 = f64({1, 2, 3}, {3});
  Array x32f = jnp::astype(x32, DType::F32);
  Array g = grad([](const Array& v) {
    return jnp::sum(lax::mul(lax::convert_element_type(v, DType::F64), f64({2, 3, 4}, {3})));
  })(x32f);
  EXPECT_EQ(g.dtype(), DType::F32);
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{2, 3, 4}));
  // To an integer: no gradient flows.
  Array gi = grad([](const Array& v) {
    return jnp::sum(jnp::astype(jnp::astype(v, DType::I32), DType::F64) + v);
  })(f64({1.5, 2.5}, {2}));
  EXPECT_EQ(gi.to_vector<double>(), (std::vector<double>{1, 1}));
}

TEST(Grad, NumpyBroadcasting) {
  const Array a = rnd({3, 1}, -1, 1, 11), b = rnd({4}, -1, 1, 12), c = rnd({2, 1, 4}, -1, 1, 13);
  check_grad([](const std::vector<Array>& v) { return wsum(v[0] * v[1] + v[2] / (2.0 + v[1])); },
             {a, b, c});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::power(v[0], 2) - v[0] * 3.0); },
             {a});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::where(v[0] > 0, v[0], -v[1])); },
             {rnd({3, 4}, -1, 1, 14), b});
}

// ---------------------------------------------------------------- shapes

TEST(Grad, ShapeOps) {
  const Array x = rnd({2, 3, 4}, -1, 1, 21);
  check_grad([](const std::vector<Array>& v) { return wsum(lax::reshape(v[0], {6, 4})); }, {x});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::broadcast_in_dim(v[0], {5, 3, 2}, {2}));
      },
      {rnd({2}, -1, 1, 22)});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::broadcast_in_dim(v[0], {2, 3, 4}, {0, 2}));
      },
      {rnd({2, 1}, -1, 1, 23)});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::transpose(v[0], {2, 0, 1}));
      },
      {x});
  check_grad([](const std::vector<Array>& v) { return wsum(lax::rev(v[0], {0, 2})); }, {x});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::slice(v[0], {0, 1, 0}, {2, 3, 4}, {1, 1, 3}));
      },
      {x});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::pad(v[0], v[1], {{1, -1, 1}, {-1, 2, 0}, {0, 0, 2}}));
      },
      {x, f64({0.5}, {})});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::concatenate({v[0], lax::mul(v[1], v[1]), v[0]}, 1));
      },
      {x, rnd({2, 2, 4}, -1, 1, 24)});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::dynamic_slice(v[0], {scalar(1), scalar(-2), scalar(5)}, {1, 2, 2}));
      },
      {x});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::dynamic_update_slice(v[0], v[1], {scalar(1), scalar(1), scalar(0)}));
      },
      {x, rnd({1, 2, 3}, -1, 1, 25)});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(
            jnp::concatenate({jnp::squeeze(jnp::expand_dims(v[0], 0)), jnp::flip(v[0])}, -1));
      },
      {x});
}

// ---------------------------------------------------------------- contractions, reductions

TEST(Grad, DotGeneral) {
  const Array a = rnd({2, 3, 4}, -1, 1, 31), b = rnd({2, 4, 5}, -1, 1, 32);
  lax::DotDimensionNumbers batched{{2}, {1}, {0}, {0}};
  check_grad(
      [batched](const std::vector<Array>& v) {
        return wsum(lax::dot_general(v[0], v[1], batched));
      },
      {a, b});
  // Contracting two dimensions in a different order, batch dims not leading.
  lax::DotDimensionNumbers odd{{0, 2}, {2, 1}, {1}, {0}};
  check_grad([odd](const std::vector<Array>& v) { return wsum(lax::dot_general(v[0], v[1], odd)); },
             {rnd({4, 2, 3}, -1, 1, 33), rnd({2, 3, 4, 5}, -1, 1, 34)});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::matmul(v[0], v[1])); },
             {rnd({3, 4}, -1, 1, 35), rnd({4}, -1, 1, 36)});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::einsum("ij,kj->ik", v)); },
             {rnd({3, 4}, -1, 1, 37), rnd({2, 4}, -1, 1, 38)});
}

TEST(Grad, Reductions) {
  const Array x = rnd({3, 4}, -1, 1, 41);
  check_grad([](const std::vector<Array>& v) { return jnp::sum(jnp::sin(v[0])); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::sum(v[0], 1)); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::mean(v[0], 0)); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::max(v[0], 1)); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::min(v[0], 0)); }, {x});
  check_grad([](const std::vector<Array>& v) { return jnp::var(v[0]); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::std(v[0], 1)); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(nn::logsumexp(v[0], {1})); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(nn::softmax(v[0])); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(nn::log_softmax(v[0], 0)); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(nn::gelu(v[0], false)); }, {x});
}

TEST(Grad, ReduceWindowAndCumsum) {
  const Array x = rnd({5, 6}, -1, 1, 51);
  check_grad([](const std::vector<Array>& v) { return wsum(lax::cumsum(v[0], 1)); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(lax::cumsum(v[0], 0, true)); }, {x});
  lax::WindowConfig w;
  w.window_dimensions = {2, 3};
  w.window_strides = {2, 1};
  w.padding = {{1, 0}, {0, 2}};
  w.window_dilation = {1, 2};
  check_grad(
      [w](const std::vector<Array>& v) {
        return wsum(lax::reduce_window(
            {v[0]}, {lax::full({}, 0.0, DType::F64)},
            [](const std::vector<Array>& a) { return std::vector<Array>{lax::add(a[0], a[1])}; },
            w)[0]);
      },
      {x});
}

// Product reduction, also with one and two zeros in a reduced row (JAX's rule is exact there).
TEST(Grad, ReduceProd) {
  const Array x = rnd({3, 4}, 0.5, 1.5, 43);
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::prod(v[0], 1)); }, {x});
  check_grad([](const std::vector<Array>& v) { return jnp::prod(v[0]); }, {rnd({5}, 0.5, 1.5, 44)});
  const Array z = f64({0.7, 0, 1.3, -0.9, 0.6, 0, 0, 1.1, 0.8, 1.2, -1.4, 0.5}, {3, 4});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::prod(v[0], 1)); }, {z});
  // Hand-computed: d prod / dx at one zero is the product of the others, elsewhere 0.
  const auto g = grad([](const Array& v) { return jnp::prod(v); })(f64({2, 0, 3}, {3}));
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{0, 6, 0}));
  // Second derivative: d2/dx0 dx1 of x0 x1 x2 is x2.
  auto d0 = [](const Array& v) {
    return jnp::sum(grad([](const Array& u) { return jnp::prod(u); })(v) * f64({1, 0, 0}, {3}));
  };
  EXPECT_EQ(grad(d0)(f64({2, 5, 3}, {3})).to_vector<double>(), (std::vector<double>{0, 3, 5}));
}

// Convolutions: both operands, with strides, padding, dilations, feature groups and NHWC specs.
TEST(Grad, Convolution) {
  const Array x = rnd({2, 4, 7, 6}, -1, 1, 45), k = rnd({6, 2, 3, 2}, -1, 1, 46);
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(
            lax::conv_general_dilated(v[0], v[1], {2, 1}, {{1, 1}, {0, 2}}, {1, 1}, {1, 2}, {}, 2));
      },
      {x, k});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(
            lax::conv_general_dilated(v[0], v[1], {1, 2}, {{2, 0}, {1, 1}}, {2, 1}, {1, 1}));
      },
      {rnd({1, 3, 5, 5}, -1, 1, 47), rnd({2, 3, 2, 3}, -1, 1, 48)});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::conv_general_dilated(v[0], v[1], {1, 1}, {{1, 1}, {1, 1}}, {}, {},
                                              {"NHWC", "HWIO", "NHWC"}));
      },
      {rnd({2, 5, 4, 3}, -1, 1, 49), rnd({3, 3, 3, 4}, -1, 1, 50)});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(lax::conv_general_dilated(v[0], v[1], {2}, {{1, 2}}));
      },
      {rnd({3, 2, 9}, -1, 1, 52), rnd({4, 2, 3}, -1, 1, 53)});
}

// Max/min pooling and cummax: the cotangent goes to the window's (first) extreme element.
TEST(Grad, ReduceWindowMaxMin) {
  const Array x = rnd({2, 3, 6, 7}, -1, 1, 54);
  auto pool = [](const Array& v, bool is_max) {
    lax::WindowConfig w;
    w.window_dimensions = {1, 1, 3, 2};
    w.window_strides = {1, 1, 2, 2};
    w.padding = {{0, 0}, {0, 0}, {1, 1}, {0, 1}};
    const double init = is_max ? -INFINITY : INFINITY;
    return lax::reduce_window(
        {v}, {lax::full({}, init, DType::F64)},
        [is_max](const std::vector<Array>& a) {
          return std::vector<Array>{is_max ? lax::max(a[0], a[1]) : lax::min(a[0], a[1])};
        },
        w)[0];
  };
  check_grad([&](const std::vector<Array>& v) { return wsum(pool(v[0], true)); }, {x});
  check_grad([&](const std::vector<Array>& v) { return wsum(pool(v[0], false)); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(lax::cummax(v[0], 1)); },
             {rnd({3, 5}, -1, 1, 55)});
  // Ties: only the first maximal element of a window gets the cotangent, as in JAX.
  const auto g = grad([](const Array& v) {
    lax::WindowConfig w;
    w.window_dimensions = {2};
    w.window_strides = {2};
    return jnp::sum(lax::reduce_window(
        {v}, {lax::full({}, -INFINITY, DType::F64)},
        [](const std::vector<Array>& a) { return std::vector<Array>{lax::max(a[0], a[1])}; },
        w)[0]);
  })(f64({1, 1, 0, 2}, {4}));
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 0, 0, 1}));
  // Differentiable again: the second derivative of a max pool is zero almost everywhere.
  auto d1 = [&](const Array& v) {
    return wsum(grad([&](const Array& u) { return wsum(pool(u, true) * pool(u, true)); })(v));
  };
  check_grad([&](const std::vector<Array>& v) { return d1(v[0]); }, {x});
}

// ---------------------------------------------------------------- indexing, sort

TEST(Grad, GatherScatter) {
  const Array x = rnd({5, 3}, -1, 1, 61);
  const Array idx = jnp::array({4, 0, 4, 2});
  check_grad([idx](const std::vector<Array>& v) { return wsum(jnp::at(v[0], {idx})); }, {x});
  check_grad(
      [idx](const std::vector<Array>& v) {
        return wsum(jnp::take(v[0], idx, 1, jnp::IndexMode::Clip));
      },
      {x});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(jnp::take_along_axis(v[0], jnp::array({2, 0, 1, 1, 0}, Shape{5, 1}), 1));
      },
      {x});
  check_grad(
      [idx](const std::vector<Array>& v) { return wsum(jnp::at_add(v[0], {idx}, jnp::sin(v[1]))); },
      {x, rnd({4, 3}, -1, 1, 62)});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(jnp::at_set(v[0], {jnp::array({3, 1})}, v[1] * 2.0));
      },
      {x, rnd({2, 3}, -1, 1, 63)});
  check_grad(
      [](const std::vector<Array>& v) {
        return wsum(jnp::at(v[0], {1, jnp::Slice(0, 2)}));
      },
      {x});
}

TEST(Grad, Sort) {
  const Array x = rnd({3, 5}, -1, 1, 71);
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::sort(v[0])); }, {x});
  check_grad([](const std::vector<Array>& v) { return wsum(jnp::sort(v[0], 0)); }, {x});
  check_grad(
      [](const std::vector<Array>& v) {
        auto [k, val] = lax::sort_key_val(v[0], v[1], 1);
        return wsum(k) + wsum(lax::mul(val, val));
      },
      {x, rnd({3, 5}, -1, 1, 72)});
}

// ---------------------------------------------------------------- higher order, jit

TEST(Grad, SecondDerivatives) {
  const Array x = rnd({4}, -2, 2, 81);
  auto d1 = [](const Array& v) {
    return jnp::sum(grad([](const Array& u) { return jnp::sum(jnp::sin(u)); })(v));
  };
  Array g2 = grad(d1)(x);
  const auto xv = x.to_vector<double>();
  auto g2v = g2.to_vector<double>();
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_NEAR(g2v[i], -std::sin(xv[i]), 1e-12);

  auto cube = [](const Array& v) { return v * v * v; };
  auto dcube = grad(cube);
  Array s = f64({1.5}, {});
  EXPECT_NEAR(grad(dcube)(s).item<double>(), 9.0, 1e-12);
  EXPECT_NEAR(grad(grad(dcube))(s).item<double>(), 6.0, 1e-12);

  auto dtanh = grad([](const Array& v) { return jnp::tanh(v); });
  const double t = std::tanh(0.7);
  EXPECT_NEAR(grad(dtanh)(f64({0.7}, {})).item<double>(), -2 * t * (1 - t * t), 1e-12);
  // Second derivatives of a few more ops by finite differences of the first.
  check_grad(
      [](const std::vector<Array>& v) {
        return jnp::sum(
            grad([](const Array& u) { return wsum(jnp::exp(u) * jnp::log1p(u * u)); })(v[0]) *
            v[0]);
      },
      {x});
  check_grad(
      [](const std::vector<Array>& v) {
        return jnp::sum(grad([](const Array& u) { return nn::logsumexp(u, {0}); })(v[0]) * v[0]);
      },
      {x});
}

TEST(Grad, UnderJitEqualsEager) {
  auto f = [](const Array& w, const Array& x) {
    return jnp::mean(jnp::tanh(jnp::matmul(x, w)) * 0.5);
  };
  const Array w = rnd({3, 2}, -1, 1, 91), x = rnd({4, 3}, -1, 1, 92);
  auto g = grad(f);
  Array eager = g(w, x);
  Array jitted = jit([&](const Array& a, const Array& b) { return g(a, b); })(w, x);
  EXPECT_EQ(eager.to_vector<double>(), jitted.to_vector<double>());
  // Eager grad compiles once per signature.
  g(w, x);
  g(rnd({3, 2}, -1, 1, 93), x);
  EXPECT_EQ(g.compile_count(), 1);
  g(rnd({3, 5}), x);
  EXPECT_EQ(g.compile_count(), 2);
}

TEST(Grad, ValueAndGradWithAux) {
  auto f = [](const Array& x) {
    Array y = jnp::sum(x * x);
    return std::make_pair(y, std::make_pair(jnp::max(x), 3));
  };
  const Array x = f64({1, -2, 3}, {3});
  auto [out, g] = value_and_grad(f, argnums<0>, has_aux)(x);
  EXPECT_EQ(out.first.item<double>(), 14.0);
  EXPECT_EQ(out.second.first.item<double>(), 3.0);
  EXPECT_EQ(out.second.second, 3);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{2, -4, 6}));
  auto [g2, aux] = grad(f, argnums<0>, has_aux)(x);
  EXPECT_EQ(g2.to_vector<double>(), (std::vector<double>{2, -4, 6}));
  EXPECT_EQ(aux.first.item<double>(), 3.0);
  auto [v, g3] = value_and_grad([](const Array& a) { return jnp::sum(jnp::exp(a)); })(x);
  EXPECT_NEAR(v.item<double>(), std::exp(1) + std::exp(-2) + std::exp(3), 1e-12);
  EXPECT_NEAR(g3.to_vector<double>()[2], std::exp(3), 1e-12);
}

// f: R^3 -> R^2, f(x) = (x0 x1, sin(x2) + x0^2); J = [[x1, x0, 0], [2 x0, 0, cos x2]].
Array f_r3(const Array& x) {
  Array a = jnp::at(x, {0}), b = jnp::at(x, {1}), c = jnp::at(x, {2});
  return jnp::stack({a * b, jnp::sin(c) + a * a});
}

TEST(Grad, VjpAndJvp) {
  const double x0 = 0.3, x1 = -1.2, x2 = 0.8;
  const Array x = f64({x0, x1, x2}, {3});
  const double J[2][3] = {{x1, x0, 0}, {2 * x0, 0, std::cos(x2)}};
  auto [y, vjp_fn] = vjp(f_r3, x);
  EXPECT_NEAR(y.to_vector<double>()[0], x0 * x1, 1e-15);
  const std::vector<double> ct = {0.7, -1.1};
  auto [gx] = vjp_fn(f64(ct, {2}));
  for (int j = 0; j < 3; ++j)
    EXPECT_NEAR(gx.to_vector<double>()[j], ct[0] * J[0][j] + ct[1] * J[1][j], 1e-14);
  const std::vector<double> t = {0.5, 2.0, -1.5};
  auto [y2, ty] = jvp(f_r3, x, f64(t, {3}));
  EXPECT_EQ(y2.to_vector<double>(), y.to_vector<double>());
  for (int i = 0; i < 2; ++i)
    EXPECT_NEAR(ty.to_vector<double>()[i], J[i][0] * t[0] + J[i][1] * t[1] + J[i][2] * t[2], 1e-14);
  // Several primals, and jvp differentiated again: d/dx of (J(x) t)[1] = (2 t0, 0, -sin x2 t2).
  auto [p, tp] =
      jvp([](const Array& a, const Array& b) { return a * jnp::exp(b); },
          std::tuple{f64({2}, {}), f64({0.5}, {})}, std::tuple{f64({1}, {}), f64({3}, {})});
  EXPECT_NEAR(tp.item<double>(), std::exp(0.5) + 2 * std::exp(0.5) * 3, 1e-13);
  Array h = grad([&](const Array& v) { return jnp::at(jvp(f_r3, v, f64(t, {3})).second, {1}); })(x);
  EXPECT_NEAR(h.to_vector<double>()[0], 2 * t[0], 1e-14);
  EXPECT_NEAR(h.to_vector<double>()[2], -std::sin(x2) * t[2], 1e-14);
  // vjp under jit.
  Array gj = jit([](const Array& v) {
    auto [out, fn] = vjp(f_r3, v);
    return std::get<0>(fn(jnp::ones_like(out)));
  })(x);
  EXPECT_NEAR(gj.to_vector<double>()[0], J[0][0] + J[1][0], 1e-14);
}

TEST(Grad, StopGradientCuts) {
  const Array x = f64({1, 2, 3}, {3});
  Array g = grad([](const Array& v) { return jnp::sum(v * stop_gradient(v)); })(x);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{1, 2, 3}));
  Array g0 = grad([](const Array& v) { return jnp::sum(jnp::exp(stop_gradient(v * 2.0))); })(x);
  EXPECT_EQ(g0.to_vector<double>(), (std::vector<double>{0, 0, 0}));
  // Outside autodiff it is the identity.
  EXPECT_EQ(stop_gradient(x).to_vector<double>(), x.to_vector<double>());
}

TEST(Grad, CustomVjpIsHonored) {
  auto f =
      custom_vjp([](const Array& v) { return jnp::sin(v); },
                 [](const Array& v) { return std::make_pair(jnp::sin(v), std::vector<Array>{v}); },
                 [](const std::vector<Array>& res, const Array& g) {
                   return std::vector<Array>{g * 0.0 + 42.0 + res[0] * 0.0};
                 });
  const Array x = f64({0.1, 0.2}, {2});
  EXPECT_NEAR(f(x).to_vector<double>()[1], std::sin(0.2), 1e-15);
  Array g = grad([&](const Array& v) { return jnp::sum(f(v) * 2.0); })(x);
  EXPECT_EQ(g.to_vector<double>(), (std::vector<double>{42, 42}));
  // A numerically safe log1p(exp(x)) with a hand-written derivative.
  auto softplus = custom_vjp(
      [](const Array& v) { return jnp::log1p(jnp::exp(v)); },
      [](const Array& v) { return std::make_pair(jnp::log1p(jnp::exp(v)), std::vector<Array>{v}); },
      [](const std::vector<Array>& res, const Array& g) {
        return std::vector<Array>{g * nn::sigmoid(res[0])};
      });
  Array gs = grad([&](const Array& v) { return jnp::sum(softplus(v)); })(x);
  EXPECT_NEAR(gs.to_vector<double>()[0], 1 / (1 + std::exp(-0.1)), 1e-14);
}

TEST(Grad, TreesAndArgnums) {
  auto loss = [](const Params& p, const Array& x, const Array& y) {
    return jnp::mean(jnp::square(jnp::matmul(x, p.w) + p.b - y));
  };
  Params p{rnd({3, 2}, -1, 1, 101), rnd({2}, -1, 1, 102)};
  const Array x = rnd({4, 3}, -1, 1, 103), y = rnd({4, 2}, -1, 1, 104);
  Params g = grad(loss)(p, x, y);
  EXPECT_EQ(g.w.shape(), (Shape{3, 2}));
  EXPECT_EQ(g.b.shape(), (Shape{2}));
  // Against finite differences through the vector form.
  check_grad(
      [&](const std::vector<Array>& v) {
        return loss(Params{v[0], v[1]}, x, y);
      },
      {p.w, p.b});
  const auto gb = g.b.to_vector<double>();
  const std::vector<Array> gv = grad([&](const std::vector<Array>& v) {
    return loss(Params{v[0], v[1]}, x, y);
  })(std::vector<Array>{p.w, p.b});
  EXPECT_EQ(gv[1].to_vector<double>(), gb);
  auto [gp, gy] = grad(loss, argnums<0, 2>)(p, x, y);
  EXPECT_EQ(gp.b.to_vector<double>(), gb);
  EXPECT_EQ(gy.shape(), (Shape{4, 2}));
  Array gx = grad(loss, argnums<1>)(p, x, y);
  EXPECT_EQ(gx.shape(), (Shape{4, 3}));
  // The same array passed twice: each argument gets only its own uses.
  const Array a = f64({2}, {});
  auto [g0, g1] =
      grad([](const Array& u, const Array& v) { return u * v * v; }, argnums<0, 1>)(a, a);
  EXPECT_EQ(g0.item<double>(), 4.0);
  EXPECT_EQ(g1.item<double>(), 8.0);
}

TEST(Grad, Errors) {
  try {
    grad([](const Array& v) { return v * 2.0; })(f64({1, 2}, {2}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("grad requires real scalar outputs"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("f64[2]"), std::string::npos) << e.what();
  }
  // Integer inputs get zeros.
  Array gi =
      grad([](const Array& v) { return jnp::sum(jnp::astype(v, DType::F32)); })(jnp::array({1, 2}));
  EXPECT_EQ(gi.dtype(), DType::I32);
  EXPECT_EQ(gi.to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
  // An op without a VJP rule is named.
  try {
    grad([](const Array& v) { return jnp::sum(lax::cumprod(v, 0)); })(f64({1, 2}, {2}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stablehlo.reduce"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cujax

namespace cujax {
namespace {

// lax.stop_gradient is the same cut as cujax::stop_gradient: d/dx sum(sg(x) * x) = x.
TEST(Grad, LaxStopGradientCutsTheGradient) {
  auto g = grad([](const Array& x) { return numpy::sum(lax::stop_gradient(x) * x); });
  const std::vector<float> v{1.5f, -2.0f, 3.0f};
  Array x = array(HostTensor::from_vector(v, Shape{3}));
  EXPECT_EQ(g(x).to_vector<float>(), v);
}

}  // namespace
}  // namespace cujax
