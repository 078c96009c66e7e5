// The narrow element types (i2, i4, ui2, ui4, the f8/f6/f4 formats): every bit pattern of each
// float format against its sign/exponent/mantissa formula (computed here with std::pow from the
// format's definition), rounding, overflow and NaN as ml_dtypes defines them, the largest
// finite values that ml_dtypes and the formats' papers publish, the text format, and ops on the
// CPU backend against values worked out by hand (integers wrap, floats round once per op).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cujax/core/dtype.h"
#include "cujax/core/error.h"
#include "cujax/core/host_tensor.h"
#include "cujax/core/narrow_types.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

// A float format as its definition gives it: field widths, bias, and which patterns are special.
struct Spec {
  DType dtype;
  int e, m, bias;
  bool has_sign;
  // Kind of special values: 'I' IEEE (all-ones exponent: inf or NaN), 'F' S.1111.111 is NaN,
  // 'U' 0x80 is NaN (FNUZ), 'N' none, 'E' E8M0 (0xFF is NaN).
  char special;
  double max_finite;  // as published (see kSpecs)
};

// Largest finite values: ml_dtypes' README and the papers it cites (arXiv 2209.05433 for
// E4M3FN/E5M2, 2206.02915 for the FNUZ formats, the OCP MX spec for E8M0/f6/f4).
const Spec kSpecs[] = {
    {DType::F8E4M3FN, 4, 3, 7, true, 'F', 448},
    {DType::F8E5M2, 5, 2, 15, true, 'I', 57344},
    {DType::F8E4M3FNUZ, 4, 3, 8, true, 'U', 240},
    {DType::F8E5M2FNUZ, 5, 2, 16, true, 'U', 57344},
    {DType::F8E4M3B11FNUZ, 4, 3, 11, true, 'U', 30},
    {DType::F8E3M4, 3, 4, 3, true, 'I', 15.5},
    {DType::F8E4M3, 4, 3, 7, true, 'I', 240},
    {DType::F8E8M0FNU, 8, 0, 127, false, 'E', 1.7014118346046923e38},  // 2^127
    {DType::F6E2M3FN, 2, 3, 1, true, 'N', 7.5},
    {DType::F6E3M2FN, 3, 2, 3, true, 'N', 28},
    {DType::F4E2M1FN, 2, 1, 1, true, 'N', 6},
};

int width(const Spec& s) {
  return (s.has_sign ? 1 : 0) + s.e + s.m;
}

bool is_nan_pattern(const Spec& s, unsigned b) {
  const unsigned exp = (b >> s.m) & ((1u << s.e) - 1);
  const unsigned mant = b & ((1u << s.m) - 1);
  switch (s.special) {
    case 'I':
      return exp == (1u << s.e) - 1 && mant != 0;
    case 'F':
      return exp == (1u << s.e) - 1 && mant == (1u << s.m) - 1;
    case 'U':
      return b == 0x80;
    case 'E':
      return b == 0xFF;
    default:
      return false;
  }
}

// (-1)^s 2^(E - bias) (1 + M / 2^m), subnormal 2^(1 - bias) M / 2^m; +-inf where IEEE says.
double formula(const Spec& s, unsigned b) {
  const int sign = s.has_sign && ((b >> (s.e + s.m)) & 1) ? -1 : 1;
  const unsigned exp = (b >> s.m) & ((1u << s.e) - 1);
  const unsigned mant = b & ((1u << s.m) - 1);
  if (s.special == 'E') return std::pow(2.0, static_cast<int>(exp) - s.bias);
  if (s.special == 'I' && exp == (1u << s.e) - 1) return sign * HUGE_VAL;
  const double frac = mant / std::pow(2.0, s.m);
  if (exp == 0) return sign * std::pow(2.0, 1 - s.bias) * frac;
  return sign * std::pow(2.0, static_cast<int>(exp) - s.bias) * (1 + frac);
}

