// complex64/complex128: dtype names, parsing and printing complex literals, .npy round trips,
// and the CPU kernels against std::complex in long double, a naive DFT in long double and NumPy.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backends/common/complex_math.h"
#include "cujax/core/dtype.h"
#include "cujax/core/error.h"
#include "cujax/core/host_tensor.h"
#include "cujax/core/npy.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

using C64 = std::complex<float>;
using C128 = std::complex<double>;
using CL = std::complex<long double>;

std::vector<HostTensor> run(const std::string& text, const std::vector<HostTensor>& inputs) {
  auto module = ir::parse_module(text);
  auto exe = runtime::get_backend("cpu").compile(*module, "main");
  return exe->execute_on_host(inputs);
}

template <class C>
HostTensor tensor_of(const std::vector<C>& v, Shape shape) {
  return HostTensor::from_bytes(
      dtype_of<C>(), std::move(shape),
      {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(C)});
}

// Distance in units of the last place of the part type, per part.
template <class R>
double ulps(R got, long double want) {
  if (std::isnan(got) && std::isnan(static_cast<double>(want))) return 0;
  const long double scale = std::max<long double>(
      std::numeric_limits<R>::min(), std::fabs(want) * std::numeric_limits<R>::epsilon());
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / scale);
}

TEST(ComplexDType, NamesAndSizes) {
  EXPECT_EQ(size_of(DType::C64), 8u);
  EXPECT_EQ(size_of(DType::C128), 16u);
  EXPECT_EQ(mlir_name(DType::C64), "complex<f32>");
  EXPECT_EQ(numpy_name(DType::C128), "complex128");
  EXPECT_EQ(dtype_from_mlir_name("complex<f64>"), DType::C128);
  EXPECT_EQ(dtype_from_numpy_name("complex64"), DType::C64);
  EXPECT_EQ(complex_component(DType::C64), DType::F32);
  EXPECT_EQ(to_complex(DType::F64), DType::C128);
  EXPECT_EQ(to_complex(DType::F32), DType::C64);
  EXPECT_EQ(to_complex(DType::BF16), DType::C64);
  EXPECT_TRUE(is_complex(DType::C128));
  EXPECT_FALSE(is_float(DType::C64));
  EXPECT_THROW(visit_dtype(DType::C64, [](auto) {}), UnsupportedError);
}

TEST(ComplexParse, LiteralsRoundTrip) {
  const std::string text = R"(
func.func @main() -> (tensor<2xcomplex<f32>>, tensor<complex<f64>>, tensor<2xcomplex<f32>>) {
  %0 = stablehlo.constant dense<[(1.5,-2.0), (0x7FC00000,3.0)]> : tensor<2xcomplex<f32>>
  %1 = stablehlo.constant dense<(0xFFF0000000000000,0.000000e+00)> : tensor<complex<f64>>
  %2 = stablehlo.constant dense<"0x0000803F000000400000404000008040"> : tensor<2xcomplex<f32>>
  return %0, %1, %2 : tensor<2xcomplex<f32>>, tensor<complex<f64>>, tensor<2xcomplex<f32>>
}
)";
  auto m = ir::parse_module(text);
  const std::string printed = ir::print_module(*m);
  EXPECT_NE(printed.find("complex<f32>"), std::string::npos);
  EXPECT_EQ(ir::print_module(*ir::parse_module(printed)), printed);
  auto out = run(text, {});
  const auto a = out[0].to_vector<C64>();
  EXPECT_EQ(a[0], C64(1.5f, -2.0f));
  EXPECT_TRUE(std::isnan(a[1].real()));
  EXPECT_EQ(a[1].imag(), 3.0f);
  const auto b = out[1].to_vector<C128>();
  EXPECT_EQ(b[0].real(), -INFINITY);
  const auto c = out[2].to_vector<C64>();
  EXPECT_EQ(c[0], C64(1, 2));
  EXPECT_EQ(c[1], C64(3, 4));
  EXPECT_THROW(ir::parse_module("func.func @main() -> tensor<complex<f32>> {\n"
                                "  %0 = stablehlo.constant dense<(1.0)> : tensor<complex<f32>>\n"
                                "  return %0 : tensor<complex<f32>>\n}\n"),
               ParseError);
}

TEST(ComplexNpy, RoundTripAndDescr) {
  EXPECT_EQ(npy_descr(DType::C64), "<c8");
  EXPECT_EQ(npy_descr(DType::C128), "<c16");
  const auto path = std::filesystem::temp_directory_path() / "cujax_complex_test.npy";
  const std::vector<C128> v = {{1, -2}, {0.25, 1e300}, {-0.0, 3}};
  save_npy(path.string(), tensor_of(v, {3}));
  const HostTensor back = load_npy(path.string());
  EXPECT_EQ(back.dtype(), DType::C128);
  EXPECT_EQ(back.to_vector<C128>(), v);
  std::filesystem::remove(path);
}

