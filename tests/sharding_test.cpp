// Sharding API, device_put, and jit of sharded arguments: every partitioned result is checked
// against the same function on one device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/models/lm.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "cujax/runtime/spmd.h"
#include "cujax/sharding.h"
#include "test_models.h"

using namespace cujax;
namespace np = cujax::numpy;

namespace {

constexpr int kDevices = 8;

class Sharding8 : public ::testing::Test {
 protected:
  void SetUp() override { runtime::set_num_cpu_devices(kDevices); }
};

Array random_array(const Shape& shape, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(num_elements(shape));
  for (auto& x : v) x = dist(gen);
  return array(v, shape);
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "no error, expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

void expect_near(const Array& got, const Array& want, double rel) {
  const auto g = got.to_vector<float>(), w = want.to_vector<float>();
  ASSERT_EQ(got.shape(), want.shape());
  double scale = 0;
  for (float x : w) scale = std::max(scale, std::abs(static_cast<double>(x)));
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], w[i], rel * std::max(1.0, scale)) << "element " << i;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_F(Sharding8, MeshAndSpecStrings) {
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  EXPECT_EQ(mesh.str(), "Mesh('data': 4, 'model': 2)");
  EXPECT_EQ(P("data", std::nullopt).str(), "PartitionSpec('data', None)");
  EXPECT_EQ(P(std::vector<std::string>{"data", "model"}).str(), "PartitionSpec(('data', 'model'))");
  const Sharding s = NamedSharding(mesh, P("data", std::nullopt));
  EXPECT_EQ(s.str(),
            "NamedSharding(mesh=Mesh('data': 4, 'model': 2), spec=PartitionSpec('data', None))");
  // As JAX prints them (jax 0.4.30+, iota tile assignments).
  EXPECT_EQ(s.hlo({8, 6}).str(), "{devices=[4,1,2]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(NamedSharding(mesh, P(std::nullopt, "model")).hlo({8, 6}).str(),
            "{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(NamedSharding(mesh, P("data", "model")).hlo({8, 6}).str(), "{devices=[4,2]<=[8]}");
  EXPECT_EQ(NamedSharding(mesh, P()).hlo({8, 6}).str(), "{replicated}");
  EXPECT_EQ(NamedSharding(make_mesh({8}, {"data"}), P("data")).hlo({16, 3}).str(),
            "{devices=[8,1]<=[8]}");
  EXPECT_EQ(NamedSharding(mesh, P("model", "data")).hlo({8, 8}).str(),
            "{devices=[2,4]<=[4,2]T(1,0)}");
  // Parsing gives the same tiles back.
  for (const std::string t : {"{devices=[1,2,4]<=[4,2]T(1,0) last_tile_dim_replicate}",
                              "{devices=[4,2]<=[8]}", "{devices=[2,4]0,2,4,6,1,3,5,7}"}) {
    const HloSharding h = HloSharding::parse(t, 2, 8);
    EXPECT_EQ(HloSharding::parse(h.str(), 2, 8), h) << t;
  }
  EXPECT_EQ(SingleDeviceSharding(3).str(), "SingleDeviceSharding(device=CpuDevice(id=3))");
}

// JAX's None in a PartitionSpec: std::nullopt, none, nullptr, a null const char* or an empty
// optional all mean "this dimension is not partitioned".
TEST_F(Sharding8, NoneEntriesInSpecs) {
  const P want("data", std::nullopt);
  EXPECT_EQ(P("data", nullptr), want);
  EXPECT_EQ(P("data", none), want);
  const char* no_axis = nullptr;
  EXPECT_EQ(P("data", no_axis), want);
  EXPECT_EQ(P(std::optional<std::string>("data"), std::optional<std::string>()), want);
  EXPECT_EQ(P(nullptr, "model").str(), "PartitionSpec(None, 'model')");
  EXPECT_EQ(P(nullptr, "model"), P(std::nullopt, "model"));
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  EXPECT_EQ(NamedSharding(mesh, P("data", nullptr)).hlo({8, 6}).str(),
            NamedSharding(mesh, P("data", std::nullopt)).hlo({8, 6}).str());
}

TEST_F(Sharding8, ShardIndexMath) {
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  const Sharding s = NamedSharding(mesh, P(std::nullopt, "model"));
  // Partition 5 is mesh position (2, 1): column tile 1, rows whole.
  const auto idx = s.shard_index({8, 6}, 5);
  EXPECT_EQ(idx[0], (std::pair<int64_t, int64_t>{0, 8}));
  EXPECT_EQ(idx[1], (std::pair<int64_t, int64_t>{3, 6}));
  const auto idx2 = NamedSharding(mesh, P("model", "data")).shard_index({8, 8}, 5);
  EXPECT_EQ(idx2[0], (std::pair<int64_t, int64_t>{4, 8}));  // model index 1
  EXPECT_EQ(idx2[1], (std::pair<int64_t, int64_t>{4, 6}));  // data index 2
}

TEST_F(Sharding8, Errors) {
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  expect_error([&] { NamedSharding(mesh, P("batch")); }, "unknown mesh axis 'batch'");
  expect_error([&] { NamedSharding(mesh, P("data", "data")); }, "'data' is used twice");
  expect_error(
      [&] {
        NamedSharding(mesh, P("data")).hlo({6, 2});
      },
      "dimension 0 of an array of shape [6,2] has size 6, not divisible by mesh axes "
      "'data' (size 4)");
  expect_error(
      [&] {
        NamedSharding(mesh, P("data", "model", std::nullopt)).hlo({8, 2});
      },
      "3 entries");
  expect_error([&] { make_mesh({16}, {"x"}); }, "needs 16 devices, but there are 8");
}

TEST_F(Sharding8, DevicePutAndShards) {
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  const Array x = random_array({8, 6}, 1);
  const Array y = device_put(x, NamedSharding(mesh, P("data", "model")));
  EXPECT_EQ(y.devices().size(), 8u);
  EXPECT_EQ(y.sharding(),
            "NamedSharding(mesh=Mesh('data': 4, 'model': 2), spec=PartitionSpec('data', "
            "'model'))");
  const auto shards = addressable_shards(y);
  ASSERT_EQ(shards.size(), 8u);
  const auto xv = x.to_vector<float>();
  for (const auto& s : shards) {
    EXPECT_EQ(s.data.shape(), (Shape{2, 3}));
    const auto v = s.data.to_vector<float>();
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(v[r * 3 + c], xv[(s.index[0].first + r) * 6 + s.index[1].first + c]);
  }
  EXPECT_EQ(y.to_vector<float>(), xv);  // assembled
  // Eager ops run on the assembled value.
  expect_near(np::exp(y), np::exp(x), 0);
}

TEST_F(Sharding8, JitElementwiseAndDotDataParallel) {
  const Mesh mesh = make_mesh({8}, {"data"});
  const Array x = random_array({16, 4}, 2), w = random_array({4, 3}, 3);
  auto f = [](const Array& x, const Array& w) { return np::tanh(np::matmul(x, w)) * 2.0f + 1.0f; };
  const Array want = jit(f)(x, w);
  auto jf = jit(f);
  const Array xs = device_put(x, NamedSharding(mesh, P("data", std::nullopt)));
  const Array got = jf(xs, w);
  expect_near(got, want, 1e-6);
  EXPECT_EQ(got.sharding(), "NamedSharding(mesh=Mesh('data': 8), spec=PartitionSpec('data'))");
  EXPECT_EQ(addressable_shards(got)[3].data.shape(), (Shape{2, 3}));
  const std::string lowered = jf.lower(ShapeDtype{{16, 4}}, ShapeDtype{{4, 3}}).as_text();
  EXPECT_EQ(lowered.find("mhlo.sharding"), std::string::npos);  // abstract args: unsharded
}

TEST_F(Sharding8, GradientIsAllReducedAcrossData) {
  const Mesh mesh = make_mesh({8}, {"data"});
  const Array x = random_array({16, 4}, 4), w = random_array({4, 3}, 5);
  auto loss = [](const Array& w, const Array& x) { return np::sum(np::tanh(np::matmul(x, w))); };
  auto g = jit([&](const Array& w, const Array& x) { return grad(loss)(w, x); });
  const Array want = g(w, x);
  const Array got = g(w, device_put(x, NamedSharding(mesh, P("data"))));
  expect_near(got, want, 1e-5);
  EXPECT_EQ(got.sharding(), "NamedSharding(mesh=Mesh('data': 8), spec=PartitionSpec())");
}

TEST_F(Sharding8, LoweredAndCompiledText) {
  const Mesh mesh = make_mesh({8}, {"data"});
  JitOptions o;
  o.in_shardings = {NamedSharding(mesh, P("data")), std::nullopt};
  auto f = jit([](const Array& x, const Array& w) { return np::sum(np::matmul(x, w), 0); }, o);
  auto lowered = f.lower(ShapeDtype{{16, 4}}, ShapeDtype{{4, 3}});
  const std::string text = lowered.as_text();
  EXPECT_NE(text.find("mhlo.num_partitions = 8"), std::string::npos) << text;
  EXPECT_NE(text.find("mhlo.sharding = \"{devices=[8,1]<=[8]}\""), std::string::npos) << text;
  EXPECT_NE(text.find("mhlo.sharding = \"{replicated}\""), std::string::npos) << text;
  const std::string compiled = lowered.compile().as_text();
  // Rows split: a local matmul, a local sum, then one all_reduce for the sum over rows.
  EXPECT_EQ(count(compiled, "stablehlo.all_reduce"), 1u) << compiled;
  EXPECT_EQ(count(compiled, "stablehlo.all_gather"), 0u) << compiled;
  EXPECT_NE(compiled.find("tensor<2x4xf32>"), std::string::npos) << compiled;
  const Array x = random_array({16, 4}, 6), w = random_array({4, 3}, 7);
  expect_near(lowered.compile()(x, w), np::sum(np::matmul(x, w), 0), 1e-5);
}

namespace {

data::Batch random_batch(uint32_t seed, int64_t b, int64_t t, int64_t vocab) {
  Array window = random::randint(random::PRNGKey(seed), {b, t + 1}, 0, vocab);
  return {lax::slice_in_dim(window, 0, t, 1, 1), lax::slice_in_dim(window, 1, t + 1, 1, 1)};
}

// Three training steps; `place` shards (or not) the params and each batch.
State train(const std::function<State(const State&)>& place_params,
            const std::function<data::Batch(const data::Batch&)>& place_batch,
            std::vector<float>* losses, int64_t* compiles, size_t* all_reduces,
            size_t* all_gathers = nullptr) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(32, 8, 16), rngs);
  // SGD, not Adam: Adam turns the rounding noise of a zero gradient (attention key biases have
  // one) into full-size steps, which would compare noise.
  auto tx = optax::sgd(0.1, 0.9);
  State params = place_params(nnx::state(model, nnx::VariableKind::Param));
  State opt_state = tx.init(params);
  auto step = models::make_train_step(model, tx);
  const std::string text =
      step.lower(params, opt_state, place_batch(random_batch(10, 8, 8, 32))).compile().as_text();
  *all_reduces = count(text, "stablehlo.all_reduce");
  if (all_gathers) *all_gathers = count(text, "stablehlo.all_gather");
  for (int i = 0; i < 3; ++i) {
    auto [p, s, metrics] = step(params, opt_state, place_batch(random_batch(10 + i, 8, 8, 32)));
    params = p;
    opt_state = s;
    losses->push_back(metrics.at("loss").item<float>());
  }
  // Tensor parallel: the first call's optimizer state is unsharded (tx.init ran eagerly), the
  // next one's is sharded like the params, so it compiles once more.
  EXPECT_LE(step.compile_count(), 2);
  *compiles = step.compile_count();
  return params;
}

State unchanged(const State& s) {
  return s;
}
data::Batch unchanged_batch(const data::Batch& b) {
  return b;
}

void expect_same_params(const State& got, const State& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [path, w] : want) {
    SCOPED_TRACE(path);
    expect_near(got.at(path), w, rel);
  }
}

}  // namespace