TEST(NarrowDType, NamesSizesAndWidths) {
  EXPECT_EQ(dtype_from_mlir_name("i4"), DType::I4);
  EXPECT_EQ(dtype_from_mlir_name("ui2"), DType::U2);
  EXPECT_EQ(dtype_from_mlir_name("f8E4M3FN"), DType::F8E4M3FN);
  EXPECT_EQ(dtype_from_mlir_name("f8E4M3B11FNUZ"), DType::F8E4M3B11FNUZ);
  EXPECT_EQ(dtype_from_mlir_name("f6E2M3FN"), DType::F6E2M3FN);
  EXPECT_EQ(dtype_from_mlir_name("f4E2M1FN"), DType::F4E2M1FN);
  EXPECT_EQ(dtype_from_numpy_name("int4"), DType::I4);
  EXPECT_EQ(dtype_from_numpy_name("float8_e8m0fnu"), DType::F8E8M0FNU);
  EXPECT_EQ(numpy_name(DType::F4E2M1FN), "float4_e2m1fn");
  for (const Spec& s : kSpecs) {
    EXPECT_EQ(size_of(s.dtype), 1u);
    EXPECT_EQ(bit_width(s.dtype), width(s));
    EXPECT_TRUE(is_float(s.dtype) && is_narrow(s.dtype));
  }
  EXPECT_EQ(bit_width(DType::I2), 2);
  EXPECT_EQ(bit_width(DType::U4), 4);
  EXPECT_TRUE(is_signed_int(DType::I4) && is_unsigned_int(DType::U2));
  // visit_dtype refuses them by name, so no kernel treats them as 8-bit types.
  try {
    visit_dtype(DType::I4, [](auto) {});
    FAIL() << "visit_dtype visited int4";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("int4"), std::string::npos) << e.what();
  }
}

TEST(NarrowFloat, EveryBitPatternDecodesToItsFormula) {
  for (const Spec& s : kSpecs) {
    SCOPED_TRACE(std::string(mlir_name(s.dtype)));
    for (unsigned b = 0; b < (1u << width(s)); ++b) {
      const double got = narrow_float_to_double(s.dtype, static_cast<uint8_t>(b));
      if (is_nan_pattern(s, b)) {
        EXPECT_TRUE(std::isnan(got)) << "bits " << b;
      } else {
        EXPECT_EQ(got, formula(s, b)) << "bits " << b;
      }
    }
  }
}

TEST(NarrowFloat, EncodeOfDecodeIsIdentity) {
  for (const Spec& s : kSpecs) {
    SCOPED_TRACE(std::string(mlir_name(s.dtype)));
    for (unsigned b = 0; b < (1u << width(s)); ++b) {
      if (is_nan_pattern(s, b)) continue;
      EXPECT_EQ(narrow_float_from_double(s.dtype, formula(s, b)), b) << "bits " << b;
    }
  }
}

TEST(NarrowFloat, MaxFiniteMatchesPublishedValues) {
  for (const Spec& s : kSpecs) {
    SCOPED_TRACE(std::string(mlir_name(s.dtype)));
    const NarrowFloatFormat f = narrow_float_format(s.dtype);
    EXPECT_EQ(narrow_float_to_double(s.dtype, f.max_finite), s.max_finite);
    // No finite pattern is larger.
    for (unsigned b = 0; b < (1u << width(s)); ++b) {
      if (!is_nan_pattern(s, b) && std::isfinite(formula(s, b))) {
        EXPECT_LE(formula(s, b), s.max_finite);
      }
    }
  }
}

