// Sharded exported programs on meshes of 2 and 4 virtual cpu devices, against the same program
// run on one device: GSPMD `mhlo.sharding` strings and Shardy `#sdy.sharding` attributes on the
// arguments, results and sharding annotations, and JAX's own export_with_* serializations (run
// on 2 devices, against JAX's outputs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cujax/core/npy.h"
#include "cujax/export.h"
#include "cujax/jit.h"
#include "cujax/runtime/spmd.h"
#include "host_compare.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;

class ExportSharded : public ::testing::Test {
 protected:
  void SetUp() override { runtime::set_num_cpu_devices(4); }
};

// The results, and the devices the first one lies on (all of the mesh for a partitioned program).
std::vector<HostTensor> run(const std::string& text, const std::vector<HostTensor>& inputs,
                            size_t* devices = nullptr) {
  std::vector<Array> args;
  for (const auto& t : inputs) args.push_back(array(t));
  std::vector<HostTensor> out;
  const auto results = Exported::from_module(text).call_flat(args);
  if (devices) *devices = results.at(0).devices().size();
  for (const Array& r : results) out.push_back(r.to_host());
  return out;
}

void replace_all(std::string& t, const std::string& key, const std::string& value) {
  for (size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + value.size()))
    t.replace(at, key.size(), value);
}

// f(x: f32[8,4], w: f32[4,6]) = (tanh(2 x@w) + 2 x@w, sum over rows of 2 x@w): a contraction, an
// element-wise op and a reduction across the sharded dimension. NP is the partition count, the
// ANN_* placeholders the annotations (empty for the one-device module).
const char* kTemplate =
    R"(module @jit_f attributes {mhlo.num_partitions = NP : i32, mhlo.num_replicas = 1 : i32} {
MESH  func.func public @main(%arg0: tensor<8x4xf32>ANN_X, %arg1: tensor<4x6xf32>ANN_W) -> (tensor<8x6xf32>ANN_OUT0, tensor<6xf32>ANN_OUT1) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
CONSTRAIN    %2 = stablehlo.tanh %1 : tensor<8x6xf32>
    %3 = stablehlo.add %2, %1 : tensor<8x6xf32>
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%1 init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<8x6xf32>, tensor<f32>) -> tensor<6xf32>
    return %3, %4 : tensor<8x6xf32>, tensor<6xf32>
  }
})";

struct Annotations {
  int partitions = 1;
  std::string mesh, x, w, out0, out1, constrain;
};

std::string module_text(const Annotations& a) {
  std::string t = kTemplate;
  replace_all(t, "NP", std::to_string(a.partitions));
  replace_all(t, "MESH", a.mesh.empty() ? "" : "  " + a.mesh + "\n");
  replace_all(t, "ANN_X", a.x);
  replace_all(t, "ANN_W", a.w);
  replace_all(t, "ANN_OUT0", a.out0);
  replace_all(t, "ANN_OUT1", a.out1);
  replace_all(t, "CONSTRAIN",
              a.constrain.empty() ? "    %1 = stablehlo.add %0, %0 : tensor<8x6xf32>\n"
                                  : "    %s = " + a.constrain +
                                        "\n    %1 = stablehlo.add %s, %s : tensor<8x6xf32>\n");
  return t;
}

std::string gspmd(const std::string& s) {
  return " {mhlo.sharding = \"" + s + "\"}";
}

Annotations gspmd_annotations(int n, const std::string& rows, const std::string& cols) {
  Annotations a;
  a.partitions = n;
  a.x = gspmd(rows);
  a.w = gspmd(cols);
  a.out0 = gspmd(rows);
  a.out1 = gspmd("{replicated}");
  a.constrain = "stablehlo.custom_call @Sharding(%0) {mhlo.sharding = \"" + rows +
                "\"} : (tensor<8x6xf32>) -> tensor<8x6xf32>";
  return a;
}

std::string sdy(const std::string& dims) {
  return " {sdy.sharding = #sdy.sharding<@mesh, " + dims + ">}";
}

Annotations shardy_annotations(int n, const std::string& mesh, const std::string& x,
                               const std::string& w, const std::string& out0) {
  Annotations a;
  a.partitions = n;
  a.mesh = "sdy.mesh @mesh = <" + mesh + ">";
  a.x = sdy(x);
  a.w = sdy(w);
  a.out0 = sdy(out0);
  a.out1 = sdy("[{}]");
  a.constrain = "sdy.sharding_constraint %0 <@mesh, " + x + "> : tensor<8x6xf32>";
  return a;
}

HostTensor values(Shape shape, float scale, float offset) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>((i * 7) % 11) + offset;
  return HostTensor::from_vector(v, shape);
}