TEST_F(Sharding8, DataParallelTrainStepMatchesOneDevice) {
  std::vector<float> want_loss, got_loss;
  int64_t compiles = 0;
  size_t all_reduces = 0, all_gathers = 0;
  const State want = train(unchanged, unchanged_batch, &want_loss, &compiles, &all_reduces);
  const Mesh mesh = make_mesh({8}, {"data"});
  const Sharding rows = NamedSharding(mesh, P("data", std::nullopt));
  const State got = train(
      unchanged,
      [&](const data::Batch& b) {
        return data::Batch{device_put(b.inputs, rows), device_put(b.targets, rows)};
      },
      &got_loss, &compiles, &all_reduces, &all_gathers);
  for (size_t i = 0; i < want_loss.size(); ++i) EXPECT_NEAR(got_loss[i], want_loss[i], 1e-5);
  expect_same_params(got, want, 1e-5);
  EXPECT_EQ(compiles, 1);
  EXPECT_GT(all_reduces, 10u);  // at least the gradients' sums over the batch
  // Only the embedding's gather and scatter and the loss's gather of the targets, which have no
  // partitioner rule, gather their operands.
  EXPECT_EQ(all_gathers, 6u);
}

TEST_F(Sharding8, TensorParallelTrainStepMatchesOneDevice) {
  std::vector<float> want_loss, got_loss;
  int64_t compiles = 0;
  size_t all_reduces = 0, all_gathers = 0;
  const State want = train(unchanged, unchanged_batch, &want_loss, &compiles, &all_reduces);
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  const Sharding rows = NamedSharding(mesh, P("data", std::nullopt));
  auto ends_with = [](const std::string& s, const std::string& e) {
    return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
  };
  const State got = train(
      [&](const State& params) {
        State out;
        for (const auto& [path, v] : params) {
          std::optional<PartitionSpec> spec;
          if (ends_with(path, "mlp.fc.kernel")) spec = P(std::nullopt, "model");
          if (ends_with(path, "mlp.fc.bias")) spec = P("model");
          if (ends_with(path, "mlp.proj.kernel")) spec = P("model", std::nullopt);
          for (const char* qkv : {"attn.query.kernel", "attn.key.kernel", "attn.value.kernel"})
            if (ends_with(path, qkv)) spec = P(std::nullopt, "model", std::nullopt);
          if (ends_with(path, "attn.out.kernel")) spec = P("model", std::nullopt, std::nullopt);
          out.set(path, spec ? device_put(v, NamedSharding(mesh, *spec)) : v);
        }
        return out;
      },
      [&](const data::Batch& b) {
        return data::Batch{device_put(b.inputs, rows), device_put(b.targets, rows)};
      },
      &got_loss, &compiles, &all_reduces, &all_gathers);
  for (size_t i = 0; i < want_loss.size(); ++i) EXPECT_NEAR(got_loss[i], want_loss[i], 1e-5);
  expect_same_params(got, want, 1e-5);
  EXPECT_GT(all_reduces, 10u);
  // The heads and the MLP's hidden units stay split over 'model' from the kernels through the
  // attention and the activations (reshapes of the heads, biases sliced, not gathered): only
  // the data-parallel step's 6 all_gathers remain.
  EXPECT_EQ(all_gathers, 6u);
  EXPECT_EQ(got.at("blocks.0.mlp.fc.kernel").sharding(),
            "NamedSharding(mesh=Mesh('data': 4, 'model': 2), spec=PartitionSpec(None, 'model'))");
}

