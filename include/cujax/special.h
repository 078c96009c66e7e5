// Special functions under the names jax.lax, jax.numpy and jax.scipy.special give them. The lax
// functions emit chlo ops, as JAX's do (chlo.lgamma, chlo.digamma, ...); the compiler lowers
// them to StableHLO for every backend (src/compiler/chlo_decompose.cpp), and grad
// differentiates them where JAX does.
#pragma once

#include "cujax/array.h"
#include "cujax/numpy.h"

namespace cujax::lax {

// Floating-point operands; binary ones must agree in shape and dtype.
Array lgamma(const Array& x);   // log |Gamma(x)|
Array digamma(const Array& x);  // d/dx lgamma(x); NaN at the poles (0, -1, -2, ...)
// The m-th derivative of digamma; m holds non-negative integer values (NaN elsewhere).
Array polygamma(const Array& m, const Array& x);
// Hurwitz zeta(x, q) = sum over n >= 0 of (q + n)^-x; defined for x > 1.
Array zeta(const Array& x, const Array& q);
Array bessel_i0e(const Array& x);  // exp(-|x|) I0(x)
Array bessel_i1e(const Array& x);  // exp(-|x|) I1(x)
// The next representable value after x1 toward x2 (no gradient, as in JAX).
Array nextafter(const Array& x1, const Array& x2);

}  // namespace cujax::lax

namespace cujax::numpy {

Array nextafter(const ArrayLike& x1, const ArrayLike& x2);

}  // namespace cujax::numpy

// jax.scipy.special: integer inputs promote to the default float type, operands broadcast.
namespace cujax::scipy::special {

Array erf(const ArrayLike& x);
Array erfc(const ArrayLike& x);
Array erfinv(const ArrayLike& x);
Array gammaln(const ArrayLike& x);
Array digamma(const ArrayLike& x);
Array polygamma(const ArrayLike& n, const ArrayLike& x);
Array zeta(const ArrayLike& x, const ArrayLike& q);
Array i0e(const ArrayLike& x);
Array i1e(const ArrayLike& x);

}  // namespace cujax::scipy::special