// Each unary op on a spread of values, against std::complex<long double>.
TEST(ComplexKernels, UnaryAgainstLongDouble) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-4, 4);
  std::vector<C64> xs;
  for (int i = 0; i < 200; ++i)
    xs.emplace_back(static_cast<float>(u(rng)), static_cast<float>(u(rng)));
  xs.emplace_back(1e-5f, -2e-6f);  // where expm1/log1p cancel
  std::vector<C128> xd(xs.begin(), xs.end());
  struct Case {
    const char* op;
    CL (*ref)(CL);
  };
  const Case cases[] = {
      {"exponential", [](CL z) { return std::exp(z); }},
      {"log", [](CL z) { return std::log(z); }},
      {"sqrt", [](CL z) { return std::sqrt(z); }},
      {"rsqrt", [](CL z) { return CL(1) / std::sqrt(z); }},
      {"sine", [](CL z) { return std::sin(z); }},
      {"cosine", [](CL z) { return std::cos(z); }},
      {"tan", [](CL z) { return std::tan(z); }},
      {"tanh", [](CL z) { return std::tanh(z); }},
      {"sign", [](CL z) { return z / std::abs(z); }},
      // exp(z) - 1 and log(1 + z) with enough extra precision in long double for these inputs.
      {"exponential_minus_one", [](CL z) { return std::exp(z) - CL(1); }},
      {"log_plus_one", [](CL z) { return std::log(CL(1) + z); }},
  };
  for (const Case& c : cases) {
    for (const char* t : {"complex<f32>", "complex<f64>"}) {
      const std::string ty = std::string("tensor<201x") + t + ">";
      const std::string text = "func.func @main(%a: " + ty + ") -> " + ty +
                               " {\n  %0 = stablehlo." + c.op + " %a : " + ty +
                               "\n  return %0 : " + ty + "\n}\n";
      const bool f32 = std::string(t) == "complex<f32>";
      auto out = run(text, {f32 ? tensor_of(xs, {201}) : tensor_of(xd, {201})});
      for (size_t i = 0; i < xs.size(); ++i) {
        const CL want = c.ref(CL(xd[i].real(), xd[i].imag()));
        // The long double reference of expm1/log1p near 0 is itself only ~1e-14 relative.
        const double tol = (!f32 && i == 200) ? 1e6 : 3;
        if (f32) {
          const C64 got = out[0].to_vector<C64>()[i];
          EXPECT_LE(ulps(got.real(), want.real()), tol) << c.op << " " << t << " at " << xs[i];
          EXPECT_LE(ulps(got.imag(), want.imag()), tol) << c.op << " " << t << " at " << xs[i];
        } else {
          const C128 got = out[0].to_vector<C128>()[i];
          EXPECT_LE(ulps(got.real(), want.real()), tol) << c.op << " " << t << " at " << xd[i];
          EXPECT_LE(ulps(got.imag(), want.imag()), tol) << c.op << " " << t << " at " << xd[i];
        }
      }
    }
  }
}

TEST(ComplexKernels, ArithmeticPartsCompareConvert) {
  const std::vector<C64> a = {{1, 2}, {-3, 0.5f}, {0, 0}};
  const std::vector<C64> b = {{2, -1}, {-3, 0.5f}, {4, 1}};
  const std::string ty = "tensor<3xcomplex<f32>>";
  const std::string text = R"(
func.func @main(%a: tensor<3xcomplex<f32>>, %b: tensor<3xcomplex<f32>>)
    -> (tensor<3xcomplex<f32>>, tensor<3xcomplex<f32>>, tensor<3xi1>, tensor<3xf32>,
        tensor<3xf32>, tensor<3xf32>, tensor<3xcomplex<f32>>, tensor<3xcomplex<f64>>,
        tensor<3xf32>) {
  %0 = stablehlo.multiply %a, %b : tensor<3xcomplex<f32>>
  %1 = stablehlo.divide %a, %b : tensor<3xcomplex<f32>>
  %2 = stablehlo.compare EQ, %a, %b : (tensor<3xcomplex<f32>>, tensor<3xcomplex<f32>>) -> tensor<3xi1>
  %3 = stablehlo.real %a : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
  %4 = stablehlo.imag %a : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
  %5 = stablehlo.abs %a : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
  %6 = stablehlo.complex %4, %3 : tensor<3xcomplex<f32>>
  %7 = stablehlo.convert %a : (tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f64>>
  %8 = stablehlo.convert %a : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<3xcomplex<f32>>, tensor<3xcomplex<f32>>,
      tensor<3xi1>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xcomplex<f32>>,
      tensor<3xcomplex<f64>>, tensor<3xf32>
}
)";
  auto out = run(text, {tensor_of(a, {3}), tensor_of(b, {3})});
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[0].to_vector<C64>()[i], a[i] * b[i]);
    const C64 q = out[1].to_vector<C64>()[i];
    EXPECT_NEAR(q.real(), (a[i] / b[i]).real(), 1e-6);
    EXPECT_NEAR(q.imag(), (a[i] / b[i]).imag(), 1e-6);
    EXPECT_EQ(out[2].to_vector<bool>()[i], a[i] == b[i]);
    EXPECT_EQ(out[3].to_vector<float>()[i], a[i].real());
    EXPECT_EQ(out[4].to_vector<float>()[i], a[i].imag());
    EXPECT_FLOAT_EQ(out[5].to_vector<float>()[i], std::abs(a[i]));
    EXPECT_EQ(out[6].to_vector<C64>()[i], C64(a[i].imag(), a[i].real()));
    EXPECT_EQ(out[7].to_vector<C128>()[i], C128(a[i]));
    EXPECT_EQ(out[8].to_vector<float>()[i], a[i].real());
  }
}

