// The programs JAX exports, run as JAX runs them: placement annotations and memory kinds, the
// sharding annotations of GSPMD and Shardy on one device. References: JAX's own outputs
// (shared/interop/jax-backcompat) and the same computation written without the annotations.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cujax/core/npy.h"
#include "cujax/export.h"
#include "cujax/ir/parser.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;

fs::path backcompat_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const std::string shared = env && *env ? env : CUJAX_DEFAULT_SHARED_DIR;
  return fs::path(shared) / "interop" / "jax-backcompat" / "cases";
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An Exported of a module's @main, as `cujax run` calls a bare module.
Exported exported_of(const std::string& text) {
  const auto module = ir::parse_module(text);
  const ir::Function* main = module->lookup("main");
  std::vector<ExportedLeaf> in, out;
  const auto args = main->arg_types();
  for (size_t i = 0; i < args.size(); ++i)
    in.push_back({"args[" + std::to_string(i) + "]", {args[i].shape, args[i].dtype, false}});
  for (size_t i = 0; i < main->result_types.size(); ++i)
    out.push_back({"result[" + std::to_string(i) + "]",
                   {main->result_types[i].shape, main->result_types[i].dtype, false}});
  return Exported("main", text, "", in, "", out, {"cpu"});
}

std::vector<HostTensor> run_text(const std::string& text, const std::vector<HostTensor>& inputs) {
  std::vector<Array> args;
  for (const auto& t : inputs) args.push_back(array(t));
  std::vector<HostTensor> out;
  for (const Array& r : exported_of(text).call_flat(args)) out.push_back(r.to_host());
  return out;
}

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Every case folder whose name starts with `prefix`, run on its inputs against JAX's outputs.
void expect_cases_match_jax(const std::string& prefix) {
  const fs::path dir = backcompat_dir();
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  int ran = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !fs::exists(entry.path() / "module.mlir")) continue;
    SCOPED_TRACE(name);
    std::vector<HostTensor> inputs;
    for (int i = 0; fs::exists(entry.path() / ("input_" + std::to_string(i) + ".npy")); ++i)
      inputs.push_back(load_npy((entry.path() / ("input_" + std::to_string(i) + ".npy")).string()));
    const auto got = run_text(read_text(entry.path() / "module.mlir"), inputs);
    for (size_t i = 0; i < got.size(); ++i) {
      const HostTensor want =
          load_npy((entry.path() / ("expected_" + std::to_string(i) + ".npy")).string());
      ASSERT_EQ(got[i].type_string(), want.type_string());
      const auto g = got[i].to_vector<float>();
      const auto w = want.to_vector<float>();
      for (size_t k = 0; k < g.size(); ++k) EXPECT_FLOAT_EQ(g[k], w[k]) << "output " << i;
    }
    ++ran;
  }
  EXPECT_GT(ran, 0) << "no case " << prefix << "* in " << dir;
}

// --- placement ------------------------------------------------------------------------------

TEST(ExportPrograms, PlacementAnnotatedProgramsMatchJax) {
  expect_cases_match_jax("annotate_data_placement__");
}

std::string placement_module(const std::string& arg_kind, const std::string& placement) {
  return R"(module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32> {mhlo.memory_kind = ")" +
         arg_kind + R"("}, %arg1: tensor<3xf32>) -> (tensor<3xf32> {mhlo.memory_kind = "device"}) {
    %0 = stablehlo.custom_call @annotate_device_placement(%arg0) {has_side_effect = true, mhlo.frontend_attributes = {_xla_buffer_placement = ")" +
         placement + R"("}} : (tensor<3xf32>) -> tensor<3xf32>
    %1 = stablehlo.multiply %0, %arg1 : tensor<3xf32>
    return %1 : tensor<3xf32>
  }
})";
}

TEST(ExportPrograms, HostMemoryKindsHoldTheValue) {
  const HostTensor x = HostTensor::from_vector(std::vector<float>{1.5f, -2, 4}, {3});
  const HostTensor y = HostTensor::from_vector(std::vector<float>{3, 0.25f, -1}, {3});
  for (const char* kind : {"device", "pinned_host", "unpinned_host"}) {
    SCOPED_TRACE(kind);
    const auto out = run_text(placement_module(kind, kind), {x, y});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{4.5f, -0.5f, -4}));
  }
}

TEST(ExportPrograms, UnknownMemoryKindIsAnErrorNamingIt) {
  const HostTensor x = HostTensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  const std::string placed = message_of([&] {
    run_text(placement_module("device", "tpu_sparsecore"), {x, x});
  });
  EXPECT_NE(placed.find("memory kind 'tpu_sparsecore'"), std::string::npos) << placed;
  EXPECT_NE(placed.find("annotate_device_placement"), std::string::npos) << placed;
  const std::string arg = message_of([&] { run_text(placement_module("hbm", "device"), {x, x}); });
  EXPECT_NE(arg.find("mhlo.memory_kind 'hbm'"), std::string::npos) << arg;
  EXPECT_NE(arg.find("@main argument 0"), std::string::npos) << arg;
}

}  // namespace
}  // namespace cujax
