// jax.remat (jax.checkpoint) for a function of Arrays returning one Array: under grad the
// intermediates of f are not kept for the backward pass; the backward recomputes f from its
// arguments and pulls the cotangent back through the recomputation. Less memory for more compute.
// (JAX's other name, checkpoint, is cujax::checkpoint, the namespace of the checkpoint files.)
// Parameters to differentiate go in as arguments: like a custom_vjp, a rematted f that closes
// over a value being differentiated is refused under grad, naming the value's type.
//
//   auto block = cujax::remat([](const Array& x, const Array& w) {
//     return jnp::tanh(jnp::matmul(x, w));
//   });
//   auto g = cujax::grad([&](const Array& w) { return jnp::sum(block(block(x, w), w)); })(w);
#pragma once

#include <tuple>
#include <utility>
#include <vector>

#include "cujax/grad.h"

namespace cujax {
namespace detail {

template <size_t>
using ArrayAt = Array;

template <class F, size_t... I>
std::vector<Array> remat_bwd(const F& f, const std::vector<Array>& residuals, const Array& g,
                             std::index_sequence<I...>) {
  const auto cts =
      trace::VjpImpl<F, ArrayAt<I>...>{f}(std::tuple<ArrayAt<I>...>(residuals[I]...), g);
  return {std::get<I>(cts)...};
}

}  // namespace detail

template <class F>
auto remat(F f) {
  return [f](const auto&... args) -> Array {
    constexpr size_t n = sizeof...(args);
    auto fwd = [f](const auto&... xs) {
      // The arguments are the only residuals.
      return std::pair<Array, std::vector<Array>>(f(xs...), std::vector<Array>{Array(xs)...});
    };
    auto bwd = [f](const std::vector<Array>& residuals, const Array& g) {
      return detail::remat_bwd(f, residuals, g, std::make_index_sequence<n>());
    };
    return custom_vjp(f, std::move(fwd), std::move(bwd))(args...);
  };
}

}  // namespace cujax
