// Flax msgpack checkpoints: legacy Orbax (PLACEHOLDER:// arrays in zarr v2 folders) and t5x
// (TensorStore specs, gzip chunks) as those projects wrote them (../shared/interop/formats,
// skipped when absent), against the README's values computed by loops and its sums; and Flax
// to_bytes state packed here with msgpack-cxx, whole and damaged.
#include <gtest/gtest.h>

#define MSGPACK_NO_BOOST
#include <msgpack.hpp>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "checkpoint/msgpack_checkpoint.h"
#include "cujax/checkpoint.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
namespace mc = checkpoint::msgpack_checkpoint;

fs::path formats_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const std::string shared = env && *env ? env : CUJAX_DEFAULT_SHARED_DIR;
  return fs::path(shared) / "interop" / "formats";
}

const checkpoint::Leaf& leaf(const checkpoint::LoadedCheckpoint& c, const std::string& path) {
  for (const auto& l : c.leaves)
    if (l.path == path) return l;
  throw std::runtime_error("no leaf " + path);
}

TEST(MsgpackCheckpoint, LegacyOrbaxAggregateRestoresToArangeMultiples) {
  const fs::path dir = formats_dir() / "orbax_aggregate_some.checkpoint";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  const auto c = checkpoint::load_any(dir.string());
  EXPECT_EQ(c.format, "orbax msgpack");
  ASSERT_EQ(c.leaves.size(), 4u);
  struct Want {
    const char* path;
    Shape shape;
    int64_t factor;
  };
  for (const Want& w :
       {Want{"a", {8}, 1}, Want{"b", {16}, 2}, Want{"c.a", {2, 4}, 3}, Want{"c.e", {4, 4}, 4}}) {
    const HostTensor& t = leaf(c, w.path).value;
    EXPECT_EQ(t.dtype(), DType::I64) << w.path;
    ASSERT_EQ(t.shape(), w.shape) << w.path;
    const auto v = t.to_vector<int64_t>();
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_EQ(v[i], static_cast<int64_t>(i) * w.factor) << w.path;
  }
}

TEST(MsgpackCheckpoint, T5xCheckpointReadsItsGzipZarrArrays) {
  const fs::path dir = formats_dir() / "t5x_tiny_t5" / "checkpoint_1";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  const auto c = checkpoint::load_any(dir.string());
  EXPECT_EQ(c.format, "t5x");
  const HostTensor& bias = leaf(c, "state.param_states.bias").value;
  ASSERT_EQ(bias.dtype(), DType::F32);
  ASSERT_EQ(bias.shape(), Shape{5});
  for (float x : bias.to_vector<float>()) EXPECT_EQ(x, 1.0f);
  const HostTensor& kernel = leaf(c, "state.param_states.kernel").value;
  ASSERT_EQ(kernel.dtype(), DType::F64);
  ASSERT_EQ(kernel.shape(), (Shape{10, 5}));
  const auto k = kernel.to_vector<double>();
  EXPECT_NEAR(std::accumulate(k.begin(), k.end(), 0.0), 26.51389588494382, 1e-12);
  EXPECT_NEAR(k[0], 0.15038408, 1e-8);
  EXPECT_NEAR(k[1], 0.70071733, 1e-8);
  EXPECT_NEAR(k[2], 0.50233229, 1e-8);
  EXPECT_NEAR(k[3], 0.67634280, 1e-8);
  const HostTensor& step = leaf(c, "state.param_states.step").value;
  ASSERT_EQ(step.dtype(), DType::I32);
  ASSERT_EQ(step.shape(), Shape{});
  EXPECT_EQ(step.to_vector<int32_t>()[0], 1);
}

// Flax's serialization: an ndarray as ext 1 of msgpack [shape, dtype name, bytes].
void pack_array(msgpack::packer<msgpack::sbuffer>& pk, int8_t ext_type, const Shape& shape,
                const std::string& dtype, const std::string& bytes) {
  msgpack::sbuffer inner;
  msgpack::packer<msgpack::sbuffer> ipk(inner);
  ipk.pack_array(3);
  ipk.pack_array(static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) ipk.pack(static_cast<uint64_t>(d));
  ipk.pack(dtype);
  ipk.pack_bin(static_cast<uint32_t>(bytes.size()));
  ipk.pack_bin_body(bytes.data(), static_cast<uint32_t>(bytes.size()));
  pk.pack_ext(inner.size(), ext_type);
  pk.pack_ext_body(inner.data(), static_cast<uint32_t>(inner.size()));
}

std::string flax_state(size_t w_bytes) {
  std::vector<float> w(6);
  for (int i = 0; i < 6; ++i) w[i] = 0.5f * static_cast<float>(i) - 1.0f;
  int32_t step = 42;
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(3);
  pk.pack(std::string("params"));
  pk.pack_map(1);
  pk.pack(std::string("dense"));
  pk.pack_map(1);
  pk.pack(std::string("kernel"));
  pack_array(pk, 1, {2, 3}, "float32", std::string(reinterpret_cast<char*>(w.data()), w_bytes));
  pk.pack(std::string("step"));
  pack_array(pk, 3, {}, "int32", std::string(reinterpret_cast<char*>(&step), 4));
  pk.pack(std::string("layers"));  // a list becomes a map keyed "0", "1"
  pk.pack_map(1);
  pk.pack(std::string("0"));
  pk.pack(1.5);  // a Python float: not an array
  return std::string(buf.data(), buf.size());
}

TEST(MsgpackCheckpoint, FlaxToBytesStateAndItsDamage) {
  const auto m = mc::parse(flax_state(24), fs::temp_directory_path(), "state.msgpack");
  EXPECT_EQ(m.format, "flax msgpack");
  ASSERT_EQ(m.leaves.size(), 2u);
  EXPECT_EQ(m.leaves[0].path, "params.dense.kernel");
  ASSERT_EQ(m.leaves[0].value.shape(), (Shape{2, 3}));
  const auto w = m.leaves[0].value.to_vector<float>();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(w[i], 0.5f * static_cast<float>(i) - 1.0f);
  EXPECT_EQ(m.leaves[1].path, "step");
  EXPECT_EQ(m.leaves[1].value.to_vector<int32_t>()[0], 42);

  // A byte count that does not match the shape names the leaf.
  try {
    mc::parse(flax_state(20), fs::temp_directory_path(), "state.msgpack");
    ADD_FAILURE() << "a short array was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("'params.dense.kernel': 20 bytes for float32[2,3]"),
              std::string::npos)
        << e.what();
  }
  // Every truncation is an error, never a crash.
  const std::string full = flax_state(24);
  for (size_t n = 0; n < full.size(); ++n)
    EXPECT_THROW(mc::parse(full.substr(0, n), fs::temp_directory_path(), "t"), std::exception) << n;
  // A placeholder may not leave the checkpoint's folder.
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(1);
  pk.pack(std::string("a"));
  pk.pack(std::string("PLACEHOLDER://../../etc"));
  try {
    mc::parse(std::string(buf.data(), buf.size()), fs::temp_directory_path(), "p");
    ADD_FAILURE() << "a placeholder outside the folder was followed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("outside the checkpoint folder"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace cujax
