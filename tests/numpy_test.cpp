// cujax::numpy: type promotion, broadcasting, the functions and operators, eagerly and under
// jit. Expected values are worked out by hand or taken from the examples in NumPy's and JAX's
// documentation (cited where used).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/numpy.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using jnp::Ellipsis;
using jnp::NewAxis;
using jnp::none;
using jnp::Slice;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

template <class T>
std::vector<T> v(const Array& a) {
  return a.to_vector<T>();
}
std::vector<float> f32(const Array& a) {
  return a.to_vector<float>();
}
std::vector<int32_t> i32(const Array& a) {
  return a.to_vector<int32_t>();
}
std::vector<bool> b1(const Array& a) {
  std::vector<bool> out;
  for (bool b : a.to_vector<bool>()) out.push_back(b);
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
    }
  }
}

// The message of the Error that f throws ("" when it does not throw).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Array iarr(std::vector<int32_t> values, Shape shape) {
  return jnp::array(values, shape);
}
Array farr(std::vector<float> values, Shape shape) {
  return jnp::array(values, shape);
}

// ----- Type promotion ---------------------------------------------------------------------

// The binary promotion table of https://docs.jax.dev/en/latest/type_promotion.html (complex
// columns left out). Rows and columns: b1 u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 i* f*.
const char* const kJaxPromotionTable[] = {
    "b1 b1 u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 i* f*",
    "u1 u1 u1 u2 u4 u8 i2 i2 i4 i8 bf f2 f4 f8 u1 f*",
    "u2 u2 u2 u2 u4 u8 i4 i4 i4 i8 bf f2 f4 f8 u2 f*",
    "u4 u4 u4 u4 u4 u8 i8 i8 i8 i8 bf f2 f4 f8 u4 f*",
    "u8 u8 u8 u8 u8 u8 f* f* f* f* bf f2 f4 f8 u8 f*",
    "i1 i1 i2 i4 i8 f* i1 i2 i4 i8 bf f2 f4 f8 i1 f*",
    "i2 i2 i2 i4 i8 f* i2 i2 i4 i8 bf f2 f4 f8 i2 f*",
    "i4 i4 i4 i4 i8 f* i4 i4 i4 i8 bf f2 f4 f8 i4 f*",
    "i8 i8 i8 i8 i8 f* i8 i8 i8 i8 bf f2 f4 f8 i8 f*",
    "bf bf bf bf bf bf bf bf bf bf bf f4 f4 f8 bf bf",
    "f2 f2 f2 f2 f2 f2 f2 f2 f2 f2 f4 f2 f4 f8 f2 f2",
    "f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f4 f8 f4 f4",
    "f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8 f8",
    "i* i* u1 u2 u4 u8 i1 i2 i4 i8 bf f2 f4 f8 i* f*",
    "f* f* f* f* f* f* f* f* f* f* bf f2 f4 f8 f* f*",
};

WeakDType parse_jax_type(const std::string& s) {
  static const std::map<std::string, WeakDType> names = {
      {"b1", {DType::Bool, false}}, {"u1", {DType::U8, false}},  {"u2", {DType::U16, false}},
      {"u4", {DType::U32, false}},  {"u8", {DType::U64, false}}, {"i1", {DType::I8, false}},
      {"i2", {DType::I16, false}},  {"i4", {DType::I32, false}}, {"i8", {DType::I64, false}},
      {"bf", {DType::BF16, false}}, {"f2", {DType::F16, false}}, {"f4", {DType::F32, false}},
      {"f8", {DType::F64, false}},  {"i*", {DType::I32, true}},  {"f*", {DType::F32, true}}};
  return names.at(s);
}

