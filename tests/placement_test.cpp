// Where arrays live and what crosses between the host and devices: device buffers, donation
// that reuses memory, committed and uncommitted placement, and the transfer counters a
// training loop is held to. Runs on two cpu devices.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "cujax/devices.h"
#include "cujax/jit.h"
#include "cujax/models/lm.h"
#include "cujax/nnx.h"
#include "cujax/numpy.h"
#include "cujax/runtime/spmd.h"
#include "cujax/sharding.h"
#include "cujax/transfer_guard.h"
#include "test_models.h"

using namespace cujax;
namespace jnp = cujax::numpy;

namespace {

class TwoDevices : public ::testing::Test {
 protected:
  void SetUp() override { runtime::set_num_cpu_devices(2); }
};

void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    FAIL() << "no error";
  } catch (const Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

struct Transfers {
  TransferStats h2d = transfer_stats(TransferDirection::HostToDevice);
  TransferStats d2h = transfer_stats(TransferDirection::DeviceToHost);
  TransferStats d2d = transfer_stats(TransferDirection::DeviceToDevice);
  // Transfers in each direction since this snapshot.
  int64_t host_to_device() const {
    return transfer_stats(TransferDirection::HostToDevice).count - h2d.count;
  }
  int64_t device_to_host() const {
    return transfer_stats(TransferDirection::DeviceToHost).count - d2h.count;
  }
  int64_t device_to_device() const {
    return transfer_stats(TransferDirection::DeviceToDevice).count - d2d.count;
  }
};

// Where each array of a state lives. Scalars (step counts, a cache index) are left out: an
// update such as count + 1 is computed while the old count is still read, so it goes to a new
// 4-byte buffer, which costs nothing worth reusing.
std::map<std::string, uintptr_t> pointers(const State& s) {
  std::map<std::string, uintptr_t> out;
  for (const auto& [path, a] : s)
    if (a.size() > 1) out[path] = a.unsafe_buffer_pointer();
  return out;
}

}  // namespace

TEST(Donation, DonatedBufferBecomesTheOutput) {
  JitOptions o;
  o.donate_argnums = {0};
  auto f = jit([](const Array& x) { return x * 2.0 + 1.0; }, o);
  Array x = jnp::arange(0, 1000, 1, DType::F32);
  Array y = f(x);
  y.block_until_ready();  // the first call compiles; from the second on, nothing is allocated
  for (int i = 0; i < 3; ++i) {
    const uintptr_t before = y.unsafe_buffer_pointer();
    Array z = f(y);
    EXPECT_EQ(z.unsafe_buffer_pointer(), before) << "call " << i;
    EXPECT_TRUE(y.is_deleted());
    y = z;
  }
  // 4 calls of x -> 2x + 1 from 0..999.
  const auto v = y.to_vector<float>();
  for (int i : {0, 1, 999}) EXPECT_FLOAT_EQ(v[i], 16.0f * i + 15.0f);
}

TEST(Donation, WithoutDonationTheInputKeepsItsMemory) {
  auto f = jit([](const Array& x) { return x * 2.0 + 1.0; });
  Array x = jnp::arange(0, 100, 1, DType::F32);
  x.block_until_ready();
  Array y = f(x);
  EXPECT_NE(y.unsafe_buffer_pointer(), x.unsafe_buffer_pointer());
  EXPECT_FLOAT_EQ(x.to_vector<float>()[3], 3.0f);
}

TEST(Donation, ABufferSomethingElseHoldsIsNotWritten) {
  JitOptions o;
  o.donate_argnums = {0};
  auto f = jit([](const Array& x) { return x + 1.0; }, o);
  Array x = jnp::arange(0, 64, 1, DType::F32);
  const HostTensor seen = x.to_host();  // on cpu this shares the buffer's memory
  Array y = f(x);
  EXPECT_FLOAT_EQ(y.to_vector<float>()[5], 6.0f);
  EXPECT_FLOAT_EQ(seen.data_as<float>()[5], 5.0f);  // the host copy kept its values
}

// Compiled::memory_analysis() as JAX reports it: a donated argument aliases the result of its
// type (alias_size_in_bytes), which then needs no memory of its own.
TEST(Donation, MemoryAnalysisCountsTheAliasedResult) {
  const ShapeDtype v{{1000}, DType::F32};
  auto step = [](const Array& p, const Array& g) { return p - g; };
  JitOptions donated;
  donated.donate_argnums = {0};
  const MemoryAnalysis in_place = jit(step, donated).lower(v, v).compile().memory_analysis();
  const MemoryAnalysis copied = jit(step).lower(v, v).compile().memory_analysis();
  EXPECT_EQ(in_place.alias_size_in_bytes, 4000);
  EXPECT_EQ(copied.alias_size_in_bytes, 0);
  EXPECT_EQ(in_place.argument_size_in_bytes, 8000);
  EXPECT_EQ(copied.peak_memory_in_bytes, 8000 + 4000);  // p, g and the result
  EXPECT_EQ(in_place.peak_memory_in_bytes, 8000);       // the result is p's memory
}