// The cuda backend's complex formulas (backends/common/complex_math.h, run here on the host)
// against the CPU backend over a wide range of magnitudes: complex64 products and magnitudes
// bit for bit and quotients within an ULP of |q| (both compute in double); complex128 products
// within 2 ULPs per part, quotients within 4 ULPs of |q| and magnitudes within an ULP of the
// CPU's long double results.
template <class R>
void check_device_complex_math(std::mt19937& rng) {
  using C = std::complex<R>;
  const int n = 20000;
  std::uniform_real_distribution<double> u(-3, 3);
  std::uniform_int_distribution<int> e(-20, 20);
  auto draw = [&]() {
    R re = static_cast<R>(std::ldexp(u(rng), e(rng))),
      im = static_cast<R>(std::ldexp(u(rng), e(rng)));
    if (rng() % 17 == 0) re = 0;
    if (rng() % 19 == 0) im = 0;
    return C(re, im);
  };
  std::vector<C> a(n), b(n);
  for (int i = 0; i < n; ++i) a[i] = draw(), b[i] = draw();
  b[0] = C(0, 0);  // a zero divisor (draw() makes a few more): infinities
  const std::string c = std::string("tensor<") + std::to_string(n) + "xcomplex<" +
                        (sizeof(R) == 4 ? "f32" : "f64") + ">>";
  const std::string r =
      std::string("tensor<") + std::to_string(n) + "x" + (sizeof(R) == 4 ? "f32" : "f64") + ">";
  const std::string text = "func.func @main(%a: " + c + ", %b: " + c + ") -> (" + c + ", " + c +
                           ", " + r + ") {\n  %0 = stablehlo.multiply %a, %b : " + c +
                           "\n  %1 = stablehlo.divide %a, %b : " + c +
                           "\n  %2 = stablehlo.abs %a : (" + c + ") -> " + r +
                           "\n  return %0, %1, %2 : " + c + ", " + c + ", " + r + "\n}\n";
  auto out = run(text, {tensor_of(a, {n}), tensor_of(b, {n})});
  const auto prod = out[0].template to_vector<C>(), quot = out[1].template to_vector<C>();
  const auto mag = out[2].template to_vector<R>();
  const R eps = std::numeric_limits<R>::epsilon();
  int bad = 0;
  for (int i = 0; i < n && bad < 5; ++i) {
    const cplx::Parts x{a[i].real(), a[i].imag()}, y{b[i].real(), b[i].imag()};
    const cplx::Parts p = cplx::multiply(x, y), q = cplx::divide(x, y);
    const R pr = static_cast<R>(p.re), pi = static_cast<R>(p.im);
    const R qr = static_cast<R>(q.re), qi = static_cast<R>(q.im);
    const R m = static_cast<R>(cplx::magnitude(x));
    const double qscale = std::abs(quot[i]) * eps;
    const R tol = sizeof(R) == 4 ? 1 : 4;  // quotients, in ULPs of |q|
    bool ok = b[i] == C(0, 0) ? std::isinf(qr) == std::isinf(quot[i].real()) &&
                                    std::isinf(qi) == std::isinf(quot[i].imag())
                              : std::fabs(qr - quot[i].real()) <= tol * qscale &&
                                    std::fabs(qi - quot[i].imag()) <= tol * qscale;
    if (sizeof(R) == 4)  // bit for bit, signs of zeros included
      ok = ok && std::signbit(pr) == std::signbit(prod[i].real()) &&
           std::signbit(pi) == std::signbit(prod[i].imag()) && pr == prod[i].real() &&
           pi == prod[i].imag() && m == mag[i];
    else
      ok = ok && ulps(pr, prod[i].real()) <= 2 && ulps(pi, prod[i].imag()) <= 2 &&
           ulps(m, mag[i]) <= 1;
    if (!ok) {
      ++bad;
      ADD_FAILURE() << "a = " << a[i] << ", b = " << b[i] << ": device formulas give (" << pr << ","
                    << pi << "), (" << qr << "," << qi << "), " << m << "; the CPU " << prod[i]
                    << ", " << quot[i] << ", " << mag[i];
    }
  }
}

TEST(ComplexDeviceMath, MatchesTheCpuBackend) {
  std::mt19937 rng(11);
  check_device_complex_math<float>(rng);
  check_device_complex_math<double>(rng);
}

