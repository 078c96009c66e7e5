#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "cujax/core/dtype.h"
#include "cujax/core/error.h"
#include "cujax/core/half.h"
#include "cujax/core/host_tensor.h"
#include "cujax/core/npy.h"
#include "cujax/core/shape.h"
#include "cujax/runtime/checks.h"

namespace cujax {
namespace {

// Reference: the value of every f16 bit pattern computed from the IEEE definition.
double f16_reference(uint16_t bits) {
  const int sign = bits >> 15, exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else
    v = std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

TEST(Float16, DecodesEveryBitPatternExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const double ref = f16_reference(static_cast<uint16_t>(b));
    const float got = float16::from_bits(static_cast<uint16_t>(b));
    if (std::isnan(ref))
      EXPECT_TRUE(std::isnan(got)) << b;
    else
      EXPECT_EQ(static_cast<double>(got), ref) << b;
  }
}

TEST(Float16, RoundTripsEveryFiniteValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float16 h = float16::from_bits(static_cast<uint16_t>(b));
    if (std::isnan(static_cast<float>(h))) continue;
    EXPECT_EQ(float16(static_cast<double>(static_cast<float>(h))).bits, b);
  }
}

TEST(Float16, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and the next f16 (1 + 2^-10): ties go to the even one, 1.
  EXPECT_EQ(float16(1.0 + std::ldexp(1.0, -11)).bits, 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(float16(1.0 + 3 * std::ldexp(1.0, -11)).bits, 0x3c02);
  // Just above the halfway point rounds up.
  EXPECT_EQ(float16(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30)).bits, 0x3c01);
  EXPECT_EQ(float16(65504.0).bits, 0x7bff);  // max finite
  EXPECT_EQ(float16(65520.0).bits, 0x7c00);  // halfway to 2^16 rounds to infinity
  EXPECT_EQ(float16(65519.99).bits, 0x7bff);
  EXPECT_EQ(float16(std::ldexp(1.0, -24)).bits, 0x0001);  // smallest subnormal
  EXPECT_EQ(float16(std::ldexp(1.0, -25)).bits, 0x0000);  // half of it: tie to even (0)
  EXPECT_EQ(float16(std::ldexp(1.5, -25)).bits, 0x0001);
  EXPECT_EQ(float16(-0.0).bits, 0x8000);
  EXPECT_EQ(float16(-INFINITY).bits, 0xfc00);
  EXPECT_TRUE(std::isnan(static_cast<float>(float16(NAN))));
}

TEST(Float16, DoubleRoundingIsAvoided) {
  // 1 + 2^-11 + 2^-40 rounds up in f16, but going through f32 first (which rounds it to
  // 1 + 2^-11, a tie) would round down to 1.
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(float16(x).bits, 0x3c01);
}

TEST(BFloat16, RoundsFloatToNearestEven) {
  EXPECT_EQ(bfloat16(1.0f).bits, 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even.
  EXPECT_EQ(bfloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);
  EXPECT_EQ(bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds to inf
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(NAN))));
  // The double path agrees with the float path on float inputs.
  for (uint32_t b = 0; b < 65536; b += 7) {
    const float f = std::bit_cast<float>((b << 16) | 0x8000u);  // ties
    if (std::isnan(f)) continue;
    EXPECT_EQ(bfloat16(f).bits, bfloat16(static_cast<double>(f)).bits) << b;
  }
}

TEST(DType, NamesRoundTrip) {
  for (DType t : kAllDTypes) {
    EXPECT_EQ(dtype_from_mlir_name(mlir_name(t)), t);
    EXPECT_EQ(dtype_from_numpy_name(numpy_name(t)), t);
  }
  EXPECT_EQ(mlir_name(DType::U32), "ui32");
  EXPECT_EQ(mlir_name(DType::Bool), "i1");
  EXPECT_FALSE(dtype_from_mlir_name("q7").has_value());
  EXPECT_EQ(size_of(DType::BF16), 2u);
}

TEST(Shape, ElementCountOverflowIsAnError) {
  const int64_t big = int64_t{1} << 32;
  EXPECT_EQ(num_elements({big, big / 4}), int64_t{1} << 62);
  EXPECT_EQ(num_elements({big, big, 0}), 0);  // empty, though the others overflow
  try {
    num_elements({big, big});
    FAIL() << "2^64 elements did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[4294967296,4294967296]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(row_major_strides({big, big, big}), Error);
  EXPECT_EQ(row_major_strides({0, big, big / 4}),
            (std::vector<int64_t>{int64_t{1} << 62, big / 4, 1}));
}

TEST(HostTensor, ReshapeSharesAndChecksCount) {
  HostTensor t = HostTensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  HostTensor r = t.reshaped({3, 2});
  EXPECT_EQ(r.data(), t.data());
  EXPECT_THROW(t.reshaped({4}), Error);
  EXPECT_THROW(t.bitcast(DType::F64), Error);
  EXPECT_EQ(t.bitcast(DType::F32).dtype(), DType::F32);
  HostTensor c = t.clone();
  EXPECT_NE(c.data(), t.data());
  EXPECT_EQ(c.to_vector<int32_t>(), t.to_vector<int32_t>());
}

class Npy : public ::testing::Test {
 protected:
  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("cujax_npy_test_" + std::to_string(::getpid()) + ".npy"))
                          .string();
  void TearDown() override { std::remove(path_.c_str()); }
};

