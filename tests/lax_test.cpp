// cujax::lax and cujax::nn: each op family eagerly against hand-computed values, the same
// function under jit, the op text of its lowering, and the error messages of bad operands.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "cujax/array.h"
#include "cujax/ir/verifier.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/nn.h"

namespace cujax {
namespace {

namespace L = lax;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

template <class T>
Array arr(const std::vector<T>& v, Shape shape) {
  return array(HostTensor::from_vector(v, std::move(shape)));
}
Array f32(const std::vector<float>& v, Shape shape) {
  return arr(v, std::move(shape));
}
Array f32(const std::vector<float>& v) {
  return arr(v, {static_cast<int64_t>(v.size())});
}
Array f64(const std::vector<double>& v) {
  return arr(v, {static_cast<int64_t>(v.size())});
}
Array i32(const std::vector<int32_t>& v, Shape shape) {
  return arr(v, std::move(shape));
}
Array i32(const std::vector<int32_t>& v) {
  return arr(v, {static_cast<int64_t>(v.size())});
}
Array s32(int32_t v) {
  return arr(std::vector<int32_t>{v}, {});
}
Array fs(float v) {
  return arr(std::vector<float>{v}, {});
}

// Any array's values as doubles.
std::vector<double> values(const Array& a) {
  HostTensor h = a.to_host();
  std::vector<double> out;
  visit_dtype(h.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = h.data_as<T>();
    for (int64_t i = 0; i < h.size(); ++i) out.push_back(static_cast<double>(p[i]));
  });
  return out;
}

void expect_values(const Array& a, const std::vector<double>& want, double tol,
                   const std::string& what) {
  const std::vector<double> got = values(a);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "]: got " << got[i];
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " [" << i << "]";
    } else {
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
          << what << " [" << i << "]";
    }
  }
}

ShapeDtype spec_of(const Array& a) {
  return ShapeDtype{a.shape(), a.dtype(), false};
}

// Runs fn eagerly and under jit, compares both with `want` (and the result type with the eager
// one), and checks that the lowering contains each of `texts`.
template <class F, class... A>
Array check(F fn, const std::vector<double>& want, double tol,
            const std::vector<std::string>& texts, const A&... args) {
  Array eager = fn(args...);
  expect_values(eager, want, tol, "eager");
  auto jitted = jit(fn);
  Array j = jitted(args...);
  EXPECT_EQ(j.shape(), eager.shape());
  EXPECT_EQ(j.dtype(), eager.dtype());
  EXPECT_FALSE(eager.weak_type());
  expect_values(j, want, tol, "jit");
  auto lowered = jitted.lower(spec_of(args)...);
  const std::string text = lowered.as_text();
  for (const auto& t : texts) EXPECT_NE(text.find(t), std::string::npos) << t << " in\n" << text;
  // The lowering verifies, and its text parses back into the same program.
  EXPECT_NO_THROW(ir::verify(lowered.module())) << text;
  auto compiled = lowered.compile();
  expect_values(compiled(args...), want, tol, "compiled from text");
  return eager;
}

template <class F>
void expect_error(F fn, const std::string& message) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------------ element-wise

TEST(LaxElementwise, Arithmetic) {
  const Array x = f32({1, -2, 3.5, 8}), y = f32({2, 4, -0.5, 3});
  check([](const Array& a, const Array& b) { return L::add(a, b); }, {3, 2, 3, 11}, 0,
        {"stablehlo.add"}, x, y);
  check([](const Array& a, const Array& b) { return L::sub(a, b); }, {-1, -6, 4, 5}, 0,
        {"stablehlo.subtract"}, x, y);
  check([](const Array& a, const Array& b) { return L::mul(a, b); }, {2, -8, -1.75, 24}, 0,
        {"stablehlo.multiply"}, x, y);
  check([](const Array& a, const Array& b) { return L::div(a, b); }, {0.5, -0.5, -7, 8.0 / 3}, 1e-6,
        {"stablehlo.divide"}, x, y);
  check([](const Array& a, const Array& b) { return L::rem(a, b); },
        {1, -2, std::fmod(3.5, -0.5), 2}, 1e-6, {"stablehlo.remainder"}, x, y);
  check([](const Array& a, const Array& b) { return L::pow(a, b); },
        {1, 16, std::pow(3.5, -0.5), 512}, 1e-6, {"stablehlo.power"}, x, y);
  check([](const Array& a, const Array& b) { return L::max(a, b); }, {2, 4, 3.5, 8}, 0,
        {"stablehlo.maximum"}, x, y);
  check([](const Array& a, const Array& b) { return L::min(a, b); }, {1, -2, -0.5, 3}, 0,
        {"stablehlo.minimum"}, x, y);
  check([](const Array& a, const Array& b) { return L::atan2(a, b); },
        {std::atan2(1, 2), std::atan2(-2, 4), std::atan2(3.5, -0.5), std::atan2(8, 3)}, 1e-6,
        {"stablehlo.atan2"}, x, y);
}

TEST(LaxElementwise, IntegerDivisionAndNaN) {
  check([](const Array& a, const Array& b) { return L::div(a, b); }, {-3, 3, -3, 3}, 0,
        {"stablehlo.divide"}, i32({-7, 7, 7, -7}), i32({2, 2, -2, -2}));
  check([](const Array& a, const Array& b) { return L::rem(a, b); }, {-1, 1, 1, -1}, 0,
        {"stablehlo.remainder"}, i32({-7, 7, 7, -7}), i32({2, 2, -2, -2}));
  // max and min propagate NaN.
  check([](const Array& a, const Array& b) { return L::max(a, b); }, {kNaN, kNaN, 2}, 0, {},
        f32({NAN, 1, 2}), f32({1, NAN, 1}));
  check([](const Array& a, const Array& b) { return L::min(a, b); }, {kNaN, kNaN, 1}, 0, {},
        f32({NAN, 1, 2}), f32({1, NAN, 1}));
}

TEST(LaxElementwise, Bitwise) {
  const Array a = i32({0b1100, -1, 5}), b = i32({0b1010, 7, 1});
  check([](const Array& x, const Array& y) { return L::bitwise_and(x, y); }, {0b1000, 7, 1}, 0,
        {"stablehlo.and"}, a, b);
  check([](const Array& x, const Array& y) { return L::bitwise_or(x, y); }, {0b1110, -1, 5}, 0,
        {"stablehlo.or"}, a, b);
  check([](const Array& x, const Array& y) { return L::bitwise_xor(x, y); }, {0b0110, -8, 4}, 0,
        {"stablehlo.xor"}, a, b);
  check([](const Array& x) { return L::bitwise_not(x); }, {~0b1100, 0, ~5}, 0, {"stablehlo.not"},
        a);
  check([](const Array& x, const Array& y) { return L::shift_left(x, y); },
        {0b1100 << 10, -128, 10}, 0, {"stablehlo.shift_left"}, a, b);
  check([](const Array& x, const Array& y) { return L::shift_right_arithmetic(x, y); }, {0, -1, 2},
        0, {"stablehlo.shift_right_arithmetic"}, a, b);
  check([](const Array& x, const Array& y) { return L::shift_right_logical(x, y); },
        {0, static_cast<double>(0xffffffffu >> 7), 2}, 0, {"stablehlo.shift_right_logical"}, a, b);
  check([](const Array& x) { return L::population_count(x); }, {2, 32, 2}, 0, {"stablehlo.popcnt"},
        a);
  check([](const Array& x) { return L::clz(x); }, {28, 0, 29}, 0, {"stablehlo.count_leading_zeros"},
        a);
  // Booleans.
  const Array t = arr(std::vector<bool>{true, true, false}, {3});
  const Array u = arr(std::vector<bool>{true, false, false}, {3});
  check([](const Array& x, const Array& y) { return L::bitwise_and(x, y); }, {1, 0, 0}, 0, {}, t,
        u);
  check([](const Array& x) { return L::bitwise_not(x); }, {0, 0, 1}, 0, {}, t);
}