// expm1, log1p and sign come from complex_math.h on both backends: for complex64 both compute
// them in double (so UnaryAgainstLongDouble, through the CPU, checks the device's too); for
// complex128 the CPU computes in long double and the device in double, checked here on the host
// against std::complex<long double>, with series near 0 where exp(z) - 1 and log(1 + z) cancel.
TEST(ComplexDeviceMath, SharedFormulasInDoubleForComplex128) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> u(-3, 3);
  std::uniform_int_distribution<int> e(-30, 2);
  auto expm1_ref = [](CL z) {
    if (std::abs(z) >= 0.5L) return std::exp(z) - CL(1);
    CL sum = 0, term = 1;
    for (int k = 1; k < 40; ++k) sum += term *= z / static_cast<long double>(k);
    return sum;
  };
  auto log1p_ref = [](CL z) {
    if (std::abs(z) >= 0.5L) return std::log(CL(1) + z);
    CL sum = 0, power = 1;
    for (int k = 1; k < 100; ++k) sum += (power *= -z) / static_cast<long double>(-k);
    return sum;
  };
  using P = cplx::Parts;
  auto close = [](P got, CL want) {  // within 4 ULPs of |want| per part
    const long double tol = 4 * std::abs(want) * std::numeric_limits<double>::epsilon();
    return std::fabs(got.re - want.real()) <= tol && std::fabs(got.im - want.imag()) <= tol;
  };
  int bad = 0;
  for (int i = 0; i < 20000 && bad < 5; ++i) {
    const P z{std::ldexp(u(rng), e(rng)), i % 7 == 0 ? 0.0 : std::ldexp(u(rng), e(rng))};
    const CL w(z.re, z.im);
    if (!close(cplx::expm1(z), expm1_ref(w)) || !close(cplx::log1p(z), log1p_ref(w)) ||
        !close(cplx::sign(z), w / std::abs(w))) {
      ++bad;
      ADD_FAILURE() << "z = (" << z.re << ", " << z.im << "): expm1 (" << cplx::expm1(z).re << ", "
                    << cplx::expm1(z).im << "), log1p (" << cplx::log1p(z).re << ", "
                    << cplx::log1p(z).im << ")";
    }
  }
  // sign's special values: zero keeps its signs, infinite parts give their direction, NaN NaN.
  const P zero = cplx::sign(P{-0.0, 0.0});
  EXPECT_TRUE(zero.re == 0 && std::signbit(zero.re) && zero.im == 0 && !std::signbit(zero.im));
  const P inf = cplx::sign(P{-INFINITY, INFINITY});
  EXPECT_DOUBLE_EQ(inf.re, -std::sqrt(0.5));
  EXPECT_DOUBLE_EQ(inf.im, std::sqrt(0.5));
  const P one_inf = cplx::sign(P{2.0, -INFINITY});
  EXPECT_TRUE(one_inf.re == 0 && one_inf.im == -1);
  EXPECT_TRUE(std::isnan(cplx::sign(P{NAN, 1.0}).re) && std::isnan(cplx::sign(P{1.0, NAN}).im));
}

// The cuda backend's complex dot_general sums cplx::accumulate_product terms in order in the
// operand type: on finite values, the CPU backend's std::complex sums bit for bit.
template <class R>
void check_device_complex_dot(std::mt19937& rng) {
  using C = std::complex<R>;
  const int64_t m = 7, k = 45, n = 5;  // a [m, k] x [k, n] product
  std::uniform_real_distribution<double> u(-3, 3);
  std::uniform_int_distribution<int> e(-12, 12);
  auto draw = [&]() {
    return C(static_cast<R>(std::ldexp(u(rng), e(rng))),
             static_cast<R>(std::ldexp(u(rng), e(rng))));
  };
  std::vector<C> a(m * k), b(k * n);
  for (C& x : a) x = draw();
  for (C& x : b) x = draw();
  const std::string part = sizeof(R) == 4 ? "f32" : "f64";
  auto type = [&](int64_t r, int64_t c) {
    return "tensor<" + std::to_string(r) + "x" + std::to_string(c) + "xcomplex<" + part + ">>";
  };
  const auto out = run("func.func @main(%a: " + type(m, k) + ", %b: " + type(k, n) + ") -> " +
                           type(m, n) + " {\n  %0 = stablehlo.dot_general %a, %b, " +
                           "contracting_dims = [1] x [0] : (" + type(m, k) + ", " + type(k, n) +
                           ") -> " + type(m, n) + "\n  return %0 : " + type(m, n) + "\n}\n",
                       {tensor_of(a, {m, k}), tensor_of(b, {k, n})})[0]
                       .template to_vector<C>();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      R re = 0, im = 0;
      for (int64_t p = 0; p < k; ++p) {
        const C x = a[i * k + p], y = b[p * n + j];
        cplx::accumulate_product(re, im, x.real(), x.imag(), y.real(), y.imag());
      }
      EXPECT_EQ(re, out[i * n + j].real()) << i << "," << j;
      EXPECT_EQ(im, out[i * n + j].imag()) << i << "," << j;
    }
}

TEST(ComplexDeviceMath, DotSumsAsTheCpuBackend) {
  std::mt19937 rng(12);
  check_device_complex_dot<float>(rng);
  check_device_complex_dot<double>(rng);
}

