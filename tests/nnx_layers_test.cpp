// nnx layers and modes: train()/eval()/set_attributes and nnx::jit retracing on a mode change,
// Conv against a direct loop (every padding mode, groups, dilations, 1-3 spatial dims) and its
// gradient against finite differences, BatchNorm against hand computation in train and eval,
// GroupNorm and InstanceNorm against a loop,
// pooling against loops, value_and_grad/grad with has_aux, and the metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/nnx.h"
#include "cujax/numpy.h"
#include "cujax/random.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using nnx::VariableKind;

std::vector<double> f64(const Array& a) {
  return jnp::astype(a, DType::F64).to_vector<double>();
}

void expect_close(const std::vector<double>& x, const std::vector<double>& y, double tol) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol) << "at " << i;
}

double max_abs_diff(const Array& a, const Array& b) {
  const auto x = f64(a), y = f64(b);
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

Array normal(uint32_t seed, const Shape& shape, DType dtype = DType::F32) {
  return random::normal(random::PRNGKey(seed), shape, dtype);
}

// ---- modes ----------------------------------------------------------------------------

struct BnDropModel : nnx::Module {
  nnx::Rngs rngs;
  nnx::Linear linear;
  nnx::BatchNorm bn;
  nnx::Dropout dropout;
  explicit BnDropModel(int64_t seed = 0)
      : rngs(seed), linear(3, 4, rngs), bn(4, rngs), dropout(0.5, false, &rngs) {
    child("rngs", rngs);
    child("linear", linear);
    child("bn", bn);
    child("dropout", dropout);
  }
  Array operator()(const Array& x) { return dropout(bn(linear(x))); }
};

TEST(NnxModes, TrainEvalAndSetAttributesAsFlax) {
  BnDropModel model;
  EXPECT_FALSE(model.dropout.deterministic);
  EXPECT_FALSE(model.bn.use_running_average);
  model.eval();
  EXPECT_TRUE(model.dropout.deterministic);
  EXPECT_TRUE(model.bn.use_running_average);
  model.train();
  EXPECT_FALSE(model.dropout.deterministic);
  EXPECT_FALSE(model.bn.use_running_average);
  // A filter picks modules, as set_attributes(nnx.Dropout, deterministic=True).
  // As Flax, an attribute that no selected module has raises unless raise_if_not_found=False.
  EXPECT_NE(message_of([&] {
              nnx::set_attributes(model, {{"use_running_average", true}}, true,
                                  nnx::of_type<nnx::Dropout>());
            }).find("following attributes: use_running_average"),
            std::string::npos);
  nnx::set_attributes(model, {{"deterministic", true}, {"use_running_average", true}}, false,
                      nnx::of_type<nnx::Dropout>());
  EXPECT_TRUE(model.dropout.deterministic);
  EXPECT_FALSE(model.bn.use_running_average);
  model.set_attributes({{"rate", 0.25}, {"momentum", 0.9}});
  EXPECT_EQ(model.dropout.rate, 0.25);
  EXPECT_EQ(model.bn.momentum, 0.9);
  EXPECT_NE(message_of([&] {
              model.set_attributes({{"no_such_flag", true}});
            }).find("following attributes: no_such_flag"),
            std::string::npos);
  model.set_attributes({{"no_such_flag", true}}, false);  // raise_if_not_found=False
  EXPECT_NE(message_of([&] {
              model.set_attributes({{"deterministic", 1.5}});
            }).find("dropout.deterministic is bool, got float"),
            std::string::npos);
  const std::string attrs = nnx::static_attributes_str(model);
  EXPECT_NE(attrs.find("bn.use_running_average=false"), std::string::npos) << attrs;
  EXPECT_NE(attrs.find("dropout.deterministic=true"), std::string::npos) << attrs;
}

// The eager reference of one forward pass in the model's current mode, on a copy of its state
// (so the live model's batch statistics are left alone).
Array eager_forward(BnDropModel& model, const Array& x) {
  BnDropModel copy;
  nnx::update(copy, nnx::state(model));
  copy.set_attributes({{"deterministic", model.dropout.deterministic},
                       {"use_running_average", model.bn.use_running_average}});
  return copy(x);
}

TEST(NnxModes, JitRetracesWhenTrainEvalFlipsAndExplainsWhy) {
  BnDropModel model;
  auto forward = nnx::jit([](BnDropModel& m, const Array& x) { return m(x); });
  const Array x = normal(1, {16, 3});

  int64_t compiles = 0;
  auto call = [&] {
    const int64_t c = global_compile_count();
    Array y = forward(model, x);
    compiles += global_compile_count() - c;
    return y;
  };
  // Training: batch statistics move and dropout zeroes about half.
  const Array want_train = eager_forward(model, x);
  const Array y_train = call();
  EXPECT_LT(max_abs_diff(y_train, want_train), 1e-5);
  const State stats_after_train = nnx::state(model, VariableKind::BatchStat);
  EXPECT_GT(jnp::max(jnp::abs(stats_after_train.at("bn.mean"))).item<float>(), 0.0f);
  EXPECT_GT(jnp::sum(jnp::equal(y_train, 0.0)).item<int32_t>(), 10);

  // Evaluation: the same program would drop units and move the statistics again.
  model.eval();
  set_explain_cache_misses(true);
  testing::internal::CaptureStderr();
  const Array want_eval = eager_forward(model, x);
  const Array y_eval = call();
  const std::string log = testing::internal::GetCapturedStderr();
  set_explain_cache_misses(false);
  EXPECT_LT(max_abs_diff(y_eval, want_eval), 1e-6);
  EXPECT_GT(max_abs_diff(y_eval, y_train), 0.1);
  EXPECT_EQ(jnp::sum(jnp::equal(y_eval, 0.0)).item<int32_t>(), 0);
  for (const auto& [path, v] : nnx::state(model, VariableKind::BatchStat))
    EXPECT_EQ(max_abs_diff(v, stats_after_train.at(path)), 0.0) << path;
  EXPECT_NE(log.find("different static value of bn.use_running_average: false -> true"),
            std::string::npos)
      << log;

  // Back to training: the first program again (cached, no third compile), stats move again.
  model.train();
  const Array want_train2 = eager_forward(model, x);
  const Array y_train2 = call();
  EXPECT_LT(max_abs_diff(y_train2, want_train2), 1e-5);
  EXPECT_GT(max_abs_diff(nnx::state(model, VariableKind::BatchStat).at("bn.mean"),
                         stats_after_train.at("bn.mean")),
            0.0);
  EXPECT_EQ(compiles, 2);
}

TEST(NnxModes, ValueAndGradRetracesWhenTheModeFlips) {
  BnDropModel model;
  model.dropout.deterministic = true;
  auto loss_fn = [](BnDropModel& m, const Array& x) { return jnp::sum(jnp::square(m(x))); };
  auto grad_fn = nnx::value_and_grad(loss_fn);
  const Array x = normal(2, {8, 3});
  grad_fn(model, x);
  const State after_train = nnx::state(model, VariableKind::BatchStat);
  EXPECT_GT(jnp::max(jnp::abs(after_train.at("bn.mean"))).item<float>(), 0.0f);
  model.eval();
  const Array loss = grad_fn(model, x).first;
  for (const auto& [path, v] : nnx::state(model, VariableKind::BatchStat))
    EXPECT_EQ(max_abs_diff(v, after_train.at(path)), 0.0) << path;
  EXPECT_NEAR(loss.item<float>(), jnp::sum(jnp::square(eager_forward(model, x))).item<float>(),
              1e-4);
}

// ---- Conv -----------------------------------------------------------------------------

struct ConvRef {
  std::vector<int64_t> strides, lhs_dil, rhs_dil;
  std::vector<std::pair<int64_t, int64_t>> pads;
  int64_t groups = 1;
  bool circular = false;
};

// A direct loop over (batch, spatial..., in) inputs and (spatial..., in/groups, out) kernels.
std::vector<double> conv_loop(const std::vector<double>& x, const Shape& xs,
                              const std::vector<double>& k, const Shape& ks, const ConvRef& r,
                              Shape& out_shape) {
  const size_t n = ks.size() - 2;
  const int64_t B = xs[0], Cin = xs[n + 1], Cout = ks[n + 1], G = r.groups;
  const int64_t cin_g = Cin / G, cout_g = Cout / G;
  std::vector<int64_t> S(n), K(n), O(n);
  for (size_t d = 0; d < n; ++d) {
    S[d] = xs[d + 1];
    K[d] = ks[d];
    const int64_t sd = (S[d] - 1) * r.lhs_dil[d] + 1;
    const int64_t kd = (K[d] - 1) * r.rhs_dil[d] + 1;
    O[d] = (sd + r.pads[d].first + r.pads[d].second - kd) / r.strides[d] + 1;
  }
  out_shape = {B};
  out_shape.insert(out_shape.end(), O.begin(), O.end());
  out_shape.push_back(Cout);
  auto count = [](const std::vector<int64_t>& v) {
    int64_t c = 1;
    for (int64_t e : v) c *= e;
    return c;
  };
  auto unravel = [&](int64_t i, const std::vector<int64_t>& dims) {
    std::vector<int64_t> idx(dims.size());
    for (size_t d = dims.size(); d-- > 0;) {
      idx[d] = i % dims[d];
      i /= dims[d];
    }
    return idx;
  };
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t oi = 0; oi < count(O); ++oi) {
      const auto o = unravel(oi, O);
      for (int64_t co = 0; co < Cout; ++co) {
        double acc = 0;
        const int64_t g = co / cout_g;
        for (int64_t ki = 0; ki < count(K); ++ki) {
          const auto kk = unravel(ki, K);
          int64_t flat = b;  // input offset, row-major over (B, S..., C)
          bool inside = true;
          for (size_t d = 0; d < n && inside; ++d) {
            int64_t p = o[d] * r.strides[d] + kk[d] * r.rhs_dil[d] - r.pads[d].first;
            if (r.circular) {
              p = ((p % S[d]) + S[d]) % S[d];
            } else {
              const int64_t sd = (S[d] - 1) * r.lhs_dil[d] + 1;
              if (p < 0 || p >= sd || p % r.lhs_dil[d]) inside = false;
              p /= r.lhs_dil[d];
            }
            flat = flat * S[d] + p;
          }
          if (!inside) continue;
          for (int64_t ci = 0; ci < cin_g; ++ci) {
            const double xv = x[flat * Cin + g * cin_g + ci];
            const double kv = k[(ki * cin_g + ci) * Cout + co];
            acc += xv * kv;
          }
        }
        out.push_back(acc);
      }
    }
  return out;
}

