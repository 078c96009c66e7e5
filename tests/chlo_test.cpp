// The chlo dialect: parsing, the decomposition into StableHLO, values against references
// computed another way (long double libm, series, direct sums, 128-bit products, plain loops),
// and the lax / scipy.special functions with their gradients against finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "compiler/chlo_decompose.h"
#include "cujax/core/error.h"
#include "cujax/grad.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "cujax/ir/verifier.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/numpy.h"
#include "cujax/runtime/backend.h"
#include "cujax/special.h"
#include "cujax/vmap.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using LD = long double;

std::string type_of(DType t, const Shape& shape) {
  std::string s = "tensor<";
  for (int64_t d : shape) s += std::to_string(d) + "x";
  return s + std::string(mlir_name(t)) + ">";
}

// Parses `body` as the function main(args) -> results and runs it on the cpu backend.
std::vector<HostTensor> run(const std::string& args, const std::string& results,
                            const std::string& body, const std::vector<HostTensor>& inputs) {
  const std::string text = "module @m {\n  func.func public @main(" + args + ") -> (" + results +
                           ") {\n" + body + "\n  }\n}\n";
  auto module = ir::parse_module(text);
  ir::verify(*module);
  auto exe = runtime::get_backend("cpu").compile(*module, "main");
  return exe->execute_on_host(inputs);
}

// One chlo op applied to one vector.
template <class T>
std::vector<T> run_unary(const std::string& op, const std::vector<T>& x) {
  const std::string t = type_of(dtype_of<T>(), {static_cast<int64_t>(x.size())});
  auto out = run("%arg0: " + t, t,
                 "    %0 = " + op + " %arg0 : " + t + " -> " + t + "\n    return %0 : " + t,
                 {HostTensor::from_vector(x, {static_cast<int64_t>(x.size())})});
  return out.at(0).template to_vector<T>();
}

template <class T>
std::vector<T> run_binary(const std::string& op, const std::vector<T>& x, const std::vector<T>& y) {
  const Shape s = {static_cast<int64_t>(x.size())};
  const std::string t = type_of(dtype_of<T>(), s);
  auto out = run(
      "%arg0: " + t + ", %arg1: " + t, t,
      "    %0 = " + op + " %arg0, %arg1 : " + t + ", " + t + " -> " + t + "\n    return %0 : " + t,
      {HostTensor::from_vector(x, s), HostTensor::from_vector(y, s)});
  return out.at(0).template to_vector<T>();
}

// ---------------------------------------------------------------- references

// digamma: the recurrence up to x >= 12, then the asymptotic series; reflection below 0.5.
LD digamma_ref(LD x) {
  if (x < 0.5L)
    return digamma_ref(1 - x) - std::numbers::pi_v<LD> / std::tan(std::numbers::pi_v<LD> * x);
  LD acc = 0;
  while (x < 12) {
    acc -= 1 / x;
    x += 1;
  }
  const LD x2 = 1 / (x * x);
  const LD series =
      x2 * (1.0L / 12 - x2 * (1.0L / 120 - x2 * (1.0L / 252 - x2 * (1.0L / 240 - x2 / 132))));
  return acc + std::log(x) - 1 / (2 * x) - series;
}

// Hurwitz zeta by a direct sum of 20000 terms and the integral and half-term corrections.
LD zeta_ref(LD s, LD q) {
  const int n = 20000;
  LD sum = 0;
  for (int k = n - 1; k >= 0; --k) sum += std::pow(q + k, -s);
  const LD a = q + n;
  return sum + std::pow(a, 1 - s) / (s - 1) + std::pow(a, -s) / 2 + s * std::pow(a, -s - 1) / 12;
}

// exp(-|x|) I1(x) by its power series.
LD i1e_ref(LD x) {
  const LD h = x / 2;
  LD term = h, sum = h;
  for (int k = 1; k < 200; ++k) {
    term *= h * h / (static_cast<LD>(k) * (k + 1));
    sum += term;
  }
  return sum * std::exp(-std::fabs(x));
}