TEST(LaxElementwise, Comparisons) {
  const Array x = f32({1, 2, NAN, 3}), y = f32({2, 2, NAN, 1});
  Array r = check([](const Array& a, const Array& b) { return L::lt(a, b); }, {1, 0, 0, 0}, 0,
                  {"stablehlo.compare", "LT", "FLOAT"}, x, y);
  EXPECT_EQ(r.dtype(), DType::Bool);
  check([](const Array& a, const Array& b) { return L::le(a, b); }, {1, 1, 0, 0}, 0, {"LE"}, x, y);
  check([](const Array& a, const Array& b) { return L::gt(a, b); }, {0, 0, 0, 1}, 0, {"GT"}, x, y);
  check([](const Array& a, const Array& b) { return L::ge(a, b); }, {0, 1, 0, 1}, 0, {"GE"}, x, y);
  check([](const Array& a, const Array& b) { return L::eq(a, b); }, {0, 1, 0, 0}, 0, {"EQ"}, x, y);
  check([](const Array& a, const Array& b) { return L::ne(a, b); }, {1, 0, 1, 1}, 0, {"NE"}, x, y);
  check([](const Array& a, const Array& b) { return L::lt(a, b); }, {0, 1}, 0, {"SIGNED"},
        i32({-1, 1}), i32({-2, 2}));
  check([](const Array& a, const Array& b) { return L::lt(a, b); }, {1, 0}, 0, {"UNSIGNED"},
        arr(std::vector<uint32_t>{1, 0xffffffffu}, {2}), arr(std::vector<uint32_t>{2, 1}, {2}));
}

TEST(LaxElementwise, UnaryMath) {
  const std::vector<float> xs = {0.25f, 1.0f, 2.5f, 0.75f};
  const Array x = f32(xs);
  auto apply = [&](double (*f)(double)) {
    std::vector<double> r;
    for (float v : xs) r.push_back(f(v));
    return r;
  };
  check([](const Array& a) { return L::exp(a); }, apply(std::exp), 1e-6, {"stablehlo.exponential"},
        x);
  check([](const Array& a) { return L::expm1(a); }, apply(std::expm1), 1e-6,
        {"stablehlo.exponential_minus_one"}, x);
  check([](const Array& a) { return L::log(a); }, apply(std::log), 1e-6, {"stablehlo.log"}, x);
  check([](const Array& a) { return L::log1p(a); }, apply(std::log1p), 1e-6,
        {"stablehlo.log_plus_one"}, x);
  check([](const Array& a) { return L::tanh(a); }, apply(std::tanh), 1e-6, {"stablehlo.tanh"}, x);
  check([](const Array& a) { return L::logistic(a); },
        apply([](double v) { return 1 / (1 + std::exp(-v)); }), 1e-6, {"stablehlo.logistic"}, x);
  check([](const Array& a) { return L::sin(a); }, apply(std::sin), 1e-6, {"stablehlo.sine"}, x);
  check([](const Array& a) { return L::cos(a); }, apply(std::cos), 1e-6, {"stablehlo.cosine"}, x);
  check([](const Array& a) { return L::tan(a); }, apply(std::tan), 1e-6, {"stablehlo.tan"}, x);
  check([](const Array& a) { return L::sqrt(a); }, apply(std::sqrt), 1e-6, {"stablehlo.sqrt"}, x);
  check([](const Array& a) { return L::rsqrt(a); },
        apply([](double v) { return 1 / std::sqrt(v); }), 1e-6, {"stablehlo.rsqrt"}, x);
  check([](const Array& a) { return L::cbrt(a); }, apply(std::cbrt), 1e-6, {"stablehlo.cbrt"}, x);
}

TEST(LaxElementwise, SignsAndRounding) {
  const Array x = f32({-2.5f, -0.4f, 0.5f, 1.5f, 2.5f});
  check([](const Array& a) { return L::neg(a); }, {2.5, 0.4, -0.5, -1.5, -2.5}, 1e-7,
        {"stablehlo.negate"}, x);
  check([](const Array& a) { return L::abs(a); }, {2.5, 0.4, 0.5, 1.5, 2.5}, 1e-7,
        {"stablehlo.abs"}, x);
  check([](const Array& a) { return L::sign(a); }, {-1, -1, 1, 1, 1}, 0, {"stablehlo.sign"}, x);
  check([](const Array& a) { return L::floor(a); }, {-3, -1, 0, 1, 2}, 0, {"stablehlo.floor"}, x);
  check([](const Array& a) { return L::ceil(a); }, {-2, -0, 1, 2, 3}, 0, {"stablehlo.ceil"}, x);
  check([](const Array& a) { return L::round(a); }, {-3, -0, 1, 2, 3}, 0,
        {"stablehlo.round_nearest_afz"}, x);
  check([](const Array& a) { return L::round(a, false); }, {-2, -0, 0, 2, 2}, 0,
        {"stablehlo.round_nearest_even"}, x);
  check([](const Array& a) { return L::is_finite(a); }, {1, 0, 0, 1}, 0, {"stablehlo.is_finite"},
        f32({1, INFINITY, NAN, -3}));
  check([](const Array& a) { return L::abs(a); }, {3, 0, 5}, 0, {}, i32({-3, 0, 5}));
  check([](const Array& a) { return L::sign(a); }, {-1, 0, 1}, 0, {}, i32({-3, 0, 5}));
  check([](const Array& a) { return L::sign(a); }, {0, 1, 1}, 0, {"stablehlo.select"},
        arr(std::vector<uint8_t>{0, 1, 200}, {3}));
}