// maximum/minimum order by (real, imaginary); cbrt is the principal cube root; atan2(y, x) is
// an angle whose tangent is y / x and, on real values, the real atan2.
TEST(ComplexKernels, OrderCbrtAtan2) {
  const std::vector<C128> a = {{1.5, 2.5}, {1.5, 7.5}, {0.0, 1.5}, {-8, 0}, {3, 4}, {1, 0}};
  const std::vector<C128> b = {{7.5, 1.5}, {1.5, 2.5}, {-0.0, 2.5}, {2, 0}, {-1, 2}, {-1, 0}};
  const std::string text = R"(
func.func @main(%a: tensor<6xcomplex<f64>>, %b: tensor<6xcomplex<f64>>)
    -> (tensor<6xcomplex<f64>>, tensor<6xcomplex<f64>>, tensor<6xcomplex<f64>>,
        tensor<6xcomplex<f64>>) {
  %0 = stablehlo.maximum %a, %b : tensor<6xcomplex<f64>>
  %1 = stablehlo.minimum %a, %b : tensor<6xcomplex<f64>>
  %2 = stablehlo.cbrt %a : tensor<6xcomplex<f64>>
  %3 = stablehlo.atan2 %a, %b : tensor<6xcomplex<f64>>
  return %0, %1, %2, %3 : tensor<6xcomplex<f64>>, tensor<6xcomplex<f64>>,
      tensor<6xcomplex<f64>>, tensor<6xcomplex<f64>>
}
)";
  auto out = run(text, {tensor_of(a, {6}), tensor_of(b, {6})});
  const auto mx = out[0].to_vector<C128>(), mn = out[1].to_vector<C128>();
  const auto cb = out[2].to_vector<C128>(), at = out[3].to_vector<C128>();
  for (size_t i = 0; i < a.size(); ++i) {
    const bool a_first =
        std::make_pair(a[i].real(), a[i].imag()) >= std::make_pair(b[i].real(), b[i].imag());
    EXPECT_EQ(mx[i], a_first ? a[i] : b[i]) << i;
    EXPECT_EQ(mn[i], a_first ? b[i] : a[i]) << i;
    const C128 cube = cb[i] * cb[i] * cb[i];
    EXPECT_NEAR(cube.real(), a[i].real(), 1e-12 * std::abs(a[i])) << i;
    EXPECT_NEAR(cube.imag(), a[i].imag(), 1e-12 * std::abs(a[i])) << i;
    EXPECT_GT(std::arg(cb[i]), -M_PI / 3 - 1e-12) << i;  // the principal root
    EXPECT_LE(std::arg(cb[i]), M_PI / 3 + 1e-12) << i;
    const C128 ratio = std::tan(at[i]);
    EXPECT_NEAR(std::abs(ratio - a[i] / b[i]), 0, 1e-12 * std::abs(a[i] / b[i])) << i;
  }
  EXPECT_NEAR(cb[3].real(), 1.0, 1e-15);  // cbrt(-8) = 2 e^(i pi/3), not -2
  EXPECT_NEAR(at[3].real(), std::atan2(-8.0, 2.0), 1e-15);
  EXPECT_NEAR(at[5].real(), std::atan2(1.0, -1.0), 1e-15);
}

TEST(ComplexKernels, IotaCountsInTheRealPart) {
  auto out = run(R"(
func.func @main() -> tensor<2x3xcomplex<f32>> {
  %0 = stablehlo.iota dim = 1 : tensor<2x3xcomplex<f32>>
  return %0 : tensor<2x3xcomplex<f32>>
}
)",
                 {});
  const auto v = out[0].to_vector<C64>();
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], C64(static_cast<float>(i % 3), 0)) << i;
}

// scatter on complex values (JAX's x.at[i].set and .at[i].add): rows assigned in update order
// (the last of repeated indices wins) and summed, against a loop over the updates.
TEST(ComplexKernels, ScatterAssignsAndAdds) {
  const std::vector<int32_t> rows = {4, 1, 4, 0, 2, 1};
  std::vector<C128> base(5 * 2), upd(6 * 2);
  for (size_t i = 0; i < base.size(); ++i) base[i] = C128(0.5 * i, -1.0 * i);
  for (size_t i = 0; i < upd.size(); ++i) upd[i] = C128(10.0 + i, 3.0 - 0.25 * i);
  for (const char* part : {"f32", "f64"})
    for (const bool adds : {false, true}) {
      const std::string e = std::string("tensor<complex<") + part + ">>";
      const std::string c = std::string("tensor<5x2xcomplex<") + part + ">>";
      const std::string u = std::string("tensor<6x2xcomplex<") + part + ">>";
      const std::string body =
          adds ? "    %s = stablehlo.add %x, %y : " + e + "\n    stablehlo.return %s : " + e + "\n"
               : "    stablehlo.return %y : " + e + "\n";
      const std::string text =
          "func.func @main(%a: " + c + ", %i: tensor<6x1xi32>, %v: " + u + ") -> " + c +
          " {\n  %0 = \"stablehlo.scatter\"(%a, %i, %v) ({\n  ^bb0(%x: " + e + ", %y: " + e +
          "):\n" + body +
          "  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
          "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = "
          "1>} : (" +
          c + ", tensor<6x1xi32>, " + u + ") -> " + c + "\n  return %0 : " + c + "\n}\n";
      std::vector<C128> want = base;
      for (size_t k = 0; k < rows.size(); ++k)
        for (int j = 0; j < 2; ++j) {
          C128& w = want[rows[k] * 2 + j];
          w = adds ? w + upd[k * 2 + j] : upd[k * 2 + j];
        }
      const HostTensor idx = HostTensor::from_vector(rows, {6, 1});
      SCOPED_TRACE(std::string(part) + (adds ? " add" : " assign"));
      if (std::string(part) == "f64") {
        const auto out = run(text, {tensor_of(base, {5, 2}), idx, tensor_of(upd, {6, 2})});
        EXPECT_EQ(out[0].to_vector<C128>(), want);
      } else {
        auto narrow = [](const std::vector<C128>& v) {
          return std::vector<C64>(v.begin(), v.end());
        };
        const auto out =
            run(text, {tensor_of(narrow(base), {5, 2}), idx, tensor_of(narrow(upd), {6, 2})});
        EXPECT_EQ(out[0].to_vector<C64>(), narrow(want));
      }
    }
}