TEST(NarrowFloat, RoundsToNearestTiesToEven) {
  for (const Spec& s : kSpecs) {
    SCOPED_TRACE(std::string(mlir_name(s.dtype)));
    // Consecutive positive finite values a < b: patterns p and p + 1.
    const unsigned top = (1u << (s.e + s.m));
    for (unsigned p = 0; p + 1 < top; ++p) {
      if (is_nan_pattern(s, p) || is_nan_pattern(s, p + 1)) continue;
      const double a = formula(s, p), b = formula(s, p + 1);
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const double mid = (a + b) / 2;
      if (s.special == 'E' && p == 0) {
        // ml_dtypes rounds E8M0's lowest binade as if it were subnormal: 2^-127 itself stays,
        // anything above it becomes 2^-126.
        EXPECT_EQ(narrow_float_from_double(s.dtype, std::nextafter(a, HUGE_VAL)), 1u);
        continue;
      }
      EXPECT_EQ(narrow_float_from_double(s.dtype, std::nextafter(mid, 0.0)), p) << mid;
      EXPECT_EQ(narrow_float_from_double(s.dtype, std::nextafter(mid, HUGE_VAL)), p + 1) << mid;
      // A tie goes to the even mantissa. E8M0 has no mantissa bits: its significand is the
      // implicit 1, odd, so ml_dtypes rounds every tie up.
      const unsigned tie = s.special == 'E' ? p + 1 : (p % 2 == 0 ? p : p + 1);
      EXPECT_EQ(narrow_float_from_double(s.dtype, mid), tie) << mid;
    }
  }
}

TEST(NarrowFloat, OverflowZeroAndNaNFollowMlDtypes) {
  auto enc = narrow_float_from_double;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Beyond the largest finite value: infinity where there is one, NaN where there is only NaN,
  // the largest finite value in the MX f6/f4 formats.
  EXPECT_EQ(enc(DType::F8E5M2, 1e6), 0x7C);
  EXPECT_EQ(enc(DType::F8E5M2, -1e6), 0xFC);
  EXPECT_EQ(enc(DType::F8E4M3, 1e6), 0x78);
  EXPECT_EQ(enc(DType::F8E3M4, 16.5), 0x70);
  EXPECT_EQ(enc(DType::F8E4M3FN, 480), 0x7F);  // past 448 + 16: NaN
  EXPECT_EQ(enc(DType::F8E4M3FN, 464), 0x7E);  // the tie goes to 448 (even mantissa 110)
  EXPECT_EQ(enc(DType::F8E4M3FN, -1e9), 0xFF);
  EXPECT_EQ(enc(DType::F8E4M3FNUZ, 1e9), 0x80);
  EXPECT_EQ(enc(DType::F8E4M3FNUZ, -1e9), 0x80);
  EXPECT_EQ(enc(DType::F8E4M3B11FNUZ, 32), 0x80);
  EXPECT_EQ(enc(DType::F8E4M3FNUZ, HUGE_VAL), 0x80);
  EXPECT_EQ(enc(DType::F6E2M3FN, 100), 0x1F);
  EXPECT_EQ(enc(DType::F6E2M3FN, -100), 0x3F);
  EXPECT_EQ(enc(DType::F4E2M1FN, HUGE_VAL), 0x7);
  EXPECT_EQ(enc(DType::F8E8M0FNU, 1e300), 0xFF);
  // Zeros: -0 exists except in the FNUZ formats; E8M0 has no zero (NaN) and no sign.
  EXPECT_EQ(enc(DType::F8E4M3FN, -0.0), 0x80);
  EXPECT_EQ(enc(DType::F8E5M2FNUZ, -0.0), 0x00);
  EXPECT_EQ(enc(DType::F8E4M3FNUZ, -1e-9), 0x00);  // rounds to -0, which is +0 here
  EXPECT_EQ(enc(DType::F4E2M1FN, -0.0), 0x8);
  EXPECT_EQ(enc(DType::F8E8M0FNU, 0.0), 0xFF);
  EXPECT_EQ(enc(DType::F8E8M0FNU, -2.0), 0xFF);
  EXPECT_EQ(enc(DType::F8E8M0FNU, 1e-300), 0x00);  // below 2^-127: the smallest value
  // NaN: the format's quiet NaN (the f6/f4 formats have none: ml_dtypes gives the -0 pattern).
  EXPECT_EQ(enc(DType::F8E4M3FN, nan), 0x7F);
  EXPECT_EQ(enc(DType::F8E5M2, nan), 0x7E);
  EXPECT_EQ(enc(DType::F8E3M4, nan), 0x78);
  EXPECT_EQ(enc(DType::F8E5M2FNUZ, -nan), 0x80);
  EXPECT_EQ(enc(DType::F8E8M0FNU, nan), 0xFF);
  EXPECT_EQ(enc(DType::F6E3M2FN, nan), 0x20);
  // The interpreter suite's literals (constant_14/15/17/23 expect these values).
  EXPECT_EQ(narrow_float_to_double(DType::F6E3M2FN, enc(DType::F6E3M2FN, 3.1415)), 3.0);
  EXPECT_EQ(narrow_float_to_double(DType::F6E3M2FN, enc(DType::F6E3M2FN, 0.1)), 0.125);
  EXPECT_EQ(narrow_float_to_double(DType::F8E3M4, enc(DType::F8E3M4, 3.1415)), 3.125);
  EXPECT_EQ(narrow_float_to_double(DType::F8E4M3FN, enc(DType::F8E4M3FN, 0.1)), 0.1015625);
  EXPECT_EQ(narrow_float_to_double(DType::F8E8M0FNU, enc(DType::F8E8M0FNU, 3.1415)), 4.0);
  EXPECT_EQ(narrow_float_to_double(DType::F8E8M0FNU, enc(DType::F8E8M0FNU, 0.1)), 0.125);
}