LD i0e_ref(LD x) {
  const LD h2 = x * x / 4;
  LD term = 1, sum = 1;
  for (int k = 1; k < 200; ++k) {
    term *= h2 / (static_cast<LD>(k) * k);
    sum += term;
  }
  return sum * std::exp(-std::fabs(x));
}

// erf_inv by Newton's method on erfl.
LD erf_inv_ref(LD y) {
  LD x = 0;
  for (int i = 0; i < 100; ++i) {
    const LD step = (std::erf(x) - y) / (2 / std::sqrt(std::numbers::pi_v<LD>) * std::exp(-x * x));
    x -= step;
    if (std::fabs(step) < 1e-19L * std::max<LD>(1, std::fabs(x))) break;
  }
  return x;
}

struct Case {
  const char* op;
  std::function<LD(LD)> ref;
  double lo, hi;
  double atol64, rtol64, atol32, rtol32;
};

std::vector<double> grid(double lo, double hi, int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * (i + 0.5) / n);
  return v;
}

template <class T>
void check_case(const Case& c, double atol, double rtol) {
  std::vector<T> x;
  for (double v : grid(c.lo, c.hi, 97)) x.push_back(static_cast<T>(v));
  const std::vector<T> got = run_unary<T>(c.op, x);
  for (size_t i = 0; i < x.size(); ++i) {
    const LD want = c.ref(static_cast<LD>(x[i]));
    EXPECT_NEAR(static_cast<double>(got[i]), static_cast<double>(want),
                atol + rtol * std::fabs(static_cast<double>(want)))
        << c.op << "(" << x[i] << ") as " << mlir_name(dtype_of<T>());
  }
}

TEST(Chlo, UnaryOpsMatchReferences) {
  const LD pi = std::numbers::pi_v<LD>;
  const std::vector<Case> cases = {
      {"chlo.erf", [](LD x) { return std::erf(x); }, -5, 5, 1e-15, 1e-14, 1e-6, 1e-6},
      {"chlo.erfc", [](LD x) { return std::erfc(x); }, -3, 8, 1e-300, 1e-13, 1e-30, 1e-5},
      {"chlo.erf_inv", erf_inv_ref, -0.999, 0.999, 1e-15, 1e-14, 1e-6, 1e-6},
      {"chlo.lgamma", [](LD x) { return std::lgamma(x); }, -9.7, 30, 1e-13, 1e-13, 1e-5, 1e-5},
      {"chlo.digamma", digamma_ref, -9.7, 30, 1e-12, 1e-12, 1e-4, 1e-5},
      {"chlo.bessel_i1e", i1e_ref, -20, 20, 1e-15, 1e-13, 1e-7, 1e-5},
      {"chlo.tan", [](LD x) { return std::tan(x); }, -1.5, 1.5, 0, 1e-14, 0, 1e-6},
      {"chlo.sinh", [](LD x) { return std::sinh(x); }, -20, 20, 0, 1e-14, 0, 1e-6},
      {"chlo.cosh", [](LD x) { return std::cosh(x); }, -20, 20, 0, 1e-14, 0, 1e-6},
      {"chlo.asin", [](LD x) { return std::asin(x); }, -1, 1, 0, 1e-14, 0, 1e-6},
      {"chlo.acos", [](LD x) { return std::acos(x); }, -1, 1, 1e-15, 1e-14, 1e-7, 1e-6},
      {"chlo.atan", [](LD x) { return std::atan(x); }, -30, 30, 0, 1e-14, 0, 1e-6},
      {"chlo.asinh", [](LD x) { return std::asinh(x); }, -30, 30, 0, 1e-14, 0, 1e-6},
      {"chlo.acosh", [](LD x) { return std::acosh(x); }, 1, 40, 1e-15, 1e-14, 1e-6, 1e-6},
      {"chlo.atanh", [](LD x) { return std::atanh(x); }, -0.99, 0.99, 0, 1e-14, 0, 1e-6},
  };
  (void)pi;
  for (const Case& c : cases) {
    check_case<double>(c, c.atol64, c.rtol64);
    check_case<float>(c, c.atol32, c.rtol32);
  }
}

