#include "cujax/jit.h"

#include <numeric>

#include "sharding/partition.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>

#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "cujax/ir/verifier.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/buffer.h"
#include "profiler/hooks.h"
#include "trace/analysis.h"
#include "trace/passes.h"

namespace cujax {

namespace {
bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::string(v) != "0" && std::string(v) != "false";
}
std::atomic<bool> log_compiles_flag{env_flag("CUJAX_LOG_COMPILES")};
std::atomic<bool> explain_misses_flag{env_flag("CUJAX_EXPLAIN_CACHE_MISSES")};
std::atomic<int64_t> compiles{0};
std::atomic<int64_t> cache_hits{0};

std::mutex cache_dir_mu;
std::string& cache_dir() {
  static std::string dir = [] {
    const char* v = std::getenv("CUJAX_COMPILATION_CACHE_DIR");
    return std::string(v ? v : "");
  }();
  return dir;
}

// FNV-1a: stable across runs and platforms, unlike std::hash.
std::string stable_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomically(const std::filesystem::path& p, const std::string& text) {
  static std::atomic<int64_t> counter{0};
  const auto tmp =
      p.string() + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) return;  // a cache that cannot be written is only slower
  }
  std::error_code ec;
  std::filesystem::rename(tmp, p, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

std::string sharding_name(const trace::LeafInfo& leaf) {
  return leaf.sharding ? leaf.sharding->str() : "unsharded";
}

std::string avals_list(const std::vector<ShapeDtype>& avals) {
  std::string s = "[";
  for (size_t i = 0; i < avals.size(); ++i) s += (i ? ", " : "") + avals[i].str();
  return s + "]";
}
}  // namespace

void set_log_compiles(bool on) {
  log_compiles_flag = on;
}
bool log_compiles() {
  return log_compiles_flag;
}
void set_explain_cache_misses(bool on) {
  explain_misses_flag = on;
}
bool explain_cache_misses() {
  return explain_misses_flag;
}
int64_t global_compile_count() {
  return compiles;
}
int64_t persistent_cache_hits() {
  return cache_hits;
}

void set_compilation_cache_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(cache_dir_mu);
  cache_dir() = dir;
}

std::string compilation_cache_dir() {
  std::lock_guard<std::mutex> lock(cache_dir_mu);
  return cache_dir();
}