TEST(NarrowInt, WrapsToItsWidth) {
  EXPECT_EQ(static_cast<int8_t>(narrow_int_from_int64(DType::I4, 8)), -8);
  EXPECT_EQ(static_cast<int8_t>(narrow_int_from_int64(DType::I4, -9)), 7);
  EXPECT_EQ(narrow_int_from_int64(DType::U4, 16), 0);
  EXPECT_EQ(narrow_int_from_int64(DType::U4, -1), 15);
  EXPECT_EQ(static_cast<int8_t>(narrow_int_from_int64(DType::I2, 2)), -2);
  EXPECT_EQ(narrow_int_from_int64(DType::U2, 7), 3);
  EXPECT_EQ(narrow_int_to_int64(DType::I4, 0x0F), -1);  // from the low bits
  EXPECT_EQ(narrow_int_min(DType::I2), -2);
  EXPECT_EQ(narrow_int_max(DType::U4), 15);
}

std::vector<HostTensor> run(const std::string& text, const std::vector<HostTensor>& inputs = {}) {
  auto module = ir::parse_module(text);
  auto exe = runtime::get_backend("cpu").compile(*module, "main");
  return exe->execute_on_host(inputs);
}

std::vector<int> bytes_of(const HostTensor& t) {
  std::vector<int> v;
  for (int64_t i = 0; i < t.size(); ++i) v.push_back(static_cast<const int8_t*>(t.data())[i]);
  return v;
}

TEST(NarrowTypesCpu, IntegersWrapTwosComplement) {
  const auto r = run(R"(
func.func @main() -> (tensor<3xi4>, tensor<3xi4>, tensor<2xui4>, tensor<2xi2>, tensor<2xi4>) {
  %a = stablehlo.constant dense<[7, -8, 5]> : tensor<3xi4>
  %b = stablehlo.constant dense<[1, -1, 7]> : tensor<3xi4>
  %s = stablehlo.add %a, %b : tensor<3xi4>
  %n = stablehlo.negate %a : tensor<3xi4>
  %u = stablehlo.constant dense<[15, 9]> : tensor<2xui4>
  %u2 = stablehlo.multiply %u, %u : tensor<2xui4>
  %c = stablehlo.constant dense<[1, -2]> : tensor<2xi2>
  %c2 = stablehlo.add %c, %c : tensor<2xi2>
  %d = stablehlo.constant dense<[-8, 7]> : tensor<2xi4>
  %m1 = stablehlo.constant dense<-1> : tensor<2xi4>
  %q = stablehlo.divide %d, %m1 : tensor<2xi4>
  return %s, %n, %u2, %c2, %q : tensor<3xi4>, tensor<3xi4>, tensor<2xui4>, tensor<2xi2>, tensor<2xi4>
})");
  EXPECT_EQ(bytes_of(r[0]), (std::vector<int>{-8, 7, -4}));   // 8 and 12 wrap
  EXPECT_EQ(bytes_of(r[1]), (std::vector<int>{-7, -8, -5}));  // -(-8) wraps to -8
  EXPECT_EQ(bytes_of(r[2]), (std::vector<int>{1, 1}));        // 225 and 81 mod 16
  EXPECT_EQ(bytes_of(r[3]), (std::vector<int>{-2, 0}));       // 2 wraps; -4 wraps to 0
  EXPECT_EQ(bytes_of(r[4]), (std::vector<int>{-8, -7}));      // -8 / -1 wraps to -8
}

