// optax: optimizers step by step against their formulas evaluated here in double precision,
// schedules against their closed forms, clipping, jit against eager, the cross-entropy loss
// against log_softmax and its gradient against softmax - one_hot, and a small fit.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numbers>
#include <vector>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/optax.h"

namespace optax_test {
struct Params {
  cujax::Array w, b;
};
}  // namespace optax_test
CUJAX_REGISTER_TREE(optax_test::Params, w, b);

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using Vec = std::vector<double>;
using VecMap = std::map<std::string, Vec>;

Array f32(const Vec& v) {
  std::vector<float> f(v.begin(), v.end());
  return array(HostTensor::from_vector(f, Shape{static_cast<int64_t>(v.size())}));
}

State make_state(const VecMap& m) {
  State s;
  for (const auto& [k, v] : m) s.set(k, f32(v));
  return s;
}

Vec values(const Array& a) {
  const std::vector<float> f = jnp::astype(a, DType::F32).to_vector<float>();
  return Vec(f.begin(), f.end());
}

// |got - want| <= rtol * max(floor, |want|).
void expect_close(const Vec& got, const Vec& want, double rtol, const std::string& what,
                  double floor = 1e-3) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rtol * std::max(floor, std::abs(want[i])))
        << what << "[" << i << "]";
}

// Gradients that change from step to step (as real ones do).
VecMap grads_at(int step) {
  const double s = step + 1;
  return {{"b", {0.3 * s, -0.05 * s * s}}, {"w", {0.5 / s, -1.0 + 0.2 * s, 2.0 * std::sin(s)}}};
}

const VecMap kInitParams = {{"b", {0.1, -0.2}}, {"w", {1.0, -2.0, 0.5}}};

Array step_count(int64_t step) {
  return jnp::full({}, step, DType::I32);
}
double at_step(const optax::Schedule& s, int64_t step) {
  return s(step_count(step)).item<float>();
}

// Runs `tx` for `steps` steps from kInitParams and checks params against `reference`, which
// advances its own double-precision copy of the params given the step and the gradients.
template <class Reference>
void check_optimizer(const optax::GradientTransformation& tx, int steps, Reference reference,
                     double rtol = 2e-5) {
  State params = make_state(kInitParams);
  State opt_state = tx.init(params);
  VecMap want = kInitParams;
  for (int t = 0; t < steps; ++t) {
    const VecMap g = grads_at(t);
    auto [updates, new_state] = tx.update(make_state(g), opt_state, params);
    params = optax::apply_updates(params, updates);
    opt_state = new_state;
    reference(t, g, want);
    for (const auto& [k, v] : want)
      // Params are of order 1: f32 rounding is relative to that, also for those near zero.
      expect_close(values(params.at(k)), v, rtol, "step " + std::to_string(t) + " " + k, 1.0);
  }
}

TEST(Optax, AdamMatchesFormulaOverSteps) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  VecMap m, v;
  check_optimizer(optax::adam(lr), 6, [&](int t, const VecMap& g, VecMap& p) {
    for (const auto& [k, gk] : g) {
      m[k].resize(gk.size());
      v[k].resize(gk.size());
      for (size_t i = 0; i < gk.size(); ++i) {
        m[k][i] = b1 * m[k][i] + (1 - b1) * gk[i];
        v[k][i] = b2 * v[k][i] + (1 - b2) * gk[i] * gk[i];
        const double mh = m[k][i] / (1 - std::pow(b1, t + 1));
        const double vh = v[k][i] / (1 - std::pow(b2, t + 1));
        p[k][i] += -lr * mh / (std::sqrt(vh) + eps);
      }
    }
  });
}

TEST(Optax, AdamwDecouplesDecayAndHonoursMask) {
  const double lr = 0.05, b1 = 0.8, b2 = 0.99, eps = 1e-6, wd = 0.1;
  // Decay only the 1-d "w"; "b" keeps plain Adam.
  optax::Mask mask = [](const std::string& path, const Array&) { return path == "w"; };
  VecMap m, v;
  check_optimizer(optax::adamw(lr, b1, b2, eps, wd, mask), 5,
                  [&](int t, const VecMap& g, VecMap& p) {
                    for (const auto& [k, gk] : g) {
                      m[k].resize(gk.size());
                      v[k].resize(gk.size());
                      for (size_t i = 0; i < gk.size(); ++i) {
                        m[k][i] = b1 * m[k][i] + (1 - b1) * gk[i];
                        v[k][i] = b2 * v[k][i] + (1 - b2) * gk[i] * gk[i];
                        const double mh = m[k][i] / (1 - std::pow(b1, t + 1));
                        const double vh = v[k][i] / (1 - std::pow(b2, t + 1));
                        const double decay = k == "w" ? wd * p[k][i] : 0.0;
                        p[k][i] += -lr * (mh / (std::sqrt(vh) + eps) + decay);
                      }
                    }
                  });
}

