// Element-wise ops of the CPU backend, run as one-op modules built with the IR builder API.
// Expected values are worked out by hand or computed independently (long double libm, plain
// loops), never copied from the implementation.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "backends/common/elementwise.h"
#include "cujax/core/error.h"
#include "cujax/core/half.h"
#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

using ir::Type;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr double kNaND = std::numeric_limits<double>::quiet_NaN();

template <class T>
HostTensor vec(const std::vector<T>& v) {
  return HostTensor::from_vector(v, {static_cast<int64_t>(v.size())});
}
template <class T>
HostTensor vec(const std::vector<T>& v, Shape shape) {
  return HostTensor::from_vector(v, std::move(shape));
}
template <class T>
HostTensor scalar(T v) {
  return HostTensor::from_vector(std::vector<T>{v}, {});
}
template <class H>
HostTensor halfs(const std::vector<double>& v) {
  std::vector<H> h;
  for (double x : v) h.push_back(H(x));
  return vec(h);
}

struct Attr {
  std::string name;
  ir::AttrRef value;
};

// Compiles `main(inputs) { return op(inputs) }` on the cpu backend and runs it.
std::vector<HostTensor> run_op_all(const std::string& name, const std::vector<HostTensor>& inputs,
                                   const std::vector<Type>& results,
                                   const std::vector<Attr>& attrs = {}) {
  ir::Module m;
  ir::Function& f = m.add_function("main");
  std::vector<ir::Value*> args;
  for (const HostTensor& t : inputs)
    args.push_back(f.entry().add_argument(Type::tensor(t.shape(), t.dtype())));
  auto op = ir::make_op("stablehlo." + name, args, results);
  for (const Attr& a : attrs) op->set_attr(a.name, a.value);
  ir::Operation* o = f.entry().push_back(std::move(op));
  std::vector<ir::Value*> rs;
  for (size_t i = 0; i < o->num_results(); ++i) rs.push_back(o->result(i));
  f.entry().push_back(ir::make_op("func.return", rs, {}));
  f.result_types = results;
  auto exe = runtime::get_backend("cpu").compile(m);
  return exe->execute_on_host(inputs);
}

HostTensor run_op(const std::string& name, const std::vector<HostTensor>& inputs, DType out,
                  const std::vector<Attr>& attrs = {}) {
  return run_op_all(name, inputs, {Type::tensor(inputs.at(0).shape(), out)}, attrs).at(0);
}
// Result type = type of the first operand (of the second for clamp and select).
HostTensor run_same(const std::string& name, const std::vector<HostTensor>& inputs,
                    const std::vector<Attr>& attrs = {}) {
  const HostTensor& like = name == "clamp" || name == "select" ? inputs.at(1) : inputs.at(0);
  return run_op_all(name, inputs, {Type::tensor(like.shape(), like.dtype())}, attrs).at(0);
}

Attr direction(const std::string& d) {
  return {"comparison_direction", ir::Attribute::enum_attr("comparison_direction", d)};
}
Attr compare_type(const std::string& t) {
  return {"compare_type", ir::Attribute::enum_attr("comparison_type", t)};
}

template <class T>
std::vector<T> values(const HostTensor& t) {
  EXPECT_EQ(t.dtype(), dtype_of<T>());
  return t.to_vector<T>();
}

// Bitwise float equality, except that any NaN matches any NaN.
template <class F>
bool same_float(F a, F b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof(F)) == 0;
}

void expect_floats(const HostTensor& t, const std::vector<float>& expected) {
  ASSERT_EQ(t.dtype(), DType::F32);
  ASSERT_EQ(t.size(), static_cast<int64_t>(expected.size()));
  const float* p = t.data_as<float>();
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(same_float(p[i], expected[i]))
        << "index " << i << ": got " << p[i] << ", expected " << expected[i];
}
void expect_doubles(const HostTensor& t, const std::vector<double>& expected) {
  ASSERT_EQ(t.dtype(), DType::F64);
  ASSERT_EQ(t.size(), static_cast<int64_t>(expected.size()));
  const double* p = t.data_as<double>();
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(same_float(p[i], expected[i]))
        << "index " << i << ": got " << p[i] << ", expected " << expected[i];
}
// 16-bit floats: expected given as doubles that are exactly representable.
template <class H>
void expect_halfs(const HostTensor& t, const std::vector<double>& expected) {
  ASSERT_EQ(t.dtype(), dtype_of<H>());
  ASSERT_EQ(t.size(), static_cast<int64_t>(expected.size()));
  const H* p = t.data_as<H>();
  for (size_t i = 0; i < expected.size(); ++i) {
    const float got = p[i];
    EXPECT_TRUE(same_float(static_cast<double>(got), expected[i]))
        << "index " << i << ": got " << got << ", expected " << expected[i];
  }
}

template <class T>
void expect_values(const HostTensor& t, const std::vector<T>& expected) {
  ASSERT_EQ(t.dtype(), dtype_of<T>());
  EXPECT_EQ(t.to_vector<T>(), expected);
}

std::vector<bool> bools(const HostTensor& t) {
  EXPECT_EQ(t.dtype(), DType::Bool);
  std::vector<bool> v;
  for (int64_t i = 0; i < t.size(); ++i) v.push_back(t.data_as<bool>()[i]);
  return v;
}