namespace trace {

namespace {

std::mutex& settings_mu() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, std::function<std::string()>>& settings() {
  static std::map<std::string, std::function<std::string()>> s;
  return s;
}

}  // namespace

void register_trace_setting(const std::string& name, std::function<std::string()> value) {
  std::lock_guard<std::mutex> lock(settings_mu());
  settings()[name] = std::move(value);
}

namespace {
std::atomic<uint64_t> settings_generation{0};
}  // namespace

void trace_setting_changed() {
  ++settings_generation;
}
uint64_t trace_settings_generation() {
  return settings_generation.load(std::memory_order_acquire);
}

std::string trace_settings() {
  std::lock_guard<std::mutex> lock(settings_mu());
  std::string out;
  for (const auto& [name, value] : settings()) out += name + "=" + value() + ";";
  return out;
}

JitCore::JitCore(JitOptions options) : options_(std::move(options)) {}

Signature JitCore::signature(const std::string& structure, const std::vector<Array>& leaves,
                             const std::vector<std::string>& paths,
                             const std::vector<int>& arg_of_leaf) const {
  Signature sig;
  sig.structure = structure;
  sig.arg_of_leaf = arg_of_leaf;
  sig.settings = trace_settings();
  sig.key = sig.settings + "|" + structure;
  for (size_t i = 0; i < leaves.size(); ++i) {
    bool is_static = false;
    for (int a : options_.static_argnums) is_static = is_static || a == arg_of_leaf[i];
    std::shared_ptr<const Sharding> sharding;
    const int arg = arg_of_leaf[i];
    if (arg < static_cast<int>(options_.in_shardings.size()) && options_.in_shardings[arg])
      sharding = std::make_shared<Sharding>(*options_.in_shardings[arg]);
    else if (leaves[i].valid() && !leaves[i].is_tracer() && leaves[i].impl()->sharding &&
             !leaves[i].impl()->sharding->hlo(leaves[i].shape()).is_replicated())
      sharding = leaves[i].impl()->sharding;  // replicated ones key as unsharded ones do
    sig.leaves.push_back({paths[i], leaves[i].aval(), sharding, nullptr});
    if (profiler::active() && leaves[i].valid() && !leaves[i].is_tracer())
      sig.leaves.back().placed = leaves[i].impl()->sharding;
    sig.static_leaf.push_back(is_static);
    sig.key += "|" + leaves[i].aval().str();
    // Equivalent shardings (P(None, 'model') and P(None, 'model', None)) share a program: the
    // key is the tile form and the devices, as JAX compares shardings.
    if (sharding) {
      sig.key += "@" + sharding->hlo(leaves[i].shape()).str();
      for (int d : sharding->device_ids()) sig.key += "," + std::to_string(d);
    }
    if (is_static) {
      const HostTensor h = runtime::transfer_to_host(leaves[i].buffer()->wait(), false,
                                                     "static argument " + paths[i]);
      sig.key += "=" + std::to_string(std::hash<std::string_view>{}(
                           std::string_view(static_cast<const char*>(h.data()), h.nbytes())));
    }
  }
  return sig;
}

std::vector<bool> JitCore::donated_leaves(const Signature& sig) const {
  std::vector<bool> donated;
  for (size_t i = 0; i < sig.leaves.size(); ++i) {
    if (sig.static_leaf[i]) continue;
    bool d = false;
    for (int a : options_.donate_argnums) d = d || a == sig.arg_of_leaf[i];
    donated.push_back(d);
  }
  return donated;
}

const JitCore::Entry* JitCore::repeat(std::span<const Array* const> args) const {
  const Repeat& r = repeat_;
  if (!r.entry || args.size() != r.avals.size() ||
      r.settings_generation != trace_settings_generation())
    return nullptr;
  for (size_t i = 0; i < args.size(); ++i) {
    const Array& a = *args[i];
    if (!a.valid() || a.is_tracer() || !(a.aval() == r.avals[i]) ||
        a.impl()->sharding != r.shardings[i])
      return nullptr;
  }
  return r.entry;
}

void JitCore::remember(std::span<const Array* const> args, const Entry* entry) {
  // Static arguments key the cache by value: those calls always build their signature.
  if (!options_.static_argnums.empty()) return;
  repeat_.avals.clear();
  repeat_.shardings.clear();
  for (const Array* a : args) {
    if (!a->valid() || a->is_tracer()) return;
    repeat_.avals.push_back(a->aval());
    repeat_.shardings.push_back(a->impl()->sharding);
  }
  repeat_.settings_generation = trace_settings_generation();
  repeat_.entry = entry;
}

const JitCore::Entry* JitCore::find(const std::string& key) const {
  auto it = cache_.find(key);
  return it == cache_.end() ? nullptr : &it->second;
}

std::string JitCore::explain_miss(const Signature& sig) const {
  if (seen_.empty()) return "never seen function " + options_.name;
  const Signature* closest = nullptr;
  size_t fewest = SIZE_MAX;
  for (const auto& prev : seen_) {
    if (prev.structure != sig.structure || prev.leaves.size() != sig.leaves.size()) continue;
    size_t diffs = 0;
    for (size_t i = 0; i < sig.leaves.size(); ++i)
      diffs += !(prev.leaves[i].aval == sig.leaves[i].aval) +
               (sharding_name(prev.leaves[i]) != sharding_name(sig.leaves[i]));
    if (diffs < fewest) {
      fewest = diffs;
      closest = &prev;
    }
  }
  if (closest && closest->settings != sig.settings)
    return "different trace settings: now " + sig.settings + " and before " + closest->settings;
  if (!closest) {
    // A changed static value (static_argnums, an nnx module's mode) is a differing "s:" token
    // in otherwise equal structures: name it rather than print both structures whole.
    const Signature* nearest = nullptr;
    size_t common = 0;
    for (const auto& prev : seen_) {
      size_t n = 0;
      while (n < prev.structure.size() && n < sig.structure.size() &&
             prev.structure[n] == sig.structure[n])
        ++n;
      if (!nearest || n > common) {
        nearest = &prev;
        common = n;
      }
    }
    auto token = [&](const std::string& s) {
      size_t begin = s.find_last_of("(,", common == 0 ? 0 : common - 1);
      begin = begin == std::string::npos ? 0 : begin + 1;
      const size_t end = s.find_first_of(",)", common);
      return s.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    };
    const std::string was = token(nearest->structure), now = token(sig.structure);
    const size_t colon = now.find("s:");
    if (colon != std::string::npos && colon == was.find("s:") &&
        now.compare(0, colon, was, 0, colon) == 0)
      return "different static value" +
             (colon == 0 ? std::string() : " of " + now.substr(0, colon - 1)) + ": " +
             was.substr(colon + 2) + " -> " + now.substr(colon + 2);
    return "different argument structure: now " + sig.structure + " and before " +
           seen_.back().structure;
  }
  std::string why;
  for (size_t i = 0; i < sig.leaves.size(); ++i) {
    const std::string was = sharding_name(closest->leaves[i]), now = sharding_name(sig.leaves[i]);
    if (was != now)
      why += (why.empty() ? "" : "; ") + std::string("argument ") + sig.leaves[i].path +
             ": sharding " + was + " -> " + now;
    if (closest->leaves[i].aval == sig.leaves[i].aval) continue;
    why += (why.empty() ? "" : "; ") + std::string("argument ") + sig.leaves[i].path + ": " +
           closest->leaves[i].aval.str() + " -> " + sig.leaves[i].aval.str();
  }
  return why.empty() ? "different static argument values" : why;
}

namespace {

// The input shardings of a program called with arrays on a mesh, as a trace event, for the
// doctor's "unsharded-on-mesh" finding.
void note_shardings(const CompiledProgram& program, const Signature& sig) {
  json::Value inputs(json::Value::Array{});
  int64_t mesh_devices = 0;
  for (size_t i = 0; i < sig.leaves.size(); ++i) {
    const LeafInfo& leaf = sig.leaves[i];
    const std::shared_ptr<const Sharding>& sharding = leaf.sharding ? leaf.sharding : leaf.placed;
    if (sig.static_leaf[i] || !sharding) continue;
    mesh_devices = std::max(mesh_devices, sharding->num_devices());
    const HloSharding h = sharding->hlo(leaf.aval.shape);
    inputs.push_back(json::Value::object(
        {{"name", leaf.path},
         {"type", leaf.aval.str()},
         {"bytes", num_elements(leaf.aval.shape) * static_cast<int64_t>(size_of(leaf.aval.dtype))},
         {"sharding", sharding->str()},
         {"replicated", h.is_replicated()},
         {"leading", leaf.aval.shape.empty() ? int64_t{0} : leaf.aval.shape[0]},
         {"split_leading", !h.tiles.empty() && h.tiles[0] > 1}}));
  }
  if (mesh_devices < 2) return;
  const int64_t ran_on = program.spmd ? static_cast<int64_t>(program.devices.size()) : 1;
  profiler::instant("sharding", "shardings " + program.memory_profile->program,
                    json::Value::object({{"program", program.memory_profile->program},
                                         {"devices", mesh_devices},
                                         {"ran_on", ran_on},
                                         {"inputs", std::move(inputs)}}));
}

}  // namespace

const JitCore::Entry& JitCore::add(const Signature& sig, std::unique_ptr<ir::Module> module,
                                   std::any out_structure, const std::vector<Array>& out_leaves,
                                   double trace_seconds) {
  profiler::cache_miss(options_.name, [&] { return explain_miss(sig); });
  if (explain_cache_misses() || log_compiles())
    std::fprintf(stderr, "cujax: TRACING CACHE MISS for %s: %s\n", options_.name.c_str(),
                 explain_miss(sig).c_str());
  if (log_compiles())
    std::fprintf(stderr, "cujax: Finished tracing %s in %.6f sec\n", options_.name.c_str(),
                 trace_seconds);
  auto program = compile_module(std::move(module), options_.platform, donated_leaves(sig),
                                program_devices(sig, options_));
  program->trace_seconds = trace_seconds;
  if (profiler::active()) note_shardings(*program, sig);
  set_output_weak_types(*program, out_leaves);
  if (log_compiles())
    std::fprintf(stderr,
                 "cujax: Compiling %s with global shapes and types %s\n"
                 "cujax: Finished compilation of %s in %.6f sec\n",
                 options_.name.c_str(), avals_list(program->in_avals).c_str(),
                 options_.name.c_str(), program->compile_seconds);
  ++compile_count_;
  seen_.push_back(sig);
  Entry& e = cache_[sig.key];
  e.program = std::move(program);
  e.out_structure = std::move(out_structure);
  return e;
}

std::string print(const ir::Module& module) {
  return ir::print_module(module);
}

std::unique_ptr<ir::Module> reparse(const std::string& text) {
  return ir::parse_module(text);
}

Array placeholder(const ShapeDtype& aval) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = aval;
  return Array(impl);
}

