// Fusion planning (src/compiler/fusion.h) on the IR: which ops fuse into which kind of group,
// which do not and why, and that no plan changes results: every program below runs on the CPU
// backend as it is and as the plan runs it (each group outlined into a function of its own), and
// the two must agree bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/common/elementwise.h"
#include "compiler/fusion.h"
#include "compiler/outline.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/backend.h"
#include "lowered_steps.h"
#include "test_models.h"

namespace cujax {
namespace {

using compiler::FusionKind;
using compiler::FusionPlan;

struct Planned {
  std::unique_ptr<ir::Module> module;
  FusionPlan plan;
  const ir::Block* block = nullptr;
  size_t num_ops = 0;
};

Planned plan(const std::string& text) {
  Planned p;
  p.module = ir::parse_module(text);
  p.block = &p.module->lookup("main")->entry();
  p.num_ops = p.block->ops.size() - 1;
  p.plan = compiler::plan_fusion(*p.block, p.num_ops);
  return p;
}

// "name:kind" of the op that defines value %name in the printed order, for readable asserts:
// the group of each op as the list of op names (without "stablehlo.").
std::vector<std::string> member_names(const Planned& p, int group) {
  std::vector<std::string> out;
  for (size_t m : p.plan.groups[group].ops) out.push_back(p.block->ops[m]->name.substr(10));
  return out;
}

int group_of_op(const Planned& p, const std::string& name, int nth = 0) {
  for (size_t i = 0; i < p.num_ops; ++i)
    if (p.block->ops[i]->name == "stablehlo." + name && nth-- == 0) return p.plan.group_of[i];
  ADD_FAILURE() << "no op " << name;
  return -2;
}

// Runs `module` as it is and as `plan` outlines it on the CPU backend; expects identical bits.
void expect_same_results(const ir::Module& module, const FusionPlan& plan,
                         const std::vector<HostTensor>& args, const std::string& what) {
  const ir::Function& fn = *module.lookup("main");
  auto outlined = compiler::outline_plan(module, fn, plan);
  const runtime::Backend& cpu = runtime::get_backend("cpu");
  std::vector<std::string> checks_a, checks_b;
  runtime::ExecuteOptions oa, ob;
  oa.on_check = [&](const runtime::CheckResult& r) {
    checks_a.push_back(r.name + (r.passed ? "+" : "-"));
  };
  ob.on_check = [&](const runtime::CheckResult& r) {
    checks_b.push_back(r.name + (r.passed ? "+" : "-"));
  };
  const auto a = cpu.compile(module)->execute_on_host(args, oa);
  const auto b = cpu.compile(*outlined)->execute_on_host(args, ob);
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].type_string(), b[i].type_string()) << what << " result " << i;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].nbytes()), 0)
        << what << ": result " << i << " differs";
  }
  EXPECT_EQ(checks_a, checks_b) << what;
}

const char* kSoftmax = R"(
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %s = stablehlo.subtract %x, %mb : tensor<4x8xf32>
  %e = stablehlo.exponential %s : tensor<4x8xf32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %sb = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %r = stablehlo.divide %e, %sb : tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
)";

TEST(FusionPlan, SoftmaxIsThreeKernels) {
  const Planned p = plan(kSoftmax);
  ASSERT_EQ(p.plan.groups.size(), 3u);
  const int max_group = group_of_op(p, "reduce", 0);
  const int sum_group = group_of_op(p, "reduce", 1);
  const int div_group = group_of_op(p, "divide");
  EXPECT_EQ(p.plan.groups[max_group].kind, FusionKind::RowReduction);
  EXPECT_EQ(member_names(p, max_group), (std::vector<std::string>{"constant", "reduce"}));
  // exp(x - max) feeds the sum while it is read, and is also written for the divide.
  EXPECT_EQ(p.plan.groups[sum_group].kind, FusionKind::RowReduction);
  EXPECT_EQ(member_names(p, sum_group),
            (std::vector<std::string>{"constant", "broadcast_in_dim", "subtract", "exponential",
                                      "reduce"}));
  EXPECT_EQ(p.plan.groups[sum_group].outputs.size(), 2u);
  EXPECT_EQ(p.plan.groups[sum_group].reduction.outer, 4);
  EXPECT_EQ(p.plan.groups[sum_group].reduction.reduced, 8);
  EXPECT_EQ(p.plan.groups[div_group].kind, FusionKind::Loop);
  EXPECT_EQ(member_names(p, div_group), (std::vector<std::string>{"broadcast_in_dim", "divide"}));
  // The constants run only inside the reductions.
  EXPECT_EQ(std::count(p.plan.standalone.begin(), p.plan.standalone.end(), true), 0);
  EXPECT_EQ(p.plan.schedule.size(), 3u);
  expect_same_results(*p.module, p.plan, testutil::random_arguments(*p.module->lookup("main"), 1),
                      "softmax");
}