TEST_F(Sharding8, OpFamiliesMatchOneDevice) {
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  const Array x = random_array({8, 6}, 8), y = random_array({8, 6}, 9);
  auto f = [](const Array& x, const Array& y) {
    Array t = np::transpose(x * y + 1.0f);  // element-wise, transpose
    Array r = np::reshape(x, {8, 2, 3});    // reshape of the sharded rows
    Array m = np::max(r, {2}) + np::reshape(np::sum(t, {0}), {8, 1});  // reduces, broadcast
    Array c = np::cumsum(x, 1);                                        // no rule: replicated
    Array k = np::concatenate({m, c}, 1);                              // no rule: replicated
    return std::vector<Array>{t, m, k, np::exp(k)};
  };
  const auto want = jit(f)(x, y);
  auto jf = jit(f);
  const auto got = jf(device_put(x, NamedSharding(mesh, P("data", "model"))),
                      device_put(y, NamedSharding(mesh, P("data"))));
  // Element-wise and shape ops are exact; reductions are summed in another order (tolerance).
  expect_near(got[0], want[0], 0);
  for (size_t i = 1; i < want.size(); ++i) expect_near(got[i], want[i], 1e-6);
  EXPECT_EQ(got[0].sharding(),
            "NamedSharding(mesh=Mesh('data': 4, 'model': 2), spec=PartitionSpec('model', "
            "'data'))");
}

