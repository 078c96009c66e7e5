// Element-wise fusion in the CPU backend: fused programs must give bit-identical results to the
// per-op kernels (the same functors run in the same order), including broadcast views, values
// used after a fused run, predicates, and sizes that split across tiles and threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>

#include "backends/cpu/fusion.h"
#include "cpu_fusion_util.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

using namespace testutil;

// GELU (tanh form) with a bias: splat constants, a trailing-dimension bias view, the bias-add
// result used again after the run (as the backward pass does), then a reduce that cannot fuse.
std::string gelu_module(const std::string& s, const std::string& bias) {
  const std::string t = "tensor<" + s + "xf32>";
  return R"(
func.func public @main(%x: )" +
         t + R"(, %b: tensor<)" + bias + R"(xf32>) -> ()" + t + ", " + t +
         R"(, tensor<f32>) {
  %half = stablehlo.constant dense<5.000000e-01> : tensor<f32>
  %c = stablehlo.constant dense<4.471500e-02> : tensor<f32>
  %k = stablehlo.constant dense<0.797884583> : tensor<f32>
  %one = stablehlo.constant dense<1.000000e+00> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %bb = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<)" +
         bias + "xf32>) -> " + t + R"(
  %h = stablehlo.add %x, %bb : )" +
         t + R"(
  %h2 = stablehlo.multiply %h, %h : )" +
         t + R"(
  %h3 = stablehlo.multiply %h2, %h : )" +
         t + R"(
  %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> )" +
         t + R"(
  %ch3 = stablehlo.multiply %cb, %h3 : )" +
         t + R"(
  %inner = stablehlo.add %h, %ch3 : )" +
         t + R"(
  %kb = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<f32>) -> )" +
         t + R"(
  %arg = stablehlo.multiply %kb, %inner : )" +
         t + R"(
  %th = stablehlo.tanh %arg : )" +
         t + R"(
  %ob = stablehlo.broadcast_in_dim %one, dims = [] : (tensor<f32>) -> )" +
         t + R"(
  %p1 = stablehlo.add %ob, %th : )" +
         t + R"(
  %hb = stablehlo.broadcast_in_dim %half, dims = [] : (tensor<f32>) -> )" +
         t + R"(
  %g0 = stablehlo.multiply %hb, %p1 : )" +
         t + R"(
  %g = stablehlo.multiply %h, %g0 : )" +
         t + R"(
  %sum = stablehlo.reduce(%g init: %zero) applies stablehlo.add across dimensions = [0, 1] : ()" +
         t + R"(, tensor<f32>) -> tensor<f32>
  return %h, %g, %sum : )" +
         t + ", " + t + R"(, tensor<f32>
}
)";
}

TEST(CpuFusion, GeluChainIsOneStepAndBitIdentical) {
  const std::string text = gelu_module("64x96", "96");
  const cpu::FusionPlan plan = plan_of(text);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].outputs.size(), 2u);  // %h (used by the return) and %g
  // x, the bias source and the scalar constants; the broadcasts are read in place.
  EXPECT_EQ(plan.steps[0].inputs.size(), 6u);
  const auto args = std::vector<HostTensor>{random_f32({64, 96}, 1), random_f32({96}, 2)};
  expect_bit_identical(run(text, args, true), run(text, args, false));
}

// Large enough to split across threads, with rows that straddle tiles.
TEST(CpuFusion, ViewsAcrossTilesAndThreads) {
  const std::string text = gelu_module("7x10001", "10001");
  const auto args = std::vector<HostTensor>{random_f32({7, 10001}, 3), random_f32({10001}, 4)};
  expect_bit_identical(run(text, args, true), run(text, args, false));
}

// A per-row statistic broadcast along the trailing dimension (repeat), a compare and a select,
// a broadcast that is also used by an op outside the run (so it is materialized too), and ops
// in between that the run is fused across.
TEST(CpuFusion, RowViewsPredicatesAndSharedBroadcasts) {
  const std::string text = R"(
func.func public @main(%x: tensor<5x3x4099xf32>, %m: tensor<5x3xf32>) -> (tensor<5x3x4099xf32>, tensor<5x3x4099xi1>, tensor<5x3x4099xf32>) {
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1] : (tensor<5x3xf32>) -> tensor<5x3x4099xf32>
  %d = stablehlo.subtract %x, %mb : tensor<5x3x4099xf32>
  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %zb = stablehlo.broadcast_in_dim %z, dims = [] : (tensor<f32>) -> tensor<5x3x4099xf32>
  %pos = stablehlo.compare GT, %d, %zb, FLOAT : (tensor<5x3x4099xf32>, tensor<5x3x4099xf32>) -> tensor<5x3x4099xi1>
  %e = stablehlo.exponential %d : tensor<5x3x4099xf32>
  %r = stablehlo.select %pos, %d, %e : tensor<5x3x4099xi1>, tensor<5x3x4099xf32>
  %neg = stablehlo.not %pos : tensor<5x3x4099xi1>
  %w = stablehlo.multiply %mb, %mb : tensor<5x3x4099xf32>
  %t = stablehlo.transpose %mb, dims = [0, 2, 1] : (tensor<5x3x4099xf32>) -> tensor<5x4099x3xf32>
  %tt = stablehlo.transpose %t, dims = [0, 2, 1] : (tensor<5x4099x3xf32>) -> tensor<5x3x4099xf32>
  %sum = stablehlo.add %w, %tt : tensor<5x3x4099xf32>
  %out = stablehlo.add %sum, %r : tensor<5x3x4099xf32>
  return %r, %neg, %out : tensor<5x3x4099xf32>, tensor<5x3x4099xi1>, tensor<5x3x4099xf32>
}
)";
  const cpu::FusionPlan plan = plan_of(text);
  // One run: the constant and the transposes between its members read none of them.
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].outputs.size(), 3u);  // %r, %neg, %out
  EXPECT_FALSE(plan.absorbed[0]);               // %mb: the transpose reads it too
  const auto args = std::vector<HostTensor>{random_f32({5, 3, 4099}, 5), random_f32({5, 3}, 6)};
  expect_bit_identical(run(text, args, true), run(text, args, false));
}

