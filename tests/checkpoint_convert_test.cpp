// checkpoint::save_leaves and convert (`cujax checkpoint convert`): every pair of the formats
// written (Orbax OCDBT, Orbax zarr, safetensors, Flax msgpack) gives back every leaf bit for
// bit, as does t5x's tiny_t5 fixture through each; Flax's msgpack bytes against the msgpack
// specification's encoding, written out by hand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

#include "checkpoint/msgpack_checkpoint.h"
#include "cujax/checkpoint.h"
#include "cujax/core/error.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
using checkpoint::Leaf;

const char* const kFormats[] = {"ocdbt", "zarr", "safetensors", "msgpack"};

fs::path fresh_dir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("cujax_convert_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// Pseudo-random bytes (NaN payloads, denormals and all), bools 0/1.
HostTensor pattern(DType dtype, Shape shape, uint32_t seed) {
  HostTensor t(dtype, std::move(shape));
  auto* b = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    b[i] = static_cast<uint8_t>(seed >> 24);
    if (dtype == DType::Bool) b[i] &= 1;
  }
  return t;
}

void expect_same_leaves(const std::vector<Leaf>& want, const std::vector<Leaf>& got,
                        const std::string& what) {
  std::map<std::string, const HostTensor*> by_path;
  for (const auto& l : got) EXPECT_TRUE(by_path.emplace(l.path, &l.value).second) << what;
  ASSERT_EQ(by_path.size(), want.size()) << what;
  for (const auto& l : want) {
    auto it = by_path.find(l.path);
    ASSERT_NE(it, by_path.end()) << what << ": no " << l.path;
    const HostTensor& t = *it->second;
    EXPECT_EQ(t.dtype(), l.value.dtype()) << what << ": " << l.path;
    EXPECT_EQ(t.shape(), l.value.shape()) << what << ": " << l.path;
    ASSERT_EQ(t.nbytes(), l.value.nbytes()) << what << ": " << l.path;
    EXPECT_EQ(std::memcmp(t.data(), l.value.data(), t.nbytes()), 0) << what << ": " << l.path;
  }
}

std::string ext(const std::string& format) {
  return format == "safetensors" ? ".safetensors" : format == "msgpack" ? ".msgpack" : "";
}

TEST(CheckpointConvert, EveryPairOfFormatsPreservesEveryLeaf) {
  std::vector<Leaf> leaves;
  uint32_t seed = 1;
  for (DType t : kAllDTypes)
    leaves.push_back({"dtypes." + std::string(numpy_name(t)), pattern(t, {3, 5}, seed++)});
  leaves.push_back({"dtypes.complex64", pattern(DType::C64, {4}, seed++)});
  leaves.push_back({"layers.0.attn.query.kernel", pattern(DType::F32, {16, 32}, seed++)});  // 2 KiB
  leaves.push_back({"layers.0.attn.query.bias", pattern(DType::BF16, {32}, seed++)});
  leaves.push_back({"layers.1.scale", pattern(DType::F16, {2, 3, 4, 5}, seed++)});
  leaves.push_back({"step", pattern(DType::I32, {}, seed++)});
  leaves.push_back({"empty", pattern(DType::F32, {2, 0, 3}, seed++)});
  const fs::path dir = fresh_dir("pairs");
  for (const std::string from : kFormats) {
    const fs::path src = dir / ("src_" + from + ext(from));
    checkpoint::save_leaves(src.string(), leaves, from);
    expect_same_leaves(leaves, checkpoint::load_any(src.string()).leaves, "saved as " + from);
    for (const std::string to : kFormats) {
      const fs::path dst = dir / (from + "_to_" + to + ext(to));
      checkpoint::convert(src.string(), dst.string(), to);
      const auto back = checkpoint::load_any(dst.string());
      expect_same_leaves(leaves, back.leaves, from + " -> " + to);
      const std::string want_format = to == "ocdbt"         ? "orbax ocdbt"
                                      : to == "zarr"        ? "orbax zarr"
                                      : to == "safetensors" ? "safetensors"
                                                            : "flax msgpack";
      EXPECT_EQ(back.format, want_format) << from << " -> " << to;
    }
  }
  fs::remove_all(dir);
}

TEST(CheckpointConvert, T5xFixtureThroughEveryFormat) {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const fs::path src =
      fs::path(env ? env : CUJAX_DEFAULT_SHARED_DIR) / "interop/formats/t5x_tiny_t5/checkpoint_1";
  if (!fs::is_directory(src)) GTEST_SKIP() << "no " << src << " (set CUJAX_SHARED_DIR)";
  const auto t5x = checkpoint::load_any(src.string());
  ASSERT_EQ(t5x.format, "t5x");
  const fs::path dir = fresh_dir("t5x");
  for (const std::string to : kFormats) {
    const fs::path dst = dir / (to + ext(to));
    checkpoint::convert(src.string(), dst.string(), to);
    const auto back = checkpoint::load_any(dst.string());
    expect_same_leaves(t5x.leaves, back.leaves, "t5x -> " + to);
    // README: the kernel is float64 [10, 5] summing to 26.51389588494382, starting 0.15038408.
    for (const auto& l : back.leaves) {
      if (l.path != "state.param_states.kernel") continue;
      ASSERT_EQ(l.value.dtype(), DType::F64);
      const auto* v = static_cast<const double*>(l.value.data());
      double sum = 0;
      for (size_t i = 0; i < 50; ++i) sum += v[i];
      EXPECT_NEAR(sum, 26.51389588494382, 1e-12) << to;
      EXPECT_NEAR(v[0], 0.15038408, 1e-8) << to;
    }
  }
  fs::remove_all(dir);
}

TEST(CheckpointConvert, FlaxMsgpackBytesFollowTheSpecification) {
  // {"a": {"b": int32 [1, 2]}} as flax.serialization.to_bytes writes it: fixmap 1, fixstr "a",
  // fixmap 1, fixstr "b", ext 8 (19 bytes, type 1) holding fixarray 3 [fixarray [2],
  // fixstr "int32", bin 8 (8 bytes)].
  HostTensor t(DType::I32, {2});
  static_cast<int32_t*>(t.data())[0] = 1;
  static_cast<int32_t*>(t.data())[1] = 2;
  const std::string want(
      "\x81\xa1"
      "a\x81\xa1"
      "b\xc7\x13\x01\x93\x91\x02\xa5"
      "int32\xc4\x08\x01\x00\x00\x00\x02\x00\x00\x00",
      28);
  EXPECT_EQ(checkpoint::msgpack_checkpoint::serialize({{"a.b", t}}), want);
  EXPECT_THROW(checkpoint::msgpack_checkpoint::serialize({{"a", t}, {"a.b", t}}), Error);
  EXPECT_THROW(checkpoint::msgpack_checkpoint::serialize({{"a..b", t}}), Error);
}

TEST(CheckpointConvert, RefusesAnExistingDestinationAndUnknownFormats) {
  const fs::path dir = fresh_dir("refuse");
  const std::vector<Leaf> leaves = {{"w", pattern(DType::F32, {2}, 1)}};
  checkpoint::save_leaves((dir / "a.safetensors").string(), leaves, "safetensors");
  for (const std::string to : kFormats)
    EXPECT_THROW(
        checkpoint::convert((dir / "a.safetensors").string(), (dir / "a.safetensors").string(), to),
        Error);
  try {
    checkpoint::convert((dir / "a.safetensors").string(), (dir / "b").string(), "npz");
    FAIL() << "unknown format accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown format 'npz'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "b"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cujax
