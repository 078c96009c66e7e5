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

}  // namespace cujax::cplx