TEST(Chlo, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto lg = run_unary<double>("chlo.lgamma", {1.0, 2.0, inf, -inf, 0.0, -3.0});
  EXPECT_NEAR(lg[0], 0.0, 1e-15);
  EXPECT_NEAR(lg[1], 0.0, 1e-15);
  EXPECT_EQ(lg[2], inf);
  EXPECT_EQ(lg[3], inf);
  EXPECT_EQ(lg[4], inf);  // poles
  EXPECT_EQ(lg[5], inf);
  const auto dg = run_unary<double>("chlo.digamma", {0.0, -2.0, 1.0});
  EXPECT_TRUE(std::isnan(dg[0]));
  EXPECT_TRUE(std::isnan(dg[1]));
  EXPECT_NEAR(dg[2], -0.57721566490153286, 1e-14);  // -Euler's gamma
  const auto ei = run_unary<double>("chlo.erf_inv", {1.0, -1.0, 0.0, 1.5});
  EXPECT_EQ(ei[0], inf);
  EXPECT_EQ(ei[1], -inf);
  EXPECT_EQ(ei[2], 0.0);
  EXPECT_TRUE(std::isnan(ei[3]));
  const auto ac = run_unary<double>("chlo.acosh", {0.5, -2.0, 1e300});
  EXPECT_TRUE(std::isnan(ac[0]));
  EXPECT_TRUE(std::isnan(ac[1]));
  EXPECT_NEAR(ac[2], static_cast<double>(std::acosh(1e300L)), 1e-12);
  const auto as = run_unary<float>("chlo.asinh", {-1e30f, 1e-30f});
  EXPECT_NEAR(as[0], static_cast<float>(std::asinh(-1e30L)), 1e-4);
  EXPECT_EQ(as[1], 1e-30f);
}

TEST(Chlo, HalfTypesAreComputedInF32AndRoundedOnce) {
  // f16 lgamma at x: the f32 result rounded to f16 is within one f16 ULP of the true value.
  const std::vector<float16> x = {float16(0.3), float16(2.5), float16(7.25), float16(-1.5)};
  const std::string t = "tensor<4xf16>";
  auto out = run("%arg0: " + t, t,
                 "    %0 = chlo.lgamma %arg0 : " + t + " -> " + t + "\n    return %0 : " + t,
                 {HostTensor::from_vector(x, {4})});
  const auto got = out[0].to_vector<float16>();
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = static_cast<double>(std::lgamma(static_cast<LD>(float(x[i]))));
    EXPECT_NEAR(float(got[i]), want, std::fabs(want) * 1e-3 + 1e-3) << float(x[i]);
  }
}

TEST(Chlo, NextAfterMatchesStd) {
  const double inf = std::numeric_limits<double>::infinity();
  const double tiny = std::numeric_limits<double>::denorm_min();
  const std::vector<double> x = {0.0, -0.0, 1.0, 1.0, -1.0, tiny, inf, 2.0, 3.0, -0.0, 1.0};
  const std::vector<double> y = {1.0, -1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 2.0, inf, 0.0, NAN};
  const auto got = run_binary<double>("chlo.next_after", x, y);
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    const double want = std::nextafter(x[i], y[i]);
    EXPECT_EQ(std::bit_cast<uint64_t>(got[i]), std::bit_cast<uint64_t>(want))
        << "nextafter(" << x[i] << ", " << y[i] << ") = " << got[i] << ", want " << want;
  }
  EXPECT_TRUE(std::isnan(got.back()));
  const std::vector<float> xf = {0.0f, 1.0f, -1.0f, 3.5f};
  const std::vector<float> yf = {-1.0f, 0.0f, -2.0f, 3.5f};
  const auto gf = run_binary<float>("chlo.next_after", xf, yf);
  for (size_t i = 0; i < xf.size(); ++i) EXPECT_EQ(gf[i], std::nextafter(xf[i], yf[i]));
}