// JAX's SAME padding: output ceil(S / stride), the excess split low-first.
std::vector<std::pair<int64_t, int64_t>> same_pads(const Shape& s, const std::vector<int64_t>& k,
                                                   const std::vector<int64_t>& stride,
                                                   const std::vector<int64_t>& rhs_dil) {
  std::vector<std::pair<int64_t, int64_t>> p;
  for (size_t d = 0; d < k.size(); ++d) {
    const int64_t out = (s[d] + stride[d] - 1) / stride[d];
    const int64_t kd = (k[d] - 1) * rhs_dil[d] + 1;
    const int64_t total = std::max<int64_t>((out - 1) * stride[d] + kd - s[d], 0);
    p.emplace_back(total / 2, total - total / 2);
  }
  return p;
}

// x padded around its spatial axes (1..) by wrapping, as CIRCULAR padding does.
Array wrap_pad(Array x, const std::vector<std::pair<int64_t, int64_t>>& pads) {
  for (size_t d = 0; d < pads.size(); ++d) {
    const int64_t axis = static_cast<int64_t>(d) + 1, n = x.shape()[axis];
    auto part = [&](int64_t a, int64_t b) {
      std::vector<int64_t> start(static_cast<size_t>(x.ndim()), 0);
      Shape limit = x.shape();
      start[axis] = a;
      limit[axis] = b;
      return lax::slice(x, start, limit);
    };
    std::vector<Array> pieces;
    if (pads[d].first > 0) pieces.push_back(part(n - pads[d].first, n));
    pieces.push_back(x);
    if (pads[d].second > 0) pieces.push_back(part(0, pads[d].second));
    x = jnp::concatenate(pieces, axis);
  }
  return x;
}