TEST(NarrowTypesCpu, BitOpsSeeOnlyTheNarrowBits) {
  const auto r = run(R"(
func.func @main() -> (tensor<2xi4>, tensor<2xi4>, tensor<2xi4>, tensor<2xui4>) {
  %a = stablehlo.constant dense<[-1, 1]> : tensor<2xi4>
  %one = stablehlo.constant dense<1> : tensor<2xi4>
  %p = stablehlo.popcnt %a : tensor<2xi4>
  %z = stablehlo.count_leading_zeros %a : tensor<2xi4>
  %s = stablehlo.shift_right_logical %a, %one : tensor<2xi4>
  %u = stablehlo.constant dense<[1, 8]> : tensor<2xui4>
  %uz = stablehlo.count_leading_zeros %u : tensor<2xui4>
  return %p, %z, %s, %uz : tensor<2xi4>, tensor<2xi4>, tensor<2xi4>, tensor<2xui4>
})");
  EXPECT_EQ(bytes_of(r[0]), (std::vector<int>{4, 1}));
  EXPECT_EQ(bytes_of(r[1]), (std::vector<int>{0, 3}));
  EXPECT_EQ(bytes_of(r[2]), (std::vector<int>{7, 0}));  // 0b1111 >> 1 = 0b0111
  EXPECT_EQ(bytes_of(r[3]), (std::vector<int>{3, 0}));
}

TEST(NarrowTypesCpu, FloatsRoundOncePerOpAndPerReductionStep) {
  const auto r = run(R"(
func.func @main() -> (tensor<2xf8E4M3FN>, tensor<f8E4M3FN>, tensor<f32>, tensor<f8E5M2>) {
  %a = stablehlo.constant dense<[448.0, 1.0]> : tensor<2xf8E4M3FN>
  %b = stablehlo.constant dense<[32.0, 0.0625]> : tensor<2xf8E4M3FN>
  %s = stablehlo.add %a, %b : tensor<2xf8E4M3FN>
  %v = stablehlo.constant dense<[16.0, 0.5, 0.5, 0.5, 0.5]> : tensor<5xf8E4M3FN>
  %z = stablehlo.constant dense<0.0> : tensor<f8E4M3FN>
  %sum = stablehlo.reduce(%v init: %z) applies stablehlo.add across dimensions = [0] : (tensor<5xf8E4M3FN>, tensor<f8E4M3FN>) -> tensor<f8E4M3FN>
  %w = stablehlo.convert %v : (tensor<5xf8E4M3FN>) -> tensor<5xf32>
  %zf = stablehlo.constant dense<0.0> : tensor<f32>
  %sumf = stablehlo.reduce(%w init: %zf) applies stablehlo.add across dimensions = [0] : (tensor<5xf32>, tensor<f32>) -> tensor<f32>
  %big = stablehlo.constant dense<57344.0> : tensor<f8E5M2>
  %inf = stablehlo.add %big, %big : tensor<f8E5M2>
  return %s, %sum, %sumf, %inf : tensor<2xf8E4M3FN>, tensor<f8E4M3FN>, tensor<f32>, tensor<f8E5M2>
})");
  const auto* s = static_cast<const uint8_t*>(r[0].data());
  EXPECT_EQ(s[0], 0x7F);  // 480 overflows E4M3FN: NaN
  // 1 + 1/16 is a tie between 1 and 1.125: to the even mantissa, 1.
  EXPECT_EQ(narrow_float_to_double(DType::F8E4M3FN, s[1]), 1.0);
  // Each step rounds: 16 + 0.5 is a tie between 16 and 18 (ulp 2) and stays 16.
  EXPECT_EQ(narrow_float_to_double(DType::F8E4M3FN, *static_cast<const uint8_t*>(r[1].data())),
            16.0);
  EXPECT_EQ(*r[2].data_as<float>(), 18.0f);
  EXPECT_EQ(*static_cast<const uint8_t*>(r[3].data()), 0x7C);  // +inf
}

