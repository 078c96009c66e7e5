// The programs JAX exports, run as JAX runs them: placement annotations and memory kinds, the
// sharding annotations of GSPMD and Shardy on one device, shape-polymorphic modules refined to
// their inputs. References: JAX's own outputs (shared/interop/jax-backcompat), the same
// computation written without the annotations, and the static-shape module of each batch size.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cujax/core/dynamic_shape.h"
#include "cujax/core/npy.h"
#include "cujax/export.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "cujax/jit.h"
#include "host_compare.h"

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

std::vector<HostTensor> run_text(const std::string& text, const std::vector<HostTensor>& inputs) {
  std::vector<Array> args;
  for (const auto& t : inputs) args.push_back(array(t));
  std::vector<HostTensor> out;
  for (const Array& r : Exported::from_module(text).call_flat(args)) out.push_back(r.to_host());
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
      expect_same(got[i], want, 1e-6, 0, "output " + std::to_string(i));
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

// --- shardings on one device ------------------------------------------------------------------

// f(x) = x * x + x with Shardy's ops around it, as JAX writes a shard_map under Shardy.
const char* kShardy =
    R"(module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["a"=1]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}]> : tensor<8xf32>
    %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"a"}]>] out_shardings=[<@mesh, [{"a"}]>] manual_axes={"a"} (%arg1: tensor<8xf32>) {
      %2 = stablehlo.multiply %arg1, %arg1 : tensor<8xf32>
      sdy.return %2 : tensor<8xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    %3 = sdy.reshard %1 <@mesh, [{}]> : tensor<8xf32>
    %4 = stablehlo.add %3, %0 : tensor<8xf32>
    return %4 : tensor<8xf32>
  }
})";

// The same as JAX exports it for XLA (Shardy round-trip custom calls), shard shapes given.
std::string xla_sdy_module(const std::string& local) {
  return R"(module @jit_f attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = #sdy.mesh<[\22a\22=1]>}"}, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{replicated}"} : (tensor<8xf32>) -> tensor<8xf32>
    %1 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%0) : (tensor<8xf32>) -> tensor<)" +
         local + R"(xf32>
    %2 = stablehlo.custom_call @xla.sdy.ManualComputation(%1) {called_computations = [@xla.sdy.manual_computation_body], mhlo.frontend_attributes = {xla.sdy.in_shardings = "#sdy.sharding_per_value<[<@mesh, [{\22a\22}]>]>", xla.sdy.manual_axes = "#sdy<manual_axes{\22a\22}>", xla.sdy.out_shardings = "#sdy.sharding_per_value<[<@mesh, [{\22a\22}]>]>"}} : (tensor<)" +
         local + R"(xf32>) -> tensor<)" + local + R"(xf32>
    %3 = stablehlo.custom_call @xla.sdy.LocalToGlobalShape(%2) : (tensor<)" +
         local +
         R"(xf32>) -> tensor<8xf32>
    %4 = stablehlo.add %3, %0 : tensor<8xf32>
    %5 = stablehlo.custom_call @xla.sdy.FuncResultSharding(%4) {has_side_effect = true, mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{}]>]>"}} : (tensor<8xf32>) -> tensor<8xf32>
    return %5 : tensor<8xf32>
  }
  func.func private @xla.sdy.manual_computation_body(%arg0: tensor<)" +
         local + R"(xf32>) -> tensor<)" + local + R"(xf32> {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<)" +
         local + R"(xf32>
    return %0 : tensor<)" +
         local + R"(xf32>
  }
})";
}

std::vector<float> square_plus(const std::vector<float>& x) {
  std::vector<float> out;
  for (float v : x) out.push_back(v * v + v);
  return out;
}