void check_conv(const nnx::ConvOptions& o, const Shape& x_shape, int64_t in, int64_t out,
                const std::vector<int64_t>& ks, const ConvRef& ref, const std::string& what) {
  nnx::Rngs rngs(3);
  nnx::ConvOptions opts = o;
  opts.bias_init = nn::initializers::normal(1.0);  // a non-zero bias is checked too
  nnx::Conv conv(in, out, ks, rngs, opts);
  Shape want_k = ks;
  want_k.push_back(in / o.feature_group_count);
  want_k.push_back(out);
  ASSERT_EQ(conv.kernel->value.shape(), want_k) << what;
  ASSERT_EQ(conv.bias->value.shape(), (Shape{out})) << what;
  const Array x = normal(7, x_shape);
  const Array y = conv(x);
  Shape shape;
  std::vector<double> want =
      conv_loop(f64(x), x_shape, f64(conv.kernel->value), want_k, ref, shape);
  const auto bias = f64(conv.bias->value);
  for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % out];
  ASSERT_EQ(y.shape(), shape) << what;
  expect_close(f64(y), want, 1e-4);
  // The same through lax.conv_general_dilated (CIRCULAR: a wrap-around pad, then VALID).
  const size_t nsp = ks.size();
  const std::string sp = nsp == 1 ? "W" : nsp == 2 ? "HW" : "DHW";
  const lax::Padding pads = ref.circular ? lax::Padding(nsp, {0, 0}) : lax::Padding(ref.pads);
  const Array y_lax = jnp::add(
      lax::conv_general_dilated(ref.circular ? wrap_pad(x, ref.pads) : x, conv.kernel->value,
                                ref.strides, pads, ref.lhs_dil, ref.rhs_dil,
                                {"N" + sp + "C", sp + "IO", "N" + sp + "C"}, ref.groups),
      conv.bias->value);
  ASSERT_EQ(y_lax.shape(), shape) << what;
  expect_close(f64(y), f64(y_lax), 1e-5);
}