TEST(Optax, SgdMomentumAndNesterov) {
  for (bool nesterov : {false, true}) {
    const double lr = 0.1, mu = 0.9;
    VecMap tr;
    check_optimizer(optax::sgd(lr, mu, nesterov), 5, [&](int, const VecMap& g, VecMap& p) {
      for (const auto& [k, gk] : g) {
        tr[k].resize(gk.size());
        for (size_t i = 0; i < gk.size(); ++i) {
          tr[k][i] = gk[i] + mu * tr[k][i];
          p[k][i] -= lr * (nesterov ? gk[i] + mu * tr[k][i] : tr[k][i]);
        }
      }
    });
  }
  // Without momentum: plain gradient descent and an empty state.
  EXPECT_EQ(optax::sgd(0.1).init(make_state(kInitParams)).size(), 0u);
  check_optimizer(optax::sgd(0.1), 3, [&](int, const VecMap& g, VecMap& p) {
    for (const auto& [k, gk] : g)
      for (size_t i = 0; i < gk.size(); ++i) p[k][i] -= 0.1 * gk[i];
  });
}

TEST(Optax, ScheduledLearningRateUsesTheStepCount) {
  // sgd with lr(count) = 0.1 * (count + 1): step t moves by -0.1 (t + 1) g.
  optax::Schedule lr = [](const Array& count) { return 0.1 * (count + 1); };
  check_optimizer(optax::sgd(lr), 4, [&](int t, const VecMap& g, VecMap& p) {
    for (const auto& [k, gk] : g)
      for (size_t i = 0; i < gk.size(); ++i) p[k][i] -= 0.1 * (t + 1) * gk[i];
  });
}

TEST(Optax, StatePathsFollowOptaxStructure) {
  const State params = make_state(kInitParams);
  const State s = optax::adamw(optax::linear_schedule(1, 0, 10)).init(params);
  std::vector<std::string> paths;
  for (const auto& [k, a] : s) paths.push_back(k);
  const std::vector<std::string> want = {"0.count", "0.mu.b", "0.mu.w",
                                         "0.nu.b",  "0.nu.w", "2.count"};
  EXPECT_EQ(paths, want);
  EXPECT_EQ(s.at("0.count").dtype(), DType::I32);
  EXPECT_EQ(s.at("0.mu.w").shape(), (Shape{3}));
  const State m = optax::sgd(0.1, 0.9).init(params);
  EXPECT_TRUE(m.contains("0.trace.w"));
}

TEST(Optax, AnyTreeOfArrays) {
  // A registered struct behaves as the State of its key paths.
  optax_test::Params p{f32({1, 2}), f32({3})};
  optax_test::Params g{f32({0.5, -1}), f32({2})};
  auto tx = optax::sgd(0.1, 0.5);
  State s = tx.init(p);
  EXPECT_TRUE(s.contains("0.trace.w"));
  EXPECT_TRUE(s.contains("0.trace.b"));
  auto [u, s2] = tx.update(g, s, p);
  const optax_test::Params q = optax::apply_updates(p, u);
  expect_close(values(q.w), {1 - 0.05, 2 + 0.1}, 1e-6, "w");
  expect_close(values(q.b), {3 - 0.2}, 1e-6, "b");
  // Nested containers name their leaves with keys and indices.
  std::map<std::string, std::vector<Array>> tree{{"layers", {f32({1}), f32({2})}}};
  const State flat = optax::tree_to_state(tree);
  EXPECT_TRUE(flat.contains("layers.0"));
  EXPECT_TRUE(flat.contains("layers.1"));
  EXPECT_TRUE(optax::tree_to_state(f32({1})).contains(""));
}

