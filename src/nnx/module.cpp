#include "cujax/nnx/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "cujax/trace/trace.h"

namespace cujax::nnx {

namespace {

// Every live Module and Variable, by address (Module::check_members).
struct Live {
  std::mutex mu;
  std::set<const Module*> modules;
  std::set<const Variable*> variables;
};

Live& live() {
  static Live* l = new Live;  // never destroyed: modules may outlive static destruction order
  return *l;
}

std::string demangle(const char* name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = status == 0 && out ? out : name;
  std::free(out);
  return s;
}

}  // namespace

Variable::Variable() {
  std::lock_guard<std::mutex> lock(live().mu);
  live().variables.insert(this);
}

Variable::Variable(VariableKind kind_, Array value_) : kind(kind_), value(std::move(value_)) {
  std::lock_guard<std::mutex> lock(live().mu);
  live().variables.insert(this);
}

Variable::Variable(const Variable& other) : kind(other.kind), value(other.value) {
  std::lock_guard<std::mutex> lock(live().mu);
  live().variables.insert(this);
}

Variable::~Variable() {
  std::lock_guard<std::mutex> lock(live().mu);
  live().variables.erase(this);
}

Module::Module() {
  std::lock_guard<std::mutex> lock(live().mu);
  live().modules.insert(this);
}

Module::~Module() {
  std::lock_guard<std::mutex> lock(live().mu);
  live().modules.erase(this);
}

void Module::check_members(const void* object, size_t size, const std::type_info& type) {
  if (members_checked_) return;
  // Modules reachable through registered children, this one included.
  std::set<const Module*> registered;
  std::vector<const Module*> todo = {this};
  while (!todo.empty()) {
    const Module* m = todo.back();
    todo.pop_back();
    if (!registered.insert(m).second) continue;
    for (const auto& e : m->entries_)
      if (e.module) todo.push_back(e.module);
  }
  // Anything alive inside this object's bytes is one of its members (or theirs). Registered
  // variables live on the heap, so a Variable in here is never registered.
  const auto* begin = static_cast<const char*>(object);
  const auto* end = begin + size;
  auto inside = [&](const void* p) {
    const auto* c = static_cast<const char*>(p);
    return c >= begin && c < end;
  };
  std::string found;
  size_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(live().mu);
    for (auto it = live().modules.lower_bound(reinterpret_cast<const Module*>(begin));
         it != live().modules.end() && inside(*it); ++it)
      if (!registered.count(*it)) {
        found = demangle(typeid(**it).name());
        offset = static_cast<size_t>(reinterpret_cast<const char*>(*it) - begin);
        break;
      }
    if (found.empty())
      for (auto it = live().variables.lower_bound(reinterpret_cast<const Variable*>(begin));
           it != live().variables.end() && inside(*it); ++it) {
        found = "cujax::nnx::Variable";
        offset = static_cast<size_t>(reinterpret_cast<const char*>(*it) - begin);
        break;
      }
  }
  if (!found.empty()) {
    const std::string owner = demangle(type.name());
    const bool is_variable = found == "cujax::nnx::Variable";
    throw Error("nnx: " + owner + " holds a " + found + " member (at byte " +
                std::to_string(offset) + " of " + owner +
                ") that is not registered, so its variables would be missing from state() and "
                "from training; register it in " +
                owner + "'s constructor with " +
                (is_variable ? std::string("param(\"name\", value) or variable(...) instead of a "
                                           "Variable member")
                             : std::string("child(\"name\", member)")));
  }
  members_checked_ = true;
}

const char* kind_name(VariableKind kind) {
  switch (kind) {
    case VariableKind::Param:
      return "Param";
    case VariableKind::BatchStat:
      return "BatchStat";
    case VariableKind::Cache:
      return "Cache";
    case VariableKind::RngState:
      return "RngState";
    case VariableKind::MetricState:
      return "MetricState";
    case VariableKind::OptState:
      return "OptState";
  }
  return "?";
}

