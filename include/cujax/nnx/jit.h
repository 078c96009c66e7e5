// nnx.jit: jit of functions that take modules and optimizers by reference, as Flax NNX's
// nnx.jit does. Their state enters the compiled program as arguments and whatever the function
// changes (parameters after optimizer.update, optimizer state, batch statistics, RNG counts,
// caches) is written back after each call, so a whole training step is one program:
//
//   auto train_step = nnx::jit([](MLP& model, nnx::Optimizer& optimizer, const Array& x,
//                                 const Array& y) {
//     auto [loss, grads] = nnx::value_and_grad(loss_fn)(model, x, y);
//     optimizer.update(grads);
//     return loss;
//   });
//   Array loss = train_step(model, optimizer, x, y);   // traced and compiled once per shape
//
// The cache is keyed on each module's and optimizer's address, on the shapes and dtypes of
// their state and on the modules' static attributes (deterministic, use_running_average...),
// as Flax keys it on the graph definition: model.eval() after a training step traces again.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cujax/jit.h"
#include "cujax/nnx/module.h"
#include "cujax/nnx/training.h"
#include "cujax/trace/trace.h"

namespace cujax::nnx {
namespace detail {

struct OptimizerAccess {
  static State& opt_state(Optimizer& o) { return o.opt_state_; }
};

// An argument of nnx::jit as the jitted function receives it: a module's or an optimizer's
// state (traced) and its address (a static leaf), or the argument itself.
template <class M>
struct ModuleArg {
  State state;
  M* module;
  // Its static attributes at the call (modes, rates): static leaves of the cache key.
  std::vector<std::pair<std::string, std::string>> attributes;
};
struct OptimizerArg {
  State opt_state;
  Array step;
  Optimizer* optimizer;
};

template <class T>
constexpr bool is_module_v = DerivedModule<std::remove_cvref_t<T>>;
template <class T>
constexpr bool is_optimizer_v = std::same_as<std::remove_cvref_t<T>, Optimizer>;

template <class T>
auto lift(T& arg) {
  using U = std::remove_cvref_t<T>;
  if constexpr (is_module_v<T>) {
    static_assert(!std::is_const_v<T>, "nnx::jit: pass modules by non-const reference");
    return ModuleArg<U>{state(arg), &arg, arg.static_attributes()};
  } else if constexpr (is_optimizer_v<T>) {
    static_assert(!std::is_const_v<T>, "nnx::jit: pass optimizers by non-const reference");
    return OptimizerArg{arg.opt_state(), arg.step.value, &arg};
  } else {
    return U(arg);
  }
}

// Inside the trace: each module holds its traced state and each optimizer its traced optimizer
// state until the function returns; the destructor puts the concrete values back.
class Swaps {
 public:
  template <class M>
  void add(const ModuleArg<M>& a) {
    for (const auto& s : modules_)
      if (&s.first == static_cast<Module*>(a.module))
        throw Error("nnx.jit: the same module is passed twice");
    modules_.emplace_back(*a.module, std::make_unique<StateSwap>(*a.module, a.state));
  }
  void add(const OptimizerArg& a) {
    Optimizer& o = *a.optimizer;
    optimizers_.push_back({&o, OptimizerAccess::opt_state(o), o.step.value});
    OptimizerAccess::opt_state(o) = a.opt_state;
    o.step.value = a.step;
  }
  template <class T>
  void add(const T&) {}

  // Every optimizer's model must be passed too: its update writes the model's parameters,
  // which must be traced values of this call rather than the live module's.
  void check_optimizer_models() const {
    for (const auto& o : optimizers_) {
      bool found = false;
      for (const auto& m : modules_) found = found || &m.first == &o.optimizer->model();
      if (!found)
        throw Error(
            "nnx.jit: an Optimizer is passed without its model; pass the model as an argument "
            "too, so that its updated parameters come out of the program");
    }
  }
  // The state of every module and optimizer after the function, and each optimizer's step, in
  // argument order.
  std::vector<State> module_states() const {
    std::vector<State> out;
    for (const auto& m : modules_) out.push_back(m.second->collect(Filter()));
    return out;
  }
  std::vector<State> optimizer_states() const {
    std::vector<State> out;
    for (const auto& o : optimizers_) out.push_back(OptimizerAccess::opt_state(*o.optimizer));
    return out;
  }
  std::vector<Array> optimizer_steps() const {
    std::vector<Array> out;
    for (const auto& o : optimizers_) out.push_back(o.optimizer->step.value);
    return out;
  }
  ~Swaps() {
    for (auto& o : optimizers_) {
      OptimizerAccess::opt_state(*o.optimizer) = std::move(o.opt_state);
      o.optimizer->step.value = std::move(o.step);
    }
  }