TEST(LaxElementwise, ErfMatchesLibm) {
  std::vector<float> xs = {-5, -3.2f, -1.5f, -0.7f, -0.1f, 0, 1e-4f, 0.3f, 0.9f, 1.2f, 2.5f, 4.5f};
  std::vector<double> want;
  for (float v : xs) want.push_back(std::erf(static_cast<double>(v)));
  // Lowered as jax.lax lowers it: one chlo.erf, which the compiler expands.
  check([](const Array& a) { return L::erf(a); }, want, 2e-6,
        {"chlo.erf %arg0 : tensor<12xf32> -> tensor<12xf32>"}, f32(xs));
  std::vector<double> xd = {-7, -2.5, -1, -0.999, -0.3, 0, 1e-9, 0.5, 0.99, 1.0, 1.7, 3.3, 6.5, 30};
  std::vector<double> wd;
  for (double v : xd) wd.push_back(std::erf(v));
  check([](const Array& a) { return L::erf(a); }, wd, 1e-14, {"chlo.erf"}, f64(xd));
  // f16 and bf16 compute in f32 (inside the expansion).
  const Array h = L::convert_element_type(f32({0.5f, -1.0f}), DType::F16);
  check([](const Array& a) { return L::erf(a); }, {std::erf(0.5), std::erf(-1.0)}, 2e-3,
        {"chlo.erf %arg0 : tensor<2xf16>"}, h);
  const Array b = L::convert_element_type(f32({0.5f, -1.0f}), DType::BF16);
  Array r = check([](const Array& a) { return L::erf(a); }, {std::erf(0.5), std::erf(-1.0)}, 1e-2,
                  {"chlo.erf %arg0 : tensor<2xbf16>"}, b);
  EXPECT_EQ(r.dtype(), DType::BF16);
}

TEST(LaxElementwise, ErfcAndErfInv) {
  std::vector<double> xd = {-3, -1.5, -0.5, 0, 0.25, 0.99, 1.0, 1.5, 2.5, 5, 9, 27};
  std::vector<double> wd;
  for (double v : xd) wd.push_back(std::erfc(v));
  check([](const Array& a) { return L::erfc(a); }, wd, 1e-13, {}, f64(xd));
  std::vector<float> xf = {-3, -1.5f, -0.5f, 0, 0.25f, 0.99f, 1.5f, 2.5f, 5, 9};
  std::vector<double> wf;
  for (float v : xf) wf.push_back(std::erfc(static_cast<double>(v)));
  check([](const Array& a) { return L::erfc(a); }, wf, 1e-5, {}, f32(xf));
  // erf(erf_inv(y)) == y.
  std::vector<double> ys = {-0.999999, -0.9, -0.5, -0.01, 0, 0.3, 0.75, 0.99, 0.9999999};
  Array inv = L::erf_inv(f64(ys));
  std::vector<double> back;
  for (double v : values(inv)) back.push_back(std::erf(v));
  expect_values(arr(back, {static_cast<int64_t>(back.size())}), ys, 1e-13, "erf(erf_inv) f64");
  std::vector<float> yf = {-0.999f, -0.9f, -0.5f, 0, 0.3f, 0.75f, 0.99f};
  std::vector<double> wyf(yf.begin(), yf.end());
  Array invf = L::erf_inv(f32(yf));
  std::vector<double> backf;
  for (double v : values(invf)) backf.push_back(std::erf(v));
  expect_values(arr(backf, {static_cast<int64_t>(backf.size())}), wyf, 1e-5, "erf(erf_inv) f32");
  expect_values(L::erf_inv(f32({1, -1})), {kInf, -kInf}, 0, "erf_inv(+-1)");
}

TEST(LaxElementwise, MoreFunctions) {
  const std::vector<double> xs = {-0.9, -0.3, 0.0, 0.4, 0.8};
  auto apply = [&](double (*f)(double)) {
    std::vector<double> r;
    for (double v : xs) r.push_back(f(v));
    return r;
  };
  const Array x = f64(xs);
  check([](const Array& a) { return L::asin(a); }, apply(std::asin), 1e-14, {}, x);
  check([](const Array& a) { return L::acos(a); }, apply(std::acos), 1e-14, {}, x);
  check([](const Array& a) { return L::atan(a); }, apply(std::atan), 1e-14, {}, x);
  check([](const Array& a) { return L::sinh(a); }, apply(std::sinh), 1e-14, {}, x);
  check([](const Array& a) { return L::cosh(a); }, apply(std::cosh), 1e-14, {}, x);
  check([](const Array& a) { return L::asinh(a); }, apply(std::asinh), 1e-14, {}, x);
  check([](const Array& a) { return L::atanh(a); }, apply(std::atanh), 1e-14, {}, x);
  check([](const Array& a) { return L::exp2(a); }, apply(std::exp2), 1e-14, {}, x);
  check([](const Array& a) { return L::acosh(a); },
        {std::acosh(1.0), std::acosh(1.5), std::acosh(30.0), kNaN}, 1e-14, {},
        f64({1, 1.5, 30, 0.5}));
  check([](const Array& a) { return L::sinh(a); }, {std::sinh(20.0), std::sinh(-50.0)}, 1e-5, {},
        f32({20, -50}));
  check([](const Array& a) { return L::asinh(a); }, {std::asinh(1e20), std::asinh(-3.0)}, 1e-6, {},
        f32({1e20f, -3}));
  check([](const Array& a) { return L::square(a); }, {9, 0.25}, 0, {"stablehlo.multiply"},
        f32({-3, 0.5}));
  check([](const Array& a) { return L::reciprocal(a); }, {-0.25, 2}, 0, {"stablehlo.divide"},
        f32({-4, 0.5}));
  check([](const Array& a) { return L::integer_pow(a, 5); }, {-243, 1.0 / 32}, 1e-7, {},
        f32({-3, 0.5}));
  check([](const Array& a) { return L::integer_pow(a, -2); }, {1.0 / 9, 4}, 1e-7, {},
        f32({-3, 0.5}));
  check([](const Array& a) { return L::integer_pow(a, 3); }, {-27, 8}, 0, {}, i32({-3, 2}));
}

TEST(LaxElementwise, SelectAndClamp) {
  const Array p = arr(std::vector<bool>{true, false, true}, {3});
  check([](const Array& c, const Array& a, const Array& b) { return L::select(c, a, b); },
        {1, 20, 3}, 0, {"stablehlo.select"}, p, f32({1, 2, 3}), f32({10, 20, 30}));
  check([](const Array& lo, const Array& x, const Array& hi) { return L::clamp(lo, x, hi); },
        {0, 0.5, 1}, 0, {"stablehlo.clamp", "stablehlo.broadcast_in_dim"}, fs(0), f32({-1, 0.5, 3}),
        fs(1));
  check([](const Array& lo, const Array& x, const Array& hi) { return L::clamp(lo, x, hi); },
        {0, 2, 2}, 0, {"stablehlo.clamp"}, i32({0, 0, 0}), i32({-1, 2, 5}), i32({1, 3, 2}));
  expect_error(
      [&] {
        L::select(f32({1, 0, 1}), f32({1, 2, 3}), f32({1, 2, 3}));
      },
      "lax.select: the predicate must be bool, got f32[3]");
  expect_error([&] { L::clamp(f32({0, 0}), f32({1, 2, 3}), fs(1)); }, "lax.clamp:");
}

