// jit: trace a function once per signature with abstract values, compile it, cache it, and
// run it asynchronously. As in JAX, the cache key is the tree structure of the arguments, each
// leaf's shape, dtype and weak type, and the values of static arguments; a miss traces,
// lowers and compiles, and can be logged with the reason (which leaf changed from what to
// what).
//
//   auto f = cujax::jit([](const Array& x, const Array& y) { return x * y + 1.0; });
//   Array z = f(x, y);                                    // compiles on the first call
//   auto lowered = f.lower(ShapeDtype{{32, 128}, DType::F32}, ShapeDtype{{32, 128}, DType::F32});
//   std::string text = lowered.as_text();                 // StableHLO, parses back
//   auto compiled = lowered.compile();                    // ahead of time; call compiled(x, y)
//
// Arguments that are not Arrays (or trees of them) are static: their values key the cache and
// the function sees them as they are. JitOptions::static_argnums makes Array arguments static
// too (their values are then known while tracing).
#pragma once

#include <any>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cujax/array.h"
#include "cujax/devices.h"
#include "cujax/profiler.h"
#include "cujax/runtime/spmd.h"
#include "cujax/sharding.h"
#include "cujax/trace/trace.h"
#include "cujax/tree.h"

namespace cujax {

namespace profiler {
struct MemoryProfile;
}

struct JitOptions {
  std::string name = "fn";                   // shown in logs and as the module name (jit_<name>)
  std::vector<int> static_argnums;           // Array arguments whose values key the cache
  std::vector<int> donate_argnums;           // arguments whose buffers the call may consume
  std::vector<std::string> arg_names;        // names for cache-miss messages (default arg0, ...)
  std::string platform = default_backend();  // the backend that compiles and runs it
  // Per argument (all its leaves), the sharding the program expects; unset: the argument's
  // own (an unsharded argument is replicated). Arrays of another sharding are resharded.
  std::vector<std::optional<Sharding>> in_shardings;
  // Per output leaf; unset: what sharding propagation gives.
  std::vector<std::optional<Sharding>> out_shardings;
};

// Compile logging, as jax_log_compiles and jax_explain_cache_misses; also switched on by
// CUJAX_LOG_COMPILES=1 and CUJAX_EXPLAIN_CACHE_MISSES=1.
void set_log_compiles(bool on);
bool log_compiles();
void set_explain_cache_misses(bool on);
bool explain_cache_misses();
// Compilations by every jitted function since start-up.
int64_t global_compile_count();

// The persistent compilation cache (jax_compilation_cache_dir): optimized programs on disk,
// keyed by the traced module's text, the platform and the cujax version, so a restarted
// process skips the IR passes. Off when the directory is empty; CUJAX_COMPILATION_CACHE_DIR
// sets it at start-up.
void set_compilation_cache_dir(const std::string& dir);
std::string compilation_cache_dir();
int64_t persistent_cache_hits();

struct CostAnalysis {
  double flops = 0;
  double transcendentals = 0;
  double bytes_accessed = 0;
};

struct MemoryAnalysis {
  int64_t argument_size_in_bytes = 0;
  int64_t output_size_in_bytes = 0;
  int64_t alias_size_in_bytes = 0;
  int64_t temp_size_in_bytes = 0;
  int64_t generated_code_size_in_bytes = 0;
  int64_t peak_memory_in_bytes = 0;
};

namespace trace {

struct LeafInfo {
  std::string path;  // "arg0", "arg1[2]", "arg2.w"
  ShapeDtype aval;
  std::shared_ptr<const Sharding> sharding;  // of a sharded argument (or its in_shardings)
  std::shared_ptr<const Sharding> placed;    // the array's own, replicated too (while tracing)
};

// What a call looks like to the cache.
struct Signature {
  std::string structure;  // tree structure with static values
  std::vector<LeafInfo> leaves;
  std::vector<bool> static_leaf;  // Array leaves of static arguments (value-keyed)
  std::vector<int> arg_of_leaf;   // argument number of each leaf
  std::string settings;           // trace_settings() when the call was made
  std::string key;
};

// Settings that change what a function traces to (random's jax_threefry_partitionable) key
// the jit cache too (DESIGN.md decision 5): a flipped setting traces and compiles again.
// `value` gives the setting's current value; registered once per setting name.
void register_trace_setting(const std::string& name, std::function<std::string()> value);
// "name=value;..." of the registered settings, in name order.
std::string trace_settings();
// Whoever changes a registered setting's value calls this, so that calls which skip building
// their signature (JitCore::repeat) notice the change.
void trace_setting_changed();
uint64_t trace_settings_generation();

// A compiled program with its calling convention.
struct CompiledProgram {
  std::shared_ptr<runtime::Executable> executable;
  std::string text;  // StableHLO after the IR passes
  std::vector<ShapeDtype> in_avals;
  std::vector<ShapeDtype> out_avals;
  std::vector<bool> donated;  // per dynamic input leaf
  std::string platform;
  CostAnalysis cost;
  MemoryAnalysis memory;
  // The plan's buffers live at the peak (profiler::device_memory_profile lists it while the
  // program lives).
  std::shared_ptr<const profiler::MemoryProfile> memory_profile;
  double trace_seconds = 0;
  double compile_seconds = 0;
  // Sharded programs (the module had mhlo.num_partitions): the partitioned executable, the
  // global ids of the devices that run its partitions (this process runs those it owns) and
  // the shardings of its arguments and results.
  std::shared_ptr<runtime::SpmdExecutable> spmd;
  std::vector<int> devices;
  std::vector<HloSharding> in_shardings;
  std::vector<HloSharding> out_shardings;
};

// The non-template part of jit: signatures, the cache, compilation and execution.
class JitCore {
 public:
  explicit JitCore(JitOptions options);
  const JitOptions& options() const { return options_; }