TEST(FusionPlan, ReductionTakesItsEpilogueAndColumnsAreRecognised) {
  const Planned p = plan(R"(
func.func @main(%x: tensor<6x5xf32>, %g: tensor<6x5xbf16>) -> (tensor<6xf32>, tensor<5xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<5.0> : tensor<6xf32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<6x5xf32>, tensor<f32>) -> tensor<6xf32>
  %mean = stablehlo.divide %sum, %n : tensor<6xf32>
  %gf = stablehlo.convert %g : (tensor<6x5xbf16>) -> tensor<6x5xf32>
  %db = stablehlo.reduce(%gf init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<6x5xf32>, tensor<f32>) -> tensor<5xf32>
  return %mean, %db : tensor<6xf32>, tensor<5xf32>
}
)");
  ASSERT_EQ(p.plan.groups.size(), 2u);
  const int row = group_of_op(p, "divide");
  EXPECT_EQ(p.plan.groups[row].kind, FusionKind::RowReduction);
  EXPECT_EQ(member_names(p, row),
            (std::vector<std::string>{"constant", "constant", "reduce", "divide"}));
  const int col = group_of_op(p, "convert");
  EXPECT_EQ(p.plan.groups[col].kind, FusionKind::ColumnReduction);
  EXPECT_EQ(p.plan.groups[col].reduction.reduced, 6);
  EXPECT_EQ(p.plan.groups[col].reduction.inner, 5);
  expect_same_results(*p.module, p.plan, testutil::random_arguments(*p.module->lookup("main"), 2),
                      "epilogue");
}

TEST(FusionPlan, WhatDoesNotFuseAndWhy) {
  const Planned p = plan(R"(
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %i: tensor<2x3x4xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<3xf32>, tensor<3x2xf32>, tensor<4x8xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %table = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %a = stablehlo.exponential %x : tensor<4x8xf32>
  %d = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = stablehlo.transpose %a, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %r = stablehlo.reduce(%i init: %zero) applies stablehlo.add across dimensions = [0, 2] : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<3xf32>
  %c = stablehlo.add %d, %a : tensor<4x8xf32>
  return %c, %t, %r, %table, %a : tensor<4x8xf32>, tensor<8x4xf32>, tensor<3xf32>, tensor<3x2xf32>, tensor<4x8xf32>
}
)");
  const ir::Block& b = *p.block;
  EXPECT_EQ(compiler::why_not_fusible(*b.ops[1]), "constant with more than one distinct element");
  EXPECT_EQ(compiler::why_not_fusible(*b.ops[3]),
            "not an element-wise, broadcast, reshape or reduce op");
  EXPECT_EQ(compiler::why_not_fusible(*b.ops[5]),
            "reduced dimensions are not contiguous (neither rows nor columns)");
  EXPECT_EQ(compiler::why_not_fusible(*b.ops[2]), "");
  // %a feeds the dot and %c's group: as an output of that group it would wait for the dot,
  // which waits for it. So it is a group of its own.
  EXPECT_NE(group_of_op(p, "exponential"), group_of_op(p, "add"));
  EXPECT_GE(group_of_op(p, "exponential"), 0);
  EXPECT_EQ(group_of_op(p, "dot_general"), -1);
  EXPECT_EQ(group_of_op(p, "reduce"), -1);
  expect_same_results(*p.module, p.plan, testutil::random_arguments(*p.module->lookup("main"), 3),
                      "not fused");
}

