// cujax::nnx modules, as Flax NNX has them: a module owns variables (Param, BatchStat, Cache,
// RngState) and child modules under names, so every variable has a dotted path
// ("blocks.0.attn.query.kernel"). state() extracts variables into a State, update() puts values
// back, split()/merge() separate structure and state, and functional_call() runs code with a
// State swapped in (e.g. tracers inside jit) and restores the module afterwards.
//
//   auto forward = cujax::jit([&](const State& params, const Array& x) {
//     return nnx::functional_call(model, params, [&] { return model(x); });
//   });
//   Array y = forward(nnx::state(model, nnx::VariableKind::Param), x);
#pragma once

#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "cujax/array.h"
#include "cujax/tree.h"

namespace cujax::nnx {

// The variable types of Flax NNX (nnx.Param, nnx.BatchStat, nnx.Cache, nnx.RngState,
// nnx.metrics.MetricState, nnx.OptState).
enum class VariableKind { Param, BatchStat, Cache, RngState, MetricState, OptState };
const char* kind_name(VariableKind kind);  // "Param", ...

// Every live Variable and Module is known by address, so that one held as a member without
// being registered is found when the module's state is first taken (Module::check_members).
struct Variable {
  VariableKind kind = VariableKind::Param;
  Array value;
  Variable();
  Variable(VariableKind kind_, Array value_);
  Variable(const Variable& other);
  Variable& operator=(const Variable&) = default;
  ~Variable();
};

// Selects variables by kind; the default selects every variable (Flax's `...`).
class Filter {
 public:
  Filter() = default;
  Filter(VariableKind kind) : mask_(bit(kind)) {}  // NOLINT: nnx.state(model, nnx.Param)
  Filter(std::initializer_list<VariableKind> kinds);
  static Filter nothing();
  bool matches(VariableKind kind) const { return (mask_ & bit(kind)) != 0; }
  // The variables this filter does not select.
  Filter complement() const {
    Filter f;
    f.mask_ = ~mask_;
    return f;
  }

