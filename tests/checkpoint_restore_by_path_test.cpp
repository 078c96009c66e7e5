// StandardCheckpointer::restore from the formats that are not Orbax's, into an nnx model's
// State or nnx::eval_shape's abstract one, by path: Flax msgpack (nested dicts), safetensors
// with '.'- and '/'-joined keys, a t5x checkpoint's optimizer target; dtype casts only with
// cast_dtypes; a missing, extra or misshapen leaf names the path and the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "cujax/checkpoint.h"
#include "cujax/core/error.h"
#include "cujax/nnx.h"
#include "cujax/numpy.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
using checkpoint::Leaf;
using checkpoint::StandardCheckpointer;

fs::path fresh_dir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("cujax_restore_path_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::unique_ptr<nnx::Sequential> make_model(uint64_t seed) {
  nnx::Rngs rngs(seed);
  auto m = std::make_unique<nnx::Sequential>();
  m->add(std::make_unique<nnx::Linear>(3, 4, rngs));
  m->add(std::make_unique<nnx::Linear>(4, 2, rngs));
  return m;
}

std::vector<Leaf> leaves_of(const State& s, char sep = '.', const std::string& prefix = "") {
  std::vector<Leaf> out;
  for (const auto& [p, a] : s) {
    std::string key = p;
    std::replace(key.begin(), key.end(), '.', sep);
    out.push_back({prefix + key, a.to_host()});
  }
  return out;
}

void expect_same(const State& got, const State& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [p, a] : want) {
    const HostTensor x = got.at(p).to_host(), y = a.to_host();
    ASSERT_EQ(x.nbytes(), y.nbytes()) << what << ": " << p;
    EXPECT_EQ(x.dtype(), y.dtype()) << what << ": " << p;
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0) << what << ": " << p;
  }
}

std::string restore_error(const std::string& path, const State& target,
                          checkpoint::StandardCheckpointerOptions options = {}) {
  try {
    StandardCheckpointer(options).restore(path, target);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RestoreByPath, FlaxMsgpackSafetensorsAndT5xIntoAModel) {
  auto model = make_model(1);
  const State want = nnx::state(*model);
  ASSERT_TRUE(want.contains("layers.1.kernel"));
  const fs::path dir = fresh_dir("formats");
  const std::string msgpack = (dir / "flax.msgpack").string();
  const std::string dotted = (dir / "dotted.safetensors").string();
  const std::string slashed = (dir / "slashed.safetensors").string();
  const std::string t5x = (dir / "t5x.msgpack").string();
  checkpoint::save_leaves(msgpack, leaves_of(want), "msgpack");
  checkpoint::save_leaves(dotted, leaves_of(want), "safetensors");
  checkpoint::save_leaves(slashed, leaves_of(want, '/'), "safetensors");
  // t5x's layout: {"optimizer": {"target": params, "state": ...}, "version": ...}.
  auto t5x_leaves = leaves_of(want, '.', "optimizer.target.");
  t5x_leaves.push_back({"optimizer.state.step", numpy::zeros({}, DType::I32).to_host()});
  t5x_leaves.push_back({"version", numpy::zeros({}, DType::I32).to_host()});
  checkpoint::save_leaves(t5x, t5x_leaves, "msgpack");
  ASSERT_EQ(checkpoint::load_any(t5x).format, "t5x");

  // Into an abstract target (nothing computed) and into another model's State.
  const auto abstract = nnx::eval_shape([] { return make_model(99); });
  auto other = make_model(2);
  for (const std::string& path : {msgpack, dotted, slashed, t5x}) {
    expect_same(StandardCheckpointer().restore(path, abstract), want, path);
    const State got = StandardCheckpointer().restore(path, nnx::state(*other));
    nnx::update(*other, got);
    expect_same(nnx::state(*other), want, path + " into the model");
  }
  fs::remove_all(dir);
}

TEST(RestoreByPath, MismatchesNameThePathAndTheFile) {
  auto model = make_model(1);
  const State want = nnx::state(*model);
  const fs::path dir = fresh_dir("mismatch");
  auto leaves = leaves_of(want);
  // layers.0.bias missing, an extra leaf, layers.1.kernel misshapen, layers.1.bias float16.
  leaves.erase(std::remove_if(leaves.begin(), leaves.end(),
                              [](const Leaf& l) { return l.path == "layers.0.bias"; }),
               leaves.end());
  leaves.push_back({"layers.2.kernel", numpy::zeros({5}, DType::F32).to_host()});
  for (auto& l : leaves) {
    if (l.path == "layers.1.kernel") l.value = numpy::zeros({2, 4}, DType::F32).to_host();
    if (l.path == "layers.1.bias") l.value = numpy::astype(array(l.value), DType::F16).to_host();
  }
  const std::string file = (dir / "bad.safetensors").string();
  checkpoint::save_leaves(file, leaves, "safetensors");
  const std::string msg = restore_error(file, want);
  EXPECT_NE(msg.find(file), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 mismatches"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing parameter 'layers.0.bias'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("extra parameter 'layers.2.kernel' in the checkpoint (float32[5])"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("'layers.1.kernel': shape [2,4] in the checkpoint, [4,2] in the target"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("'layers.1.bias': dtype float16 in the checkpoint, float32 in the target"),
            std::string::npos)
      << msg;
}

TEST(RestoreByPath, DtypesAreCastOnlyWhenAsked) {
  auto model = make_model(1);
  const State want = nnx::state(*model);
  const fs::path dir = fresh_dir("cast");
  std::vector<Leaf> half;
  for (const auto& [p, a] : want) half.push_back({p, numpy::astype(a, DType::BF16).to_host()});
  const std::string file = (dir / "half.msgpack").string();
  checkpoint::save_leaves(file, half, "msgpack");
  EXPECT_NE(
      restore_error(file, want).find("dtype bfloat16 in the checkpoint, float32 in the target"),
      std::string::npos);
  const State got = StandardCheckpointer({.cast_dtypes = true}).restore(file, want);
  State expected;
  for (const auto& l : half) expected.set(l.path, numpy::astype(array(l.value), DType::F32));
  expect_same(got, expected, "bfloat16 cast to float32");
  // The same for Orbax's layout.
  const std::string orbax = (dir / "orbax").string();
  checkpoint::save_leaves(orbax, half, "ocdbt");
  EXPECT_FALSE(restore_error(orbax, want).empty());
  expect_same(StandardCheckpointer({.cast_dtypes = true}).restore(orbax, want), expected,
              "orbax bfloat16 cast to float32");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cujax