TEST_F(Npy, RoundTripsEveryDType) {
  for (DType t : kAllDTypes) {
    HostTensor x(t, {2, 3});
    auto* p = static_cast<unsigned char*>(x.data());
    for (size_t i = 0; i < x.nbytes(); ++i) p[i] = static_cast<unsigned char>(i * 37 + 1);
    if (t == DType::Bool)
      for (size_t i = 0; i < x.nbytes(); ++i) p[i] &= 1;
    save_npy(path_, x);
    HostTensor y = load_npy(path_);
    EXPECT_EQ(y.dtype(), t) << numpy_name(t);
    EXPECT_EQ(y.shape(), x.shape());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.nbytes()), 0) << numpy_name(t);
  }
}

TEST_F(Npy, HeaderIsWhatNumpyWrites) {
  const std::string bytes = serialize_npy(HostTensor::from_vector<float>({1, 2, 3}, {3}));
  EXPECT_EQ(bytes.size() % 64, 12u);  // 64-aligned header, then 12 bytes of data
  EXPECT_NE(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"),
            std::string::npos);
  const std::string scalar = serialize_npy(HostTensor(DType::I64, {}));
  EXPECT_NE(scalar.find("'shape': ()"), std::string::npos);
}

TEST_F(Npy, ReadsFortranOrderAndBigEndian) {
  // A 2x3 int16 array [[1,2,3],[4,5,6]] stored big-endian in Fortran order: 1,4,2,5,3,6.
  std::string header = "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size());
  bytes += '\0';
  bytes += header;
  for (int v : {1, 4, 2, 5, 3, 6}) {
    bytes += '\0';
    bytes += static_cast<char>(v);
  }
  HostTensor t = parse_npy(bytes);
  EXPECT_EQ(t.to_vector<int16_t>(), (std::vector<int16_t>{1, 2, 3, 4, 5, 6}));
}

TEST_F(Npy, RejectsBadInputWithTheReason) {
  EXPECT_THROW(parse_npy("not a numpy file"), Error);
  std::string good = serialize_npy(HostTensor::from_vector<double>({1, 2, 3, 4}, {4}));
  try {
    parse_npy(good.substr(0, good.size() - 3), "x.npy");
    FAIL() << "truncated data accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.npy: data is truncated"), std::string::npos);
  }
  EXPECT_THROW(load_npy("/nonexistent/file.npy"), Error);
}

TEST(Checks, CloseAllowsThreeUlps) {
  const float one = 1.0f;
  const float three_ulps = std::nextafter(std::nextafter(std::nextafter(one, 2.f), 2.f), 2.f);
  const float four_ulps = std::nextafter(three_ulps, 2.f);
  auto t = [](float v) { return HostTensor::from_vector<float>({v}, {1}); };
  using runtime::check_values;
  using runtime::CheckKind;
  EXPECT_FALSE(check_values(CheckKind::ExpectClose, t(one), t(three_ulps)));
  EXPECT_TRUE(check_values(CheckKind::ExpectClose, t(one), t(four_ulps)));
  EXPECT_FALSE(check_values(CheckKind::ExpectClose, t(0.0f), t(-0.0f)));
  EXPECT_FALSE(check_values(CheckKind::ExpectClose, t(NAN), t(-NAN)));
  EXPECT_TRUE(check_values(CheckKind::ExpectClose, t(INFINITY), t(-INFINITY)));
  EXPECT_TRUE(check_values(CheckKind::ExpectEq, t(0.0f), t(-0.0f)));
  EXPECT_FALSE(check_values(CheckKind::ExpectEq, t(NAN), t(NAN)));
  EXPECT_FALSE(check_values(CheckKind::ExpectAlmostEq, t(1.0f), t(1.0009f)));
  EXPECT_TRUE(check_values(CheckKind::ExpectAlmostEq, t(1.0f), t(1.0011f)));
  auto msg =
      check_values(CheckKind::ExpectEq, HostTensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2}),
                   HostTensor::from_vector<int32_t>({1, 2, 3, 5}, {2, 2}));
  ASSERT_TRUE(msg);
  EXPECT_EQ(*msg, "index [1,1]: got 4, expected 5");
}

}  // namespace
}  // namespace cujax
