// lgamma, digamma, polygamma, zeta, bessel_i1e and nextafter: one chlo op each, as jax.lax
// lowers them.
#include "cujax/special.h"

#include "lax/util.h"

namespace cujax::lax {

using namespace detail;

namespace {

Array unary_chlo(const std::string& op, const std::string& name, const Array& x) {
  check_valid(op, x);
  check_dtype(op, x, Kinds::Float);
  return trace::bind1(spec(name, x.shape(), x.dtype()), {x});
}

Array binary_chlo(const std::string& op, const std::string& name, const Array& x, const Array& y) {
  check_valid(op, x);
  check_valid(op, y);
  if (x.shape() != y.shape() || x.dtype() != y.dtype())
    fail(op,
         "operands must have the same shape and dtype, got " + type_str(x) + " and " + type_str(y));
  check_dtype(op, x, Kinds::Float, "operands");
  return trace::bind1(spec(name, x.shape(), x.dtype()), {x, y});
}

}  // namespace

Array lgamma(const Array& x) {
  return unary_chlo("lgamma", "chlo.lgamma", x);
}
Array digamma(const Array& x) {
  return unary_chlo("digamma", "chlo.digamma", x);
}
Array polygamma(const Array& m, const Array& x) {
  return binary_chlo("polygamma", "chlo.polygamma", m, x);
}
Array zeta(const Array& x, const Array& q) {
  return binary_chlo("zeta", "chlo.zeta", x, q);
}
Array bessel_i1e(const Array& x) {
  return unary_chlo("bessel_i1e", "chlo.bessel_i1e", x);
}
Array nextafter(const Array& x1, const Array& x2) {
  return binary_chlo("nextafter", "chlo.next_after", x1, x2);
}

}  // namespace cujax::lax