TEST(NnxConv, EveryPaddingModeAgainstALoop) {
  const Shape xs = {2, 7, 6, 3};
  const std::vector<int64_t> ks = {3, 2};
  for (const std::string pad : {"VALID", "SAME", "CIRCULAR"}) {
    nnx::ConvOptions o;
    o.padding = pad;
    o.strides = {2, 1};
    ConvRef r{{2, 1}, {1, 1}, {1, 1}, {}, 1, pad == "CIRCULAR"};
    if (pad == "VALID") r.pads = {{0, 0}, {0, 0}};
    if (pad == "SAME") r.pads = same_pads({7, 6}, ks, {2, 1}, {1, 1});
    if (pad == "CIRCULAR") r.pads = {{1, 1}, {0, 1}};  // ((k-1)//2, k//2), then VALID
    check_conv(o, xs, 3, 5, ks, r, pad);
  }
  {
    nnx::ConvOptions o;
    o.padding = lax::Padding{{2, 0}, {1, 3}};
    o.kernel_dilation = {2, 1};
    check_conv(o, xs, 3, 5, ks, {{1, 1}, {1, 1}, {2, 1}, {{2, 0}, {1, 3}}, 1, false}, "explicit");
  }
  {
    nnx::ConvOptions o;
    o.padding = int64_t{1};
    o.strides = {3};  // broadcast, as Flax's int
    check_conv(o, xs, 3, 5, ks, {{3, 3}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}, 1, false}, "int");
  }
  {
    // SAME with a dilated kernel: the padding covers the dilated extent.
    nnx::ConvOptions o;
    o.kernel_dilation = {2};
    check_conv(o, xs, 3, 5, ks,
               {{1, 1}, {1, 1}, {2, 2}, same_pads({7, 6}, ks, {1, 1}, {2, 2}), 1, false},
               "SAME dilated");
  }
}

TEST(NnxConv, GroupedDilatedAndOneAndThreeSpatialDims) {
  {
    nnx::ConvOptions o;
    o.feature_group_count = 2;
    o.input_dilation = {2, 1};
    o.padding = "VALID";
    check_conv(o, {2, 5, 4, 4}, 4, 6, {3, 3}, {{1, 1}, {2, 1}, {1, 1}, {{0, 0}, {0, 0}}, 2, false},
               "grouped, input_dilation");
  }
  {
    nnx::ConvOptions o;  // depthwise: groups == in_features
    o.feature_group_count = 3;
    o.padding = "CIRCULAR";
    check_conv(o, {1, 6, 6, 3}, 3, 6, {3, 3}, {{1, 1}, {1, 1}, {1, 1}, {{1, 1}, {1, 1}}, 3, true},
               "depthwise circular");
  }
  {
    nnx::ConvOptions o;
    o.padding = "CAUSAL";
    o.kernel_dilation = {2};
    check_conv(o, {3, 9, 2}, 2, 4, {3}, {{1}, {1}, {2}, {{4, 0}}, 1, false}, "1-d causal");
  }
  {
    nnx::ConvOptions o;
    o.strides = {1, 2, 1};
    o.padding = "SAME";
    check_conv(o, {1, 4, 5, 3, 2}, 2, 3, {2, 3, 2},
               {{1, 2, 1},
                {1, 1, 1},
                {1, 1, 1},
                same_pads({4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {1, 1, 1}),
                1,
                false},
               "3-d");
  }
}

TEST(NnxConv, BatchDimsInitializerAndErrors) {
  nnx::Rngs rngs(0);
  nnx::Conv conv(4, 8, {3, 3}, rngs);
  const Array x = normal(1, {2, 3, 5, 5, 4});
  const Array y = conv(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5, 5, 8}));  // SAME by default, batch dims kept
  const Array one = conv(jnp::reshape(x, {6, 5, 5, 4}));
  EXPECT_LT(max_abs_diff(jnp::reshape(y, {6, 5, 5, 8}), one), 1e-6);
  const Array unbatched = conv(jnp::reshape(jnp::reshape(x, {6, 5, 5, 4})[0], {5, 5, 4}));
  EXPECT_LT(max_abs_diff(unbatched, jnp::reshape(one[0], {5, 5, 8})), 1e-6);
  EXPECT_EQ(nnx::count(conv), 3 * 3 * 4 * 8 + 8);
  EXPECT_EQ(f64(conv.bias->value), std::vector<double>(8, 0.0));
  // lecun_normal: variance 1 / fan_in, fan_in = 5 * 5 * 16.
  nnx::Conv big(16, 64, {5, 5}, rngs);
  const auto k = f64(big.kernel->value);
  double ss = 0;
  for (double v : k) ss += v * v;
  EXPECT_NEAR(std::sqrt(ss / k.size()), 1.0 / 20.0, 0.1 / 20.0);
  EXPECT_NE(message_of([&] {
              conv(jnp::ones({2, 5, 5, 3}));
            }).find("nnx.Conv: input f32[2,5,5,3]"),
            std::string::npos);
  nnx::ConvOptions bad;
  bad.feature_group_count = 3;
  EXPECT_NE(message_of([&] { nnx::Conv c(4, 6, {3}, rngs, bad); }).find("feature_group_count 3"),
            std::string::npos);
}

