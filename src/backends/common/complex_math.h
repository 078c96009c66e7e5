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

struct Parts {
  double re, im;
};

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
