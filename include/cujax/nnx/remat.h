// nnx.remat (Flax NNX's lifted jax.checkpoint): remat(f)(model, args...) runs f(model, args...)
// with the module's variables and the Array leaves of args as the rematted function's
// arguments, so under nnx::value_and_grad the gradients with respect to the parameters flow
// through it and the backward recomputes f's intermediates instead of keeping them.
//
//   auto block = nnx::remat([](MLP& m, const Array& x) { return m(x); },
//                           {.policy = cujax::checkpoint_policies::dots_saveable});
//   auto loss = [&](MLP& m, const Array& x) { return jnp::mean(block(m, x)); };
//   auto [value, grads] = nnx::value_and_grad(loss)(model, x);
//
// Variables f changes (batch statistics, RNG counts) go back into the module afterwards, as
// Flax does; they are outputs of the rematted function like its result.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cujax/nnx/module.h"
#include "cujax/remat.h"

namespace cujax::nnx {

template <class F>
auto remat(F f, RematOptions options = {}) {
  return [f, options](auto& model, const auto&... args) {
    using Out = std::decay_t<decltype(f(model, args...))>;
    const State before = state(model);
    std::vector<std::string> paths;
    std::vector<Array> leaves;
    for (const auto& [path, value] : before) {
      paths.push_back(path);
      leaves.push_back(value);
    }
    const size_t n_state = leaves.size();
    const auto in = std::make_tuple(args...);
    for (const Array& a : tree_leaves(in)) leaves.push_back(a);
    // Held by the function as vmap may call it again later.
    auto structure = std::make_shared<std::optional<Out>>();
    auto changed = std::make_shared<std::vector<std::string>>();
    auto* module = &model;
    const std::vector<Array> outs = trace::remat_call(
        [f, module, paths, n_state, in, structure, changed](const std::vector<Array>& xs) {
          auto& m = *module;
          State swapped;
          for (size_t i = 0; i < n_state; ++i) swapped.set(paths[i], xs[i]);
          const std::vector<Array> rest(xs.begin() + static_cast<ptrdiff_t>(n_state), xs.end());
          auto [out, after] = functional_call(m, swapped, Filter{}, [&] {
            return std::apply([&](const auto&... a) { return f(m, a...); },
                              tree_unflatten(in, rest));
          });
          *structure = out;
          std::vector<Array> ys = tree_leaves(out);
          changed->clear();
          for (size_t i = 0; i < n_state; ++i)
            if (after.at(paths[i]).impl() != xs[i].impl()) {
              changed->push_back(paths[i]);
              ys.push_back(after.at(paths[i]));
            }
          return ys;
        },
        leaves, options);
    const size_t n_out = outs.size() - changed->size();
    State updates;
    for (size_t k = 0; k < changed->size(); ++k) updates.set((*changed)[k], outs[n_out + k]);
    if (updates.size() > 0) update(model, updates);
    return tree_unflatten(
        **structure,
        std::vector<Array>(outs.begin(), outs.begin() + static_cast<ptrdiff_t>(n_out)));
  };
}

}  // namespace cujax::nnx
