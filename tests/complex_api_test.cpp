// The numpy/lax API for complex numbers (issue 23): creation and promotion, element-wise ops,
// reductions and products against NumPy, jit against eager, gradients with JAX's convention
// (grad f = df/dx - i df/dy for real f) against central finite differences along the real and
// imaginary directions, and numpy.fft against NumPy, round trips and finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "cujax/core/npy.h"
#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/numpy.h"
#include "cujax/vmap.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using namespace std::complex_literals;
using C64 = std::complex<float>;
using C128 = std::complex<double>;

// Deterministic complex values with parts in [lo, hi).
std::vector<C128> values(size_t n, uint32_t seed, double lo = -1, double hi = 1) {
  std::vector<C128> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return lo + (hi - lo) * ((s >> 8) / double(1u << 24));
  };
  for (auto& x : v) {
    const double re = next();
    x = C128(re, next());
  }
  return v;
}

Array c128(const std::vector<C128>& v, Shape shape) {
  return array(HostTensor::from_vector(v, std::move(shape)));
}
Array c64(const std::vector<C128>& v, Shape shape) {
  std::vector<C64> f(v.begin(), v.end());
  return array(HostTensor::from_vector(f, std::move(shape)));
}
Array f64(const std::vector<double>& v, Shape shape) {
  return array(HostTensor::from_vector(v, std::move(shape)));
}

// Any real or complex tensor's values as complex128.
std::vector<C128> as_c128(const HostTensor& t) {
  std::vector<C128> out(static_cast<size_t>(t.size()));
  visit_dtype_with_complex(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data_as<T>();
    for (int64_t i = 0; i < t.size(); ++i) {
      if constexpr (is_complex_v<T>)
        out[i] = C128(static_cast<double>(p[i].real()), static_cast<double>(p[i].imag()));
      else
        out[i] = C128(static_cast<double>(p[i]), 0);
    }
  });
  return out;
}

