// Quantized types (`!quant.uniform`): the text format, the verifier's rules, and programs on the
// CPU backend against the spec's formulas evaluated here element by element in the expressed
// type (quantize: clamp(x / scale + zero_point) rounded to nearest even; dequantize:
// (q - zero_point) * scale; any other op: dequantize, compute, quantize).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/core/host_tensor.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "cujax/ir/verifier.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

std::vector<HostTensor> run(const std::string& text, const std::vector<HostTensor>& inputs = {}) {
  auto module = ir::parse_module(text);
  ir::verify(*module);
  return runtime::get_backend("cpu").compile(*module, "main")->execute_on_host(inputs);
}

// What parsing, verifying or compiling `text` for the CPU reports; empty when all pass.
std::string error_of(const std::string& text) {
  try {
    auto module = ir::parse_module(text);
    ir::verify(*module);
    runtime::get_backend("cpu").compile(*module, "main");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The spec's quantize of one element, in f32 (the expressed type of every program here).
int64_t quantize_ref(float x, double scale, int64_t zero_point, int64_t lo, int64_t hi) {
  float t = x / static_cast<float>(scale) + static_cast<float>(zero_point);
  t = std::clamp(t, static_cast<float>(lo), static_cast<float>(hi));
  return static_cast<int64_t>(std::nearbyint(t));  // the default mode: to nearest, ties to even
}

float dequantize_ref(int64_t q, double scale, int64_t zero_point) {
  return static_cast<float>(q - zero_point) * static_cast<float>(scale);
}

std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

template <class T>
std::vector<int64_t> ints_of(const HostTensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.size(); ++i) v.push_back(t.data_as<T>()[i]);
  return v;
}

TEST(QuantizedText, ParsePrintRoundTrip) {
  const std::string text =
      R"(func.func @main(%arg0: tensor<2x3x!quant.uniform<i8<-127:127>:f32:1, {0.1:-30, 0.5:-20, 2.0}>>) -> tensor<2x3xf32> {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2x!quant.uniform<u8:f32, 0.25:128>>
  %1 = stablehlo.uniform_dequantize %arg0 : (tensor<2x3x!quant.uniform<i8<-127:127>:f32:1, {0.1:-30, 0.5:-20, 2.0}>>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
})";
  auto m = ir::parse_module(text);
  ir::verify(*m);
  const ir::Type arg = m->lookup("main")->arg_types()[0];
  ASSERT_TRUE(arg.is_quantized());
  EXPECT_EQ(arg.dtype, DType::I8);
  const ir::QuantizedType& q = *arg.quantized;
  EXPECT_EQ(q.storage_min, -127);
  EXPECT_EQ(q.storage_max, 127);
  EXPECT_EQ(q.expressed, DType::F32);
  EXPECT_EQ(q.quantization_dimension, 1);
  EXPECT_EQ(q.scales, (std::vector<double>{0.1, 0.5, 2.0}));
  EXPECT_EQ(q.zero_points, (std::vector<int64_t>{-30, -20, 0}));
  const std::string printed = ir::print_module(*m);
  EXPECT_NE(printed.find("tensor<2x3x!quant.uniform<i8<-127:127>:f32:1, {1.000000e-01:-30, "
                         "5.000000e-01:-20, 2.000000e+00:0}>>"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("dense<[1, 2]> : tensor<2x!quant.uniform<u8:f32, 2.500000e-01:128>>"),
            std::string::npos)
      << printed;
  auto again = ir::parse_module(printed);
  EXPECT_EQ(ir::print_module(*again), printed);
  // A type differs from another in any parameter.
  const auto type = [](const std::string& element) {
    auto mod = ir::parse_module("func.func @main(%a: tensor<2x" + element + ">) {\n  return\n}");
    return mod->lookup("main")->arg_types()[0];
  };
  EXPECT_EQ(type("!quant.uniform<i8:f32, 0.1:-30>"), type("!quant.uniform<i8:f32, 1.0e-1:-30>"));
  EXPECT_NE(type("!quant.uniform<i8:f32, 0.1:-30>"), type("!quant.uniform<i8:f32, 0.1:-29>"));
  EXPECT_NE(type("!quant.uniform<i8:f32, 0.1:-30>"), type("!quant.uniform<i8:f16, 0.1:-30>"));
  EXPECT_NE(type("!quant.uniform<i8:f32, 0.1:-30>"), type("i8"));
}

TEST(QuantizedText, MalformedTypesAreNamed) {
  const auto error = [](const std::string& element) -> std::string {
    try {
      ir::parse_module("func.func @main(%a: tensor<2x" + element + ">) {\n  return\n}");
    } catch (const Error& e) {
      return e.what();
    }
    return "parsed";
  };
  EXPECT_NE(error("!quant.uniform<i8:f32, 0.1:200>").find("zero point 200 is outside"),
            std::string::npos);
  EXPECT_NE(error("!quant.uniform<i8:f32:0, {0.1:1, 0.2:2, 0.3:3}>").find("3 scales"),
            std::string::npos);
  EXPECT_NE(error("!quant.uniform<i8:f32:1, {0.1:1}>").find("out of range for rank 1"),
            std::string::npos);
  EXPECT_NE(error("!quant.uniform<i8:f32, {0.1:1}>").find("needs a quantization dimension"),
            std::string::npos);
  EXPECT_NE(error("!quant.uniform<i32:f32, 0.1:1>").find("must be narrower than f32"),
            std::string::npos);
  EXPECT_NE(error("!quant.uniform<i8:f32, -0.1:1>").find("must be positive"), std::string::npos);
  EXPECT_NE(error("!quant.uniform<i8<5:3>:f32, 0.1:4>").find("storage range 5:3"),
            std::string::npos);
  EXPECT_NE(error("!quant.uniform<f8:f32, 0.1:1>").find("storage type"), std::string::npos);
  EXPECT_NE(error("!quant.uniform<i8:i16, 0.1:1>").find("expressed type"), std::string::npos);
  EXPECT_NE(error("!quant.any<i8:f32>").find("only !quant.uniform"), std::string::npos);
}

TEST(QuantizedVerifier, OpsAreCheckedOnWhatTheValuesStandFor) {
  const std::string q1 = "tensor<2x!quant.uniform<i8:f32, 0.1:-30>>";
  const std::string q2 = "tensor<2x!quant.uniform<i8:f32, 0.5:-20>>";
  // add of differently quantized operands is an add of f32 tensors
  EXPECT_EQ(error_of("func.func @main(%a: " + q1 + ", %b: " + q2 + ") -> " + q2 +
                     " {\n  %0 = stablehlo.add %a, %b : (" + q1 + ", " + q2 + ") -> " + q2 +
                     "\n  return %0 : " + q2 + "\n}"),
            "");
  EXPECT_NE(error_of("func.func @main(%a: tensor<3xf32>) -> " + q1 +
                     " {\n  %0 = stablehlo.uniform_quantize %a : (tensor<3xf32>) -> " + q1 +
                     "\n  return %0 : " + q1 + "\n}")
                .find("stablehlo.uniform_quantize"),
            std::string::npos);
  EXPECT_NE(error_of("func.func @main(%a: " + q1 +
                     ") -> tensor<2xf16> {\n  %0 = stablehlo.uniform_dequantize %a : (" + q1 +
                     ") -> tensor<2xf16>\n  return %0 : tensor<2xf16>\n}")
                .find("expected tensor<2xf32>"),
            std::string::npos);
  // a function returning a quantized value must return that type, not its expressed one
  EXPECT_NE(
      error_of("func.func @main(%a: tensor<2xf32>) -> " + q1 + " {\n  return %a : " + q1 + "\n}"),
      "");
}

TEST(QuantizedCpu, QuantizeFollowsTheSpecPerTensorAndPerAxis) {
  // Values across the clamping range, and ties: with scale 0.5, x = 0.25 + k/2 is a tie.
  std::vector<float> x = random_floats(96, -60.0f, 60.0f, 7);
  for (int k = -8; k < 8; ++k) x.push_back(0.25f + 0.5f * static_cast<float>(k));
  const int64_t n = static_cast<int64_t>(x.size());
  const std::string f = "tensor<" + std::to_string(n / 4) + "x4xf32>";
  const auto shape = Shape{n / 4, 4};
  const std::vector<double> scales = {0.5, 0.1, 0.03, 2.0};
  const std::vector<int64_t> zps = {0, -30, 12, 100};
  const std::string per_axis = "tensor<" + std::to_string(n / 4) +
                               "x4x!quant.uniform<i8:f32:1, {0.5:0, 0.1:-30, 0.03:12, 2.0:100}>>";
  const std::string narrowed =
      "tensor<" + std::to_string(n / 4) + "x4x!quant.uniform<i8<-100:90>:f32, 0.5:3>>";
  const std::string unsigned8 =
      "tensor<" + std::to_string(n / 4) + "x4x!quant.uniform<u8:f32, 0.25:128>>";
  const std::string i8 = "tensor<" + std::to_string(n / 4) + "x4xi8>";
  const std::string u8 = "tensor<" + std::to_string(n / 4) + "x4xui8>";
  const auto r =
      run("func.func @main(%x: " + f + ") -> (" + i8 + ", " + i8 + ", " + u8 +
              ") {\n"
              "  %0 = stablehlo.uniform_quantize %x : (" +
              f + ") -> " + per_axis + "\n  %1 = stablehlo.uniform_quantize %x : (" + f + ") -> " +
              narrowed + "\n  %2 = stablehlo.uniform_quantize %x : (" + f + ") -> " + unsigned8 +
              "\n  %3 = stablehlo.bitcast_convert %0 : (" + per_axis + ") -> " + i8 +
              "\n  %4 = stablehlo.bitcast_convert %1 : (" + narrowed + ") -> " + i8 +
              "\n  %5 = stablehlo.bitcast_convert %2 : (" + unsigned8 + ") -> " + u8 +
              "\n  return %3, %4, %5 : " + i8 + ", " + i8 + ", " + u8 + "\n}",
          {HostTensor::from_vector(x, shape)});
  const auto per_axis_q = ints_of<int8_t>(r[0]);
  const auto narrowed_q = ints_of<int8_t>(r[1]);
  const auto unsigned_q = ints_of<uint8_t>(r[2]);
  int clamped = 0, ties = 0;
  for (int64_t i = 0; i < n; ++i) {
    const size_t c = static_cast<size_t>(i % 4);
    EXPECT_EQ(per_axis_q[i], quantize_ref(x[i], scales[c], zps[c], -128, 127)) << i;
    EXPECT_EQ(narrowed_q[i], quantize_ref(x[i], 0.5, 3, -100, 90)) << i;
    EXPECT_EQ(unsigned_q[i], quantize_ref(x[i], 0.25, 128, 0, 255)) << i;
    clamped += narrowed_q[i] == -100 || narrowed_q[i] == 90;
    ties += c == 0 && std::fabs(x[i] / 0.5f - std::round(x[i] / 0.5f)) == 0.5f;
  }
  EXPECT_GT(clamped, 4);  // the inputs reach past both ends of the narrowed range
  EXPECT_GT(ties, 2);     // and some are ties, which go to even
}

TEST(QuantizedCpu, DequantizeRequantizeAndOpsOnQuantizedValues) {
  // The interpreter suite's per-axis requantization, and an add of differently quantized values
  // computed on what they stand for.
  const std::string qa = "tensor<6x!quant.uniform<i8:f32, 0.1:-30>>";
  const std::string qb = "tensor<6x!quant.uniform<i8:f32, 0.5:-20>>";
  const std::string qc = "tensor<6x!quant.uniform<i8:f32, 0.2:5>>";
  const std::vector<int8_t> a = {-128, -30, 0, 17, 90, 127};
  const std::vector<int8_t> b = {-128, -20, -5, 0, 40, 127};
  const auto r =
      run("func.func @main(%a: tensor<6xi8>, %b: tensor<6xi8>) -> (tensor<6xf32>, "
          "tensor<6xi8>, tensor<6xi8>) {\n"
          "  %qa = stablehlo.bitcast_convert %a : (tensor<6xi8>) -> " +
              qa + "\n  %qb = stablehlo.bitcast_convert %b : (tensor<6xi8>) -> " + qb +
              "\n  %d = stablehlo.uniform_dequantize %qa : (" + qa +
              ") -> tensor<6xf32>\n"
              "  %rq = stablehlo.uniform_quantize %qa : (" +
              qa + ") -> " + qc + "\n  %s = stablehlo.add %qa, %qb : (" + qa + ", " + qb + ") -> " +
              qc + "\n  %0 = stablehlo.bitcast_convert %rq : (" + qc +
              ") -> tensor<6xi8>"
              "\n  %1 = stablehlo.bitcast_convert %s : (" +
              qc +
              ") -> tensor<6xi8>"
              "\n  return %d, %0, %1 : tensor<6xf32>, tensor<6xi8>, tensor<6xi8>\n}",
          {HostTensor::from_vector(a, {6}), HostTensor::from_vector(b, {6})});
  const auto requantized = ints_of<int8_t>(r[1]);
  const auto sums = ints_of<int8_t>(r[2]);
  for (size_t i = 0; i < a.size(); ++i) {
    const float da = dequantize_ref(a[i], 0.1, -30), db = dequantize_ref(b[i], 0.5, -20);
    EXPECT_EQ(r[0].data_as<float>()[i], da) << i;  // (a + 30) * 0.1f, exactly
    EXPECT_EQ(requantized[i], quantize_ref(da, 0.2, 5, -128, 127)) << i;
    EXPECT_EQ(sums[i], quantize_ref(da + db, 0.2, 5, -128, 127)) << i;
  }
  // q - zero point does not wrap in i8: 127 - (-30) = 157
  EXPECT_FLOAT_EQ(r[0].data_as<float>()[5], 15.7f);
}

TEST(QuantizedCpu, StoredIntegersCrossFunctionsAndControlFlow) {
  // A quantized argument and result, a call, and a while loop carrying a quantized value: they
  // pass the stored integers along untouched; the loop body requantizes on each trip.
  const std::string q = "tensor<3x!quant.uniform<i8:f32, 0.5:2>>";
  const auto r =
      run("func.func @main(%q: " + q + ") -> (" + q +
              ", tensor<3xf32>) {\n"
              "  %0 = func.call @twice(%q) : (" +
              q + ") -> " + q +
              "\n"
              "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
              "  %1:2 = stablehlo.while(%i = %c0, %v = %0) : tensor<i32>, " +
              q +
              "\n"
              "   cond {\n"
              "    %c2 = stablehlo.constant dense<2> : tensor<i32>\n"
              "    %lt = stablehlo.compare LT, %i, %c2 : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
              "    stablehlo.return %lt : tensor<i1>\n"
              "  } do {\n"
              "    %c1 = stablehlo.constant dense<1> : tensor<i32>\n"
              "    %n = stablehlo.add %i, %c1 : tensor<i32>\n"
              "    %w = stablehlo.add %v, %v : " +
              q +
              "\n"
              "    stablehlo.return %n, %w : tensor<i32>, " +
              q +
              "\n"
              "  }\n"
              "  %2 = stablehlo.uniform_dequantize %1#1 : (" +
              q +
              ") -> tensor<3xf32>\n"
              "  return %1#1, %2 : " +
              q +
              ", tensor<3xf32>\n"
              "}\n"
              "func.func private @twice(%x: " +
              q + ") -> " + q +
              " {\n"
              "  %0 = stablehlo.add %x, %x : " +
              q +
              "\n"
              "  return %0 : " +
              q +
              "\n"
              "}",
          {HostTensor::from_vector(std::vector<int8_t>{3, -1, 40}, {3})});
  ASSERT_EQ(r[0].dtype(), DType::I8);  // the result is its stored integers
  const std::vector<int8_t> in = {3, -1, 40};
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t v = in[i];
    for (int k = 0; k < 3; ++k) {  // the call, then two trips
      const float d = dequantize_ref(v, 0.5, 2);
      v = quantize_ref(d + d, 0.5, 2, -128, 127);
    }
    EXPECT_EQ(ints_of<int8_t>(r[0])[i], v) << i;
    EXPECT_EQ(r[1].data_as<float>()[i], dequantize_ref(v, 0.5, 2)) << i;
  }
}

