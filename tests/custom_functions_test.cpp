// custom_jvp and custom_vjp with pytree arguments and outputs and nondiff_argnums (JAX's
// signatures), against finite differences and hand-derived values; and under vmap inside grad
// (grad(sum(vmap(f)))) and grad inside vmap (vmap(grad(f))), against a loop of per-example
// gradients. In every function f's own ops have no derivative (stop_gradient), so only the rule
// can give the values the tests expect.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/numpy.h"
#include "cujax/vmap.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using Dict = std::map<std::string, Array>;

Array f64(std::vector<double> v) {
  const Shape s{static_cast<int64_t>(v.size())};
  return array(HostTensor::from_vector(v, s));
}
std::vector<double> host(const Array& a) {
  return jnp::astype(a, DType::F64).to_vector<double>();
}
void expect_near(const Array& a, const std::vector<double>& want, double tol,
                 const std::string& what) {
  const auto got = host(a);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " at " << i;
}

// Central differences of the scalar loss(x) with respect to every element of x (float64).
std::vector<double> finite_differences(
    const std::function<double(const std::vector<double>&)>& loss, const std::vector<double>& x,
    double h = 1e-6) {
  std::vector<double> g;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> a = x, b = x;
    a[i] += h;
    b[i] -= h;
    g.push_back((loss(a) - loss(b)) / (2 * h));
  }
  return g;
}

// A pytree-valued custom_jvp of a dict and an array:
//   out.first  = a * y                 out.second = sum(b^2) exp(y)
// Its rule is the true derivative; f itself is wrapped in stop_gradient.
auto dict_fn =
    custom_jvp([](const Dict& p, const Array& y) {
      const Array a = stop_gradient(p.at("a")), b = stop_gradient(p.at("b"));
      const Array z = stop_gradient(y);
      return std::make_pair(a * z, jnp::sum(b * b) * jnp::exp(z));
    }).defjvp([](const std::tuple<Dict, Array>& primals, const std::tuple<Dict, Array>& tangents) {
      const auto& [p, y] = primals;
      const auto& [tp, ty] = tangents;
      const Array &a = p.at("a"), &b = p.at("b");
      const Array s = jnp::sum(b * b);
      const auto out = std::make_pair(a * y, s * jnp::exp(y));
      const auto tangent =
          std::make_pair(tp.at("a") * y + a * ty,
                         2.0 * jnp::sum(b * tp.at("b")) * jnp::exp(y) + s * jnp::exp(y) * ty);
      return std::make_pair(out, tangent);
    });

double dict_loss_host(const std::vector<double>& a, const std::vector<double>& b,
                      const std::vector<double>& y) {
  double s = 0, l = 0;
  for (double v : b) s += v * v;
  for (size_t i = 0; i < y.size(); ++i) l += a[i] * y[i] * a[i] * y[i] + s * std::exp(y[i]);
  return l;
}

TEST(CustomFunctions, PytreeCustomJvpAgainstFiniteDifferences) {
  const std::vector<double> av = {0.5, -1.5}, bv = {0.3, 0.2, -0.1}, yv = {0.25, -0.75};
  const Dict p = {{"a", f64(av)}, {"b", f64(bv)}};
  const Array y = f64(yv);
  auto loss = [](const Dict& q, const Array& z) {
    const auto [u, v] = dict_fn(q, z);
    return jnp::sum(u * u) + jnp::sum(v);
  };
  const auto [gp, gy] = grad(loss, argnums<0, 1>)(p, y);
  expect_near(gp.at("a"),
              finite_differences(
                  [&](const std::vector<double>& a) { return dict_loss_host(a, bv, yv); }, av),
              1e-6, "d/da");
  expect_near(gp.at("b"),
              finite_differences(
                  [&](const std::vector<double>& b) { return dict_loss_host(av, b, yv); }, bv),
              1e-6, "d/db");
  expect_near(gy,
              finite_differences(
                  [&](const std::vector<double>& z) { return dict_loss_host(av, bv, z); }, yv),
              1e-6, "d/dy");
  // jvp gives the rule's tangents, of the output's structure.
  const Dict tp = {{"a", f64({1.0, 0.0})}, {"b", f64({0.0, 0.0, 1.0})}};
  const auto [out, tout] =
      jvp([](const Dict& q, const Array& z) { return dict_fn(q, z); },
          std::tuple<Dict, Array>(p, y), std::tuple<Dict, Array>(tp, f64({0.0, 0.0})));
  expect_near(tout.first, {yv[0], 0.0}, 1e-12, "tangent.first");
  expect_near(tout.second, {2 * bv[2] * std::exp(yv[0]), 2 * bv[2] * std::exp(yv[1])}, 1e-12,
              "tangent.second");
  // Eagerly, f.
  expect_near(dict_fn(p, y).first, {av[0] * yv[0], av[1] * yv[1]}, 1e-15, "value");
}