Filter::Filter(std::initializer_list<VariableKind> kinds) : mask_(0) {
  for (VariableKind k : kinds) mask_ |= bit(k);
}

Filter Filter::nothing() {
  return Filter(std::initializer_list<VariableKind>{});
}

void Module::for_each_variable(const std::function<void(const std::string&, Variable&)>& fn,
                               const std::string& prefix) {
  for (auto& e : entries_) {
    const std::string path = prefix.empty() ? e.name : prefix + "." + e.name;
    if (e.var)
      fn(path, *e.var);
    else
      e.module->for_each_variable(fn, path);
  }
}

Variable* Module::find_variable(const std::string& path) {
  Variable* found = nullptr;
  for_each_variable([&](const std::string& p, Variable& v) {
    if (p == path) found = &v;
  });
  return found;
}

Variable* Module::variable(const std::string& name, VariableKind kind, Array value) {
  for (auto& e : entries_)
    if (e.name == name) {
      if (!e.var) throw Error("nnx: '" + name + "' is a child module, not a variable");
      e.var->kind = kind;
      e.var->value = std::move(value);
      return e.var.get();
    }
  entries_.push_back({name, std::make_unique<Variable>(kind, std::move(value)), nullptr});
  return entries_.back().var.get();
}

void Module::child(const std::string& name, Module& module) {
  for (auto& e : entries_)
    if (e.name == name) throw Error("nnx: '" + name + "' is registered twice");
  entries_.push_back({name, nullptr, &module});
}

State state(Module& module, const Filter& filter) {
  State out;
  module.for_each_variable([&](const std::string& path, Variable& v) {
    if (filter.matches(v.kind)) out.set(path, v.value);
  });
  return out;
}

namespace {

// Path -> variable, for the functions that look many paths up.
std::map<std::string, Variable*> variables_by_path(Module& module) {
  std::map<std::string, Variable*> out;
  module.for_each_variable([&](const std::string& path, Variable& v) { out[path] = &v; });
  return out;
}

void check_assignable(const char* what, const std::string& path, const Variable& v,
                      const Array& value) {
  if (!value.valid()) throw Error(std::string(what) + ": no value for '" + path + "'");
  if (value.shape() != v.value.shape() || value.dtype() != v.value.dtype())
    throw Error(std::string(what) + ": '" + path + "' is " + v.value.aval().str() +
                ", the new value is " + value.aval().str());
}

}  // namespace

void update(Module& module, const State& state) {
  const auto vars = variables_by_path(module);
  for (const auto& [path, value] : state) {
    auto it = vars.find(path);
    if (it == vars.end()) throw Error("nnx.update: the module has no variable '" + path + "'");
    check_assignable("nnx.update", path, *it->second, value);
  }
  for (const auto& [path, value] : state) vars.at(path)->value = value;
}

std::pair<GraphDef, std::vector<State>> split(Module& module, const std::vector<Filter>& filters) {
  GraphDef g;
  g.module = &module;
  std::vector<State> states(filters.empty() ? 1 : filters.size());
  module.for_each_variable([&](const std::string& path, Variable& v) {
    g.paths.push_back(path);
    g.kinds.push_back(v.kind);
    g.avals.push_back(v.value.aval());
    if (filters.empty()) {
      states[0].set(path, v.value);
      return;
    }
    for (size_t i = 0; i < filters.size(); ++i)
      if (filters[i].matches(v.kind)) {
        states[i].set(path, v.value);
        return;
      }
  });
  return {std::move(g), std::move(states)};
}