 private:
  static unsigned bit(VariableKind k) { return 1u << static_cast<unsigned>(k); }
  unsigned mask_ = ~0u;
};

// The value of a static attribute (Flax's non-Variable module attributes: deterministic,
// use_running_average, rate...), as set_attributes() takes it.
using AttributeValue = std::variant<bool, int64_t, double, std::string>;
std::string attribute_str(const AttributeValue& v);  // "true", "3", "0.5", "SAME"

// A module. Subclasses register their variables and children in their constructor; the
// registration order is the order of state(). Modules hold variables by address, so they are
// neither copied nor moved (hold them by value as members or in std::unique_ptr).
class Module {
 public:
  Module();
  virtual ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Throws Error naming the member when the object of type `type` at `object` (`size` bytes,
  // this module) holds a Module or Variable member that is not registered with child(),
  // param() or variable(): its variables would be missing from state() and silently left out
  // of training. state(), split(), functional_call(), Optimizer and value_and_grad call it with
  // the module's static type the first time they take its state. Modules held through pointers
  // (std::unique_ptr members) are not seen.
  void check_members(const void* object, size_t size, const std::type_info& type);

  // Calls fn(path, variable) for every variable, depth first in registration order.
  void for_each_variable(const std::function<void(const std::string&, Variable&)>& fn,
                         const std::string& prefix = "");
  // The variable at a dotted path, or nullptr.
  Variable* find_variable(const std::string& path);
  // Calls fn(path, module) for this module ("") and every module below it, depth first.
  void for_each_module(const std::function<void(const std::string&, Module&)>& fn,
                       const std::string& prefix = "");

  // Flax's Module.set_attributes(filter, raise_if_not_found, **attributes): sets each named
  // static attribute on every module (this one and those below it that `select` accepts, all
  // by default) that registered it. Throws naming the attributes no selected module has when
  // raise_if_not_found, and when a value's type does not fit the attribute.
  using ModulePredicate = std::function<bool(const std::string& path, const Module&)>;
  void set_attributes(const std::vector<std::pair<std::string, AttributeValue>>& attributes,
                      bool raise_if_not_found = true, const ModulePredicate& select = {});
  // model.train(): deterministic = false and use_running_average = false wherever registered
  // (Dropout, BatchNorm), plus `extra`; model.eval(): both true.
  void train(const std::vector<std::pair<std::string, AttributeValue>>& extra = {});
  void eval(const std::vector<std::pair<std::string, AttributeValue>>& extra = {});
  // (path, value) of every static attribute of this module and those below it. They are part of
  // the module's structure (Flax's graphdef): nnx::jit and nnx::value_and_grad key their caches
  // on them, so flipping a mode traces again instead of reusing the other mode's program.
  std::vector<std::pair<std::string, std::string>> static_attributes();

 protected:
  // Registers (or, for an existing name, replaces the value of) a variable.
  Variable* variable(const std::string& name, VariableKind kind, Array value);
  Variable* param(const std::string& name, Array value) {
    return variable(name, VariableKind::Param, std::move(value));
  }
  // Registers a child module whose variables appear under `name.`.
  void child(const std::string& name, Module& module);
  // Registers a static attribute (a member of this module, which must outlive nothing but the
  // module): set_attributes() finds it by name, and jit caches are keyed on its value. Members
  // that change what the module computes (modes, rates, sizes) should be registered.
  void attribute(const std::string& name, bool& member);
  void attribute(const std::string& name, int64_t& member);
  void attribute(const std::string& name, double& member);
  void attribute(const std::string& name, std::string& member);

 private:
  struct Entry {
    std::string name;
    std::unique_ptr<Variable> var;  // set for variables
    Module* module = nullptr;       // set for children
  };
  std::vector<Entry> entries_;
  struct Attribute {
    std::string name;
    std::variant<bool*, int64_t*, double*, std::string*> member;
  };
  std::vector<Attribute> attributes_;
  bool members_checked_ = false;
};

// The module types the template overloads below check (Module& itself has no size to check).
template <class M>
concept DerivedModule = std::derived_from<M, Module> && !std::same_as<M, Module>;

// nnx.set_attributes(model, ...), as Module::set_attributes; `select` picks modules by path and
// type, e.g. nnx::of_type<nnx::Dropout>() as Flax's set_attributes(nnx.Dropout, ...).
inline void set_attributes(Module& module,
                           const std::vector<std::pair<std::string, AttributeValue>>& attributes,
                           bool raise_if_not_found = true,
                           const Module::ModulePredicate& select = {}) {
  module.set_attributes(attributes, raise_if_not_found, select);
}
template <class T>
Module::ModulePredicate of_type() {
  return [](const std::string&, const Module& m) { return dynamic_cast<const T*>(&m) != nullptr; };
}
// The static attributes as one line, "path=value;..." (sorted by registration order).
std::string static_attributes_str(Module& module);

// nnx.state(model, filter): the selected variables' values by path.
State state(Module& module, const Filter& filter = {});
template <DerivedModule M>
State state(M& module, const Filter& filter = {}) {
  module.check_members(&module, sizeof(M), typeid(M));
  return state(static_cast<Module&>(module), filter);
}
// nnx.update(model, state): every path of `state` must name a variable of the same shape and
// dtype.
void update(Module& module, const State& state);

// The structure half of split(): paths, kinds and abstract values of the module's variables,
// bound to the module it came from (C++ modules are not rebuilt from a description).
struct GraphDef {
  Module* module = nullptr;
  std::vector<std::string> paths;
  std::vector<VariableKind> kinds;
  std::vector<ShapeDtype> avals;
};
// nnx.split(model, filters...): one State per filter (a variable goes to the first filter that
// matches it; with no filters, one State of everything).
std::pair<GraphDef, std::vector<State>> split(Module& module,
                                              const std::vector<Filter>& filters = {});
template <DerivedModule M>
std::pair<GraphDef, std::vector<State>> split(M& module, const std::vector<Filter>& filters = {}) {
  module.check_members(&module, sizeof(M), typeid(M));
  return split(static_cast<Module&>(module), filters);
}
// nnx.merge(graphdef, states...): puts the states back into graphdef's module, after checking
// that together they give every variable of the graphdef with its shape and dtype. States that
// hold tracers (merge inside jit or grad, Flax's idiom) are refused, since the module would
// keep them after the trace; use functional_call there.
Module& merge(const GraphDef& graphdef, const std::vector<State>& states);

// Swaps `state` into `module` for its lifetime and restores every variable's previous value
// when destroyed (also on exceptions), so tracers put in under jit never stay in the module.
class StateSwap {
 public:
  StateSwap(Module& module, const State& state);
  ~StateSwap();
  StateSwap(const StateSwap&) = delete;
  StateSwap& operator=(const StateSwap&) = delete;
  // The current values of the variables selected by `filter`; throws when a variable outside
  // it was changed (its new value would be lost, or leak a tracer out of a trace).
  State collect(const Filter& filter) const;

