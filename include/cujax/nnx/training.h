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
//
// argnums as Flax's: nnx::value_and_grad(loss_fn, cujax::argnums<0, 1>)(model, x, y) gives
// (loss, std::tuple(State grads of the model, d loss / d x)).
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
  // Flax's optimizer.step: the updates applied so far, an OptState variable holding a u32
  // scalar that update() advances (inside the program under nnx::jit). nnx::state(optimizer)
  // holds it, so it is checkpointed with the optimizer state.
  Variable step;

 private:
  friend struct detail::OptimizerAccess;  // nnx::jit swaps the state in and out
  friend State state(Optimizer& optimizer);
  friend void update(Optimizer& optimizer, const State& state);
  Optimizer(Module& model, const State& params, optax::GradientTransformation tx, Filter wrt);
  Module* model_;
  Filter wrt_;
  optax::OptState opt_state_;
  std::function<std::pair<State, optax::OptState>(const State&, const optax::OptState&,
                                                  const State&)>
      step_fn_;
};

// nnx.state(optimizer): "step" and the optimizer state under "opt_state.<path>", to checkpoint
// beside the model's state. nnx::update(optimizer, state) puts such a State back (every path
// present, with its shape and dtype), e.g. after restoring a checkpoint.
State state(Optimizer& optimizer);
void update(Optimizer& optimizer, const State& state);

namespace detail {
// The module a differentiated function runs on: a static argument of the jitted gradient, so
// its cache is keyed on the module's address.
// Its static attributes are part of the key, so a mode change (model.train()/eval()) traces
// again.
template <class M>
struct ModuleRef {
  M* module;
  std::string attributes;
  friend std::ostream& operator<<(std::ostream& os, const ModuleRef& r) {
    return os << "module@" << static_cast<const void*>(r.module) << " attributes "
              << (r.attributes.empty() ? "none" : r.attributes);
  }
};

// f's argument i (0 is the module) as an argument of (params, rest, module, args...).
constexpr int state_argnum(int i) {
  return i == 0 ? 0 : i + 2;
}

// With Aux, f returns (loss, aux) and the result is ((loss, aux), grads). I are Flax's argnums:
// 0 differentiates the module's `wrt` variables, i > 0 f's i-th other argument.
template <bool Aux, class F, int... I>
auto module_value_and_grad(F f, Filter wrt, Argnums<I...> = {}) {
  static_assert(sizeof...(I) > 0 && ((I >= 0) && ...), "nnx::value_and_grad: argnums must be >= 0");
  // (params, other variables, module, args...) -> ((loss, aux and other variables after f),
  // d/d params)
  auto with_state = [f, wrt](const State& params, const State& rest, const auto& ref,
                             const auto&... args) {
    auto& model = *ref.module;
    State all = params;
    for (const auto& [path, value] : rest) all.set(path, value);
    if constexpr (Aux) {
      auto [out, new_rest] =
          functional_call(model, all, wrt.complement(), [&] { return f(model, args...); });
      return std::make_pair(Array(out.first), std::make_pair(out.second, new_rest));
    } else {
      return functional_call(model, all, wrt.complement(),
                             [&] { return Array(f(model, args...)); });
    }
  };
  auto vg = cujax::value_and_grad(std::move(with_state), argnums<state_argnum(I)...>, has_aux);
  return [vg, wrt](auto& model, const auto&... args) {
    using M = std::remove_reference_t<decltype(model)>;
    const State params = state(model, wrt);
    const State rest = state(model, wrt.complement());
    auto [value_and_rest, grads] =
        vg(params, rest, ModuleRef<M>{&model, static_attributes_str(model)}, args...);
    auto& value = value_and_rest.first;
    const State* new_rest;
    if constexpr (Aux)
      new_rest = &value_and_rest.second.second;
    else
      new_rest = &value_and_rest.second;
    // Variables f changed (RNG counts, batch statistics) go back into the module, as Flax does.
    // Tracers may only go into a module whose state was swapped in by a trace (nnx::jit,
    // functional_call), which restores it afterwards; else they would stay behind.
    bool swapped_in = false;
    for (const auto& [path, p] : params) swapped_in = swapped_in || p.is_tracer();
    if (!value.is_tracer() || swapped_in) update(model, *new_rest);
    if constexpr (Aux)
      return std::make_pair(std::make_pair(value, value_and_rest.second.first), grads);
    else
      return std::make_pair(value, grads);
  };
}
}  // namespace detail

// nnx.value_and_grad(f)(model, args...) -> (f(model, args...), gradient with respect to the
// variables `wrt` selects, as a State). f takes the module (its concrete type) and returns a
// scalar. Make the function once and call it every step: it is jitted and cached per module,
// its static attributes (train/eval mode) and argument signature.
template <class F>
auto value_and_grad(F f, Filter wrt = VariableKind::Param) {
  return detail::module_value_and_grad<false>(std::move(f), wrt, argnums<0>);
}
// nnx.value_and_grad(f, argnums=...): the gradient with respect to f's arguments I, where 0 is
// the module (a State of its `wrt` variables) and i > 0 the i-th argument after it (its own tree
// structure); one argnum gives that gradient, several a std::tuple, as cujax::value_and_grad.
template <class F, int... I>
auto value_and_grad(F f, Argnums<I...> a, Filter wrt = VariableKind::Param) {
  return detail::module_value_and_grad<false>(std::move(f), wrt, a);
}
// nnx.value_and_grad(f, has_aux=True): f returns (loss, aux), a pytree aux such as logits;
// the result is ((loss, aux), grads).
template <class F>
auto value_and_grad(F f, HasAux, Filter wrt = VariableKind::Param) {
  return detail::module_value_and_grad<true>(std::move(f), wrt, argnums<0>);
}
template <class F, int... I>
auto value_and_grad(F f, Argnums<I...> a, HasAux, Filter wrt = VariableKind::Param) {
  return detail::module_value_and_grad<true>(std::move(f), wrt, a);
}

// nnx.grad(f)(model, args...): the gradient alone.
template <class F, int... I>
auto grad(F f, Argnums<I...> a, Filter wrt = VariableKind::Param) {
  return [vg = detail::module_value_and_grad<false>(std::move(f), wrt, a)](
             auto& model, const auto&... args) { return vg(model, args...).second; };
}
template <class F>
auto grad(F f, Filter wrt = VariableKind::Param) {
  return grad(std::move(f), argnums<0>, wrt);
}
// nnx.grad(f, has_aux=True): (grads, aux), as jax.grad.
template <class F, int... I>
auto grad(F f, Argnums<I...> a, HasAux, Filter wrt = VariableKind::Param) {
  return [vg = detail::module_value_and_grad<true>(std::move(f), wrt, a)](auto& model,
                                                                          const auto&... args) {
    auto r = vg(model, args...);
    return std::make_pair(std::move(r.second), std::move(r.first.second));
  };
}
template <class F>
auto grad(F f, HasAux, Filter wrt = VariableKind::Param) {
  return grad(std::move(f), argnums<0>, has_aux, wrt);
}

}  // namespace cujax::nnx