TEST(Chlo, ZetaAndPolygammaMatchSums) {
  std::vector<double> s = {2, 3, 4.5, 2, 7, 1.5}, q = {1, 0.5, 2.25, 10, 0.75, 3};
  const auto z = run_binary<double>("chlo.zeta", s, q);
  for (size_t i = 0; i < s.size(); ++i)
    EXPECT_NEAR(z[i], static_cast<double>(zeta_ref(s[i], q[i])), 1e-12 * std::fabs(z[i]))
        << "zeta(" << s[i] << ", " << q[i] << ")";
  EXPECT_NEAR(z[0], std::numbers::pi * std::numbers::pi / 6, 1e-14);
  const auto bad = run_binary<double>("chlo.zeta", {1.0, 0.5, 2.5}, {1.0, 1.0, -1.5});
  EXPECT_EQ(bad[0], std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(bad[1]));  // x < 1
  EXPECT_TRUE(std::isnan(bad[2]));  // q < 0 with x not an integer
  // polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x); n = 0 is digamma.
  const std::vector<double> n = {0, 1, 2, 3, 1.5}, x = {2.5, 1, 0.5, 4, 1};
  const auto pg = run_binary<double>("chlo.polygamma", n, x);
  EXPECT_NEAR(pg[0], static_cast<double>(digamma_ref(2.5L)), 1e-13);
  EXPECT_NEAR(pg[1], std::numbers::pi * std::numbers::pi / 6, 1e-13);
  EXPECT_NEAR(pg[2], static_cast<double>(-2 * zeta_ref(3, 0.5L)), 1e-12);
  EXPECT_NEAR(pg[3], static_cast<double>(6 * zeta_ref(4, 4)), 1e-13);
  EXPECT_TRUE(std::isnan(pg[4]));
}

template <class T>
void check_mulhi(const std::vector<T>& a, const std::vector<T>& b) {
  const auto got = run_binary<T>("chlo.mulhi", a, b);
  for (size_t i = 0; i < a.size(); ++i) {
    T want;
    if constexpr (std::is_signed_v<T>) {
      want = static_cast<T>((static_cast<__int128>(a[i]) * b[i]) >> (8 * sizeof(T)));
    } else {
      want = static_cast<T>((static_cast<unsigned __int128>(a[i]) * b[i]) >> (8 * sizeof(T)));
    }
    EXPECT_EQ(got[i], want) << +a[i] << " * " << +b[i];
  }
}

TEST(Chlo, MulhiMatches128BitProducts) {
  check_mulhi<int8_t>({-128, 127, -3, 100}, {-128, 127, 5, -100});
  check_mulhi<uint8_t>({255, 240, 3}, {255, 16, 5});
  check_mulhi<int16_t>({16384, -16384, -32768}, {8, 8, -32768});
  check_mulhi<uint32_t>({0xffffffffu, 123456789u}, {0xffffffffu, 987654321u});
  check_mulhi<int32_t>({-2147483647 - 1, 123456789}, {-2147483647 - 1, -987654321});
  check_mulhi<int64_t>({INT64_MIN, INT64_MAX, -1, 1152921504606846976LL, -7, -123456789012345LL},
                       {INT64_MIN, INT64_MAX, -1, 16, 3, 987654321098LL});
  check_mulhi<uint64_t>({UINT64_MAX, 17293822569102704640ull, 0x123456789abcdefull},
                        {UINT64_MAX, 16, 0xfedcba987654321ull});
}

