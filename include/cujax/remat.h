// jax.remat / jax.checkpoint: under grad the intermediates of f are not kept for the backward
// pass; the backward recomputes them from f's arguments and pulls the cotangents back through
// the recomputation. Less memory for more compute.
//
//   auto block = cujax::remat([](const Array& x, const Array& w) {
//     return jnp::tanh(jnp::matmul(x, w));
//   });
//   auto g = cujax::grad([&](const Array& w) { return jnp::sum(block(block(x, w), w)); })(w);
//
// JAX's options as a struct: remat(f, {.prevent_cse = false, .policy =
// checkpoint_policies::dots_saveable}). A policy says which results of f's ops are saved
// instead of recomputed (JAX's jax.checkpoint_policies): nothing_saveable (the default),
// everything_saveable, dots_saveable, dots_with_no_batch_dims_saveable, or any predicate on the
// recorded op (its StableHLO name and attributes). prevent_cse puts the recomputation's inputs
// behind an optimization_barrier so that common-subexpression elimination cannot merge it with
// the forward computation (which would keep the intermediates alive after all).
//
// JAX's other name, jax.checkpoint, is spelled jax::ad_checkpoint::checkpoint here (JAX's
// jax.ad_checkpoint.checkpoint): cujax::checkpoint is the namespace of the checkpoint files, as
// Orbax's. f takes pytrees of Arrays and returns a pytree of Arrays. Parameters to
// differentiate go in as arguments: a rematted f that closes over a value being differentiated
// is refused under grad, naming the value's type.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "cujax/grad.h"
#include "cujax/tree.h"

namespace cujax {

// Whether a recorded op's results may be saved for the backward pass (JAX's policy(prim,
// *avals, **params), with the StableHLO op for the primitive and its parameters).
using CheckpointPolicy = std::function<bool(const ir::Operation& op)>;

namespace checkpoint_policies {
inline bool everything_saveable(const ir::Operation&) {
  return true;
}
inline bool nothing_saveable(const ir::Operation&) {
  return false;
}
// stablehlo.dot_general and stablehlo.convolution results.
bool dots_saveable(const ir::Operation& op);
// dot_general results without batch dimensions (matmuls of weights, not attention scores).
bool dots_with_no_batch_dims_saveable(const ir::Operation& op);
inline bool checkpoint_dots(const ir::Operation& op) {
  return dots_saveable(op);
}
inline bool checkpoint_dots_with_no_batch_dims(const ir::Operation& op) {
  return dots_with_no_batch_dims_saveable(op);
}
}  // namespace checkpoint_policies

struct RematOptions {
  bool prevent_cse = true;
  CheckpointPolicy policy = nullptr;  // none: nothing_saveable
};

namespace trace {
// f on the leaves of its arguments, giving its output leaves, rematted: outside a
// differentiated trace f(args); under one, f is recorded as a custom function whose backward
// replays its ops (the saved ones excepted) and differentiates the replay.
std::vector<Array> remat_call(const std::function<std::vector<Array>(const std::vector<Array>&)>& f,
                              const std::vector<Array>& args, const RematOptions& options);
}  // namespace trace

template <class F>
auto remat(F f, RematOptions options = {}) {
  return [f, options](const auto&... args) {
    using Out = std::decay_t<decltype(f(args...))>;
    const auto in = std::make_tuple(args...);
    // Held by the function as vmap may call it again later (remat of a vmapped function).
    auto structure = std::make_shared<std::optional<Out>>();
    const std::vector<Array> outs = trace::remat_call(
        [f, in, structure](const std::vector<Array>& leaves) {
          Out out = std::apply(f, tree_unflatten(in, leaves));
          *structure = out;
          return tree_leaves(out);
        },
        tree_leaves(in), options);
    return tree_unflatten(**structure, outs);
  };
}

namespace ad_checkpoint {
// jax.checkpoint / jax.ad_checkpoint.checkpoint, the same as cujax::remat.
template <class F>
auto checkpoint(F f, RematOptions options = {}) {
  return cujax::remat(std::move(f), std::move(options));
}
template <class F>
auto remat(F f, RematOptions options = {}) {
  return cujax::remat(std::move(f), std::move(options));
}
}  // namespace ad_checkpoint

}  // namespace cujax