TEST(QuantizedCpu, FourBitStorageAndF16Expressed) {
  // i4 storage goes on to the narrow types' lowering; f16 arithmetic rounds in f16.
  const std::string q4 = "tensor<8x!quant.uniform<i4:f32, 0.5:1>>";
  const std::string qh = "tensor<8x!quant.uniform<i8:f16, 0.125:-3>>";
  const std::vector<float> x = {-10.0f, -4.25f, -0.75f, 0.0f, 0.25f, 1.3f, 3.0f, 9.0f};
  const auto r =
      run("func.func @main(%x: tensor<8xf32>) -> (tensor<8xi4>, tensor<8xi8>) {\n"
          "  %0 = stablehlo.uniform_quantize %x : (tensor<8xf32>) -> " +
              q4 + "\n  %1 = stablehlo.bitcast_convert %0 : (" + q4 + ") -> tensor<8xi4>" +
              "\n  %h = stablehlo.convert %x : (tensor<8xf32>) -> tensor<8xf16>" +
              "\n  %2 = stablehlo.uniform_quantize %h : (tensor<8xf16>) -> " + qh +
              "\n  %3 = stablehlo.bitcast_convert %2 : (" + qh + ") -> tensor<8xi8>" +
              "\n  return %1, %3 : tensor<8xi4>, tensor<8xi8>\n}",
          {HostTensor::from_vector(x, {8})});
  const auto q = ints_of<int8_t>(r[0]);  // i4 held sign-extended in a byte
  const auto h = ints_of<int8_t>(r[1]);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(q[i], quantize_ref(x[i], 0.5, 1, -8, 7)) << i;
    // x / 0.125 - 3 is exact in f16 for these inputs (|x| < 16, quarter steps or 1.3's f16)
    EXPECT_EQ(h[i], quantize_ref(x[i], 0.125, -3, -128, 127)) << i;
  }
}

TEST(QuantizedCpu, OpsWithRegionsOnQuantizedValuesAreRejected) {
  const std::string q = "tensor<4x!quant.uniform<i8:f32, 0.5:0>>";
  const std::string s = "tensor<!quant.uniform<i8:f32, 0.5:0>>";
  const std::string e =
      error_of("func.func @main(%q: " + q + ", %z: " + s + ") -> " + s +
               " {\n"
               "  %0 = stablehlo.reduce(%q init: %z) across dimensions = [0] : (" +
               q + ", " + s + ") -> " + s +
               "\n"
               "   reducer(%a: " +
               s + ", %b: " + s +
               ") {\n"
               "    %1 = stablehlo.add %a, %b : " +
               s +
               "\n"
               "    stablehlo.return %1 : " +
               s +
               "\n"
               "  }\n"
               "  return %0 : " +
               s + "\n}");
  EXPECT_NE(e.find("stablehlo.reduce"), std::string::npos) << e;
  EXPECT_NE(e.find("not supported"), std::string::npos) << e;
}

}  // namespace
}  // namespace cujax
