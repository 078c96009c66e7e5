// Row reductions fused with their element-wise producers and consumers in the CPU backend
// (softmax, layer norm, cross-entropy): the fused step must give the same bits as the program
// run op by op with fusion switched off, on odd sizes, broadcasts, rows split across tiles and
// threads, NaN and signed zeros, predicates, and element types the fuser leaves alone.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/fusion.h"
#include "cpu_fusion_util.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

using namespace testutil;

// Replaces every "$NAME" of `vars` in `text`, longest names first.
std::string fill(std::string text, const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& [name, value] : vars)
    for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at))
      text.replace(at, name.size(), value), at += value.size();
  return text;
}

// nn::softmax over the last axis, as cujax traces it.
const char* kSoftmax = R"(
func.func public @main(%x: tensor<$Sxf32>) -> tensor<$Sxf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [$LAST] : (tensor<$Sxf32>, tensor<f32>) -> tensor<$Mxf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [$KEPT] : (tensor<$Mxf32>) -> tensor<$Sxf32>
  %d = stablehlo.subtract %x, %mb : tensor<$Sxf32>
  %e = stablehlo.exponential %d : tensor<$Sxf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [$LAST] : (tensor<$Sxf32>, tensor<f32>) -> tensor<$Mxf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [$KEPT] : (tensor<$Mxf32>) -> tensor<$Sxf32>
  %y = stablehlo.divide %e, %sb : tensor<$Sxf32>
  return %y : tensor<$Sxf32>
}
)";

std::string softmax_module(const std::string& s, const std::string& m, const std::string& last,
                           const std::string& kept) {
  return fill(kSoftmax, {{"$S", s}, {"$M", m}, {"$LAST", last}, {"$KEPT", kept}});
}

TEST(CpuRowFusion, SoftmaxIsOneStepAndBitIdentical) {
  const std::string text = softmax_module("5x7x33", "5x7", "2", "0, 1");
  const cpu::FusionPlan plan = plan_of(text);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].outputs.size(), 1u);  // only %y reaches memory
  EXPECT_EQ(plan.steps[0].ops.size(), 7u);      // both reduces, both broadcasts, three maps
  const std::vector<HostTensor> args = {random_f32({5, 7, 33}, 1)};
  const auto fused = run(text, args, true);
  expect_bit_identical(fused, run(text, args, false));
  // And it is a softmax: each row sums to 1.
  const float* y = fused[0].data_as<float>();
  for (int r = 0; r < 35; ++r) {
    double sum = 0;
    for (int k = 0; k < 33; ++k) sum += y[r * 33 + k];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
}

// Rows across tiles (a row longer than a tile) and threads (more than two grains of elements).
TEST(CpuRowFusion, LongRowsAndManyRows) {
  for (const auto& [s, m, shape] : std::vector<std::tuple<std::string, std::string, Shape>>{
           {"9x2051", "9", {9, 2051}}, {"601x129", "601", {601, 129}}}) {
    const std::string text = softmax_module(s, m, "1", "0");
    ASSERT_EQ(plan_of(text).steps.size(), 1u) << s;
    const std::vector<HostTensor> args = {random_f32(shape, 2, 30.0f)};
    expect_bit_identical(run(text, args, true), run(text, args, false));
  }
}

// NaN propagates through maximum, -0 and +0 compare as IEEE maximum orders them, and a row of
// -inf gives NaN: whatever the reduce kernel computes, the fused step computes too.
TEST(CpuRowFusion, NanInfAndSignedZeros) {
  const std::string text = softmax_module("12x5", "12", "1", "0");
  HostTensor x = random_f32({12, 5}, 3);
  float* d = x.data_as<float>();
  const float inf = std::numeric_limits<float>::infinity();
  d[2] = std::nanf("");
  for (int k = 0; k < 5; ++k) d[5 + k] = k % 2 ? 0.0f : -0.0f;
  for (int k = 0; k < 5; ++k) d[10 + k] = -inf;
  d[17] = inf;
  expect_bit_identical(run(text, {x}, true), run(text, {x}, false));
}