TEST(ComplexKernels, DotGeneralAndReduce) {
  std::mt19937 rng(3);
  std::normal_distribution<double> g;
  std::vector<C128> a(2 * 3 * 4), b(2 * 4 * 5);
  for (auto& x : a) x = {g(rng), g(rng)};
  for (auto& x : b) x = {g(rng), g(rng)};
  const std::string text = R"(
func.func @main(%a: tensor<2x3x4xcomplex<f64>>, %b: tensor<2x4x5xcomplex<f64>>)
    -> (tensor<2x3x5xcomplex<f64>>, tensor<2x4xcomplex<f64>>) {
  %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x3x4xcomplex<f64>>, tensor<2x4x5xcomplex<f64>>) -> tensor<2x3x5xcomplex<f64>>
  %z = stablehlo.constant dense<(0.0,0.0)> : tensor<complex<f64>>
  %1 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : (tensor<2x3x4xcomplex<f64>>, tensor<complex<f64>>) -> tensor<2x4xcomplex<f64>>
  return %0, %1 : tensor<2x3x5xcomplex<f64>>, tensor<2x4xcomplex<f64>>
}
)";
  auto out = run(text, {tensor_of(a, {2, 3, 4}), tensor_of(b, {2, 4, 5})});
  const auto d = out[0].to_vector<C128>();
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        CL want = 0;
        for (int k = 0; k < 4; ++k) want += CL(a[(n * 3 + i) * 4 + k]) * CL(b[(n * 4 + k) * 5 + j]);
        const C128 got = d[(n * 3 + i) * 5 + j];
        EXPECT_NEAR(got.real(), static_cast<double>(want.real()), 1e-13);
        EXPECT_NEAR(got.imag(), static_cast<double>(want.imag()), 1e-13);
      }
  const auto s = out[1].to_vector<C128>();
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 4; ++k) {
      C128 want = 0;
      for (int i = 0; i < 3; ++i) want += a[(n * 3 + i) * 4 + k];
      EXPECT_NEAR(std::abs(s[n * 4 + k] - want), 0, 1e-14);
    }
}