TEST(Chlo, TopKSortsDescendingInTotalOrderStably) {
  const std::vector<float> x = {3, NAN, 1, 3, -INFINITY, 7, -0.0f, 0.0f, 3, -NAN};
  const std::string t = "tensor<2x5xf32>";
  auto out = run("%arg0: " + t, "tensor<2x3xf32>, tensor<2x3xi32>",
                 "    %0:2 = chlo.top_k(%arg0, k = 3) : " + t +
                     " -> (tensor<2x3xf32>, tensor<2x3xi32>)\n"
                     "    return %0#0, %0#1 : tensor<2x3xf32>, tensor<2x3xi32>",
                 {HostTensor::from_vector(x, {2, 5})});
  const auto idx = out[1].to_vector<int32_t>();
  // Reference: a stable sort of indices by the total order, descending (NaN > inf > ... > -NaN).
  auto key = [](float v) {
    const int32_t b = std::bit_cast<int32_t>(v);
    return b < 0 ? ~(b & 0x7fffffff) : b;
  };
  for (int row = 0; row < 2; ++row) {
    std::vector<int32_t> order = {0, 1, 2, 3, 4};
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return key(x[row * 5 + a]) > key(x[row * 5 + b]);
    });
    for (int j = 0; j < 3; ++j) EXPECT_EQ(idx[row * 3 + j], order[j]) << "row " << row;
  }
  const auto vals = out[0].to_vector<float>();
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(vals[i]), std::bit_cast<uint32_t>(x[(i / 3) * 5 + idx[i]]));
}

TEST(Chlo, ScanCarriesAndCollectsOutputs) {
  // Running sum along dimension 1 of a 2x4 matrix, and the product as the carried value.
  auto out = run("%arg0: tensor<2x4xf32>, %arg1: tensor<2xf32>", "tensor<2x4xf32>, tensor<2xf32>",
                 "    %0:2 = chlo.scan(%arg0) inits(%arg1) dimension=1 {\n"
                 "    ^bb0(%x: tensor<2xf32>, %c: tensor<2xf32>):\n"
                 "      %s = stablehlo.add %x, %c : tensor<2xf32>\n"
                 "      stablehlo.return %s, %s : tensor<2xf32>, tensor<2xf32>\n"
                 "    } : (tensor<2x4xf32>, tensor<2xf32>) -> (tensor<2x4xf32>, tensor<2xf32>)\n"
                 "    return %0#0, %0#1 : tensor<2x4xf32>, tensor<2xf32>",
                 {HostTensor::from_vector(std::vector<float>{1, 2, 3, 4, 10, 20, 30, 40}, {2, 4}),
                  HostTensor::from_vector(std::vector<float>{100, 0}, {2})});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{101, 103, 106, 110, 10, 30, 60, 100}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{110, 100}));
}

TEST(Chlo, RaggedDotMultipliesEachRowGroupByItsMatrix) {
  const int m = 6, k = 3, n = 4, g = 3;
  std::vector<float> lhs(m * k), rhs(g * k * n);
  for (size_t i = 0; i < lhs.size(); ++i) lhs[i] = static_cast<float>((i * 7) % 5) - 2;
  for (size_t i = 0; i < rhs.size(); ++i) rhs[i] = static_cast<float>((i * 3) % 7) - 3;
  const std::vector<int32_t> sizes = {2, 0, 3};  // row 5 is in no group: zeros
  auto out = run(
      "%arg0: tensor<6x3xf32>, %arg1: tensor<3x3x4xf32>, %arg2: tensor<3xi32>", "tensor<6x4xf32>",
      "    %0 = \"chlo.ragged_dot\"(%arg0, %arg1, %arg2) {ragged_dot_dimension_numbers = "
      "#chlo.ragged_dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], "
      "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1], "
      "lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>} : (tensor<6x3xf32>, "
      "tensor<3x3x4xf32>, tensor<3xi32>) -> tensor<6x4xf32>\n"
      "    return %0 : tensor<6x4xf32>",
      {HostTensor::from_vector(lhs, {m, k}), HostTensor::from_vector(rhs, {g, k, n}),
       HostTensor::from_vector(sizes, {g})});
  const auto got = out[0].to_vector<float>();
  int row = 0;
  std::vector<int> group_of(m, -1);
  for (int gi = 0; gi < g; ++gi)
    for (int r = 0; r < sizes[gi]; ++r) group_of[row++] = gi;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float want = 0;
      if (group_of[i] >= 0)
        for (int c = 0; c < k; ++c) want += lhs[i * k + c] * rhs[(group_of[i] * k + c) * n + j];
      EXPECT_EQ(got[i * n + j], want) << i << "," << j;
    }
}

