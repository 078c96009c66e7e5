// lax control flow: results against the unrolled computation (eagerly and under jit),
// gradients against central differences in f64, errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cujax/control_flow.h"
#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/numpy.h"

namespace jnp = cujax::numpy;
namespace lax = cujax::lax;
using cujax::Array;

namespace {

Array f64(std::vector<double> v) {
  return cujax::array(v);
}

double value(const Array& a) {
  return a.item<double>();
}

// Central difference of scalar g along coordinate i of x.
double central(const std::function<double(const std::vector<double>&)>& g, std::vector<double> x,
               size_t i) {
  const double h = 1e-6;
  x[i] += h;
  const double up = g(x);
  x[i] -= 2 * h;
  return (up - g(x)) / (2 * h);
}

void expect_grad(const std::function<Array(const Array&)>& f, std::vector<double> x0) {
  const std::vector<double> g = cujax::grad(f)(f64(x0)).to_vector<double>();
  for (size_t i = 0; i < x0.size(); ++i) {
    const double fd =
        central([&](const std::vector<double>& x) { return value(f(f64(x))); }, x0, i);
    EXPECT_LT(std::abs(g[i] - fd), 1e-6 * std::max(1.0, std::abs(fd))) << "coordinate " << i;
  }
}

Array step(const Array& c, const Array& x, const Array& w) {
  return jnp::tanh(c * w + x);
}

}  // namespace

TEST(ControlFlow, CondMatchesBranchesEagerAndJit) {
  auto f = [](const Array& p, const Array& x) {
    return lax::cond(
        p, [](const Array& v) { return v * 2.0; }, [](const Array& v) { return -v; }, x);
  };
  auto jf = cujax::jit(f);
  const Array x = f64({1.5, -2});
  for (bool p : {true, false}) {
    const std::vector<double> want = p ? std::vector<double>{3, -4} : std::vector<double>{-1.5, 2};
    EXPECT_EQ(f(cujax::scalar(p), x).to_vector<double>(), want);
    EXPECT_EQ(jf(cujax::scalar(p), x).to_vector<double>(), want);
  }
}

TEST(ControlFlow, SwitchClampsIndex) {
  std::vector<std::function<Array(const Array&)>> branches{
      [](const Array& v) { return v + 1.0; }, [](const Array& v) { return v * 3.0; },
      [](const Array& v) { return jnp::sin(v); }};
  auto jf =
      cujax::jit([&](const Array& i, const Array& x) { return lax::switch_(i, branches, x); });
  const Array x = f64({0.5});
  const std::vector<double> want[] = {{1.5}, {1.5}, {std::sin(0.5)}, {std::sin(0.5)}};
  const int idx[] = {-3, 0, 2, 7};
  for (int k = 0; k < 4; ++k) {
    EXPECT_DOUBLE_EQ(lax::switch_(cujax::scalar(idx[k]), branches, x).to_vector<double>()[0],
                     want[k][0]);
    EXPECT_DOUBLE_EQ(jf(cujax::scalar(idx[k]), x).to_vector<double>()[0], want[k][0]);
  }
}

TEST(ControlFlow, LoopsMatchUnrolled) {
  const Array w = cujax::scalar(0.7, cujax::DType::F64);
  const Array xs = f64({0.1, -0.4, 0.3, 0.9, -0.2});
  auto scanned = [&](const Array& c0, const Array& xs_) {
    return lax::scan(
        [&](const Array& c, const Array& x) {
          Array n = step(c, x, w);
          return std::pair<Array, Array>(n, n * 2.0);
        },
        c0, xs_);
  };
  double c = 0.25;
  std::vector<double> ys;
  const auto xv = xs.to_vector<double>();
  for (double x : xv) {
    c = std::tanh(c * 0.7 + x);
    ys.push_back(2 * c);
  }
  const Array c0 = cujax::scalar(0.25, cujax::DType::F64);
  auto [ce, ye] = scanned(c0, xs);
  auto [cj, yj] = cujax::jit(scanned)(c0, xs);
  EXPECT_NEAR(value(ce), c, 1e-14);
  EXPECT_NEAR(value(cj), c, 1e-14);
  for (size_t i = 0; i < ys.size(); ++i) {
    EXPECT_NEAR(ye.to_vector<double>()[i], ys[i], 1e-14);
    EXPECT_NEAR(yj.to_vector<double>()[i], ys[i], 1e-14);
  }
  // fori_loop: sum of i * x for i in [2, 6); while_loop: doubling until >= 100.
  auto fori = [](const Array& x) {
    return lax::fori_loop(
        2, 6,
        [](const Array& i, const Array& acc) {
          return acc + jnp::astype(i, cujax::DType::F64) * 1.5;
        },
        x);
  };
  EXPECT_DOUBLE_EQ(value(fori(cujax::scalar(1.0, cujax::DType::F64))), 1 + 1.5 * (2 + 3 + 4 + 5));
  EXPECT_DOUBLE_EQ(value(cujax::jit(fori)(cujax::scalar(1.0, cujax::DType::F64))), 22.0);
  auto wl = [](const Array& x) {
    return lax::while_loop(
        [](const Array& v) { return lax::lt(v, cujax::scalar(100.0, cujax::DType::F64)); },
        [](const Array& v) { return v * 2.0; }, x);
  };
  EXPECT_DOUBLE_EQ(value(wl(cujax::scalar(3.0, cujax::DType::F64))), 192.0);
  EXPECT_DOUBLE_EQ(value(cujax::jit(wl)(cujax::scalar(3.0, cujax::DType::F64))), 192.0);
}