// triangular_solve for every side, triangle, transpose_a and unit_diagonal: the solution
// multiplied back by op(a) (its triangle, conjugated for ADJOINT) gives b.
TEST(ComplexKernels, TriangularSolveMultipliesBack) {
  std::mt19937 rng(5);
  std::normal_distribution<double> g;
  const int n = 4, m = 3;
  std::vector<C128> a(2 * n * n);
  for (auto& x : a) x = {g(rng), g(rng)};
  for (int q = 0; q < 2; ++q)
    for (int i = 0; i < n; ++i) a[(q * n + i) * n + i] += C128(4, 1);  // well conditioned
  for (bool left : {true, false})
    for (bool lower : {true, false})
      for (const char* tr : {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"})
        for (bool unit : {false, true}) {
          const int rows = left ? n : m, cols = left ? m : n;
          std::vector<C128> b(2 * rows * cols);
          for (auto& x : b) x = {g(rng), g(rng)};
          const std::string bt =
              "tensor<2x" + std::to_string(rows) + "x" + std::to_string(cols) + "xcomplex<f64>>";
          const std::string text =
              "func.func @main(%a: tensor<2x4x4xcomplex<f64>>, %b: " + bt + ") -> " + bt +
              " {\n  %0 = \"stablehlo.triangular_solve\"(%a, %b) {left_side = " +
              (left ? "true" : "false") + ", lower = " + (lower ? "true" : "false") +
              ", unit_diagonal = " + (unit ? "true" : "false") +
              ", transpose_a = #stablehlo<transpose " + tr + ">} : (tensor<2x4x4xcomplex<f64>>, " +
              bt + ") -> " + bt + "\n  return %0 : " + bt + "\n}\n";
          const auto x = run(text, {tensor_of(a, {2, n, n}), tensor_of(b, {2, rows, cols})})[0]
                             .to_vector<C128>();
          const std::string t = tr;
          for (int q = 0; q < 2; ++q) {
            auto op_a = [&](int i, int j) {
              const int r = t == "NO_TRANSPOSE" ? i : j, c = t == "NO_TRANSPOSE" ? j : i;
              if (r == c && unit) return CL(1);
              if (lower ? c > r : c < r) return CL(0);
              const CL v(a[(q * n + r) * n + c]);
              return t == "ADJOINT" ? std::conj(v) : v;
            };
            for (int i = 0; i < rows; ++i)
              for (int j = 0; j < cols; ++j) {
                CL got = 0;
                for (int k = 0; k < n; ++k)
                  got += left ? op_a(i, k) * CL(x[(q * rows + k) * cols + j])
                              : CL(x[(q * rows + i) * cols + k]) * op_a(k, j);
                const C128 want = b[(q * rows + i) * cols + j];
                EXPECT_NEAR(static_cast<double>(got.real()), want.real(), 1e-12)
                    << left << lower << t << unit;
                EXPECT_NEAR(static_cast<double>(got.imag()), want.imag(), 1e-12)
                    << left << lower << t << unit;
              }
          }
        }
}

// The DFT of x along its last axis, computed naively in long double.
std::vector<CL> naive_dft(const std::vector<CL>& x, int64_t n, bool inverse) {
  std::vector<CL> y(x.size());
  const long double pi = 3.141592653589793238462643383279502884L;
  for (size_t row = 0; row < x.size() / n; ++row)
    for (int64_t k = 0; k < n; ++k) {
      CL acc = 0;
      for (int64_t j = 0; j < n; ++j) {
        const long double ang = (inverse ? 2 : -2) * pi * static_cast<long double>(j * k % n) / n;
        acc += x[row * n + j] * CL(std::cos(ang), std::sin(ang));
      }
      y[row * n + k] = inverse ? acc / static_cast<long double>(n) : acc;
    }
  return y;
}

TEST(ComplexFft, OneDimAgainstNaiveDft) {
  std::mt19937 rng(11);
  std::normal_distribution<double> g;
  for (int64_t n : {1, 7, 16, 17, 30}) {
    std::vector<C128> x(3 * n);
    for (auto& v : x) v = {g(rng), g(rng)};
    std::vector<CL> xl(x.begin(), x.end());
    for (const char* type : {"FFT", "IFFT"}) {
      const std::string ty = "tensor<3x" + std::to_string(n) + "xcomplex<f64>>";
      const std::string text = "func.func @main(%a: " + ty + ") -> " + ty +
                               " {\n  %0 = stablehlo.fft %a, type = " + type + ", length = [" +
                               std::to_string(n) + "] : (" + ty + ") -> " + ty +
                               "\n  return %0 : " + ty + "\n}\n";
      const auto got = run(text, {tensor_of(x, {3, n})})[0].to_vector<C128>();
      const auto want = naive_dft(xl, n, std::string(type) == "IFFT");
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_NEAR(got[i].real(), static_cast<double>(want[i].real()), 1e-12) << type << n;
        EXPECT_NEAR(got[i].imag(), static_cast<double>(want[i].imag()), 1e-12) << type << n;
      }
    }
  }
}

// A python3 that has NumPy ("" if none): `python3` first, then Debian's.
std::string numpy_python() {
  for (const char* py : {"python3", "/usr/bin/python3"}) {
    const std::string probe = std::string(py) + " -c \"import numpy\" 2>/dev/null";
    if (std::system(probe.c_str()) == 0) return py;
  }
  return "";
}

// RFFT then IRFFT over two axes gives the input back; RFFT matches numpy.fft.rfft2.
TEST(ComplexFft, RealTwoDimAgainstNumpy) {
  std::vector<float> x(4 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * static_cast<float>(i)) + 0.1f * i;
  const std::string text = R"(
func.func @main(%a: tensor<4x6xf32>) -> (tensor<4x4xcomplex<f32>>, tensor<4x6xf32>) {
  %0 = stablehlo.fft %a, type = RFFT, length = [4, 6] : (tensor<4x6xf32>) -> tensor<4x4xcomplex<f32>>
  %1 = stablehlo.fft %0, type = IRFFT, length = [4, 6] : (tensor<4x4xcomplex<f32>>) -> tensor<4x6xf32>
  return %0, %1 : tensor<4x4xcomplex<f32>>, tensor<4x6xf32>
}
)";
  HostTensor in = HostTensor::from_bytes(
      DType::F32, {4, 6}, {reinterpret_cast<const std::byte*>(x.data()), x.size() * 4});
  auto out = run(text, {in});
  const auto back = out[1].to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], 1e-5);

  const auto dir = std::filesystem::temp_directory_path();
  const std::string in_path = (dir / "cujax_complex_rfft_in.npy").string();
  const std::string out_path = (dir / "cujax_complex_rfft_out.npy").string();
  save_npy(in_path, in);
  const std::string py = numpy_python();
  if (py.empty()) GTEST_SKIP() << "python3 with numpy is not available";
  const std::string cmd = py + " -c \"import numpy as np; np.save('" + out_path +
                          "', np.fft.rfft2(np.load('" + in_path + "').astype(np.float64)))\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const HostTensor want = load_npy(out_path);
  ASSERT_EQ(want.dtype(), DType::C128);
  ASSERT_EQ(want.shape(), Shape({4, 4}));
  const auto w = want.to_vector<C128>();
  const auto g = out[0].to_vector<C64>();
  for (size_t i = 0; i < w.size(); ++i) {
    EXPECT_NEAR(g[i].real(), w[i].real(), 1e-4 * (1 + std::abs(w[i])));
    EXPECT_NEAR(g[i].imag(), w[i].imag(), 1e-4 * (1 + std::abs(w[i])));
  }
  std::filesystem::remove(in_path);
  std::filesystem::remove(out_path);
}