TEST(Chlo, RaggedDotAttributeRoundTrips) {
  const std::string text =
      "module @m {\n  func.func public @main(%arg0: tensor<2x11x5xf32>, %arg1: "
      "tensor<3x2x5x7xf32>, "
      "%arg2: tensor<3xi64>) -> tensor<2x11x7xf32> {\n"
      "    %0 = \"chlo.ragged_dot\"(%arg0, %arg1, %arg2) {ragged_dot_dimension_numbers = "
      "#chlo.ragged_dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [1], "
      "lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [2], "
      "lhs_ragged_dimensions = [1], rhs_group_dimensions = [0]>} : (tensor<2x11x5xf32>, "
      "tensor<3x2x5x7xf32>, tensor<3xi64>) -> tensor<2x11x7xf32>\n"
      "    return %0 : tensor<2x11x7xf32>\n  }\n}\n";
  auto m = ir::parse_module(text);
  const std::string printed = ir::print_module(*m);
  EXPECT_EQ(ir::print_module(*ir::parse_module(printed)), printed);
  EXPECT_NE(printed.find("#chlo.ragged_dot<lhs_batching_dimensions = [0]"), std::string::npos)
      << printed;
  // With a batch dimension: row r of batch b uses rhs[group(r), b].
  std::vector<float> lhs(2 * 11 * 5), rhs(3 * 2 * 5 * 7);
  for (size_t i = 0; i < lhs.size(); ++i) lhs[i] = static_cast<float>((i * 5) % 9) - 4;
  for (size_t i = 0; i < rhs.size(); ++i) rhs[i] = static_cast<float>((i * 7) % 11) - 5;
  const std::vector<int64_t> sizes = {4, 5, 2};
  auto exe = runtime::get_backend("cpu").compile(*m, "main");
  const std::vector<HostTensor> in = {HostTensor::from_vector(lhs, {2, 11, 5}),
                                      HostTensor::from_vector(rhs, {3, 2, 5, 7}),
                                      HostTensor::from_vector(sizes, {3})};
  const auto got = exe->execute_on_host(in)[0].to_vector<float>();
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < 11; ++r) {
      const int g = r < 4 ? 0 : r < 9 ? 1 : 2;
      for (int j = 0; j < 7; ++j) {
        float want = 0;
        for (int c = 0; c < 5; ++c)
          want += lhs[(b * 11 + r) * 5 + c] * rhs[((g * 2 + b) * 5 + c) * 7 + j];
        EXPECT_EQ(got[(b * 11 + r) * 7 + j], want) << b << "," << r << "," << j;
      }
    }
}

TEST(Chlo, DecompositionLeavesOnlyStableHlo) {
  auto module = ir::parse_module(
      "module @m {\n  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n"
      "    %0 = chlo.lgamma %arg0 : tensor<3xf32> -> tensor<3xf32>\n"
      "    %1 = chlo.erf_inv %0 : tensor<3xf32> -> tensor<3xf32>\n"
      "    return %1 : tensor<3xf32>\n  }\n}\n");
  EXPECT_TRUE(compiler::has_chlo(*module));
  auto lowered = compiler::decompose_chlo(*module);
  EXPECT_FALSE(compiler::has_chlo(*lowered));
  ir::verify(*lowered);
  const std::string text = ir::print_module(*lowered);
  EXPECT_EQ(text.find("chlo."), std::string::npos);
  EXPECT_NE(text.find("stablehlo.log_plus_one"), std::string::npos);
}

