// jax.remat (jax.checkpoint) for a function of one Array returning one Array: under grad the
// intermediates of f are not kept for the backward pass; the backward recomputes f from its
// input and pulls the cotangent back through the recomputation. Less memory for more compute.
// (JAX's other name, checkpoint, is cujax::checkpoint, the namespace of the checkpoint files.)
//
//   auto block = cujax::remat([&](const Array& x) { return jnp::tanh(jnp::matmul(x, w)); });
//   auto g = cujax::grad([&](const Array& x) { return jnp::sum(block(block(x))); })(x);
#pragma once

#include <tuple>
#include <utility>
#include <vector>

#include "cujax/grad.h"

namespace cujax {

template <class F>
auto remat(F f) {
  auto fwd = [f](const Array& x) {
    return std::pair<Array, std::vector<Array>>(f(x), {x});  // the input is the only residual
  };
  auto bwd = [f](const std::vector<Array>& residuals, const Array& g) {
    const auto cts = trace::VjpImpl<F, Array>{f}(std::tuple<Array>(residuals[0]), g);
    return std::vector<Array>{std::get<0>(cts)};
  };
  return custom_vjp(f, std::move(fwd), std::move(bwd));
}

}  // namespace cujax
