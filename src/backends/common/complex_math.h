// Complex products, quotients and magnitudes as the cuda backend computes them, header-only and
// marked CUJAX_HD so that the CPU tests check the device's formulas against the CPU backend's
// (std::complex in a wider type, rounded once). A complex value is its two parts; both precisions
// compute in double: for complex64 the products of float parts are exact there, so a product
// rounds as the CPU's complex<double> one does; for complex128 the differences of products use
// an FMA (Kahan's), within an ULP or two of the CPU's long double.
#pragma once

#include <cmath>

#include "cujax/core/half.h"

namespace cujax::cplx {

// A complex value as its two parts; the cuda backend computes in Parts.
template <class R>
struct PartsOf {
  R re, im;
};
using Parts = PartsOf<double>;

// a*b - c*d with one rounding (Kahan: the error of c*d is recovered by an FMA). An exact c*d
// adds nothing, so that zeros keep the sign the plain formula gives them.
CUJAX_HD inline double difference_of_products(double a, double b, double c, double d) {
  const double cd = c * d;
  const double err = ::fma(-c, d, cd);
  const double r = ::fma(a, b, -cd);
  return err == 0 ? r : r + err;
}

CUJAX_HD inline Parts multiply(Parts x, Parts y) {
  return {difference_of_products(x.re, y.re, x.im, y.im),
          difference_of_products(x.re, y.im, -x.im, y.re)};
}

// Smith's algorithm: the larger part of the divisor divides first, so that its square never
// overflows or underflows. A zero divisor gives the real divisions' infinities and NaNs, as
// C99's Annex G (the CPU's __divdc3) does.
CUJAX_HD inline Parts divide(Parts x, Parts y) {
  if (::fabs(y.re) >= ::fabs(y.im)) {
    if (y.re == 0 && y.im == 0) return {x.re / y.re, x.im / y.re};
    const double r = y.im / y.re;
    const double den = y.re + y.im * r;
    return {(x.re + x.im * r) / den, (x.im - x.re * r) / den};
  }
  const double r = y.re / y.im;
  const double den = y.re * r + y.im;
  return {(x.re * r + x.im) / den, (x.im * r - x.re) / den};
}

CUJAX_HD inline double magnitude(Parts x) {
  return ::hypot(x.re, x.im);
}

// Both backends' formulas for the functions the C library has no complex form of, on parts of
// type R: the cuda backend computes them in double, the CPU backend in its wider type
// (backends/cpu/complex_kernels.cpp).

// exp(z) - 1 without cancellation near 0: exp(x)cos(y) - 1 = expm1(x)cos(y) - 2 sin^2(y/2).
template <class R>
CUJAX_HD inline PartsOf<R> expm1(PartsOf<R> z) {
  if (z.im == 0) return {std::expm1(z.re), z.im};
  const R s = std::sin(z.im / 2);
  return {std::expm1(z.re) * std::cos(z.im) - 2 * s * s, std::exp(z.re) * std::sin(z.im)};
}

// log(1 + z): log|1+z| = log1p(2x + x^2 + y^2) / 2 where |z| < 1/2.
template <class R>
CUJAX_HD inline PartsOf<R> log1p(PartsOf<R> z) {
  const R x = z.re, y = z.im;
  const R re = std::hypot(x, y) < R(0.5) ? std::log1p(x * (2 + x) + y * y) / 2
                                         : std::log(std::hypot(1 + x, y));
  return {re, std::atan2(y, 1 + x)};
}

// z / |z|; zero stays zero (its signs kept), NaN parts give NaN, infinite parts their direction.
template <class R>
CUJAX_HD inline PartsOf<R> sign(PartsOf<R> z) {
  if (std::isnan(z.re) || std::isnan(z.im)) return {R(NAN), R(NAN)};
  if (z.re == 0 && z.im == 0) return z;
  if (std::isinf(z.re) || std::isinf(z.im)) {
    const R re = std::isinf(z.re) ? std::copysign(R(1), z.re) : R(0);
    const R im = std::isinf(z.im) ? std::copysign(R(1), z.im) : R(0);
    const R n = std::hypot(re, im);
    return {re / n, im / n};
  }
  const R n = std::hypot(z.re, z.im);
  return {z.re / n, z.im / n};
}

// Whether maximum (larger) or minimum picks x over y: by (real, imaginary); a NaN part wins.
template <class R>
CUJAX_HD inline bool picks_first(PartsOf<R> x, PartsOf<R> y, bool larger) {
  if (std::isnan(x.re) || std::isnan(x.im)) return true;
  if (std::isnan(y.re) || std::isnan(y.im)) return false;
  const bool x_larger = x.re > y.re || (x.re == y.re && x.im >= y.im);
  return x_larger == larger;
}

// Rounded products, sums and differences that the device compiler may not fuse into an FMA.
#ifdef __CUDA_ARCH__
__device__ inline float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ inline double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ inline float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ inline double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ inline float sub_rn(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ inline double sub_rn(double a, double b) {
  return __dsub_rn(a, b);
}
#else
template <class R>
inline R mul_rn(R a, R b) {
  return a * b;
}  // the host build targets no FMA
template <class R>
inline R add_rn(R a, R b) {
  return a + b;
}
template <class R>
inline R sub_rn(R a, R b) {
  return a - b;
}
#endif

// One term of a complex dot product in the operand's part type R, as the CPU backend's
// std::complex<R> computes `acc += x * y`: the product (ac - bd, ad + bc), each operation
// rounded, no FMA. Finite values give the CPU's bits; std::complex's recovery of an infinite
// product whose parts came out NaN is not repeated.
template <class R>
CUJAX_HD inline void accumulate_product(R& acc_re, R& acc_im, R xr, R xi, R yr, R yi) {
  acc_re = add_rn(acc_re, sub_rn(mul_rn(xr, yr), mul_rn(xi, yi)));
  acc_im = add_rn(acc_im, add_rn(mul_rn(xr, yi), mul_rn(xi, yr)));
}

}  // namespace cujax::cplx