// Maximum and minimum rows fold without branches unless a row holds a NaN: each result must be
// the row's extreme in IEEE order (-0 < +0) or, with NaNs, the first NaN of the row with its
// payload, as a fold in order gives; rows of 40 span several vector widths and a remainder.
TEST(CpuRowFusion, MaxAndMinRowsKeepFirstNanAndSignedZeros) {
  const std::string text = R"(
func.func public @main(%x: tensor<16x40xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %pinf = stablehlo.constant dense<0x7F800000> : tensor<f32>
  %y = stablehlo.negate %x : tensor<16x40xf32>
  %mx = stablehlo.reduce(%y init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<16x40xf32>, tensor<f32>) -> tensor<16xf32>
  %mn = stablehlo.reduce(%y init: %pinf) applies stablehlo.minimum across dimensions = [1] : (tensor<16x40xf32>, tensor<f32>) -> tensor<16xf32>
  return %mx, %mn : tensor<16xf32>, tensor<16xf32>
}
)";
  ASSERT_EQ(plan_of(text).steps.size(), 1u);
  HostTensor x = random_f32({16, 40}, 11);
  float* d = x.data_as<float>();
  auto nan_with = [](uint32_t payload) { return std::bit_cast<float>(0x7fc00000u | payload); };
  d[1 * 40 + 7] = nan_with(5);  // two NaNs: the first one's payload wins
  d[1 * 40 + 30] = nan_with(9);
  d[2 * 40 + 39] = nan_with(3);  // in the remainder of the vector loop
  for (int k = 0; k < 40; ++k) d[3 * 40 + k] = k % 3 ? 0.0f : -0.0f;  // only zeros
  for (int k = 0; k < 40; ++k) d[4 * 40 + k] = -0.0f;
  const auto fused = run(text, {x}, true);
  expect_bit_identical(fused, run(text, {x}, false));
  // The reference: a fold in order over the negated row, as the spec defines the reduce.
  auto fold = [&](int row, bool max) {
    float acc =
        max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    for (int k = 0; k < 40; ++k) {
      const float v = -d[row * 40 + k];
      if (std::isnan(acc)) break;
      if (std::isnan(v) || (max ? v > acc : v < acc) ||
          (v == acc && std::signbit(v) != std::signbit(acc) && std::signbit(v) != max))
        acc = v;
    }
    return std::bit_cast<uint32_t>(acc);
  };
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(std::bit_cast<uint32_t>(fused[0].data_as<float>()[r]), fold(r, true)) << r;
    EXPECT_EQ(std::bit_cast<uint32_t>(fused[1].data_as<float>()[r]), fold(r, false)) << r;
  }
}

// nnx::LayerNorm: mean and mean of squares with keepdims (a reshape to [..., 1]), the variance
// clamped at 0, rsqrt of it plus epsilon, scale and bias broadcast along the rows; the mean is
// also returned (a per-row output), as a backward pass keeps it.
TEST(CpuRowFusion, LayerNormIsOneStepAndBitIdentical) {
  const std::string text = fill(
      R"(
func.func public @main(%x: tensor<3x11x67xf32>, %g: tensor<67xf32>, %b: tensor<67xf32>) -> (tensor<3x11x67xf32>, tensor<3x11x1xf32>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %n = stablehlo.constant dense<6.700000e+01> : tensor<f32>
  %eps = stablehlo.constant dense<9.99999974E-6> : tensor<f32>
  %s1 = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [2] : ($X, tensor<f32>) -> $M
  %nb = stablehlo.broadcast_in_dim %n, dims = [] : (tensor<f32>) -> $M
  %mean = stablehlo.divide %s1, %nb : $M
  %mean1 = stablehlo.reshape %mean : ($M) -> $M1
  %x2 = stablehlo.multiply %x, %x : $X
  %s2 = stablehlo.reduce(%x2 init: %zero) applies stablehlo.add across dimensions = [2] : ($X, tensor<f32>) -> $M
  %ms = stablehlo.divide %s2, %nb : $M
  %ms1 = stablehlo.reshape %ms : ($M) -> $M1
  %mm = stablehlo.multiply %mean1, %mean1 : $M1
  %v0 = stablehlo.subtract %ms1, %mm : $M1
  %zb = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> $M1
  %v = stablehlo.maximum %v0, %zb : $M1
  %eb = stablehlo.broadcast_in_dim %eps, dims = [] : (tensor<f32>) -> $M1
  %ve = stablehlo.add %v, %eb : $M1
  %r = stablehlo.rsqrt %ve : $M1
  %meanb = stablehlo.broadcast_in_dim %mean1, dims = [0, 1, 2] : ($M1) -> $X
  %c = stablehlo.subtract %x, %meanb : $X
  %rb = stablehlo.broadcast_in_dim %r, dims = [0, 1, 2] : ($M1) -> $X
  %y0 = stablehlo.multiply %c, %rb : $X
  %gb = stablehlo.broadcast_in_dim %g, dims = [2] : (tensor<67xf32>) -> $X
  %y1 = stablehlo.multiply %y0, %gb : $X
  %bb = stablehlo.broadcast_in_dim %b, dims = [2] : (tensor<67xf32>) -> $X
  %y = stablehlo.add %y1, %bb : $X
  return %y, %mean1 : $X, $M1
}
)",
      {{"$X", "tensor<3x11x67xf32>"}, {"$M1", "tensor<3x11x1xf32>"}, {"$M", "tensor<3x11xf32>"}});
  const cpu::FusionPlan plan = plan_of(text);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].outputs.size(), 2u);  // %mean1 and %y
  const std::vector<HostTensor> args = {random_f32({3, 11, 67}, 4), random_f32({67}, 5),
                                        random_f32({67}, 6)};
  const auto fused = run(text, args, true);
  expect_bit_identical(fused, run(text, args, false));
  // Each row of (y - b) / g has mean 0.
  const float* y = fused[0].data_as<float>();
  const float* g = args[1].data_as<float>();
  const float* b = args[2].data_as<float>();
  for (int r = 0; r < 33; ++r) {
    double sum = 0;
    for (int k = 0; k < 67; ++k) sum += (y[r * 67 + k] - b[k]) / g[k];
    EXPECT_NEAR(sum / 67, 0.0, 1e-3) << "row " << r;
  }
}