TEST(Donation, UsingADonatedArrayIsJaxsDeletedError) {
  JitOptions o;
  o.donate_argnums = {0};
  auto f = jit([](const Array& x) { return x + 1.0; }, o);
  Array x = jnp::zeros({4});
  f(x).block_until_ready();
  EXPECT_TRUE(x.is_deleted());
  expect_error([&] { x.to_host(); }, {"has been deleted", "donate"});
  expect_error([&] { jnp::sin(x); }, {"has been deleted"});
  expect_error([&] { f(x); }, {"has been deleted"});
}

TEST(Transfers, CountedPerDirectionAndExplicitness) {
  const HostTensor h = HostTensor::from_vector<float>({1, 2, 3}, {3});
  Transfers t;
  Array x = array(h);
  EXPECT_EQ(t.host_to_device(), 1);
  Array y = x + 1.0;  // runs on the device: no transfer (the scalar 1.0 is a constant)
  y.block_until_ready();
  EXPECT_EQ(t.device_to_host(), 0);
  const int64_t implicit = implicit_transfer_count();
  y.to_vector<float>();
  EXPECT_EQ(t.device_to_host(), 1);
  EXPECT_EQ(implicit_transfer_count(), implicit + 1);
  device_get(y);
  EXPECT_EQ(t.device_to_host(), 2);
  EXPECT_EQ(implicit_transfer_count(), implicit + 1);  // device_get is explicit
  EXPECT_EQ(transfer_stats(TransferDirection::DeviceToHost).bytes - t.d2h.bytes, 24);
}

// The scalars of `x * 2.0 + 3.0` become constants of the traced program from their host values:
// tracing reads nothing back from the device.
TEST(Transfers, TracingReadsNoScalarBackFromTheDevice) {
  auto f = jit([](const Array& x) { return x * 2.0 + 3.0; });
  Array x = jnp::ones({4});
  x.block_until_ready();
  Transfers t;
  Array y = f(x);  // traces and compiles
  y.block_until_ready();
  EXPECT_EQ(t.device_to_host(), 0);
  EXPECT_EQ(y.to_vector<float>(), std::vector<float>(4, 5.0f));
}

TEST(Transfers, GuardLevelsPerDirection) {
  Array x = jnp::ones({2});
  {
    TransferGuardScope g(TransferDirection::DeviceToHost, TransferGuard::Disallow);
    expect_error([&] { x.to_vector<float>(); }, {"Disallowed device-to-host transfer", "f32[2]"});
    EXPECT_NO_THROW(device_get(x));                       // explicit transfers pass "disallow"
    EXPECT_NO_THROW(array(HostTensor(DType::F32, {2})));  // other directions are untouched
  }
  {
    TransferGuardScope g(TransferDirection::DeviceToHost, TransferGuard::DisallowExplicit);
    expect_error([&] { device_get(x); }, {"Disallowed explicit device-to-host transfer"});
  }
  {
    TransferGuardScope g(TransferGuard::DisallowExplicit);
    expect_error([&] { array(HostTensor(DType::F32, {2})); },
                 {"Disallowed explicit host-to-device transfer"});
  }
  EXPECT_EQ(transfer_guard(TransferDirection::HostToDevice), TransferGuard::Allow);
  EXPECT_EQ(transfer_guard_from_string("log_explicit"), TransferGuard::LogExplicit);
  EXPECT_THROW(transfer_guard_from_string("sometimes"), Error);
}

// Uncommitted arrays live on the default device (cuda:0 where a GPU is the default, else
// cpu:0); the committed ones here are on the two cpu devices.
TEST_F(TwoDevices, CommittedArraysDecideWhereOpsRun) {
  const std::vector<std::string> home{default_backend() + ":0"};
  Array a = jnp::arange(0, 4, 1, DType::F32);  // uncommitted, on the default device
  EXPECT_FALSE(a.committed());
  EXPECT_EQ(a.devices(), home);
  Array b = device_put(a, "cpu", 1);
  EXPECT_TRUE(b.committed());
  EXPECT_EQ(b.devices(), std::vector<std::string>{"cpu:1"});
  EXPECT_EQ(b.sharding(), "SingleDeviceSharding(cpu:1)");

  Transfers t;
  Array c = a + b;  // the uncommitted operand follows the committed one
  EXPECT_EQ(c.devices(), std::vector<std::string>{"cpu:1"});
  EXPECT_TRUE(c.committed());
  EXPECT_EQ(t.device_to_device(), 1);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{0, 2, 4, 6}));

  Array d = jnp::sin(a);  // uncommitted in, uncommitted out, where it was
  EXPECT_FALSE(d.committed());
  EXPECT_EQ(d.devices(), home);

  Array e = device_put(a, devices("cpu")[0]);
  EXPECT_TRUE(e.committed());
  expect_error([&] { (void)(e + b); }, {"incompatible devices", "cpu:0", "cpu:1"});
}