TEST(Chlo, UnknownOpsAndTypesAreReported) {
  auto unknown = ir::parse_module(
      "module @m {\n  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n"
      "    %0 = chlo.frobnicate %arg0 : tensor<3xf32> -> tensor<3xf32>\n"
      "    return %0 : tensor<3xf32>\n  }\n}\n");
  try {
    runtime::get_backend("cpu").compile(*unknown, "main");
    FAIL() << "expected UnsupportedError";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("chlo.frobnicate"), std::string::npos) << e.what();
  }
  auto integer = ir::parse_module(
      "module @m {\n  func.func public @main(%arg0: tensor<3xi32>) -> tensor<3xi32> {\n"
      "    %0 = chlo.lgamma %arg0 : tensor<3xi32> -> tensor<3xi32>\n"
      "    return %0 : tensor<3xi32>\n  }\n}\n");
  EXPECT_THROW(runtime::get_backend("cpu").compile(*integer, "main"), UnsupportedError);
}

// ---------------------------------------------------------------- lax, numpy, scipy.special

Array f64(const std::vector<double>& v) {
  return array(HostTensor::from_vector(v, {static_cast<int64_t>(v.size())}));
}

// d/dx sum(f(x)) at every x against central differences.
void check_grad(const std::function<Array(const Array&)>& f, const std::vector<double>& x,
                double tol = 1e-6) {
  auto total = [f](const Array& a) { return jnp::sum(f(a)); };
  const std::vector<double> g = grad(total)(f64(x)).to_vector<double>();
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    const double fd = (total(f64(xp)).item<double>() - total(f64(xm)).item<double>()) / (2 * h);
    EXPECT_NEAR(g[i], fd, tol * std::max(1.0, std::fabs(fd))) << "at x = " << x[i];
  }
}

TEST(ChloApi, LaxFunctionsEmitChloAndMatchReferences) {
  const std::vector<double> x = {0.25, 1.5, 3.75, -2.5};
  const auto lg = lax::lgamma(f64(x)).to_vector<double>();
  const auto dg = lax::digamma(f64(x)).to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(lg[i], static_cast<double>(std::lgamma(static_cast<LD>(x[i]))), 1e-13);
    EXPECT_NEAR(dg[i], static_cast<double>(digamma_ref(x[i])), 1e-12);
  }
  const auto i1 = lax::bessel_i1e(f64({-3, 0.5, 12})).to_vector<double>();
  EXPECT_NEAR(i1[0], static_cast<double>(i1e_ref(-3)), 1e-15);
  EXPECT_NEAR(i1[2], static_cast<double>(i1e_ref(12)), 1e-15);
  EXPECT_EQ(lax::nextafter(f64({1.0}), f64({2.0})).item<double>(), std::nextafter(1.0, 2.0));
  auto f = jit([](const Array& a) { return lax::lgamma(a); });
  const std::string text = f.lower(ShapeDtype{{4}, DType::F32}).as_text();
  EXPECT_NE(text.find("chlo.lgamma %arg0 : tensor<4xf32> -> tensor<4xf32>"), std::string::npos)
      << text;
  EXPECT_NEAR(f(jnp::array({2.5}, Shape{1}, DType::F32)).item<float>(),
              static_cast<float>(std::lgamma(2.5L)), 1e-6);
  EXPECT_THROW(lax::lgamma(jnp::array({1, 2})), Error);  // integers: lax does not promote
}