void expect_close(const HostTensor& got, const std::vector<C128>& want, double tol,
                  const std::string& what) {
  const std::vector<C128> g = as_c128(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    const double scale = tol * (1 + std::abs(want[i]));
    EXPECT_NEAR(g[i].real(), want[i].real(), scale) << what << " [" << i << "]";
    EXPECT_NEAR(g[i].imag(), want[i].imag(), scale) << what << " [" << i << "]";
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

// Evaluates Python expressions over `inputs` (x[0], x[1], ... as NumPy arrays) with NumPy and
// returns their values; empty when NumPy is not available.
std::vector<HostTensor> numpy_eval(const std::vector<HostTensor>& inputs,
                                   const std::vector<std::string>& exprs) {
  const std::string py = numpy_python();
  if (py.empty()) return {};
  const auto dir =
      std::filesystem::temp_directory_path() / ("cujax_complex_api_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string script = "import numpy as np\nx = []\n";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string p = (dir / ("in" + std::to_string(i) + ".npy")).string();
    save_npy(p, inputs[i]);
    script += "x.append(np.load('" + p + "'))\n";
  }
  for (size_t i = 0; i < exprs.size(); ++i)
    script += "np.save('" + (dir / ("out" + std::to_string(i) + ".npy")).string() +
              "', np.asarray(" + exprs[i] + "))\n";
  const std::string script_path = (dir / "eval.py").string();
  std::ofstream(script_path) << script;
  const std::string cmd = py + " " + script_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << script;
  std::vector<HostTensor> out;
  for (size_t i = 0; i < exprs.size(); ++i)
    out.push_back(load_npy((dir / ("out" + std::to_string(i) + ".npy")).string()));
  std::filesystem::remove_all(dir);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Creation, conversion, promotion

TEST(ComplexApi, CreationAndConversion) {
  const Array a = jnp::array({C128(1, 2), C128(-3, 0.5)});
  EXPECT_EQ(a.dtype(), DType::C64);
  EXPECT_EQ(a.shape(), Shape({2}));
  const auto v = a.to_vector<C64>();
  EXPECT_EQ(v[0], C64(1, 2));
  EXPECT_EQ(v[1], C64(-3, 0.5f));
  EXPECT_EQ(jnp::array(std::vector<C128>{C128(1, 1)}).dtype(), DType::C128);
  EXPECT_EQ(jnp::asarray(C128(2, -1)).dtype(), DType::C64);
  EXPECT_TRUE(jnp::asarray(C128(2, -1)).weak_type());
  EXPECT_EQ(jnp::asarray(C128(2, -1)).item<C64>(), C64(2, -1));
  EXPECT_EQ(jnp::zeros({2, 3}, DType::C128).to_vector<C128>(), std::vector<C128>(6, C128(0, 0)));
  EXPECT_EQ(jnp::ones({2}, DType::C64).to_vector<C64>(), std::vector<C64>(2, C64(1, 0)));
  EXPECT_EQ(jnp::full({2}, C128(0.5, -2)).to_vector<C64>(), std::vector<C64>(2, C64(0.5f, -2)));
  EXPECT_EQ(jnp::eye(2, std::nullopt, 0, DType::C64).to_vector<C64>(),
            (std::vector<C64>{1, 0, 0, 1}));
  EXPECT_EQ(jnp::arange(3, DType::C128).to_vector<C128>(), (std::vector<C128>{0, 1, 2}));
  EXPECT_EQ(jnp::linspace(0, 1, 3, true, DType::C64).to_vector<C64>(),
            (std::vector<C64>{0, 0.5f, 1}));
  EXPECT_EQ(jnp::astype(jnp::array({true, false}), DType::C64).to_vector<C64>(),
            (std::vector<C64>{1, 0}));
  // astype: real -> complex adds a zero imaginary part, complex -> real keeps the real part.
  const Array r = jnp::astype(jnp::array({1.5, -2.0}), DType::C128);
  EXPECT_EQ(r.to_vector<C128>(), (std::vector<C128>{C128(1.5, 0), C128(-2, 0)}));
  EXPECT_EQ(jnp::astype(a, DType::F32).to_vector<float>(), (std::vector<float>{1, -3}));
  EXPECT_EQ(jnp::astype(a, DType::C128).to_vector<C128>()[0], C128(1, 2));
  EXPECT_EQ(jnp::astype(a, DType::Bool).to_vector<bool>(), (std::vector<bool>{true, true}));
  // Host-side conversion in numpy::array(values, shape, dtype).
  const Array h = jnp::array(std::vector<double>{1, 2}, std::nullopt, DType::C64);
  EXPECT_EQ(h.to_vector<C64>()[1], C64(2, 0));
  EXPECT_TRUE(jnp::iscomplexobj(a));
  EXPECT_FALSE(jnp::iscomplexobj(jnp::real(r)));
  EXPECT_TRUE(jnp::isrealobj(2.0));
  EXPECT_TRUE(jnp::iscomplexobj(C128(0, 1)));
}

TEST(ComplexApi, Promotion) {
  using W = WeakDType;
  EXPECT_EQ(jnp::promote_types(DType::F32, DType::C64), DType::C64);
  EXPECT_EQ(jnp::promote_types(DType::F64, DType::C64), DType::C128);
  EXPECT_EQ(jnp::promote_types(DType::C64, DType::C128), DType::C128);
  EXPECT_EQ(jnp::promote_types(DType::I32, DType::C64), DType::C64);
  EXPECT_EQ(jnp::promote_types(DType::BF16, DType::C64), DType::C64);
  // Python-scalar weak types: a complex scalar is c*, which adopts the other side's width.
  EXPECT_EQ(jnp::result_type(std::vector<W>{{DType::F32, false}, {DType::C64, true}}),
            (W{DType::C64, false}));
  EXPECT_EQ(jnp::result_type(std::vector<W>{{DType::F64, false}, {DType::C64, true}}),
            (W{DType::C128, false}));
  EXPECT_EQ(jnp::result_type(std::vector<W>{{DType::C128, false}, {DType::F32, true}}),
            (W{DType::C128, false}));
  EXPECT_EQ(jnp::result_type(std::vector<W>{{DType::I32, true}, {DType::C64, true}}),
            (W{DType::C64, true}));
  const Array x = jnp::array({1.0, 2.0});
  const Array y = x * C128(0, 1);
  EXPECT_EQ(y.dtype(), DType::C64);
  EXPECT_FALSE(y.weak_type());
  EXPECT_EQ(y.to_vector<C64>()[1], C64(0, 2));
  const Array z = f64({1, 2}, {2}) + jnp::array({C128(0, 1), C128(1, 1)});
  EXPECT_EQ(z.dtype(), DType::C128);
  EXPECT_EQ((jnp::array({C128(1, 1)}) + 2.5).dtype(), DType::C64);
  EXPECT_EQ((jnp::array({C128(1, 1)}) / 2).to_vector<C64>()[0], C64(0.5f, 0.5f));
  EXPECT_TRUE(jnp::can_cast(DType::F32, DType::C64));
  EXPECT_TRUE(jnp::can_cast(DType::F64, DType::C128));
  EXPECT_FALSE(jnp::can_cast(DType::F64, DType::C64));
  EXPECT_FALSE(jnp::can_cast(DType::C64, DType::F64));
  EXPECT_TRUE(jnp::can_cast(DType::C64, DType::C128));
}

// ---------------------------------------------------------------------------------------------
// Values against NumPy

TEST(ComplexApi, ElementwiseAndReductionsAgainstNumpy) {
  const auto xv = values(12, 1), yv = values(12, 2), wv = values(8, 3);
  const Array x = c64(xv, {3, 4}), y = c64(yv, {3, 4}), w = c64(wv, {4, 2});
  const Array r = jnp::array(std::vector<float>{0.5f, -1.5f, 2, 3}, Shape{4});
  struct Case {
    std::string expr;
    Array got;
  };
  const std::vector<Case> cases = {
      {"x[0] + x[1]", x + y},
      {"x[0] - x[1]", x - y},
      {"x[0] * x[1]", x * y},
      {"x[0] / x[1]", x / y},
      {"-x[0]", -x},
      {"x[0] * x[3]", x * r},  // complex64 * float32, broadcast
      {"x[0] + 2.5", x + 2.5},
      {"x[0] * (1 - 2j)", x * C128(1, -2)},
      {"np.exp(x[0])", jnp::exp(x)},
      {"np.log(x[0])", jnp::log(x)},
      {"np.sqrt(x[0])", jnp::sqrt(x)},
      {"np.abs(x[0])", jnp::abs(x)},
      {"np.sin(x[0])", jnp::sin(x)},
      {"np.cos(x[0])", jnp::cos(x)},
      {"np.tan(x[0])", jnp::tan(x)},
      {"np.tanh(x[0])", jnp::tanh(x)},
      {"np.sinh(x[0])", jnp::sinh(x)},
      {"np.cosh(x[0])", jnp::cosh(x)},
      {"np.arcsin(x[0])", jnp::arcsin(x)},
      {"np.arctan(x[0])", jnp::arctan(x)},
      {"np.expm1(x[0])", jnp::expm1(x)},
      {"np.log1p(x[0])", jnp::log1p(x)},
      {"x[0] ** 3", jnp::power(x, 3)},
      {"x[0] ** x[1]", jnp::power(x, y)},
      {"np.square(x[0])", jnp::square(x)},
      {"1 / x[0]", jnp::reciprocal(x)},
      {"x[0] / np.abs(x[0])", jnp::sign(x)},  // NumPy 2 and JAX; NumPy 1 took sign(real)
      {"np.real(x[0])", jnp::real(x)},
      {"np.imag(x[0])", jnp::imag(x)},
      {"np.conj(x[0])", jnp::conj(x)},
      {"np.conjugate(x[0])", jnp::conjugate(x)},
      {"np.angle(x[0])", jnp::angle(x)},
      {"np.angle(x[0], deg=True)", jnp::angle(x, true)},
      {"np.angle(x[3])", jnp::angle(r)},
      {"np.sum(x[0])", jnp::sum(x)},
      {"np.sum(x[0], axis=0)", jnp::sum(x, 0)},
      {"np.prod(x[0], axis=1)", jnp::prod(x, 1)},
      {"np.mean(x[0], axis=1)", jnp::mean(x, 1)},
      {"np.var(x[0])", jnp::var(x)},
      {"np.cumsum(x[0], axis=1)", jnp::cumsum(x, 1)},
      {"x[0] @ x[2]", jnp::matmul(x, w)},
      {"np.dot(x[0][0], x[1][0])", jnp::dot(jnp::at(x, {0}), jnp::at(y, {0}))},
      {"np.vdot(x[0], x[1])", jnp::vdot(x, y)},
      {"np.einsum('ij,jk->ik', x[0], x[2])", jnp::einsum("ij,jk->ik", {x, w})},
      {"x[0].T", jnp::transpose(x)},
      {"np.where(x[0].real > 0, x[0], x[1])", jnp::where(jnp::real(x) > 0, x, y)},
      {"np.concatenate([x[0], x[1]])", jnp::concatenate({x, y})},
      {"x[0] == x[0]", x == x},
      {"x[0] != x[1]", x != y},
      {"np.sort(x[0], axis=1)", jnp::sort(x, 1)},
      {"np.sort(np.concatenate([x[0][0], x[0][0].real + 0j]))",
       jnp::sort(jnp::concatenate(
           {jnp::at(x, {0}), jnp::astype(jnp::real(jnp::at(x, {0})), DType::C64)}))},
      {"np.argsort(x[0], axis=0, kind='stable')", jnp::argsort(x, 0)},
      {"x[0] < x[1]", x < y},  // NumPy orders complex numbers lexicographically
      {"np.greater_equal(x[0], x[0].real)", jnp::greater_equal(x, jnp::real(x))},
      {"np.isclose(x[0], x[0] + 1e-7)", jnp::isclose(x, x + 1e-7)},
  };
  std::vector<std::string> exprs;
  for (const auto& c : cases) exprs.push_back(c.expr);
  const std::vector<HostTensor> want =
      numpy_eval({x.to_host(), y.to_host(), w.to_host(), r.to_host()}, exprs);
  if (want.empty()) GTEST_SKIP() << "python3 with numpy is not available";
  for (size_t i = 0; i < cases.size(); ++i) {
    const HostTensor g = cases[i].got.to_host();
    EXPECT_EQ(g.shape(), want[i].shape()) << cases[i].expr;
    // NumPy gives the same dtype (complex64 or float32 from complex64 inputs; bool), but
    // int64 indices where JAX's are int32.
    if (want[i].dtype() != DType::I64 || g.dtype() != DType::I32) {
      EXPECT_EQ(g.dtype(), want[i].dtype()) << cases[i].expr;
    }
    expect_close(g, as_c128(want[i]), 2e-5, cases[i].expr);
  }
}

TEST(ComplexApi, PredicatesAndErrors) {
  const double inf = INFINITY, nan = NAN;
  const Array x = c128({C128(1, 2), C128(inf, 0), C128(0, nan), C128(3, 0)}, {4});
  EXPECT_EQ(jnp::isfinite(x).to_vector<bool>(), (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(jnp::isinf(x).to_vector<bool>(), (std::vector<bool>{false, true, false, false}));
  EXPECT_EQ(jnp::isnan(x).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(jnp::iscomplex(x).to_vector<bool>(), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(jnp::isreal(x).to_vector<bool>(), (std::vector<bool>{false, true, false, true}));
  // Sorting: by real part, then imaginary part, NaN parts last (NumPy's order).
  const Array u = c128({C128(nan, 1), C128(2, nan), C128(2, -1), C128(-0.0, 3), C128(0, 1),
                        C128(nan, nan), C128(-1, 5)},
                       {7});
  const auto sorted = jnp::sort(u).to_vector<C128>();
  const std::vector<C128> order = {C128(-1, 5),  C128(0, 1),   C128(0, 3),    C128(2, -1),
                                   C128(2, nan), C128(nan, 1), C128(nan, nan)};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_TRUE(sorted[i].real() == order[i].real() ||
                (std::isnan(sorted[i].real()) && std::isnan(order[i].real())))
        << i;
    EXPECT_TRUE(sorted[i].imag() == order[i].imag() ||
                (std::isnan(sorted[i].imag()) && std::isnan(order[i].imag())))
        << i;
  }
  // Real operands: real is x, imag zeros, conj x (real dtype).
  const Array r = jnp::array({1.0, -2.0});
  EXPECT_EQ(jnp::real(r).to_vector<float>(), (std::vector<float>{1, -2}));
  EXPECT_EQ(jnp::imag(r).to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_EQ(jnp::conj(r).dtype(), DType::F32);
  EXPECT_EQ(lax::conj(r).dtype(), DType::C64);  // jax.lax.conj of a real gives a complex
  EXPECT_THROW(lax::real(r), Error);
  EXPECT_THROW(jnp::floor(x), Error);
  EXPECT_THROW(jnp::max(x), Error);
  EXPECT_THROW(lax::complex(r, f64({1, 2}, {2})), Error);
  try {
    lax::rem(x, x);
    FAIL() << "lax.rem of complex operands should throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("complex<f64>[4]"), std::string::npos) << e.what();
  }
  // lax.complex / real / imag.
  const Array z = lax::complex(r, jnp::array({0.5, 4.0}));
  EXPECT_EQ(z.dtype(), DType::C64);
  EXPECT_EQ(z.to_vector<C64>()[1], C64(-2, 4));
  EXPECT_EQ(lax::imag(z).to_vector<float>(), (std::vector<float>{0.5f, 4}));
  EXPECT_EQ(lax::conj(z).to_vector<C64>()[1], C64(-2, -4));
}

TEST(ComplexApi, JitMatchesEager) {
  auto f = [](const Array& z, const Array& w) {
    const Array a = jnp::exp(z * C128(0, 1)) * jnp::conj(w) + jnp::sqrt(z) / 3.0;
    return jnp::sum(jnp::abs(a) * jnp::angle(a)) + jnp::real(jnp::sum(jnp::matmul(z, w)));
  };
  auto g = [](const Array& z, const Array& w) {
    const Array a = jnp::exp(z * C128(0, 1)) * jnp::conj(w) + jnp::sqrt(z) / 3.0;
    return std::make_pair(a, jnp::fft::fft(a, std::nullopt, 0));
  };
  const Array z = c64(values(9, 4), {3, 3}), w = c64(values(9, 5), {3, 3});
  const auto eager = g(z, w);
  const auto jitted = jit(g)(z, w);
  expect_close(jitted.first.to_host(), as_c128(eager.first.to_host()), 1e-6, "jit a");
  expect_close(jitted.second.to_host(), as_c128(eager.second.to_host()), 1e-5, "jit fft");
  EXPECT_EQ(jitted.second.dtype(), DType::C64);
  EXPECT_NEAR(jit(f)(z, w).item<float>(), f(z, w).item<float>(), 1e-5);
  EXPECT_EQ(f(z, w).dtype(), DType::F32);
}

// vmap over a batch axis that is not in front: each row's result equals the unbatched one.
TEST(ComplexApi, VmapMatchesPerRow) {
  auto f = [](const Array& z) {
    const Array y = jnp::fft::fft(z * lax::complex(jnp::imag(z), jnp::real(z)));
    return jnp::abs(y) + jnp::angle(jnp::conj(y));
  };
  const Array zs = c64(values(15, 41), {5, 3});  // three vectors of 5, mapped along axis 1
  const Array out = vmap(f, 1, 0)(zs);
  ASSERT_EQ(out.shape(), Shape({3, 5}));
  for (int64_t i = 0; i < 3; ++i)
    expect_close(jnp::at(out, {i}).to_host(), as_c128(f(jnp::at(zs, {Slice(), i})).to_host()), 1e-6,
                 "vmap row");
  // Per-example gradients of a real function of complex rows.
  auto loss = [](const Array& z) { return jnp::sum(jnp::abs(jnp::fft::ifft(z * z))); };
  const Array gs = vmap(grad(loss))(jnp::transpose(zs));
  for (int64_t i = 0; i < 3; ++i)
    expect_close(jnp::at(gs, {i}).to_host(),
                 as_c128(grad(loss)(jnp::at(zs, {Slice(), i})).to_host()), 1e-6, "vmap grad");
  // Updates at indices (scatters of the parts) and their gradients (a gather's is a scatter).
  const Array zr = jnp::at(zs, {0});
  EXPECT_EQ(jnp::at_set(zr, {1}, C128(9, -9)).to_vector<C64>()[1], C64(9, -9));
  const Array added = jnp::at_add(zr, {jnp::array({2, 2})}, C128(1, 1));
  EXPECT_EQ(added.to_vector<C64>()[2], zr.to_vector<C64>()[2] + C64(2, 2));
  EXPECT_THROW(jnp::at_multiply(zr, {1}, C128(0, 1)), Error);  // no complex scatter_mul
  auto picked = [](const Array& v) {
    return jnp::sum(jnp::abs(jnp::at(v, {jnp::array({0, 2, 2})})));
  };
  const auto zrv = zr.to_vector<C64>();
  const Array gp = grad(picked)(zr);
  auto unit = [](C64 v) { return C128(std::conj(v)) / std::abs(C128(v)); };
  expect_close(gp.to_host(), {unit(zrv[0]), 0, 2.0 * unit(zrv[2])}, 1e-6, "grad of a gather");
  // Out-of-range gathers fill complex arrays with nan+0j (JAX's fill mode).
  const Array t = jnp::take(zs, jnp::array({0, 99}), std::nullopt, jnp::IndexMode::Fill);
  const auto tv = t.to_vector<C64>();
  EXPECT_TRUE(std::isnan(tv[1].real()));
  EXPECT_EQ(tv[0], zs.to_vector<C64>()[0]);
}

// ---------------------------------------------------------------------------------------------
// Gradients: JAX's convention

using RealFn = std::function<Array(const Array&)>;

// df/dx - i df/dy per element of a complex128 z, by central differences.
std::vector<C128> numeric_grad(const RealFn& f, const std::vector<C128>& z, const Shape& shape) {
  const double h = 1e-6;
  std::vector<C128> g(z.size());
  for (size_t k = 0; k < z.size(); ++k) {
    auto at = [&](C128 d) {
      std::vector<C128> p = z;
      p[k] += d;
      return f(c128(p, shape)).item<double>();
    };
    const double dx = (at(C128(h, 0)) - at(C128(-h, 0))) / (2 * h);
    const double dy = (at(C128(0, h)) - at(C128(0, -h))) / (2 * h);
    g[k] = C128(dx, -dy);
  }
  return g;
}

TEST(ComplexGrad, KnownValues) {
  // grad(|z|^2)(3+4i) = 2 conj(z) = 6-8i, however |z|^2 is written.
  const Array z = jnp::asarray(C128(3, 4), DType::C128);
  const std::vector<RealFn> sq = {
      [](const Array& v) { return jnp::real(v * jnp::conj(v)); },
      [](const Array& v) { return jnp::square(jnp::abs(v)); },
      [](const Array& v) { return jnp::square(jnp::real(v)) + jnp::square(jnp::imag(v)); },
  };
  for (const auto& f : sq) {
    const Array g = grad(f)(z);
    EXPECT_EQ(g.dtype(), DType::C128);
    EXPECT_NEAR(g.item<C128>().real(), 6, 1e-12);
    EXPECT_NEAR(g.item<C128>().imag(), -8, 1e-12);
  }
  // grad |z| = conj(z) / |z|; 0 at 0 (as JAX).
  const Array ga = grad([](const Array& v) { return jnp::abs(v); })(z);
  EXPECT_NEAR(ga.item<C128>().real(), 0.6, 1e-12);
  EXPECT_NEAR(ga.item<C128>().imag(), -0.8, 1e-12);
  const Array g0 = grad([](const Array& v) { return jnp::abs(v); })(jnp::zeros({}, DType::C128));
  EXPECT_EQ(g0.item<C128>(), C128(0, 0));
  // grad of real(z) is 1, of imag(z) is -i.
  EXPECT_EQ(grad([](const Array& v) { return jnp::real(v); })(z).item<C128>(), C128(1, 0));
  EXPECT_EQ(grad([](const Array& v) { return jnp::imag(v); })(z).item<C128>(), C128(0, -1));
  // A real input through complex intermediates: d/dx |x + 2ix|^2 = 10 x.
  const Array gx = grad([](const Array& x) {
    return jnp::square(jnp::abs(lax::complex(x, x * 2.0)));
  })(f64({1.5}, {}));
  EXPECT_NEAR(gx.item<double>(), 15, 1e-12);
  // A complex64 input gives a complex64 gradient.
  const Array g64 = grad([](const Array& v) { return jnp::sum(jnp::abs(v)); })(
      jnp::array({C128(3, 4), C128(0, 2)}));
  EXPECT_EQ(g64.dtype(), DType::C64);
  expect_close(g64.to_host(), {C128(0.6, -0.8), C128(0, -1)}, 1e-6, "grad abs c64");
}

TEST(ComplexGrad, AgainstFiniteDifferences) {
  const Shape shape{5};
  const auto zv = values(5, 7, 0.2, 1.5);  // away from the branch cuts and 0
  const Array w = c128(values(5, 8), shape);
  const Array r = f64({0.3, -1.2, 2.0, 0.7, -0.4}, shape);
  const std::vector<std::pair<std::string, RealFn>> fns = {
      {"real(z^2 conj(w))",
       [&](const Array& z) { return jnp::sum(jnp::real(z * z * jnp::conj(w))); }},
      {"imag(exp(z) w)", [&](const Array& z) { return jnp::sum(jnp::imag(jnp::exp(z) * w)); }},
      {"|sin z|", [](const Array& z) { return jnp::sum(jnp::abs(jnp::sin(z))); }},
      {"angle(z)", [](const Array& z) { return jnp::sum(jnp::angle(z)); }},
      {"real(log z sqrt z)",
       [](const Array& z) { return jnp::sum(jnp::real(jnp::log(z) * jnp::sqrt(z))); }},
      {"|z / (1 + w)|^2 r",
       [&](const Array& z) { return jnp::sum(jnp::square(jnp::abs(z / (w + 1.0))) * r); }},
      {"real(tanh z) + imag(cos z)",
       [](const Array& z) { return jnp::sum(jnp::real(jnp::tanh(z)) + jnp::imag(jnp::cos(z))); }},
      {"imag(z^3 - conj z)",
       [](const Array& z) { return jnp::sum(jnp::imag(jnp::power(z, 3) - jnp::conj(z))); }},
      {"real(z^w)", [&](const Array& z) { return jnp::sum(jnp::real(jnp::power(z, w))); }},
      {"real(mean(z) * prod(z))",
       [](const Array& z) { return jnp::real(jnp::mean(z) * jnp::prod(z)); }},
      {"|z @ M|",
       [&](const Array& z) {
         const Array m = jnp::reshape(jnp::concatenate({w, w * w, w + 1.0}), {5, 3});
         return jnp::sum(jnp::abs(jnp::matmul(z, m)));
       }},
      {"real(where)",
       [&](const Array& z) {
         return jnp::sum(jnp::real(jnp::where(r > 0, z * z, jnp::conj(z) * w)));
       }},
      {"var(z)", [](const Array& z) { return jnp::var(z); }},
  };
  const Array z = c128(zv, shape);
  for (const auto& [name, f] : fns) {
    const Array g = grad(f)(z);
    ASSERT_EQ(g.dtype(), DType::C128) << name;
    expect_close(g.to_host(), numeric_grad(f, zv, shape), 1e-6, name);
    // jit(grad) and eager grad agree.
    expect_close(jit(grad(f))(z).to_host(), as_c128(g.to_host()), 1e-12, name + " jit");
  }
}

// Second derivatives and control flow: the rules are written with differentiable ops.
TEST(ComplexGrad, SecondOrderScanAndCond) {
  const Shape shape{4};
  const auto zv = values(4, 51, 0.3, 1.2);
  const Array z = c128(zv, shape), w = c128(values(4, 52), shape);
  RealFn f = [](const Array& v) {
    return jnp::sum(jnp::power(jnp::abs(v), 3)) + jnp::sum(jnp::real(jnp::fft::fft(v) * v));
  };
  RealFn g = [&](const Array& v) { return jnp::sum(jnp::real(grad(f)(v) * w)); };
  expect_close(grad(g)(z).to_host(), numeric_grad(g, zv, shape), 1e-5, "grad of grad");
  RealFn through_scan = [](const Array& v) {
    auto [carry, ys] = lax::scan(
        [](const Array& c, const Array& x) { return std::make_pair(c * x + 1.0, jnp::conj(c)); },
        jnp::asarray(C128(1, 0), DType::C128), v);
    return jnp::abs(carry) + jnp::sum(jnp::imag(ys));
  };
  expect_close(grad(through_scan)(z).to_host(), numeric_grad(through_scan, zv, shape), 1e-6,
               "scan");
  RealFn through_cond = [](const Array& v) {
    const Array y = lax::cond(
        jnp::real(jnp::sum(v)) > 0, [](const Array& u) { return jnp::exp(u); },
        [](const Array& u) { return jnp::conj(u) * u; }, v);
    return jnp::sum(jnp::imag(y));
  };
  expect_close(grad(through_cond)(z).to_host(), numeric_grad(through_cond, zv, shape), 1e-6,
               "cond");
}

TEST(ComplexGrad, HolomorphicVjpJvpAndErrors) {
  // vjp with cotangent 1 of a holomorphic f is f'(z) (no conjugation), as JAX.
  const Array z = c128({C128(0.5, -1.25), C128(2, 0.5)}, {2});
  auto f = [](const Array& v) { return jnp::exp(v) * v; };  // f' = exp(z) (1 + z)
  auto [y, fn] = vjp(f, z);
  auto [g] = fn(jnp::ones({2}, DType::C128));
  const auto zh = z.to_vector<C128>();
  std::vector<C128> want;
  for (C128 v : zh) want.push_back(std::exp(v) * (1.0 + v));
  expect_close(g.to_host(), want, 1e-12, "vjp holomorphic");
  // jvp (the VJP transposed) of a holomorphic f: f'(z) t.
  const Array t = c128({C128(1, 2), C128(-0.5, 0.25)}, {2});
  const auto tv = t.to_vector<C128>();
  auto [y2, ty] = jvp(f, z, t);
  std::vector<C128> want_t;
  for (size_t i = 0; i < 2; ++i) want_t.push_back(want[i] * tv[i]);
  expect_close(ty.to_host(), want_t, 1e-12, "jvp holomorphic");
  // jvp of a non-holomorphic map: d conj(z) [t] = conj(t), d |z|^2 [t] = 2 Re(conj(z) t).
  auto [y3, tc] = jvp([](const Array& v) { return jnp::conj(v); }, z, t);
  expect_close(tc.to_host(), {std::conj(tv[0]), std::conj(tv[1])}, 1e-12, "jvp conj");
  auto [y4, ta] = jvp([](const Array& v) { return jnp::square(jnp::abs(v)); }, z, t);
  expect_close(ta.to_host(),
               {2 * (std::conj(zh[0]) * tv[0]).real(), 2 * (std::conj(zh[1]) * tv[1]).real()},
               1e-12, "jvp |z|^2");
  // grad(..., holomorphic): f'(z) of a complex scalar function, as jax.grad(holomorphic=True).
  const Array z0 = jnp::asarray(C128(0.5, -1.25), DType::C128);
  const Array gh =
      grad([](const Array& v) { return jnp::sin(v) * v; }, argnums<0>, holomorphic)(z0);
  const C128 zc(0.5, -1.25);
  expect_close(gh.to_host(), {std::cos(zc) * zc + std::sin(zc)}, 1e-12, "grad holomorphic");
  auto [val, gv] =
      value_and_grad([](const Array& v) { return v * v; }, argnums<0>, holomorphic)(z0);
  expect_close(val.to_host(), {zc * zc}, 1e-12, "value_and_grad holomorphic value");
  expect_close(gv.to_host(), {2.0 * zc}, 1e-12, "value_and_grad holomorphic");
  EXPECT_THROW(grad([](const Array& v) { return jnp::abs(v); }, argnums<0>, holomorphic)(z0),
               Error);  // a real output
  EXPECT_THROW(grad([](const Array& v) { return v * 1i; }, argnums<0>, holomorphic)(f64({1}, {})),
               Error);  // a real input
  // grad of a complex output is an error naming the dtype.
  try {
    grad([](const Array& v) { return jnp::sum(v * v); })(z);
    FAIL() << "grad of a complex output should throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("complex<f64>"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// numpy.fft

TEST(ComplexFftApi, AgainstNumpy) {
  const Array x = c64(values(24, 11), {4, 6});
  const auto rv = values(24, 12);
  std::vector<float> rf;
  for (C128 v : rv) rf.push_back(static_cast<float>(v.real()));
  const Array r = jnp::array(rf, Shape{4, 6});
  const Array x4 = c128(values(2 * 3 * 2 * 4, 13), {2, 3, 2, 4});
  const Array r5 = jnp::reshape(jnp::array(std::vector<float>(rf.begin(), rf.begin() + 5)), {5});
  namespace fft = jnp::fft;
  struct Case {
    std::string expr;
    Array got;
  };
  const std::vector<Case> cases = {
      {"np.fft.fft(x[0])", fft::fft(x)},
      {"np.fft.fft(x[0], axis=0)", fft::fft(x, std::nullopt, 0)},
      {"np.fft.fft(x[0], n=4)", fft::fft(x, 4)},
      {"np.fft.fft(x[0], n=9)", fft::fft(x, 9)},
      {"np.fft.fft(x[0], norm='ortho')", fft::fft(x, std::nullopt, -1, "ortho")},
      {"np.fft.fft(x[0], norm='forward')", fft::fft(x, std::nullopt, -1, "forward")},
      {"np.fft.ifft(x[0])", fft::ifft(x)},
      {"np.fft.ifft(x[0], norm='ortho')", fft::ifft(x, std::nullopt, -1, "ortho")},
      {"np.fft.ifft(x[0], norm='forward')", fft::ifft(x, std::nullopt, -1, "forward")},
      {"np.fft.fft(x[1])", fft::fft(r)},  // real input
      {"np.fft.rfft(x[1])", fft::rfft(r)},
      {"np.fft.rfft(x[1], axis=0)", fft::rfft(r, std::nullopt, 0)},
      {"np.fft.rfft(x[1], n=7)", fft::rfft(r, 7)},
      {"np.fft.rfft(x[3])", fft::rfft(r5)},
      {"np.fft.rfft(x[1], norm='ortho')", fft::rfft(r, std::nullopt, -1, "ortho")},
      {"np.fft.irfft(x[0])", fft::irfft(x)},
      {"np.fft.irfft(x[0], n=11)", fft::irfft(x, 11)},
      {"np.fft.irfft(x[0], n=4, axis=0)", fft::irfft(x, 4, 0)},
      {"np.fft.irfft(x[0], norm='forward')", fft::irfft(x, std::nullopt, -1, "forward")},
      {"np.fft.fftn(x[0])", fft::fftn(x)},
      {"np.fft.fftn(x[0], s=[3, 8])", fft::fftn(x, std::vector<int64_t>{3, 8})},
      {"np.fft.ifftn(x[0], norm='ortho')", fft::ifftn(x, std::nullopt, std::nullopt, "ortho")},
      {"np.fft.fft2(x[1])", fft::fft2(r)},
      {"np.fft.rfftn(x[1])", fft::rfftn(r)},
      {"np.fft.irfftn(x[0])", fft::irfftn(x)},
      {"np.fft.irfft2(x[0], s=[4, 7])", fft::irfft2(x, std::vector<int64_t>{4, 7})},
      {"np.fft.fftn(x[2])", fft::fftn(x4)},  // 4 axes: two 2-D transforms
      {"np.fft.ifftn(x[2])", fft::ifftn(x4)},
      {"np.fft.fftn(x[2], axes=[3, 0, 2])",
       fft::fftn(x4, std::nullopt, std::vector<int64_t>{3, 0, 2})},
      {"np.fft.fftfreq(7, 0.5)", fft::fftfreq(7, 0.5)},
      {"np.fft.fftfreq(8)", fft::fftfreq(8)},
      {"np.fft.rfftfreq(9, 2.0)", fft::rfftfreq(9, 2.0)},
      {"np.fft.fftshift(x[0])", fft::fftshift(x)},
      {"np.fft.ifftshift(x[0], axes=1)", fft::ifftshift(x, 1)},
  };
  std::vector<std::string> exprs;
  for (const auto& c : cases) exprs.push_back(c.expr);
  const std::vector<HostTensor> want =
      numpy_eval({x.to_host(), r.to_host(), x4.to_host(), r5.to_host()}, exprs);
  if (want.empty()) GTEST_SKIP() << "python3 with numpy is not available";
  for (size_t i = 0; i < cases.size(); ++i) {
    const HostTensor g = cases[i].got.to_host();
    EXPECT_EQ(g.shape(), want[i].shape()) << cases[i].expr;
    // NumPy's fft computes in 128 bits (for complex64 input, newer NumPy keeps complex64).
    EXPECT_EQ(is_complex(g.dtype()), is_complex(want[i].dtype())) << cases[i].expr;
    expect_close(g, as_c128(want[i]), 1e-5, cases[i].expr);
  }
  EXPECT_EQ(fft::fft(x4).dtype(), DType::C128);
  EXPECT_EQ(fft::rfft(r).dtype(), DType::C64);
  EXPECT_EQ(fft::irfft(x).dtype(), DType::F32);
}

TEST(ComplexFftApi, RoundTripsAndErrors) {
  namespace fft = jnp::fft;
  const auto zv = values(30, 21);
  const Array z = c128(zv, {5, 6});
  expect_close(fft::ifft(fft::fft(z)).to_host(), zv, 1e-14, "ifft(fft)");
  expect_close(fft::ifftn(fft::fftn(z)).to_host(), zv, 1e-14, "ifftn(fftn)");
  expect_close(fft::fft(fft::ifft(z, std::nullopt, 0, "ortho"), std::nullopt, 0, "ortho").to_host(),
               zv, 1e-14, "ortho");
  for (int64_t n : {6, 7}) {
    std::vector<double> xs;
    for (int64_t i = 0; i < 3 * n; ++i) xs.push_back(std::sin(0.37 * i) + 0.05 * i);
    const Array x = f64(xs, {3, n});
    std::vector<C128> want(xs.begin(), xs.end());
    expect_close(fft::irfft(fft::rfft(x), n).to_host(), want, 1e-14,
                 "irfft(rfft) " + std::to_string(n));
    expect_close(fft::irfftn(fft::rfftn(x), std::vector<int64_t>{3, n}).to_host(), want, 1e-14,
                 "irfftn(rfftn)");
  }
  EXPECT_THROW(fft::rfft(z), Error);                               // complex input
  EXPECT_THROW(fft::fft(z, std::nullopt, -1, "sideways"), Error);  // bad norm
  EXPECT_THROW(fft::fft(z, std::nullopt, 2), Error);               // bad axis
  EXPECT_THROW(fft::fftn(z, std::nullopt, std::vector<int64_t>{1, 1}), Error);
  EXPECT_THROW(lax::fft(z, lax::FftType::FFT, {5}), Error);  // trailing dims must match
  EXPECT_EQ(lax::fft(z, lax::FftType::IRFFT, {5, 10}).shape(), Shape({5, 10}));
}

TEST(ComplexFftApi, GradientsAgainstFiniteDifferences) {
  namespace fft = jnp::fft;
  const Shape shape{6};
  const auto zv = values(6, 31);
  const Array wr = f64({0.5, -1.0, 2.0, 0.25, 1.5, -0.75}, shape);
  const Array wc = c128(values(6, 32), shape);
  const std::vector<std::pair<std::string, RealFn>> fns = {
      {"|fft z|^2 w",
       [&](const Array& z) { return jnp::sum(jnp::square(jnp::abs(fft::fft(z))) * wr); }},
      {"real(ifft z conj wc)",
       [&](const Array& z) { return jnp::sum(jnp::real(fft::ifft(z) * jnp::conj(wc))); }},
      {"imag(fft ortho)",
       [&](const Array& z) {
         return jnp::sum(jnp::imag(fft::fft(z, std::nullopt, -1, "ortho")) * wr);
       }},
      {"irfft even",
       [&](const Array& z) { return jnp::sum(fft::irfft(jnp::at(z, {Slice(0, 4)}), 6) * wr); }},
      {"irfft odd",
       [&](const Array& z) {
         return jnp::sum(jnp::square(fft::irfft(jnp::at(z, {Slice(0, 4)}), 7)));
       }},
      {"fftn 2x3",
       [&](const Array& z) {
         return jnp::sum(jnp::abs(fft::fftn(jnp::reshape(z, {2, 3})) + 1.0));
       }},
      {"irfftn 2x4",
       [&](const Array& z) {
         return jnp::sum(
             jnp::sin(fft::irfftn(jnp::reshape(z, {2, 3}), std::vector<int64_t>{2, 4})));
       }},
  };
  const Array z = c128(zv, shape);
  for (const auto& [name, f] : fns) {
    const Array g = grad(f)(z);
    expect_close(g.to_host(), numeric_grad(f, zv, shape), 1e-6, name);
  }
  // The transforms are linear, so jvp(F)(x, t) = F(t): this differentiates each transpose rule
  // again (jvp is the VJP of the VJP), which must give back the transform.
  const Array t = c128(values(6, 34), shape);
  const Array half = jnp::at(t, {Slice(0, 4)});
  const Array real_t = jnp::real(t);
  const std::vector<std::pair<std::string, std::function<Array(const Array&)>>> linear = {
      {"fft", [](const Array& v) { return fft::fft(v); }},
      {"ifft ortho", [](const Array& v) { return fft::ifft(v, std::nullopt, -1, "ortho"); }},
      {"rfft", [](const Array& v) { return fft::rfft(v); }},
      {"irfft 6", [](const Array& v) { return fft::irfft(v, 6); }},
      {"irfft 7", [](const Array& v) { return fft::irfft(v, 7); }},
  };
  for (const auto& [name, fn] : linear) {
    const Array tangent = name == "rfft" ? real_t : name.rfind("irfft", 0) == 0 ? half : t;
    const Array primal = jnp::ones_like(tangent);
    auto [y, ty] = jvp(fn, primal, tangent);
    expect_close(ty.to_host(), as_c128(fn(tangent).to_host()), 1e-12, "jvp " + name);
  }
  // rfft of a real input: against real central differences.
  std::vector<double> xv = {0.3, -0.7, 1.1, 0.4, -1.3, 0.9, 0.2};
  for (int64_t n : {6, 7}) {
    const Shape s{n};
    std::vector<double> xs(xv.begin(), xv.begin() + n);
    const Array w = c128(values(static_cast<size_t>(n / 2 + 1), 33), {n / 2 + 1});
    RealFn f = [&](const Array& x) {
      const Array y = fft::rfft(x);
      return jnp::sum(jnp::real(y * w)) + jnp::sum(jnp::square(jnp::abs(y))) * 0.1;
    };
    const Array g = grad(f)(f64(xs, s));
    const auto gv = g.to_vector<double>();
    for (int64_t k = 0; k < n; ++k) {
      auto at = [&](double d) {
        std::vector<double> p = xs;
        p[k] += d;
        return f(f64(p, s)).item<double>();
      };
      EXPECT_NEAR(gv[k], (at(1e-6) - at(-1e-6)) / 2e-6, 1e-6) << "rfft n=" << n << " [" << k << "]";
    }
  }
}

}  // namespace
}  // namespace cujax