// Cross-entropy against one-hot labels built in the program (iota, compare, select: predicates
// in the row), the per-row loss a log of a per-row sum, then its mean over rows: a reduce of
// per-row values, which runs after the fused step.
TEST(CpuRowFusion, CrossEntropyWithPredicatesAndPerRowLoss) {
  const std::string text = fill(R"(
func.func public @main(%z: $X, %label: tensor<17xi32>) -> (tensor<17xf32>, tensor<f32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %one = stablehlo.constant dense<1.000000e+00> : tensor<f32>
  %io = stablehlo.iota dim = 1 : tensor<17x257xi32>
  %lb = stablehlo.broadcast_in_dim %label, dims = [0] : (tensor<17xi32>) -> tensor<17x257xi32>
  %hit = stablehlo.compare EQ, %io, %lb, SIGNED : (tensor<17x257xi32>, tensor<17x257xi32>) -> tensor<17x257xi1>
  %m = stablehlo.reduce(%z init: %ninf) applies stablehlo.maximum across dimensions = [1] : ($X, tensor<f32>) -> $M
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : ($M) -> $X
  %sh = stablehlo.subtract %z, %mb : $X
  %e = stablehlo.exponential %sh : $X
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : ($X, tensor<f32>) -> $M
  %lse = stablehlo.log %s : $M
  %lseb = stablehlo.broadcast_in_dim %lse, dims = [0] : ($M) -> $X
  %logp = stablehlo.subtract %sh, %lseb : $X
  %ob = stablehlo.broadcast_in_dim %one, dims = [] : (tensor<f32>) -> $X
  %zb = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> $X
  %onehot = stablehlo.select %hit, %ob, %zb : tensor<17x257xi1>, $X
  %pick = stablehlo.multiply %onehot, %logp : $X
  %nll = stablehlo.reduce(%pick init: %zero) applies stablehlo.add across dimensions = [1] : ($X, tensor<f32>) -> $M
  %loss = stablehlo.negate %nll : $M
  %total = stablehlo.reduce(%loss init: %zero) applies stablehlo.add across dimensions = [0] : ($M, tensor<f32>) -> tensor<f32>
  return %loss, %total : $M, tensor<f32>
}
)",
                                {{"$X", "tensor<17x257xf32>"}, {"$M", "tensor<17xf32>"}});
  const cpu::FusionPlan plan = plan_of(text);
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].outputs.size(), 1u);  // %loss
  std::vector<int32_t> labels(17);
  for (int r = 0; r < 17; ++r) labels[r] = (r * 37) % 257;
  const std::vector<HostTensor> args = {random_f32({17, 257}, 7),
                                        HostTensor::from_vector(labels, {17})};
  const auto fused = run(text, args, true);
  expect_bit_identical(fused, run(text, args, false));
  // Against a direct loop in double.
  const float* z = args[0].data_as<float>();
  for (int r = 0; r < 17; ++r) {
    double mx = -1e30, sum = 0;
    for (int k = 0; k < 257; ++k) mx = std::max(mx, double(z[r * 257 + k]));
    for (int k = 0; k < 257; ++k) sum += std::exp(z[r * 257 + k] - mx);
    const double loss = std::log(sum) + mx - z[r * 257 + labels[r]];
    EXPECT_NEAR(fused[0].data_as<float>()[r], loss, 1e-4 * std::max(1.0, loss)) << "row " << r;
  }
}

