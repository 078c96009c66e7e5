// The host's f32 exp, tanh and log (ew::fast) against libm in double rounded once to f32: the
// generic path they replace. Every result within one ULP, nearly all identical, and the special
// values exact.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "backends/common/elementwise.h"

namespace cujax {
namespace {

// Distance in ULPs between two finite floats of the same sign (or both zero).
int64_t ulp_distance(float a, float b) {
  const int64_t ia = std::bit_cast<int32_t>(a), ib = std::bit_cast<int32_t>(b);
  return ia > ib ? ia - ib : ib - ia;
}

template <class F, class Ref>
void check_against(F functor, Ref reference, float lo, float hi, int64_t max_differ_per_1e4 = 1,
                   int64_t max_ulps = 1) {
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> uniform(lo, hi);
  int64_t differ = 0;
  const int n = 1 << 20;
  for (int i = 0; i < n; ++i) {
    const float x = i < 4096 ? lo + (hi - lo) * static_cast<float>(i) / 4096 : uniform(gen);
    const float got = ew::apply(functor, x);
    const float want = static_cast<float>(reference(static_cast<double>(x)));
    if (std::isinf(want) || want == 0) {
      ASSERT_EQ(got, want) << "x = " << x;
      continue;
    }
    const int64_t d = ulp_distance(got, want);
    ASSERT_LE(d, max_ulps) << "x = " << x << ": " << got << " vs " << want;
    differ += d != 0;
  }
  EXPECT_LT(differ, n / 10000 * max_differ_per_1e4)
      << differ << " of " << n << " results differ by one ULP";
}

TEST(FastMath, ExpWithinOneUlpOfLibm) {
  check_against(
      ew::Exp{}, [](double x) { return std::exp(x); }, -104.0f, 89.0f);
  check_against(
      ew::Exp{}, [](double x) { return std::exp(x); }, -2.0f, 2.0f);
  // Denormal results: the double result rounds once, as libm's does.
  check_against(
      ew::Exp{}, [](double x) { return std::exp(x); }, -103.9f, -87.0f);
}

TEST(FastMath, TanhWithinOneUlpOfLibm) {
  check_against(
      ew::Tanh{}, [](double x) { return std::tanh(x); }, -12.0f, 12.0f);
  check_against(
      ew::Tanh{}, [](double x) { return std::tanh(x); }, -0.2f, 0.2f);
  check_against(
      ew::Tanh{}, [](double x) { return std::tanh(x); }, 1e-30f, 1e-3f);
}

TEST(FastMath, LogWithinOneUlpOfLibm) {
  auto log = [](double x) { return std::log(x); };
  check_against(ew::Log{}, log, 0.5f, 2.0f);
  check_against(ew::Log{}, log, 0.999f, 1.001f);  // ln x near 0: relative accuracy kept
  check_against(ew::Log{}, log, 1e-7f, 90.0f);    // the Gumbel noise's -ln(-ln u)
  check_against(ew::Log{}, log, 1e-3f, 3e38f);
  // Denormal inputs, normal as doubles.
  check_against(ew::Log{}, log, std::numeric_limits<float>::denorm_min(), 1e-38f);
}

// f32 expm1 takes XLA's e^x (Cephes' f32 polynomial) minus 1 where 0.5 <= |x| <= 80, so that
// results match XLA's (conformance file sin_complex64_20_20 checks that); it stays within an ULP
// of the true value there (one of e^x, where e^x - 1 may be half its size), and is libm's double
// result rounded once elsewhere.
TEST(FastMath, Expm1WithinTwoUlpsOfLibm) {
  auto expm1 = [](double x) { return std::expm1(x); };
  check_against(ew::Expm1{}, expm1, -0.5f, 0.5f);
  check_against(ew::Expm1{}, expm1, 0.5f, 80.0f, /*max_differ_per_1e4=*/3000, /*max_ulps=*/2);
  check_against(ew::Expm1{}, expm1, -80.0f, -0.5f, /*max_differ_per_1e4=*/3000, /*max_ulps=*/2);
  check_against(ew::Expm1{}, expm1, -104.0f, 89.0f, /*max_differ_per_1e4=*/3000, /*max_ulps=*/2);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ew::apply(ew::Expm1{}, inf), inf);
  EXPECT_EQ(ew::apply(ew::Expm1{}, -inf), -1.0f);
  EXPECT_EQ(ew::apply(ew::Expm1{}, 89.0f), inf);
  EXPECT_TRUE(std::signbit(ew::apply(ew::Expm1{}, -0.0f)));
  EXPECT_TRUE(std::isnan(ew::apply(ew::Expm1{}, std::numeric_limits<float>::quiet_NaN())));
}

TEST(FastMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(ew::apply(ew::Exp{}, 0.0f), 1.0f);
  EXPECT_EQ(ew::apply(ew::Exp{}, inf), inf);
  EXPECT_EQ(ew::apply(ew::Exp{}, -inf), 0.0f);
  EXPECT_EQ(ew::apply(ew::Exp{}, 88.8f), inf);
  EXPECT_TRUE(std::isnan(ew::apply(ew::Exp{}, nan)));
  EXPECT_EQ(ew::apply(ew::Tanh{}, inf), 1.0f);
  EXPECT_EQ(ew::apply(ew::Tanh{}, -inf), -1.0f);
  EXPECT_EQ(ew::apply(ew::Tanh{}, 30.0f), 1.0f);
  EXPECT_TRUE(std::signbit(ew::apply(ew::Tanh{}, -0.0f)));
  EXPECT_EQ(ew::apply(ew::Tanh{}, -0.0f), 0.0f);
  EXPECT_TRUE(std::isnan(ew::apply(ew::Tanh{}, nan)));
  const float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(ew::apply(ew::Tanh{}, tiny), tiny);
  EXPECT_EQ(ew::apply(ew::Log{}, 1.0f), 0.0f);
  EXPECT_EQ(ew::apply(ew::Log{}, 0.0f), -inf);
  EXPECT_EQ(ew::apply(ew::Log{}, -0.0f), -inf);
  EXPECT_EQ(ew::apply(ew::Log{}, inf), inf);
  EXPECT_EQ(ew::apply(ew::Log{}, tiny), static_cast<float>(std::log(static_cast<double>(tiny))));
  EXPECT_EQ(ew::apply(ew::Log{}, std::numeric_limits<float>::max()),
            static_cast<float>(std::log(static_cast<double>(std::numeric_limits<float>::max()))));
  EXPECT_TRUE(std::isnan(ew::apply(ew::Log{}, -1.0f)));
  EXPECT_TRUE(std::isnan(ew::apply(ew::Log{}, -inf)));
  EXPECT_TRUE(std::isnan(ew::apply(ew::Log{}, nan)));
}

}  // namespace
}  // namespace cujax