TEST(ControlFlow, GradCondSwitch) {
  expect_grad(
      [](const Array& x) {
        Array s = jnp::sum(x);
        return lax::cond(
            lax::gt(s, cujax::scalar(0.0, cujax::DType::F64)),
            [&](const Array& v) { return jnp::sum(jnp::sin(v) * x); },
            [](const Array& v) { return jnp::sum(v * v); }, x);
      },
      {0.3, 0.5});
  expect_grad(
      [](const Array& x) {
        return lax::cond(
            cujax::scalar(false), [](const Array& v) { return jnp::sum(jnp::sin(v)); },
            [](const Array& v) { return jnp::sum(v * v * v); }, x);
      },
      {0.3, -0.5});
  std::vector<std::function<Array(const Array&)>> branches{
      [](const Array& v) { return jnp::sum(jnp::exp(v)); },
      [](const Array& v) { return jnp::sum(jnp::cos(v)); }};
  expect_grad([&](const Array& x) { return lax::switch_(cujax::scalar(1), branches, x); },
              {0.2, 1.1});
}

TEST(ControlFlow, LongScanCompilesFastAndMatchesUnrolledGradient) {
  const int n = 1000;
  std::vector<double> xv(n);
  for (int i = 0; i < n; ++i) xv[i] = std::sin(0.1 * i);
  const Array xs = f64(xv);
  auto scanned = [&](const Array& w) {
    return lax::scan(
               [&](const Array& c, const Array& x) {
                 return std::pair<Array, std::tuple<>>(step(c, x, w), {});
               },
               cujax::scalar(0.0, cujax::DType::F64), xs)
        .first;
  };
  const Array w = cujax::scalar(0.9, cujax::DType::F64);
  // Trace and compile only (lower + compile), then run.
  const auto t0 = std::chrono::steady_clock::now();
  auto compiled = cujax::jit(scanned).lower(cujax::ShapeDtype{{}, cujax::DType::F64}).compile();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("scan over %d steps: traced and compiled in %.3f s\n", n, secs);
  EXPECT_LT(secs, 1.0);
  const double c = value(compiled(w));
  double ref = 0;
  for (double x : xv) ref = std::tanh(ref * 0.9 + x);
  EXPECT_NEAR(c, ref, 1e-12);
  auto unrolled = [&](const Array& w_) {
    Array cc = cujax::scalar(0.0, cujax::DType::F64);
    for (int i = 0; i < n; ++i) cc = step(cc, cujax::scalar(xv[i], cujax::DType::F64), w_);
    return cc;
  };
  EXPECT_NEAR(value(cujax::grad(scanned)(w)), value(cujax::grad(unrolled)(w)), 1e-10);
}