  // Builds the signature of a flattened call. `arg_of_leaf[i]` is the argument number of leaf i.
  Signature signature(const std::string& structure, const std::vector<Array>& leaves,
                      const std::vector<std::string>& paths,
                      const std::vector<int>& arg_of_leaf) const;

  struct Entry {
    std::shared_ptr<const CompiledProgram> program;
    std::any out_structure;
  };
  const Entry* find(const std::string& key) const;
  // Logs the miss (with its reason), runs the IR passes, compiles, caches.
  const Entry& add(const Signature& sig, std::unique_ptr<ir::Module> module, std::any out_structure,
                   const std::vector<Array>& out_leaves, double trace_seconds);
  size_t cache_size() const { return cache_.size(); }
  int64_t compile_count() const { return compile_count_; }
  // The program the latest call ran, for its partitioned run's statistics.
  void set_last(std::shared_ptr<const CompiledProgram> program) { last_ = std::move(program); }
  std::optional<runtime::SpmdStats> last_spmd_stats() const {
    if (!last_ || !last_->spmd) return std::nullopt;
    return last_->spmd->last_stats();
  }
  // The fast path of a call whose arguments are all Arrays: the entry of the previous call when
  // each argument has the same aval and sharding and no trace setting changed since, else
  // nullptr (the caller then builds the signature). remember() records a call for it.
  const Entry* repeat(std::span<const Array* const> args) const;
  void remember(std::span<const Array* const> args, const Entry* entry);
  // Per dynamic leaf: whether its argument is in donate_argnums.
  std::vector<bool> donated_leaves(const Signature& sig) const;
  // "argument x: f32[32,128] -> f32[17,128]" against the closest previous signature.
  std::string explain_miss(const Signature& sig) const;