void mark_donated(ir::Module& module, const std::vector<bool>& donated) {
  ir::Function* main = module.lookup("main");
  for (size_t i = 0; i < donated.size() && i < main->arg_attrs.size(); ++i)
    if (donated[i])
      main->arg_attrs[i].push_back({"jax.buffer_donor", ir::Attribute::boolean_attr(true)});
}

void mark_shardings(ir::Module& module, const Signature& sig, const JitOptions& options) {
  ir::Function* main = module.lookup("main");
  // Traced modules say num_partitions = 1; more means with_sharding_constraint set it.
  int64_t n = sharding::num_partitions(module) > 1 ? sharding::num_partitions(module) : 0;
  std::string from = "with_sharding_constraint";
  auto count = [&](const Sharding& s, const std::string& what) {
    const int64_t k = s.num_devices();
    if (n > 0 && k != n)
      throw Error("jit: " + what + " is sharded over " + std::to_string(k) + " devices but " +
                  from + " over " + std::to_string(n));
    if (n == 0) from = what;
    n = k;
  };
  size_t arg = 0;
  main->arg_attrs.resize(main->entry().arguments.size());
  for (size_t i = 0; i < sig.leaves.size(); ++i) {
    if (sig.static_leaf[i]) continue;
    if (const auto& s = sig.leaves[i].sharding) {
      count(*s, "argument " + sig.leaves[i].path);
      main->arg_attrs[arg].push_back(
          {"mhlo.sharding", ir::Attribute::string_attr(s->hlo(sig.leaves[i].aval.shape).str())});
    }
    ++arg;
  }
  main->result_attrs.resize(main->result_types.size());
  for (size_t i = 0; i < options.out_shardings.size() && i < main->result_types.size(); ++i)
    if (const auto& s = options.out_shardings[i]) {
      count(*s, "output " + std::to_string(i));
      main->result_attrs[i].push_back(
          {"mhlo.sharding", ir::Attribute::string_attr(s->hlo(main->result_types[i].shape).str())});
    }
  if (n == 0) return;
  // Unsharded arguments of a sharded program are replicated, as JAX shows them.
  for (auto& attrs : main->arg_attrs) {
    bool has = false;
    for (const auto& a : attrs) has = has || a.name == "mhlo.sharding";
    if (!has) attrs.push_back({"mhlo.sharding", ir::Attribute::string_attr("{replicated}")});
  }
  sharding::set_num_partitions(module, n);
}