TEST(LaxElementwise, Conversions) {
  check([](const Array& a) { return L::convert_element_type(a, DType::I32); }, {-2, 0, 3}, 0,
        {"stablehlo.convert"}, f32({-2.7f, 0.2f, 3.9f}));
  Array b = check([](const Array& a) { return L::convert_element_type(a, DType::Bool); }, {1, 0, 1},
                  0, {"stablehlo.compare", "NE"}, f32({-2.7f, 0, NAN}));
  EXPECT_EQ(b.dtype(), DType::Bool);
  check([](const Array& a) { return L::convert_element_type(a, DType::F32); }, {1, 0}, 0,
        {"stablehlo.convert"}, arr(std::vector<bool>{true, false}, {2}));
  const Array x = f32({1.0f, -2.0f});
  EXPECT_EQ(L::convert_element_type(x, DType::F32).impl(), x.impl());  // the identity
  Array weak = L::convert_element_type(scalar(2.0), DType::F32);
  EXPECT_FALSE(weak.weak_type());

  check([](const Array& a) { return L::bitcast_convert_type(a, DType::U32); },
        {0x3f800000u, 0xc0000000u}, 0, {"stablehlo.bitcast_convert"}, x);
  Array bytes = check([](const Array& a) { return L::bitcast_convert_type(a, DType::U8); },
                      {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}, 0, {}, x);
  EXPECT_EQ(bytes.shape(), (Shape{2, 4}));
  check([](const Array& a) { return L::bitcast_convert_type(a, DType::F32); }, {1, -2}, 0, {},
        bytes);
  expect_error([&] { L::bitcast_convert_type(f32({1, 2, 3}), DType::F64); }, "last dimension of 2");

  // To f16's precision: 1 + 2^-12 rounds to 1; 65520 overflows to inf with 5 exponent bits.
  check([](const Array& a) { return L::reduce_precision(a, 5, 10); }, {1.0, 0.5, kInf}, 0,
        {"stablehlo.reduce_precision", "e5m10"}, f32({1.0f + 1.0f / 4096, 0.5f, 65520.0f}));
}

TEST(LaxElementwise, Errors) {
  expect_error(
      [] {
        L::add(f32({1, 2, 3, 4, 5, 6}, {2, 3}), f32({1, 2, 3}));
      },
      "lax.add: operands must have the same shape and dtype, got f32[2,3] and f32[3]");
  expect_error([] { L::mul(f32({1}), i32({1})); },
               "lax.mul: operands must have the same shape and dtype, got f32[1] and i32[1]");
  expect_error([] { L::lt(f32({1}), f64({1})); }, "lax.lt: operands must have the same shape");
  expect_error([] { L::bitwise_and(f32({1}), f32({1})); },
               "lax.bitwise_and: operands must be integer or bool, got f32[1]");
  expect_error([] { L::exp(i32({1})); },
               "lax.exp: operand must be floating-point or complex, got i32[1]");
  expect_error([] { L::add(arr(std::vector<bool>{true}, {1}), arr(std::vector<bool>{true}, {1})); },
               "lax.add: operands must be a number");
  expect_error([] { L::add(Array(), f32({1})); }, "lax.add");
}

TEST(LaxElementwise, ResultsAreStronglyTyped) {
  Array r = L::add(scalar(2.0), scalar(3.0));
  EXPECT_FALSE(r.weak_type());
  EXPECT_EQ(r.item<float>(), 5.0f);
}

// ------------------------------------------------------------------ shapes

TEST(LaxShape, Broadcasts) {
  Array r = check(
      [](const Array& a) {
        return L::broadcast_in_dim(a, {2, 3}, {1});
      },
      {1, 2, 3, 1, 2, 3}, 0, {"stablehlo.broadcast_in_dim", "dims = [1]"}, f32({1, 2, 3}));
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  check(
      [](const Array& a) {
        return L::broadcast_in_dim(a, {2, 3}, {0, 1});
      },
      {1, 1, 1, 2, 2, 2}, 0, {}, f32({1, 2}, {2, 1}));
  r = check([](const Array& a) { return L::broadcast(a, {2}); }, {1, 2, 1, 2}, 0, {}, f32({1, 2}));
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  expect_error(
      [] {
        L::broadcast_in_dim(f32({1, 2}), {2, 3}, {1});
      },
      "lax.broadcast_in_dim: operand f32[2] cannot be broadcast to [2,3]");
  expect_error([] { L::broadcast_in_dim(f32({1, 2}), {2, 3}, {}); }, "one entry per operand");
}

TEST(LaxShape, ReshapeTransposeRev) {
  const Array x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Array r = check(
      [](const Array& a) {
        return L::reshape(a, {3, 2});
      },
      {1, 2, 3, 4, 5, 6}, 0, {"stablehlo.reshape"}, x);
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  r = check(
      [](const Array& a) {
        return L::transpose(a, {1, 0});
      },
      {1, 4, 2, 5, 3, 6}, 0, {"stablehlo.transpose", "dims = [1, 0]"}, x);
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  check([](const Array& a) { return L::rev(a, {1}); }, {3, 2, 1, 6, 5, 4}, 0, {"stablehlo.reverse"},
        x);
  check([](const Array& a) { return L::rev(a, {0, -1}); }, {6, 5, 4, 3, 2, 1}, 0, {}, x);
  r = check(
      [](const Array& a) {
        return L::squeeze(a, {0, 2});
      },
      {1, 2, 3}, 0, {"stablehlo.reshape"}, f32({1, 2, 3}, {1, 3, 1}));
  EXPECT_EQ(r.shape(), (Shape{3}));
  r = check(
      [](const Array& a) {
        return L::expand_dims(a, {0, -1});
      },
      {1, 2, 3}, 0, {"stablehlo.broadcast_in_dim"}, f32({1, 2, 3}));
  EXPECT_EQ(r.shape(), (Shape{1, 3, 1}));
  expect_error([&] { L::reshape(x, {4}); },
               "lax.reshape: cannot reshape f32[2,3] (6 elements) to [4] (4 elements)");
  expect_error([&] { L::transpose(x, {0, 0}); }, "lax.transpose: permutation [0, 0]");
  expect_error([&] { L::squeeze(x, {0}); }, "lax.squeeze: cannot squeeze dimension 0 of f32[2,3]");
}