 private:
  JitOptions options_;
  std::map<std::string, Entry> cache_;
  std::vector<Signature> seen_;
  int64_t compile_count_ = 0;
  struct Repeat {
    std::vector<ShapeDtype> avals;
    std::vector<std::shared_ptr<const Sharding>> shardings;
    uint64_t settings_generation = 0;
    const Entry* entry = nullptr;
  } repeat_;
  std::shared_ptr<const CompiledProgram> last_;
};

// Runs passes and compiles a traced module (used by jit and by Lowered::compile). A
// partitioned module runs on `devices` (global ids in partition order; empty: 0..n-1).
std::shared_ptr<CompiledProgram> compile_module(std::unique_ptr<ir::Module> module,
                                                const std::string& platform,
                                                const std::vector<bool>& donated,
                                                std::vector<int> devices = {});
// The devices of the shardings of a call's arguments and outputs, which must all be the same
// list (JAX's incompatible-devices error otherwise); empty when nothing is sharded.
std::vector<int> program_devices(const Signature& sig, const JitOptions& options);
// Outputs keep the weak types they had in the trace (jit(f)(x) * 2 promotes as f(x) * 2 does).
void set_output_weak_types(CompiledProgram& program, const std::vector<Array>& out_leaves);
// Dispatches a compiled program on dynamic input leaves; results are ready later.
std::vector<Array> execute(const CompiledProgram& program, const std::vector<Array>& inputs);
// Marks arguments as donated (jax.buffer_donor) in the module's signature.
void mark_donated(ir::Module& module, const std::vector<bool>& donated);
// Writes the arguments' and results' shardings (mhlo.sharding) and mhlo.num_partitions, as
// JAX lowers a jit of sharded arguments.
void mark_shardings(ir::Module& module, const Signature& sig, const JitOptions& options);
std::string print(const ir::Module& module);
std::unique_ptr<ir::Module> reparse(const std::string& text);
// An abstract Array of `aval` with no value, standing for an argument of lower().
Array placeholder(const ShapeDtype& aval);
void check_compiled_inputs(const CompiledProgram& program, const std::vector<Array>& leaves,
                           const std::vector<std::string>& paths);

// Flattens the arguments tuple: leaves, their paths and argument numbers, and the structure.
template <class Tuple>
void flatten_arguments(const Tuple& args, const std::vector<std::string>& names,
                       std::vector<Array>& leaves, std::vector<std::string>& paths,
                       std::vector<int>& arg_of_leaf, std::string& structure) {
  struct Flatten final : TreeVisitor {
    std::vector<Array>& leaves;
    std::vector<std::string>& paths;
    std::vector<int>& arg_of_leaf;
    std::string& structure;
    std::vector<std::string> path{""};
    std::vector<int> index{0};
    std::vector<bool> keyed{false};
    int arg = 0;
    Flatten(std::vector<Array>& l, std::vector<std::string>& p, std::vector<int>& a, std::string& s)
        : leaves(l), paths(p), arg_of_leaf(a), structure(s) {}
    std::string child_path() {
      if (path.size() == 1) return path.back();
      if (keyed.back()) return path.back();
      return path[path.size() - 2] + "[" + std::to_string(index.back()) + "]";
    }
    void advance() {
      ++index.back();
      if (keyed.back()) path.back() = path[path.size() - 2];
    }
    void open(const std::string& kind) override {
      structure += kind + "(";
      const std::string p = child_path();
      path.push_back(p);
      index.push_back(0);
      keyed.push_back(false);
    }
    void key(const std::string& k) override {
      structure += k + "=";
      keyed.back() = true;
      path.back() = path[path.size() - 2] + "." + k;
    }
    void close() override {
      structure += ")";
      path.pop_back();
      index.pop_back();
      keyed.pop_back();
      if (path.size() > 1) advance();
    }
    void leaf(Array& a) override {
      structure += "*,";
      leaves.push_back(a);
      paths.push_back(child_path());
      arg_of_leaf.push_back(arg);
      if (path.size() > 1) advance();
    }
    void static_leaf(const std::string& repr) override {
      structure += "s:" + repr + ",";
      if (path.size() > 1) advance();
    }
  } flatten(leaves, paths, arg_of_leaf, structure);
  Tuple copy = args;
  std::apply(
      [&](auto&... a) {
        ((flatten.path[0] = flatten.arg < static_cast<int>(names.size())
                                ? names[flatten.arg]
                                : "arg" + std::to_string(flatten.arg),
          tree_visit(a, flatten), ++flatten.arg),
         ...);
      },
      copy);
}

}  // namespace trace

// A traced, not yet compiled function: its StableHLO and calling convention.
template <class Out>
class Compiled;

template <class Out>
class Lowered {
 public:
  Lowered(std::unique_ptr<ir::Module> module, std::string text, Out out_structure,
          std::vector<ShapeDtype> in_avals, std::vector<bool> donated, std::string platform,
          std::vector<int> devices = {})
      : module_(std::move(module)),
        text_(std::move(text)),
        out_structure_(std::move(out_structure)),
        in_avals_(std::move(in_avals)),
        donated_(std::move(donated)),
        platform_(std::move(platform)),
        devices_(std::move(devices)) {}
  // The module as JAX's Lowered.as_text() prints it; parse_module reads it back.
  const std::string& as_text() const { return text_; }
  const ir::Module& module() const { return *module_; }
  // The output tree with abstract leaves (what a call returns, shaped).
  const Out& out_tree() const { return out_structure_; }
  const std::vector<ShapeDtype>& in_avals() const { return in_avals_; }
  Compiled<Out> compile() const;

