// Sharding API, device_put, and jit of sharded arguments: every partitioned result is checked
// against the same function on one device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/numpy.h"
#include "cujax/runtime/spmd.h"
#include "cujax/sharding.h"

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