TEST(NnxConv, GradientMatchesFiniteDifferences) {
  nnx::Rngs rngs(4);
  nnx::ConvOptions o;
  o.param_dtype = DType::F64;
  o.strides = {2, 1};
  o.feature_group_count = 2;
  o.bias_init = nn::initializers::normal(1.0, DType::F64);
  nnx::Conv conv(4, 2, {3, 2}, rngs, o);
  const Array x = normal(5, {2, 5, 4, 4}, DType::F64);
  const Array w = normal(6, {2, 3, 4, 2}, DType::F64);
  auto loss_fn = [w](nnx::Conv& c, const Array& in) {
    return jnp::sum(jnp::multiply(jnp::tanh(c(in)), w));
  };
  const State grads = nnx::grad(loss_fn)(conv, x);
  const State params = nnx::state(conv, VariableKind::Param);
  for (const std::string path : {"kernel", "bias"}) {
    const auto base = f64(params.at(path));
    const auto g = f64(grads.at(path));
    ASSERT_EQ(g.size(), base.size());
    for (size_t i = 0; i < base.size(); i += std::max<size_t>(1, base.size() / 7)) {
      auto perturbed = [&](double eps) {
        std::vector<double> v = base;
        v[i] += eps;
        State s;
        s.set(path, jnp::reshape(jnp::array(v), params.at(path).shape()));
        nnx::update(conv, s);
        const double l = loss_fn(conv, x).item<double>();
        nnx::update(conv, params);
        return l;
      };
      const double fd = (perturbed(1e-6) - perturbed(-1e-6)) / 2e-6;
      EXPECT_NEAR(g[i], fd, 1e-6 + 1e-5 * std::abs(fd)) << path << "[" << i << "]";
    }
  }
}

// ---- BatchNorm ------------------------------------------------------------------------

TEST(NnxBatchNorm, TrainAndEvalAgainstHandComputation) {
  nnx::Rngs rngs(0);
  nnx::BatchNormOptions o;
  o.momentum = 0.9;
  nnx::BatchNorm bn(3, rngs, o);
  ASSERT_EQ(nnx::state(bn, VariableKind::BatchStat).size(), 2u);
  EXPECT_EQ(f64(bn.mean->value), std::vector<double>(3, 0.0));
  EXPECT_EQ(f64(bn.var->value), std::vector<double>(3, 1.0));
  bn.scale->value = jnp::array({0.5, 2.0, -1.0});
  bn.bias->value = jnp::array({0.1, -0.2, 0.3});
  const Array x = jnp::add(jnp::multiply(normal(9, {4, 5, 3}), 3.0), 1.0);
  const auto xv = f64(x);
  const std::vector<double> scale = {0.5, 2.0, -1.0}, bias = {0.1, -0.2, 0.3};
  const int rows = 20;
  std::vector<double> m(3, 0), v(3, 0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < 3; ++c) m[c] += xv[r * 3 + c] / rows;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < 3; ++c) v[c] += (xv[r * 3 + c] - m[c]) * (xv[r * 3 + c] - m[c]) / rows;
  auto normalized = [&](const std::vector<double>& mean, const std::vector<double>& var) {
    std::vector<double> y;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < 3; ++c)
        y.push_back((xv[r * 3 + c] - mean[c]) / std::sqrt(var[c] + 1e-5) * scale[c] + bias[c]);
    return y;
  };
  // Train: the batch's statistics, and the running ones moved by 1 - momentum.
  expect_close(f64(bn(x)), normalized(m, v), 1e-4);
  std::vector<double> rm(3), rv(3);
  for (int c = 0; c < 3; ++c) {
    rm[c] = 0.9 * 0 + 0.1 * m[c];
    rv[c] = 0.9 * 1 + 0.1 * v[c];
  }
  expect_close(f64(bn.mean->value), rm, 1e-5);
  expect_close(f64(bn.var->value), rv, 1e-5);
  // Eval: the running statistics, left as they are.
  bn.eval();
  expect_close(f64(bn(x)), normalized(rm, rv), 1e-4);
  expect_close(f64(bn.mean->value), rm, 1e-5);
  expect_close(f64(bn.var->value), rv, 1e-5);
  // The call's own flag wins over the attribute, as Flax's first_from.
  expect_close(f64(bn(x, false)), normalized(m, v), 1e-4);
}

TEST(NnxBatchNorm, FeatureAxisOtherThanLast) {
  nnx::Rngs rngs(0);
  nnx::BatchNormOptions o;
  o.axis = 1;
  nnx::BatchNorm bn(4, rngs, o);
  const Array x = normal(3, {6, 4, 2});
  const Array y = bn(x);
  // Each feature (axis 1) has mean 0 and variance var / (var + eps) after normalizing.
  const Array mean = jnp::mean(y, {0, 2});
  const Array var = jnp::mean(jnp::square(y), {0, 2});
  expect_close(f64(mean), std::vector<double>(4, 0.0), 1e-5);
  const auto bv = f64(jnp::var(x, {0, 2}));
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(f64(var)[c], bv[c] / (bv[c] + 1e-5), 1e-4);
  EXPECT_NE(message_of([&] {
              bn(jnp::ones({6, 3, 2}));
            }).find("num_features 4"),
            std::string::npos);
}

// ---- GroupNorm, InstanceNorm ---------------------------------------------------------