TEST_F(TwoDevices, JitRunsOnItsDeviceAndRejectsArgumentsCommittedElsewhere) {
  JitOptions on_cpu;
  on_cpu.platform = "cpu";
  auto f = jit([](const Array& x, const Array& y) { return x * y; }, on_cpu);
  Array x = jnp::ones({3});
  Array on1 = device_put(jnp::ones({3}), "cpu", 1);
  expect_error([&] { f(x, on1); }, {"committed to cpu:1", "compiled for cpu:0", "device_put"});
  Array on0 = device_put(x, "cpu", 0);
  Array r = f(on0, x);  // x, uncommitted, follows to cpu:0
  EXPECT_TRUE(r.committed());
  EXPECT_EQ(r.devices(), std::vector<std::string>{"cpu:0"});
  EXPECT_FALSE(f(x, x).committed());
}

TEST(Placement, DevicePutToAMissingDeviceOrPlatformSaysWhy) {
  Array x = jnp::ones({2});
  expect_error([&] { device_put(x, SingleDeviceSharding(7)); }, {"cpu:7", "does not exist"});
  if (runtime::unavailable_reason("cuda").empty()) GTEST_SKIP() << "a GPU is usable here";
  expect_error([&] { device_put(x, "cuda", 0); }, {"cuda", "unavailable"});
}

// The loop a JAX user writes: batches placed on the device ahead of time, params and optimizer
// state donated each step, the loss fetched every 10 steps. Between fetches nothing crosses
// between the host and the device, and every step updates the states in their own memory.
TEST(TrainingLoop, NoHostTransfersBetweenMetricFetchesAndStatesUpdatedInPlace) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(32, 8, 16), rngs);
  models::OptimizerOptions o;
  o.learning_rate = 1e-2;
  o.warmup_steps = 5;
  o.total_steps = 100;
  auto tx = models::make_optimizer(o);
  State params = nnx::state(model, nnx::VariableKind::Param);
  State opt_state = tx.init(params);
  auto step = models::make_train_step(model, tx);
  // Windows of 9 tokens cut into inputs and next-token targets, on the device before the loop.
  std::vector<data::Batch> placed;
  for (int b = 0; b < 4; ++b) {
    std::vector<int32_t> inputs, targets;
    for (int row = 0; row < 4; ++row)
      for (int t = 0; t < 9; ++t) {
        const int32_t token = static_cast<int32_t>((row * 9 + t) * 7 + b) % 32;
        if (t < 8) inputs.push_back(token);
        if (t > 0) targets.push_back(token);
      }
    placed.push_back({jnp::array(inputs, Shape{4, 8}), jnp::array(targets, Shape{4, 8})});
  }
  // Warm-up: the first call traces and compiles (arrays closed over by the trace are read then).
  {
    auto [p, s, m] = step(params, opt_state, placed[0]);
    params = p;
    opt_state = s;
    m.at("loss").block_until_ready();
  }
  const Transfers t;
  std::vector<float> losses;
  for (int i = 0; i < 100; ++i) {
    const auto before_params = pointers(params);
    const auto before_state = pointers(opt_state);
    auto [p, s, m] = step(params, opt_state, placed[i % placed.size()]);
    EXPECT_EQ(pointers(p), before_params) << "step " << i << ": parameters moved";
    EXPECT_EQ(pointers(s), before_state) << "step " << i << ": optimizer state moved";
    params = p;
    opt_state = s;
    if (i % 10 == 9) losses.push_back(m.at("loss").item<float>());
  }
  EXPECT_EQ(t.host_to_device(), 0);
  EXPECT_EQ(t.device_to_device(), 0);
  EXPECT_EQ(t.device_to_host(), 10);  // the metric fetches, no more
  EXPECT_EQ(step.compile_count(), 1);
  EXPECT_LT(losses.back(), losses.front());
}

// A decode step with its KV cache donated writes each new key and value into the cache's own
// memory, as serve's and generate's steps do.
TEST(DecodeLoop, DonatedKvCacheIsUpdatedInPlace) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(32, 16, 16), rngs);
  const State params = nnx::state(model, nnx::VariableKind::Param);
  model.init_cache(2);
  State cache = nnx::state(model, nnx::VariableKind::Cache);
  JitOptions jo;
  jo.donate_argnums = {1};
  auto decode = jit(
      [&model](const State& params, const State& cache, const Array& token, const Array& pos) {
        State both = params;
        for (const auto& [path, value] : cache) both.set(path, value);
        return nnx::functional_call(model, both, nnx::VariableKind::Cache,
                                    [&] { return model.decode_step(token, pos); });
      },
      jo);
  Array token = jnp::array(std::vector<int32_t>{3, 4}, Shape{2, 1});
  {
    auto [logits, c] = decode(params, cache, token, jnp::array(std::vector<int32_t>{0}, Shape{}));
    cache = c;
  }
  std::vector<Array> positions;
  for (int32_t p = 1; p < 8; ++p) positions.push_back(jnp::array(std::vector<int32_t>{p}, Shape{}));
  const Transfers t;
  for (const Array& pos : positions) {
    const auto before = pointers(cache);
    auto [logits, c] = decode(params, cache, token, pos);
    EXPECT_EQ(pointers(c), before);
    cache = c;
  }
  EXPECT_EQ(t.host_to_device() + t.device_to_host() + t.device_to_device(), 0);
  EXPECT_EQ(decode.compile_count(), 1);
}