std::vector<int> program_devices(const Signature& sig, const JitOptions& options) {
  std::vector<int> devices;
  std::string from;
  auto take = [&](const Sharding& s, const std::string& what) {
    const std::vector<int> ids = s.device_ids();
    if (devices.empty()) {
      devices = ids;
      from = what;
    } else if (ids != devices) {
      auto list = [](const std::vector<int>& v) {
        std::string l;
        for (int d : v) l += (l.empty() ? "cpu:" : ", cpu:") + std::to_string(d);
        return "[" + l + "]";
      };
      throw Error("jit: incompatible devices: " + what + " is on " + list(ids) + " but " + from +
                  " on " + list(devices));
    }
  };
  for (size_t i = 0; i < sig.leaves.size(); ++i)
    if (!sig.static_leaf[i] && sig.leaves[i].sharding)
      take(*sig.leaves[i].sharding, "argument " + sig.leaves[i].path);
  for (size_t i = 0; i < options.out_shardings.size(); ++i)
    if (options.out_shardings[i]) take(*options.out_shardings[i], "output " + std::to_string(i));
  return devices;
}

std::shared_ptr<CompiledProgram> compile_module(std::unique_ptr<ir::Module> module,
                                                const std::string& platform,
                                                const std::vector<bool>& donated,
                                                std::vector<int> devices) {
  const profiler::Span span =
      profiler::compile_span(module->name, platform, compilation_cache_dir());
  const auto t0 = std::chrono::steady_clock::now();
  ir::verify(*module);
  const std::string dir = compilation_cache_dir();
  std::filesystem::path cached;
  if (!dir.empty()) {
    const std::string key = stable_hash(std::string("cujax " CUJAX_VERSION " ") + platform + "\n" +
                                        ir::print_module(*module));
    cached = std::filesystem::path(dir) / (key + ".mlir");
  }
  const std::string hit = cached.empty() ? "" : read_file(cached);
  if (!hit.empty()) {
    module = ir::parse_module(hit);
    ++cache_hits;
    profiler::persistent_cache_hit(module->name);
  } else {
    optimize(*module);
    if (!cached.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      write_file_atomically(cached, ir::print_module(*module));
    }
  }
  auto program = std::make_shared<CompiledProgram>();
  const ir::Function* main = module->lookup("main");
  if (!main) throw Error("compile: module has no @main");
  for (const auto& t : main->arg_types()) program->in_avals.push_back({t.shape, t.dtype, false});
  for (const auto& t : main->result_types) program->out_avals.push_back({t.shape, t.dtype, false});
  program->donated = donated;
  program->donated.resize(program->in_avals.size(), false);
  program->platform = platform;
  if (const int64_t n = sharding::num_partitions(*module); n > 1) {
    auto parts = sharding::partition(*module);
    program->in_shardings = std::move(parts.in);
    program->out_shardings = std::move(parts.out);
    if (devices.empty()) {
      devices.resize(n);
      std::iota(devices.begin(), devices.end(), 0);
    }
    program->spmd = runtime::compile_spmd(runtime::get_backend(platform), *module, devices);
    program->devices = std::move(devices);
  }
  program->text = ir::print_module(*module);
  program->cost = cost_analysis(*module);
  program->memory = memory_analysis(*module);
  program->memory_profile =
      std::make_shared<const profiler::MemoryProfile>(memory_profile(*module, platform));
  profiler::detail::memory_profile(program->memory_profile);
  if (!program->spmd) program->executable = runtime::get_backend(platform).compile(*module, "main");
  // Start the queue dispatch() runs programs on: creating its thread can take milliseconds on a
  // loaded machine, and an ahead-of-time compiled program's first call should only dispatch.
  runtime::device_queue(platform, 0);
  program->compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++compiles;
  return program;
}