TEST(NumpyPromotion, MatchesJaxTable) {
  std::vector<std::vector<std::string>> rows;
  for (const char* line : kJaxPromotionTable) {
    std::istringstream in(line);
    std::vector<std::string> cells;
    std::string c;
    while (in >> c) cells.push_back(c);
    ASSERT_EQ(cells.size(), 16u);
    rows.push_back(cells);
  }
  int checked = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const WeakDType a = parse_jax_type(rows[r][0]);
    for (size_t col = 0; col < rows.size(); ++col) {
      const WeakDType b = parse_jax_type(rows[col][0]);
      const WeakDType want = parse_jax_type(rows[r][col + 1]);
      const WeakDType got = jnp::promote_types(a, b);
      EXPECT_EQ(got, want) << rows[r][0] << " x " << rows[col][0] << ": got " << got.str()
                           << ", want " << want.str();
      if (!a.weak_type && !b.weak_type) {
        EXPECT_EQ(jnp::promote_types(a.dtype, b.dtype), want.dtype);
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 225);
}

TEST(NumpyPromotion, WeakTypesAdoptTheOtherOperand) {
  Array h = jnp::array(std::vector<float16>{float16(1.5), float16(2.0)});
  Array y = h * 2.0;
  EXPECT_EQ(y.dtype(), DType::F16);
  EXPECT_FALSE(y.weak_type());
  EXPECT_EQ(float(y.to_vector<float16>()[0]), 3.0f);

  Array i8 = jnp::array(std::vector<int8_t>{1, 2, 3});
  Array z = i8 + 1;
  EXPECT_EQ(z.dtype(), DType::I8);
  EXPECT_FALSE(z.weak_type());
  EXPECT_EQ(v<int8_t>(z), (std::vector<int8_t>{2, 3, 4}));

  Array i = jnp::arange(3);
  EXPECT_EQ(i.dtype(), DType::I32);
  EXPECT_FALSE(i.weak_type());
  Array w = i + 1.5;
  EXPECT_EQ(w.dtype(), DType::F32);
  EXPECT_TRUE(w.weak_type());
  EXPECT_EQ(f32(w), (std::vector<float>{1.5f, 2.5f, 3.5f}));

  Array b = jnp::array({true, false});
  Array bi = b + 1;
  EXPECT_EQ(bi.dtype(), DType::I32);
  EXPECT_TRUE(bi.weak_type());
  EXPECT_EQ(i32(bi), (std::vector<int32_t>{2, 1}));

  // A double scalar keeps its precision when it meets an f64 array.
  Array d = jnp::array(std::vector<double>{1.0});
  Array e = d + 0.1;
  EXPECT_EQ(e.dtype(), DType::F64);
  EXPECT_EQ(e.to_vector<double>()[0], 1.0 + 0.1);

  // Weak and weak: the join of the strong types, still weak.
  WeakDType t = jnp::result_type(std::vector<ArrayLike>{1, 2.0});
  EXPECT_EQ(t, (WeakDType{DType::F32, true}));
  EXPECT_EQ(jnp::result_type(std::vector<ArrayLike>{true, 1}), (WeakDType{DType::I32, true}));
  // A weak f16 with a weak f16 stays f16 (JAX computes the join of the strong types).
  EXPECT_EQ(jnp::result_type({WeakDType{DType::F16, true}, WeakDType{DType::F16, true}}),
            (WeakDType{DType::F16, true}));
  // Same dtype, one strong: strong.
  EXPECT_EQ(jnp::result_type({WeakDType{DType::F32, true}, WeakDType{DType::F32, false}}),
            (WeakDType{DType::F32, false}));

  // Operations of strong types: u8 + i8 -> i16, i64 + u64 -> f* (the default float).
  Array u = jnp::array(std::vector<uint8_t>{200});
  Array s = jnp::array(std::vector<int8_t>{-1});
  Array us = u + s;
  EXPECT_EQ(us.dtype(), DType::I16);
  EXPECT_EQ(v<int16_t>(us), (std::vector<int16_t>{199}));
  Array mixed64 = jnp::array(std::vector<int64_t>{-1}) + jnp::array(std::vector<uint64_t>{3});
  EXPECT_EQ(mixed64.dtype(), DType::F32);
  EXPECT_TRUE(mixed64.weak_type());
  EXPECT_EQ(f32(mixed64), (std::vector<float>{2}));
}

TEST(NumpyPromotion, IntegerScalarOutOfRangeThrows) {
  Array u = jnp::array(std::vector<uint8_t>{1});
  EXPECT_EQ(error_of([&] { (void)(u + 300); }),
            "numpy.add: C++ integer 300 is out of range for uint8");
  EXPECT_NE(error_of([&] { (void)(u + (-1)); }), "");
}

TEST(NumpyPromotion, TrueDivisionAndInexactFunctions) {
  Array a = iarr({1, 2, 3}, {3});
  Array q = a / 2;
  EXPECT_EQ(q.dtype(), DType::F32);
  EXPECT_EQ(f32(q), (std::vector<float>{0.5f, 1.0f, 1.5f}));
  EXPECT_EQ(jnp::sqrt(a).dtype(), DType::F32);
  Array h = jnp::array(std::vector<float16>{float16(4.0)});
  EXPECT_EQ(jnp::sqrt(h).dtype(), DType::F16);
  Array e = jnp::exp(1);  // a weak int scalar becomes a weak float
  EXPECT_EQ(e.dtype(), DType::F32);
  EXPECT_TRUE(e.weak_type());
  EXPECT_TRUE(jnp::can_cast(DType::I16, DType::F32));
  EXPECT_FALSE(jnp::can_cast(DType::I32, DType::F32));
  EXPECT_FALSE(jnp::can_cast(DType::F32, DType::I64));
  EXPECT_TRUE(jnp::can_cast(DType::U8, DType::I16));
}

// ----- Broadcasting -----------------------------------------------------------------------

TEST(NumpyBroadcast, Rules) {
  Array a = farr({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = farr({10, 20, 30}, {3});
  EXPECT_EQ(f32(a + b), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  Array col = farr({1, 2}, {2, 1});
  Array row = farr({10, 20, 30}, {1, 3});
  Array outer = col * row;
  EXPECT_EQ(outer.shape(), (Shape{2, 3}));
  EXPECT_EQ(f32(outer), (std::vector<float>{10, 20, 30, 20, 40, 60}));
  EXPECT_EQ((jnp::ones({}) + b).shape(), (Shape{3}));
  // Size-0 dimensions broadcast like any other size.
  Array empty = jnp::zeros({0, 3});
  EXPECT_EQ((empty + b).shape(), (Shape{0, 3}));
  EXPECT_EQ((jnp::zeros({0, 1}) + jnp::zeros({1, 4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(jnp::broadcast_shapes({{8, 1, 6, 1}, {7, 1, 5}}), (Shape{8, 7, 6, 5}));
  EXPECT_EQ(jnp::broadcast_to(b, {2, 3}).shape(), (Shape{2, 3}));
}

TEST(NumpyBroadcast, ErrorsNameFunctionAndShapes) {
  Array a = jnp::zeros({2, 3});
  Array b = jnp::zeros({4});
  EXPECT_EQ(error_of([&] { (void)jnp::add(a, b); }),
            "numpy.add: shapes [2,3] and [4] cannot be broadcast");
  EXPECT_EQ(error_of([&] { (void)(a * b); }),
            "numpy.multiply: shapes [2,3] and [4] cannot be broadcast");
  EXPECT_EQ(error_of([&] { (void)jnp::where(a > 0, a, b); }),
            "numpy.where: shapes [2,3], [2,3] and [4] cannot be broadcast");
  EXPECT_NE(error_of([&] {
              (void)jnp::broadcast_to(a, {3, 3});
            }).find("numpy.broadcast_to"),
            std::string::npos);
}

// ----- Operators and element-wise functions -----------------------------------------------

TEST(NumpyElementwise, Operators) {
  Array a = iarr({7, -7, 6}, {3});
  Array b = iarr({2, 2, -4}, {3});
  EXPECT_EQ(i32(a + b), (std::vector<int32_t>{9, -5, 2}));
  EXPECT_EQ(i32(a - b), (std::vector<int32_t>{5, -9, 10}));
  EXPECT_EQ(i32(a * b), (std::vector<int32_t>{14, -14, -24}));
  EXPECT_EQ(i32(-a), (std::vector<int32_t>{-7, 7, -6}));
  EXPECT_EQ(i32(a % b), (std::vector<int32_t>{1, 1, -2}));  // Python: 7%2, -7%2, 6%-4
  EXPECT_EQ(i32(10 - a), (std::vector<int32_t>{3, 17, 4}));
  EXPECT_EQ(b1(a > b), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(b1(a >= 6), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(b1(a < b), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(b1(a <= -7), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(b1(a == 6), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(b1(a != 6), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((a == b).dtype(), DType::Bool);
  EXPECT_EQ(i32(a & 3), (std::vector<int32_t>{3, 1, 2}));
  EXPECT_EQ(i32(a | 8), (std::vector<int32_t>{15, -7, 14}));
  EXPECT_EQ(i32(a ^ 1), (std::vector<int32_t>{6, -8, 7}));
  EXPECT_EQ(i32(~a), (std::vector<int32_t>{-8, 6, -7}));
  Array p = jnp::array({true, true, false});
  Array q = jnp::array({true, false, false});
  EXPECT_EQ(b1(p & q), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(b1(p | q), (std::vector<bool>{true, true, false}));
  EXPECT_EQ(b1(p ^ q), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(b1(~p), (std::vector<bool>{false, false, true}));
  Array x = farr({1, 2}, {2});
  x += 1;
  x *= 2.0;
  EXPECT_EQ(f32(x), (std::vector<float>{4, 6}));
  EXPECT_NE(error_of([&] { (void)(x & 1); }).find("numpy.bitwise_and"), std::string::npos);
}

TEST(NumpyElementwise, DivisionAndRemainderSigns) {
  Array a = iarr({7, -7, 7, -7, 0}, {5});
  Array b = iarr({2, 2, -2, -2, 3}, {5});
  EXPECT_EQ(i32(jnp::floor_divide(a, b)), (std::vector<int32_t>{3, -4, -4, 3, 0}));
  EXPECT_EQ(i32(jnp::remainder(a, b)), (std::vector<int32_t>{1, 1, -1, -1, 0}));
  EXPECT_EQ(i32(jnp::fmod(a, b)), (std::vector<int32_t>{1, -1, 1, -1, 0}));
  Array x = farr({7.5f, -7.5f, 7.5f, -7.5f}, {4});
  Array y = farr({2, 2, -2, -2}, {4});
  EXPECT_EQ(f32(jnp::floor_divide(x, y)), (std::vector<float>{3, -4, -4, 3}));
  EXPECT_EQ(f32(jnp::remainder(x, y)), (std::vector<float>{1.5f, 0.5f, -0.5f, -1.5f}));
  EXPECT_EQ(f32(jnp::fmod(x, y)), (std::vector<float>{1.5f, -1.5f, 1.5f, -1.5f}));
  Array u = jnp::array(std::vector<uint32_t>{7, 9});
  EXPECT_EQ(v<uint32_t>(jnp::floor_divide(u, 2)), (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(v<uint32_t>(u % 4), (std::vector<uint32_t>{3, 1}));
}

TEST(NumpyElementwise, Power) {
  Array a = iarr({2, 3, -2}, {3});
  EXPECT_EQ(i32(jnp::power(a, 3)), (std::vector<int32_t>{8, 27, -8}));
  EXPECT_EQ(i32(jnp::power(a, 0)), (std::vector<int32_t>{1, 1, 1}));
  Array x = farr({2, 4, 0.5f}, {3});
  expect_near(f32(jnp::power(x, -2)), {0.25f, 0.0625f, 4});
  expect_near(f32(jnp::power(x, 0.5)), {std::sqrt(2.0f), 2, std::sqrt(0.5f)});
  expect_near(f32(jnp::power(2.0, x)), {4, 16, std::sqrt(2.0f)});
  EXPECT_EQ(error_of([&] { (void)jnp::power(a, -1); }),
            "numpy.power: integers to negative integer powers are not allowed");
  Array e = iarr({0, 1, 2, 3}, {4});
  EXPECT_EQ(i32(jnp::power(iarr({3, 3, 3, 3}, {4}), e)), (std::vector<int32_t>{1, 3, 9, 27}));
}

TEST(NumpyElementwise, MathFunctions) {
  const std::vector<float> xs{0.25f, 0.5f, 1.0f, 2.0f};
  Array x = farr(xs, {4});
  auto apply = [&](float (*f)(float)) {
    std::vector<float> r;
    for (float e : xs) r.push_back(f(e));
    return r;
  };
  expect_near(f32(jnp::exp(x)), apply(std::exp));
  expect_near(f32(jnp::log(x)), apply(std::log));
  expect_near(f32(jnp::log1p(x)), apply(std::log1p));
  expect_near(f32(jnp::expm1(x)), apply(std::expm1));
  expect_near(f32(jnp::sqrt(x)), apply(std::sqrt));
  expect_near(f32(jnp::rsqrt(x)), {2.0f, 1.41421356f, 1.0f, 0.70710678f});
  expect_near(f32(jnp::tanh(x)), apply(std::tanh));
  expect_near(f32(jnp::sin(x)), apply(std::sin));
  expect_near(f32(jnp::cos(x)), apply(std::cos));
  expect_near(f32(jnp::tan(x)), apply(std::tan));
  expect_near(f32(jnp::log2(x)), apply(std::log2));
  expect_near(f32(jnp::log10(x)), apply(std::log10));
  expect_near(f32(jnp::exp2(x)), apply(std::exp2));
  expect_near(f32(jnp::sinh(x)), apply(std::sinh));
  expect_near(f32(jnp::cosh(x)), apply(std::cosh));
  expect_near(f32(jnp::arcsinh(x)), apply(std::asinh));
  expect_near(f32(jnp::arctan(x)), apply(std::atan));
  expect_near(f32(jnp::cbrt(x)), apply(std::cbrt));
  Array y = farr({-1, -0.5f, 0, 0.5f}, {4});
  expect_near(f32(jnp::arcsin(y)), {-1.5707963f, -0.5235988f, 0, 0.5235988f});
  expect_near(f32(jnp::arccos(y)), {3.1415927f, 2.0943951f, 1.5707963f, 1.0471976f});
  expect_near(f32(jnp::arctanh(y)), {-kInf, -0.5493061f, 0, 0.5493061f});
  expect_near(f32(jnp::arccosh(farr({1, 2}, {2}))), {0, 1.3169579f});
  expect_near(f32(jnp::arctan2(farr({1, -1, 0}, {3}), farr({1, 1, -1}, {3}))),
              {0.7853982f, -0.7853982f, 3.1415927f});
  expect_near(f32(jnp::hypot(farr({3, 5}, {2}), farr({4, 12}, {2}))), {5, 13});
  EXPECT_EQ(f32(jnp::square(y)), (std::vector<float>{1, 0.25f, 0, 0.25f}));
  EXPECT_EQ(f32(jnp::abs(y)), (std::vector<float>{1, 0.5f, 0, 0.5f}));
  EXPECT_EQ(f32(jnp::sign(y)), (std::vector<float>{-1, -1, 0, 1}));
  EXPECT_EQ(i32(jnp::abs(iarr({-3, 4}, {2}))), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(i32(jnp::sign(iarr({-3, 0, 4}, {3}))), (std::vector<int32_t>{-1, 0, 1}));
  EXPECT_EQ(f32(jnp::reciprocal(farr({2, 4}, {2}))), (std::vector<float>{0.5f, 0.25f}));
  EXPECT_EQ(f32(jnp::maximum(y, 0)), (std::vector<float>{0, 0, 0, 0.5f}));
  EXPECT_EQ(f32(jnp::minimum(y, -0.75)), (std::vector<float>{-1, -0.75f, -0.75f, -0.75f}));
  Array n = farr({kNaN, 1}, {2});
  EXPECT_TRUE(std::isnan(f32(jnp::maximum(n, 0))[0]));  // NaN propagates
  EXPECT_EQ(f32(jnp::copysign(farr({1, 2}, {2}), farr({-0.0f, 3}, {2}))),
            (std::vector<float>{-1, 2}));
}

TEST(NumpyElementwise, Rounding) {
  // numpy.round: "rounds to the nearest even value" for halves.
  Array x = farr({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 0.4f}, {6});
  EXPECT_EQ(f32(jnp::round(x)), (std::vector<float>{0, 2, 2, -0.0f, -2, 0}));
  EXPECT_EQ(f32(jnp::floor(x)), (std::vector<float>{0, 1, 2, -1, -2, 0}));
  EXPECT_EQ(f32(jnp::ceil(x)), (std::vector<float>{1, 2, 3, -0.0f, -1, 1}));
  EXPECT_EQ(f32(jnp::trunc(x)), (std::vector<float>{0, 1, 2, -0.0f, -1, 0}));
  expect_near(f32(jnp::round(farr({1.234f, 5.678f}, {2}), 2)), {1.23f, 5.68f});
  EXPECT_EQ(i32(jnp::round(iarr({1234, 1250, 1350}, {3}), -2)),
            (std::vector<int32_t>{1200, 1200, 1400}));
  EXPECT_EQ(i32(jnp::floor(iarr({3}, {1}))), (std::vector<int32_t>{3}));
}

TEST(NumpyElementwise, ClipWhereAndPredicates) {
  // numpy.clip docs: a = arange(10); clip(a, 1, 8) -> [1, 1, 2, 3, 4, 5, 6, 7, 8, 8]
  Array a = jnp::arange(10);
  EXPECT_EQ(i32(jnp::clip(a, 1, 8)), (std::vector<int32_t>{1, 1, 2, 3, 4, 5, 6, 7, 8, 8}));
  EXPECT_EQ(i32(jnp::clip(a, none, 3)), (std::vector<int32_t>{0, 1, 2, 3, 3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(i32(jnp::clip(a, 7, none)), (std::vector<int32_t>{7, 7, 7, 7, 7, 7, 7, 7, 8, 9}));
  // numpy.where docs: where(a < 5, a, 10*a)
  EXPECT_EQ(i32(jnp::where(a < 5, a, 10 * a)),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 50, 60, 70, 80, 90}));
  Array w = jnp::where(iarr({1, 0}, {2}), 1.0, farr({5, 6}, {2}));  // non-bool condition
  EXPECT_EQ(f32(w), (std::vector<float>{1, 6}));
  Array s = jnp::where(jnp::array({true, false}), 1.0, 2);
  EXPECT_EQ(s.dtype(), DType::F32);
  EXPECT_TRUE(s.weak_type());
  Array x = farr({1, kNaN, kInf, -kInf}, {4});
  EXPECT_EQ(b1(jnp::isnan(x)), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(b1(jnp::isinf(x)), (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(b1(jnp::isfinite(x)), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(b1(jnp::isfinite(iarr({1}, {1}))), (std::vector<bool>{true}));
  EXPECT_EQ(b1(jnp::signbit(farr({-0.0f, 0, -2}, {3}))), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(b1(jnp::logical_and(iarr({1, 0, 2}, {3}), true)),
            (std::vector<bool>{true, false, true}));
  EXPECT_EQ(b1(jnp::logical_or(iarr({1, 0, 0}, {3}), iarr({0, 0, 3}, {3}))),
            (std::vector<bool>{true, false, true}));
  EXPECT_EQ(b1(jnp::logical_xor(jnp::array({true, true}), jnp::array({true, false}))),
            (std::vector<bool>{false, true}));
  EXPECT_EQ(b1(jnp::logical_not(farr({0, 1.5f}, {2}))), (std::vector<bool>{true, false}));
  EXPECT_EQ(b1(jnp::equal(farr({1, 2}, {2}), 2)), (std::vector<bool>{false, true}));
  EXPECT_EQ(b1(jnp::not_equal(x, x)), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(b1(jnp::less(1, farr({0, 2}, {2}))), (std::vector<bool>{false, true}));
  EXPECT_EQ(b1(jnp::less_equal(1, farr({1, 2}, {2}))), (std::vector<bool>{true, true}));
  EXPECT_EQ(b1(jnp::greater(1, farr({0, 2}, {2}))), (std::vector<bool>{true, false}));
  EXPECT_EQ(b1(jnp::greater_equal(1, farr({1, 2}, {2}))), (std::vector<bool>{true, false}));
  EXPECT_EQ(b1(jnp::isclose(farr({1, 1e10f}, {2}), farr({1.000001f, 1.0001e10f}, {2}))),
            (std::vector<bool>{true, false}));
  EXPECT_TRUE(jnp::allclose(farr({1, 2}, {2}), farr({1, 2.000001f}, {2})).item<bool>());
  EXPECT_TRUE(jnp::array_equal(iarr({1, 2}, {2}), iarr({1, 2}, {2})).item<bool>());
  EXPECT_FALSE(jnp::array_equal(iarr({1, 2}, {2}), iarr({1, 2}, {1, 2})).item<bool>());
  EXPECT_EQ(i32(jnp::left_shift(iarr({1, 3}, {2}), 2)), (std::vector<int32_t>{4, 12}));
  EXPECT_EQ(i32(jnp::right_shift(iarr({-8, 8}, {2}), 1)), (std::vector<int32_t>{-4, 4}));
  EXPECT_EQ(v<uint8_t>(jnp::right_shift(jnp::array(std::vector<uint8_t>{255}), 4)),
            (std::vector<uint8_t>{15}));
}

// ----- Creation ---------------------------------------------------------------------------

TEST(NumpyCreation, Basics) {
  Array z = jnp::zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.dtype(), DType::F32);
  EXPECT_FALSE(z.weak_type());
  EXPECT_EQ(f32(z), std::vector<float>(6, 0));
  EXPECT_EQ(i32(jnp::ones({2}, DType::I32)), (std::vector<int32_t>{1, 1}));
  Array f = jnp::full({2}, 7.5);
  EXPECT_EQ(f.dtype(), DType::F32);
  EXPECT_TRUE(f.weak_type());  // jnp.full(shape, python_float) is weakly typed
  EXPECT_EQ(f32(f), (std::vector<float>{7.5f, 7.5f}));
  EXPECT_EQ(i32(jnp::full({2, 2}, iarr({1, 2}, {2}))), (std::vector<int32_t>{1, 2, 1, 2}));
  EXPECT_EQ(jnp::full({3}, 1, DType::I8).dtype(), DType::I8);
  Array h = jnp::array(std::vector<float16>{float16(1), float16(2)});
  EXPECT_EQ(jnp::zeros_like(h).dtype(), DType::F16);
  EXPECT_EQ(jnp::ones_like(h, DType::I32).dtype(), DType::I32);
  EXPECT_EQ(float(jnp::full_like(h, 3).to_vector<float16>()[1]), 3.0f);
  EXPECT_EQ(jnp::zeros({0, 4}).size(), 0);
  EXPECT_EQ(error_of([] { (void)jnp::zeros({-1}); }),
            "numpy.zeros: negative dimension -1 in shape [-1]");
  Array a = jnp::array({1, 2, 3, 4}, Shape{2, 2});
  EXPECT_EQ(a.dtype(), DType::I32);
  EXPECT_EQ(a.shape(), (Shape{2, 2}));
  EXPECT_EQ(jnp::array({1.5, 2.0}).dtype(), DType::F32);
  EXPECT_EQ(jnp::array({1.5, 2.0}, none, DType::F64).to_vector<double>()[0], 1.5);
  EXPECT_EQ(jnp::array(std::vector<int64_t>{1, 2}).dtype(), DType::I64);
  EXPECT_EQ(jnp::asarray(2.0).dtype(), DType::F32);
  EXPECT_TRUE(jnp::asarray(2.0).weak_type());
  EXPECT_EQ(i32(jnp::astype(farr({1.7f, -1.7f}, {2}), DType::I32)), (std::vector<int32_t>{1, -1}));
  EXPECT_EQ(b1(jnp::astype(farr({0, 0.5f, kNaN}, {3}), DType::Bool)),
            (std::vector<bool>{false, true, true}));
}

TEST(NumpyCreation, ArangeLinspaceEye) {
  // numpy.arange docs: arange(3), arange(3.0), arange(3, 7), arange(3, 7, 2)
  EXPECT_EQ(i32(jnp::arange(3)), (std::vector<int32_t>{0, 1, 2}));
  Array f = jnp::arange(3.0);
  EXPECT_EQ(f.dtype(), DType::F32);
  EXPECT_EQ(f32(f), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(i32(jnp::arange(3, 7)), (std::vector<int32_t>{3, 4, 5, 6}));
  EXPECT_EQ(i32(jnp::arange(3, 7, 2)), (std::vector<int32_t>{3, 5}));
  EXPECT_EQ(i32(jnp::arange(5, 0, -2)), (std::vector<int32_t>{5, 3, 1}));
  EXPECT_EQ(jnp::arange(5, 0).size(), 0);
  expect_near(f32(jnp::arange(0, 1, 0.25)), {0, 0.25f, 0.5f, 0.75f});
  EXPECT_EQ(jnp::arange(4, DType::F64).dtype(), DType::F64);
  // numpy.linspace docs: linspace(2.0, 3.0, num=5) and endpoint=False
  expect_near(f32(jnp::linspace(2.0, 3.0, 5)), {2.0f, 2.25f, 2.5f, 2.75f, 3.0f});
  expect_near(f32(jnp::linspace(2.0, 3.0, 5, false)), {2.0f, 2.2f, 2.4f, 2.6f, 2.8f});
  EXPECT_EQ(f32(jnp::linspace(0, 1, 1)), (std::vector<float>{0}));
  EXPECT_EQ(jnp::linspace(0, 1, 0).size(), 0);
  // numpy.eye docs: eye(2, dtype=int); eye(3, k=1)
  EXPECT_EQ(i32(jnp::eye(2, none, 0, DType::I32)), (std::vector<int32_t>{1, 0, 0, 1}));
  EXPECT_EQ(f32(jnp::eye(3, none, 1)), (std::vector<float>{0, 1, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(f32(jnp::eye(2, 3, -1)), (std::vector<float>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(f32(jnp::identity(2)), (std::vector<float>{1, 0, 0, 1}));
}

// ----- Shapes -----------------------------------------------------------------------------

TEST(NumpyShapes, ReshapeTransposeAxes) {
  Array a = jnp::arange(6);
  Array r = jnp::reshape(a, {2, -1});
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(jnp::reshape(a, {-1}).shape(), (Shape{6}));
  EXPECT_EQ(error_of([&] {
              (void)jnp::reshape(a, {4, -1});
            }),
            "numpy.reshape: cannot reshape array of shape [6] (6 elements) into shape [4,-1]");
  EXPECT_NE(error_of([&] { (void)jnp::reshape(a, {-1, -1}); }), "");
  EXPECT_EQ(i32(jnp::transpose(r)), (std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(jnp::transpose(r).shape(), (Shape{3, 2}));
  Array t = jnp::reshape(jnp::arange(24), {2, 3, 4});
  EXPECT_EQ(jnp::transpose(t, std::vector<int64_t>{1, 0, 2}).shape(), (Shape{3, 2, 4}));
  EXPECT_EQ(jnp::swapaxes(t, 0, 2).shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(i32(jnp::swapaxes(r, 0, 1)), i32(jnp::transpose(r)));
  // numpy.moveaxis docs: x = zeros((3, 4, 5)); moveaxis(x, 0, -1).shape == (4, 5, 3);
  // moveaxis(x, -1, 0).shape == (5, 3, 4); moveaxis(x, [0, 1], [-1, -2]).shape == (5, 4, 3)
  Array x = jnp::zeros({3, 4, 5});
  EXPECT_EQ(jnp::moveaxis(x, 0, -1).shape(), (Shape{4, 5, 3}));
  EXPECT_EQ(jnp::moveaxis(x, -1, 0).shape(), (Shape{5, 3, 4}));
  EXPECT_EQ(jnp::moveaxis(x, {0, 1}, {-1, -2}).shape(), (Shape{5, 4, 3}));
  EXPECT_EQ(jnp::expand_dims(a, 0).shape(), (Shape{1, 6}));
  EXPECT_EQ(jnp::expand_dims(a, -1).shape(), (Shape{6, 1}));
  EXPECT_EQ(jnp::expand_dims(a, {0, 2}).shape(), (Shape{1, 6, 1}));
  EXPECT_EQ(jnp::squeeze(jnp::zeros({1, 3, 1})).shape(), (Shape{3}));
  EXPECT_EQ(jnp::squeeze(jnp::zeros({1, 3, 1}), 0).shape(), (Shape{3, 1}));
  EXPECT_EQ(error_of([] {
              (void)jnp::squeeze(jnp::zeros({2, 3}), 0);
            }),
            "numpy.squeeze: cannot select an axis to squeeze out which has size not equal to one "
            "(axis 0 of shape [2,3])");
  EXPECT_EQ(jnp::ravel(t).shape(), (Shape{24}));
  EXPECT_EQ(jnp::atleast_2d(a).shape(), (Shape{1, 6}));
  EXPECT_EQ(jnp::atleast_3d(r).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(error_of([&] {
              (void)jnp::transpose(t, std::vector<int64_t>{0, 3, 1});
            }),
            "numpy.transpose: axis 3 is out of bounds for array of dimension 3");
}

TEST(NumpyShapes, ConcatenateStackSplit) {
  // numpy.concatenate docs: a = [[1, 2], [3, 4]], b = [[5, 6]]
  Array a = iarr({1, 2, 3, 4}, {2, 2});
  Array b = iarr({5, 6}, {1, 2});
  Array c0 = jnp::concatenate({a, b}, 0);
  EXPECT_EQ(c0.shape(), (Shape{3, 2}));
  EXPECT_EQ(i32(c0), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  Array c1 = jnp::concatenate({a, jnp::transpose(b)}, 1);
  EXPECT_EQ(i32(c1), (std::vector<int32_t>{1, 2, 5, 3, 4, 6}));
  EXPECT_EQ(i32(jnp::concatenate({a, b}, none)), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  Array mixed = jnp::concatenate({a, farr({0.5f, 1}, {1, 2})}, 0);
  EXPECT_EQ(mixed.dtype(), DType::F32);
  EXPECT_EQ(jnp::concatenate({jnp::zeros({0, 2}), jnp::ones({1, 2})}, 0).shape(), (Shape{1, 2}));
  EXPECT_EQ(error_of([&] {
              (void)jnp::concatenate({a, b}, 1);
            }),
            "numpy.concatenate: all the input array dimensions except for the concatenation axis "
            "must match exactly, but along dimension 0, the array at index 0 has size 2 and the "
            "array at index 1 has size 1");
  // numpy.stack docs: stack of 1-D arrays along axis 0 and -1
  Array x = iarr({1, 2, 3}, {3});
  Array y = iarr({4, 5, 6}, {3});
  EXPECT_EQ(i32(jnp::stack({x, y})), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  Array s = jnp::stack({x, y}, -1);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(i32(s), (std::vector<int32_t>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(i32(jnp::hstack({x, y})), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(jnp::vstack({x, y}).shape(), (Shape{2, 3}));
  // numpy.split docs: split(arange(9.0), 3); split(arange(8.0), [3, 5, 6, 10])
  auto parts = jnp::split(jnp::arange(9.0), 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(f32(parts[1]), (std::vector<float>{3, 4, 5}));
  auto pieces = jnp::split(jnp::arange(8.0), std::vector<int64_t>{3, 5, 6, 10});
  ASSERT_EQ(pieces.size(), 5u);
  EXPECT_EQ(f32(pieces[0]), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(f32(pieces[1]), (std::vector<float>{3, 4}));
  EXPECT_EQ(f32(pieces[2]), (std::vector<float>{5}));
  EXPECT_EQ(f32(pieces[3]), (std::vector<float>{6, 7}));
  EXPECT_EQ(pieces[4].size(), 0);
  EXPECT_EQ(error_of([] { (void)jnp::split(jnp::arange(7), 3); }),
            "numpy.split: array split does not result in an equal division: 7 elements into 3 "
            "sections");
  auto uneven = jnp::array_split(jnp::arange(8), 3);
  EXPECT_EQ(i32(uneven[0]), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(i32(uneven[2]), (std::vector<int32_t>{6, 7}));
}

TEST(NumpyShapes, FlipRollTileRepeatPadTri) {
  Array a = jnp::reshape(jnp::arange(6), {2, 3});
  EXPECT_EQ(i32(jnp::flip(a)), (std::vector<int32_t>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(i32(jnp::flip(a, 1)), (std::vector<int32_t>{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(i32(jnp::flipud(a)), (std::vector<int32_t>{3, 4, 5, 0, 1, 2}));
  // numpy.roll docs: roll(arange(10), 2) and roll(arange(10), -2)
  EXPECT_EQ(i32(jnp::roll(jnp::arange(10), 2)),
            (std::vector<int32_t>{8, 9, 0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(i32(jnp::roll(jnp::arange(10), -2)),
            (std::vector<int32_t>{2, 3, 4, 5, 6, 7, 8, 9, 0, 1}));
  EXPECT_EQ(i32(jnp::roll(a, 1, 1)), (std::vector<int32_t>{2, 0, 1, 5, 3, 4}));
  // numpy.tile docs: a = [0, 1, 2]; tile(a, 2); tile(a, (2, 2))
  Array t = iarr({0, 1, 2}, {3});
  EXPECT_EQ(i32(jnp::tile(t, {2})), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  Array t22 = jnp::tile(t, {2, 2});
  EXPECT_EQ(t22.shape(), (Shape{2, 6}));
  EXPECT_EQ(i32(t22), (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2}));
  // numpy.repeat docs: x = [[1, 2], [3, 4]]; repeat(x, 2); repeat(x, 2, axis=1)
  Array x = iarr({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(i32(jnp::repeat(x, 2)), (std::vector<int32_t>{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(i32(jnp::repeat(x, 2, 1)), (std::vector<int32_t>{1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(i32(jnp::repeat(x, 2, 0)), (std::vector<int32_t>{1, 2, 1, 2, 3, 4, 3, 4}));
  Array p = jnp::pad(iarr({1, 2}, {2}), {{1, 2}}, 9);
  EXPECT_EQ(i32(p), (std::vector<int32_t>{9, 1, 2, 9, 9}));
  // numpy.triu docs: triu([[1,2,3],[4,5,6],[7,8,9],[10,11,12]], -1)
  Array m = jnp::reshape(jnp::arange(1, 13), {4, 3});
  EXPECT_EQ(i32(jnp::triu(m, -1)), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 0, 8, 9, 0, 0, 12}));
  // numpy.tril docs: tril([[1,2,3],[4,5,6],[7,8,9],[10,11,12]], -1)
  EXPECT_EQ(i32(jnp::tril(m, -1)), (std::vector<int32_t>{0, 0, 0, 4, 0, 0, 7, 8, 0, 10, 11, 12}));
  EXPECT_EQ(i32(jnp::tril(m)), (std::vector<int32_t>{1, 0, 0, 4, 5, 0, 7, 8, 9, 10, 11, 12}));
}

// ----- Linear algebra ---------------------------------------------------------------------

TEST(NumpyLinalg, MatmulAndDot) {
  Array a = farr({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = farr({7, 8, 9, 10, 11, 12}, {3, 2});
  Array c = jnp::matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  EXPECT_EQ(f32(c), (std::vector<float>{58, 64, 139, 154}));
  EXPECT_EQ(f32(jnp::dot(a, b)), f32(c));
  Array v3 = farr({1, 0, -1}, {3});
  Array av = jnp::matmul(a, v3);  // (2,3) @ (3,) -> (2,)
  EXPECT_EQ(av.shape(), (Shape{2}));
  EXPECT_EQ(f32(av), (std::vector<float>{-2, -2}));
  Array va = jnp::matmul(farr({1, 1}, {2}), a);  // (2,) @ (2,3) -> (3,)
  EXPECT_EQ(f32(va), (std::vector<float>{5, 7, 9}));
  Array vv = jnp::matmul(v3, v3);
  EXPECT_EQ(vv.shape(), Shape{});
  EXPECT_EQ(vv.item<float>(), 2);
  // Batched, with broadcasting batch dimensions: (2,1,2,3) @ (4,3,2) -> (2,4,2,2)
  Array ab = jnp::reshape(jnp::arange(12.0), {2, 1, 2, 3});
  Array bb = jnp::reshape(jnp::arange(24.0), {4, 3, 2});
  Array cb = jnp::matmul(ab, bb);
  EXPECT_EQ(cb.shape(), (Shape{2, 4, 2, 2}));
  // Element [1, 2] = ab[1, 0] @ bb[2]: [[6,7,8],[9,10,11]] @ [[12,13],[14,15],[16,17]]
  Array blk = jnp::at(cb, {1, 2});
  EXPECT_EQ(f32(blk), (std::vector<float>{6 * 12 + 7 * 14 + 8 * 16, 6 * 13 + 7 * 15 + 8 * 17,
                                          9 * 12 + 10 * 14 + 11 * 16, 9 * 13 + 10 * 15 + 11 * 17}));
  // Batched @ matrix folds into one product.
  Array bm = jnp::matmul(jnp::reshape(jnp::arange(12.0), {2, 2, 3}), b);
  EXPECT_EQ(bm.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(f32(jnp::at(bm, {1})),
            f32(jnp::matmul(jnp::reshape(jnp::arange(6.0, 12.0), {2, 3}), b)));
  EXPECT_EQ(error_of([&] { (void)jnp::matmul(a, a); }),
            "numpy.matmul: shapes [2,3] and [2,3] are not aligned: 3 (last dimension of the "
            "first) != 2 (second-to-last dimension of the second)");
  EXPECT_NE(error_of([&] { (void)jnp::matmul(a, jnp::ones({})); }), "");
  // dot: N-D x M-D contracts the last axis of a with the second-to-last of b.
  Array d = jnp::dot(jnp::ones({2, 3, 4}), jnp::ones({5, 4, 6}));
  EXPECT_EQ(d.shape(), (Shape{2, 3, 5, 6}));
  EXPECT_EQ(f32(jnp::dot(a, v3)), (std::vector<float>{-2, -2}));
  EXPECT_EQ(jnp::dot(v3, v3).item<float>(), 2);
  EXPECT_EQ(f32(jnp::dot(a, jnp::asarray(2.0))), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(jnp::vdot(a, a).item<float>(), 91);
  EXPECT_EQ(f32(jnp::inner(a, a)), (std::vector<float>{14, 32, 32, 77}));
  Array o = jnp::outer(farr({1, 2}, {2}), farr({3, 4, 5}, {3}));
  EXPECT_EQ(o.shape(), (Shape{2, 3}));
  EXPECT_EQ(f32(o), (std::vector<float>{3, 4, 5, 6, 8, 10}));
  Array td = jnp::tensordot(jnp::ones({3, 4, 5}), jnp::ones({4, 5, 2}), 2);
  EXPECT_EQ(td.shape(), (Shape{3, 2}));
  EXPECT_EQ(f32(td)[0], 20);
  EXPECT_EQ(jnp::tensordot(a, b, {0}, {1}).shape(), (Shape{3, 3}));
  Array mixed = jnp::matmul(iarr({1, 2}, {1, 2}), farr({1, 1}, {2, 1}));
  EXPECT_EQ(mixed.dtype(), DType::F32);
  EXPECT_EQ(f32(mixed), (std::vector<float>{3}));
}

TEST(NumpyLinalg, EinsumAgainstHandComputed) {
  Array a = jnp::reshape(jnp::arange(6.0), {2, 3});  // [[0,1,2],[3,4,5]]
  Array b = jnp::reshape(jnp::arange(12.0), {3, 4});
  EXPECT_EQ(f32(jnp::einsum("ij,jk->ik", {a, b})), f32(jnp::matmul(a, b)));
  EXPECT_EQ(f32(jnp::einsum("ij,jk", {a, b})), f32(jnp::matmul(a, b)));  // implicit output
  EXPECT_EQ(f32(jnp::einsum("ij,jk->ki", {a, b})), f32(jnp::transpose(jnp::matmul(a, b))));
  EXPECT_EQ(f32(jnp::einsum("ij->ji", {a})), f32(jnp::transpose(a)));
  EXPECT_EQ(f32(jnp::einsum("ji", {a})), f32(jnp::transpose(a)));  // implicit: sorted "ij"
  EXPECT_EQ(jnp::einsum("ij->", {a}).item<float>(), 15);
  EXPECT_EQ(f32(jnp::einsum("ij->j", {a})), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(f32(jnp::einsum("ij->i", {a})), (std::vector<float>{3, 12}));
  Array s = jnp::reshape(jnp::arange(9.0), {3, 3});
  EXPECT_EQ(f32(jnp::einsum("ii->i", {s})), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(jnp::einsum("ii", {s}).item<float>(), 12);  // the trace
  EXPECT_EQ(jnp::trace(s).item<float>(), 12);
  EXPECT_EQ(f32(jnp::diagonal(s, 1)), (std::vector<float>{1, 5}));
  EXPECT_EQ(f32(jnp::diagonal(s, -1)), (std::vector<float>{3, 7}));
  Array x = farr({1, 2, 3}, {3});
  Array y = farr({4, 5}, {2});
  EXPECT_EQ(jnp::einsum("i,i", {x, x}).item<float>(), 14);
  EXPECT_EQ(f32(jnp::einsum("i,j->ij", {x, y})), f32(jnp::outer(x, y)));
  EXPECT_EQ(f32(jnp::einsum("i,j", {x, y})), f32(jnp::outer(x, y)));
  EXPECT_EQ(f32(jnp::einsum("ij,j->i", {a, x})), f32(jnp::matmul(a, x)));
  // Batched: bij,bjk->bik against matmul, and with the batch moved last.
  Array p = jnp::reshape(jnp::arange(24.0), {2, 3, 4});
  Array q = jnp::reshape(jnp::arange(40.0), {2, 4, 5});
  Array pq = jnp::matmul(p, q);
  EXPECT_EQ(f32(jnp::einsum("bij,bjk->bik", {p, q})), f32(pq));
  EXPECT_EQ(f32(jnp::einsum("bij,bjk->ikb", {p, q})),
            f32(jnp::transpose(pq, std::vector<int64_t>{1, 2, 0})));
  // Ellipsis, with broadcasting batch dimensions.
  Array e = jnp::einsum("...ij,...jk->...ik", {p, jnp::reshape(jnp::arange(20.0), {4, 5})});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(f32(e), f32(jnp::matmul(p, jnp::reshape(jnp::arange(20.0), {4, 5}))));
  EXPECT_EQ(jnp::einsum("...i->...", {p}).shape(), (Shape{2, 3}));
  EXPECT_EQ(f32(jnp::einsum("i...->...", {p})), f32(jnp::sum(p, 0)));
  // Three operands: i,ij,j -> scalar  (x^T A y for A = [[0,1],[2,3],[4,5]])
  Array A = jnp::reshape(jnp::arange(6.0), {3, 2});
  EXPECT_EQ(jnp::einsum("i,ij,j->", {x, A, y}).item<float>(),
            1 * (0 * 4 + 1 * 5) + 2 * (2 * 4 + 3 * 5) + 3 * (4 * 4 + 5 * 5));
  EXPECT_EQ(f32(jnp::einsum("ijk->kji", {p})),
            f32(jnp::transpose(p, std::vector<int64_t>{2, 1, 0})));
  EXPECT_NE(error_of([&] { (void)jnp::einsum("ij,jk->ik", {a}); }).find("numpy.einsum"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)jnp::einsum("ij,jk->ik", {a, a});
            }).find("numpy.einsum"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)jnp::einsum("ijk->i", {a}); }).find("numpy.einsum"),
            std::string::npos);
}

// ----- Indexing ---------------------------------------------------------------------------

TEST(NumpyIndexing, BasicIndexing) {
  Array x = jnp::reshape(jnp::arange(12), {3, 4});
  EXPECT_EQ(i32(jnp::at(x, {1})), (std::vector<int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(jnp::at(x, {1, 2}).item<int32_t>(), 6);
  EXPECT_EQ(jnp::at(x, {-1, -1}).item<int32_t>(), 11);
  EXPECT_EQ(i32(jnp::at(x, {Slice(), 1})), (std::vector<int32_t>{1, 5, 9}));
  EXPECT_EQ(i32(jnp::at(x, {Slice(1, none), Slice(none, none, 2)})),
            (std::vector<int32_t>{4, 6, 8, 10}));
  EXPECT_EQ(i32(jnp::at(x, {0, Slice(none, none, -1)})), (std::vector<int32_t>{3, 2, 1, 0}));
  EXPECT_EQ(i32(jnp::at(x, {0, Slice(-2, none)})), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(i32(jnp::at(x, {0, Slice(none, -3)})), (std::vector<int32_t>{0}));
  EXPECT_EQ(i32(jnp::at(x, {0, Slice(3, 0, -2)})), (std::vector<int32_t>{3, 1}));
  EXPECT_EQ(i32(jnp::at(x, {0, Slice(-1, -5, -1)})), (std::vector<int32_t>{3, 2, 1, 0}));
  EXPECT_EQ(i32(jnp::at(x, {0, Slice(1, 100)})), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(jnp::at(x, {0, Slice(3, 1)}).shape(), (Shape{0}));
  EXPECT_EQ(jnp::at(x, {Slice(5, none)}).shape(), (Shape{0, 4}));
  EXPECT_EQ(i32(jnp::at(x, {Slice(none, none, -2), Slice(none, none, -3)})),
            (std::vector<int32_t>{11, 8, 3, 0}));
  EXPECT_EQ(jnp::at(x, {NewAxis}).shape(), (Shape{1, 3, 4}));
  EXPECT_EQ(jnp::at(x, {Slice(), NewAxis, 0}).shape(), (Shape{3, 1}));
  EXPECT_EQ(i32(jnp::at(x, {Ellipsis, 0})), (std::vector<int32_t>{0, 4, 8}));
  Array t = jnp::reshape(jnp::arange(24), {2, 3, 4});
  EXPECT_EQ(jnp::at(t, {0, Ellipsis}).shape(), (Shape{3, 4}));
  EXPECT_EQ(jnp::at(t, {Ellipsis, NewAxis, 1}).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(i32(jnp::at(t, {1, Ellipsis, 2})), (std::vector<int32_t>{14, 18, 22}));
  EXPECT_EQ(jnp::at(x, {}).shape(), (Shape{3, 4}));
  EXPECT_EQ(error_of([&] { (void)jnp::at(x, {3}); }),
            "numpy.at: index 3 is out of bounds for axis 0 with size 3");
  EXPECT_EQ(error_of([&] {
              (void)jnp::at(x, {0, -5});
            }),
            "numpy.at: index -5 is out of bounds for axis 1 with size 4");
  EXPECT_EQ(error_of([&] {
              (void)jnp::at(x, {0, 0, 0});
            }),
            "numpy.at: too many indices for array: array is 2-dimensional, but 3 were indexed");
  EXPECT_NE(error_of([&] { (void)jnp::at(x, {Ellipsis, Ellipsis}); }), "");
  EXPECT_NE(error_of([&] { (void)jnp::at(x, {Slice(none, none, 0)}); }), "");
  try {
    (void)jnp::at(x, {7});
    ADD_FAILURE() << "no IndexError";
  } catch (const jnp::IndexError&) {
  }
}

TEST(NumpyIndexing, ArrayIndices) {
  Array x = jnp::reshape(jnp::arange(12), {3, 4});
  Array idx = iarr({2, 0, -1}, {3});
  EXPECT_EQ(i32(jnp::at(x, {idx})), (std::vector<int32_t>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  Array cols = jnp::at(x, {Slice(), iarr({3, 0}, {2})});
  EXPECT_EQ(cols.shape(), (Shape{3, 2}));
  EXPECT_EQ(i32(cols), (std::vector<int32_t>{3, 0, 7, 4, 11, 8}));
  // Two index arrays broadcast together: x[[0, 2], [1, 3]] -> [1, 11]
  EXPECT_EQ(i32(jnp::at(x, {iarr({0, 2}, {2}), iarr({1, 3}, {2})})), (std::vector<int32_t>{1, 11}));
  // x[[[0], [2]], [1, 3]]: shapes (2,1) and (2,) broadcast to (2,2)
  Array g = jnp::at(x, {iarr({0, 2}, {2, 1}), iarr({1, 3}, {2})});
  EXPECT_EQ(g.shape(), (Shape{2, 2}));
  EXPECT_EQ(i32(g), (std::vector<int32_t>{1, 3, 9, 11}));
  // Adjacent advanced indices stay in place; separated ones go first (NumPy's rule).
  Array t = jnp::zeros({5, 6, 7});
  Array i2 = iarr({0, 1}, {2});
  EXPECT_EQ(jnp::at(t, {Slice(), i2, i2}).shape(), (Shape{5, 2}));
  EXPECT_EQ(jnp::at(t, {i2, Slice(), i2}).shape(), (Shape{2, 6}));
  EXPECT_EQ(jnp::at(t, {0, Slice(), i2}).shape(), (Shape{2, 6}));
  EXPECT_EQ(jnp::at(t, {Slice(), 0, i2}).shape(), (Shape{5, 2}));
  EXPECT_EQ(jnp::at(t, {Slice(), NewAxis, i2}).shape(), (Shape{5, 1, 2, 7}));
  // A 0-d index array drops its dimension, like an integer.
  EXPECT_EQ(i32(jnp::at(x, {Slice(), iarr({2}, {})})), (std::vector<int32_t>{2, 6, 10}));
  // Out-of-range array indices are clamped when reading.
  EXPECT_EQ(i32(jnp::at(jnp::arange(4), {iarr({5, -9}, {2})})), (std::vector<int32_t>{3, 0}));
  // Empty index arrays.
  EXPECT_EQ(jnp::at(x, {jnp::array(std::vector<int32_t>{})}).shape(), (Shape{0, 4}));
  // Boolean masks (eager).
  Array m = jnp::arange(6) > 2;
  EXPECT_EQ(i32(jnp::at(jnp::arange(6) * 10, {m})), (std::vector<int32_t>{30, 40, 50}));
  EXPECT_EQ(i32(jnp::at(x, {x % 5 == 0})), (std::vector<int32_t>{0, 5, 10}));
  EXPECT_NE(error_of([&] { (void)jnp::at(x, {farr({1}, {1})}); }).find("integers"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              (void)jnp::at(x, {iarr({0, 1}, {2}), iarr({0, 1, 2}, {3})});
            }).find("shape mismatch"),
            std::string::npos);
}

// x[...] (Array::operator[]) against the explicit lax ops JAX lowers each form to.
TEST(ArrayIndexing, IntegersAndSlicesAreLaxSlices) {
  const Array x = jnp::reshape(jnp::arange(12), {3, 4});
  // x[1]: slice row 1, drop the dimension.
  EXPECT_EQ(i32(x[1]), i32(lax::reshape(lax::slice(x, {1, 0}, {2, 4}), {4})));
  EXPECT_EQ(x[1].shape(), (Shape{4}));
  EXPECT_EQ(i32(x[-1]), i32(lax::reshape(lax::slice(x, {2, 0}, {3, 4}), {4})));
  EXPECT_EQ(i32(x[size_t{2}]), i32(x[-1]));  // any integer type
  EXPECT_EQ((x[{1, 2}].item<int32_t>()), 6);
  EXPECT_EQ(x[{0}].shape(), (Shape{4}));
  // x[1:3, ::2]
  EXPECT_EQ(i32(x[{Slice(1, 3), Slice(none, none, 2)}]),
            i32(lax::slice(x, {1, 0}, {3, 4}, {1, 2})));
  // Negative bounds count from the end; out-of-range bounds are clamped: x[-2:100] is x[1:].
  EXPECT_EQ(i32(x[Slice(-2, 100)]), i32(lax::slice(x, {1, 0}, {3, 4})));
  EXPECT_EQ(i32(x[Slice(-100, 100)]), i32(x));
  EXPECT_EQ(x[Slice(5, none)].shape(), (Shape{0, 4}));
  EXPECT_EQ(x[Slice(2, 1)].shape(), (Shape{0, 4}));
  // x[:, ::-1] is a reverse; x[:, 3:0:-2] a reverse then a strided slice.
  EXPECT_EQ(i32(x[{Slice(), Slice(none, none, -1)}]), i32(lax::rev(x, {1})));
  EXPECT_EQ(i32(x[{Slice(), Slice(3, 0, -2)}]),
            i32(lax::slice(lax::rev(x, {1}), {0, 0}, {3, 3}, {1, 2})));
  // newaxis (or none) and Ellipsis.
  EXPECT_EQ(i32(x[newaxis]), i32(lax::reshape(x, {1, 3, 4})));
  EXPECT_EQ(x[none].shape(), (Shape{1, 3, 4}));
  EXPECT_EQ((x[{Slice(), newaxis, 0}].shape()), (Shape{3, 1}));
  const Array t = jnp::reshape(jnp::arange(24), {2, 3, 4});
  EXPECT_EQ(i32(t[{Ellipsis, 2}]), i32(lax::reshape(lax::slice(t, {0, 0, 2}, {2, 3, 3}), {2, 3})));
  EXPECT_EQ(i32(t[{1, Ellipsis, 2}]), (std::vector<int32_t>{14, 18, 22}));
  EXPECT_EQ(i32(t[Ellipsis]), i32(t));
  // A prepared index.
  const Index index = {Slice(), -1, Slice(1, none)};
  EXPECT_EQ(i32(t[index]), i32(jnp::at(t, index)));
  // Errors as JAX's: an out-of-range integer and too many indices.
  EXPECT_EQ(error_of([&] { (void)x[3]; }),
            "numpy.at: index 3 is out of bounds for axis 0 with size 3");
  EXPECT_THROW(((void)x[{0, 0, 0}]), jnp::IndexError);
}

TEST(ArrayIndexing, IntegerArraysAreGathers) {
  const Array x = jnp::reshape(jnp::arange(12), {3, 4});
  const Array idx = iarr({2, 0, -1, 2}, {4});
  // x[idx] is take along axis 0 (negative indices count from the end).
  EXPECT_EQ(i32(x[idx]), i32(jnp::take(x, iarr({2, 0, 2, 2}, {4}), 0)));
  // The same rows through an explicit gather: one index per row, whole rows as slices.
  lax::GatherDimensionNumbers dims;
  dims.offset_dims = {1};
  dims.collapsed_slice_dims = {0};
  dims.start_index_map = {0};
  EXPECT_EQ(i32(x[idx]), i32(lax::gather(x, iarr({2, 0, 2, 2}, {4, 1}), dims, {1, 4})));
  // x[:, idx] and two arrays broadcast together: x[[0, 2], [1, 3]].
  EXPECT_EQ(i32(x[{Slice(), iarr({3, 0}, {2})}]), i32(jnp::take(x, iarr({3, 0}, {2}), 1)));
  EXPECT_EQ(i32(x[{iarr({0, 2}, {2}), iarr({1, 3}, {2})}]), (std::vector<int32_t>{1, 11}));
  // A boolean mask (eager).
  EXPECT_EQ(i32(x[x % 5 == 0]), (std::vector<int32_t>{0, 5, 10}));
}

TEST(ArrayIndexing, TransposeAndMatrixTranspose) {
  const Array t = jnp::reshape(jnp::arange(24), {2, 3, 4});
  EXPECT_EQ(t.T().shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(i32(t.T()), i32(lax::transpose(t, {2, 1, 0})));
  EXPECT_EQ(t.mT().shape(), (Shape{2, 4, 3}));
  EXPECT_EQ(i32(t.mT()), i32(lax::transpose(t, {0, 2, 1})));
  EXPECT_EQ(i32(jnp::matrix_transpose(t)), i32(t.mT()));
  const Array v = jnp::arange(3);
  EXPECT_EQ(i32(v.T()), i32(v));  // .T of a vector is the vector, as in NumPy
  EXPECT_NE(error_of([&] { (void)v.mT(); }).find("at least two-dimensional"), std::string::npos);
}

TEST(ArrayIndexing, UnderJitAndGrad) {
  auto f = [](const Array& x, const Array& i) {
    return std::vector<Array>{
        x[1],  x[{Slice(), Slice(none, none, -2)}], x[i], x[{Ellipsis, i}], x.T()[{0, newaxis}],
        x.mT()};
  };
  const Array x = jnp::reshape(jnp::linspace(-1.0, 1.0, 12), {3, 4});
  const Array i = iarr({2, 0}, {2});
  const std::vector<Array> eager = f(x, i);
  const std::vector<Array> traced = jit(f)(x, i);
  ASSERT_EQ(eager.size(), traced.size());
  for (size_t k = 0; k < eager.size(); ++k) {
    EXPECT_EQ(eager[k].aval(), traced[k].aval()) << "output " << k;
    EXPECT_EQ(f32(eager[k]), f32(traced[k])) << "output " << k;
  }
  // Static integers and slices lower to slice and reshape; an index array to a gather.
  const std::string sliced = jit([](const Array& a) {
                               return a[{1, Slice(1, none, 2)}];
                             })
                                 .lower(ShapeDtype{{3, 4}, DType::F32})
                                 .as_text();
  EXPECT_NE(sliced.find("stablehlo.slice"), std::string::npos) << sliced;
  EXPECT_EQ(sliced.find("stablehlo.gather"), std::string::npos) << sliced;
  const std::string gathered =
      jit([](const Array& a, const Array& j) { return a[j]; })
          .lower(ShapeDtype{{3, 4}, DType::F32}, ShapeDtype{{2}, DType::I32})
          .as_text();
  EXPECT_NE(gathered.find("stablehlo.gather"), std::string::npos) << gathered;

  // Gradients: a slice's cotangent is zero outside the slice; a gather's adds up over repeated
  // indices. References: the same loss with the explicit lax slice, and x[idx] as
  // one_hot(idx) @ x, whose gradient is one_hot(idx)^T @ w.
  const Array w = jnp::reshape(jnp::linspace(0.5, 2.0, 8), {2, 4});
  auto sliced_loss = [&](const Array& a) { return jnp::sum(a[{Slice(none, none, 2)}] * w); };
  auto lax_loss = [&](const Array& a) {
    return jnp::sum(lax::slice(a, {0, 0}, {3, 4}, {2, 1}) * w);
  };
  EXPECT_EQ(f32(grad(sliced_loss)(x)), f32(grad(lax_loss)(x)));
  const Array rep = iarr({2, 2}, {2});
  auto gather_loss = [&](const Array& a) { return jnp::sum(a[rep] * w); };
  const Array want = jnp::matmul(jnp::one_hot(rep, 3).T(), w);
  expect_near(f32(grad(gather_loss)(x)), f32(want));
  expect_near(f32(grad(gather_loss)(x)[2]), f32(w[0] + w[1]));
  // mT and T are transposes for the gradient too.
  const Array m = jnp::reshape(jnp::linspace(1.0, 6.0, 6), {2, 3});
  auto t_loss = [&](const Array& a) { return jnp::sum(a.T()[Slice(none, 2)] * m); };
  const Array gt = grad(t_loss)(x);
  EXPECT_EQ(f32(gt[{Slice(), Slice(none, 2)}]), f32(m.T()));
  EXPECT_EQ(f32(gt[{Slice(), Slice(2, none)}]), std::vector<float>(6, 0.0f));
}

TEST(NumpyIndexing, IndexUpdates) {
  Array x = jnp::zeros({5}, DType::I32);
  EXPECT_EQ(i32(jnp::at_set(x, {1}, 7)), (std::vector<int32_t>{0, 7, 0, 0, 0}));
  EXPECT_EQ(i32(jnp::at_set(x, {Slice(1, none, 2)}, 3)), (std::vector<int32_t>{0, 3, 0, 3, 0}));
  EXPECT_EQ(i32(jnp::at_set(x, {Slice(none, none, -1)}, jnp::arange(5))),
            (std::vector<int32_t>{4, 3, 2, 1, 0}));
  // JAX's at[].add applies every duplicate index.
  Array idx = iarr({0, 0, 2, -1}, {4});
  EXPECT_EQ(i32(jnp::at_add(x, {idx}, 1)), (std::vector<int32_t>{2, 0, 1, 0, 1}));
  EXPECT_EQ(i32(jnp::at_add(x, {idx}, iarr({1, 2, 3, 4}, {4}))),
            (std::vector<int32_t>{3, 0, 3, 0, 4}));
  // Out-of-range updates are dropped.
  EXPECT_EQ(i32(jnp::at_set(x, {iarr({1, 9, -9}, {3})}, 5)), (std::vector<int32_t>{0, 5, 0, 0, 0}));
  Array m = jnp::reshape(jnp::arange(6.0), {2, 3});
  EXPECT_EQ(f32(jnp::at_set(m, {Slice(), 1}, farr({-1, -2}, {2}))),
            (std::vector<float>{0, -1, 2, 3, -2, 5}));
  EXPECT_EQ(f32(jnp::at_multiply(m, {1}, 2)), (std::vector<float>{0, 1, 2, 6, 8, 10}));
  EXPECT_EQ(f32(jnp::at_subtract(m, {0, 0}, 1)), (std::vector<float>{-1, 1, 2, 3, 4, 5}));
  EXPECT_EQ(f32(jnp::at_min(m, {Ellipsis}, 2.5)), (std::vector<float>{0, 1, 2, 2.5f, 2.5f, 2.5f}));
  EXPECT_EQ(f32(jnp::at_max(m, {0}, 1.5)), (std::vector<float>{1.5f, 1.5f, 2, 3, 4, 5}));
  // Values are converted to x's dtype; x itself is unchanged.
  Array y = jnp::at_set(m, {0, 0}, 7);
  EXPECT_EQ(y.dtype(), DType::F32);
  EXPECT_EQ(f32(m)[0], 0);
  EXPECT_EQ(error_of([&] {
              (void)jnp::at_set(m, {0}, farr({1, 2}, {2}));
            }),
            "numpy.at_set: values of shape [2] cannot be broadcast to the indexed shape [3]");
}

TEST(NumpyIndexing, TakeTakeAlongAxisOneHot) {
  // numpy.take docs: a = [4, 3, 5, 7, 6, 8]; take(a, [0, 1, 4]) -> [4, 3, 6]
  Array a = iarr({4, 3, 5, 7, 6, 8}, {6});
  EXPECT_EQ(i32(jnp::take(a, iarr({0, 1, 4}, {3}))), (std::vector<int32_t>{4, 3, 6}));
  EXPECT_EQ(i32(jnp::take(a, iarr({0, 1, 4, 3}, {2, 2}))).size(), 4u);
  EXPECT_EQ(jnp::take(a, iarr({0, 1, 4, 3}, {2, 2})).shape(), (Shape{2, 2}));
  EXPECT_EQ(jnp::take(a, -1).item<int32_t>(), 8);
  Array m = jnp::reshape(jnp::arange(6.0), {2, 3});
  EXPECT_EQ(f32(jnp::take(m, iarr({2, 0}, {2}), 1)), (std::vector<float>{2, 0, 5, 3}));
  EXPECT_EQ(f32(jnp::take(m, iarr({4}, {1}))), (std::vector<float>{4}));
  // Modes for out-of-range indices.
  auto fill = f32(jnp::take(m, iarr({1, 7}, {2}), 1));
  EXPECT_EQ(fill[0], 1);
  EXPECT_TRUE(std::isnan(fill[1]));
  EXPECT_EQ(f32(jnp::take(m, iarr({1, 7}, {2}), 1, jnp::IndexMode::Clip)),
            (std::vector<float>{1, 2, 4, 5}));
  EXPECT_EQ(f32(jnp::take(m, iarr({1, 4}, {2}), 1, jnp::IndexMode::Wrap)),
            (std::vector<float>{1, 1, 4, 4}));
  EXPECT_EQ(i32(jnp::take(a, iarr({9}, {1}))), (std::vector<int32_t>{INT32_MIN}));
  // numpy.take_along_axis docs: a = [[10, 30, 20], [60, 40, 50]]; with argsort along 1.
  Array b = iarr({10, 30, 20, 60, 40, 50}, {2, 3});
  Array ai = jnp::argsort(b, 1);
  EXPECT_EQ(i32(ai), (std::vector<int32_t>{0, 2, 1, 1, 2, 0}));
  EXPECT_EQ(i32(jnp::take_along_axis(b, ai, 1)), (std::vector<int32_t>{10, 20, 30, 40, 50, 60}));
  Array am = jnp::expand_dims(jnp::argmax(b, 1), 1);
  EXPECT_EQ(i32(jnp::take_along_axis(b, am, 1)), (std::vector<int32_t>{30, 60}));
  EXPECT_EQ(i32(jnp::take_along_axis(b, iarr({1, 0, 1}, {1, 3}), 0)),
            (std::vector<int32_t>{60, 30, 50}));
  // jax.nn.one_hot docs: one_hot([0, 1, 2], 3)
  Array oh = jnp::one_hot(iarr({0, 1, 2}, {3}), 3);
  EXPECT_EQ(oh.dtype(), DType::F32);
  EXPECT_EQ(f32(oh), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(f32(jnp::one_hot(iarr({1, 5}, {2}), 3)), (std::vector<float>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(f32(jnp::one_hot(iarr({0, 2}, {2}), 3, DType::F32, 0)),
            (std::vector<float>{1, 0, 0, 0, 0, 1}));
  auto nz = jnp::nonzero(iarr({0, 3, 0, 4}, {2, 2}));
  ASSERT_EQ(nz.size(), 2u);
  EXPECT_EQ(i32(nz[0]), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(i32(nz[1]), (std::vector<int32_t>{1, 1}));
}

// ----- Reductions -------------------------------------------------------------------------

TEST(NumpyReductions, AxesAndKeepdims) {
  Array x = jnp::reshape(jnp::arange(6.0), {2, 3});  // [[0,1,2],[3,4,5]]
  EXPECT_EQ(jnp::sum(x).item<float>(), 15);
  EXPECT_EQ(f32(jnp::sum(x, 0)), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(f32(jnp::sum(x, -1)), (std::vector<float>{3, 12}));
  EXPECT_EQ(jnp::sum(x, {0, 1}).item<float>(), 15);
  EXPECT_EQ(jnp::sum(x, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(jnp::sum(x, none, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(f32(jnp::mean(x, 0)), (std::vector<float>{1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(f32(jnp::max(x, 1)), (std::vector<float>{2, 5}));
  EXPECT_EQ(f32(jnp::min(x, 0)), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(jnp::max(x).item<float>(), 5);
  EXPECT_EQ(f32(jnp::prod(x + 1, 1)), (std::vector<float>{6, 120}));
  EXPECT_EQ(i32(jnp::argmax(x, 1)), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(jnp::argmax(x).item<int32_t>(), 5);
  EXPECT_EQ(jnp::argmin(x).item<int32_t>(), 0);
  EXPECT_EQ(jnp::argmax(x, 0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(i32(jnp::argmax(iarr({1, 3, 3, 2}, {4}))), (std::vector<int32_t>{1}));  // first
  EXPECT_EQ(jnp::argmin(farr({2, kNaN, 0}, {3})).item<int32_t>(), 1);  // NaN counts, as JAX
  Array b = jnp::array({true, false, true, true}, Shape{2, 2});
  EXPECT_EQ(b1(jnp::all(b, 1)), (std::vector<bool>{false, true}));
  EXPECT_EQ(b1(jnp::any(b, 0)), (std::vector<bool>{true, true}));
  EXPECT_FALSE(jnp::all(b).item<bool>());
  EXPECT_TRUE(jnp::any(farr({0, 0.5f}, {2})).item<bool>());
  EXPECT_EQ(jnp::count_nonzero(b).item<int32_t>(), 3);
  // numpy.var docs: a = [[1, 2], [3, 4]]; var(a) = 1.25; var(a, axis=0) = [1, 1];
  // numpy.std docs: std(a) = 1.1180340; std(a, axis=1) = [0.5, 0.5]
  Array a = farr({1, 2, 3, 4}, {2, 2});
  EXPECT_FLOAT_EQ(jnp::var(a).item<float>(), 1.25f);
  EXPECT_EQ(f32(jnp::var(a, 0)), (std::vector<float>{1, 1}));
  EXPECT_NEAR(jnp::std(a).item<float>(), 1.1180340f, 1e-6);
  EXPECT_EQ(f32(jnp::std(a, 1)), (std::vector<float>{0.5f, 0.5f}));
  EXPECT_NEAR(jnp::var(a, none, 1).item<float>(), 5.0f / 3.0f, 1e-6);
  EXPECT_EQ(jnp::mean(iarr({1, 2}, {2})).dtype(), DType::F32);
  EXPECT_EQ(jnp::mean(iarr({1, 2}, {2})).item<float>(), 1.5f);
  EXPECT_EQ(error_of([&] { (void)jnp::sum(x, {0, 0}); }), "numpy.sum: duplicate value in 'axis'");
  EXPECT_EQ(error_of([&] { (void)jnp::sum(x, 2); }),
            "numpy.sum: axis 2 is out of bounds for array of dimension 2");
}

TEST(NumpyReductions, DtypesAndEmpty) {
  Array i8 = jnp::array(std::vector<int8_t>{100, 100, 100});
  Array s = jnp::sum(i8);
  EXPECT_EQ(s.dtype(), DType::I32);  // small integers accumulate in the default int
  EXPECT_EQ(s.item<int32_t>(), 300);
  EXPECT_EQ(jnp::sum(jnp::array({true, true, false})).item<int32_t>(), 2);
  EXPECT_EQ(jnp::sum(jnp::array(std::vector<uint8_t>{200, 200})).dtype(), DType::U32);
  EXPECT_EQ(jnp::max(i8).dtype(), DType::I8);
  Array h = jnp::array(std::vector<float16>(3000, float16(1.0)));
  Array hs = jnp::sum(h);
  EXPECT_EQ(hs.dtype(), DType::F16);
  EXPECT_EQ(float(hs.item<float16>()), 3000.0f);  // accumulated in f32 (f16 alone stalls at 2048)
  EXPECT_EQ(jnp::sum(i8, none, false, DType::I8).dtype(), DType::I8);
  // Empty arrays.
  Array e = jnp::zeros({0, 3});
  EXPECT_EQ(f32(jnp::sum(e, 0)), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(jnp::sum(e, 1).shape(), (Shape{0}));
  EXPECT_EQ(f32(jnp::prod(e, 0)), (std::vector<float>{1, 1, 1}));
  EXPECT_TRUE(std::isnan(jnp::mean(e).item<float>()));
  EXPECT_TRUE(jnp::all(e).item<bool>());
  EXPECT_FALSE(jnp::any(e).item<bool>());
  EXPECT_EQ(jnp::max(e, 1).shape(), (Shape{0}));
  EXPECT_EQ(error_of([&] { (void)jnp::max(e, 0); }),
            "numpy.max: zero-size array to reduction operation max which has no identity (shape "
            "[0,3])");
  EXPECT_NE(error_of([&] { (void)jnp::argmax(e); }).find("empty sequence"), std::string::npos);
  EXPECT_EQ(jnp::cumsum(e, 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(jnp::sort(jnp::zeros({0})).shape(), (Shape{0}));
}

TEST(NumpyReductions, CumulativeAndSorting) {
  // numpy.cumsum docs: a = [[1,2,3],[4,5,6]]; cumsum(a) -> [1,3,6,10,15,21];
  // cumsum(a, axis=0) -> [[1,2,3],[5,7,9]]; cumsum(a, axis=1) -> [[1,3,6],[4,9,15]]
  Array a = iarr({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(i32(jnp::cumsum(a)), (std::vector<int32_t>{1, 3, 6, 10, 15, 21}));
  EXPECT_EQ(i32(jnp::cumsum(a, 0)), (std::vector<int32_t>{1, 2, 3, 5, 7, 9}));
  EXPECT_EQ(i32(jnp::cumsum(a, 1)), (std::vector<int32_t>{1, 3, 6, 4, 9, 15}));
  EXPECT_EQ(jnp::cumsum(a, none, DType::F32).dtype(), DType::F32);
  // numpy.cumprod docs: cumprod([1, 2, 3]) -> [1, 2, 6]
  EXPECT_EQ(i32(jnp::cumprod(iarr({1, 2, 3}, {3}))), (std::vector<int32_t>{1, 2, 6}));
  EXPECT_EQ(jnp::cumsum(jnp::array({true, true})).dtype(), DType::I32);
  // numpy.sort docs: a = [[1,4],[3,1]]; sort(a) -> [[1,4],[1,3]]; sort(a, axis=None) ->
  // [1,1,3,4]; sort(a, axis=0) -> [[1,1],[3,4]]
  Array s = iarr({1, 4, 3, 1}, {2, 2});
  EXPECT_EQ(i32(jnp::sort(s)), (std::vector<int32_t>{1, 4, 1, 3}));
  EXPECT_EQ(i32(jnp::sort(s, none)), (std::vector<int32_t>{1, 1, 3, 4}));
  EXPECT_EQ(i32(jnp::sort(s, 0)), (std::vector<int32_t>{1, 1, 3, 4}));
  Array f = farr({3, kNaN, 1, 2}, {4});
  auto sorted = f32(jnp::sort(f));
  EXPECT_EQ(std::vector<float>(sorted.begin(), sorted.begin() + 3), (std::vector<float>{1, 2, 3}));
  EXPECT_TRUE(std::isnan(sorted[3]));  // NaN last
  // numpy.argsort docs: argsort([3, 1, 2]) -> [1, 2, 0]
  EXPECT_EQ(i32(jnp::argsort(iarr({3, 1, 2}, {3}))), (std::vector<int32_t>{1, 2, 0}));
  // Stable, also descending: equal keys keep their order.
  Array d = iarr({3, 1, 3, 2}, {4});
  EXPECT_EQ(i32(jnp::argsort(d)), (std::vector<int32_t>{1, 3, 0, 2}));
  EXPECT_EQ(i32(jnp::argsort(d, -1, true)), (std::vector<int32_t>{0, 2, 3, 1}));
  EXPECT_EQ(i32(jnp::sort(d, -1, true)), (std::vector<int32_t>{3, 3, 2, 1}));
}

// ----- jit --------------------------------------------------------------------------------

TEST(NumpyJit, AgreesWithEager) {
  auto fn = [](const Array& x, const Array& idx) {
    Array y = jnp::where(x > 2.0, jnp::exp(x * 0.1), -x) + jnp::sum(x, 0, true);
    Array z = jnp::einsum("ij,kj->ik", {y, x}) / 3;
    Array g = jnp::at(z, {Slice(none, none, -1), idx});
    Array u = jnp::at_add(g, {0, Slice()}, 1.0);
    Array r = jnp::concatenate({jnp::ravel(u), jnp::cumsum(jnp::ravel(x))}, 0);
    Array s = jnp::take_along_axis(x, jnp::argsort(x, 1), 1);
    return std::vector<Array>{r,
                              jnp::var(s, 1, 1),
                              jnp::std(x),
                              jnp::argmax(x, 0),
                              jnp::matmul(x, jnp::transpose(x)),
                              jnp::tril(jnp::floor_divide(x, 2.0)),
                              jnp::clip(jnp::round(x * 1.5), 1, 4),
                              jnp::one_hot(idx, 3),
                              jnp::take(x, idx, 1),
                              jnp::remainder(x, -2.5)};
  };
  Array x = jnp::reshape(jnp::linspace(-3.0, 4.0, 12), {3, 4});
  Array idx = iarr({2, 0}, {2});
  std::vector<Array> eager = fn(x, idx);
  auto jitted = jit(fn);
  std::vector<Array> traced = jitted(x, idx);
  ASSERT_EQ(eager.size(), traced.size());
  for (size_t i = 0; i < eager.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    EXPECT_EQ(eager[i].aval(), traced[i].aval());
    if (eager[i].dtype() == DType::F32)
      expect_near(f32(traced[i]), f32(eager[i]));
    else
      EXPECT_EQ(i32(traced[i]), i32(eager[i]));
  }
}

TEST(NumpyJit, WeakTypesAndTracedIndices) {
  auto f = jit([](const Array& x, const Array& i) {
    return std::vector<Array>{x * 2, jnp::at(x, {i}), jnp::at_set(x, {i}, 0.0),
                              jnp::at(x, {Slice(1, none)})};
  });
  Array x = farr({1, 2, 3}, {3});
  auto out = f(x, iarr({2}, {}));
  EXPECT_EQ(f32(out[0]), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(out[1].item<float>(), 3);
  EXPECT_EQ(f32(out[2]), (std::vector<float>{1, 2, 0}));
  EXPECT_EQ(f32(out[3]), (std::vector<float>{2, 3}));
  // Weak types inside the trace: a weak argument plus a C++ int stays f32.
  auto g = jit([](const Array& a) {
    Array r = a + 1;
    EXPECT_TRUE(r.is_tracer());
    EXPECT_TRUE(r.weak_type());
    return r;
  });
  Array w = g(jnp::asarray(2.0));
  EXPECT_EQ(w.dtype(), DType::F32);
  EXPECT_EQ(w.item<float>(), 3);
  // Boolean masks need a concrete value.
  auto h = jit([](const Array& a) { return jnp::at(a, {a > 1}); });
  try {
    (void)h(x);
    ADD_FAILURE() << "no IndexError";
  } catch (const jnp::IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("numpy::where(mask, x, 0)"), std::string::npos)
        << e.what();
  }
  // Reading a traced value on the host is refused.
  auto k = jit([](const Array& a) {
    if (jnp::any(a > 0)) return a;
    return -a;
  });
  EXPECT_THROW((void)k(x), ConcretizationError);
}

TEST(NumpyJit, LoweredTextUsesStablehloOps) {
  auto f = jit([](const Array& x, const Array& y) { return jnp::matmul(x, y) + 1.0; });
  auto lowered = f.lower(ShapeDtype{{2, 3}, DType::F32}, ShapeDtype{{3, 4}, DType::F32});
  const std::string text = lowered.as_text();
  EXPECT_NE(text.find("stablehlo.dot_general"), std::string::npos) << text;
  EXPECT_NE(text.find("stablehlo.add"), std::string::npos) << text;
}

}  // namespace
}  // namespace cujax