// JAX's nondiff_argnums example shape: f(scale, x) = scale sin(x) with a non-array scale passed
// to the rule first.
auto scaled_sin =
    custom_jvp([](double scale,
                  const Array& x) { return jnp::multiply(jnp::sin(stop_gradient(x)), scale); },
               nondiff_argnums<0>)
        .defjvp(
            [](double scale, const std::tuple<Array>& primals, const std::tuple<Array>& tangents) {
              const Array& x = std::get<0>(primals);
              return std::make_pair(jnp::multiply(jnp::sin(x), scale),
                                    jnp::multiply(jnp::cos(x), scale) * std::get<0>(tangents));
            });

TEST(CustomFunctions, NondiffArgnumsOfCustomJvp) {
  const std::vector<double> xv = {0.3, -1.2, 2.0};
  const Array x = f64(xv);
  const Array g = grad([](const Array& v) { return jnp::sum(scaled_sin(2.5, v)); })(x);
  auto host_loss = [](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += 2.5 * std::sin(e);
    return s;
  };
  expect_near(g, finite_differences(host_loss, xv), 1e-7, "d/dx");
  // Second derivative through the rule: -2.5 sin(x).
  const Array h = grad([](const Array& v) {
    return jnp::sum(grad([](const Array& w) { return jnp::sum(scaled_sin(2.5, w)); })(v));
  })(x);
  expect_near(h, {-2.5 * std::sin(xv[0]), -2.5 * std::sin(xv[1]), -2.5 * std::sin(xv[2])}, 1e-12,
              "d2/dx2");
}

// JAX's clip_gradient: identity forward, the cotangent clipped to [lo, hi] with lo and hi
// nondiff arguments. Within the bounds the gradient is the finite-difference one (1 per unit
// cotangent); outside, the bound.
auto clip_gradient =
    custom_vjp([](double lo, double hi, const Array& x) { return x; }, nondiff_argnums<0, 1>)
        .defvjp(
            [](double, double, const Array& x) { return std::make_pair(x, std::vector<Array>{}); },
            [](double lo, double hi, const std::vector<Array>&, const Array& g) {
              return std::make_tuple(jnp::clip(g, lo, hi));
            });

TEST(CustomFunctions, ClipGradientWithNondiffBounds) {
  const Array x = f64({0.5, -2.0, 3.0});
  const Array weights = f64({0.1, 4.0, -3.0});
  const Array g =
      grad([&](const Array& v) { return jnp::sum(clip_gradient(-1.0, 1.0, v) * weights); })(x);
  // d/dx of sum(w x) is w: 0.1 unclipped (as finite differences give), 4 and -3 clipped.
  expect_near(g, {0.1, 1.0, -1.0}, 1e-15, "clipped");
  // Eagerly the identity.
  expect_near(clip_gradient(-1.0, 1.0, x), {0.5, -2.0, 3.0}, 0, "value");
}