 private:
  std::shared_ptr<ir::Module> module_;
  std::string text_;
  Out out_structure_;
  std::vector<ShapeDtype> in_avals_;
  std::vector<bool> donated_;
  std::string platform_;
  std::vector<int> devices_;  // of a partitioned program (the compiler's device assignment)
};

// A compiled function: calling it runs without tracing or compiling.
template <class Out>
class Compiled {
 public:
  Compiled(std::shared_ptr<const trace::CompiledProgram> program, Out out_structure)
      : program_(std::move(program)), out_structure_(std::move(out_structure)) {}

  template <class... Args>
  Out operator()(const Args&... args) const {
    std::vector<Array> leaves;
    std::vector<std::string> paths;
    std::vector<int> arg_of_leaf;
    std::string structure;
    trace::flatten_arguments(std::tuple<Args...>(args...), {}, leaves, paths, arg_of_leaf,
                             structure);
    check_inputs(leaves, paths);
    return tree_unflatten(out_structure_, trace::execute(*program_, leaves));
  }
  const std::string& as_text() const { return program_->text; }
  CostAnalysis cost_analysis() const { return program_->cost; }
  MemoryAnalysis memory_analysis() const { return program_->memory; }
  const std::vector<ShapeDtype>& in_avals() const { return program_->in_avals; }
  const std::vector<ShapeDtype>& out_avals() const { return program_->out_avals; }

 private:
  void check_inputs(const std::vector<Array>& leaves, const std::vector<std::string>& paths) const;
  std::shared_ptr<const trace::CompiledProgram> program_;
  Out out_structure_;
};

template <class Out>
void Compiled<Out>::check_inputs(const std::vector<Array>& leaves,
                                 const std::vector<std::string>& paths) const {
  trace::check_compiled_inputs(*program_, leaves, paths);
}

template <class Out>
Compiled<Out> Lowered<Out>::compile() const {
  // Compile from the printed text: the Lowered stays usable and the program is exactly what
  // as_text() shows.
  auto program = trace::compile_module(trace::reparse(text_), platform_, donated_, devices_);
  trace::set_output_weak_types(*program, tree_leaves(out_structure_));
  return Compiled<Out>(std::move(program), out_structure_);
}

template <class F>
class Jitted {
 public:
  Jitted(F fn, JitOptions options)
      : fn_(std::move(fn)), core_(std::make_shared<trace::JitCore>(std::move(options))) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    using Out = std::decay_t<std::invoke_result_t<const F&, const Args&...>>;
    // Inside another trace, a jitted function is inlined into the outer program.
    if (trace::current_trace()) return Out(fn_(args...));
    constexpr bool all_arrays = (std::is_same_v<Args, Array> && ...);
    if constexpr (all_arrays && sizeof...(Args) > 0) {
      const Array* list[] = {&args...};
      if (const trace::JitCore::Entry* e = core_->repeat(list)) {
        core_->set_last(e->program);
        return tree_unflatten(std::any_cast<const Out&>(e->out_structure),
                              trace::execute(*e->program, {args...}));
      }
    }
    std::tuple<Args...> tuple(args...);
    std::vector<Array> leaves;
    std::vector<std::string> paths;
    std::vector<int> arg_of_leaf;
    std::string structure;
    trace::flatten_arguments(tuple, core_->options().arg_names, leaves, paths, arg_of_leaf,
                             structure);
    const trace::Signature sig = core_->signature(structure, leaves, paths, arg_of_leaf);
    const trace::JitCore::Entry* entry = core_->find(sig.key);
    if (!entry) {
      const auto t0 = std::chrono::steady_clock::now();
      auto [module, out] = trace_to_module<Out>(tuple, sig);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::vector<Array> out_leaves = tree_leaves(out);
      entry = &core_->add(sig, std::move(module), std::any(std::move(out)), out_leaves, secs);
    }
    std::vector<Array> dynamic;
    for (size_t i = 0; i < leaves.size(); ++i)
      if (!sig.static_leaf[i]) dynamic.push_back(leaves[i]);
    if constexpr (all_arrays && sizeof...(Args) > 0) {
      const Array* list[] = {&args...};
      core_->remember(list, entry);
    }
    core_->set_last(entry->program);
    return tree_unflatten(std::any_cast<const Out&>(entry->out_structure),
                          trace::execute(*entry->program, dynamic));
  }