TEST(FusionPlan, TransposingBroadcastsAndManyInputReducesStayOut) {
  const Planned p = plan(R"(
func.func @main(%x: tensor<2x3xf32>, %y: tensor<2x3xi32>) -> (tensor<3x2xf32>, tensor<2xf32>, tensor<2xi32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %izero = stablehlo.constant dense<0> : tensor<i32>
  %t = stablehlo.broadcast_in_dim %x, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %r:2 = stablehlo.reduce(%x init: %zero), (%y init: %izero) across dimensions = [1] : (tensor<2x3xf32>, tensor<2x3xi32>, tensor<f32>, tensor<i32>) -> (tensor<2xf32>, tensor<2xi32>)
    reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<i32>, %d: tensor<i32>) {
      %s = stablehlo.add %a, %c : tensor<f32>
      %u = stablehlo.add %b, %d : tensor<i32>
      stablehlo.return %s, %u : tensor<f32>, tensor<i32>
    }
  return %t, %r#0, %r#1 : tensor<3x2xf32>, tensor<2xf32>, tensor<2xi32>
}
)");
  EXPECT_EQ(compiler::why_not_fusible(*p.block->ops[2]),
            "broadcast_dimensions are not increasing (a transpose)");
  EXPECT_EQ(compiler::why_not_fusible(*p.block->ops[3]), "has 2 results");
  EXPECT_TRUE(p.plan.groups.empty());
  expect_same_results(*p.module, p.plan, testutil::random_arguments(*p.module->lookup("main"), 4),
                      "transposing broadcast");
}

TEST(FusionPlan, SplatConstantsAndIotaAreCopiedIntoEachReader) {
  const Planned p = plan(R"(
func.func @main(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %one = stablehlo.constant dense<1.0> : tensor<4x4xf32>
  %io = stablehlo.iota dim = 1 : tensor<4x4xi32>
  %jo = stablehlo.iota dim = 0 : tensor<4x4xi32>
  %mask = stablehlo.compare GE, %jo, %io, SIGNED : (tensor<4x4xi32>, tensor<4x4xi32>) -> tensor<4x4xi1>
  %a = stablehlo.add %x, %one : tensor<4x4xf32>
  %m = stablehlo.select %mask, %a, %one : tensor<4x4xi1>, tensor<4x4xf32>
  %d = stablehlo.dot_general %m, %w, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %e = stablehlo.multiply %d, %one : tensor<4x4xf32>
  %f = stablehlo.dot_general %one, %e, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %e, %f : tensor<4x4xf32>, tensor<4x4xf32>
}
)");
  ASSERT_EQ(p.plan.groups.size(), 2u);
  // %one is in both groups and also runs on its own for the second dot.
  EXPECT_TRUE(p.plan.standalone[0]);
  EXPECT_FALSE(p.plan.standalone[1]);
  EXPECT_EQ(member_names(p, group_of_op(p, "select")),
            (std::vector<std::string>{"constant", "iota", "iota", "compare", "add", "select"}));
  EXPECT_EQ(p.plan.groups[group_of_op(p, "select")].inputs.size(), 1u);  // just %x
  expect_same_results(*p.module, p.plan, testutil::random_arguments(*p.module->lookup("main"), 5),
                      "leaves");
}