// The gradient through a constraint is the cotangent, constrained the same way (as JAX).
TEST_F(Sharding8, GradThroughAConstraint) {
  const Mesh mesh = make_mesh({8}, {"data"});
  const Sharding rows = NamedSharding(mesh, P("data"));
  auto loss = [&](const Array& x) {
    return np::sum(np::square(with_sharding_constraint(x * 3.0f, rows)));
  };
  auto g = jit(grad(loss));
  const std::string text = g.lower(ShapeDtype{{8, 4}}).as_text();
  size_t count = 0;
  for (size_t at = text.find("@Sharding"); at != std::string::npos;
       at = text.find("@Sharding", at + 1))
    ++count;
  EXPECT_EQ(count, 2u) << text;
  const Array x = random_array({8, 4}, 12);
  expect_near(g(x), x * 18.0f, 1e-5);
}

TEST_F(Sharding8, ConstraintsOutShardingsCacheAndDonation) {
  const Mesh mesh = make_mesh({8}, {"data"});
  const Sharding rows = NamedSharding(mesh, P("data")),
                 cols = NamedSharding(mesh, P(std::nullopt, "data"));
  JitOptions o;
  o.out_shardings = {cols};
  o.donate_argnums = {0};
  auto f = jit([&](const Array& x) { return with_sharding_constraint(x * 2.0f, rows) + 1.0f; }, o);
  const Array x = random_array({8, 16}, 11);
  const Array want = x * 2.0f + 1.0f;
  const std::string text = f.lower(ShapeDtype{{8, 16}}).as_text();
  EXPECT_NE(text.find("stablehlo.custom_call @Sharding"), std::string::npos) << text;
  EXPECT_NE(text.find("{devices=[1,8]<=[8]}"), std::string::npos) << text;
  const Array xs = device_put(x, rows);
  const Array got = f(xs);
  expect_near(got, want, 0);
  EXPECT_EQ(got.sharding(), cols.str());
  EXPECT_EQ(addressable_shards(got)[0].data.shape(), (Shape{8, 2}));
  expect_error([&] { xs.to_host(); }, "donated");
  set_explain_cache_misses(true);
  testing::internal::CaptureStderr();
  expect_near(f(device_put(x, cols)), want, 0);  // another input sharding: a new program
  const std::string log = testing::internal::GetCapturedStderr();
  set_explain_cache_misses(false);
  EXPECT_NE(log.find("argument arg0: sharding " + rows.str() + " -> " + cols.str()),
            std::string::npos)
      << log;
  EXPECT_EQ(f.compile_count(), 2);
}