HostTensor bool_vec(const std::vector<bool>& v) {
  HostTensor t(DType::Bool, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data_as<bool>()[i] = v[i];
  return t;
}

int64_t ulp_distance(float a, float b) {
  auto key = [](float x) {
    const int32_t s = std::bit_cast<int32_t>(x);
    return s < 0 ? -static_cast<int64_t>(s & 0x7fffffff) : static_cast<int64_t>(s);
  };
  return std::llabs(key(a) - key(b));
}

// ---------------------------------------------------------------------------------------------
// Arithmetic

TEST(CpuElementwise, AddSubtractMultiplyFloat) {
  const auto a = vec<float>({1.5f, -2.0f, 0.0f, kInf, kInf, 1e38f});
  const auto b = vec<float>({2.25f, 2.0f, -0.0f, -kInf, 1.0f, 1e38f});
  expect_floats(run_same("add", {a, b}), {3.75f, 0.0f, 0.0f, kNaN, kInf, 2e38f});
  expect_floats(run_same("subtract", {a, b}), {-0.75f, -4.0f, 0.0f, kInf, kInf, 0.0f});
  expect_floats(run_same("multiply", {a, b}), {3.375f, -4.0f, -0.0f, -kInf, kInf, kInf});
}

TEST(CpuElementwise, IntegerArithmeticWraps) {
  const int32_t mx = std::numeric_limits<int32_t>::max(), mn = std::numeric_limits<int32_t>::min();
  expect_values<int32_t>(run_same("add", {vec<int32_t>({mx, -5, mn}), vec<int32_t>({1, 3, -1})}),
                         {mn, -2, mx});
  expect_values<int32_t>(run_same("subtract", {vec<int32_t>({mn, 7}), vec<int32_t>({1, 10})}),
                         {mx, -3});
  expect_values<int32_t>(
      run_same("multiply", {vec<int32_t>({65536, mn, -3}), vec<int32_t>({65536, -1, 4})}),
      {0, mn, -12});
  expect_values<int8_t>(run_same("add", {vec<int8_t>({127, -128}), vec<int8_t>({1, -1})}),
                        {-128, 127});
  // 65535 * 65535 = 2^32 - 2^17 + 1 = 1 (mod 2^16).
  expect_values<uint16_t>(
      run_same("multiply", {vec<uint16_t>({65535, 300}), vec<uint16_t>({65535, 300})}),
      {1, static_cast<uint16_t>(90000 - 65536)});
  expect_values<uint8_t>(run_same("subtract", {vec<uint8_t>({0}), vec<uint8_t>({1})}), {255});
  expect_values<int64_t>(
      run_same("add", {vec<int64_t>({std::numeric_limits<int64_t>::max()}), vec<int64_t>({1})}),
      {std::numeric_limits<int64_t>::min()});
}

TEST(CpuElementwise, BooleanAddIsOrMultiplyIsAnd) {
  const auto a = bool_vec({false, false, true, true});
  const auto b = bool_vec({false, true, false, true});
  EXPECT_EQ(bools(run_same("add", {a, b})), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(bools(run_same("multiply", {a, b})), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(bools(run_same("maximum", {a, b})), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(bools(run_same("minimum", {a, b})), (std::vector<bool>{false, false, false, true}));
}

TEST(CpuElementwise, IntegerDivision) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  // Truncation toward zero; x / 0 = -1; INT_MIN / -1 = INT_MIN.
  expect_values<int32_t>(run_same("divide", {vec<int32_t>({7, -7, 7, -7, 5, mn, mn}),
                                             vec<int32_t>({2, 2, -2, -2, 0, -1, 1})}),
                         {3, -3, -3, 3, -1, mn, mn});
  expect_values<uint32_t>(
      run_same("divide", {vec<uint32_t>({7, 4000000000u, 9}), vec<uint32_t>({2, 3, 0})}),
      {3, 1333333333u, 0xffffffffu});
  expect_values<int8_t>(
      run_same("divide", {vec<int8_t>({-128, -128, 100}), vec<int8_t>({-1, 0, -7})}),
      {-128, -1, -14});
}

TEST(CpuElementwise, Remainder) {
  const int64_t mn = std::numeric_limits<int64_t>::min();
  // Sign of the dividend; x % 0 = x; INT_MIN % -1 = 0.
  expect_values<int64_t>(run_same("remainder", {vec<int64_t>({7, -7, 7, -7, 5, mn}),
                                                vec<int64_t>({2, 2, -2, -2, 0, -1})}),
                         {1, -1, 1, -1, 5, 0});
  expect_values<uint8_t>(run_same("remainder", {vec<uint8_t>({250, 9}), vec<uint8_t>({7, 0})}),
                         {5, 9});
  expect_floats(run_same("remainder", {vec<float>({5.5f, -5.5f, 5.5f, 1.0f, kInf, -0.0f}),
                                       vec<float>({2.0f, 2.0f, -2.0f, 0.0f, 1.0f, 3.0f})}),
                {1.5f, -1.5f, 1.5f, kNaN, kNaN, -0.0f});
  expect_doubles(run_same("remainder", {vec<double>({10.0, -1e300}), vec<double>({3.0, kInfD})}),
                 {1.0, -1e300});
}

TEST(CpuElementwise, FloatDivision) {
  expect_floats(run_same("divide", {vec<float>({1.0f, -1.0f, 0.0f, 1.0f, 6.0f}),
                                    vec<float>({0.0f, 0.0f, 0.0f, -kInf, -4.0f})}),
                {kInf, -kInf, kNaN, -0.0f, -1.5f});
}

TEST(CpuElementwise, MaximumMinimumPropagateNaN) {
  const auto a = vec<float>({1.0f, kNaN, 3.0f, -0.0f, 0.0f, -kInf});
  const auto b = vec<float>({kNaN, 2.0f, -3.0f, 0.0f, -0.0f, 5.0f});
  expect_floats(run_same("maximum", {a, b}), {kNaN, kNaN, 3.0f, 0.0f, 0.0f, 5.0f});
  expect_floats(run_same("minimum", {a, b}), {kNaN, kNaN, -3.0f, -0.0f, -0.0f, -kInf});
  expect_values<int8_t>(run_same("maximum", {vec<int8_t>({-1, 5}), vec<int8_t>({1, -128})}),
                        {1, 5});
  expect_values<uint8_t>(run_same("maximum", {vec<uint8_t>({255, 5}), vec<uint8_t>({1, 6})}),
                         {255, 6});
  expect_values<uint64_t>(run_same("minimum", {vec<uint64_t>({~uint64_t{0}}), vec<uint64_t>({1})}),
                          {1});
}

TEST(CpuElementwise, NegateAbsSign) {
  const int32_t mn = std::numeric_limits<int32_t>::min();
  expect_values<int32_t>(run_same("negate", {vec<int32_t>({5, -7, 0, mn})}), {-5, 7, 0, mn});
  expect_values<int32_t>(run_same("abs", {vec<int32_t>({5, -7, 0, mn})}), {5, 7, 0, mn});
  expect_values<int32_t>(run_same("sign", {vec<int32_t>({5, -7, 0, mn})}), {1, -1, 0, -1});
  expect_values<int8_t>(run_same("abs", {vec<int8_t>({-128, -1})}), {-128, 1});
  expect_floats(run_same("negate", {vec<float>({0.0f, -2.5f, kInf})}), {-0.0f, 2.5f, -kInf});
  expect_floats(run_same("abs", {vec<float>({-0.0f, -2.5f, -kInf, kNaN})}),
                {0.0f, 2.5f, kInf, kNaN});
  expect_floats(run_same("sign", {vec<float>({-2.0f, -0.0f, 0.0f, 3.0f, kNaN, -kInf, 1e-45f})}),
                {-1.0f, -0.0f, 0.0f, 1.0f, kNaN, -1.0f, 1.0f});
  expect_halfs<float16>(run_same("sign", {halfs<float16>({-0.5, 0.0, -0.0, 65504.0})}),
                        {-1.0, 0.0, -0.0, 1.0});
  expect_halfs<bfloat16>(run_same("abs", {halfs<bfloat16>({-0.5, -3.0})}), {0.5, 3.0});
}

TEST(CpuElementwise, NegativeZeroOfNegatedHalf) {
  const HostTensor r = run_same("negate", {halfs<float16>({0.0, -1.0})});
  EXPECT_EQ(r.data_as<float16>()[0].bits, 0x8000);
  EXPECT_EQ(r.data_as<float16>()[1].bits, 0x3c00);
}

// ---------------------------------------------------------------------------------------------
// Logic and bits

TEST(CpuElementwise, LogicalOpsOnBoolsAndIntegers) {
  const auto a = bool_vec({false, false, true, true});
  const auto b = bool_vec({false, true, false, true});
  EXPECT_EQ(bools(run_same("and", {a, b})), (std::vector<bool>{false, false, false, true}));
  EXPECT_EQ(bools(run_same("or", {a, b})), (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(bools(run_same("xor", {a, b})), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(bools(run_same("not", {a})), (std::vector<bool>{true, true, false, false}));
  const auto x = vec<int32_t>({0x0f0f, -1, 0});
  const auto y = vec<int32_t>({0x00ff, 0x1234, 0});
  expect_values<int32_t>(run_same("and", {x, y}), {0x000f, 0x1234, 0});
  expect_values<int32_t>(run_same("or", {x, y}), {0x0fff, -1, 0});
  expect_values<int32_t>(run_same("xor", {x, y}), {0x0ff0, ~0x1234, 0});
  expect_values<int32_t>(run_same("not", {x}), {~0x0f0f, 0, -1});
  expect_values<uint8_t>(run_same("not", {vec<uint8_t>({0, 0xf0})}), {0xff, 0x0f});
}

TEST(CpuElementwise, Shifts) {
  // Amounts >= the bit width (and negative ones, read as unsigned) shift everything out.
  expect_values<int8_t>(
      run_same("shift_left", {vec<int8_t>({1, 1, 3, 1, -1}), vec<int8_t>({7, 8, 2, -1, 1})}),
      {-128, 0, 12, 0, -2});
  expect_values<int8_t>(run_same("shift_right_logical",
                                 {vec<int8_t>({-1, -128, 64, -1}), vec<int8_t>({1, 7, 8, -3})}),
                        {127, 1, 0, 0});
  expect_values<int8_t>(run_same("shift_right_arithmetic", {vec<int8_t>({-128, -128, 64, 64, -1}),
                                                            vec<int8_t>({1, 100, 6, 8, -1})}),
                        {-64, -1, 1, 0, -1});
  expect_values<uint32_t>(
      run_same("shift_right_arithmetic",
               {vec<uint32_t>({0x80000000u, 0x40000000u, 0x80000000u}), vec<uint32_t>({4, 4, 32})}),
      {0xf8000000u, 0x04000000u, 0xffffffffu});
  expect_values<uint64_t>(
      run_same("shift_left", {vec<uint64_t>({1, 1, 1}), vec<uint64_t>({63, 64, 1000})}),
      {uint64_t{1} << 63, 0, 0});
  expect_values<uint16_t>(
      run_same("shift_right_logical", {vec<uint16_t>({0x8000, 0xffff}), vec<uint16_t>({15, 16})}),
      {1, 0});
  expect_values<int64_t>(
      run_same("shift_right_arithmetic",
               {vec<int64_t>({std::numeric_limits<int64_t>::min()}), vec<int64_t>({63})}),
      {-1});
}

TEST(CpuElementwise, PopcntAndCountLeadingZeros) {
  expect_values<int8_t>(run_same("popcnt", {vec<int8_t>({0, -1, 5, -128})}), {0, 8, 2, 1});
  expect_values<uint64_t>(run_same("popcnt", {vec<uint64_t>({~uint64_t{0}, 0x8000000000000001})}),
                          {64, 2});
  expect_values<int16_t>(run_same("popcnt", {vec<int16_t>({0x7fff, 0x0101})}), {15, 2});
  expect_values<int32_t>(run_same("count_leading_zeros", {vec<int32_t>({0, 1, -1, 0x00010000})}),
                         {32, 31, 0, 15});
  expect_values<uint8_t>(run_same("count_leading_zeros", {vec<uint8_t>({0, 1, 0x80, 0x10})}),
                         {8, 7, 0, 3});
  expect_values<uint64_t>(run_same("count_leading_zeros", {vec<uint64_t>({0, 1})}), {64, 63});
}

// ---------------------------------------------------------------------------------------------
// Float math

TEST(CpuElementwise, Rounding) {
  const auto x = vec<float>({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 0.4f, -0.0f, kInf, kNaN});
  expect_floats(run_same("round_nearest_afz", {x}),
                {-3.0f, -2.0f, -1.0f, 1.0f, 2.0f, 3.0f, 0.0f, -0.0f, kInf, kNaN});
  expect_floats(run_same("round_nearest_even", {x}),
                {-2.0f, -2.0f, -0.0f, 0.0f, 2.0f, 2.0f, 0.0f, -0.0f, kInf, kNaN});
  expect_floats(run_same("floor", {x}),
                {-3.0f, -2.0f, -1.0f, 0.0f, 1.0f, 2.0f, 0.0f, -0.0f, kInf, kNaN});
  expect_floats(run_same("ceil", {x}),
                {-2.0f, -1.0f, -0.0f, 1.0f, 2.0f, 3.0f, 1.0f, -0.0f, kInf, kNaN});
  expect_halfs<bfloat16>(run_same("round_nearest_even", {halfs<bfloat16>({2.5, 3.5, -0.5})}),
                         {2.0, 4.0, -0.0});
  expect_doubles(run_same("round_nearest_afz", {vec<double>({4503599627370495.5, -0.5})}),
                 {4503599627370496.0, -1.0});
}

TEST(CpuElementwise, SpecialValuesOfTranscendentals) {
  const float e = static_cast<float>(2.718281828459045235);
  expect_floats(run_same("exponential", {vec<float>({0.0f, 1.0f, -kInf, kInf, 100.0f, kNaN})}),
                {1.0f, e, 0.0f, kInf, kInf, kNaN});
  expect_floats(run_same("log", {vec<float>({1.0f, 0.0f, -1.0f, kInf, -0.0f})}),
                {0.0f, -kInf, kNaN, kInf, -kInf});
  expect_floats(run_same("log_plus_one", {vec<float>({0.0f, -1.0f, -2.0f, -0.0f, 1e-30f})}),
                {0.0f, -kInf, kNaN, -0.0f, 1e-30f});
  expect_floats(run_same("exponential_minus_one", {vec<float>({0.0f, -kInf, 1e-30f, -0.0f})}),
                {0.0f, -1.0f, 1e-30f, -0.0f});
  expect_floats(run_same("logistic", {vec<float>({0.0f, kInf, -kInf, 200.0f, kNaN})}),
                {0.5f, 1.0f, 0.0f, 1.0f, kNaN});
  expect_floats(run_same("sqrt", {vec<float>({4.0f, -1.0f, -0.0f, kInf, 2.0f})}),
                {2.0f, kNaN, -0.0f, kInf, static_cast<float>(1.41421356237309504880)});
  expect_floats(run_same("rsqrt", {vec<float>({4.0f, 0.0f, -1.0f, kInf, 0.25f})}),
                {0.5f, kInf, kNaN, 0.0f, 2.0f});
  expect_floats(run_same("cbrt", {vec<float>({-27.0f, 8.0f, -0.0f, -kInf})}),
                {-3.0f, 2.0f, -0.0f, -kInf});
  expect_floats(run_same("tanh", {vec<float>({0.0f, kInf, -kInf, -0.0f, 30.0f})}),
                {0.0f, 1.0f, -1.0f, -0.0f, 1.0f});
  expect_floats(run_same("sine", {vec<float>({0.0f, -0.0f, kInf})}), {0.0f, -0.0f, kNaN});
  expect_floats(run_same("cosine", {vec<float>({0.0f, kInf})}), {1.0f, kNaN});
  expect_floats(run_same("tan", {vec<float>({0.0f, -0.0f})}), {0.0f, -0.0f});
  const float pi = static_cast<float>(3.14159265358979323846);
  expect_floats(run_same("atan2", {vec<float>({1.0f, 0.0f, -0.0f, 1.0f, kNaN}),
                                   vec<float>({1.0f, -1.0f, -1.0f, 0.0f, 1.0f})}),
                {pi / 4, pi, -pi, pi / 2, kNaN});
}

TEST(CpuElementwise, FloatPower) {
  expect_floats(run_same("power", {vec<float>({2.0f, 2.0f, -8.0f, 0.0f, 1.0f, -2.0f}),
                                   vec<float>({10.0f, 0.5f, 1.0f / 3, -1.0f, kNaN, 3.0f})}),
                {1024.0f, static_cast<float>(1.41421356237309504880), kNaN, kInf, 1.0f, -8.0f});
  expect_halfs<float16>(
      run_same("power", {halfs<float16>({3.0, 2.0}), halfs<float16>({4.0, -2.0})}), {81.0, 0.25});
}

TEST(CpuElementwise, IntegerPower) {
  expect_values<int32_t>(run_same("power", {vec<int32_t>({2, -2, 2, 1, -1, -1, 0, 5, 7}),
                                            vec<int32_t>({10, 3, -1, -5, -3, -2, 0, 0, 1})}),
                         {1024, -8, 0, 1, -1, 1, 1, 1, 7});
  // 3^40 mod 2^32 by repeated multiplication.
  uint32_t p = 1;
  for (int i = 0; i < 40; ++i) p *= 3u;
  expect_values<int32_t>(run_same("power", {vec<int32_t>({3}), vec<int32_t>({40})}),
                         {static_cast<int32_t>(p)});
  uint8_t q = 1;
  for (int i = 0; i < 200; ++i) q = static_cast<uint8_t>(q * 3);
  expect_values<uint8_t>(run_same("power", {vec<uint8_t>({3, 2}), vec<uint8_t>({200, 8})}), {q, 0});
}

// f32 results against long double libm, rounded once: at most one ULP apart.
TEST(CpuElementwise, F32TranscendentalsAreAccurate) {
  std::vector<float> xs;
  for (int i = -2000; i <= 2000; ++i) xs.push_back(static_cast<float>(i) * 0.0137f);
  xs.push_back(1e-20f);
  xs.push_back(-3e-5f);
  xs.push_back(88.5f);
  struct Case {
    const char* op;
    long double (*ref)(long double);
  };
  const Case cases[] = {
      {"exponential", [](long double x) { return expl(x); }},
      {"exponential_minus_one", [](long double x) { return expm1l(x); }},
      {"log", [](long double x) { return logl(x); }},
      {"log_plus_one", [](long double x) { return log1pl(x); }},
      {"sine", [](long double x) { return sinl(x); }},
      {"cosine", [](long double x) { return cosl(x); }},
      {"tan", [](long double x) { return tanl(x); }},
      {"tanh", [](long double x) { return tanhl(x); }},
      {"cbrt", [](long double x) { return cbrtl(x); }},
      {"rsqrt", [](long double x) { return 1.0L / sqrtl(x); }},
      {"logistic", [](long double x) { return 1.0L / (1.0L + expl(-x)); }},
  };
  for (const Case& c : cases) {
    const HostTensor r = run_same(c.op, {vec(xs)});
    const float* got = r.data_as<float>();
    int bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const float want = static_cast<float>(c.ref(xs[i]));
      if (std::isnan(want)) {
        if (!std::isnan(got[i]) && ++bad < 5) ADD_FAILURE() << c.op << "(" << xs[i] << ")";
      } else if (ulp_distance(got[i], want) > 1 && ++bad < 5) {
        ADD_FAILURE() << c.op << "(" << xs[i] << ") = " << got[i] << ", expected " << want;
      }
    }
    EXPECT_EQ(bad, 0) << c.op;
  }
}

TEST(CpuElementwise, HalfTranscendentalsRoundOnce) {
  // exp(1) = 2.71828...: nearest f16 is 2.71875, nearest bf16 is 2.71875.
  expect_halfs<float16>(run_same("exponential", {halfs<float16>({1.0, 0.0})}), {2.71875, 1.0});
  expect_halfs<bfloat16>(run_same("exponential", {halfs<bfloat16>({1.0})}), {2.71875});
  // log(2) * 2^11 = 1419.565...: the nearest f16 is 1420 * 2^-11.
  expect_halfs<float16>(run_same("log", {halfs<float16>({2.0})}), {0.693359375});
  // sqrt(65504) = 255.93749237 is just below the f16 tie 255.9375 (and within half an f32 ULP
  // of it): correctly rounded it is 255.875.
  expect_halfs<float16>(run_same("sqrt", {halfs<float16>({2.0, 65504.0})}), {1.4140625, 255.875});
}

TEST(CpuElementwise, HalfArithmeticRoundsToNearestEven) {
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even gives 1.
  expect_halfs<bfloat16>(run_same("add", {halfs<bfloat16>({1.0, 256.0, 1.0}),
                                          halfs<bfloat16>({0.00390625, 1.0, 3 * 0.00390625})}),
                         {1.0, 256.0, 1.015625});
  // f16: 65504 + 8 rounds back to 65504; 65504 + 16 is the tie with 2^16, which rounds to
  // the even side: infinity.
  expect_halfs<float16>(
      run_same("add", {halfs<float16>({65504.0, 65504.0, 0.1}), halfs<float16>({8.0, 16.0, 0.2})}),
      {65504.0, kInfD, 0.2998046875});
  expect_halfs<float16>(
      run_same("divide", {halfs<float16>({1.0, 1.0}), halfs<float16>({3.0, 0.0})}),
      {0.333251953125, kInfD});
}

TEST(CpuElementwise, IsFinite) {
  EXPECT_EQ(bools(run_op("is_finite", {vec<float>({1.0f, kInf, -kInf, kNaN, -0.0f, 3e38f})},
                         DType::Bool)),
            (std::vector<bool>{true, false, false, false, true, true}));
  EXPECT_EQ(bools(run_op("is_finite", {halfs<float16>({65504.0, kInfD, kNaND})}, DType::Bool)),
            (std::vector<bool>{true, false, false}));
  EXPECT_EQ(bools(run_op("is_finite", {vec<double>({1e308, -kInfD})}, DType::Bool)),
            (std::vector<bool>{true, false}));
}

// ---------------------------------------------------------------------------------------------
// compare, select, clamp

TEST(CpuElementwise, CompareFloatDirections) {
  const auto a = vec<float>({1.0f, 2.0f, 3.0f, kNaN, -0.0f});
  const auto b = vec<float>({2.0f, 2.0f, 1.0f, kNaN, 0.0f});
  auto cmp = [&](const char* d) {
    return bools(run_op("compare", {a, b}, DType::Bool, {direction(d), compare_type("FLOAT")}));
  };
  using B = std::vector<bool>;
  EXPECT_EQ(cmp("EQ"), (B{false, true, false, false, true}));
  EXPECT_EQ(cmp("NE"), (B{true, false, true, true, false}));
  EXPECT_EQ(cmp("LT"), (B{true, false, false, false, false}));
  EXPECT_EQ(cmp("LE"), (B{true, true, false, false, true}));
  EXPECT_EQ(cmp("GT"), (B{false, false, true, false, false}));
  EXPECT_EQ(cmp("GE"), (B{false, true, true, false, true}));
}

TEST(CpuElementwise, CompareTotalOrder) {
  const float neg_nan = -std::numeric_limits<float>::quiet_NaN();
  // -NaN < -Inf < -1 < -0 < +0 < 1 < +Inf < +NaN
  const std::vector<float> order = {neg_nan, -kInf, -1.0f, -0.0f, 0.0f, 1.0f, kInf, kNaN};
  std::vector<float> xs, ys;
  std::vector<bool> lt, eq;
  for (size_t i = 0; i < order.size(); ++i)
    for (size_t j = 0; j < order.size(); ++j) {
      xs.push_back(order[i]);
      ys.push_back(order[j]);
      lt.push_back(i < j);
      eq.push_back(i == j);
    }
  EXPECT_EQ(bools(run_op("compare", {vec(xs), vec(ys)}, DType::Bool,
                         {direction("LT"), compare_type("TOTALORDER")})),
            lt);
  EXPECT_EQ(bools(run_op("compare", {vec(xs), vec(ys)}, DType::Bool,
                         {direction("EQ"), compare_type("TOTALORDER")})),
            eq);
  // bf16 too.
  EXPECT_EQ(bools(run_op("compare", {halfs<bfloat16>({-0.0, 1.0}), halfs<bfloat16>({0.0, 1.0})},
                         DType::Bool, {direction("GE"), compare_type("TOTALORDER")})),
            (std::vector<bool>{false, true}));
}

TEST(CpuElementwise, CompareIntegersAndBools) {
  using B = std::vector<bool>;
  EXPECT_EQ(bools(run_op("compare", {vec<uint32_t>({0xffffffffu, 1}), vec<uint32_t>({1, 1})},
                         DType::Bool, {direction("GT"), compare_type("UNSIGNED")})),
            (B{true, false}));
  EXPECT_EQ(bools(run_op("compare", {vec<int32_t>({-1, 1}), vec<int32_t>({1, 1})}, DType::Bool,
                         {direction("GT"), compare_type("SIGNED")})),
            (B{false, false}));
  // Without compare_type the element type decides.
  EXPECT_EQ(bools(run_op("compare", {vec<int8_t>({-128, 127}), vec<int8_t>({127, -128})},
                         DType::Bool, {direction("LT")})),
            (B{true, false}));
  EXPECT_EQ(bools(run_op("compare", {bool_vec({false, true, true}), bool_vec({true, true, false})},
                         DType::Bool, {direction("LT"), compare_type("UNSIGNED")})),
            (B{true, false, false}));
  EXPECT_EQ(bools(run_op("compare", {halfs<float16>({1.0, 2.0}), halfs<float16>({1.0, 1.0})},
                         DType::Bool, {direction("NE"), compare_type("FLOAT")})),
            (B{false, true}));
}

TEST(CpuElementwise, Select) {
  const auto t = vec<int32_t>({1, 2, 3});
  const auto f = vec<int32_t>({-1, -2, -3});
  expect_values<int32_t>(run_same("select", {bool_vec({true, false, true}), t, f}), {1, -2, 3});
  // A scalar pred picks a whole operand.
  auto run_sel = [&](bool p) {
    return run_op_all("select", {scalar<bool>(p), t, f}, {Type::tensor({3}, DType::I32)}).at(0);
  };
  expect_values<int32_t>(run_sel(true), {1, 2, 3});
  expect_values<int32_t>(run_sel(false), {-1, -2, -3});
  expect_halfs<bfloat16>(run_same("select", {bool_vec({false, true}), halfs<bfloat16>({1.0, 2.0}),
                                             halfs<bfloat16>({-1.0, -2.0})}),
                         {-1.0, 2.0});
  EXPECT_EQ(bools(run_same("select", {bool_vec({false, true}), bool_vec({true, true}),
                                      bool_vec({false, false})})),
            (std::vector<bool>{false, true}));
  expect_doubles(run_same("select", {bool_vec({true, false}), vec<double>({1.5, 2.5}),
                                     vec<double>({-1.5, -2.5})}),
                 {1.5, -2.5});
}

TEST(CpuElementwise, Clamp) {
  const auto x = vec<float>({-5.0f, 0.5f, 7.0f, kNaN});
  expect_floats(run_same("clamp", {scalar(0.0f), x, scalar(1.0f)}), {0.0f, 0.5f, 1.0f, kNaN});
  expect_floats(run_same("clamp", {vec<float>({-6.0f, 0.6f, 0.0f, 0.0f}), x, scalar(6.0f)}),
                {-5.0f, 0.6f, 6.0f, kNaN});
  expect_values<int8_t>(run_same("clamp", {scalar<int8_t>(-3), vec<int8_t>({-128, 0, 127}),
                                           vec<int8_t>({2, -10, 50})}),
                        {-3, -10, 50});
  expect_halfs<float16>(run_same("clamp", {scalar(float16(0.0)), halfs<float16>({-1.0, 0.25, 3.0}),
                                           scalar(float16(2.0))}),
                        {0.0, 0.25, 2.0});
}

// ---------------------------------------------------------------------------------------------
// convert

TEST(CpuElementwise, ConvertFloatToIntTruncatesAndSaturates) {
  const auto x = vec<float>({1.9f, -1.9f, 3e9f, -3e9f, kNaN, kInf, -kInf, -0.5f});
  const int32_t mx = std::numeric_limits<int32_t>::max(), mn = std::numeric_limits<int32_t>::min();
  expect_values<int32_t>(run_op("convert", {x}, DType::I32), {1, -1, mx, mn, 0, mx, mn, 0});
  expect_values<uint8_t>(
      run_op("convert", {vec<float>({-5.0f, 300.0f, 255.9f, 0.5f, kNaN})}, DType::U8),
      {0, 255, 255, 0, 0});
  // float(1e19) = 9999999980506447872 exactly.
  expect_values<uint64_t>(run_op("convert", {vec<float>({1e19f, 2e19f})}, DType::U64),
                          {9999999980506447872ull, ~uint64_t{0}});
  expect_values<int64_t>(run_op("convert", {vec<double>({-9.3e18, 9.3e18, -9.2e18})}, DType::I64),
                         {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                          -9200000000000000000ll});
  expect_values<int16_t>(
      run_op("convert", {halfs<float16>({-65504.0, 1000.5, 40000.0})}, DType::I16),
      {-32768, 1000, 32767});
}

TEST(CpuElementwise, ConvertIntegersWrapAndBools) {
  expect_values<int8_t>(run_op("convert", {vec<int32_t>({300, -129, 127, -1})}, DType::I8),
                        {44, 127, 127, -1});
  expect_values<uint32_t>(run_op("convert", {vec<int8_t>({-1, 5})}, DType::U32), {0xffffffffu, 5});
  expect_values<int64_t>(run_op("convert", {vec<uint32_t>({0xffffffffu})}, DType::I64),
                         {4294967295ll});
  EXPECT_EQ(bools(run_op("convert", {vec<int32_t>({0, 5, -1, 256})}, DType::Bool)),
            (std::vector<bool>{false, true, true, true}));
  EXPECT_EQ(bools(run_op("convert", {vec<float>({0.0f, -0.0f, 0.1f, kNaN})}, DType::Bool)),
            (std::vector<bool>{false, false, true, true}));
  expect_floats(run_op("convert", {bool_vec({true, false})}, DType::F32), {1.0f, 0.0f});
  expect_values<uint8_t>(run_op("convert", {bool_vec({true, false})}, DType::U8), {1, 0});
}

TEST(CpuElementwise, ConvertFloatsRoundOnce) {
  // 1 + 2^-11 + 2^-40: through f32 it would become the tie 1 + 2^-11 and round to 1.0 in f16;
  // rounded directly it is above the tie, so 1 + 2^-10.
  const HostTensor h = run_op(
      "convert", {vec<double>({1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)})}, DType::F16);
  EXPECT_EQ(h.data_as<float16>()[0].bits, 0x3c01);
  // 2^60 + 2^52 + 1 as i64 to bf16: just above the tie between 2^60 and 2^60 + 2^53.
  const HostTensor b =
      run_op("convert", {vec<int64_t>({(int64_t{1} << 60) + (int64_t{1} << 52) + 1})}, DType::BF16);
  EXPECT_EQ(b.data_as<bfloat16>()[0].bits, 0x5d81);
  expect_floats(run_op("convert", {vec<uint64_t>({~uint64_t{0}, 16777217})}, DType::F32),
                {18446744073709551616.0f, 16777216.0f});
  expect_halfs<float16>(run_op("convert", {vec<float>({70000.0f, 1e-8f, -2.5f})}, DType::F16),
                        {kInfD, 0.0, -2.5});
  expect_floats(run_op("convert", {halfs<float16>({65504.0, -0.0, kNaND})}, DType::F32),
                {65504.0f, -0.0f, kNaN});
  expect_halfs<bfloat16>(run_op("convert", {halfs<float16>({1.0009765625})}, DType::BF16), {1.0});
  expect_doubles(run_op("convert", {vec<float>({0.1f})}, DType::F64), {static_cast<double>(0.1f)});
  expect_floats(run_op("convert", {vec<double>({0.1, 1e300})}, DType::F32), {0.1f, kInf});
  expect_halfs<float16>(run_op("convert", {vec<int32_t>({2049, -70000})}, DType::F16),
                        {2048.0, -kInfD});
}

TEST(CpuElementwise, ConvertEveryPairCompilesAndRoundTripsSmallValues) {
  const DType all[] = {DType::Bool, DType::I8,  DType::I16, DType::I32, DType::I64,
                       DType::U8,   DType::U16, DType::U32, DType::U64, DType::F16,
                       DType::BF16, DType::F32, DType::F64};
  for (DType from : all) {
    const HostTensor src = run_op("convert", {vec<int32_t>({0, 1, 1, 0})}, from);
    for (DType to : all) {
      const HostTensor r = run_op("convert", {src}, to);
      const HostTensor back = run_op("convert", {r}, DType::I32);
      EXPECT_EQ(back.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 0}))
          << mlir_name(from) << " -> " << mlir_name(to);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// bitcast_convert and reduce_precision

TEST(CpuElementwise, BitcastConvert) {
  expect_values<int32_t>(run_op("bitcast_convert", {vec<float>({1.0f, -2.0f})}, DType::I32),
                         {0x3f800000, static_cast<int32_t>(0xc0000000u)});
  expect_values<uint64_t>(run_op("bitcast_convert", {vec<int64_t>({-1})}, DType::U64),
                          {~uint64_t{0}});
  // Wider to narrower: a new minor dimension, least significant byte first.
  const HostTensor bytes =
      run_op_all("bitcast_convert", {vec<float>({1.0f, 0.5f})}, {Type::tensor({2, 4}, DType::U8)})
          .at(0);
  EXPECT_EQ(bytes.shape(), (Shape{2, 4}));
  expect_values<uint8_t>(bytes, {0, 0, 0x80, 0x3f, 0, 0, 0, 0x3f});
  const HostTensor joined =
      run_op_all("bitcast_convert", {vec<uint8_t>({0x34, 0x12, 0xcd, 0xab}, {2, 2})},
                 {Type::tensor({2}, DType::U16)})
          .at(0);
  expect_values<uint16_t>(joined, {0x1234, 0xabcd});
  const HostTensor scalar_split = run_op_all("bitcast_convert", {scalar<uint32_t>(0x01020304u)},
                                             {Type::tensor({2}, DType::BF16)})
                                      .at(0);
  EXPECT_EQ(scalar_split.data_as<bfloat16>()[0].bits, 0x0304);
  EXPECT_EQ(scalar_split.data_as<bfloat16>()[1].bits, 0x0102);
}

TEST(CpuElementwise, ReducePrecision) {
  auto rp = [](HostTensor x, int e, int m) {
    return run_same("reduce_precision", {std::move(x)},
                    {{"exponent_bits", ir::Attribute::integer_attr(e, DType::I32)},
                     {"mantissa_bits", ir::Attribute::integer_attr(m, DType::I32)}});
  };
  // To f16's format: 1/3 -> 0.333251953125 (1365 * 2^-12), overflow to inf, below f16's normal
  // range to zero, NaN kept.
  expect_floats(
      rp(vec<float>({1.0f / 3, 70000.0f, -70000.0f, 1e-5f, kNaN, -kInf, 65504.0f}), 5, 10),
      {0.333251953125f, kInf, -kInf, 0.0f, kNaN, -kInf, 65504.0f});
  // To bf16's format: ties to even.
  expect_floats(rp(vec<float>({1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 1.0f + 1.5f / 256}), 8, 7),
                {1.0f, 1.0f + 1.0f / 64, 1.0f + 1.0f / 128});
  // More bits than the type has: unchanged.
  expect_doubles(rp(vec<double>({0.1, -kInfD}), 11, 52), {0.1, -kInfD});
  expect_halfs<float16>(rp(halfs<float16>({0.1, 6e-8}), 11, 52), {float16(0.1), float16(6e-8)});
  // No mantissa bits: NaN becomes infinity; ties go to the even exponent: 1.5 (between 2^0 and
  // 2^1) to 2, 3 (between 2^1 and 2^2) to 2; 1.25 to 1.
  expect_floats(rp(vec<float>({kNaN, 1.5f, 1.25f, 3.0f}), 8, 0), {kInf, 2.0f, 1.0f, 2.0f});
}

// ---------------------------------------------------------------------------------------------
// Shapes: rank 0, empty, large

TEST(CpuElementwise, RankZeroAndEmpty) {
  const HostTensor s = run_same("add", {scalar(2.0f), scalar(3.5f)});
  EXPECT_EQ(s.shape(), Shape{});
  expect_floats(s, {5.5f});
  const HostTensor empty(DType::F32, {0, 3});
  const HostTensor e = run_same("multiply", {empty, empty});
  EXPECT_EQ(e.shape(), (Shape{0, 3}));
  EXPECT_EQ(e.size(), 0);
  EXPECT_EQ(run_op("convert", {empty}, DType::I8).size(), 0);
  EXPECT_EQ(run_same("exponential", {empty}).size(), 0);
  EXPECT_EQ(run_op("compare", {empty, empty}, DType::Bool, {direction("LT")}).shape(),
            (Shape{0, 3}));
  const HostTensor pe(DType::Bool, {0, 3});
  EXPECT_EQ(run_same("select", {pe, empty, empty}).size(), 0);
}

TEST(CpuElementwise, LargeInputsRunInParallel) {
  const int64_t n = (int64_t{1} << 20) + 37;
  std::vector<float> a(n), b(n);
  std::vector<int32_t> ia(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 1000) * 0.5f;
    b[i] = static_cast<float>(i % 7);
    ia[i] = static_cast<int32_t>(i);
  }
  const HostTensor sum = run_same("add", {vec(a), vec(b)});
  const HostTensor e = run_same("exponential", {vec(b)});
  const HostTensor sh = run_same("shift_left", {vec(ia), vec(ia)});
  const float* ps = sum.data_as<float>();
  const float* pe = e.data_as<float>();
  const int32_t* psh = sh.data_as<int32_t>();
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (ps[i] != a[i] + b[i]) ++bad;
    if (pe[i] != static_cast<float>(expl(static_cast<long double>(b[i])))) ++bad;
    const uint32_t s = static_cast<uint32_t>(i);
    const int32_t want = s >= 32 ? 0 : static_cast<int32_t>(static_cast<uint32_t>(i) << s);
    if (psh[i] != want) ++bad;
  }
  EXPECT_EQ(bad, 0);
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(CpuElementwise, UnsupportedCombinationsFailAtCompileTime) {
  EXPECT_THROW(run_same("sine", {vec<int32_t>({1})}), UnsupportedError);
  EXPECT_THROW(run_same("shift_left", {vec<float>({1.0f}), vec<float>({1.0f})}), UnsupportedError);
  EXPECT_THROW(run_same("subtract", {bool_vec({true}), bool_vec({true})}), UnsupportedError);
  EXPECT_THROW(run_same("add", {vec<float>({1.0f}), vec<double>({1.0})}), UnsupportedError);
  EXPECT_THROW(run_same("add", {vec<float>({1.0f, 2.0f}), scalar(1.0f)}), UnsupportedError);
  EXPECT_THROW(run_op("compare", {vec<int32_t>({1}), vec<int32_t>({1})}, DType::Bool,
                      {direction("LT"), compare_type("TOTALORDER")}),
               UnsupportedError);
  EXPECT_THROW(run_op("compare", {vec<int32_t>({1}), vec<int32_t>({1})}, DType::Bool),
               UnsupportedError);
  EXPECT_THROW(run_same("reduce_precision", {vec<float>({1.0f})}), UnsupportedError);
  EXPECT_THROW(run_op("bitcast_convert", {vec<float>({1.0f})}, DType::I16), UnsupportedError);
  EXPECT_THROW(run_op("popcnt", {vec<float>({1.0f})}, DType::F32), UnsupportedError);
}

TEST(CpuElementwise, WrongRuntimeInputIsARuntimeError) {
  ir::Module m;
  ir::Function& f = m.add_function("main");
  const Type t = Type::tensor({2}, DType::F32);
  ir::Value* a = f.entry().add_argument(t);
  ir::Value* r = f.entry().push_back(ir::make_op("stablehlo.exponential", {a}, {t}))->result(0);
  f.entry().push_back(ir::make_op("func.return", {r}, {}));
  f.result_types = {t};
  auto exe = runtime::get_backend("cpu").compile(m);
  const std::vector<HostTensor> wrong = {vec<float>({1.0f, 2.0f, 3.0f})};
  try {
    exe->execute_on_host(wrong);
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("stablehlo.exponential"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// The shared functors directly (what a CUDA kernel would call).

TEST(ElementwiseFunctors, ConvertAndTotalOrderKeys) {
  EXPECT_EQ((ew::convert<int8_t>(200.0f)), 127);
  EXPECT_EQ((ew::convert<uint16_t>(-1.0)), 0);
  EXPECT_EQ((ew::convert<int32_t>(float16(-3.75))), -3);
  EXPECT_EQ((ew::convert<bool>(bfloat16(0.0))), false);
  EXPECT_EQ((ew::convert<float16>(int64_t{65519})).bits, 0x7bff);  // below the tie: 65504
  EXPECT_EQ((ew::convert<float16>(int64_t{65520})).bits, 0x7c00);  // the tie rounds to inf
  EXPECT_LT(ew::total_order_key(-0.0), ew::total_order_key(0.0));
  EXPECT_LT(ew::total_order_key(-kInfD), ew::total_order_key(-1e308));
  EXPECT_LT(ew::total_order_key(kInfD), ew::total_order_key(kNaND));
  EXPECT_EQ(ew::clz64(0), 64);
  EXPECT_EQ(ew::clz64(1), 63);
  EXPECT_EQ(ew::popcount64(0xf0f0), 8);
}

}  // namespace
}  // namespace cujax
