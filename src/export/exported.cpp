#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>

#include "compiler/effect_tokens.h"
#include "compiler/refine_shapes.h"
#include "cujax/core/dynamic_shape.h"
#include "cujax/core/json.h"
#include "cujax/core/sha256.h"
#include "cujax/devices.h"
#include "cujax/export.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/verifier.h"
#include "cujax/jax_export.h"
#include "cujax/runtime/backend.h"
#include "export/jax_convention.h"
#include "export/symbolic_dims.h"

namespace cujax {

struct Exported::Cache {
  std::mutex mu;
  std::shared_ptr<const trace::CompiledProgram> program;
  int lowering_index = 0;  // the platform index a JAX export's @main takes first
  // A shape-polymorphic module: the platform compile chose, and the program of each shapes of
  // the module's inputs it was called with, refined and compiled on the first such call.
  std::string polymorphic_platform;
  std::map<std::vector<Shape>, std::shared_ptr<const trace::CompiledProgram>> by_shapes;
};

namespace {

constexpr std::string_view kMagic = "cujax-exported ";

// The module as cujax calls it: ordered effects' tokens made and dropped inside (JAX's callers
// pass and receive them; cujax's pass arrays only).
std::unique_ptr<ir::Module> module_without_tokens(const std::string& text) {
  return compiler::drop_main_tokens(trace::reparse(text));
}

std::string avals_text(const std::vector<ExportedLeaf>& leaves) {
  std::string s = "(";
  for (size_t i = 0; i < leaves.size(); ++i)
    s += (i ? ", " : "") + leaves[i].path + ": " + leaves[i].aval.str();
  return s + ")";
}

std::string list_text(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "]";
}

// The text's @main must take and return exactly the recorded abstract values (and tokens).
void check_signature(const std::string& name, const std::string& text,
                     const std::vector<ExportedLeaf>& in, const std::vector<ExportedLeaf>& out) {
  std::unique_ptr<ir::Module> module;
  try {
    module = ir::parse_module(text);
    // A shape-polymorphic module is verified once refined to the shapes of a call.
    if (!compiler::has_dynamic_shapes(*module)) ir::verify(*module);
  } catch (const Error& e) {
    throw Error("exported " + name + ": the StableHLO text is invalid: " + e.what());
  }
  const ir::Function* main = module->lookup("main");
  if (!main) throw Error("exported " + name + ": the module has no @main");
  auto check = [&](const char* what, std::vector<ir::Type> types,
                   const std::vector<ExportedLeaf>& leaves) {
    // Ordered effects' tokens are made and dropped by the call (module_without_tokens).
    std::erase_if(types, [](const ir::Type& t) { return t.is_token; });
    bool same = types.size() == leaves.size();
    for (size_t i = 0; same && i < types.size(); ++i)
      same = shape_fits(leaves[i].aval.shape, types[i].shape) &&
             types[i].dtype == leaves[i].aval.dtype;
    if (same) return;
    std::string got = "(";
    for (size_t i = 0; i < types.size(); ++i)
      got += (i ? ", " : "") + ShapeDtype{types[i].shape, types[i].dtype, false}.str();
    throw Error("exported " + name + ": @main " + what + " " + got + ", but the header records " +
                avals_text(leaves));
  };
  check("takes", main->arg_types(), in);
  check("returns", main->result_types, out);
}

json::Value leaves_json(const std::vector<ExportedLeaf>& leaves) {
  json::Value::Array out;
  for (const auto& l : leaves) {
    json::Value::Array shape;
    for (int64_t d : l.aval.shape) shape.emplace_back(d);
    out.push_back(json::Value::object({{"path", l.path},
                                       {"shape", std::move(shape)},
                                       {"dtype", std::string(numpy_name(l.aval.dtype))},
                                       {"weak_type", l.aval.weak_type},
                                       {"sharding", l.sharding}}));
  }
  return json::Value(std::move(out));
}

std::vector<ExportedLeaf> leaves_from_json(const json::Value& v) {
  std::vector<ExportedLeaf> out;
  for (const auto& e : v.as_array()) {
    ExportedLeaf l;
    l.path = e.at("path").as_string();
    for (const auto& d : e.at("shape").as_array()) {
      if (d.as_int() < 0) throw Error("leaf " + l.path + " has a negative dimension");
      l.aval.shape.push_back(d.as_int());
    }
    const std::string& dt = e.at("dtype").as_string();
    const auto dtype = dtype_from_numpy_name(dt);
    if (!dtype) throw Error("leaf " + l.path + " has unknown dtype '" + dt + "'");
    l.aval.dtype = *dtype;
    if (const auto* w = e.get("weak_type")) l.aval.weak_type = w->as_bool();
    if (const auto* s = e.get("sharding")) l.sharding = s->as_string();
    if (l.sharding != "{replicated}")
      throw Error("leaf " + l.path + " has sharding " + l.sharding +
                  "; only single-device ({replicated}) artifacts run here");
    out.push_back(std::move(l));
  }
  return out;
}

std::string header_line(const Exported& e) {
  json::Value::Array platforms;
  for (const auto& p : e.platforms()) platforms.emplace_back(p);
  json::Value header = json::Value::object({
      {"fun_name", e.fun_name()},
      {"platforms", std::move(platforms)},
      {"nr_devices", e.nr_devices()},
      {"in_tree", e.in_tree()},
      {"out_tree", e.out_tree()},
      {"in", leaves_json(e.in_leaves())},
      {"out", leaves_json(e.out_leaves())},
      {"module_bytes", static_cast<int64_t>(e.mlir_module().size())},
  });
  // What the module needs beyond StableHLO (cuDNN attention's custom calls), for readers that
  // do not parse it; absent when nothing.
  const std::vector<std::string> calls = e.cujax_custom_calls();
  if (!calls.empty()) {
    json::Value::Array names;
    for (const auto& c : calls) names.emplace_back(c);
    header.set("cujax_custom_calls", json::Value(std::move(names)));
  }
  return json::dump(header);
}

// Reads up to the next '\n' from `pos`; false when there is none.
bool next_line(std::string_view bytes, size_t& pos, std::string_view& line) {
  const size_t nl = bytes.find('\n', pos);
  if (nl == std::string_view::npos) return false;
  line = bytes.substr(pos, nl - pos);
  pos = nl + 1;
  return true;
}

void write_synced(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw Error(path + ": write failed: " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    throw Error(path + ": fsync failed: " + std::strerror(errno));
}

}  // namespace

Exported::Exported() : cache_(std::make_shared<Cache>()) {}

Exported::Exported(std::string fun_name, std::string text, std::string in_tree,
                   std::vector<ExportedLeaf> in, std::string out_tree,
                   std::vector<ExportedLeaf> out, std::vector<std::string> platforms)
    : fun_name_(std::move(fun_name)),
      text_(std::move(text)),
      in_tree_(std::move(in_tree)),
      in_(std::move(in)),
      out_tree_(std::move(out_tree)),
      out_(std::move(out)),
      platforms_(std::move(platforms)),
      cache_(std::make_shared<Cache>()) {
  if (platforms_.empty()) throw Error("exported " + fun_name_ + ": no platforms given");
  check_signature(fun_name_, text_, in_, out_);
}

std::vector<std::string> Exported::cujax_custom_calls() const {
  std::vector<std::string> out;
  const std::function<void(const ir::Block&)> walk = [&](const ir::Block& b) {
    for (const auto& op : b.ops) {
      if (op->name == "stablehlo.custom_call")
        if (const ir::Attribute* t = op->attr("call_target_name"))
          if (t->text.rfind("cujax.", 0) == 0 &&
              std::find(out.begin(), out.end(), t->text) == out.end())
            out.push_back(t->text);
      for (const auto& r : op->regions)
        for (const auto& blk : r->blocks) walk(*blk);
    }
  };
  const auto module = ir::parse_module(text_);
  for (const auto& f : module->functions)
    for (const auto& blk : f->body.blocks) walk(*blk);
  return out;
}

std::vector<ShapeDtype> Exported::in_avals() const {
  std::vector<ShapeDtype> v;
  for (const auto& l : in_) v.push_back(l.aval);
  return v;
}

std::vector<ShapeDtype> Exported::out_avals() const {
  std::vector<ShapeDtype> v;
  for (const auto& l : out_) v.push_back(l.aval);
  return v;
}

std::vector<std::string> Exported::in_shardings_hlo() const {
  std::vector<std::string> v;
  for (const auto& l : in_) v.push_back(l.sharding);
  return v;
}

std::vector<std::string> Exported::out_shardings_hlo() const {
  std::vector<std::string> v;
  for (const auto& l : out_) v.push_back(l.sharding);
  return v;
}

std::string Exported::checksum() const {
  return sha256_hex(header_line(*this) + "\n" + text_);
}

std::string Exported::serialize() const {
  if (jax_) return jax_bytes_;
  return std::string(kMagic) + std::to_string(kExportFormatVersion) + "\nsha256 " + checksum() +
         "\n" + header_line(*this) + "\n" + text_;
}

Exported Exported::deserialize(std::string_view bytes, const std::string& what) {
  if (bytes.substr(0, kMagic.size()) != kMagic) {
    if (jax_export::is_serialized(bytes)) return from_jax(bytes, what);
    std::string start(bytes.substr(0, 16));
    for (char& c : start)
      if (static_cast<unsigned char>(c) < 32 || static_cast<unsigned char>(c) > 126) c = '?';
    std::string why;
    try {
      jax_export::deserialize(bytes, what);
    } catch (const Error& e) {
      why = e.what();
      why = why.substr(std::min(why.size(), what.size() + 2));
    }
    throw Error(what + ": not a cujax exported artifact (it starts with \"" + start +
                "\", not \"cujax-exported\"), and " + why);
  }
  size_t pos = 0;
  std::string_view line;
  if (!next_line(bytes, pos, line)) throw Error(what + ": truncated in the first line");
  const std::string version(line.substr(kMagic.size()));
  if (version != std::to_string(kExportFormatVersion))
    throw Error(what + ": format version '" + version + "' is not supported (this cujax " +
                CUJAX_VERSION " reads version " + std::to_string(kExportFormatVersion) + ")");
  if (!next_line(bytes, pos, line)) throw Error(what + ": truncated before the checksum line");
  if (line.substr(0, 7) != "sha256 " || line.size() != 7 + 64)
    throw Error(what + ": the second line is not \"sha256 <64 hex digits>\"");
  const std::string recorded(line.substr(7));
  const size_t body_start = pos;
  if (!next_line(bytes, pos, line)) throw Error(what + ": truncated in the JSON header");
  json::Value header;
  try {
    header = json::parse(line, what + " header");
  } catch (const Error& e) {
    throw Error(what + ": corrupt header: " + e.what());
  }
  const std::string_view text = bytes.substr(pos);
  int64_t module_bytes = -1;
  if (const auto* m = header.is_object() ? header.get("module_bytes") : nullptr)
    module_bytes = m->as_int();
  if (module_bytes < 0) throw Error(what + ": corrupt header: no module_bytes");
  if (static_cast<int64_t>(text.size()) < module_bytes)
    throw Error(what + ": truncated: the header promises " + std::to_string(module_bytes) +
                " bytes of StableHLO text, " + std::to_string(text.size()) + " follow");
  if (static_cast<int64_t>(text.size()) > module_bytes)
    throw Error(what + ": " + std::to_string(text.size() - module_bytes) +
                " unexpected bytes after the StableHLO text");
  const std::string actual = sha256_hex(bytes.substr(body_start));
  if (actual != recorded)
    throw Error(what + ": checksum mismatch: recorded sha256 " + recorded + ", contents hash to " +
                actual + " (the artifact is corrupt or was edited)");
  try {
    std::vector<std::string> platforms;
    for (const auto& p : header.at("platforms").as_array()) platforms.push_back(p.as_string());
    if (header.at("nr_devices").as_int() != 1)
      throw Error("nr_devices " + std::to_string(header.at("nr_devices").as_int()) +
                  ": only single-device artifacts run here");
    return Exported(header.at("fun_name").as_string(), std::string(text),
                    header.at("in_tree").as_string(), leaves_from_json(header.at("in")),
                    header.at("out_tree").as_string(), leaves_from_json(header.at("out")),
                    std::move(platforms));
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
}

namespace {

// Writes to a temporary sibling, fsyncs, renames over `path`, syncs the folder.
void save_atomically(const std::string& path, const std::string& bytes) {
  static std::atomic<int64_t> counter{0};
  const std::string tmp =
      path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(counter++);
  try {
    write_synced(tmp, bytes);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw Error(path + ": cannot rename the temporary file into place: " + why);
  }
  // The rename survives a crash once the folder is synced.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

void Exported::save(const std::string& path) const {
  save_atomically(path, serialize());
}

void Exported::save_jax(const std::string& path, const std::string& platform) const {
  save_atomically(path, serialize_jax(platform));
}

Exported Exported::from_module(std::string_view module, const std::string& what) {
  const std::string text =
      ir::is_bytecode(module) ? ir::bytecode_to_stablehlo_text(module, what) : std::string(module);
  std::unique_ptr<ir::Module> parsed;
  try {
    parsed = ir::parse_module(text);
  } catch (const ParseError& e) {
    throw Error(what + ": the StableHLO module is invalid: " + e.what());
  }
  const ir::Function* main = parsed->lookup("main");
  if (!main) throw Error(what + ": the module has no @main to run");
  auto leaves = [](const std::vector<ir::Type>& types, const char* prefix) {
    std::vector<ExportedLeaf> out;
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string path = std::string(prefix) + "[" + std::to_string(i) + "]";
      if (types[i].is_token) continue;  // an ordered effect's: made and dropped by the call
      if (types[i].is_quantized())
        throw Error("@main's " + path + " is not an array cujax can pass (" + types[i].str() + ")");
      out.push_back({path, ShapeDtype{types[i].shape, types[i].dtype, false}});
    }
    return out;
  };
  return Exported("main", text, "", leaves(main->arg_types(), "args"), "",
                  leaves(main->result_types, "result"), {"cpu", "cuda"});
}

Exported Exported::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read exported artifact: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return deserialize(ss.str(), path);
}

void Exported::compile(const std::string& platform) const {
  compile_for(platform, "");
}

void Exported::compile_lowering(const std::string& lowering_platform,
                                const std::string& platform) const {
  if (std::find(platforms_.begin(), platforms_.end(), lowering_platform) == platforms_.end())
    throw Error("exported " + fun_name_ + " has lowerings for " + list_text(platforms_) + ", not " +
                lowering_platform);
  compile_for(platform, lowering_platform);
}

void Exported::compile_for(std::string platform, std::string lowering) const {
  std::lock_guard<std::mutex> lock(cache_->mu);
  std::string chosen = platform;
  const auto available = runtime::available_platforms();
  if (chosen.empty() && !lowering.empty()) {
    // Another platform's lowering runs on the default backend.
    chosen = default_backend();
  } else if (chosen.empty()) {
    // The default backend first, as jax.export's call runs on it, then any other it can use.
    for (const std::string& p : {default_backend(), std::string("cuda"), std::string("cpu")}) {
      const bool listed = std::find(platforms_.begin(), platforms_.end(), p) != platforms_.end();
      const bool present = std::find(available.begin(), available.end(), p) != available.end();
      if (listed && present) {
        chosen = p;
        break;
      }
    }
    if (chosen.empty())
      throw Error("exported " + fun_name_ + " is for platforms " + list_text(platforms_) +
                  ", but this build runs " + list_text(available));
  } else if (lowering.empty() &&
             std::find(platforms_.begin(), platforms_.end(), chosen) == platforms_.end()) {
    throw Error("exported " + fun_name_ + " is for platforms " + list_text(platforms_) + ", not " +
                chosen);
  }
  if (lowering.empty()) lowering = chosen;
  const int index = static_cast<int>(std::find(platforms_.begin(), platforms_.end(), lowering) -
                                     platforms_.begin());
  const std::string compiled =
      cache_->program ? cache_->program->platform : cache_->polymorphic_platform;
  if (!compiled.empty()) {
    if (compiled == chosen && cache_->lowering_index == index) return;
    throw Error("exported " + fun_name_ + " is already compiled for " + compiled + " (lowering " +
                platforms_[static_cast<size_t>(cache_->lowering_index)] + "), not " + chosen +
                " (lowering " + lowering + ")");
  }
  if (jax_ && nr_devices_ > 1) export_detail::check_single_device(fun_name_, text_, nr_devices_);
  const size_t module_inputs_count = (platform_index_ ? 1 : 0) + (jax_ ? kept_.size() : in_.size());
  if (compiler::has_dynamic_shapes(*module_without_tokens(text_))) {  // compiled per input shapes
    cache_->lowering_index = index;
    cache_->polymorphic_platform = chosen;
    return;
  }
  auto program = trace::compile_module(module_without_tokens(text_), chosen,
                                       std::vector<bool>(module_inputs_count, false));
  cache_->lowering_index = index;
  for (size_t i = 0; i < out_.size() && i < program->out_avals.size(); ++i)
    program->out_avals[i].weak_type = out_[i].aval.weak_type;
  cache_->program = std::move(program);
}

bool Exported::is_compiled() const {
  std::lock_guard<std::mutex> lock(cache_->mu);
  return cache_->program != nullptr || !cache_->polymorphic_platform.empty();
}

std::string Exported::compiled_platform() const {
  std::lock_guard<std::mutex> lock(cache_->mu);
  return cache_->program ? cache_->program->platform : cache_->polymorphic_platform;
}

std::shared_ptr<const trace::CompiledProgram> Exported::program_for(
    const std::vector<Array>& args) const {
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (cache_->program) return cache_->program;
  std::vector<Shape> shapes;
  for (const Array& a : args) shapes.push_back(a.shape());
  std::shared_ptr<const trace::CompiledProgram>& p = cache_->by_shapes[shapes];
  if (!p) {
    auto program = trace::compile_module(
        compiler::refine_polymorphic_shapes(*module_without_tokens(text_), shapes),
        cache_->polymorphic_platform, std::vector<bool>(args.size(), false));
    for (size_t i = 0; i < out_.size() && i < program->out_avals.size(); ++i)
      program->out_avals[i].weak_type = out_[i].aval.weak_type;
    p = std::move(program);
  }
  return p;
}

void Exported::check_structure(const std::string& structure) const {
  if (jax_) {
    const std::string want = export_detail::jax_args_structure(jax_->in_tree);
    if (structure != want)
      throw Error("exported " + fun_name_ + " called with arguments of structure " + structure +
                  ", but JAX exported it for " + jax_->in_tree.str() + " (" + want +
                  "); call_flat takes the flat inputs");
    return;
  }
  if (structure != in_tree_)
    throw Error("exported " + fun_name_ + " called with arguments of structure " + structure +
                ", but it was exported for " + in_tree_);
}

namespace {
// A JAX export's symbolic input dimensions ("b", "2*b") against the call's shapes: its
// dimension variables must solve consistently, as jax.export checks them.
void check_symbolic_shapes(const jax_export::Serialized& s, const std::vector<ExportedLeaf>& in,
                           const std::vector<Array>& leaves) {
  std::vector<jax_export::ShapeSpec> specs;
  for (size_t i = 0; i < leaves.size() && i < s.in_avals.size(); ++i)
    if (!s.in_avals[i].static_shape())
      specs.push_back({in[i].path, s.in_avals[i].shape, leaves[i].shape()});
  if (!specs.empty()) jax_export::solve_dimension_vars(specs);
}
}  // namespace

std::vector<Array> Exported::call_flat(const std::vector<Array>& leaves) const {
  if (leaves.size() != in_.size())
    throw Error("exported " + fun_name_ + " takes " + std::to_string(in_.size()) + " arrays " +
                avals_text(in_) + ", got " + std::to_string(leaves.size()));
  for (size_t i = 0; i < leaves.size(); ++i) {
    const ShapeDtype& got = leaves[i].aval();
    if (!shape_fits(got.shape, in_[i].aval.shape) || got.dtype != in_[i].aval.dtype)
      throw Error("exported " + fun_name_ + ": input " + in_[i].path + " is " + got.str() +
                  ", but the function was exported for " + in_[i].aval.str());
  }
  if (jax_) check_symbolic_shapes(*jax_, in_, leaves);
  if (!is_compiled()) compile();
  int lowering_index;
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    lowering_index = cache_->lowering_index;
  }
  if (!jax_) return trace::execute(*program_for(leaves), leaves);
  // JAX's calling convention: the platform's index, then the inputs the module kept.
  std::vector<Array> args;
  if (platform_index_) {
    const HostTensor index = platform_index_dtype_ == DType::I64
                                 ? HostTensor::from_vector<int64_t>({lowering_index}, Shape{})
                                 : HostTensor::from_vector<int32_t>({lowering_index}, Shape{});
    args.push_back(array(index));
  }
  for (int k : kept_) args.push_back(leaves[static_cast<size_t>(k)]);
  return trace::execute(*program_for(args), args);
}

namespace export_detail {

std::vector<ExportedLeaf> leaves_of(const std::vector<std::string>& paths,
                                    const std::vector<ShapeDtype>& avals) {
  if (paths.size() != avals.size())
    throw Error("export_: " + std::to_string(paths.size()) + " leaf paths for " +
                std::to_string(avals.size()) + " abstract values");
  std::vector<ExportedLeaf> out;
  for (size_t i = 0; i < paths.size(); ++i) out.push_back({paths[i], avals[i]});
  return out;
}

std::vector<ShapeDtype> avals_of(const std::vector<Array>& arrays) {
  std::vector<ShapeDtype> out;
  for (const Array& a : arrays) out.push_back(a.aval());
  return out;
}

}  // namespace export_detail
}  // namespace cujax