TEST(ExportPrograms, ShardyOpsRunOnOneDevice) {
  const std::vector<float> x = {1, -2, 0.5f, 3, -0.25f, 7, 0, -1};
  const HostTensor t = HostTensor::from_vector(x, {8});
  for (const std::string& text : {std::string(kShardy), xla_sdy_module("8")}) {
    const auto out = run_text(text, {t});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].to_vector<float>(), square_plus(x));
  }
}

TEST(ExportPrograms, ShardyOpsRoundTripThroughThePrinter) {
  const auto once = ir::parse_module(kShardy);
  const std::string printed = ir::print_module(*once);
  EXPECT_NE(printed.find("{\n  sdy.mesh @mesh = <[\"a\"=1]>\n  func.func"), std::string::npos)
      << printed;
  EXPECT_NE(printed.find("#sdy.sharding<@mesh, [{\"a\"}]>"), std::string::npos) << printed;
  EXPECT_NE(printed.find("#sdy<manual_axes{\"a\"}>"), std::string::npos) << printed;
  EXPECT_EQ(ir::print_module(*ir::parse_module(printed)), printed);
}

TEST(ExportPrograms, ShardsOfSeveralDevicesAreRefusedOnOne) {
  const HostTensor t = HostTensor::from_vector(std::vector<float>(8, 1.0f), {8});
  const std::string msg = message_of([&] { run_text(xla_sdy_module("4"), {t}); });
  EXPECT_NE(msg.find("tensor<8xf32> to tensor<4xf32>"), std::string::npos) << msg;
  EXPECT_NE(msg.find("several devices"), std::string::npos) << msg;
}

// --- shape polymorphism ----------------------------------------------------------------------

// f(x: f32[b, 4]) as JAX exports it for a symbolic b: @main reads b from its argument, asserts
// b >= 1 and passes b to the function as a dimension variable, which sizes its dynamic ops.
const char* kPolymorphic = R"(
module @jit_f attributes {jax.uses_shape_polymorphism = true, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<?x4xf32>) -> (tensor<4x?xf32>, tensor<?xf32>) {
    %0 = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>
    %1 = stablehlo.convert %0 : (tensor<i32>) -> tensor<i64>
    %c = stablehlo.constant dense<1> : tensor<i64>
    %2 = stablehlo.compare  GE, %1, %c,  SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.custom_call @shape_assertion(%2, %1) {api_version = 2 : i32, error_message = "Input shapes do not match the polymorphic shapes specification. Expected value >= 1 for dimension variable 'b'. Obtained dimension variables: 'b' = {0} from specification 'b' for dimension args[0].shape[0] (= {0}), .", has_side_effect = true} : (tensor<i1>, tensor<i64>) -> ()
    %3:2 = call @_wrapped_jax_export_main(%1, %arg0) : (tensor<i64>, tensor<?x4xf32>) -> (tensor<4x?xf32>, tensor<?xf32>)
    return %3#0, %3#1 : tensor<4x?xf32>, tensor<?xf32>
  }
  func.func private @_wrapped_jax_export_main(%arg0: tensor<i64>, %arg1: tensor<?x4xf32>) -> (tensor<4x?xf32>, tensor<?xf32>) {
    %0 = stablehlo.convert %arg0 : (tensor<i64>) -> tensor<i32>
    %1 = stablehlo.reshape %0 : (tensor<i32>) -> tensor<1xi32>
    %c4 = stablehlo.constant dense<4> : tensor<1xi32>
    %2 = stablehlo.concatenate %1, %c4, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %3 = "stablehlo.dynamic_iota"(%2) <{iota_dimension = 0 : i64}> : (tensor<2xi32>) -> tensor<?x4xf32>
    %4 = stablehlo.multiply %arg1, %3 : tensor<?x4xf32>
    %half = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %5 = "stablehlo.dynamic_broadcast_in_dim"(%half, %2) <{broadcast_dimensions = array<i64>}> : (tensor<f32>, tensor<2xi32>) -> tensor<?x4xf32>
    %6 = stablehlo.add %4, %5 : tensor<?x4xf32>
    %zero = stablehlo.constant dense<0> : tensor<1xi32>
    %one = stablehlo.constant dense<1> : tensor<1xi32>
    %start = stablehlo.concatenate %zero, %one, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %ones = stablehlo.concatenate %one, %one, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %7 = "stablehlo.real_dynamic_slice"(%6, %start, %2, %ones) : (tensor<?x4xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x3xf32>
    %c3 = stablehlo.constant dense<3> : tensor<1xi32>
    %8 = stablehlo.concatenate %c3, %1, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %9 = "stablehlo.dynamic_reshape"(%7, %8) : (tensor<?x3xf32>, tensor<2xi32>) -> tensor<3x?xf32>
    %fzero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %low = stablehlo.concatenate %zero, %one, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %high = stablehlo.concatenate %one, %zero, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %interior = stablehlo.concatenate %zero, %zero, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %10 = "stablehlo.dynamic_pad"(%9, %fzero, %low, %high, %interior) : (tensor<3x?xf32>, tensor<f32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<4x?xf32>
    %11 = "stablehlo.reduce"(%6, %fzero) <{dimensions = array<i64: 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<?x4xf32>, tensor<f32>) -> tensor<?xf32>
    return %10, %11 : tensor<4x?xf32>, tensor<?xf32>
  }
})";

