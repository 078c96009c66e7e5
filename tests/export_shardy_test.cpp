// Shardy-sharded programs, written as JAX exports them, run partitioned on meshes of 2 and 4
// virtual cpu devices: the #sdy.sharding of each argument, constraint and result must reach the
// SPMD partitioner as the tile assignment its GSPMD twin gives (checked on the compiled program's
// shardings and local shapes, so a program run replicated fails), and the results must match the
// same computation on one device. Manual computations (shard_map) run their body per shard.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/shardy.h"
#include "cujax/core/error.h"
#include "cujax/export.h"
#include "cujax/ir/parser.h"
#include "cujax/jit.h"
#include "cujax/runtime/spmd.h"
#include "host_compare.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;

class ExportShardy : public ::testing::Test {
 protected:
  void SetUp() override { runtime::set_num_cpu_devices(4); }
};

struct Outcome {
  std::vector<HostTensor> out;
  std::shared_ptr<const trace::CompiledProgram> program;
  size_t devices = 0;  // of the first result
};

Outcome run(const std::string& text, const std::vector<HostTensor>& inputs) {
  std::vector<Array> args;
  for (const auto& t : inputs) args.push_back(array(t));
  Outcome r;
  r.program =
      trace::compile_module(ir::parse_module(text), "cpu", std::vector<bool>(args.size(), false));
  const auto results = trace::execute(*r.program, args);
  r.devices = results.at(0).devices().size();
  for (const Array& a : results) r.out.push_back(a.to_host());
  return r;
}

HostTensor values(Shape shape, float scale, float offset) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>((i * 7) % 11) + offset;
  return HostTensor::from_vector(v, shape);
}

std::string q(const std::string& s) {  // "x" as a string attribute's text holds it: \22x\22
  std::string out;
  for (char c : s) out += c == '"' ? std::string("\\22") : std::string(1, c);
  return out;
}

void replace_all(std::string& t, const std::string& key, const std::string& value) {
  for (size_t at = t.find(key); at != std::string::npos; at = t.find(key, at + value.size()))
    t.replace(at, key.size(), value);
}

// ---- The conversion itself ----

std::map<std::string, compiler::SdyMesh> mesh(const std::string& text) {
  return {{"mesh", compiler::parse_sdy_mesh(text)}};
}

void expect_hlo(const std::string& mesh_text, const std::string& sdy, int64_t rank,
                const std::string& hlo) {
  SCOPED_TRACE(mesh_text + " " + sdy);
  const HloSharding got = compiler::sdy_sharding_to_hlo(sdy, mesh(mesh_text), rank, 4);
  const HloSharding want = HloSharding::parse(hlo, rank, 4);
  EXPECT_EQ(got, want) << got.str() << " vs " << want.str();
  EXPECT_EQ(got.replicas, want.replicas);
}