TEST(LaxShape, Slices) {
  const Array x = f32({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Array r = check(
      [](const Array& a) {
        return L::slice(a, {0, 1}, {3, 4}, {2, 2});
      },
      {1, 3, 9, 11}, 0, {"stablehlo.slice"}, x);
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  check([](const Array& a) { return L::slice_in_dim(a, -2, 4, 1, 1); }, {2, 3, 6, 7, 10, 11}, 0, {},
        x);
  expect_error([&] { L::slice(x, {0, 0}, {4, 4}); }, "lax.slice: invalid slice");

  // Start (1, 3) is clamped to (1, 2) so that the 2x2 window fits; -1 counts from the end.
  check(
      [](const Array& a, const Array& i, const Array& j) {
        return L::dynamic_slice(a, {i, j}, {2, 2});
      },
      {6, 7, 10, 11}, 0, {"stablehlo.dynamic_slice"}, x, s32(1), s32(3));
  check(
      [](const Array& a, const Array& i, const Array& j) {
        return L::dynamic_slice(a, {i, j}, {1, 2});
      },
      {8, 9}, 0, {"stablehlo.select"}, x, s32(-1), s32(0));
  check([](const Array& a, const Array& i) { return L::dynamic_slice_in_dim(a, i, 2, 1); },
        {1, 2, 5, 6, 9, 10}, 0, {}, x, s32(1));
  check(
      [](const Array& a, const Array& u, const Array& i, const Array& j) {
        return L::dynamic_update_slice(a, u, {i, j});
      },
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -2}, 0, {"stablehlo.dynamic_update_slice"}, x,
      f32({-1, -2}, {1, 2}), s32(5), s32(2));
  check([](const Array& a, const Array& u,
           const Array& i) { return L::dynamic_update_slice_in_dim(a, u, i, 0); },
        {0, 1, 2, 3, -1, -1, -1, -1, 8, 9, 10, 11}, 0, {}, x, f32({-1, -1, -1, -1}, {1, 4}),
        s32(1));
  expect_error([&] { L::dynamic_slice(x, {s32(0)}, {1, 1}); }, "one start index per dimension");
  expect_error(
      [&] {
        L::dynamic_slice(x, {fs(0), fs(0)}, {1, 1});
      },
      "lax.dynamic_slice: start indices must be integer, got f32[]");
}

TEST(LaxShape, ConcatenatePadIota) {
  Array r = check(
      [](const Array& a, const Array& b) {
        return L::concatenate({a, b}, 1);
      },
      {1, 2, 5, 3, 4, 6}, 0, {"stablehlo.concatenate"}, f32({1, 2, 3, 4}, {2, 2}),
      f32({5, 6}, {2, 1}));
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  expect_error(
      [] {
        L::concatenate({f32({1, 2}), i32({1})}, 0);
      },
      "lax.concatenate: operands must have the same dtype");
  r = check(
      [](const Array& a, const Array& v) {
        return L::pad(a, v, {{1, 2, 1}});
      },
      {0, 1, 0, 2, 0, 3, 0, 0}, 0, {"stablehlo.pad"}, f32({1, 2, 3}), fs(0));
  EXPECT_EQ(r.shape(), (Shape{8}));
  check(
      [](const Array& a, const Array& v) {
        return L::pad(a, v, {{-1, 1, 0}});
      },
      {2, 3, 9}, 0, {}, f32({1, 2, 3}), fs(9));
  expect_error([] { L::pad(f32({1}), s32(0), {{0, 0, 0}}); }, "lax.pad: padding_value must be");
  r = check([]() { return L::iota(DType::I32, 4); }, {0, 1, 2, 3}, 0, {"stablehlo.iota"});
  EXPECT_EQ(r.dtype(), DType::I32);
  check(
      []() {
        return L::broadcasted_iota(DType::F32, {2, 3}, 1);
      },
      {0, 1, 2, 0, 1, 2}, 0, {"stablehlo.iota", "dim = 1"});
  check(
      []() {
        return L::full({2, 2}, 1.5, DType::F32);
      },
      {1.5, 1.5, 1.5, 1.5}, 0, {"stablehlo.constant", "stablehlo.broadcast_in_dim"});
  check([]() { return L::full({2}, -kInf, DType::I8); }, {-128, -128}, 0, {});
}

// ------------------------------------------------------------------ contractions

TEST(LaxDot, DotAndDotGeneral) {
  const Array a = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  const Array v = f32({1, 0, -1});
  check([](const Array& m, const Array& x) { return L::dot(m, x); }, {-2, -2}, 0,
        {"stablehlo.dot_general", "contracting_dims = [1] x [0]"}, a, v);
  check([](const Array& m, const Array& n) { return L::dot(m, n); }, {14, 32, 32, 77}, 0, {}, a,
        L::transpose(a, {1, 0}));
  // Batched: [2,1,2] x [2,2,1] -> [2,1,1].
  L::DotDimensionNumbers d;
  d.lhs_batch_dimensions = {0};
  d.rhs_batch_dimensions = {0};
  d.lhs_contracting_dimensions = {2};
  d.rhs_contracting_dimensions = {1};
  Array r = check([d](const Array& x, const Array& y) { return L::dot_general(x, y, d); }, {5, 39},
                  0, {"batching_dims = [0] x [0]", "contracting_dims = [2] x [1]"},
                  f32({1, 2, 3, 4}, {2, 1, 2}), f32({1, 2, 5, 6}, {2, 2, 1}));
  EXPECT_EQ(r.shape(), (Shape{2, 1, 1}));
  r = check([](const Array& x, const Array& y) { return L::dot(x, y, DType::F32); }, {11}, 0,
            {"bf16", "f32"}, L::convert_element_type(f32({1, 2}), DType::BF16),
            L::convert_element_type(f32({3, 4}), DType::BF16));
  EXPECT_EQ(r.dtype(), DType::F32);
  check([](const Array& x, const Array& y) { return L::dot(x, y); }, {11}, 0, {}, i32({1, 2}),
        i32({3, 4}));
  expect_error([&] { L::dot(a, a); }, "lax.dot: incompatible shapes f32[2,3] and f32[2,3]");
  L::DotDimensionNumbers bad;
  bad.lhs_contracting_dimensions = {1};
  bad.rhs_contracting_dimensions = {1};
  expect_error(
      [&] {
        L::dot_general(a, f32({1, 2}, {1, 2}), bad);
      },
      "lax.dot_general: contracting dimensions [1] and [1] have different sizes in "
      "f32[2,3] and f32[1,2]");
  expect_error(
      [&] {
        L::dot(a, i32({1, 2, 3}));
      },
      "lax.dot_general: operands must have the same dtype");
}

// Direct convolution in NCHW/OIHW for checking.
std::vector<double> conv_ref(const std::vector<float>& x, Shape xs, const std::vector<float>& k,
                             Shape ks, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                             int64_t dil = 1) {
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ks[0], KH = ks[2], KW = ks[3];
  const int64_t eh = (KH - 1) * dil + 1, ew = (KW - 1) * dil + 1;
  const int64_t OH = (H + pad_lo + pad_hi - eh) / stride + 1,
                OW = (W + pad_lo + pad_hi - ew) / stride + 1;
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double s = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t p = 0; p < KH; ++p)
              for (int64_t q = 0; q < KW; ++q) {
                const int64_t y = i * stride + p * dil - pad_lo, xq = j * stride + q * dil - pad_lo;
                if (y < 0 || y >= H || xq < 0 || xq >= W) continue;
                s += x[((n * C + c) * H + y) * W + xq] * k[((o * C + c) * KH + p) * KW + q];
              }
          out.push_back(s);
        }
  return out;
}