 private:
  struct SavedOptimizer {
    Optimizer* optimizer;
    State opt_state;
    Array step;
  };
  std::vector<std::pair<Module&, std::unique_ptr<StateSwap>>> modules_;
  std::vector<SavedOptimizer> optimizers_;
};

template <class M>
M& unlift(ModuleArg<M>& a) {
  return *a.module;
}
inline Optimizer& unlift(OptimizerArg& a) {
  return *a.optimizer;
}
template <class T>
T& unlift(T& a) {
  return a;
}

}  // namespace detail

// nnx.jit(f): f takes modules (their concrete types) and Optimizers by non-const reference and
// any other arguments as cujax::jit does. Returns a callable with the same parameters.
template <class F>
auto jit(F f, JitOptions options = {}) {
  auto traced = [f](auto... lifted) {
    detail::Swaps swaps;
    (swaps.add(lifted), ...);
    swaps.check_optimizer_models();
    auto out = f(detail::unlift(lifted)...);
    return std::make_tuple(std::move(out), swaps.module_states(), swaps.optimizer_states(),
                           swaps.optimizer_steps());
  };
  if (options.name.empty()) options.name = "nnx_jit";
  auto jitted = cujax::jit(std::move(traced), std::move(options));
  return [f, jitted](auto&&... args) {
    // Inside another trace the function is inlined, as cujax::jit does.
    if (trace::current_trace()) return f(args...);
    // Named references, not a structured binding: clang before 16 cannot capture bindings.
    auto result = jitted(detail::lift(args)...);
    auto& out = std::get<0>(result);
    auto& module_states = std::get<1>(result);
    auto& optimizer_states = std::get<2>(result);
    auto& steps = std::get<3>(result);
    size_t m = 0, o = 0;
    auto write_back = [&](auto& arg) {
      if constexpr (detail::is_module_v<decltype(arg)>) {
        update(arg, module_states[m++]);
      } else if constexpr (detail::is_optimizer_v<decltype(arg)>) {
        detail::OptimizerAccess::opt_state(arg) = optimizer_states[o];
        arg.step.value = steps[o];
        ++o;
      }
    };
    (write_back(args), ...);
    return out;
  };
}

}  // namespace cujax::nnx

template <class M>
struct cujax::TreeTraits<cujax::nnx::detail::ModuleArg<M>> {
  static void visit(cujax::nnx::detail::ModuleArg<M>& a, TreeVisitor& vis) {
    vis.open("module");
    vis.key("state");
    tree_visit(a.state, vis);
    vis.key("at");
    std::ostringstream at;
    at << static_cast<const void*>(a.module);
    vis.static_leaf(at.str());
    vis.key("attributes");
    vis.open("attributes");
    for (const auto& [path, value] : a.attributes) {
      vis.key(path);
      vis.static_leaf(value);
    }
    vis.close();
    vis.close();
  }
};
template <>
struct cujax::TreeTraits<cujax::nnx::detail::OptimizerArg> {
  static void visit(cujax::nnx::detail::OptimizerArg& a, TreeVisitor& vis) {
    vis.open("optimizer");
    vis.key("opt_state");
    tree_visit(a.opt_state, vis);
    vis.key("step");
    tree_visit(a.step, vis);
    vis.key("at");
    std::ostringstream at;
    at << static_cast<const void*>(a.optimizer);
    vis.static_leaf(at.str());
    vis.close();
  }
};