TEST(SdyShardingToHlo, NamedAxesBecomeTileAssignments) {
  const std::string m22 = R"(<["x"=2, "y"=2]>)";
  expect_hlo(m22, R"(#sdy.sharding<@mesh, [{"x"}, {"y"}]>)", 2, "{devices=[2,2]<=[4]}");
  expect_hlo(m22, R"(<@mesh, [{"y"}, {}]>)", 2,
             "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
  expect_hlo(m22, R"(<@mesh, [{}, {"x"}]>)", 2, "{devices=[1,2,2]<=[4] last_tile_dim_replicate}");
  expect_hlo(m22, R"(<@mesh, [{"x", "y"}, {}]>)", 2, "{devices=[4,1]<=[4]}");
  expect_hlo(m22, R"(<@mesh, [{"y", "x"}, {}]>)", 2, "{devices=[4,1]<=[2,2]T(1,0)}");
  expect_hlo(m22, R"(<@mesh, [{}, {}], replicated={"x", "y"}>)", 2, "{replicated}");
  // Open dimensions and priorities change propagation only.
  expect_hlo(m22, R"(<@mesh, [{"x", ?}p1, {?}]>)", 2,
             "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  // Sub-axes: "x":(1)2 is the major half of x, "x":(2)2 its minor half.
  const std::string m4 = R"(#sdy.mesh<["x"=4]>)";
  expect_hlo(m4, R"(<@mesh, [{"x":(1)2}, {"x":(2)2}]>)", 2, "{devices=[2,2]<=[4]}");
  expect_hlo(m4, R"(<@mesh, [{"x":(2)2}, {}]>)", 2,
             "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
  // A mesh with its own device order, and one given inline.
  expect_hlo(R"(<["x"=4], device_ids=[3, 1, 2, 0]>)", R"(<@mesh, [{"x"}]>)", 1,
             "{devices=[4]3,1,2,0}");
  expect_hlo(m22, R"(<mesh<["a"=4]>, [{}, {"a"}]>)", 2, "{devices=[1,4]<=[4]}");
  // A mesh of one device replicates over all partitions.
  expect_hlo(R"(<["a"=1]>)", R"(<@mesh, [{"a"}]>)", 1, "{replicated}");
}

TEST(SdyShardingToHlo, BadShardingsAreRefusedNamingWhy) {
  const auto m = mesh(R"(<["x"=2, "y"=2]>)");
  auto refused = [&](const std::string& sdy, int64_t rank, int64_t n, const std::string& why) {
    try {
      compiler::sdy_sharding_to_hlo(sdy, m, rank, n);
      ADD_FAILURE() << sdy << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(R"(<@mesh, [{"z"}, {}]>)", 2, 4, "no axis 'z'");
  refused(R"(<@other, [{"x"}, {}]>)", 2, 4, "no mesh @other");
  refused(R"(<@mesh, [{"x"}]>)", 2, 4, "rank 2");
  refused(R"(<@mesh, [{"x"}, {"x"}]>)", 2, 4, "used twice");
  refused(R"(<@mesh, [{"x"}, {}], unreduced={"y"}>)", 2, 4, "unreduced");
  refused(R"(<@mesh, [{"x"}, {}]>)", 2, 8, "has 4 devices but the program 8");
  refused(R"(<@mesh, [{"x":(1)3}, {}]>)", 2, 4, "does not divide");
  refused(R"(<@mesh, [{"x"}, {}>)", 2, 4, "offset");
  const auto m8 = mesh(R"(<["x"=8]>)");
  try {
    compiler::sdy_sharding_to_hlo(R"(<@mesh, [{"x":(1)2}, {"x":(1)4}]>)", m8, 2, 8);
    ADD_FAILURE() << "overlapping sub-axes were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the axes overlap"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compiler::parse_sdy_mesh(R"(<["x"=1048576, "y"=4]>)"), Error);
}

// ---- Programs ----

const char* kOneDevice = R"(module @jit_f {
  func.func public @main(%arg0: tensor<8x4xf32>, %arg1: tensor<4x6xf32>) -> (tensor<8x6xf32>, tensor<6xf32>) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    %1 = stablehlo.tanh %0 : tensor<8x6xf32>
    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8x6xf32>, tensor<f32>) -> tensor<6xf32>
    return %1, %2 : tensor<8x6xf32>, tensor<6xf32>
  }
})";

// The same with the sdy dialect's annotations; the constraint's sharding is the first result's
// (which has none of its own).
const char* kSdyDialect =
    R"(module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<4x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<8x6xf32>, tensor<6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    %c = sdy.sharding_constraint %0 <@mesh, [{"y"}, {"x"}]> : tensor<8x6xf32>
    %b = sdy.propagation_barrier %c allowed_direction=BACKWARD : tensor<8x6xf32>
    sdy.sharding_group %b group_id=0 : tensor<8x6xf32>
    %1 = stablehlo.tanh %b : tensor<8x6xf32>
    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8x6xf32>, tensor<f32>) -> tensor<6xf32>
    return %1, %2 : tensor<8x6xf32>, tensor<6xf32>
  }
})";

void expect_partitioned_like_one_device(const std::string& text, int devices,
                                        const std::vector<std::string>& in,
                                        const std::vector<std::string>& out) {
  SCOPED_TRACE(text);
  const std::vector<HostTensor> inputs = {values({8, 4}, 0.25f, -1), values({4, 6}, -0.125f, 0.5f)};
  const Outcome want = run(kOneDevice, inputs);
  const Outcome got = run(text, inputs);
  EXPECT_EQ(got.devices, static_cast<size_t>(devices)) << "the program did not run partitioned";
  ASSERT_EQ(got.program->in_shardings.size(), in.size());
  ASSERT_EQ(got.program->out_shardings.size(), out.size());
  const std::vector<int64_t> ranks_in = {2, 2}, ranks_out = {2, 1};
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_EQ(got.program->in_shardings[i], HloSharding::parse(in[i], ranks_in[i], devices))
        << "argument " << i << ": " << got.program->in_shardings[i].str();
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(got.program->out_shardings[i], HloSharding::parse(out[i], ranks_out[i], devices))
        << "result " << i << ": " << got.program->out_shardings[i].str();
  ASSERT_EQ(got.out.size(), 2u);
  expect_same(got.out[0], want.out[0], 1e-6, 1e-7, "result[0]");
  expect_same(got.out[1], want.out[1], 1e-5, 1e-6, "result[1]");
}