TEST(LaxDot, Convolution) {
  std::vector<float> x(2 * 2 * 4 * 5), k(3 * 2 * 3 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 11) - 5;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>((i * 5) % 7) - 3;
  const Array X = f32(x, {2, 2, 4, 5}), K = f32(k, {3, 2, 3, 3});
  Array r = check(
      [](const Array& a, const Array& b) {
        return L::conv_general_dilated(a, b, {1, 1}, {{1, 1}, {1, 1}});
      },
      conv_ref(x, {2, 2, 4, 5}, k, {3, 2, 3, 3}, 1, 1, 1), 1e-5,
      {"stablehlo.convolution", "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]",
       "pad = [[1, 1], [1, 1]]"},
      X, K);
  EXPECT_EQ(r.shape(), (Shape{2, 3, 4, 5}));
  check(
      [](const Array& a, const Array& b) {
        return L::conv_general_dilated(a, b, {2, 2}, {}, {}, {1, 1});
      },
      conv_ref(x, {2, 2, 4, 5}, k, {3, 2, 3, 3}, 2, 0, 0), 1e-5, {"stride = [2, 2]"}, X, K);
  check(
      [](const Array& a, const Array& b) {
        return L::conv_general_dilated(a, b, {1, 1}, {{2, 2}, {2, 2}}, {}, {2, 2});
      },
      conv_ref(x, {2, 2, 4, 5}, k, {3, 2, 3, 3}, 1, 2, 2, 2), 1e-5, {"rhs_dilate = [2, 2]"}, X, K);
  // NHWC / HWIO gives the same numbers, transposed.
  const Array Xn = L::transpose(X, {0, 2, 3, 1}), Kh = L::transpose(K, {2, 3, 1, 0});
  auto pads = L::padtype_to_pads({4, 5}, {3, 3}, {1, 1}, "SAME");
  ASSERT_EQ(pads.size(), 2u);
  EXPECT_EQ(pads[0], (std::pair<int64_t, int64_t>{1, 1}));
  Array nhwc = L::conv_general_dilated(Xn, Kh, {1, 1}, pads, {}, {}, {"NHWC", "HWIO", "NHWC"});
  EXPECT_EQ(nhwc.shape(), (Shape{2, 4, 5, 3}));
  expect_values(L::transpose(nhwc, {0, 3, 1, 2}),
                conv_ref(x, {2, 2, 4, 5}, k, {3, 2, 3, 3}, 1, 1, 1), 1e-5, "NHWC");
  expect_error(
      [&] {
        L::conv_general_dilated(X, L::transpose(K, {1, 0, 2, 3}), {1, 1}, {});
      },
      "lax.conv_general_dilated: lhs feature dimension (2) must equal");
}

// ------------------------------------------------------------------ reductions

TEST(LaxReduce, Monoids) {
  const Array x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Array r = check([](const Array& a) { return L::reduce_sum(a, {1}); }, {6, 15}, 0,
                  {"stablehlo.reduce", "stablehlo.add"}, x);
  EXPECT_EQ(r.shape(), (Shape{2}));
  check([](const Array& a) { return L::reduce_sum(a, {0, 1}); }, {21}, 0, {}, x);
  check([](const Array& a) { return L::reduce_max(a, {0}); }, {4, 5, 6}, 0, {"stablehlo.maximum"},
        x);
  check([](const Array& a) { return L::reduce_min(a, {-1}); }, {1, 4}, 0, {"stablehlo.minimum"}, x);
  check([](const Array& a) { return L::reduce_prod(a, {1}); }, {6, 120}, 0, {"stablehlo.multiply"},
        x);
  check([](const Array& a) { return L::reduce_max(a, {0}); }, {-kInf}, 0, {}, f32({}, {0, 1}));
  check([](const Array& a) { return L::reduce_max(a, {0}); }, {7}, 0, {}, i32({-3, 7, 2}));
  const Array b = arr(std::vector<bool>{true, false, true, true}, {2, 2});
  check([](const Array& a) { return L::reduce_and(a, {1}); }, {0, 1}, 0, {"stablehlo.and"}, b);
  check([](const Array& a) { return L::reduce_or(a, {0}); }, {1, 1}, 0, {"stablehlo.or"}, b);
  check([](const Array& a) { return L::reduce_and(a, {0}); }, {0b0100}, 0, {},
        i32({0b0110, 0b1101}));
  expect_error([&] { L::reduce_sum(x, {2}); }, "lax.reduce_sum: axis 2 is out of range for rank 2");
  expect_error([&] { L::reduce_sum(b, {0}); }, "lax.reduce_sum: operand must be a number");
}

TEST(LaxReduce, VariadicReduce) {
  // Sum of values and count of positives in one reduce.
  auto fn = [](const Array& v, const Array& pos) {
    auto r = L::reduce({v, pos}, {fs(0), s32(0)},
                       [](const std::vector<Array>& a) {
                         return std::vector<Array>{L::add(a[0], a[2]), L::add(a[1], a[3])};
                       },
                       {0});
    return L::add(L::convert_element_type(r[1], DType::F32), r[0]);
  };
  check(fn, {1.5 + 2}, 1e-6, {"stablehlo.reduce"}, f32({1, -2, 2.5}), i32({1, 0, 1}));
  expect_error(
      [] {
        L::reduce({f32({1})}, {fs(0)},
                  [](const std::vector<Array>& a) {
                    return std::vector<Array>{a[0], a[1]};
                  },
                  {0});
      },
      "lax.reduce: the computation must return (f32[]), got (f32[], f32[])");
  expect_error(
      [] { L::reduce({f32({1})}, {s32(0)}, [](const std::vector<Array>& a) { return a; }, {0}); },
      "lax.reduce: init value 0 must be a scalar of its operand's dtype");
}

TEST(LaxReduce, ArgMaxArgMin) {
  const Array x = f32({3, 7, 7, 1, 5, NAN, 2, 9, -1, -1, 0, -1}, {3, 4});
  Array r = check([](const Array& a) { return L::argmax(a, 1); }, {1, 1, 2}, 0,
                  {"stablehlo.reduce", "stablehlo.iota", "stablehlo.compare", "GT"}, x);
  EXPECT_EQ(r.dtype(), DType::I32);
  check([](const Array& a) { return L::argmin(a, 1); }, {3, 1, 0}, 0, {"LT"}, x);
  check([](const Array& a) { return L::argmax(a, 0, DType::I64); }, {1, 1, 0, 1}, 0, {"i64"}, x);
  check([](const Array& a) { return L::argmin(a, -1); }, {2}, 0, {}, i32({4, 9, -3, -3}));
  check([](const Array& a) { return L::argmax(a, 0); }, {1}, 0, {"UNSIGNED"},
        arr(std::vector<bool>{false, true, true}, {3}));
  expect_error([&] { L::argmax(x, 0, DType::F32); }, "lax.argmax: index_dtype must be an integer");
}