TEST(ControlFlow, Errors) {
  const Array x = f64({1.0, 2.0});
  try {
    lax::cond(
        cujax::scalar(true), [](const Array& v) { return v; },
        [](const Array& v) { return jnp::sum(v); }, x);
    FAIL() << "no error";
  } catch (const cujax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("false_fn and true_fn"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cujax::jit([](const Array& v) { return bool(jnp::sum(v)) ? v : -v; })(x),
               cujax::ConcretizationError);
  try {
    cujax::grad([](const Array& v) {
      return lax::while_loop(
          [](const Array& u) { return lax::lt(u, cujax::scalar(10.0, cujax::DType::F64)); },
          [](const Array& u) { return u * 2.0; }, v);
    })(cujax::scalar(1.0, cujax::DType::F64));
    FAIL() << "no error";
  } catch (const cujax::Error& e) {
    EXPECT_NE(std::string(e.what()).find("Reverse-mode differentiation does not work"),
              std::string::npos);
  }
}

namespace {

// x[k] as a scalar.
Array elem(const Array& x, int64_t k) {
  return lax::reshape(lax::slice_in_dim(x, k, k + 1, 1, 0), {});
}

// Scan with per-step outputs ys that use the scanned x: v = (w, xs...).
Array scan_ys_loss(const Array& v, bool capture_xs) {
  const Array w = elem(v, 0);
  const Array xs = lax::slice_in_dim(v, 1, v.shape()[0], 1, 0);
  auto [c, ys] = lax::scan(
      [&](const Array& c, const Array& x) {
        Array n = step(c, x, w);
        Array y = n * x + jnp::sin(x) * w;
        if (capture_xs) y = y + jnp::sum(xs * xs) * n;  // closes over the scanned array too
        return std::pair<Array, Array>(n, y);
      },
      cujax::scalar(0.3, cujax::DType::F64), xs);
  return c + jnp::sum(ys * ys);
}

Array scan_ys_unrolled(const Array& v, bool capture_xs) {
  const Array w = elem(v, 0);
  const Array xs = lax::slice_in_dim(v, 1, v.shape()[0], 1, 0);
  Array c = cujax::scalar(0.3, cujax::DType::F64);
  Array total = cujax::scalar(0.0, cujax::DType::F64);
  for (int64_t k = 1; k < v.shape()[0]; ++k) {
    const Array x = elem(v, k);
    c = step(c, x, w);
    Array y = c * x + jnp::sin(x) * w;
    if (capture_xs) y = y + jnp::sum(xs * xs) * c;
    total = total + y * y;
  }
  return c + total;
}

// fori_loop whose body closes over the differentiated x (and its elements).
Array fori_capture(const Array& x) {
  const Array a = elem(x, 0), b = elem(x, 1);
  return jnp::sum(lax::fori_loop(
      0, 4,
      [&](const Array& i, const Array& c) {
        return jnp::sin(c * a) + b * jnp::astype(i, cujax::DType::F64) + x * 0.5;
      },
      x));
}

Array fori_capture_unrolled(const Array& x) {
  const Array a = elem(x, 0), b = elem(x, 1);
  Array c = x;
  for (int i = 0; i < 4; ++i) c = jnp::sin(c * a) + b * static_cast<double>(i) + x * 0.5;
  return jnp::sum(c);
}

void expect_same_grad(const std::function<Array(const Array&)>& f,
                      const std::function<Array(const Array&)>& unrolled,
                      const std::vector<double>& x0) {
  expect_grad(f, x0);
  const std::vector<double> g = cujax::grad(f)(f64(x0)).to_vector<double>();
  const std::vector<double> u = cujax::grad(unrolled)(f64(x0)).to_vector<double>();
  ASSERT_EQ(g.size(), u.size());
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], u[i], 1e-12 * std::max(1.0, std::abs(u[i])));
}

}  // namespace

TEST(ControlFlow, GradScanWithYsOfXs) {
  const std::vector<double> v0{0.8, 0.1, -0.4, 0.3, 0.9};
  for (bool capture : {false, true}) {
    SCOPED_TRACE(capture ? "body captures xs" : "body uses x only");
    expect_same_grad([&](const Array& v) { return scan_ys_loss(v, capture); },
                     [&](const Array& v) { return scan_ys_unrolled(v, capture); }, v0);
  }
}

TEST(ControlFlow, GradForiLoopCapturingDifferentiatedValue) {
  expect_same_grad(fori_capture, fori_capture_unrolled, {0.7, -0.3, 0.4});
}

// grad of grad through loops, against central differences of the first derivative.
TEST(ControlFlow, SecondDerivativeThroughLoops) {
  auto check = [](const std::function<Array(const Array&)>& f, double x0) {
    auto d1 = [f](const Array& x) { return cujax::grad(f)(x); };
    const double d2 = value(cujax::grad(d1)(cujax::scalar(x0, cujax::DType::F64)));
    const double h = 1e-5;
    const double fd = (value(d1(cujax::scalar(x0 + h, cujax::DType::F64))) -
                       value(d1(cujax::scalar(x0 - h, cujax::DType::F64)))) /
                      (2 * h);
    EXPECT_LT(std::abs(d2 - fd), 1e-6 * std::max(1.0, std::abs(fd))) << d2 << " vs " << fd;
  };
  const Array xs = f64({0.1, -0.4, 0.3});
  check(
      [](const Array& x) {
        return lax::fori_loop(
            0, 3, [&](const Array&, const Array& c) { return jnp::sin(c * x) + c; }, x);
      },
      0.6);
  check(
      [&](const Array& w) {
        auto [c, ys] = lax::scan(
            [&](const Array& c, const Array& x) {
              Array n = step(c, x, w);
              return std::pair<Array, Array>(n, n * n);
            },
            w, xs);
        return c + jnp::sum(ys);
      },
      0.9);
}