// A custom_vjp of a list returning a tuple, residuals a dict:
//   f([u, v]) = (u v, sin(u))   (elementwise)
auto list_fn = custom_vjp([](const std::vector<Array>& x) {
                 return std::make_tuple(stop_gradient(x[0] * x[1]), stop_gradient(jnp::sin(x[0])));
               })
                   .defvjp(
                       [](const std::vector<Array>& x) {
                         const Dict res = {{"u", x[0]}, {"v", x[1]}};
                         return std::make_pair(std::make_tuple(x[0] * x[1], jnp::sin(x[0])), res);
                       },
                       [](const Dict& res, const std::tuple<Array, Array>& g) {
                         const auto& [g0, g1] = g;
                         return std::make_tuple(std::vector<Array>{
                             g0 * res.at("v") + g1 * jnp::cos(res.at("u")), g0 * res.at("u")});
                       });

TEST(CustomFunctions, PytreeCustomVjpAgainstFiniteDifferences) {
  const std::vector<double> uv = {0.4, -0.9}, vv = {1.5, 0.25};
  auto loss = [](const std::vector<Array>& x) {
    const auto [p, q] = list_fn(x);
    return jnp::sum(p * p) + jnp::sum(q);
  };
  auto host_loss = [](const std::vector<double>& u, const std::vector<double>& v) {
    double l = 0;
    for (size_t i = 0; i < u.size(); ++i) l += u[i] * v[i] * u[i] * v[i] + std::sin(u[i]);
    return l;
  };
  const std::vector<Array> g = grad(loss)(std::vector<Array>{f64(uv), f64(vv)});
  ASSERT_EQ(g.size(), 2u);
  expect_near(
      g[0], finite_differences([&](const std::vector<double>& u) { return host_loss(u, vv); }, uv),
      1e-6, "d/du");
  expect_near(
      g[1], finite_differences([&](const std::vector<double>& v) { return host_loss(uv, v); }, vv),
      1e-6, "d/dv");
}

// softplus with a rule, and a shared weight: f(x, w) = log(1 + exp(w x)), d/dx = w s, d/dw = x s
// with s = sigmoid(w x).
auto softplus_jvp =
    custom_jvp([](const Array& x, const Array& w) {
      return stop_gradient(jnp::log1p(jnp::exp(w * x)));
    }).defjvp([](const std::tuple<Array, Array>& p, const std::tuple<Array, Array>& t) {
      const auto& [x, w] = p;
      const auto& [tx, tw] = t;
      const Array s = 1.0 / (1.0 + jnp::exp(-(w * x)));
      return std::make_pair(jnp::log1p(jnp::exp(w * x)), s * (w * tx + x * tw));
    });
auto softplus_vjp =
    custom_vjp(
        [](const Array& x, const Array& w) { return stop_gradient(jnp::log1p(jnp::exp(w * x))); })
        .defvjp(
            [](const Array& x, const Array& w) {
              return std::make_pair(jnp::log1p(jnp::exp(w * x)), std::vector<Array>{x, w});
            },
            [](const std::vector<Array>& r, const Array& g) {
              const Array s = 1.0 / (1.0 + jnp::exp(-(r[1] * r[0])));
              return std::make_tuple(g * s * r[1], g * s * r[0]);
            });

double softplus_host(double x, double w) {
  return std::log1p(std::exp(w * x));
}

