// jax.jacfwd, jax.jacrev, jax.jacobian and jax.hessian for functions of one Array that return
// one Array: the Jacobian has shape f(x).shape + x.shape (JAX's layout).
//
//   auto J = cujax::jacrev(f)(x);      // one VJP per output element, batched by vmap
//   auto J2 = cujax::jacfwd(f)(x);     // one JVP per input element, batched by vmap
//   auto H = cujax::hessian(loss)(x);  // jacfwd(jacrev(loss)): shape x.shape + x.shape
//
// With argnums the function takes several Arrays: jacrev(f, argnums<0, 1>)(x, y) is the tuple
// (df/dx, df/dy), one argnum gives that Array; has_aux (f returns (y, aux)) gives (J, aux).
// Pytree arguments and outputs are not implemented.
#pragma once

#include <cstdint>
#include <tuple>
#include <utility>

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

namespace detail {
// One Jacobian for one argnum: the tuple's only element, else the tuple.
template <class Tuple>
auto one_or_tuple(Tuple t) {
  if constexpr (std::tuple_size_v<Tuple> == 1)
    return std::get<0>(std::move(t));
  else
    return t;
}
// The rows of each selected argument's Jacobian (stacked VJPs, row p for argnum I[p]) in JAX's
// layout y.shape + x.shape.
template <int... I, class Rows, class Args, size_t... P>
auto reshape_rows(const Rows& rows, const Args& args, const Shape& y_shape,
                  std::index_sequence<P...>) {
  constexpr int argnum[] = {I...};
  return std::make_tuple(numpy::reshape(
      std::get<P>(rows), concat_shapes(y_shape, std::get<argnum[P]>(args).shape()))...);
}
}  // namespace detail

// jacrev(f, argnums<I...>)(args...): f of several Arrays returning one Array; the Jacobian with
// respect to each argument I (a std::tuple for several argnums), from one VJP per output element.
template <class F, int... I>
auto jacrev(F f, Argnums<I...>) {
  static_assert(sizeof...(I) > 0 && ((I >= 0) && ...), "jacrev: argnums must be >= 0");
  return [f](const auto&... args) {
    const auto primals = std::make_tuple(Array(args)...);
    auto [y, vjp_fn] = std::apply([&](const auto&... p) { return vjp(f, p...); }, primals);
    auto rows = vmap([vjp_fn](const Array& ct) {
      const auto cts = vjp_fn(ct);
      return std::make_tuple(std::get<I>(cts)...);
    })(detail::basis_of(y.shape(), y.dtype()));
    return detail::one_or_tuple(detail::reshape_rows<I...>(
        rows, primals, y.shape(), std::make_index_sequence<sizeof...(I)>{}));
  };
}

// jacfwd(f, argnums<I...>)(args...): the same from one JVP per element of each argument I (the
// other arguments' tangents zero).
template <class F, int... I>
auto jacfwd(F f, Argnums<I...>) {
  static_assert(sizeof...(I) > 0 && ((I >= 0) && ...), "jacfwd: argnums must be >= 0");
  return [f](const auto&... args) {
    const auto primals = std::make_tuple(Array(args)...);
    auto jacobian_of = [&]<int J>() {
      const Array& x = std::get<J>(primals);
      const Array cols = vmap([f, primals](const Array& t) {
        auto tangents = std::apply(
            [](const auto&... p) { return std::make_tuple(numpy::zeros_like(p)...); }, primals);
        std::get<J>(tangents) = t;
        return jvp(f, primals, tangents).second;
      })(detail::basis_of(x.shape(), x.dtype()));
      const Shape y_shape(cols.shape().begin() + 1, cols.shape().end());
      const Array mat = numpy::transpose(numpy::reshape(cols, {x.size(), num_elements(y_shape)}));
      return numpy::reshape(mat, detail::concat_shapes(y_shape, x.shape()));
    };
    return detail::one_or_tuple(std::make_tuple(jacobian_of.template operator()<I>()...));
  };
}

// has_aux: f returns (y, aux); the result is (Jacobian(s), aux). f runs once more for aux.
template <class F, int... I>
auto jacrev(F f, Argnums<I...> a, HasAux) {
  return [f, a](const auto&... args) {
    auto value = [f](const auto&... xs) { return Array(f(xs...).first); };
    return std::make_pair(jacrev(value, a)(args...), f(args...).second);
  };
}
template <class F, int... I>
auto jacfwd(F f, Argnums<I...> a, HasAux) {
  return [f, a](const auto&... args) {
    auto value = [f](const auto&... xs) { return Array(f(xs...).first); };
    return std::make_pair(jacfwd(value, a)(args...), f(args...).second);
  };
}
template <class F, int... I>
auto jacobian(F f, Argnums<I...> a) {
  return jacrev(std::move(f), a);
}
template <class F, int... I>
auto jacobian(F f, Argnums<I...> a, HasAux h) {
  return jacrev(std::move(f), a, h);
}

// The Hessian with respect to one argument of a scalar function of several.
template <class F, int I>
auto hessian(F f, Argnums<I> a) {
  return jacfwd(jacrev(std::move(f), a), a);
}

}  // namespace cujax