Module& merge(const GraphDef& graphdef, const std::vector<State>& states) {
  if (!graphdef.module) throw Error("nnx.merge: empty GraphDef");
  for (const auto& s : states)
    for (const auto& [path, value] : s)
      if (value.valid() && value.is_tracer())
        throw Error("nnx.merge: '" + path +
                    "' is a tracer (merge was called inside jit, grad or another trace): the "
                    "module would keep it after the trace ends. Inside a trace use "
                    "nnx::functional_call(model, state, fn), which swaps the state in for fn "
                    "and restores the module afterwards");
  State all;
  for (const auto& s : states)
    for (const auto& [path, value] : s) {
      if (all.contains(path)) throw Error("nnx.merge: '" + path + "' is in two states");
      all.set(path, value);
    }
  for (size_t i = 0; i < graphdef.paths.size(); ++i) {
    const std::string& path = graphdef.paths[i];
    if (!all.contains(path)) throw Error("nnx.merge: no value for '" + path + "'");
    const Array& v = all.at(path);
    if (v.shape() != graphdef.avals[i].shape || v.dtype() != graphdef.avals[i].dtype)
      throw Error("nnx.merge: '" + path + "' is " + graphdef.avals[i].str() + " in the graphdef, " +
                  v.aval().str() + " in the state");
  }
  if (all.size() != graphdef.paths.size())
    throw Error("nnx.merge: the states have variables that the graphdef does not");
  update(*graphdef.module, all);
  return *graphdef.module;
}

StateSwap::StateSwap(Module& module, const State& state) : module_(module) {
  const auto vars = variables_by_path(module);
  for (const auto& [path, value] : state) {
    auto it = vars.find(path);
    if (it == vars.end())
      throw Error("nnx.functional_call: the module has no variable '" + path + "'");
    check_assignable("nnx.functional_call", path, *it->second, value);
  }
  module.for_each_variable([&](const std::string& path, Variable& v) {
    saved_.emplace_back(&v, v.value);
    paths_.push_back(path);
    if (state.contains(path)) v.value = state.at(path);
    swapped_in_.push_back(v.value);
  });
}

StateSwap::~StateSwap() {
  for (auto& [var, value] : saved_) var->value = value;
}

State StateSwap::collect(const Filter& filter) const {
  State out;
  for (size_t i = 0; i < saved_.size(); ++i) {
    const Variable& v = *saved_[i].first;
    const bool changed = v.value.impl() != swapped_in_[i].impl();
    if (filter.matches(v.kind))
      out.set(paths_[i], v.value);
    else if (changed)
      throw Error("nnx.functional_call: the function changed " + std::string(kind_name(v.kind)) +
                  " '" + paths_[i] +
                  "', which is not returned; pass a filter that selects it so that its new "
                  "value comes out (and no tracer stays behind)");
  }
  return out;
}

std::vector<std::pair<std::string, ShapeDtype>> eval_shape(
    const std::function<std::unique_ptr<Module>()>& make, const Filter& filter) {
  trace::TraceContext tc("eval_shape");
  trace::TraceScope scope(&tc);
  std::unique_ptr<Module> module = make();
  std::vector<std::pair<std::string, ShapeDtype>> out;
  module->for_each_variable([&](const std::string& path, Variable& v) {
    if (filter.matches(v.kind)) out.emplace_back(path, v.value.aval());
  });
  return out;
}

namespace detail {

std::unique_ptr<Module> build_abstract(const std::function<std::unique_ptr<Module>()>& make) {
  // Abstract values are tracers of a trace that is never current and never ends: any op on
  // one throws as for an escaped tracer, and no later trace can take its address.
  static trace::TraceContext* const abstract_trace = new trace::TraceContext("abstract");
  trace::TraceContext tc("eval_shape");
  trace::TraceScope scope(&tc);
  std::unique_ptr<Module> module = make();
  if (!module) throw Error("nnx.abstract_model: make returned no module");
  module->for_each_variable([&](const std::string&, Variable& v) {
    auto impl = std::make_shared<ArrayImpl>();
    impl->aval = v.value.aval();
    impl->trace = abstract_trace;
    v.value = Array(std::move(impl));
  });
  return module;
}

}  // namespace detail

int64_t count(Module& module, const Filter& filter) {
  int64_t n = 0;
  module.for_each_variable([&](const std::string&, Variable& v) {
    if (filter.matches(v.kind)) n += v.value.size();
  });
  return n;
}

}  // namespace cujax::nnx