TEST(LaxReduce, ReduceWindow) {
  // 2x2 max pooling with stride 2 over a 4x4 image.
  std::vector<float> img(16);
  for (int i = 0; i < 16; ++i) img[i] = static_cast<float>((i * 5) % 16);
  auto pool = [](const Array& a) {
    L::WindowConfig w;
    w.window_dimensions = {2, 2};
    w.window_strides = {2, 2};
    return L::reduce_window(
        {a}, {L::full({}, -kInf, DType::F32)},
        [](const std::vector<Array>& v) { return std::vector<Array>{L::max(v[0], v[1])}; }, w)[0];
  };
  auto mx = [&](int a, int b, int c, int d) {
    return static_cast<double>(std::max(std::max(img[a], img[b]), std::max(img[c], img[d])));
  };
  Array r = check(pool, {mx(0, 1, 4, 5), mx(2, 3, 6, 7), mx(8, 9, 12, 13), mx(10, 11, 14, 15)}, 0,
                  {"stablehlo.reduce_window", "window_strides"}, f32(img, {4, 4}));
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  // Padded sum windows of 3 over [1..4] with one zero of padding on each side.
  auto sum3 = [](const Array& a) {
    L::WindowConfig w;
    w.window_dimensions = {3};
    w.padding = {{1, 1}};
    return L::reduce_window(
        {a}, {L::full({}, 0, DType::F32)},
        [](const std::vector<Array>& v) { return std::vector<Array>{L::add(v[0], v[1])}; }, w)[0];
  };
  check(sum3, {3, 6, 9, 7}, 0, {"padding"}, f32({1, 2, 3, 4}));
}

TEST(LaxReduce, Cumulative) {
  const Array x = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  check([](const Array& a) { return L::cumsum(a, 1); }, {1, 3, 6, 4, 9, 15}, 0,
        {"stablehlo.reduce_window", "padding", "[2, 0]"}, x);
  check([](const Array& a) { return L::cumsum(a, 1, true); }, {6, 5, 3, 15, 11, 6}, 0, {"[0, 2]"},
        x);
  check([](const Array& a) { return L::cumsum(a, 0); }, {1, 2, 3, 5, 7, 9}, 0, {}, x);
  check([](const Array& a) { return L::cumprod(a, 1); }, {1, 2, 6, 4, 20, 120}, 0, {}, x);
  check([](const Array& a) { return L::cummax(a, 0); }, {3, 3, 5, 5}, 0, {}, i32({3, 1, 5, 2}));
  check([](const Array& a) { return L::cummin(a, 0, true); }, {1, 1, 2, 2}, 0, {},
        i32({3, 1, 5, 2}));
  check([](const Array& a) { return L::cumsum(a, 0); }, {1, 3, 255}, 0, {},
        arr(std::vector<uint8_t>{1, 2, 252}, {3}));
}

// ------------------------------------------------------------------ sorting

TEST(LaxSort, FloatsInTotalOrder) {
  Array r = check([](const Array& a) { return L::sort(a); }, {-kInf, -1, 0, 0, 2, kInf, kNaN, kNaN},
                  0, {"stablehlo.sort", "TOTALORDER"},
                  f32({2, NAN, -0.0f, -1, INFINITY, 0, -NAN, -INFINITY}));
  // -0 and 0 compare equal after canonicalization: the stable sort keeps their order.
  const auto v = values(r);
  ASSERT_EQ(v.size(), 8u);
  EXPECT_TRUE(std::signbit(v[2]));  // the stable sort keeps -0 before 0
  EXPECT_FALSE(std::signbit(v[3]));
  check([](const Array& a) { return L::sort(a, 0); }, {1, 2, 3, 4}, 0, {},
        i32({3, 4, 1, 2}, {2, 2}));
  check([](const Array& a) { return L::sort(a, 1); }, {3, 4, 1, 2}, 0, {},
        i32({4, 3, 2, 1}, {2, 2}));
}

TEST(LaxSort, MultipleOperandsAndKeys) {
  auto by_key = [](const Array& k, const Array& v) { return L::sort_key_val(k, v).second; };
  check(by_key, {20, 40, 10, 30}, 0, {"stablehlo.sort"}, i32({2, 1, 2, 1}), f32({10, 20, 30, 40}));
  auto two_keys = [](const Array& a, const Array& b, const Array& c) {
    return L::sort({a, b, c}, 0, true, 2)[2];
  };
  check(two_keys, {3, 2, 1, 0}, 0, {}, i32({1, 0, 0, 0}), f32({0, 5, 1, -1}), i32({0, 1, 2, 3}));
  expect_error(
      [] {
        L::sort({f32({1, 2}), f32({1})});
      },
      "lax.sort: operands must have the same shape");
  expect_error([] { L::sort({f32({1, 2})}, -1, true, 2); }, "lax.sort: num_keys must be between");
}

TEST(LaxSort, TopK) {
  const Array x = f32({1, 9, 3, 9, 5, 0, -1, 4}, {2, 4});
  auto vals = [](const Array& a) { return L::top_k(a, 2).first; };
  auto idx = [](const Array& a) { return L::top_k(a, 2).second; };
  check(vals, {9, 9, 5, 4}, 0, {"stablehlo.sort"}, x);
  check(idx, {1, 3, 0, 3}, 0, {}, x);
}

// ------------------------------------------------------------------ gather and scatter

