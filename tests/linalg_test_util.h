// Helpers the linear-algebra tests share: values in complex doubles, random and Hermitian
// positive definite inputs, and gradients against central finite differences.
#pragma once

#include <gtest/gtest.h>

#include <complex>
#include <random>
#include <vector>

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/numpy.h"
#include "host_matrix.h"

namespace cujax::testutil {

namespace jnp = cujax::numpy;

inline std::vector<cd> values(const Array& x) {
  if (is_complex(x.dtype())) return jnp::astype(x, DType::C128).to_vector<cd>();
  std::vector<cd> out;
  for (double d : jnp::astype(x, DType::F64).to_vector<double>()) out.push_back(d);
  return out;
}

// The matrices of x [..., r, c] (vector: x [..., n] as columns), one per batch element.
inline std::vector<Mat> mats(const Array& x, bool vector = false) {
  const std::vector<cd> v = values(x);
  const int64_t r = vector ? x.shape().back() : x.shape()[x.ndim() - 2];
  const int64_t c = vector ? 1 : x.shape().back();
  std::vector<Mat> out;
  for (size_t b = 0; b * r * c < v.size() || (out.empty() && v.empty()); ++b) {
    Mat m(r, c);
    for (int64_t i = 0; i < r * c; ++i) m.v[static_cast<size_t>(i)] = v[b * r * c + i];
    out.push_back(m);
    if (v.empty()) break;
  }
  return out;
}

inline Mat diag(const Mat& col, int64_t rows, int64_t cols) {
  Mat d(rows, cols);
  for (int64_t i = 0; i < col.rows; ++i) d(i, i) = col(i, 0);
  return d;
}

inline double tol(DType t) {
  return t == DType::F32 || t == DType::C64 ? 2e-4 : 1e-10;
}

// Uniform entries in [-1, 1) of `dtype` (both parts for complex dtypes).
inline Array random(const Shape& shape, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> re(static_cast<size_t>(num_elements(shape))), im(re.size());
  for (size_t i = 0; i < re.size(); ++i) re[i] = u(rng), im[i] = u(rng);
  const DType real = complex_component(dtype);
  const Array r = jnp::array(re, shape, real);
  if (!is_complex(dtype)) return r;
  return lax::complex(r, jnp::array(im, shape, real));
}

// B B^H + n I: Hermitian positive definite.
inline Array hpd(const Shape& shape, DType dtype, uint32_t seed) {
  const Array b = random(shape, dtype, seed);
  const int64_t n = shape.back();
  return jnp::add(jnp::matmul(b, jnp::conj(b.mT())), jnp::astype(jnp::eye(n), dtype) * n);
}

// df/dx - i df/dy per element (JAX's convention for complex inputs) by central differences of
// the jitted loss.
template <class F>
std::vector<cd> numeric_grad(F loss, const Array& x) {
  auto f = jit(loss);
  const std::vector<cd> x0 = values(x);
  std::vector<cd> g(x0.size());
  const double h = 1e-6;
  const bool cplx = is_complex(x.dtype());
  for (size_t i = 0; i < x0.size(); ++i)
    for (int part = 0; part < (cplx ? 2 : 1); ++part) {
      const cd step = part ? cd(0, h) : cd(h, 0);
      double fv[2];
      for (int sgn = 0; sgn < 2; ++sgn) {
        std::vector<cd> xs = x0;
        xs[i] += sgn ? -step : step;
        std::vector<double> re, im;
        for (cd v : xs) re.push_back(v.real()), im.push_back(v.imag());
        Array xi = jnp::array(re, x.shape(), DType::F64);
        if (cplx) xi = lax::complex(xi, jnp::array(im, x.shape(), DType::F64));
        fv[sgn] = f(xi).template item<double>();
      }
      const double d = (fv[0] - fv[1]) / (2 * h);
      g[i] += part ? cd(0, -d) : cd(d, 0);
    }
  return g;
}

template <class F>
void expect_grad_matches(F loss, const Array& x, double tolerance = 1e-5) {
  const std::vector<cd> got = values(grad(loss)(x));
  const std::vector<cd> want = numeric_grad(loss, x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_LT(std::abs(got[i] - want[i]), tolerance * std::max(1.0, std::abs(want[i])))
        << "element " << i << ": " << got[i] << " vs " << want[i];
}

// A fixed real weighting that makes every output element matter.
inline Array weights(const Shape& s, DType t) {
  return jnp::astype(random(s, complex_component(t), 99), complex_component(t));
}
inline Array weighted_sum(const Array& y) {
  const Array w = weights(y.shape(), y.dtype());
  return jnp::sum(jnp::real(jnp::multiply(y, jnp::astype(w, y.dtype()))));
}

}  // namespace cujax::testutil