TEST(NarrowTypesCpu, ConvertAndBitcastConvert) {
  const auto r = run(R"(
func.func @main() -> (tensor<3xf8E4M3FN>, tensor<3xi4>, tensor<3xi4>, tensor<2xf32>, tensor<2xi4>, tensor<i8>, tensor<2xf4E2M1FN>) {
  %f = stablehlo.constant dense<[0.1, 100.0, -2.5]> : tensor<3xf64>
  %f8 = stablehlo.convert %f : (tensor<3xf64>) -> tensor<3xf8E4M3FN>
  %sat = stablehlo.convert %f : (tensor<3xf64>) -> tensor<3xi4>
  %i = stablehlo.constant dense<[100, -9, 3]> : tensor<3xi32>
  %wrap = stablehlo.convert %i : (tensor<3xi32>) -> tensor<3xi4>
  %u = stablehlo.constant dense<[15, 4]> : tensor<2xui4>
  %uf = stablehlo.convert %u : (tensor<2xui4>) -> tensor<2xf32>
  %b = stablehlo.constant dense<31> : tensor<i8>
  %split = stablehlo.bitcast_convert %b : (tensor<i8>) -> tensor<2xi4>
  %join = stablehlo.bitcast_convert %split : (tensor<2xi4>) -> tensor<i8>
  %g = stablehlo.constant dense<[6.0, -0.5]> : tensor<2xf8E5M2>
  %f4 = stablehlo.convert %g : (tensor<2xf8E5M2>) -> tensor<2xf4E2M1FN>
  return %f8, %sat, %wrap, %uf, %split, %join, %f4 : tensor<3xf8E4M3FN>, tensor<3xi4>, tensor<3xi4>, tensor<2xf32>, tensor<2xi4>, tensor<i8>, tensor<2xf4E2M1FN>
})");
  const auto* f8 = static_cast<const uint8_t*>(r[0].data());
  EXPECT_EQ(narrow_float_to_double(DType::F8E4M3FN, f8[0]), 0.1015625);
  EXPECT_EQ(narrow_float_to_double(DType::F8E4M3FN, f8[1]), 96.0);  // 100 between 96 and 104
  EXPECT_EQ(narrow_float_to_double(DType::F8E4M3FN, f8[2]), -2.5);
  EXPECT_EQ(bytes_of(r[1]), (std::vector<int>{0, 7, -2}));  // truncated, saturated
  EXPECT_EQ(bytes_of(r[2]), (std::vector<int>{4, 7, 3}));   // 100 = 0x64, -9 = 0x...F7
  EXPECT_EQ(r[3].data_as<float>()[0], 15.0f);
  EXPECT_EQ(bytes_of(r[4]), (std::vector<int>{-1, 1}));  // 0x1F: low nibble first
  EXPECT_EQ(bytes_of(r[5]), (std::vector<int>{31}));
  const auto* f4 = static_cast<const uint8_t*>(r[6].data());
  EXPECT_EQ(f4[0], 0x7);  // 6, the largest E2M1FN value
  EXPECT_EQ(f4[1], 0x9);  // -0.5
}