// A broadcast back along the rows computed inside one fused step and read again by a later one:
// the first step writes out the per-row source, not the broadcast, and the later step reads it
// through a view.
TEST(CpuRowFusion, ExpandReadByALaterStep) {
  const std::string text = R"(
func.func public @main(%x: tensor<24x40xf32>) -> tensor<24x40xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<24x40xf32>, tensor<f32>) -> tensor<24xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<24xf32>) -> tensor<24x40xf32>
  %d = stablehlo.subtract %x, %mb : tensor<24x40xf32>
  %dt = stablehlo.transpose %d, dims = [1, 0] : (tensor<24x40xf32>) -> tensor<40x24xf32>
  %back = stablehlo.transpose %dt, dims = [1, 0] : (tensor<40x24xf32>) -> tensor<24x40xf32>
  %w = stablehlo.multiply %back, %mb : tensor<24x40xf32>
  %w2 = stablehlo.add %w, %back : tensor<24x40xf32>
  return %w2 : tensor<24x40xf32>
}
)";
  auto module = ir::parse_module(text);  // kept alive: the plan points into it
  const ir::Block& block = module->lookup("main")->body.front();
  const cpu::FusionPlan plan = cpu::plan_fusion(block, block.ops.size() - 1);
  ASSERT_EQ(plan.steps.size(), 2u);
  ASSERT_EQ(plan.steps[0].outputs.size(), 2u);  // %m and %d
  EXPECT_EQ(plan.steps[0].outputs[0]->type.shape, (Shape{24}));
  EXPECT_EQ(plan.steps[1].inputs.size(), 2u);  // %back and %m
  const std::vector<HostTensor> args = {random_f32({24, 40}, 10)};
  expect_bit_identical(run(text, args, true), run(text, args, false));
}

// Element types the fuser does not compute (f16, bf16, i32) and reduces it does not take (a
// leading dimension, fewer than 8 rows, a non-f32 input) run as their own steps, with the same
// results as without fusion.
TEST(CpuRowFusion, OtherTypesAndReductionsStayUnfused) {
  const std::string text = R"(
func.func public @main(%x: tensor<16x9xf32>, %h: tensor<16x9xf16>, %i: tensor<16x9xi32>, %w: tensor<4x9xf32>) -> (tensor<9xf32>, tensor<16xf16>, tensor<16xi32>, tensor<4xf32>, tensor<16x9xbf16>) {
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %zh = stablehlo.constant dense<0.000000e+00> : tensor<f16>
  %zi = stablehlo.constant dense<0> : tensor<i32>
  %x2 = stablehlo.multiply %x, %x : tensor<16x9xf32>
  %c = stablehlo.reduce(%x2 init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<16x9xf32>, tensor<f32>) -> tensor<9xf32>
  %h2 = stablehlo.multiply %h, %h : tensor<16x9xf16>
  %hs = stablehlo.reduce(%h2 init: %zh) applies stablehlo.add across dimensions = [1] : (tensor<16x9xf16>, tensor<f16>) -> tensor<16xf16>
  %i2 = stablehlo.multiply %i, %i : tensor<16x9xi32>
  %is = stablehlo.reduce(%i2 init: %zi) applies stablehlo.add across dimensions = [1] : (tensor<16x9xi32>, tensor<i32>) -> tensor<16xi32>
  %w2 = stablehlo.multiply %w, %w : tensor<4x9xf32>
  %ws = stablehlo.reduce(%w2 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x9xf32>, tensor<f32>) -> tensor<4xf32>
  %xb = stablehlo.convert %x2 : (tensor<16x9xf32>) -> tensor<16x9xbf16>
  return %c, %hs, %is, %ws, %xb : tensor<9xf32>, tensor<16xf16>, tensor<16xi32>, tensor<4xf32>, tensor<16x9xbf16>
}
)";
  const cpu::FusionPlan plan = plan_of(text);
  EXPECT_TRUE(plan.steps.empty());  // no run of two fusible ops
  HostTensor i = HostTensor::from_vector(std::vector<int32_t>(144, 3), {16, 9});
  HostTensor h = HostTensor::from_vector(std::vector<float16>(144, float16(0.75f)), {16, 9});
  const std::vector<HostTensor> args = {random_f32({16, 9}, 8), h, i, random_f32({4, 9}, 9)};
  expect_bit_identical(run(text, args, true), run(text, args, false));
}

}  // namespace
}  // namespace cujax