// The same function for one b, written with static ops only.
std::string static_module(int64_t b) {
  std::string t = R"(
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<Bx4xf32>) -> (tensor<4xB1xf32>, tensor<Bxf32>) {
    %0 = stablehlo.iota dim = 0 : tensor<Bx4xf32>
    %1 = stablehlo.multiply %arg0, %0 : tensor<Bx4xf32>
    %half = stablehlo.constant dense<5.000000e-01> : tensor<Bx4xf32>
    %2 = stablehlo.add %1, %half : tensor<Bx4xf32>
    %3 = "stablehlo.slice"(%2) <{start_indices = array<i64: 0, 1>, limit_indices = array<i64: B, 4>, strides = array<i64: 1, 1>}> : (tensor<Bx4xf32>) -> tensor<Bx3xf32>
    %4 = stablehlo.reshape %3 : (tensor<Bx3xf32>) -> tensor<3xBxf32>
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = "stablehlo.pad"(%4, %zero) <{edge_padding_low = array<i64: 0, 1>, edge_padding_high = array<i64: 1, 0>, interior_padding = array<i64: 0, 0>}> : (tensor<3xBxf32>, tensor<f32>) -> tensor<4xB1xf32>
    %6 = "stablehlo.reduce"(%2, %zero) <{dimensions = array<i64: 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<Bx4xf32>, tensor<f32>) -> tensor<Bxf32>
    return %5, %6 : tensor<4xB1xf32>, tensor<Bxf32>
  }
})";
  for (auto [key, value] : {std::pair<std::string, int64_t>{"B1", b + 1}, {"B", b}})
    for (size_t at = t.find(key); at != std::string::npos; at = t.find(key))
      t.replace(at, key.size(), std::to_string(value));
  return t;
}

HostTensor batch(int64_t b) {
  std::vector<float> v(static_cast<size_t>(b * 4));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i) - 1.5f;
  return HostTensor::from_vector(v, {b, 4});
}

TEST(ExportPrograms, PolymorphicModuleMatchesTheStaticOneAtEachBatchSize) {
  const Exported poly = Exported::from_module(kPolymorphic);
  ASSERT_EQ(poly.in_avals()[0].shape, (Shape{kDynamicDim, 4}));
  const int64_t before = global_compile_count();
  for (int64_t b : {1, 3, 8}) {
    SCOPED_TRACE("b = " + std::to_string(b));
    const auto got = poly.call_flat({array(batch(b))});
    const auto want = run_text(static_module(b), {batch(b)});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].shape(), (Shape{4, b + 1}));
    for (size_t i = 0; i < 2; ++i) expect_same(got[i].to_host(), want[i], 0, 0, "output");
  }
  // One compile per batch size for the polymorphic program (and one per static module).
  EXPECT_EQ(global_compile_count() - before, 6);
  const int64_t after = global_compile_count();
  for (int64_t b : {8, 1, 3}) poly.call_flat({array(batch(b))});
  EXPECT_EQ(global_compile_count(), after) << "a batch size seen before compiled again";
}