TEST_F(ExportShardy, SdyDialectShardingsArePartitioned) {
  expect_partitioned_like_one_device(
      kSdyDialect, 4,
      {"{devices=[2,2]<=[4]}", "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}"},
      {"{devices=[2,2]<=[2,2]T(1,0)}", "{devices=[2,2]<=[4] last_tile_dim_replicate}"});
  // The partitioned program computes on the local shards: x's is 4x2.
  const Outcome r = run(kSdyDialect, {values({8, 4}, 0.25f, -1), values({4, 6}, -0.125f, 0.5f)});
  EXPECT_NE(r.program->text.find("tensor<4x2xf32>"), std::string::npos) << r.program->text;
  EXPECT_EQ(r.program->text.find("sdy.sharding_constraint"), std::string::npos);
  // The barrier passes the constraint's sharding on (the first result has it), gathering nothing.
  EXPECT_EQ(r.program->text.find("all_gather"), std::string::npos) << r.program->text;
}

TEST_F(ExportShardy, SdyDialectOnTwoDevices) {
  std::string t = kSdyDialect;
  replace_all(t, "num_partitions = 4", "num_partitions = 2");
  replace_all(t, R"(<["x"=2, "y"=2]>)", R"(<["x"=2, "y"=1]>)");
  expect_partitioned_like_one_device(t, 2, {"{devices=[2,1]<=[2]}", "{replicated}"},
                                     {"{devices=[1,2]<=[2]}", "{devices=[2]<=[2]}"});
}

// The form JAX serializes: meshes and shardings as frontend attributes, constraints and result
// shardings as xla.sdy custom calls (and no mhlo.sharding beside them).
TEST_F(ExportShardy, FrontendAttributeShardingsArePartitioned) {
  std::string t =
      R"(module @jit_f attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = #sdy.mesh<[Q"a"=4]>}"}, mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x4xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [{Q"a"}, {}]>"}}, %arg1: tensor<4x6xf32>) -> (tensor<8x6xf32>, tensor<6xf32>) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    %c = stablehlo.custom_call @xla.sdy.ShardingConstraint(%0) {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [{}, {Q"a":(2)2}]>"}} : (tensor<8x6xf32>) -> tensor<8x6xf32>
    %1 = stablehlo.tanh %c : tensor<8x6xf32>
    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8x6xf32>, tensor<f32>) -> tensor<6xf32>
    %r = stablehlo.custom_call @xla.sdy.FuncResultSharding(%2) {has_side_effect = true, mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{Q"a":(1)2}]>]>"}} : (tensor<6xf32>) -> tensor<6xf32>
    return %1, %r : tensor<8x6xf32>, tensor<6xf32>
  }
})";
  replace_all(t, "Q\"a\"", q("\"a\""));
  expect_partitioned_like_one_device(t, 4, {"{devices=[4,1]<=[4]}", "{replicated}"},
                                     {"{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
                                      "{devices=[2,2]<=[4] last_tile_dim_replicate}"});
}

// ---- Manual computations: f(x) = (tanh(x), column sums of tanh(x)), the sums a local reduce and
// an all_reduce over the mesh in the manual body. ----

const char* kManualOneDevice = R"(module @jit_f {
  func.func public @main(%arg0: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>) {
    %t = stablehlo.tanh %arg0 : tensor<8x4xf32>
    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %s = stablehlo.reduce(%t init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>
    return %t, %s : tensor<8x4xf32>, tensor<4xf32>
  }
})";

// The body's ops on a local shard of R rows; GROUPS the all_reduce's replica groups.
const char* kManualBody = R"(    %t = stablehlo.tanh %a : tensor<Rx4xf32>
    %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %s = stablehlo.reduce(%t init: %z) applies stablehlo.add across dimensions = [0] : (tensor<Rx4xf32>, tensor<f32>) -> tensor<4xf32>
    %r = "stablehlo.all_reduce"(%s) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = GROUPS, use_global_device_ids}> ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %u = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %u : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
)";