void check_compiled_inputs(const CompiledProgram& program, const std::vector<Array>& leaves,
                           const std::vector<std::string>& paths) {
  if (leaves.size() != program.in_avals.size())
    throw Error("compiled function takes " + std::to_string(program.in_avals.size()) +
                " array arguments, got " + std::to_string(leaves.size()));
  for (size_t i = 0; i < leaves.size(); ++i) {
    const ShapeDtype& want = program.in_avals[i];
    const ShapeDtype& got = leaves[i].aval();
    if (got.shape != want.shape || got.dtype != want.dtype)
      throw Error("compiled function called with " + got.str() + " for argument " + paths[i] +
                  ", but it was compiled for " + want.str() +
                  "; a Compiled function never recompiles: lower and compile again for new "
                  "shapes, or use jit");
  }
}

void set_output_weak_types(CompiledProgram& program, const std::vector<Array>& out_leaves) {
  for (size_t i = 0; i < out_leaves.size() && i < program.out_avals.size(); ++i)
    program.out_avals[i].weak_type = out_leaves[i].weak_type();
}

namespace {
// Runs a partitioned program: each partition that this process runs gets its shard of every
// input (resharded on the host when an input's sharding is not the program's); outputs are
// global arrays that hold this process's shards.
std::vector<Array> execute_spmd(const CompiledProgram& program, const std::vector<Array>& inputs) {
  const std::vector<int>& devices = program.devices;
  const std::vector<int> local = program.spmd->local_devices();
  std::vector<std::vector<runtime::DeviceBuffer>> args(local.size());
  std::optional<Mesh> mesh;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& impl = inputs[i].impl();
    const HloSharding& want = program.in_shardings[i];
    if (impl->sharding && impl->sharding->kind() == Sharding::Kind::Named && !mesh)
      mesh = impl->sharding->mesh();
    if (impl->sharding && impl->sharding->device_ids() == devices && !impl->donated &&
        impl->sharding->hlo(inputs[i].shape()) == want) {
      for (size_t k = 0; k < local.size(); ++k) args[k].push_back(impl->shards[local[k]]->wait());
      continue;
    }
    // Resharded through the host: the global value, sliced per device.
    const HostTensor whole = runtime::transfer_to_host(
        inputs[i].buffer()->wait(), false, "argument " + std::to_string(i) + " to reshard");
    const Sharding s = GSPMDSharding(devices, want);
    const std::string platform(program.platform);
    for (size_t k = 0; k < local.size(); ++k)
      args[k].push_back(runtime::transfer_to_device(
          want.is_replicated() ? whole : host_slice(whole, s.shard_index(whole.shape(), local[k])),
          platform, devices[local[k]], false, "a shard of argument " + std::to_string(i)));
  }
  const profiler::Span span = profiler::dispatch_span(
      "jit", program.platform, program.devices.empty() ? 0 : program.devices.front());
  auto results = program.spmd->execute(std::move(args));
  if (!mesh) mesh = Mesh(devices, {static_cast<int64_t>(devices.size())}, {"x"});
  std::vector<Array> outs;
  for (size_t j = 0; j < program.out_avals.size(); ++j) {
    auto impl = std::make_shared<ArrayImpl>();
    impl->aval = program.out_avals[j];
    impl->sharding = std::make_shared<Sharding>(
        sharding_from_hlo(*mesh, impl->aval.shape, program.out_shardings[j]));
    impl->platform = program.platform;
    impl->committed = true;
    impl->shards.resize(devices.size());
    for (size_t k = 0; k < local.size(); ++k)
      impl->shards[local[k]] = std::make_shared<runtime::Buffer>(std::move(results[k][j]));
    outs.emplace_back(impl);
  }
  for (size_t i = 0; i < inputs.size() && i < program.donated.size(); ++i)
    if (program.donated[i]) inputs[i].impl()->donated = true;
  return outs;
}