// Runs the annotated module and the plain one; the results must agree to the last bit for the
// element-wise output and within summation-order rounding for the reduction.
void expect_same_as_one_device(const Annotations& a) {
  const std::vector<HostTensor> in = {values({8, 4}, 0.25f, -1), values({4, 6}, -0.125f, 0.5f)};
  const std::string text = module_text(a);
  SCOPED_TRACE(text);
  const auto want = run(module_text(Annotations{}), in);
  size_t devices = 0;
  const auto got = run(text, in, &devices);
  EXPECT_EQ(devices, static_cast<size_t>(a.partitions)) << "the program did not run partitioned";
  ASSERT_EQ(got.size(), 2u);
  expect_same(got[0], want[0], 1e-6, 0, "result[0]");
  expect_same(got[1], want[1], 1e-5, 0, "result[1]");
}

TEST_F(ExportSharded, GspmdShardingsOnTwoDevices) {
  expect_same_as_one_device(gspmd_annotations(2, "{devices=[2,1]<=[2]}", "{replicated}"));
  expect_same_as_one_device(gspmd_annotations(2, "{devices=[2,1]<=[2]}", "{devices=[1,2]<=[2]}"));
  expect_same_as_one_device(gspmd_annotations(2, "{devices=[1,2]<=[2]}", "{devices=[2,1]<=[2]}"));
}

TEST_F(ExportSharded, GspmdShardingsOnFourDevices) {
  expect_same_as_one_device(gspmd_annotations(4, "{devices=[4,1]<=[4]}", "{replicated}"));
  expect_same_as_one_device(gspmd_annotations(4, "{devices=[2,2]<=[4]}", "{devices=[2,2]<=[4]}"));
  expect_same_as_one_device(
      gspmd_annotations(4, "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                        "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}"));
}

TEST_F(ExportSharded, ShardyShardingsOnTwoDevices) {
  expect_same_as_one_device(
      shardy_annotations(2, R"(["x"=2])", R"([{"x"}, {}])", R"([{}, {}])", R"([{"x"}, {}])"));
  expect_same_as_one_device(
      shardy_annotations(2, R"(["x"=2])", R"([{}, {"x"}])", R"([{"x"}, {}])", R"([{}, {}])"));
}

TEST_F(ExportSharded, ShardyShardingsOnFourDevices) {
  expect_same_as_one_device(
      shardy_annotations(4, R"(["x"=4])", R"([{"x"}, {}])", R"([{}, {}])", R"([{"x"}, {}])"));
  expect_same_as_one_device(shardy_annotations(4, R"(["x"=2, "y"=2])", R"([{"x"}, {"y"}])",
                                               R"([{"y"}, {}])", R"([{"x"}, {"y"}])"));
  expect_same_as_one_device(shardy_annotations(4, R"(["x"=2, "y"=2])", R"([{"x", "y"}, {}])",
                                               R"([{}, {}])", R"([{}, {"x"}])"));
}

// JAX's serializations for 2 devices, run on 2 of the 4 devices, against JAX's outputs.
TEST_F(ExportSharded, JaxExportsForTwoDevicesMatchJax) {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const fs::path dir = fs::path(env && *env ? env : CUJAX_DEFAULT_SHARED_DIR) / "interop" /
                       "jax-backcompat" / "cases";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  int ran = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("export_with_", 0) != 0) continue;
    SCOPED_TRACE(name);
    const Exported e = Exported::load((entry.path() / "exported.flatbuffer").string());
    ASSERT_EQ(e.nr_devices(), 2);
    // Exports for accelerators only run their first platform's lowering on cpu, as `cujax run
    // --lowering-platform` does.
    const auto& p = e.platforms();
    if (std::find(p.begin(), p.end(), "cpu") == p.end()) e.compile_lowering(p[0], "cpu");
    std::vector<Array> args;
    for (int i = 0; fs::exists(entry.path() / ("input_" + std::to_string(i) + ".npy")); ++i)
      args.push_back(
          array(load_npy((entry.path() / ("input_" + std::to_string(i) + ".npy")).string())));
    const auto got = e.call_flat(args);
    ASSERT_FALSE(got.empty());
    for (size_t i = 0; i < got.size(); ++i) {
      const HostTensor jax =
          load_npy((entry.path() / ("expected_" + std::to_string(i) + ".npy")).string());
      expect_same(got[i].to_host(), jax, 1e-6, 0, "result " + std::to_string(i) + " vs JAX");
    }
    ++ran;
  }
  EXPECT_EQ(ran, 6) << "export_with_* cases in " << dir;
}

}  // namespace
}  // namespace cujax