TEST(ExportPrograms, FailedShapeAssertionGivesJaxsMessage) {
  const Exported poly = Exported::from_module(kPolymorphic);
  const std::string msg = message_of([&] { poly.call_flat({array(batch(0))}); });
  EXPECT_NE(msg.find("Expected value >= 1 for dimension variable 'b'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'b' = 0 from specification 'b' for dimension args[0].shape[0] (= 0)"),
            std::string::npos)
      << msg;
  const std::string rank = message_of([&] {
    poly.call_flat({array(HostTensor::from_vector(std::vector<float>{1, 2, 3}, {3, 1}))});
  });
  EXPECT_NE(rank.find("f32[?,4]"), std::string::npos) << rank;
}

// dynamic_gather with constant slice sizes, and with sizes from the input's dimension, becomes a
// gather: the same results as the static gather of each size.
std::string gather_module(int64_t b, bool dynamic) {
  const std::string x = dynamic ? "?" : std::to_string(b);
  const std::string dn1 =
      "dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], "
      "start_index_map = [0], index_vector_dim = 1>";
  const std::string dn2 =
      "dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], start_index_map = [1], "
      "index_vector_dim = 1>";
  std::string t =
      "module @jit_g attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main(%arg0: tensor<" +
      x + "x4xf32>, %arg1: tensor<3x1xi32>) -> (tensor<3x4xf32>, tensor<3x" + x + "x2xf32>) {\n";
  if (dynamic) {
    t += "    %rows = stablehlo.constant dense<[1, 4]> : tensor<2xi32>\n"
         "    %0 = \"stablehlo.dynamic_gather\"(%arg0, %arg1, %rows) <{" +
         dn1 +
         ", indices_are_sorted = false}> : (tensor<?x4xf32>, tensor<3x1xi32>, tensor<2xi32>) -> "
         "tensor<3x4xf32>\n"
         "    %b = stablehlo.get_dimension_size %arg0, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>\n"
         "    %b1 = stablehlo.reshape %b : (tensor<i32>) -> tensor<1xi32>\n"
         "    %two = stablehlo.constant dense<2> : tensor<1xi32>\n"
         "    %sz = stablehlo.concatenate %b1, %two, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> "
         "tensor<2xi32>\n"
         "    %1 = \"stablehlo.dynamic_gather\"(%arg0, %arg1, %sz) <{" +
         dn2 +
         ", indices_are_sorted = false}> : (tensor<?x4xf32>, tensor<3x1xi32>, tensor<2xi32>) -> "
         "tensor<3x?x2xf32>\n";
  } else {
    t += "    %0 = \"stablehlo.gather\"(%arg0, %arg1) <{" + dn1 +
         ", indices_are_sorted = false, slice_sizes = array<i64: 1, 4>}> : (tensor<" + x +
         "x4xf32>, tensor<3x1xi32>) -> tensor<3x4xf32>\n"
         "    %1 = \"stablehlo.gather\"(%arg0, %arg1) <{" +
         dn2 + ", indices_are_sorted = false, slice_sizes = array<i64: " + x + ", 2>}> : (tensor<" +
         x + "x4xf32>, tensor<3x1xi32>) -> tensor<3x" + x + "x2xf32>\n";
  }
  t += "    return %0, %1 : tensor<3x4xf32>, tensor<3x" + x + "x2xf32>\n  }\n}\n";
  return t;
}