  // Traces with abstract arguments: ShapeDtype leaves (or trees of them) stand for arrays.
  template <class... Specs>
  auto lower(const Specs&... specs) const {
    auto args = std::make_tuple(to_abstract(specs)...);
    using Out = std::decay_t<decltype(std::apply(fn_, args))>;
    std::vector<Array> leaves;
    std::vector<std::string> paths;
    std::vector<int> arg_of_leaf;
    std::string structure;
    trace::flatten_arguments(args, core_->options().arg_names, leaves, paths, arg_of_leaf,
                             structure);
    const trace::Signature sig = core_->signature(structure, leaves, paths, arg_of_leaf);
    auto [module, out] = trace_to_module<Out>(args, sig);
    std::string text = trace::print(*module);
    std::vector<ShapeDtype> in_avals;
    for (const auto& l : sig.leaves) in_avals.push_back(l.aval);
    return Lowered<Out>(std::move(module), std::move(text), std::move(out), std::move(in_avals),
                        core_->donated_leaves(sig), core_->options().platform,
                        trace::program_devices(sig, core_->options()));
  }

  const JitOptions& options() const { return core_->options(); }
  size_t cache_size() const { return core_->cache_size(); }
  int64_t compile_count() const { return core_->compile_count(); }
  // Wall time and time in collectives of the latest call, when it ran a partitioned program
  // (sharded arguments); nullopt after a one-device call. Partitioned calls run synchronously,
  // so the figures are complete when the call returns.
  std::optional<runtime::SpmdStats> last_spmd_stats() const { return core_->last_spmd_stats(); }

 private:
  // A ShapeDtype argument becomes a placeholder Array of that aval (never read).
  static Array to_abstract(const ShapeDtype& s) { return trace::placeholder(s); }
  template <class T>
  static const T& to_abstract(const T& v) {
    return v;
  }

  template <class Out, class Tuple>
  std::pair<std::unique_ptr<ir::Module>, Out> trace_to_module(const Tuple& args,
                                                              const trace::Signature& sig) const {
    const profiler::Span span = profiler::stage_span("trace", core_->options().name);
    trace::TraceContext tc("jit_" + core_->options().name);
    trace::TraceScope scope(&tc);
    size_t i = 0;
    auto tracers = tree_map(
        [&](const Array& a) -> Array {
          const size_t leaf = i++;
          if (sig.static_leaf[leaf]) return a;
          return tc.add_argument(sig.leaves[leaf].aval, sig.leaves[leaf].path);
        },
        args);
    Out out = std::apply(fn_, tracers);
    auto module = tc.finish(tree_leaves(out));
    trace::mark_donated(*module, core_->donated_leaves(sig));
    trace::mark_shardings(*module, sig, core_->options());
    return {std::move(module), std::move(out)};
  }

  F fn_;
  std::shared_ptr<trace::JitCore> core_;
};

template <class F>
Jitted<F> jit(F fn, JitOptions options = {}) {
  return Jitted<F>(std::move(fn), std::move(options));
}

}  // namespace cujax
