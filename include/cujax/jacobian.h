// jax.jacfwd, jax.jacrev, jax.jacobian and jax.hessian for functions of one Array that return
// one Array: the Jacobian has shape f(x).shape + x.shape (JAX's layout).
//
//   auto J = cujax::jacrev(f)(x);      // one VJP per output element, batched by vmap
//   auto J2 = cujax::jacfwd(f)(x);     // one JVP per input element, batched by vmap
//   auto H = cujax::hessian(loss)(x);  // jacfwd(jacrev(loss)): shape x.shape + x.shape
//
// Pytree arguments and outputs, argnums and has_aux are not implemented.
#pragma once

#include <cstdint>
#include <tuple>

#include "cujax/array.h"
#include "cujax/grad.h"
#include "cujax/numpy.h"
#include "cujax/vmap.h"

namespace cujax {
namespace detail {
inline Shape concat_shapes(const Shape& a, const Shape& b) {
  Shape s = a;
  s.insert(s.end(), b.begin(), b.end());
  return s;
}
// The standard basis of `shape`'s space, stacked: (size, *shape).
inline Array basis_of(const Shape& shape, DType dtype) {
  const int64_t n = num_elements(shape);
  return numpy::reshape(numpy::eye(n, std::nullopt, 0, dtype), concat_shapes({n}, shape));
}
}  // namespace detail

// Reverse mode: the rows of the Jacobian are the VJPs of the output basis vectors.
template <class F>
auto jacrev(F f) {
  return [f](const Array& x) {
    auto [y, vjp_fn] = vjp(f, x);
    const Array rows = vmap([vjp_fn](const Array& ct) { return std::get<0>(vjp_fn(ct)); })(
        detail::basis_of(y.shape(), y.dtype()));
    return numpy::reshape(rows, detail::concat_shapes(y.shape(), x.shape()));
  };
}

// Forward mode: the columns of the Jacobian are the JVPs of the input basis vectors.
template <class F>
auto jacfwd(F f) {
  return [f](const Array& x) {
    const int64_t n = x.size();
    const Array cols = vmap([f, x](const Array& t) { return jvp(f, x, t).second; })(
        detail::basis_of(x.shape(), x.dtype()));
    const Shape y_shape(cols.shape().begin() + 1, cols.shape().end());
    const Array mat = numpy::transpose(numpy::reshape(cols, {n, num_elements(y_shape)}));
    return numpy::reshape(mat, detail::concat_shapes(y_shape, x.shape()));
  };
}

// jax.jacobian is jacrev.
template <class F>
auto jacobian(F f) {
  return jacrev(std::move(f));
}

// The Hessian of a scalar function: forward over reverse, as JAX.
template <class F>
auto hessian(F f) {
  return jacfwd(jacrev(std::move(f)));
}

}  // namespace cujax
