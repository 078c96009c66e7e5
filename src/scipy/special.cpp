// jax.scipy.special's error and gamma functions, and jnp.nextafter: NumPy promotion (integers
// to the default float type) and broadcasting, then the lax function.
#include "cujax/special.h"

#include "cujax/lax.h"
#include "numpy/internal.h"

namespace cujax {

namespace {

using numpy::detail::Promote;

Array unary(const char* fn, const ArrayLike& x, Array (*op)(const Array&)) {
  auto p = numpy::detail::promote(fn, {x}, false, Promote::Inexact);
  return numpy::detail::set_weak(op(p.args[0]), p.type.weak_type);
}

Array binary(const char* fn, const ArrayLike& x, const ArrayLike& y,
             Array (*op)(const Array&, const Array&)) {
  auto p = numpy::detail::promote(fn, {x, y}, true, Promote::Inexact);
  return numpy::detail::set_weak(op(p.args[0], p.args[1]), p.type.weak_type);
}

}  // namespace

Array numpy::nextafter(const ArrayLike& x1, const ArrayLike& x2) {
  return binary("nextafter", x1, x2, lax::nextafter);
}

namespace scipy::special {

Array erf(const ArrayLike& x) {
  return unary("erf", x, lax::erf);
}
Array erfc(const ArrayLike& x) {
  return unary("erfc", x, lax::erfc);
}
Array erfinv(const ArrayLike& x) {
  return unary("erfinv", x, lax::erf_inv);
}
Array gammaln(const ArrayLike& x) {
  return unary("gammaln", x, lax::lgamma);
}
Array digamma(const ArrayLike& x) {
  return unary("digamma", x, lax::digamma);
}
Array polygamma(const ArrayLike& n, const ArrayLike& x) {
  return binary("polygamma", n, x, lax::polygamma);
}
Array zeta(const ArrayLike& x, const ArrayLike& q) {
  return binary("zeta", x, q, lax::zeta);
}
Array i0e(const ArrayLike& x) {
  return unary("i0e", x, lax::bessel_i0e);
}
Array i1e(const ArrayLike& x) {
  return unary("i1e", x, lax::bessel_i1e);
}

}  // namespace scipy::special

}  // namespace cujax