// Ops of other types or shapes do not join a run; a single op is left to its own kernel.
TEST(CpuFusion, OnlyRunsOfTwoOrMoreSameShapeOpsFuse) {
  const std::string text = R"(
func.func public @main(%x: tensor<8xf32>, %y: tensor<4xf32>, %i: tensor<8xi32>) -> (tensor<8xf32>, tensor<4xf32>, tensor<8xi32>) {
  %a = stablehlo.add %x, %x : tensor<8xf32>
  %b = stablehlo.multiply %y, %y : tensor<4xf32>
  %c = stablehlo.negate %a : tensor<8xf32>
  %j = stablehlo.add %i, %i : tensor<8xi32>
  %k = stablehlo.multiply %j, %i : tensor<8xi32>
  return %c, %b, %k : tensor<8xf32>, tensor<4xf32>, tensor<8xi32>
}
)";
  const cpu::FusionPlan plan = plan_of(text);
  ASSERT_EQ(plan.steps.size(), 1u);  // %a and %c; %b and the i32 ops run as their own steps
  EXPECT_TRUE(plan.absorbed[0]);
  EXPECT_EQ(plan.step_at[2], 0);
  for (size_t i : {1, 3, 4}) EXPECT_TRUE(!plan.absorbed[i] && plan.step_at[i] < 0) << "op " << i;
  const auto args = std::vector<HostTensor>{
      random_f32({8}, 7), random_f32({4}, 8),
      HostTensor::from_vector(std::vector<int32_t>{1, -2, 3, 4, 5, 6, 7, 8}, {8})};
  expect_bit_identical(run(text, args, true), run(text, args, false));
}

// Runs of two shapes interleave; an op that reads a member of an open run closes it, so the
// reader sees the fused step's result.
TEST(CpuFusion, InterleavedRunsAndReadersOfMembers) {
  const std::string text = R"(
func.func public @main(%x: tensor<16x32xf32>, %y: tensor<32x16xf32>) -> (tensor<16x32xf32>, tensor<32x16xf32>) {
  %a = stablehlo.multiply %x, %x : tensor<16x32xf32>
  %p = stablehlo.add %y, %y : tensor<32x16xf32>
  %b = stablehlo.add %a, %x : tensor<16x32xf32>
  %q = stablehlo.multiply %p, %y : tensor<32x16xf32>
  %bt = stablehlo.transpose %b, dims = [1, 0] : (tensor<16x32xf32>) -> tensor<32x16xf32>
  %r = stablehlo.subtract %q, %bt : tensor<32x16xf32>
  %c = stablehlo.tanh %b : tensor<16x32xf32>
  %d = stablehlo.multiply %c, %a : tensor<16x32xf32>
  return %d, %r : tensor<16x32xf32>, tensor<32x16xf32>
}
)";
  const cpu::FusionPlan plan = plan_of(text);
  // {%a, %b} (closed by the transpose), {%p, %q, %r}, {%c, %d}.
  ASSERT_EQ(plan.steps.size(), 3u);
  const auto args = std::vector<HostTensor>{random_f32({16, 32}, 9), random_f32({32, 16}, 10)};
  expect_bit_identical(run(text, args, true), run(text, args, false));
}