TEST(NarrowTypesCpu, DataMovementAndDotGeneral) {
  const auto r = run(R"(
func.func @main() -> (tensor<2x2xi4>, tensor<f8E3M4>, tensor<2xi1>) {
  %a = stablehlo.constant dense<[[1, -2], [3, -4]]> : tensor<2x2xi4>
  %t = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x2xi4>) -> tensor<2x2xi4>
  %v = stablehlo.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf8E3M4>
  %d = stablehlo.dot_general %v, %v, contracting_dims = [0] x [0] : (tensor<4xf8E3M4>, tensor<4xf8E3M4>) -> tensor<f8E3M4>
  %x = stablehlo.constant dense<[-0.0, 1.0]> : tensor<2xf8E4M3FNUZ>
  %y = stablehlo.constant dense<[0.0, 2.0]> : tensor<2xf8E4M3FNUZ>
  %c = stablehlo.compare LT, %x, %y : (tensor<2xf8E4M3FNUZ>, tensor<2xf8E4M3FNUZ>) -> tensor<2xi1>
  return %t, %d, %c : tensor<2x2xi4>, tensor<f8E3M4>, tensor<2xi1>
})");
  EXPECT_EQ(bytes_of(r[0]), (std::vector<int>{1, 3, -2, -4}));
  EXPECT_EQ(narrow_float_to_double(DType::F8E3M4, *static_cast<const uint8_t*>(r[1].data())), 14.0);
  EXPECT_EQ(bytes_of(r[2]), (std::vector<int>{0, 1}));
}

// The op mix of the interpreter suite on narrow types, each result checked by a check op (a
// failing check throws): values worked out by hand (the i4 sum 22 wraps to 6; E4M3FN 1.0, 2.0,
// 3.0 are 0x38, 0x40, 0x44; f16 0.3 is 0.3125 in E5M2; -8 overflows E2M1FN to -6).
TEST(NarrowTypesCpu, InterpreterOpMix) {
  EXPECT_NO_THROW(run(R"(func.func @main() {
  %0 = stablehlo.constant dense<[1, -2, 3, -8]> : tensor<4xi4>
  %1 = stablehlo.constant dense<[true, false, true, false]> : tensor<4xi1>
  %2 = stablehlo.constant dense<7> : tensor<4xi4>
  %3 = stablehlo.select %1, %0, %2 : tensor<4xi1>, tensor<4xi4>
  check.expect_eq_const %3, dense<[1, 7, 3, 7]> : tensor<4xi4>
  %4 = stablehlo.compare LT, %0, %2, SIGNED : (tensor<4xi4>, tensor<4xi4>) -> tensor<4xi1>
  check.expect_eq_const %4, dense<true> : tensor<4xi1>
  %lo = stablehlo.constant dense<-2> : tensor<4xi4>
  %5 = stablehlo.clamp %lo, %0, %2 : tensor<4xi4>
  check.expect_eq_const %5, dense<[1, -2, 3, -2]> : tensor<4xi4>
  %6 = stablehlo.concatenate %0, %2, dim = 0 : (tensor<4xi4>, tensor<4xi4>) -> tensor<8xi4>
  check.expect_eq_const %6, dense<[1, -2, 3, -8, 7, 7, 7, 7]> : tensor<8xi4>
  %7 = stablehlo.slice %6 [2:6] : (tensor<8xi4>) -> tensor<4xi4>
  check.expect_eq_const %7, dense<[3, -8, 7, 7]> : tensor<4xi4>
  %8 = stablehlo.reshape %7 : (tensor<4xi4>) -> tensor<2x2xi4>
  %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<2x2xi4>) -> tensor<2x2xi4>
  check.expect_eq_const %9, dense<[[3, -8], [7, 7]]> : tensor<2x2xi4>
  %z = stablehlo.constant dense<0> : tensor<i4>
  %10 = stablehlo.reduce(%6 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<8xi4>, tensor<i4>) -> tensor<i4>
  check.expect_eq_const %10, dense<6> : tensor<i4>
  %11 = stablehlo.iota dim = 0 : tensor<4xf8E4M3FN>
  check.expect_almost_eq_const %11, dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf8E4M3FN>
  %12 = stablehlo.bitcast_convert %11 : (tensor<4xf8E4M3FN>) -> tensor<4xui8>
  check.expect_eq_const %12, dense<[0, 56, 64, 68]> : tensor<4xui8>
  %13 = stablehlo.convert %11 : (tensor<4xf8E4M3FN>) -> tensor<4xbf16>
  check.expect_eq_const %13, dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xbf16>
  %h = stablehlo.constant dense<[0.3, 1000.0]> : tensor<2xf16>
  %14 = stablehlo.convert %h : (tensor<2xf16>) -> tensor<2xf8E5M2>
  check.expect_eq_const %14, dense<[0.3125, 1024.0]> : tensor<2xf8E5M2>
  %15 = "stablehlo.sort"(%11) ({
  ^bb0(%a: tensor<f8E4M3FN>, %b: tensor<f8E4M3FN>):
    %c = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f8E4M3FN>, tensor<f8E4M3FN>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }) {dimension = 0 : i64} : (tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN>
  check.expect_almost_eq_const %15, dense<[3.0, 2.0, 1.0, 0.0]> : tensor<4xf8E4M3FN>
  %u = stablehlo.constant dense<[1, 2, 3]> : tensor<3xui2>
  %16 = stablehlo.transpose %u, dims = [0] : (tensor<3xui2>) -> tensor<3xui2>
  %17 = stablehlo.multiply %16, %16 : tensor<3xui2>
  check.expect_eq_const %17, dense<[1, 0, 1]> : tensor<3xui2>
  %18 = stablehlo.bitcast_convert %0 : (tensor<4xi4>) -> tensor<4xui4>
  check.expect_eq_const %18, dense<[1, 14, 3, 8]> : tensor<4xui4>
  %19 = stablehlo.convert %0 : (tensor<4xi4>) -> tensor<4xf4E2M1FN>
  check.expect_almost_eq_const %19, dense<[1.0, -2.0, 3.0, -6.0]> : tensor<4xf4E2M1FN>
  func.return
})"));
}