 private:
  Module& module_;
  std::vector<std::pair<Variable*, Array>> saved_;
  std::vector<std::string> paths_;
  std::vector<Array> swapped_in_;
};

// Runs fn() with `state` in `module` and returns its result; the module is restored afterwards.
// fn must not change variables (use the overload with a filter for those it does change).
template <class M, class F>
auto functional_call(M& module, const State& state, F&& fn) {
  if constexpr (DerivedModule<M>) module.check_members(&module, sizeof(M), typeid(M));
  StateSwap swap(module, state);
  auto out = fn();
  swap.collect(Filter::nothing());
  return out;
}
// The same, also returning the values after fn() of the variables `updated` selects (e.g.
// VariableKind::Cache for a decoding step): {fn(), state}.
template <class M, class F>
auto functional_call(M& module, const State& state, const Filter& updated, F&& fn) {
  if constexpr (DerivedModule<M>) module.check_members(&module, sizeof(M), typeid(M));
  StateSwap swap(module, state);
  auto out = fn();
  return std::make_pair(std::move(out), swap.collect(updated));
}

// nnx.eval_shape: builds a module with `make` (returning std::unique_ptr<M>) under a trace, so
// no parameter is computed, and returns the abstract values of the selected variables.
std::vector<std::pair<std::string, ShapeDtype>> eval_shape(
    const std::function<std::unique_ptr<Module>()>& make, const Filter& filter = {});

namespace detail {
std::unique_ptr<Module> build_abstract(const std::function<std::unique_ptr<Module>()>& make);
}  // namespace detail

// The model of Flax's `abstract = nnx.eval_shape(lambda: Model(...))`: `make` (returning
// std::unique_ptr<M>) runs under a trace, so no parameter is computed, and every variable of the
// result holds an abstract value (shape and dtype; computing with one or reading it throws).
// Restore into it as Flax does:
//   auto model = nnx::abstract_model([] { return std::make_unique<CNN>(...); });
//   auto [graphdef, abstract_state] = nnx::split(*model);
//   nnx::merge(graphdef, {checkpointer.restore(dir, abstract_state[0])});  // *model is concrete
template <class Make>
auto abstract_model(Make make) {
  using M = typename std::invoke_result_t<Make&>::element_type;
  static_assert(DerivedModule<M>,
                "nnx::abstract_model: make must return std::unique_ptr<Module type>");
  std::unique_ptr<Module> built =
      detail::build_abstract([&] { return std::unique_ptr<Module>(make()); });
  return std::unique_ptr<M>(static_cast<M*>(built.release()));
}

// The number of elements of the selected variables.
int64_t count(Module& module, const Filter& filter = VariableKind::Param);

}  // namespace cujax::nnx