// The causal-mask pattern of attention and of the max-reduction's gradient: compare, convert
// to f32 and back, a mask broadcast from (1, 1, T, S) and a select.
TEST(CpuFusion, ConvertsAndMaskViews) {
  const std::string text = R"(
func.func public @main(%x: tensor<2x3x40x40xf32>, %m: tensor<1x1x40x40xi1>, %mx: tensor<2x3x40xf32>) -> (tensor<2x3x40x40xf32>, tensor<2x3x40x40xi1>) {
  %mb = stablehlo.broadcast_in_dim %m, dims = [0, 1, 2, 3] : (tensor<1x1x40x40xi1>) -> tensor<2x3x40x40xi1>
  %big = stablehlo.constant dense<-1.000000e+09> : tensor<f32>
  %bb = stablehlo.broadcast_in_dim %big, dims = [] : (tensor<f32>) -> tensor<2x3x40x40xf32>
  %s = stablehlo.select %mb, %x, %bb : tensor<2x3x40x40xi1>, tensor<2x3x40x40xf32>
  %mxb = stablehlo.broadcast_in_dim %mx, dims = [0, 1, 2] : (tensor<2x3x40xf32>) -> tensor<2x3x40x40xf32>
  %eq = stablehlo.compare EQ, %s, %mxb, FLOAT : (tensor<2x3x40x40xf32>, tensor<2x3x40x40xf32>) -> tensor<2x3x40x40xi1>
  %f = stablehlo.convert %eq : (tensor<2x3x40x40xi1>) -> tensor<2x3x40x40xf32>
  %g = stablehlo.multiply %f, %x : tensor<2x3x40x40xf32>
  %back = stablehlo.convert %g : (tensor<2x3x40x40xf32>) -> tensor<2x3x40x40xi1>
  return %g, %back : tensor<2x3x40x40xf32>, tensor<2x3x40x40xi1>
}
)";
  const cpu::FusionPlan plan = plan_of(text);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].outputs.size(), 2u);
  // Some rows hit their maximum exactly, so the comparison is true in places.
  HostTensor x = random_f32({2, 3, 40, 40}, 11);
  std::vector<float> row_max(2 * 3 * 40, -1e9f);
  std::vector<bool> mask_values(40 * 40);
  for (int q = 0; q < 40; ++q)
    for (int k = 0; k < 40; ++k) mask_values[q * 40 + k] = k <= q;
  const float* xd = x.data_as<float>();
  for (int r = 0; r < 2 * 3 * 40; ++r)
    for (int k = 0; k <= r % 40; ++k) row_max[r] = std::max(row_max[r], xd[r * 40 + k]);
  std::vector<uint8_t> mask_bytes(mask_values.begin(), mask_values.end());
  HostTensor mask = HostTensor::from_bytes(DType::Bool, {1, 1, 40, 40},
                                           std::as_bytes(std::span<const uint8_t>(mask_bytes)));
  const auto args = std::vector<HostTensor>{x, mask, HostTensor::from_vector(row_max, {2, 3, 40})};
  const auto fused = run(text, args, true);
  expect_bit_identical(fused, run(text, args, false));
  int hits = 0;
  for (int64_t i = 0; i < fused[0].size(); ++i) hits += fused[0].data_as<float>()[i] != 0;
  EXPECT_EQ(hits, 2 * 3 * 40);  // one maximum per row
}

// A later group recomputes a cheap value of an earlier one (%b = %a + %a) instead of reading
// it, and reads what the recomputation needs: %a, an exponential (computed once, not again),
// which the earlier group must then write out though no other op reads it. The GELU gradient
// reads tanh(...) the same way.
TEST(CpuFusion, RecomputedValueReadsAPreciseValueOfTheEarlierGroup) {
  const std::string text = R"(
func.func public @main(%x: tensor<64x40xf32>) -> tensor<64x40xf32> {
  %a = stablehlo.exponential %x : tensor<64x40xf32>
  %b = stablehlo.add %a, %a : tensor<64x40xf32>
  %t = stablehlo.transpose %b, dims = [1, 0] : (tensor<64x40xf32>) -> tensor<40x64xf32>
  %tt = stablehlo.transpose %t, dims = [1, 0] : (tensor<40x64xf32>) -> tensor<64x40xf32>
  %d = stablehlo.multiply %tt, %b : tensor<64x40xf32>
  %e = stablehlo.add %d, %tt : tensor<64x40xf32>
  return %e : tensor<64x40xf32>
}
)";
  auto module = ir::parse_module(text);  // kept alive: the plan points into it
  const ir::Block& block = module->lookup("main")->body.front();
  const cpu::FusionPlan plan = cpu::plan_fusion(block, block.ops.size() - 1);
  ASSERT_EQ(plan.steps.size(), 2u);
  ASSERT_EQ(plan.steps[0].outputs.size(), 2u);  // %a for the recomputation, %b for %t
  EXPECT_EQ(plan.steps[0].outputs[0], block.ops[0]->result(0));
  ASSERT_EQ(plan.steps[1].inputs.size(), 2u);  // %tt and %a, not %b
  EXPECT_EQ(plan.steps[1].inputs[1], block.ops[0]->result(0));
  EXPECT_EQ(plan.steps[1].ops.size(), 3u);  // %b again, %d, %e
  const std::vector<HostTensor> args = {random_f32({64, 40}, 12, 1.0f)};
  const auto fused = run(text, args, true);
  expect_bit_identical(fused, run(text, args, false));
  // And the value itself: (e^x + e^x) * (e^x + e^x) + (e^x + e^x), in f32 steps.
  const float* x = args[0].data_as<float>();
  for (int i = 0; i < 64 * 40; i += 97) {
    const float b = std::exp(x[i]) + std::exp(x[i]);
    EXPECT_NEAR(fused[0].data_as<float>()[i], b * b + b, 1e-5f * (b * b + b)) << i;
  }
}

}  // namespace
}  // namespace cujax