TEST(FusionPlan, SiblingReductionsShareOneKernel) {
  // Layer norm as nnx::LayerNorm computes it: mean(x) and mean(x^2) in one pass over x. The sum
  // of y and the sum of y minus that sum both read y, but the second needs the first.
  const Planned p = plan(R"(
func.func @main(%x: tensor<4x16xf32>, %y: tensor<4x16xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  %x2 = stablehlo.multiply %x, %x : tensor<4x16xf32>
  %s2 = stablehlo.reduce(%x2 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  %sy = stablehlo.reduce(%y init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  %yb = stablehlo.broadcast_in_dim %sy, dims = [0] : (tensor<4xf32>) -> tensor<4x16xf32>
  %c = stablehlo.subtract %y, %yb : tensor<4x16xf32>
  %sc = stablehlo.reduce(%c init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x16xf32>, tensor<f32>) -> tensor<4xf32>
  %v = stablehlo.subtract %s2, %s : tensor<4xf32>
  return %v, %s, %sc : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
)");
  ASSERT_EQ(p.plan.groups.size(), 3u);
  const int both = group_of_op(p, "reduce", 0);
  EXPECT_EQ(group_of_op(p, "reduce", 1), both);
  EXPECT_EQ(p.plan.groups[both].heroes.size(), 2u);
  EXPECT_EQ(p.plan.groups[both].inputs.size(), 1u);  // x, read once
  EXPECT_EQ(group_of_op(p, "subtract", 1), both);    // s2 - s, the epilogue of both
  EXPECT_NE(group_of_op(p, "reduce", 2), group_of_op(p, "reduce", 3));
  expect_same_results(*p.module, p.plan, testutil::random_arguments(*p.module->lookup("main"), 6),
                      "siblings");
}

// The fusion planner's element types per op must be the functors' (backends/common).
TEST(FusionPlan, ElementTypesAgreeWithTheFunctors) {
  auto accepts = [](const std::string& op, DType t) {
    const std::string ty = "tensor<3x" + std::string(mlir_name(t)) + ">";
    const std::string text = "func.func @main(%a: " + ty + ") -> " + ty + " {\n  %r = stablehlo." +
                             op + " %a, %a : " + ty + "\n  return %r : " + ty + "\n}\n";
    auto m = ir::parse_module(text);
    return compiler::why_not_fusible(*m->lookup("main")->entry().ops[0]).empty();
  };
  auto check = [&](const std::string& op, auto functor) {
    using F = decltype(functor);
    for (DType t : kAllDTypes)
      visit_dtype(t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        EXPECT_EQ(accepts(op, t), (ew::supports<F, T>())) << op << " " << mlir_name(t);
      });
  };
  check("add", ew::Add{});
  check("subtract", ew::Subtract{});
  check("divide", ew::Divide{});
  check("atan2", ew::Atan2{});
  check("and", ew::And{});
  check("shift_left", ew::ShiftLeft{});
  check("maximum", ew::Maximum{});
  check("power", ew::Power{});
}

void expect_plan_keeps_results(const ir::Module& module, const std::string& what, uint32_t seed) {
  const ir::Function& fn = *module.lookup("main");
  const ir::Block& block = fn.entry();
  const FusionPlan plan = compiler::plan_fusion(block, block.ops.size() - 1);
  expect_same_results(module, plan, testutil::random_arguments(fn, seed), what);
}

TEST(FusionPlan, TransformerStepsKeepTheirResults) {
  const auto steps = testutil::lower_steps(testutil::small_transformer(32, 8, 16), 2, 8);
  for (size_t i = 0; i < steps.modules.size(); ++i) {
    const ir::Module& m = *steps.modules[i];
    const ir::Block& block = m.lookup("main")->entry();
    const FusionPlan plan = compiler::plan_fusion(block, block.ops.size() - 1);
    size_t fused_ops = 0, reductions = 0;
    for (const auto& g : plan.groups) {
      fused_ops += g.ops.size();
      reductions += !g.heroes.empty();
    }
    std::cout << steps.names[i] << ": " << block.ops.size() << " ops, " << plan.groups.size()
              << " fusions (" << reductions << " reductions) of " << fused_ops << " ops, "
              << plan.schedule.size() << " steps\n";
    EXPECT_LT(plan.schedule.size(), block.ops.size() / 2) << steps.names[i];
    EXPECT_GT(reductions, 4u) << steps.names[i];
    expect_plan_keeps_results(m, steps.names[i], 7);
  }
}

std::filesystem::path conformance_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const std::string shared = env ? env : CUJAX_DEFAULT_SHARED_DIR;
  return std::filesystem::path(shared) / "conformance" / "stablehlo-testdata";
}

TEST(FusionPlan, ConformanceProgramsKeepTheirResults) {
  const auto dir = conformance_dir();
  if (!std::filesystem::is_directory(dir))
    GTEST_SKIP() << "no conformance data at " << dir << " (set CUJAX_SHARED_DIR)";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".mlir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  int planned = 0, with_groups = 0;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    std::unique_ptr<ir::Module> m;
    try {
      m = ir::parse_module(ss.str());
      runtime::get_backend("cpu").compile(*m);
    } catch (const Error&) {
      continue;  // what the CPU backend cannot run is the conformance suite's business
    }
    const ir::Block& block = m->lookup("main")->entry();
    const FusionPlan plan = compiler::plan_fusion(block, block.ops.size() - 1);
    ++planned;
    if (plan.groups.empty()) continue;
    ++with_groups;
    SCOPED_TRACE(f.filename().string());
    expect_same_results(*m, plan, {}, f.filename().string());
  }
  std::cout << planned << " programs planned, " << with_groups << " with fusions\n";
  EXPECT_GT(with_groups, 100);
}

}  // namespace
}  // namespace cujax