// Normalizes x (B, P, C) per example b and channel group [g * size, (g + 1) * size) over the P
// positions and the group's channels, by a loop in doubles; then scale and bias per channel.
std::vector<double> group_norm_loop(const std::vector<double>& x, int64_t B, int64_t P, int64_t C,
                                    int64_t size, double eps, const std::vector<double>& scale,
                                    const std::vector<double>& bias) {
  std::vector<double> y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t g = 0; g < C / size; ++g) {
      double sum = 0, sq = 0;
      const double n = static_cast<double>(P * size);
      for (int64_t p = 0; p < P; ++p)
        for (int64_t c = g * size; c < (g + 1) * size; ++c) sum += x[(b * P + p) * C + c];
      const double mean = sum / n;
      for (int64_t p = 0; p < P; ++p)
        for (int64_t c = g * size; c < (g + 1) * size; ++c) {
          const double d = x[(b * P + p) * C + c] - mean;
          sq += d * d;
        }
      const double inv = 1.0 / std::sqrt(sq / n + eps);
      for (int64_t p = 0; p < P; ++p)
        for (int64_t c = g * size; c < (g + 1) * size; ++c) {
          const int64_t i = (b * P + p) * C + c;
          y[i] = (x[i] - mean) * inv * scale[c] + bias[c];
        }
    }
  return y;
}

TEST(NnxGroupNorm, AgainstALoopForGroupCountsAndSizes) {
  const Array x = jnp::add(jnp::multiply(normal(11, {3, 4, 5, 6}), 2.0), 0.5);
  const auto xv = f64(x);
  const std::vector<double> scale = {0.5, 2.0, -1.0, 1.5, 0.25, 3.0};
  const std::vector<double> bias = {0.1, -0.2, 0.3, 0.0, 1.0, -1.0};
  for (int64_t groups : {1, 2, 3, 6}) {
    nnx::Rngs rngs(0);
    nnx::GroupNormOptions o;
    o.num_groups = groups;
    nnx::GroupNorm gn(6, rngs, o);
    EXPECT_EQ(gn.group_size, 6 / groups);
    ASSERT_EQ(nnx::state(gn).size(), 2u);
    EXPECT_EQ(f64(gn.scale->value), std::vector<double>(6, 1.0));  // Flax's defaults
    EXPECT_EQ(f64(gn.bias->value), std::vector<double>(6, 0.0));
    gn.scale->value = jnp::astype(jnp::array(scale), DType::F32);
    gn.bias->value = jnp::astype(jnp::array(bias), DType::F32);
    const Array y = gn(x);
    ASSERT_EQ(y.shape(), x.shape());
    EXPECT_EQ(y.dtype(), DType::F32);
    // Statistics per example over the 4 x 5 positions and the group's channels.
    expect_close(f64(y), group_norm_loop(xv, 3, 20, 6, 6 / groups, 1e-6, scale, bias), 1e-4);
  }
  // group_size instead of num_groups; the other statistics formula; another epsilon.
  nnx::Rngs rngs(0);
  nnx::GroupNormOptions by_size;
  by_size.num_groups = std::nullopt;
  by_size.group_size = 3;
  by_size.epsilon = 0.5;
  by_size.use_fast_variance = false;
  by_size.use_scale = false;
  nnx::GroupNorm gn(6, rngs, by_size);
  EXPECT_EQ(gn.num_groups, 2);
  EXPECT_EQ(gn.scale, nullptr);
  expect_close(f64(gn(x)),
               group_norm_loop(xv, 3, 20, 6, 3, 0.5, std::vector<double>(6, 1.0),
                               std::vector<double>(6, 0.0)),
               1e-4);
  // Explicit reduction axes: (positions of the first spatial axis only, and the channels) is
  // the loop over (B * 4) examples of 5 positions.
  nnx::GroupNormOptions axes;
  axes.num_groups = 2;
  axes.reduction_axes = {2, -1};
  nnx::GroupNorm per_row(6, rngs, axes);
  expect_close(f64(per_row(x)),
               group_norm_loop(xv, 12, 5, 6, 3, 1e-6, std::vector<double>(6, 1.0),
                               std::vector<double>(6, 0.0)),
               1e-4);
  nnx::GroupNormOptions bad;
  bad.num_groups = 4;
  EXPECT_NE(message_of([&] {
              nnx::GroupNorm g(6, rngs, bad);
            }).find("num_groups 4 does not divide num_features 6"),
            std::string::npos);
  bad.group_size = 2;
  EXPECT_NE(message_of([&] { nnx::GroupNorm g(6, rngs, bad); }).find("either num_groups or"),
            std::string::npos);
  axes.reduction_axes = {1, 2};
  nnx::GroupNorm no_features(6, rngs, axes);
  EXPECT_NE(message_of([&] { no_features(x); }).find("must include the last"), std::string::npos);
}