TEST_F(Sharding8, LoweredTextOfShardedArgumentsAndGradientAllReduce) {
  const Mesh mesh = make_mesh({8}, {"data"});
  const Array x = random_array({16, 4}, 12), w = random_array({4, 3}, 13);
  auto loss = [](const Array& w, const Array& x) { return np::sum(np::tanh(np::matmul(x, w))); };
  JitOptions o;
  o.out_shardings = {NamedSharding(mesh, P())};
  auto g = jit([&](const Array& w, const Array& x) { return grad(loss)(w, x); }, o);
  // Concrete sharded arguments (no in_shardings) lower with their shardings, as jax.jit does.
  const Array xs = device_put(x, NamedSharding(mesh, P("data", std::nullopt)));
  auto lowered = g.lower(w, xs);
  const std::string text = lowered.as_text();
  EXPECT_NE(text.find("%arg0: tensor<4x3xf32> {mhlo.sharding = \"{replicated}\"}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("%arg1: tensor<16x4xf32> {mhlo.sharding = \"{devices=[8,1]<=[8]}\"}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("-> (tensor<4x3xf32> {jax.result_info = \"result\", mhlo.sharding = "
                      "\"{replicated}\"})"),
            std::string::npos)
      << text;
  // Partitioned: each device's rows are 2x4, and the gradient's sum over the rows is one
  // all_reduce over all 8 devices of the partial gradients (3x4, before the transpose).
  const std::string compiled = lowered.compile().as_text();
  EXPECT_NE(compiled.find("tensor<2x4xf32>"), std::string::npos) << compiled;
  EXPECT_EQ(count(compiled, "stablehlo.all_reduce"), 1u) << compiled;
  EXPECT_NE(compiled.find("stablehlo.all_reduce\"(%"), std::string::npos) << compiled;
  EXPECT_NE(compiled.find("replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]>"), std::string::npos)
      << compiled;
  EXPECT_NE(compiled.find("}) : (tensor<3x4xf32>) -> tensor<3x4xf32>"), std::string::npos)
      << compiled;

  // The partitioned call reports its time in collectives; a one-device call reports none.
  const Array want = jit([&](const Array& w, const Array& x) { return grad(loss)(w, x); })(w, x);
  expect_near(g(w, xs), want, 1e-5);
  const auto stats = g.last_spmd_stats();
  ASSERT_TRUE(stats.has_value());
  EXPECT_GT(stats->seconds, 0);
  EXPECT_GE(stats->collective_seconds, 0);
  EXPECT_LE(stats->collective_seconds, stats->seconds);
  auto one = jit([&](const Array& w, const Array& x) { return grad(loss)(w, x); });
  one(w, x);
  EXPECT_FALSE(one.last_spmd_stats().has_value());
}

TEST_F(Sharding8, EquivalentShardingsShareAProgram) {
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  const Array x = random_array({8, 6, 4}, 14);
  auto f = jit([](const Array& x) { return np::tanh(x) * 3.0f; });
  // A trailing None changes the spec's text, not the tile form: one compilation.
  const Array a = f(device_put(x, NamedSharding(mesh, P(std::nullopt, "model", std::nullopt))));
  const Array b = f(device_put(x, NamedSharding(mesh, P(std::nullopt, "model"))));
  EXPECT_EQ(f.compile_count(), 1);
  expect_near(a, np::tanh(x) * 3.0f, 1e-6);
  expect_near(b, a, 0);
  f(device_put(x, NamedSharding(mesh, P("data"))));  // another tile form: another program
  EXPECT_EQ(f.compile_count(), 2);
}

TEST_F(Sharding8, RowsAndColumnsShardedMatmul) {
  // docs/sharding.md's example: rows over data, the kernel's columns over model.
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  const Array batch = random_array({8, 4}, 15), kernel = random_array({4, 6}, 16);
  const Array x = device_put(batch, NamedSharding(mesh, P("data", std::nullopt)));
  const Array w = device_put(kernel, NamedSharding(mesh, P(std::nullopt, "model")));
  auto f = jit([](const Array& x, const Array& w) { return np::tanh(np::matmul(x, w)); });
  const Array y = f(x, w);
  expect_near(y, np::tanh(np::matmul(batch, kernel)), 1e-6);
  EXPECT_EQ(y.sharding(),
            "NamedSharding(mesh=Mesh('data': 4, 'model': 2), spec=PartitionSpec('data', "
            "'model'))");
  const auto shards = addressable_shards(y);
  ASSERT_EQ(shards.size(), 8u);
  EXPECT_EQ(shards[5].data.shape(), (Shape{2, 3}));
  EXPECT_EQ(shards[5].index[0], (std::pair<int64_t, int64_t>{4, 6}));  // data index 2
  EXPECT_EQ(shards[5].index[1], (std::pair<int64_t, int64_t>{3, 6}));  // model index 1
  // No contracting dimension is split: no collective at all.
  const std::string compiled = f.lower(x, w).compile().as_text();
  EXPECT_EQ(count(compiled, "stablehlo.all_"), 0u) << compiled;
}

TEST_F(Sharding8, ProgramRunsOnTheMeshDevices) {
  // A mesh over cpu:4..7: the partitioned program runs there, and its outputs say so.
  const Mesh upper(std::vector<int>{4, 5, 6, 7}, {4}, {"data"});
  const Mesh lower(std::vector<int>{0, 1, 2, 3}, {4}, {"data"});
  const Array x = random_array({8, 2}, 17), y = random_array({8, 2}, 18);
  auto f = jit([](const Array& x, const Array& y) { return x * y + 1.0f; });
  const Array z = f(device_put(x, NamedSharding(upper, P("data"))),
                    device_put(y, NamedSharding(upper, P("data"))));
  expect_near(z, x * y + 1.0f, 0);
  EXPECT_EQ(z.devices(), (std::vector<std::string>{"cpu:4", "cpu:5", "cpu:6", "cpu:7"}));
  EXPECT_EQ(addressable_shards(z)[1].device, 5);
  EXPECT_TRUE(is_fully_addressable(z));  // one process holds every device
  // Arguments on different devices cannot meet in one program (JAX: incompatible devices).
  expect_error(
      [&] {
        f(device_put(x, NamedSharding(lower, P("data"))),
          device_put(y, NamedSharding(upper, P("data"))));
      },
      "jit: incompatible devices: argument arg1 is on [cpu:4, cpu:5, cpu:6, cpu:7] but "
      "argument arg0 on [cpu:0, cpu:1, cpu:2, cpu:3]");
}

TEST_F(Sharding8, SplitDimsStaySplitThroughBiasesAndReshapes) {
  // Tensor parallelism's patterns: a product split over 'data' and 'model'; a bias split over
  // 'model' added to it (the bias is sliced along 'data', not the product gathered), the heads
  // reshaped out of the columns and merged back. No collective at all, and the one-device
  // values.
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  const Array x = random_array({8, 6}, 19), w = random_array({6, 16}, 20),
              b = random_array({16}, 21);
  auto f = [](const Array& x, const Array& w, const Array& b) {
    const Array h = np::tanh(b + np::matmul(x, w));  // the bias first: the coarser sharding
    const Array heads = np::transpose(np::reshape(h, {8, 2, 8}), std::vector<int64_t>{1, 0, 2});
    return np::reshape(np::transpose(heads * 2.0f, std::vector<int64_t>{1, 0, 2}), {8, 16});
  };
  const Array want = jit(f)(x, w, b);
  auto jf = jit(f);
  const Array xs = device_put(x, NamedSharding(mesh, P("data", std::nullopt)));
  const Array ws = device_put(w, NamedSharding(mesh, P(std::nullopt, "model")));
  const Array bs = device_put(b, NamedSharding(mesh, P("model")));
  const Array got = jf(xs, ws, bs);
  expect_near(got, want, 1e-6);
  EXPECT_EQ(got.sharding(),
            "NamedSharding(mesh=Mesh('data': 4, 'model': 2), spec=PartitionSpec('data', "
            "'model'))");
  const std::string compiled = jf.lower(xs, ws, bs).compile().as_text();
  EXPECT_EQ(count(compiled, "stablehlo.all_"), 0u) << compiled;
  // A value split over 'data' resharded to ('data', 'model') keeps its rows: a slice of the
  // columns, no gather.
  JitOptions options;
  options.out_shardings = {NamedSharding(mesh, P("data", "model"))};
  auto g = jit([](const Array& x) { return np::exp(x); }, options);
  const Array y = g(device_put(random_array({8, 6}, 22), NamedSharding(mesh, P("data"))));
  expect_near(y, np::exp(random_array({8, 6}, 22)), 1e-6);
  EXPECT_EQ(count(g.lower(device_put(x, NamedSharding(mesh, P("data")))).compile().as_text(),
                  "stablehlo.all_"),
            0u);
}

TEST_F(Sharding8, MovedSplitIsOneAllToAll) {
  // Rows split over 'x' needed as columns split over 'x': each partition sends each other one
  // the block of its rows in their columns (XLA's all-to-all reshard), instead of all gathering
  // the whole array and slicing it.
  const Mesh line = make_mesh({8}, {"x"});
  const Array x = random_array({8, 16}, 23);
  JitOptions o;
  o.out_shardings = {NamedSharding(line, P(std::nullopt, "x"))};
  auto f = jit([](const Array& x) { return np::tanh(x); }, o);
  const Array xs = device_put(x, NamedSharding(line, P("x")));
  const Array y = f(xs);
  expect_near(y, np::tanh(x), 0);
  EXPECT_EQ(y.sharding(), NamedSharding(line, P(std::nullopt, "x")).str());
  const std::string text = f.lower(xs).compile().as_text();
  EXPECT_EQ(count(text, "stablehlo.all_to_all"), 1u) << text;
  EXPECT_EQ(count(text, "stablehlo.all_gather"), 0u) << text;
  EXPECT_EQ(count(text, "stablehlo.dynamic_slice"), 0u) << text;
  for (const char* attr :
       {"channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>",
        "concat_dimension = 0 : i64", "replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]>",
        "split_count = 8 : i64", "split_dimension = 1 : i64",
        "(tensor<1x16xf32>) -> tensor<8x2xf32>"})
    EXPECT_NE(text.find(attr), std::string::npos) << attr << "\n" << text;
  // Partition ids (cross_partition), as jax.lax.all_to_all lowers under jit.
  EXPECT_EQ(text.find("use_global_device_ids"), std::string::npos) << text;

  // On a (4, 2) mesh: 'data' moves from dimension 0 to 1 while 'model' keeps splitting
  // dimension 2, so the groups are the partitions with one 'model' coordinate; the same
  // groups when 'model' replicates.
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  const Array z = random_array({8, 4, 6}, 24);
  const Sharding moved = NamedSharding(mesh, P(std::nullopt, "data", "model"));
  auto g = jit([&](const Array& z) { return np::tanh(with_sharding_constraint(z, moved)); });
  const Array zs = device_put(z, NamedSharding(mesh, P("data", std::nullopt, "model")));
  const Array t = g(zs);
  expect_near(t, np::tanh(z), 1e-6);
  EXPECT_EQ(t.sharding(), moved.str());
  const Array m = random_array({8, 8}, 25);
  JitOptions om;
  om.out_shardings = {NamedSharding(mesh, P(std::nullopt, "data"))};
  auto h = jit([](const Array& m) { return m + 1.0f; }, om);
  const Array ms = device_put(m, NamedSharding(mesh, P("data")));
  expect_near(h(ms), m + 1.0f, 0);
  for (const std::string& text :
       {g.lower(zs).compile().as_text(), h.lower(ms).compile().as_text()}) {
    EXPECT_EQ(count(text, "stablehlo.all_to_all"), 1u) << text;
    EXPECT_EQ(count(text, "stablehlo.all_gather"), 0u) << text;
    EXPECT_NE(text.find("replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]>"), std::string::npos)
        << text;
    EXPECT_NE(text.find("split_count = 4 : i64"), std::string::npos) << text;
  }
}

TEST_F(Sharding8, SplitPartialSumsAreReduceScattered) {
  // A product whose contracting dimension is split over 'x', wanted with its rows split over
  // 'x': each partition receives only its rows' sums (a reduce_scatter), not all of them (an
  // all_reduce) to keep a slice.
  const Mesh line = make_mesh({8}, {"x"});
  const Array a = random_array({8, 32}, 26), b = random_array({32, 16}, 27);
  JitOptions o;
  o.out_shardings = {NamedSharding(line, P("x"))};
  auto f = jit([](const Array& a, const Array& b) { return np::matmul(a, b); }, o);
  const Array as = device_put(a, NamedSharding(line, P(std::nullopt, "x")));
  const Array bs = device_put(b, NamedSharding(line, P("x")));
  const Array y = f(as, bs);
  expect_near(y, np::matmul(a, b), 1e-5);  // the sum in another order
  EXPECT_EQ(y.sharding(), NamedSharding(line, P("x")).str());
  std::string text = f.lower(as, bs).compile().as_text();
  EXPECT_EQ(count(text, "stablehlo.reduce_scatter"), 1u) << text;
  EXPECT_EQ(count(text, "stablehlo.all_reduce"), 0u) << text;
  EXPECT_EQ(count(text, "stablehlo.dynamic_slice"), 0u) << text;
  for (const char* attr :
       {"replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]>", "scatter_dimension = 0 : i64",
        "use_global_device_ids", "(tensor<8x16xf32>) -> tensor<1x16xf32>"})
    EXPECT_NE(text.find(attr), std::string::npos) << attr << "\n" << text;

  // A reduce over the split rows, wanted split over 'x'.
  const Array c = random_array({16, 8}, 28);
  auto s = jit([](const Array& c) { return np::sum(c, {0}); }, o);
  const Array cs = device_put(c, NamedSharding(line, P("x")));
  expect_near(s(cs), np::sum(c, {0}), 1e-5);
  text = s.lower(cs).compile().as_text();
  EXPECT_EQ(count(text, "stablehlo.reduce_scatter"), 1u) << text;
  EXPECT_EQ(count(text, "stablehlo.all_reduce"), 0u) << text;

  // Megatron's row-parallel product added to a residual split over 'data' and 'model' (as
  // sequence parallelism keeps it): the sums are scattered over each 'data' row's 'model' pair.
  const Mesh mesh = make_mesh({4, 2}, {"data", "model"});
  const Array h = random_array({8, 16}, 29), w = random_array({16, 6}, 30),
              r = random_array({8, 6}, 31);
  auto mlp =
      jit([](const Array& h, const Array& w, const Array& r) { return np::matmul(h, w) + r; });
  const Array hs = device_put(h, NamedSharding(mesh, P("data", "model")));
  const Array ws = device_put(w, NamedSharding(mesh, P("model")));
  const Array rs = device_put(r, NamedSharding(mesh, P("data", "model")));
  const Array out = mlp(hs, ws, rs);
  expect_near(out, np::matmul(h, w) + r, 1e-5);
  EXPECT_EQ(out.sharding(), NamedSharding(mesh, P("data", "model")).str());
  text = mlp.lower(hs, ws, rs).compile().as_text();
  EXPECT_EQ(count(text, "stablehlo.reduce_scatter"), 1u) << text;
  EXPECT_EQ(count(text, "stablehlo.all_reduce"), 0u) << text;
  EXPECT_NE(text.find("replica_groups = dense<[[0, 1], [2, 3], [4, 5], [6, 7]]>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("scatter_dimension = 1 : i64"), std::string::npos) << text;

  // The sum also used whole: one all_reduce serves both, the split result is its slice.
  JitOptions both;
  both.out_shardings = {NamedSharding(line, P("x")), NamedSharding(line, P())};
  auto twice = jit(
      [](const Array& a, const Array& b) {
        const Array y = np::matmul(a, b);
        return std::vector<Array>{y, y};
      },
      both);
  const auto ys = twice(as, bs);
  expect_near(ys[0], np::matmul(a, b), 1e-5);
  expect_near(ys[1], ys[0], 0);
  text = twice.lower(as, bs).compile().as_text();
  EXPECT_EQ(count(text, "stablehlo.reduce_scatter"), 0u) << text;
  EXPECT_EQ(count(text, "stablehlo.all_reduce"), 1u) << text;
}
