// Training a module as Flax NNX does: nnx.value_and_grad / nnx.grad differentiate a loss
// function of the module with respect to its parameters (splitting and merging its state for
// the caller), and nnx.Optimizer(model, tx) keeps the optimizer state and updates the module in
// place.
//
//   auto loss_fn = [](MLP& model, const Array& x, const Array& y) {
//     return jnp::mean(jnp::square(model(x) - y));
//   };
//   nnx::Optimizer optimizer(model, optax::adam(1e-3));
//   auto grad_fn = nnx::value_and_grad(loss_fn);      // make once: it compiles once per shape
//   auto [loss, grads] = grad_fn(model, x, y);         // grads: a State of the model's Params
//   optimizer.update(grads);
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <type_traits>
#include <utility>

#include "cujax/grad.h"
#include "cujax/nnx/module.h"
#include "cujax/optax.h"

namespace cujax::nnx {

// nnx.Optimizer(model, tx, wrt=nnx.Param): the optimizer state (tx.init of the selected
// variables) and the model it updates.
namespace detail {
struct OptimizerAccess;
}

class Optimizer {
 public:
  template <class M>
  Optimizer(M& model, optax::GradientTransformation tx, Filter wrt = VariableKind::Param)
      : Optimizer(static_cast<Module&>(model), state(model, wrt), std::move(tx), wrt) {}

  // One step (Flax's optimizer.update(grads)): the updates of tx applied to the model's
  // selected variables, and the optimizer state advanced. `grads` has the paths of
  // state(model, wrt). Runs as one jitted step, compiled once per signature.
  void update(const State& grads);
  // Flax >= 0.11 spells it optimizer.update(model, grads); `model` must be this optimizer's.
  void update(Module& model, const State& grads);

  Module& model() const { return *model_; }
  const optax::OptState& opt_state() const { return opt_state_; }
  // Updates applied so far (Flax's optimizer.step).
  int64_t step() const { return step_; }

 private:
  friend struct detail::OptimizerAccess;  // nnx::jit swaps the state in and out
  Optimizer(Module& model, const State& params, optax::GradientTransformation tx, Filter wrt);
  Module* model_;
  Filter wrt_;
  optax::OptState opt_state_;
  int64_t step_ = 0;
  std::function<std::pair<State, optax::OptState>(const State&, const optax::OptState&,
                                                  const State&)>
      step_fn_;
};

namespace detail {
// The module a differentiated function runs on: a static argument of the jitted gradient, so
// its cache is keyed on the module's address.
template <class M>
struct ModuleRef {
  M* module;
  friend std::ostream& operator<<(std::ostream& os, const ModuleRef& r) {
    return os << "module@" << static_cast<const void*>(r.module);
  }
};

template <class F>
auto module_value_and_grad(F f, Filter wrt) {
  // (params, other variables, module, args...) -> ((loss, other variables after f), d/d params)
  auto with_state = [f, wrt](const State& params, const State& rest, const auto& ref,
                             const auto&... args) {
    auto& model = *ref.module;
    State all = params;
    for (const auto& [path, value] : rest) all.set(path, value);
    return functional_call(model, all, wrt.complement(), [&] { return Array(f(model, args...)); });
  };
  auto vg = cujax::value_and_grad(std::move(with_state), argnums<0>, has_aux);
  return [vg, wrt](auto& model, const auto&... args) {
    using M = std::remove_reference_t<decltype(model)>;
    const State params = state(model, wrt);
    const State rest = state(model, wrt.complement());
    auto [value_and_rest, grads] = vg(params, rest, ModuleRef<M>{&model}, args...);
    auto& [value, new_rest] = value_and_rest;
    // Variables f changed (RNG counts, batch statistics) go back into the module, as Flax does.
    // Tracers may only go into a module whose state was swapped in by a trace (nnx::jit,
    // functional_call), which restores it afterwards; else they would stay behind.
    bool swapped_in = false;
    for (const auto& [path, p] : params) swapped_in = swapped_in || p.is_tracer();
    if (!value.is_tracer() || swapped_in) update(model, new_rest);
    return std::make_pair(value, grads);
  };
}
}  // namespace detail

// nnx.value_and_grad(f)(model, args...) -> (f(model, args...), gradient with respect to the
// variables `wrt` selects, as a State). f takes the module (its concrete type) and returns a
// scalar. Make the function once and call it every step: it is jitted and cached per module
// and argument signature.
template <class F>
auto value_and_grad(F f, Filter wrt = VariableKind::Param) {
  return detail::module_value_and_grad(std::move(f), wrt);
}

// nnx.grad(f)(model, args...): the gradient alone.
template <class F>
auto grad(F f, Filter wrt = VariableKind::Param) {
  return [vg = detail::module_value_and_grad(std::move(f), wrt)](auto& model, const auto&... args) {
    return vg(model, args...).second;
  };
}

}  // namespace cujax::nnx