TEST(NnxInstanceNorm, AgainstALoopAndAsGroupNormOfSizeOne) {
  nnx::Rngs rngs(0);
  const Array x = jnp::add(jnp::multiply(normal(12, {2, 3, 4, 5}), 3.0), -1.0);
  nnx::InstanceNorm in(5, rngs);
  ASSERT_EQ(nnx::state(in).size(), 2u);
  const std::vector<double> scale = {0.5, 2.0, -1.0, 1.5, 0.25};
  const std::vector<double> bias = {0.1, -0.2, 0.3, 0.0, 1.0};
  in.scale->value = jnp::astype(jnp::array(scale), DType::F32);
  in.bias->value = jnp::astype(jnp::array(bias), DType::F32);
  // Each (example, channel) over the 3 x 4 positions: the loop with groups of one channel.
  const auto want = group_norm_loop(f64(x), 2, 12, 5, 1, 1e-6, scale, bias);
  expect_close(f64(in(x)), want, 1e-4);
  nnx::GroupNormOptions o;
  o.num_groups = std::nullopt;
  o.group_size = 1;
  nnx::GroupNorm gn(5, rngs, o);
  nnx::update(gn, nnx::state(in));
  expect_close(f64(gn(x)), want, 1e-4);
  // Channels first (feature_axis 1): the same numbers, transposed.
  nnx::InstanceNormOptions first;
  first.feature_axis = 1;
  nnx::InstanceNorm in1(5, rngs, first);
  nnx::update(in1, nnx::state(in));
  const Array y1 = in1(jnp::transpose(x, std::vector<int64_t>{0, 3, 1, 2}));
  expect_close(f64(jnp::transpose(y1, std::vector<int64_t>{0, 2, 3, 1})), want, 1e-4);
  first.feature_axis = 0;
  nnx::InstanceNorm in0(2, rngs, first);
  EXPECT_NE(message_of([&] { in0(x); }).find("cannot be the leading axis"), std::string::npos);
  EXPECT_NE(message_of([&] {
              in(jnp::ones({2, 3, 4}));
            }).find("num_features 5"),
            std::string::npos);
}

// ---- pooling --------------------------------------------------------------------------

enum class PoolKind { Max, Min, Avg, AvgValid };

// (B, H, W, C) pooling by loops; pads are (low, high) per spatial dim.
std::vector<double> pool_loop(const std::vector<double>& x, const Shape& s, PoolKind kind,
                              const std::vector<int64_t>& win, const std::vector<int64_t>& str,
                              const std::vector<std::pair<int64_t, int64_t>>& pads, Shape& out) {
  const int64_t B = s[0], H = s[1], W = s[2], C = s[3];
  const int64_t OH = (H + pads[0].first + pads[0].second - win[0]) / str[0] + 1;
  const int64_t OW = (W + pads[1].first + pads[1].second - win[1]) / str[1] + 1;
  out = {B, OH, OW, C};
  std::vector<double> y;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < C; ++c) {
          double mx = -INFINITY, mn = INFINITY, sum = 0;
          int64_t n = 0;
          for (int64_t i = 0; i < win[0]; ++i)
            for (int64_t j = 0; j < win[1]; ++j) {
              const int64_t h = oh * str[0] + i - pads[0].first,
                            w = ow * str[1] + j - pads[1].first;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              const double v = x[((b * H + h) * W + w) * C + c];
              mx = std::max(mx, v);
              mn = std::min(mn, v);
              sum += v;
              ++n;
            }
          switch (kind) {
            case PoolKind::Max:
              y.push_back(mx);
              break;
            case PoolKind::Min:
              y.push_back(mn);
              break;
            case PoolKind::Avg:
              y.push_back(sum / static_cast<double>(win[0] * win[1]));
              break;
            case PoolKind::AvgValid:
              y.push_back(sum / static_cast<double>(n));
              break;
          }
        }
  return y;
}

TEST(NnxPooling, MaxMinAvgAgainstLoops) {
  const Shape s = {2, 7, 5, 3};
  const Array x = normal(11, s);
  const auto xv = f64(x);
  const std::vector<int64_t> win = {3, 2};
  struct Case {
    std::vector<int64_t> strides;
    nnx::PoolPadding padding;
    std::vector<std::pair<int64_t, int64_t>> pads;
  };
  const std::vector<Case> cases = {
      {{1, 1}, std::string("VALID"), {{0, 0}, {0, 0}}},
      {{2, 2}, std::string("VALID"), {{0, 0}, {0, 0}}},
      {{2, 2}, std::string("SAME"), same_pads({7, 5}, win, {2, 2}, {1, 1})},
      {{1, 2}, lax::Padding{{1, 2}, {0, 1}}, {{1, 2}, {0, 1}}},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    Shape out;
    const std::string what = "case " + std::to_string(ci);
    const Array mx = nnx::max_pool(x, win, c.strides, c.padding);
    expect_close(f64(mx), pool_loop(xv, s, PoolKind::Max, win, c.strides, c.pads, out), 1e-6);
    ASSERT_EQ(mx.shape(), out) << what;
    expect_close(f64(nnx::min_pool(x, win, c.strides, c.padding)),
                 pool_loop(xv, s, PoolKind::Min, win, c.strides, c.pads, out), 1e-6);
    expect_close(f64(nnx::avg_pool(x, win, c.strides, c.padding)),
                 pool_loop(xv, s, PoolKind::Avg, win, c.strides, c.pads, out), 1e-5);
    expect_close(f64(nnx::avg_pool(x, win, c.strides, c.padding, false)),
                 pool_loop(xv, s, PoolKind::AvgValid, win, c.strides, c.pads, out), 1e-5);
  }
  // Without a batch dimension, and 1-d: the same windows.
  const Array one = nnx::avg_pool(jnp::reshape(x, {2, 35, 3})[0], {5}, {5});
  ASSERT_EQ(one.shape(), (Shape{7, 3}));
  EXPECT_LT(
      max_abs_diff(one, jnp::mean(jnp::reshape(jnp::reshape(x, {2, 35, 3})[0], {7, 5, 3}), 1)),
      1e-6);
  EXPECT_NE(message_of([&] {
              nnx::max_pool(jnp::ones({4, 3}), {2, 2});
            }).find("nnx.max_pool"),
            std::string::npos);
}