TEST(Optax, SchedulesMatchClosedForms) {
  const auto lin = optax::linear_schedule(1.0, 0.1, 10, 5);
  for (int64_t t : {0, 3, 5, 6, 10, 14, 15, 16, 100}) {
    const double c = std::clamp<double>(t - 5, 0, 10);
    EXPECT_NEAR(at_step(lin, t), (1.0 - 0.1) * (1 - c / 10) + 0.1, 1e-6) << "linear " << t;
  }
  const auto poly = optax::polynomial_schedule(1.0, 0.01, 2.0, 100, 5);
  // Optax's documented values: count 6 -> 0.9803, 104 -> 0.0101.
  EXPECT_NEAR(at_step(poly, 6), 0.9803, 1e-4);
  EXPECT_NEAR(at_step(poly, 104), 0.0101, 1e-4);
  EXPECT_NEAR(at_step(optax::constant_schedule(0.25), 7), 0.25, 0);

  const auto cosine = optax::cosine_decay_schedule(2.0, 20, 0.1, 1.5);
  for (int64_t t : {0, 1, 10, 19, 20, 21, 50}) {
    const double c = std::min<double>(t, 20);
    const double d = 0.5 * (1 + std::cos(std::numbers::pi * c / 20));
    EXPECT_NEAR(at_step(cosine, t), 2.0 * ((1 - 0.1) * std::pow(d, 1.5) + 0.1), 1e-6)
        << "cosine " << t;
  }

  const double init = 0.01, peak = 1.0, end = 0.05;
  const int64_t warmup = 10, decay = 50;
  const auto wc = optax::warmup_cosine_decay_schedule(init, peak, warmup, decay, end);
  auto closed = [&](int64_t t) {
    if (t < warmup) return init + (peak - init) * double(t) / warmup;
    const double c = std::min<double>(t - warmup, decay - warmup);
    const double alpha = end / peak;
    return peak *
           ((1 - alpha) * 0.5 * (1 + std::cos(std::numbers::pi * c / (decay - warmup))) + alpha);
  };
  for (int64_t t : {0, 1, 9, 10, 11, 30, 49, 50, 51, 1000})
    EXPECT_NEAR(at_step(wc, t), closed(t), 1e-6) << "warmup cosine " << t;
  EXPECT_NEAR(at_step(wc, warmup), peak, 1e-6);
  EXPECT_NEAR(at_step(wc, decay), end, 1e-6);

  EXPECT_THROW(optax::cosine_decay_schedule(1, 0), Error);
}

TEST(Optax, SchedulesUnderJit) {
  const auto wc = optax::warmup_cosine_decay_schedule(0.0, 1.0, 4, 12);
  auto f = jit([wc](const Array& count) { return wc(count); });
  for (int64_t t : {0, 2, 4, 8, 12, 20}) EXPECT_EQ(f(step_count(t)).item<float>(), at_step(wc, t));
  EXPECT_EQ(f.compile_count(), 1);
}

TEST(Optax, ClipByGlobalNorm) {
  const State g = make_state({{"a", {3, 0}}, {"b", {0, 4}}});  // global norm 5
  EXPECT_NEAR(optax::global_norm(g).item<float>(), 5.0, 1e-6);
  auto [clipped, s] = optax::clip_by_global_norm(2.0).update(g, State());
  expect_close(values(clipped.at("a")), {3 * 2.0 / 5, 0}, 1e-6, "a");
  expect_close(values(clipped.at("b")), {0, 4 * 2.0 / 5}, 1e-6, "b");
  EXPECT_NEAR(optax::global_norm(clipped).item<float>(), 2.0, 1e-6);
  auto [same, s2] = optax::clip_by_global_norm(6.0).update(g, State());
  expect_close(values(same.at("b")), {0, 4}, 0, "unclipped");
  // Under jit the trigger is a traced select.
  auto f =
      jit([](const State& u) { return optax::clip_by_global_norm(2.0).update(u, State()).first; });
  expect_close(values(f(g).at("a")), {1.2, 0}, 1e-6, "jit");
}

TEST(Optax, AddDecayedWeightsNeedsParams) {
  auto tx = optax::add_decayed_weights(0.1);
  const State g = make_state(kInitParams);
  try {
    tx.update(g, State());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add_decayed_weights"), std::string::npos);
  }
}

TEST(Optax, StepInsideJitEqualsEager) {
  auto tx = optax::chain(optax::clip_by_global_norm(1.0),
                         optax::adamw(optax::warmup_cosine_decay_schedule(0, 0.1, 2, 6)));
  auto step = [tx](const State& params, const State& opt_state, const State& grads) {
    auto [updates, new_state] = tx.update(grads, opt_state, params);
    return std::tuple<State, State, Array>(optax::apply_updates(params, updates), new_state,
                                           optax::global_norm(updates));
  };
  auto jstep = jit(step);
  State pe = make_state(kInitParams), pj = pe;
  State se = tx.init(pe), sj = se;
  for (int t = 0; t < 5; ++t) {
    const State g = make_state(grads_at(t));
    auto [p1, s1, n1] = step(pe, se, g);
    auto [p2, s2, n2] = jstep(pj, sj, g);
    pe = p1, se = s1, pj = p2, sj = s2;
    EXPECT_NEAR(n1.item<float>(), n2.item<float>(), 1e-6);
    for (const auto& [k, a] : pe) expect_close(values(pj.at(k)), values(a), 1e-6, k);
    for (const auto& [k, a] : se) expect_close(values(sj.at(k)), values(a), 1e-6, k);
  }
  EXPECT_EQ(jstep.compile_count(), 1);
  EXPECT_EQ(sj.at("1.0.count").item<int32_t>(), 5);
}