TEST(NarrowTypesText, ParsePrintRoundTrip) {
  const std::string text =
      R"(func.func @main() -> (tensor<4xi4>, tensor<4xf6E3M2FN>, tensor<3xf8E4M3FN>, tensor<2xf8E8M0FNU>) {
  %0 = stablehlo.constant dense<[-8, -1, 0, 7]> : tensor<4xi4>
  %1 = stablehlo.constant dense<[0.1, 3.1415, 0x1F, 0x3F]> : tensor<4xf6E3M2FN>
  %2 = stablehlo.constant dense<[0x7F, -0.0, 448.0]> : tensor<3xf8E4M3FN>
  %3 = stablehlo.constant dense<[0x00, 0xFF]> : tensor<2xf8E8M0FNU>
  return %0, %1, %2, %3 : tensor<4xi4>, tensor<4xf6E3M2FN>, tensor<3xf8E4M3FN>, tensor<2xf8E8M0FNU>
})";
  auto m = ir::parse_module(text);
  const std::string printed = ir::print_module(*m);
  EXPECT_NE(printed.find("dense<[-8, -1, 0, 7]> : tensor<4xi4>"), std::string::npos) << printed;
  EXPECT_NE(printed.find("dense<[1.250000e-01, 3.000000e+00, 2.800000e+01, -2.800000e+01]>"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("0x7F"), std::string::npos) << printed;
  auto again = ir::parse_module(printed);
  EXPECT_EQ(ir::print_module(*again), printed);
  const auto r0 = run(text), r1 = run(printed);
  for (size_t i = 0; i < r0.size(); ++i) EXPECT_EQ(bytes_of(r0[i]), bytes_of(r1[i])) << i;
  EXPECT_EQ(bytes_of(r0[0]), (std::vector<int>{-8, -1, 0, 7}));
  // i4 is signless, as MLIR's integers are: 15 is the bits of -1; 16 does not fit.
  EXPECT_EQ(bytes_of(run("func.func @main() -> tensor<i4> {\n"
                         "  %0 = stablehlo.constant dense<15> : tensor<i4>\n"
                         "  return %0 : tensor<i4>\n}")[0]),
            (std::vector<int>{-1}));
  EXPECT_THROW(ir::parse_module("func.func @main() -> tensor<i4> {\n"
                                "  %0 = stablehlo.constant dense<16> : tensor<i4>\n"
                                "  return %0 : tensor<i4>\n}"),
               Error);
}

}  // namespace
}  // namespace cujax