// The chlo ops that stay un-decomposed for complex operands, against NumPy's complex128
// functions: random points in every quadrant, and points on the branch cuts on both sides
// (signed zero imaginary or real parts), where only the C99/NumPy branch-cut rules give the
// expected sign.
TEST(ComplexChlo, AgainstNumpy) {
  const std::string py = numpy_python();
  if (py.empty()) GTEST_SKIP() << "python3 with numpy is not available";
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-3, 3);
  std::vector<C128> xs;
  for (int i = 0; i < 120; ++i) xs.emplace_back(u(rng), u(rng));
  for (double re : {-2.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5})
    for (double im : {0.0, -0.0}) xs.emplace_back(re, im);
  for (double im : {-2.5, -1.0, -0.5, 0.5, 1.0, 2.5})
    for (double re : {0.0, -0.0}) xs.emplace_back(re, im);
  xs.emplace_back(1e-9, 2e-9);  // where the naive log formulas cancel
  const size_t n = xs.size();
  const char* ops[] = {"asin", "acos", "atan", "asinh", "acosh", "atanh", "sinh", "cosh", "tan"};
  const char* np_fns[] = {"arcsin",  "arccos", "arctan", "arcsinh", "arccosh",
                          "arctanh", "sinh",   "cosh",   "tan"};
  constexpr size_t kOps = std::size(ops);

  const auto dir = std::filesystem::temp_directory_path();
  const std::string in_path = (dir / "cujax_complex_chlo_in.npy").string();
  const std::string out_path = (dir / "cujax_complex_chlo_out.npy").string();
  save_npy(in_path, tensor_of(xs, {static_cast<int64_t>(n)}));
  std::string fns;
  for (const char* f : np_fns) fns += std::string("np.") + f + ",";
  const std::string cmd = py + " -c \"import numpy as np; x = np.load('" + in_path +
                          "'); np.save('" + out_path + "', np.stack([f(x) for f in [" + fns +
                          "]]))\"";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const HostTensor want_t = load_npy(out_path);
  ASSERT_EQ(want_t.shape(), Shape({static_cast<int64_t>(kOps), static_cast<int64_t>(n)}));
  const auto want = want_t.to_vector<C128>();

  std::vector<C64> xf(xs.begin(), xs.end());
  for (size_t k = 0; k < kOps; ++k) {
    for (const char* t : {"complex<f32>", "complex<f64>"}) {
      const bool f32 = std::string(t) == "complex<f32>";
      const std::string ty = "tensor<" + std::to_string(n) + "x" + t + ">";
      const std::string text = "func.func @main(%a: " + ty + ") -> " + ty + " {\n  %0 = chlo." +
                               ops[k] + " %a : " + ty + " -> " + ty + "\n  return %0 : " + ty +
                               "\n}\n";
      auto out = run(text, {f32 ? tensor_of(xf, {static_cast<int64_t>(n)})
                                : tensor_of(xs, {static_cast<int64_t>(n)})});
      for (size_t i = 0; i < n; ++i) {
        const C128 w = want[k * n + i];
        // NumPy's complex128 functions are themselves a few ULP off; complex64 inputs are the
        // complex128 ones rounded, which moves the result by at most a few f32 ULP here.
        const C128 x = f32 ? C128(xf[i]) : xs[i];
        const C128 got = f32 ? C128(out[0].to_vector<C64>()[i]) : out[0].to_vector<C128>()[i];
        const double eps = f32 ? 6e-8 : 1.2e-16;
        const double tol = (f32 ? 8 : 16) * eps * std::max(std::abs(w), 1e-300);
        auto check = [&](double g, double v) {
          if (std::isinf(v))  // atanh(+-1) = +-inf
            EXPECT_EQ(g, v) << ops[k] << " " << t << " at " << x;
          else
            EXPECT_LE(std::abs(g - v), tol) << ops[k] << " " << t << " at " << x;
          // Which side of a branch cut: the signs (of zeros too) agree with NumPy's.
          EXPECT_EQ(std::signbit(g), std::signbit(v)) << ops[k] << " " << t << " at " << x;
        };
        check(got.real(), w.real());
        check(got.imag(), w.imag());
      }
    }
  }
  std::filesystem::remove(in_path);
  std::filesystem::remove(out_path);
}

// The real-typed decompositions still reject other complex chlo ops with a clear error.
TEST(ComplexChlo, OtherOpsRejected) {
  const std::string text = R"(
func.func @main(%a: tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>> {
  %0 = chlo.erf %a : tensor<2xcomplex<f32>> -> tensor<2xcomplex<f32>>
  return %0 : tensor<2xcomplex<f32>>
}
)";
  try {
    run(text, {tensor_of(std::vector<C64>{{1, 2}, {3, 4}}, {2})});
    FAIL() << "chlo.erf of complex ran";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("chlo.erf"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("complex<f32>"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cujax