TEST(LaxIndexing, Gather) {
  const Array x = f32({0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, {4, 3});
  L::GatherDimensionNumbers d;
  d.offset_dims = {1};
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  // Rows 2, 0 and 7 (clamped to 3).
  Array r = check(
      [d](const Array& a, const Array& i) {
        return L::gather(a, i, d, {1, 3});
      },
      {20, 21, 22, 0, 1, 2, 30, 31, 32}, 0,
      {"stablehlo.gather", "collapsed_slice_dims = [0]", "slice_sizes = array<i64: 1, 3>"}, x,
      i32({2, 0, 7}, {3, 1}));
  EXPECT_EQ(r.shape(), (Shape{3, 3}));
  // Single elements x[i, j].
  L::GatherDimensionNumbers e;
  e.collapsed_slice_dims = {0, 1};
  e.start_index_map = {0, 1};
  check(
      [e](const Array& a, const Array& i) {
        return L::gather(a, i, e, {1, 1});
      },
      {12, 30}, 0, {}, x, i32({1, 2, 3, 0}, {2, 2}));
  expect_error(
      [&] {
        L::gather(x, i32({1, 2}, {2, 1}), d, {1, 3, 1});
      },
      "lax.gather: slice_sizes [1, 3, 1] must have one entry per dimension");
  expect_error(
      [&] {
        L::gather(x, f32({1}, {1, 1}), d, {1, 3});
      },
      "lax.gather: indices must be integer");
}

TEST(LaxIndexing, Scatter) {
  const Array x = f32({1, 1, 1, 1, 1});
  L::ScatterDimensionNumbers d;
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  const Array idx = i32({0, 3, 3, 9}, {4, 1});  // 9 is out of bounds: skipped
  const Array upd = f32({5, 2, 4, 100});
  check([d](const Array& a, const Array& i, const Array& u) { return L::scatter_add(a, i, u, d); },
        {6, 1, 1, 7, 1}, 0, {"stablehlo.scatter", "inserted_window_dims = [0]"}, x, idx, upd);
  check([d](const Array& a, const Array& i, const Array& u) { return L::scatter_mul(a, i, u, d); },
        {5, 1, 1, 8, 1}, 0, {}, x, idx, upd);
  check([d](const Array& a, const Array& i, const Array& u) { return L::scatter_max(a, i, u, d); },
        {5, 1, 1, 4, 1}, 0, {"stablehlo.maximum"}, x, idx, upd);
  check([d](const Array& a, const Array& i, const Array& u) { return L::scatter_min(a, i, u, d); },
        {1, 1, 1, 1, 1}, 0, {"stablehlo.minimum"}, x, idx, upd);
  check([d](const Array& a, const Array& i, const Array& u) { return L::scatter(a, i, u, d); },
        {7, 1, 8, 1, 1}, 0, {}, x, i32({2, 0}, {2, 1}), f32({8, 7}));
  // Row updates of a matrix.
  L::ScatterDimensionNumbers rows;
  rows.update_window_dims = {1};
  rows.inserted_window_dims = {0};
  rows.scatter_dims_to_operand_dims = {0};
  check([rows](const Array& a, const Array& i,
               const Array& u) { return L::scatter_add(a, i, u, rows); },
        {0, 0, 1, 2, 0, 0}, 0, {"update_window_dims = [1]"}, f32({0, 0, 0, 0, 0, 0}, {3, 2}),
        i32({1}, {1, 1}), f32({1, 2}, {1, 2}));
  expect_error(
      [&] {
        L::scatter_add(x, idx, f32({1, 2}), d);
      },
      "lax.scatter: the scatter dimensions of updates f32[2] ([2]) must match the batch "
      "dimensions of indices i32[4,1] ([4])");
}

TEST(LaxMisc, OptimizationBarrier) {
  auto fn = [](const Array& a, const Array& b) {
    auto r = L::optimization_barrier({a, b});
    return L::add(r[0], r[1]);
  };
  check(fn, {4, 6}, 0, {"stablehlo.optimization_barrier"}, f32({1, 2}), f32({3, 4}));
}

// ------------------------------------------------------------------ nn

double sigmoid_d(double v) {
  return 1 / (1 + std::exp(-v));
}

TEST(Nn, Activations) {
  const std::vector<float> xs = {-3, -0.5f, 0, 0.7f, 2.5f};
  const Array x = f32(xs);
  auto apply = [&](auto f) {
    std::vector<double> r;
    for (float v : xs) r.push_back(f(static_cast<double>(v)));
    return r;
  };
  check([](const Array& a) { return nn::relu(a); },
        apply([](double v) { return std::max(v, 0.0); }), 0, {"stablehlo.maximum"}, x);
  check([](const Array& a) { return nn::sigmoid(a); }, apply(sigmoid_d), 1e-6,
        {"stablehlo.logistic"}, x);
  check([](const Array& a) { return nn::silu(a); },
        apply([](double v) { return v * sigmoid_d(v); }), 1e-6, {}, x);
  const double c = std::sqrt(2 / std::numbers::pi);
  check([](const Array& a) { return nn::gelu(a); },
        apply([c](double v) { return 0.5 * v * (1 + std::tanh(c * (v + 0.044715 * v * v * v))); }),
        1e-6, {"stablehlo.tanh"}, x);
  check([](const Array& a) { return nn::gelu(a, false); },
        apply([](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }), 2e-6, {}, x);
  check([](const Array& a) { return nn::relu(a); }, {0, 3}, 0, {}, i32({-2, 3}));
  expect_error([] { nn::gelu(i32({1})); }, "nn.gelu: needs a floating-point array, got i32[1]");
}

TEST(Nn, Softmax) {
  const std::vector<float> xs = {1, 2, 3, -1, 0, 1000};
  const Array x = f32(xs, {2, 3});
  std::vector<double> want, want_log;
  for (int r = 0; r < 2; ++r) {
    double m = -kInf, s = 0;
    for (int j = 0; j < 3; ++j) m = std::max(m, static_cast<double>(xs[r * 3 + j]));
    for (int j = 0; j < 3; ++j) s += std::exp(xs[r * 3 + j] - m);
    for (int j = 0; j < 3; ++j) {
      want.push_back(std::exp(xs[r * 3 + j] - m) / s);
      want_log.push_back(xs[r * 3 + j] - m - std::log(s));
    }
  }
  Array sm = check([](const Array& a) { return nn::softmax(a); }, want, 1e-6,
                   {"stablehlo.reduce", "stablehlo.exponential", "stablehlo.divide"}, x);
  const auto v = values(sm);
  EXPECT_NEAR(v[0] + v[1] + v[2], 1.0, 1e-6);
  EXPECT_NEAR(v[3] + v[4] + v[5], 1.0, 1e-6);
  check([](const Array& a) { return nn::log_softmax(a, 1); }, want_log, 1e-6, {"stablehlo.log"}, x);
  // Along axis 0.
  Array s0 = nn::softmax(f32({0, 1, 0, 1}, {2, 2}), 0);
  expect_values(s0, {0.5, 0.5, 0.5, 0.5}, 1e-7, "softmax axis 0");
}

TEST(Nn, LogSumExp) {
  check([](const Array& a) { return nn::logsumexp(a, {0}); }, {1000 + std::log(2.0)}, 1e-6,
        {"stablehlo.is_finite"}, f32({1000, 1000}));
  check([](const Array& a) { return nn::logsumexp(a, {1}); },
        {std::log(std::exp(1.0) + std::exp(2.0)), -1000 + std::log(2.0)}, 1e-6, {},
        f32({1, 2, -1000, -1000}, {2, 2}));
  check([](const Array& a) { return nn::logsumexp(a, {0}); }, {-kInf}, 0, {},
        f32({-INFINITY, -INFINITY}));
  Array k = nn::logsumexp(f32({0, 0, 0, 0}, {2, 2}), {1}, true);
  EXPECT_EQ(k.shape(), (Shape{2, 1}));
  expect_values(k, {std::log(2.0), std::log(2.0)}, 1e-6, "keepdims");
}

TEST(Nn, OneHot) {
  Array r =
      check([](const Array& i) { return nn::one_hot(i, 3); }, {0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1},
            0, {"stablehlo.iota", "stablehlo.compare"}, i32({1, 0, 5, 2}));
  EXPECT_EQ(r.shape(), (Shape{4, 3}));
  EXPECT_EQ(r.dtype(), DType::F32);
  EXPECT_EQ(nn::one_hot(i32({0}), 2, DType::I32).dtype(), DType::I32);
  expect_error([] { nn::one_hot(f32({1}), 2); }, "nn.one_hot: indices must be integers");
}

}  // namespace
}  // namespace cujax