std::string manual_module(const std::string& form, int n, bool replicated_input) {
  std::string t;
  if (form == "sdy") {
    t = R"(module @jit_f attributes {mhlo.num_partitions = NP : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=NP]>
  func.func public @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [ARGDIM, {}]>}) -> (tensor<8x4xf32>, tensor<4xf32>) {
    %0:2 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>, <@mesh, [{}]>] manual_axes={"x"} (%a: tensor<Rx4xf32>) {
BODY    sdy.return %t, %r : tensor<Rx4xf32>, tensor<4xf32>
    } : (tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
    return %0#0, %0#1 : tensor<8x4xf32>, tensor<4xf32>
  }
})";
  } else if (form == "round-trip") {  // as JAX exports it: the body a function between custom calls
    t = R"(module @jit_f attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = #sdy.mesh<[\22x\22=NP]>}"}, mhlo.num_partitions = NP : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x4xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [QARGDIM, {}]>"}}) -> (tensor<8x4xf32>, tensor<4xf32>) {
    %0 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%arg0) : (tensor<8x4xf32>) -> tensor<Rx4xf32>
    %1:2 = call @xla.sdy.manual_computation_body(%0) {mhlo.frontend_attributes = {xla.sdy.in_shardings = "#sdy.sharding_per_value<[<@mesh, [{\22x\22}, {}]>]>", xla.sdy.manual_axes = "#sdy<manual_axes{\22x\22}>", xla.sdy.out_shardings = "#sdy.sharding_per_value<[<@mesh, [{\22x\22}, {}]>, <@mesh, [{}]>]>"}} : (tensor<Rx4xf32>) -> (tensor<Rx4xf32>, tensor<4xf32>)
    %2:2 = stablehlo.custom_call @xla.sdy.LocalToGlobalShape(%1#0, %1#1) : (tensor<Rx4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
    return %2#0, %2#1 : tensor<8x4xf32>, tensor<4xf32>
  }
  func.func private @xla.sdy.manual_computation_body(%a: tensor<Rx4xf32>) -> (tensor<Rx4xf32>, tensor<4xf32>) {
BODY    return %t, %r : tensor<Rx4xf32>, tensor<4xf32>
  }
})";
  } else {  // GSPMD's shard_map
    t = R"(module @jit_f attributes {mhlo.num_partitions = NP : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x4xf32> {mhlo.sharding = "GARG"}) -> (tensor<8x4xf32>, tensor<4xf32>) {
    %0 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[NP,1]<=[NP]}"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %a = stablehlo.custom_call @SPMDFullToShardShape(%0) {mhlo.sharding = "{manual}"} : (tensor<8x4xf32>) -> tensor<Rx4xf32>
BODY    %1 = stablehlo.custom_call @Sharding(%t) {mhlo.sharding = "{manual}"} : (tensor<Rx4xf32>) -> tensor<Rx4xf32>
    %2 = stablehlo.custom_call @SPMDShardToFullShape(%1) {mhlo.sharding = "{devices=[NP,1]<=[NP]}"} : (tensor<Rx4xf32>) -> tensor<8x4xf32>
    %3 = stablehlo.custom_call @Sharding(%r) {mhlo.sharding = "{manual}"} : (tensor<4xf32>) -> tensor<4xf32>
    %4 = stablehlo.custom_call @SPMDShardToFullShape(%3) {mhlo.sharding = "{replicated}"} : (tensor<4xf32>) -> tensor<4xf32>
    return %2, %4 : tensor<8x4xf32>, tensor<4xf32>
  }
})";
  }
  replace_all(t, "BODY", kManualBody);
  std::string groups = "dense<[[";
  for (int i = 0; i < n; ++i) groups += (i ? ", " : "") + std::to_string(i);
  groups += "]]> : tensor<1x" + std::to_string(n) + "xi64>";
  replace_all(t, "GROUPS", groups);
  replace_all(t, "QARGDIM", replicated_input ? "{}" : "{\\22x\\22}");
  replace_all(t, "ARGDIM", replicated_input ? "{}" : "{\"x\"}");
  replace_all(t, "GARG",
              replicated_input
                  ? "{replicated}"
                  : "{devices=[" + std::to_string(n) + ",1]<=[" + std::to_string(n) + "]}");
  replace_all(t, "NP", std::to_string(n));
  replace_all(t, "Rx4", std::to_string(8 / n) + "x4");
  return t;
}