TEST(ExportPrograms, DynamicGatherMatchesTheStaticGather) {
  const Exported poly = Exported::from_module(gather_module(0, true));
  const HostTensor idx = HostTensor::from_vector(std::vector<int32_t>{2, 0, 1}, {3, 1});
  for (int64_t b : {3, 5}) {
    SCOPED_TRACE("b = " + std::to_string(b));
    const auto got = poly.call_flat({array(batch(b)), array(idx)});
    const auto want = run_text(gather_module(b, false), {batch(b), idx});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[1].shape(), (Shape{3, b, 2}));
    for (size_t i = 0; i < 2; ++i) expect_same(got[i].to_host(), want[i], 0, 0, "output");
    // Row 2 of x, then row 0: the gather read what it should.
    EXPECT_EQ(got[0].to_host().to_vector<float>()[0], batch(b).to_vector<float>()[8]);
  }
}

// dynamic_conv with its padding operand a constant becomes a convolution: the same results as
// the static convolution at each batch size.
std::string conv_module(int64_t b, bool dynamic) {
  const std::string x = dynamic ? "?" : std::to_string(b);
  const std::string attrs =
      "dimension_numbers = #stablehlo.conv<[b, f, 0]x[o, i, 0]->[b, f, 0]>, feature_group_count "
      "= 1 : i64, batch_group_count = 1 : i64, window_strides = array<i64: 2>";
  std::string t =
      "module @jit_c attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main(%arg0: tensor<" +
      x + "x1x6xf32>, %arg1: tensor<2x1x3xf32>) -> tensor<" + x + "x2x4xf32> {\n";
  if (dynamic)
    t += "    %pad = stablehlo.constant dense<[[1, 2]]> : tensor<1x2xi32>\n"
         "    %0 = \"stablehlo.dynamic_conv\"(%arg0, %arg1, %pad) {" +
         attrs +
         "} : (tensor<?x1x6xf32>, tensor<2x1x3xf32>, tensor<1x2xi32>) -> tensor<?x2x?xf32>\n"
         "    %1 = stablehlo.convert %0 : (tensor<?x2x?xf32>) -> tensor<?x2x4xf32>\n";
  else
    t += "    %1 = \"stablehlo.convolution\"(%arg0, %arg1) {" + attrs +
         ", padding = dense<[[1, 2]]> : tensor<1x2xi64>} : (tensor<" + x +
         "x1x6xf32>, tensor<2x1x3xf32>) -> tensor<" + x + "x2x4xf32>\n";
  t += "    return %1 : tensor<" + x + "x2x4xf32>\n  }\n}\n";
  return t;
}

TEST(ExportPrograms, DynamicConvMatchesTheStaticConvolution) {
  const Exported poly = Exported::from_module(conv_module(0, true));
  const HostTensor w =
      HostTensor::from_vector(std::vector<float>{1, -2, 0.5f, 3, 0.25f, -1}, {2, 1, 3});
  for (int64_t b : {1, 3}) {
    SCOPED_TRACE("b = " + std::to_string(b));
    std::vector<float> v(static_cast<size_t>(b * 6));
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i) - 2;
    const HostTensor x = HostTensor::from_vector(v, {b, 1, 6});
    const auto got = poly.call_flat({array(x), array(w)});
    const auto want = run_text(conv_module(b, false), {x, w});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), (Shape{b, 2, 4}));
    expect_same(got[0].to_host(), want[0], 0, 0, "output");
    // Output 0 of kernel 0 sees the low padding, x[0], x[1]: 1*0 - 2*x0 + 0.5*x1.
    EXPECT_EQ(got[0].to_host().to_vector<float>()[0], -2 * v[0] + 0.5f * v[1]);
  }
}

TEST(ExportPrograms, DynamicShapeProgramsMatchJax) {
  expect_cases_match_jax("stablehlo_dynamic_rng_bit_generator");
  expect_cases_match_jax("stablehlo_dynamic_top_k");
}

}  // namespace
}  // namespace cujax