TEST(ChloApi, ScipySpecialPromotesAndBroadcasts) {
  const Array g = scipy::special::gammaln(jnp::array({1, 2, 3, 4}));
  EXPECT_EQ(g.dtype(), DType::F32);
  const auto v = g.to_vector<float>();
  EXPECT_NEAR(v[3], std::log(6.0f), 1e-6);
  const Array z = scipy::special::zeta(jnp::array({2.0, 3.0}), 1.0);
  EXPECT_NEAR(z.to_vector<float>()[0], std::numbers::pi * std::numbers::pi / 6, 1e-5);
  const Array p = scipy::special::polygamma(1, jnp::array({1.0}));
  EXPECT_NEAR(p.to_vector<float>()[0], std::numbers::pi * std::numbers::pi / 6, 1e-5);
  EXPECT_NEAR(scipy::special::erfinv(jnp::array({0.5})).to_vector<float>()[0],
              static_cast<float>(erf_inv_ref(0.5L)), 1e-6);
  for (double v : {-9.0, 0.5, 3.0, 20.0})
    EXPECT_NEAR(lax::bessel_i0e(f64({v})).item<double>(), static_cast<double>(i0e_ref(v)), 1e-15);
  EXPECT_NEAR(scipy::special::i1e(jnp::array({1.0})).to_vector<float>()[0],
              static_cast<float>(i1e_ref(1)), 1e-6);
  const Array n = jnp::nextafter(jnp::array({1.0f}), 2);
  EXPECT_EQ(n.to_vector<float>()[0], std::nextafter(1.0f, 2.0f));
}

TEST(ChloApi, GradientsMatchFiniteDifferences) {
  const std::vector<double> x = {0.3, 1.25, 2.5, 6.0, -1.5};
  check_grad(lax::lgamma, x);
  check_grad(lax::digamma, x, 1e-5);
  check_grad([](const Array& a) { return lax::polygamma(lax::full_like(a, 2.0), a); },
             {0.5, 1.5, 4.0}, 1e-5);
  check_grad([](const Array& a) { return lax::zeta(lax::full_like(a, 3.0), a); }, {0.5, 1.5, 4.0},
             1e-5);
  check_grad(lax::bessel_i1e, {-7.5, -0.3, 0.0, 0.8, 3.0, 12.0});
  // The lax functions that are chlo ops in the IR.
  check_grad(lax::erf, {-2.0, -0.3, 0.0, 1.1});
  check_grad(lax::erfc, {-2.0, -0.3, 0.0, 1.1, 4.0});
  check_grad(lax::erf_inv, {-0.95, -0.3, 0.0, 0.6});
  check_grad(lax::asin, {-0.9, 0.0, 0.4});
  check_grad(lax::acos, {-0.9, 0.0, 0.4});
  check_grad(lax::atan, {-5.0, 0.0, 0.4});
  check_grad(lax::sinh, {-3.0, 0.2, 2.0});
  check_grad(lax::cosh, {-3.0, 0.2, 2.0});
  check_grad(lax::asinh, {-30.0, -0.5, 0.0, 2.0});
  check_grad(lax::acosh, {1.5, 3.0, 40.0});
  check_grad(lax::atanh, {-0.9, 0.0, 0.5});
  // Second order: d2/dx2 lgamma = polygamma(1, x).
  auto d1 = grad([](const Array& a) { return jnp::sum(lax::lgamma(a)); });
  auto d2 = grad([&](const Array& a) { return jnp::sum(d1(a)); });
  EXPECT_NEAR(d2(f64({1.0})).item<double>(), std::numbers::pi * std::numbers::pi / 6, 1e-10);
}

TEST(ChloApi, VmapOfSpecialFunctions) {
  auto f = vmap([](const Array& a, const Array& b) { return lax::zeta(a, b); });
  const Array xs = array(HostTensor::from_vector(std::vector<double>{2, 2, 3, 3}, {2, 2}));
  const Array qs = array(HostTensor::from_vector(std::vector<double>{1, 2, 1, 2}, {2, 2}));
  const auto z = f(xs, qs).to_vector<double>();
  EXPECT_NEAR(z[0], std::numbers::pi * std::numbers::pi / 6, 1e-13);
  EXPECT_NEAR(z[1], std::numbers::pi * std::numbers::pi / 6 - 1, 1e-13);
  EXPECT_NEAR(z[2], static_cast<double>(zeta_ref(3, 1)), 1e-13);
}

}  // namespace
}  // namespace cujax