TEST(Optax, CrossEntropyAgainstLogSoftmax) {
  // (2, 3, 5) logits with a large offset: a naive exp would overflow in f32.
  std::vector<float> lv(30);
  for (size_t i = 0; i < lv.size(); ++i) lv[i] = 1000.0f + std::sin(1.7 * i) * 4;
  const Array logits = array(HostTensor::from_vector(lv, {2, 3, 5}));
  const Array labels =
      array(HostTensor::from_vector(std::vector<int32_t>{0, 4, 2, 1, 3, 0}, {2, 3}));
  const Array loss = optax::softmax_cross_entropy_with_integer_labels(logits, labels);
  ASSERT_EQ(loss.shape(), (Shape{2, 3}));
  const Vec got = values(loss);
  // -log_softmax[label], from the logits in double.
  const std::vector<int32_t> lab = labels.to_vector<int32_t>();
  for (int r = 0; r < 6; ++r) {
    double mx = -1e30, z = 0;
    for (int c = 0; c < 5; ++c) mx = std::max<double>(mx, lv[r * 5 + c]);
    for (int c = 0; c < 5; ++c) z += std::exp(lv[r * 5 + c] - mx);
    EXPECT_NEAR(got[r], std::log(z) - (lv[r * 5 + lab[r]] - mx), 1e-5) << "row " << r;
  }
  const Vec ls =
      values(-jnp::take_along_axis(nn::log_softmax(logits), jnp::expand_dims(labels, -1), -1));
  expect_close(got, ls, 1e-5, "vs log_softmax");
  // The distribution form agrees given one-hot labels.
  expect_close(values(optax::softmax_cross_entropy(logits, nn::one_hot(labels, 5))), got, 1e-5,
               "softmax_cross_entropy");

  // d sum(loss) / d logits = softmax(logits) - one_hot(labels).
  auto total = [&](const Array& x) {
    return jnp::sum(optax::softmax_cross_entropy_with_integer_labels(x, labels));
  };
  const Vec g = values(grad(total)(logits));
  const Vec want = values(nn::softmax(logits) - nn::one_hot(labels, 5));
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-6) << i;

  EXPECT_THROW(optax::softmax_cross_entropy_with_integer_labels(logits, logits), Error);
  EXPECT_THROW(
      optax::softmax_cross_entropy_with_integer_labels(logits, jnp::zeros({3}, DType::I32)), Error);
}

TEST(Optax, LinearRegressionConverges) {
  // y = X w* + b* exactly; Adam on the mean squared error recovers w* and b*.
  const int n = 32;
  std::vector<float> xv(n * 3), yv(n);
  const double w_true[3] = {1.5, -2.0, 0.5}, b_true = 0.3;
  uint32_t seed = 7;
  for (int i = 0; i < n; ++i) {
    double y = b_true;
    for (int j = 0; j < 3; ++j) {
      seed = seed * 1664525u + 1013904223u;  // well-conditioned pseudo-random inputs
      xv[i * 3 + j] = static_cast<float>((seed >> 8) / double(1u << 24) * 2 - 1);
      y += w_true[j] * xv[i * 3 + j];
    }
    yv[i] = static_cast<float>(y);
  }
  const Array x = array(HostTensor::from_vector(xv, {n, 3}));
  const Array y = array(HostTensor::from_vector(yv, {n}));
  State params;
  params.set("w", jnp::zeros({3}));
  params.set("b", jnp::zeros({}));
  auto tx = optax::adam(0.05);
  auto loss_fn = [](const State& p, const Array& xs, const Array& ys) {
    return jnp::mean(jnp::square(jnp::matmul(xs, p.at("w")) + p.at("b") - ys));
  };
  auto step = jit([tx, loss_fn](const State& p, const State& s, const Array& xs, const Array& ys) {
    auto [loss, g] = value_and_grad(loss_fn)(p, xs, ys);
    auto [u, s2] = tx.update(g, s, p);
    return std::tuple<State, State, Array>(optax::apply_updates(p, u), s2, loss);
  });
  State s = tx.init(params);
  const double first = loss_fn(params, x, y).item<float>();
  double last = first;
  for (int i = 0; i < 500; ++i) {
    auto [p2, s2, l] = step(params, s, x, y);
    params = p2, s = s2, last = l.item<float>();
  }
  EXPECT_LT(last, 1e-5 * first);
  expect_close(values(params.at("w")), {w_true[0], w_true[1], w_true[2]}, 1e-2, "w");
  EXPECT_NEAR(params.at("b").item<float>(), b_true, 1e-2);
}

}  // namespace
}  // namespace cujax