// Per-example gradients of sum(f(x_i, w)) for rows x_i of xs: grad(sum(vmap(f))) and
// vmap(grad(f)) against a loop of per-example grads and finite differences.
template <class Fn>
void check_batched(const Fn& fn, const std::string& what) {
  const std::vector<std::vector<double>> rows = {{0.5, -1.0}, {2.0, 0.25}, {-0.75, 1.5}};
  const std::vector<double> wv = {0.8, -1.3};
  std::vector<double> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  const Array xs = jnp::reshape(f64(flat), {3, 2});
  const Array w = f64(wv);
  auto per_example = [fn](const Array& x, const Array& ww) { return jnp::sum(fn(x, ww)); };
  // Loop of per-example grads.
  std::vector<double> loop_x, loop_w(2, 0.0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto [gx, gw] = grad(per_example, argnums<0, 1>)(f64(rows[i]), w);
    for (double v : host(gx)) loop_x.push_back(v);
    const auto gwv = host(gw);
    for (size_t j = 0; j < 2; ++j) loop_w[j] += gwv[j];
  }
  // Finite differences of the host function.
  std::vector<double> fd_x = finite_differences(
      [&](const std::vector<double>& x) {
        double l = 0;
        for (size_t i = 0; i < x.size(); ++i) l += softplus_host(x[i], wv[i % 2]);
        return l;
      },
      flat);
  std::vector<double> fd_w = finite_differences(
      [&](const std::vector<double>& ww) {
        double l = 0;
        for (size_t i = 0; i < flat.size(); ++i) l += softplus_host(flat[i], ww[i % 2]);
        return l;
      },
      wv);
  for (size_t i = 0; i < loop_x.size(); ++i) EXPECT_NEAR(loop_x[i], fd_x[i], 1e-6) << what;
  // grad of the sum of the vmapped function (w shared: not mapped).
  auto total = [fn](const Array& x, const Array& ww) {
    return jnp::sum(
        vmap([fn](const Array& a, const Array& b) { return fn(a, b); }, {0, not_mapped})(x, ww));
  };
  const auto [gxs, gw] = grad(total, argnums<0, 1>)(xs, w);
  expect_near(gxs, loop_x, 1e-12, what + ": grad(sum(vmap(f))) d/dx");
  expect_near(gw, loop_w, 1e-12, what + ": grad(sum(vmap(f))) d/dw");
  expect_near(gw, fd_w, 1e-6, what + ": against finite differences");
  // The same under jit, and with w mapped too (one weight row per example).
  const Array gj =
      jit([total](const Array& x, const Array& ww) { return grad(total)(x, ww); })(xs, w);
  expect_near(gj, loop_x, 1e-12, what + ": under jit");
  const Array ws = jnp::stack({w, w, w});
  const Array gws =
      grad([fn](const Array& ww, const Array& x) { return jnp::sum(vmap(fn)(x, ww)); })(ws, xs);
  std::vector<double> want_ws;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Array gw_i = grad(per_example, argnums<1>)(f64(rows[i]), w);
    for (double v : host(gw_i)) want_ws.push_back(v);
  }
  expect_near(gws, want_ws, 1e-12, what + ": mapped weights");
  // vmap of grad.
  const Array vg = vmap(grad(per_example), {0, not_mapped})(xs, w);
  expect_near(vg, loop_x, 1e-12, what + ": vmap(grad(f))");
}

TEST(CustomFunctions, GradOfVmapAndVmapOfGradOfCustomJvp) {
  check_batched(softplus_jvp, "custom_jvp");
}

TEST(CustomFunctions, GradOfVmapAndVmapOfGradOfCustomVjp) {
  check_batched(softplus_vjp, "custom_vjp");
}

// A custom function under vmap that closes over a mapped value cannot be batched: a clear error.
TEST(CustomFunctions, VmapOfACustomFunctionClosingOverAMappedValueIsAnError) {
  auto loss = [](const Array& xs, const Array& ys) {
    return jnp::sum(vmap([](const Array& x, const Array& y) {
      auto f = custom_jvp([y](const Array& v) {
                 return v * y;
               }).defjvp([y](const std::vector<Array>& p, const std::vector<Array>& t) {
        return std::make_pair(p[0] * y, t[0] * y);
      });
      return f(x);
    })(xs, ys));
  };
  try {
    (void)grad(loss)(f64({1.0, 2.0}), f64({3.0, 4.0}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closes over a mapped"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cujax