TEST_F(ExportShardy, ManualComputationsRunTheirBodyPerShard) {
  const std::vector<HostTensor> in = {values({8, 4}, 0.3f, -1.5f)};
  const Outcome want = run(kManualOneDevice, in);
  for (const char* form : {"sdy", "round-trip", "gspmd"})
    for (int n : {2, 4})
      for (bool replicated_input : {false, true}) {
        const std::string text = manual_module(form, n, replicated_input);
        SCOPED_TRACE(text);
        const Outcome got = run(text, in);
        EXPECT_EQ(got.devices, static_cast<size_t>(n));
        ASSERT_EQ(got.program->out_shardings.size(), 2u);
        EXPECT_EQ(
            got.program->out_shardings[0],
            HloSharding::parse(
                "{devices=[" + std::to_string(n) + ",1]<=[" + std::to_string(n) + "]}", 2, n));
        EXPECT_TRUE(got.program->out_shardings[1].is_replicated());
        // The sums are of every shard's rows: a body run on whole values would give n times.
        ASSERT_EQ(got.out.size(), 2u);
        expect_same(got.out[0], want.out[0], 1e-6, 1e-7, "tanh");
        expect_same(got.out[1], want.out[1], 1e-5, 1e-6, "column sums");
      }
}

TEST_F(ExportShardy, ManualBodiesOfTheWrongShardShapeAreRefused) {
  for (const char* form : {"sdy", "round-trip", "gspmd"}) {
    std::string t = manual_module(form, 4, false);
    replace_all(t, "tensor<2x4xf32>", "tensor<4x4xf32>");  // the shard of 2 devices, not 4
    SCOPED_TRACE(t);
    try {
      run(t, {values({8, 4}, 0.3f, -1.5f)});
      ADD_FAILURE() << "a body on 4x4 shards of an 8x4 value split 4 ways ran";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("is tensor<2x4xf32>, not tensor<4x4xf32>"),
                std::string::npos)
          << e.what();
    }
  }
}

// JAX's own Shardy exports (jax-backcompat's export_with_* serializations for 2 devices): the
// shardings the partitioner derives from their modules' #sdy.sharding attributes must be the
// HloShardings JAX recorded beside them in the flatbuffer.
TEST_F(ExportShardy, JaxShardyExportsPartitionAsJaxRecorded) {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const fs::path dir = fs::path(env && *env ? env : CUJAX_DEFAULT_SHARED_DIR) / "interop" /
                       "jax-backcompat" / "cases";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no " << dir << " (set CUJAX_SHARED_DIR)";
  int checked = 0, sharded = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("export_with_", 0) != 0) continue;
    const Exported e = Exported::load((entry.path() / "exported.flatbuffer").string());
    if (e.mlir_module().find("sdy.sharding") == std::string::npos) continue;
    SCOPED_TRACE(entry.path().filename().string());
    const auto module = ir::parse_module(e.mlir_module());
    const size_t offset = e.platforms().size() > 1 ? 1 : 0;  // the platform index
    const auto args = module->lookup("main")->arg_types();
    const auto program = trace::compile_module(ir::parse_module(e.mlir_module()), "cpu",
                                               std::vector<bool>(args.size(), false));
    const auto& kept = e.jax()->module_kept_var_idx;
    const auto in = e.in_shardings_hlo(), out = e.out_shardings_hlo();
    ASSERT_EQ(program->in_shardings.size(), offset + kept.size());
    for (size_t j = 0; j < kept.size(); ++j) {
      const std::string& want = in.at(static_cast<size_t>(kept[j]));
      if (want.empty()) continue;  // unspecified
      const HloSharding got = program->in_shardings[offset + j];
      EXPECT_EQ(got, HloSharding::parse(want, args[offset + j].rank(), e.nr_devices()))
          << "input " << kept[j] << ": " << got.str() << " vs JAX's " << want;
      sharded += !got.is_replicated();
    }
    ASSERT_EQ(program->out_shardings.size(), out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].empty()) continue;
      const HloSharding got = program->out_shardings[i];
      EXPECT_EQ(got,
                HloSharding::parse(out[i], static_cast<int64_t>(got.tiles.size()), e.nr_devices()))
          << "output " << i << ": " << got.str() << " vs JAX's " << out[i];
      sharded += !got.is_replicated();
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << "no export_with_* case with Shardy shardings in " << dir;
  EXPECT_GT(sharded, 0) << "every recorded sharding was replicated: nothing was checked";
}

TEST_F(ExportShardy, PartlyManualComputationsAreRefused) {
  const std::string t =
      R"(module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%a: tensor<4x4xf32>) {
      %t = stablehlo.tanh %a : tensor<4x4xf32>
      sdy.return %t : tensor<4x4xf32>
    } : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
})";
  try {
    run(t, {values({8, 4}, 0.3f, -1.5f)});
    FAIL() << "a manual computation over axis x of an x, y mesh ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("leave axis 'y'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cujax