// A program small enough that running it on the calling thread beats a hand-off to the
// device's worker (the measure of a cheap computation that XLA's CPU client runs inline too).
bool is_cheap(const CompiledProgram& program) {
  return program.cost.flops <= 1e6 && program.cost.bytes_accessed <= double(int64_t{4} << 20);
}
}  // namespace

std::vector<Array> execute(const CompiledProgram& program, const std::vector<Array>& inputs) {
  if (program.spmd) return execute_spmd(program, inputs);
  const runtime::Executable& exe = *program.executable;
  const std::string platform(exe.backend().platform());
  const Placement where = placement_of(inputs, {platform, exe.device(), false}, "jit");
  if (where.platform != platform || where.device != exe.device())
    throw Error("jit: the arguments are committed to " + where.platform + ":" +
                std::to_string(where.device) + ", but the function was compiled for " + platform +
                ":" + std::to_string(exe.device()) +
                "; device_put them there, or jit with JitOptions::platform = \"" + where.platform +
                "\"");
  std::vector<Array> placed;
  placed.reserve(inputs.size());
  for (const auto& a : inputs) placed.push_back(on_device(a, platform, exe.device()));
  std::vector<Array> outs = dispatch(program.executable, placed, program.out_avals, "jit",
                                     program.donated, where.committed, is_cheap(program));
  for (size_t i = 0; i < inputs.size() && i < program.donated.size(); ++i)
    if (program.donated[i] && !inputs[i].impl()->donated) {  // it was copied to the device
      inputs[i].impl()->buffer.reset();
      inputs[i].impl()->donated = true;
    }
  return outs;
}

}  // namespace trace
}  // namespace cujax