// ---- value_and_grad with has_aux ------------------------------------------------------

TEST(NnxTraining, ValueAndGradAndGradWithAux) {
  nnx::Rngs rngs(0);
  nnx::Linear model(3, 2, rngs);
  const Array x = normal(1, {5, 3});
  auto plain = [](nnx::Linear& m, const Array& in) { return jnp::sum(jnp::square(m(in))); };
  auto with_aux = [](nnx::Linear& m, const Array& in) {
    const Array y = m(in);
    return std::make_pair(jnp::sum(jnp::square(y)), y);
  };
  const auto [loss, grads] = nnx::value_and_grad(plain)(model, x);
  const auto [loss_aux, grads2] = nnx::value_and_grad(with_aux, has_aux)(model, x);
  const auto& [loss2, aux] = loss_aux;
  EXPECT_EQ(loss2.item<float>(), loss.item<float>());
  EXPECT_EQ(max_abs_diff(aux, model(x)), 0.0);
  for (const auto& [path, g] : grads) EXPECT_EQ(max_abs_diff(grads2.at(path), g), 0.0) << path;
  // d/dkernel sum((xW + b)^2) = 2 x^T (xW + b)
  const Array want = jnp::multiply(jnp::matmul(jnp::transpose(x), model(x)), 2.0);
  EXPECT_LT(max_abs_diff(grads.at("kernel"), want), 1e-4);
  const auto [grads3, aux3] = nnx::grad(with_aux, has_aux)(model, x);
  EXPECT_EQ(max_abs_diff(grads3.at("bias"), grads.at("bias")), 0.0);
  EXPECT_EQ(max_abs_diff(aux3, aux), 0.0);
}

// ---- metrics --------------------------------------------------------------------------

TEST(NnxMetrics, AverageAccuracyMultiMetric) {
  nnx::Average avg;
  avg.update({{"values", jnp::array({1.0, 2.0, 3.0})}});
  avg.update({{"values", jnp::array({4.0})}});
  EXPECT_FLOAT_EQ(avg.compute().item<float>(), 2.5f);
  EXPECT_NE(message_of([&] {
              avg.update({{"loss", jnp::ones({})}});
            }).find("'values'"),
            std::string::npos);

  // Logits whose argmax is known: rows 0, 2, 3 right, row 1 wrong.
  const Array logits =
      jnp::array({0.1, 0.9, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 5.0, 3.0, 1.0, 2.0}, Shape{4, 3});
  const Array labels = jnp::array(std::vector<int32_t>{1, 1, 2, 0});
  nnx::MultiMetric metrics;
  metrics.add<nnx::Accuracy>("accuracy").add<nnx::Average>("loss", "loss");
  metrics.update({{"logits", logits}, {"labels", labels}, {"loss", jnp::array({0.5})}});
  metrics.update({{"logits", jnp::array({1.0, 0.0}, Shape{1, 2})},
                  {"labels", jnp::array(std::vector<int32_t>{1})},
                  {"loss", jnp::array({1.5})}});
  auto m = metrics.compute();
  EXPECT_FLOAT_EQ(m.at("accuracy").item<float>(), 3.0f / 5.0f);
  EXPECT_FLOAT_EQ(m.at("loss").item<float>(), 1.0f);
  EXPECT_EQ(nnx::state(metrics).size(), 4u);  // accuracy.total/count, loss.total/count
  metrics.reset();
  m = metrics.compute();
  EXPECT_TRUE(std::isnan(m.at("accuracy").item<float>()));

  // Under nnx::jit the totals are state: written back after each call.
  auto step = nnx::jit([](nnx::MultiMetric& mm, const Array& lg, const Array& lb) {
    mm.update({{"logits", lg}, {"labels", lb}, {"loss", jnp::sum(lg)}});
    return jnp::sum(lg);
  });
  step(metrics, logits, labels);
  step(metrics, logits, labels);
  m = metrics.compute();
  EXPECT_FLOAT_EQ(m.at("accuracy").item<float>(), 0.75f);
  EXPECT_FLOAT_EQ(m.at("loss").item<float>(), jnp::sum(logits).item<float>());

  nnx::Accuracy binary(0.5);
  binary.update({{"logits", jnp::array({0.2, 0.7, 0.9})}, {"labels", jnp::array({0.0, 1.0, 0.0})}});
  EXPECT_FLOAT_EQ(binary.compute().item<float>(), 2.0f / 3.0f);
}

}  // namespace
}  // namespace cujax
