// The fuzz targets (targets.h). Each feeds the bytes to the same entry cujax uses on a file or a
// request, then checks what it accepted against a second reading of cujax's own output.
#include "targets.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "checkpoint/kvstore.h"
#include "checkpoint/msgpack_checkpoint.h"
#include "checkpoint/ocdbt.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/zarr.h"
#include "cli/model_dir.h"
#include "cujax/checkpoint.h"
#include "cujax/core/error.h"
#include "cujax/core/json.h"
#include "cujax/core/npy.h"
#include "cujax/core/sha256.h"
#include "cujax/export.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "cujax/jax_export.h"
#include "cujax/models/transformer.h"
#include "cujax/nnx.h"
#include "cujax/serve/engine.h"
#include "cujax/serve/steps.h"
#include "ir/ir_equal.h"
#include "ir/parser_limits.h"
#ifdef CUJAX_FUZZ_HAVE_SERVER
#include "cli/serve_http.h"
#endif

namespace fs = std::filesystem;

namespace cujax::fuzz {
namespace {

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) broken("cannot write " + path.string());
}

// A folder of this process's own, removed at exit.
const fs::path& scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("cujax-fuzz-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(scratch(), ec);
    });
    return d;
  }();
  return dir;
}

bool same_tensor(const HostTensor& a, const HostTensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// The tiny model every model-shaped target uses.
models::TransformerConfig tiny_model_config() {
  models::TransformerConfig c;
  c.name = "fuzz";
  c.vocab_size = 128;
  c.max_len = 128;
  c.d_model = 16;
  c.num_layers = 1;
  c.num_heads = 2;
  c.d_ff = 32;
  return c;
}

// Artifacts and bundles carry "sha256 <hex>" of what follows their second line. The fuzzer
// cannot forge that, so when the second line is a sha256 line it is rewritten to match: the
// inputs reach the header and the members behind the check.
std::string with_checksum(std::string_view bytes) {
  const size_t l1 = bytes.find('\n');
  if (l1 == std::string_view::npos) return std::string(bytes);
  const size_t l2 = bytes.find('\n', l1 + 1);
  if (l2 == std::string_view::npos || bytes.substr(l1 + 1, 7) != "sha256 ")
    return std::string(bytes);
  return std::string(bytes.substr(0, l1 + 1)) + "sha256 " + sha256_hex(bytes.substr(l2 + 1)) +
         std::string(bytes.substr(l2));
}

// ---- StableHLO text: parse, print, parse again to the same module, print to the same text.
void parser_init() {
  // Splats may not expand to more than 64 MiB per input, far below libFuzzer's memory limit.
  ir::detail::set_splat_expansion_limit(uint64_t{64} << 20);
}

void parser_one(std::string_view text) {
  std::unique_ptr<ir::Module> module;
  try {
    module = ir::parse_module(text);
  } catch (const ParseError&) {
    return;
  }
  const std::string printed = ir::print_module(*module);
  std::unique_ptr<ir::Module> again;
  try {
    again = ir::parse_module(printed);
  } catch (const ParseError& e) {
    broken(std::string("the printed module does not parse: ") + e.what() + "\n--- printed:\n" +
           printed);
  }
  ir::equal::Comparer same;
  if (!same.modules(*module, *again))
    broken("the printed module parses to a different module: " + same.why + "\n--- printed:\n" +
           printed);
  const std::string reprinted = ir::print_module(*again);
  if (reprinted != printed)
    broken("printing is not a fixed point\n--- first:\n" + printed + "\n--- second:\n" + reprinted);
}

void parser_seeds(const std::string&) {
  // The parser's seeds are StableHLO files of tests/fixtures (scripts/fuzz.sh copies them).
}

// ---- StableHLO portable artifacts (MLIR bytecode of VHLO): read; what is accepted prints and
// parses back to the same module.
void bytecode_one(std::string_view bytes) {
  const std::unique_ptr<ir::Module> module = ir::read_bytecode(bytes, "fuzz.mlirbc");
  const std::string printed = ir::print_module(*module);
  std::unique_ptr<ir::Module> again;
  try {
    again = ir::parse_module(printed);
  } catch (const ParseError& e) {
    broken(std::string("a read portable artifact prints to text that does not parse: ") + e.what());
  }
  ir::equal::Comparer same;
  if (!same.modules(*module, *again))
    broken("a read portable artifact prints to a different module: " + same.why);
}

void bytecode_seeds(const std::string&) {
  // Portable artifacts StableHLO and JAX wrote (fuzz/corpus/bytecode, from ../shared/interop).
}

// ---- Exported artifacts (jax.export's serialization): read, write, read to the same bytes.
void exported_one(std::string_view bytes) {
  const Exported e = Exported::deserialize(with_checksum(bytes), "fuzz artifact");
  const std::string out = e.serialize();
  const std::string again = Exported::deserialize(out, "reserialized artifact").serialize();
  if (again != out) broken("an artifact's serialization is not a fixed point");
}

void exported_seeds(const std::string&) {
  // The artifacts of tests/fixtures/export (scripts/fuzz.sh copies them).
}

// ---- jax.export's Exported.serialize() (a flatbuffer): what is read verifies, reads again to
// the same record, and its module reaches the bytecode reader (a clean refusal there is fine).
void jax_export_one(std::string_view bytes) {
  const jax_export::Serialized s = jax_export::deserialize(bytes, "fuzz.flatbuffer");
  if (!jax_export::is_serialized(bytes)) broken("read bytes that do not verify");
  const jax_export::Serialized again = jax_export::deserialize(bytes, "fuzz.flatbuffer");
  if (again.function_name != s.function_name || again.in_tree.str() != s.in_tree.str() ||
      again.out_tree.str() != s.out_tree.str() || again.in_avals.size() != s.in_avals.size() ||
      again.mlir_module_serialized != s.mlir_module_serialized)
    broken("reading the same bytes twice gave different records");
  for (const auto* list : {&s.in_shardings, &s.out_shardings})
    for (size_t i = 0; i < list->size(); ++i) try {
        (void)(*list)[i].hlo_text(s.in_avals.size() > i ? s.in_avals[i].shape.size() : 0);
      } catch (const Error&) {
      }
  try {
    const Exported e = Exported::deserialize(bytes, "fuzz.flatbuffer");
    if (e.serialize() != bytes) broken("a JAX export does not serialize to its own bytes");
  } catch (const Error&) {
  }
}

void jax_export_seeds(const std::string&) {
  // Exported.serialize() outputs JAX wrote (fuzz/corpus/jax_export, from ../shared/interop).
}

// ---- .npy: parse, write, parse to the same tensor.
void npy_one(std::string_view bytes) {
  const HostTensor t = parse_npy(std::string(bytes), "fuzz npy");
  const HostTensor back = parse_npy(serialize_npy(t), "reserialized npy");
  if (!same_tensor(t, back)) broken("an .npy file's tensor does not survive serialize_npy");
}

void npy_seeds(const std::string& dir) {
  write_file(fs::path(dir) / "f32_2x3.npy",
             serialize_npy(HostTensor::from_vector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3})));
  write_file(fs::path(dir) / "i64_scalar.npy",
             serialize_npy(HostTensor::from_vector<int64_t>({-7}, Shape{})));
  write_file(fs::path(dir) / "bool_4.npy",
             serialize_npy(HostTensor::from_vector<bool>({true, false, true, true}, Shape{4})));
  write_file(fs::path(dir) / "bf16_2.npy", serialize_npy(HostTensor(DType::BF16, Shape{2})));
  write_file(fs::path(dir) / "u8_empty.npy",
             serialize_npy(HostTensor::from_vector<uint8_t>({}, Shape{0, 3})));
}

// ---- Serving bundles: load_steps from a file (compiles nothing until a step runs).
void bundle_one(std::string_view bytes) {
  const fs::path path = scratch() / "input.serve";
  write_file(path, with_checksum(bytes));
  const serve::ServeSteps steps = serve::load_steps(path.string());
  if (steps.buckets.empty() || steps.buckets.back() != steps.max_seq)
    broken("a loaded bundle's buckets do not end at max_seq");
}

void bundle_seeds(const std::string& dir) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(tiny_model_config(), rngs);
  serve::export_steps(model, nnx::state(model, nnx::VariableKind::Param), /*max_batch=*/2,
                      /*max_seq=*/16, (fs::path(dir) / "tiny.serve").string());
}

// ---- Checkpoint restore: the first byte picks one file of a small checkpoint (metadata JSON,
// .zarray, chunks, _sharding, ...), the rest replaces its contents; then metadata() and
// restore() read the checkpoint.
struct Checkpoint {
  fs::path dir;
  std::vector<fs::path> files;  // sorted
  std::vector<std::string> contents;
  std::vector<std::pair<std::string, ShapeDtype>> target;
  std::vector<HostTensor> values;
};

checkpoint::HostState checkpoint_state() {
  checkpoint::HostState s;
  s.entries.push_back({"layer.kernel",
                       HostTensor::from_vector<float>({1, -2, 3.5f, 4, 0, 6}, Shape{2, 3}),
                       "cpu:0"});
  s.entries.push_back(
      {"layer.bias", HostTensor::from_vector<int32_t>({7, 8, 9}, Shape{3}), "cpu:0"});
  s.entries.push_back({"step", HostTensor::from_vector<int64_t>({42}, Shape{}), "cpu:0"});
  return s;
}

Checkpoint& checkpoint() {
  static Checkpoint c = [] {
    Checkpoint c;
    c.dir = scratch() / "ckpt";
    const checkpoint::HostState s = checkpoint_state();
    // The zarr v2 folders, whose file names are fixed (OCDBT's data files are named at random;
    // the ocdbt target below takes whole databases).
    checkpoint::StandardCheckpointer({.use_ocdbt = false}).save(c.dir.string(), s);
    for (const auto& e : fs::recursive_directory_iterator(c.dir))
      if (e.is_regular_file()) c.files.push_back(e.path());
    std::sort(c.files.begin(), c.files.end());
    for (const auto& f : c.files) c.contents.push_back(read_file(f));
    c.target = checkpoint::StandardCheckpointer().metadata(c.dir.string());
    for (const auto& e : s.entries) c.values.push_back(e.value);
    return c;
  }();
  return c;
}

void checkpoint_init() {
  checkpoint();
}

void checkpoint_one(std::string_view bytes) {
  if (bytes.empty()) return;
  Checkpoint& c = checkpoint();
  const size_t which = static_cast<unsigned char>(bytes[0]) % c.files.size();
  write_file(c.files[which], bytes.substr(1));
  struct Restore {  // puts the file back however the reading ends
    Checkpoint& c;
    size_t which;
    ~Restore() { write_file(c.files[which], c.contents[which]); }
  } restore{c, which};
  const checkpoint::StandardCheckpointer ckpt;
  ckpt.metadata(c.dir.string());
  const State state = ckpt.restore(c.dir.string(), c.target);
  if (state.size() != c.target.size()) broken("restore returned the wrong number of arrays");
}

void checkpoint_seeds(const std::string& dir) {
  const Checkpoint& c = checkpoint();
  for (size_t i = 0; i < c.files.size(); ++i) {
    const std::string name = fs::relative(c.files[i], c.dir).string();
    std::string file = std::to_string(i) + "_" + name;
    for (char& ch : file)
      if (ch == '/') ch = '_';
    write_file(fs::path(dir) / file, std::string(1, static_cast<char>(i)) + c.contents[i]);
  }
}

// ---- The checkpoint formats' readers on whole inputs. OCDBT databases and zarr arrays are
// folders, so those inputs are small archives of files: repeated (u16 LE name length, name,
// u32 LE content length, content), names of [A-Za-z0-9._/-] with no empty or ".." part. An
// input that is no such archive is skipped.

std::string pack_files(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  for (const auto& [name, bytes] : files) {
    out += static_cast<char>(name.size() & 0xff);
    out += static_cast<char>(name.size() >> 8);
    out += name;
    for (int i = 0; i < 4; ++i) out += static_cast<char>((bytes.size() >> (8 * i)) & 0xff);
    out += bytes;
  }
  return out;
}

// Every file under `dir`, named relative to it, for pack_files.
std::vector<std::pair<std::string, std::string>> folder_files(const fs::path& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file())
      files.emplace_back(fs::relative(e.path(), dir).string(), read_file(e.path()));
  std::sort(files.begin(), files.end());
  return files;
}

bool safe_name(std::string_view name) {
  if (name.empty() || name.size() > 200) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != '/')
      return false;
  size_t start = 0;
  while (start <= name.size()) {
    const size_t slash = std::min(name.find('/', start), name.size());
    const std::string_view part = name.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

// Writes the archive's files into a fresh `dir`; false when `bytes` is not an archive.
bool unpack_files(std::string_view bytes, const fs::path& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir);
  size_t at = 0, count = 0;
  while (at < bytes.size()) {
    if (++count > 32 || bytes.size() - at < 2) return false;
    const size_t n = static_cast<unsigned char>(bytes[at]) |
                     static_cast<size_t>(static_cast<unsigned char>(bytes[at + 1])) << 8;
    at += 2;
    if (bytes.size() - at < n + 4) return false;
    const std::string_view name = bytes.substr(at, n);
    at += n;
    size_t len = 0;
    for (int i = 0; i < 4; ++i)
      len |= static_cast<size_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    at += 4;
    if (!safe_name(name) || bytes.size() - at < len) return false;
    const fs::path file = dir / std::string(name);
    fs::create_directories(file.parent_path(), ec);
    if (ec || fs::is_directory(file)) return false;
    write_file(file, bytes.substr(at, len));
    at += len;
  }
  return count > 0;
}

// The shared interop fixtures (../shared/interop), when present, for the seeds.
fs::path interop_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  return fs::path(env ? env : "../shared") / "interop";
}

void write_seed(const std::string& dir, const std::string& name, std::string_view bytes) {
  write_file(fs::path(dir) / name, bytes);
}

// OCDBT: every key of the latest generation read, and the version tree walked.
void ocdbt_one(std::string_view bytes) {
  const fs::path dir = scratch() / "ocdbt";
  if (!unpack_files(bytes, dir)) return;
  const checkpoint::ocdbt::Database db(dir);
  for (const auto& k : db.keys())
    if (!db.get(k)) broken("ocdbt: listed key '" + k + "' has no value");
  db.versions();
}

void ocdbt_seeds(const std::string& dir) {
  std::map<std::string, std::string> values = {
      {"a/.zarray", "{}"}, {"a/0", std::string(3000, 'x')}, {"b/0", "small"}, {"c", ""}};
  checkpoint::ocdbt::WriteOptions several_leaves;
  several_leaves.max_leaf_entries = 2;  // an interior root over two leaves
  int i = 0;
  for (const auto& options : {checkpoint::ocdbt::WriteOptions{}, several_leaves}) {
    const fs::path db = scratch() / ("ocdbt_seed" + std::to_string(i));
    fs::remove_all(db);
    checkpoint::ocdbt::write_database(db, values, options);
    write_seed(dir, "cujax_" + std::to_string(i++), pack_files(folder_files(db)));
  }
  // Orbax's layout as cujax writes it: ocdbt.process_0/ under a merged top-level database.
  const fs::path item = scratch() / "ocdbt_seed_orbax";
  fs::remove_all(item);
  checkpoint::StandardCheckpointer().save(item.string(), checkpoint_state());
  write_seed(dir, "cujax_orbax", pack_files(folder_files(item)));
  const fs::path fixture = interop_dir() /
                           "orbax/v0_checkpoints/direct_checkpoint/"
                           "checkpoint_metadata_present/pytree_checkpointable_has_metadata";
  if (fs::is_directory(fixture)) write_seed(dir, "orbax_v0", pack_files(folder_files(fixture)));
}

// zarr v3 (and v2) arrays in a folder or in an OCDBT database: every array read.
void zarr3_one(std::string_view bytes) {
  const fs::path dir = scratch() / "zarr3";
  if (!unpack_files(bytes, dir)) return;
  const auto store = checkpoint::open_store(dir);
  int arrays = 0;
  for (const auto& k : store->keys()) {
    for (const std::string sfx : {"/zarr.json", "/.zarray"}) {
      if (k.size() <= sfx.size() || k.compare(k.size() - sfx.size(), sfx.size(), sfx) != 0)
        continue;
      if (++arrays > 8) return;
      const std::string name = k.substr(0, k.size() - sfx.size());
      const auto info = checkpoint::zarr::read_info(*store, name);
      const HostTensor t = checkpoint::zarr::read_array(*store, name, info);
      if (t.shape() != info.shape || t.dtype() != info.dtype) broken("zarr: " + name + " misread");
    }
  }
}

void zarr3_seeds(const std::string& dir) {
  // A plain folder: int32 [6] in chunks of 4 (the second one padded), default key encoding.
  const std::string meta =
      R"({"zarr_format": 3, "node_type": "array", "shape": [6], "data_type": "int32", )"
      R"("chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4]}}, )"
      R"("chunk_key_encoding": {"name": "default"}, "fill_value": 0, )"
      R"("codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]})";
  std::string c0, c1;
  for (int32_t v = 0; v < 8; ++v) (v < 4 ? c0 : c1).append(reinterpret_cast<const char*>(&v), 4);
  write_seed(dir, "cujax_plain", pack_files({{"a/zarr.json", meta}, {"a/c/0", c0}, {"a/c/1", c1}}));
  const fs::path fixture = interop_dir() /
                           "orbax/v1_checkpoints/composite_checkpoint/"
                           "checkpoint_metadata_present/pytree_checkpointable_has_metadata/state";
  if (fs::is_directory(fixture))
    write_seed(dir, "orbax_v1_sharded", pack_files(folder_files(fixture)));
}

// Flax msgpack, legacy Orbax and t5x: a folder holding `checkpoint`. What a Flax msgpack file
// gives must survive serialize() and a second reading.
void msgpack_one(std::string_view bytes) {
  const fs::path dir = scratch() / "msgpack";
  if (!unpack_files(bytes, dir) || !fs::is_regular_file(dir / "checkpoint")) return;
  const auto loaded = checkpoint::msgpack_checkpoint::read(dir);
  if (loaded.format != "flax msgpack") return;
  std::string again;
  try {
    again = checkpoint::msgpack_checkpoint::serialize(loaded.leaves);
  } catch (const Error&) {
    return;  // paths serialize() refuses (empty keys, a key both leaf and dict)
  }
  auto back = checkpoint::msgpack_checkpoint::parse(again, dir, "serialized again").leaves;
  auto want = loaded.leaves;
  auto by_path = [](const checkpoint::Leaf& a, const checkpoint::Leaf& b) {
    return a.path < b.path;
  };
  std::sort(back.begin(), back.end(), by_path);
  std::sort(want.begin(), want.end(), by_path);
  if (back.size() != want.size()) broken("msgpack: serialized again, the leaves changed");
  for (size_t i = 0; i < back.size(); ++i)
    if (back[i].path != want[i].path || !same_tensor(back[i].value, want[i].value))
      broken("msgpack: '" + want[i].path + "' changed when serialized again");
}

void msgpack_seeds(const std::string& dir) {
  std::vector<checkpoint::Leaf> leaves;
  for (const auto& e : checkpoint_state().entries) leaves.push_back({e.path, e.value});
  write_seed(dir, "cujax_flax",
             pack_files({{"checkpoint", checkpoint::msgpack_checkpoint::serialize(leaves)}}));
  const std::pair<const char*, const char*> fixtures[] = {
      {"t5x_tiny_t5", "formats/t5x_tiny_t5/checkpoint_1"},
      {"orbax_aggregate_some", "formats/orbax_aggregate_some.checkpoint"}};
  for (const auto& [name, folder] : fixtures)
    if (fs::is_directory(interop_dir() / folder))
      write_seed(dir, name, pack_files(folder_files(interop_dir() / folder)));
}

// safetensors: what is accepted must survive serialize() and a second reading.
void safetensors_one(std::string_view bytes) {
  const auto leaves = checkpoint::safetensors::parse(bytes, "fuzz input");
  const auto back =
      checkpoint::safetensors::parse(checkpoint::safetensors::serialize(leaves), "again");
  std::map<std::string, const HostTensor*> by_path;
  for (const auto& l : back) by_path[l.path] = &l.value;
  if (by_path.size() != leaves.size()) broken("safetensors: serialized again, the tensors changed");
  for (const auto& l : leaves) {
    auto it = by_path.find(l.path);
    if (it == by_path.end() || !same_tensor(*it->second, l.value))
      broken("safetensors: '" + l.path + "' changed when serialized again");
  }
}

void safetensors_seeds(const std::string& dir) {
  std::vector<checkpoint::Leaf> leaves;
  for (const auto& e : checkpoint_state().entries) leaves.push_back({e.path, e.value});
  write_seed(dir, "cujax", checkpoint::safetensors::serialize(leaves, {{"format", "pt"}}));
  const fs::path fixture = interop_dir() / "formats/safetensors_minimal/test.safetensors";
  if (fs::is_regular_file(fixture)) write_seed(dir, "readme_example", read_file(fixture));
}

// ---- config.json of a model directory: read its "model" section as cujax generate/serve do;
// what is accepted must survive to_json and from_json.
void config_one(std::string_view bytes) {
  const fs::path dir = scratch() / "model";
  fs::create_directories(dir);
  write_file(dir / "config.json", bytes);
  models::TransformerConfig config;
  cli::read_config_section(dir.string(), "model", "fuzz", [&](const json::Value& v) {
    config = models::TransformerConfig::from_json(v);
  });
  const std::string text = json::dump(config.to_json());
  if (json::dump(models::TransformerConfig::from_json(json::parse(text)).to_json()) != text)
    broken("a model config does not survive to_json and from_json");
}

void config_seeds(const std::string& dir) {
  const fs::path d = scratch() / "config-seeds";
  fs::create_directories(d);
  json::Value train = json::Value::object();
  train.set("steps", int64_t{100});
  train.set("learning_rate", 0.001);
  cli::write_model_config(d.string(), tiny_model_config(), train);
  fs::copy_file(d / "config.json", fs::path(dir) / "tiny.json",
                fs::copy_options::overwrite_existing);
  models::TransformerConfig c = models::small_config();
  c.attention_implementation = "xla";
  cli::write_model_config(d.string(), c, json::Value::object());
  fs::copy_file(d / "config.json", fs::path(dir) / "small_xla.json",
                fs::copy_options::overwrite_existing);
}

// ---- The HTTP server: request bytes (request line, headers, body) answered in process by
// `cujax serve`'s handlers over a tiny model's engine. No request may get a 500 (an exception
// the handlers did not expect) or no answer once it is complete.
#ifdef CUJAX_FUZZ_HAVE_SERVER
constexpr const char* kToken = "sk-fuzz";

struct Server {
  nnx::Rngs rngs{0};
  models::TransformerLM model{tiny_model_config(), rngs};
  serve::Engine engine{model, nnx::state(model, nnx::VariableKind::Param), /*max_batch=*/2,
                       /*max_queue=*/2};
  std::unique_ptr<cli::HttpServer> http;
  Server() {
    cli::HttpOptions o;
    o.auth_token = kToken;
    o.model_id = "tiny";
    http = std::make_unique<cli::HttpServer>(engine, o);
    engine.start();
  }
  // cujax serve's order: no new requests, finish the engine's, then the server goes.
  ~Server() {
    http->begin_shutdown();
    engine.drain();
    http->stop();
  }
};

Server& server() {
  static Server s;
  return s;
}

void server_init() {
  server();
}

void server_one(std::string_view bytes) {
  const std::string request(bytes);
  const std::string reply = server().http->answer(request);
  if (reply.empty()) return;  // not a complete request yet: the connection would wait
  if (reply.rfind("HTTP/1.1 ", 0) != 0) broken("a reply that is not HTTP/1.1: " + reply);
  const std::string status = reply.substr(9, 3);
  if (std::getenv("CUJAX_FUZZ_VERBOSE")) std::fprintf(stderr, "%s\n", reply.substr(0, 600).c_str());
  if (status == "500") broken("a request made a 500:\n" + reply);
}

std::string post(const std::string& path, const std::string& body, bool auth = true) {
  return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
         (auth ? std::string("Authorization: Bearer ") + kToken + "\r\n" : "") +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

void server_seeds(const std::string& dir) {
  const fs::path d(dir);
  write_file(d / "healthz", "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
  write_file(d / "models", std::string("GET /v1/models/tiny HTTP/1.1\r\nAuthorization: Bearer ") +
                               kToken + "\r\n\r\n");
  write_file(d / "metrics",
             std::string("GET /metrics HTTP/1.1\r\nAuthorization: Bearer ") + kToken + "\r\n\r\n");
  write_file(d / "generate",
             post("/v1/generate", R"({"prompt": "Hi", "max_tokens": 3, "seed": 1})"));
  write_file(d / "generate_stream",
             post("/v1/generate", R"({"prompt": "Hi", "max_tokens": 2, "stream": true})"));
  write_file(
      d / "completions",
      post("/v1/completions", R"({"model": "tiny", "prompt": ["Hi", "Yo"], "max_tokens": 2, )"
                              R"("temperature": 0.5, "top_p": 0.9, "stop": ["x"], "echo": true})"));
  write_file(d / "chat", post("/v1/chat/completions",
                              R"({"model": "tiny", "messages": [{"role": "system", "content": )"
                              R"("Be brief"}, {"role": "user", "content": "Hi"}], )"
                              R"("max_tokens": 2, "stream": true})"));
  write_file(d / "unauthorized", post("/v1/completions", R"({"prompt": "Hi"})", false));
}
#endif

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"parser", parser_init, parser_one, parser_seeds},
      {"bytecode", parser_init, bytecode_one, bytecode_seeds},
      {"exported", [] {}, exported_one, exported_seeds},
      {"jax_export", parser_init, jax_export_one, jax_export_seeds},
      {"npy", [] {}, npy_one, npy_seeds},
      {"bundle", [] {}, bundle_one, bundle_seeds},
      {"checkpoint", checkpoint_init, checkpoint_one, checkpoint_seeds},
      {"ocdbt", [] {}, ocdbt_one, ocdbt_seeds},
      {"zarr3", [] {}, zarr3_one, zarr3_seeds},
      {"msgpack", [] {}, msgpack_one, msgpack_seeds},
      {"safetensors", [] {}, safetensors_one, safetensors_seeds},
      {"config", [] {}, config_one, config_seeds},
#ifdef CUJAX_FUZZ_HAVE_SERVER
      {"server", server_init, server_one, server_seeds},
#endif
  };
  return all;
}

const Target& target(std::string_view name) {
  for (const Target& t : targets())
    if (name == t.name) return t;
  throw std::invalid_argument("no fuzz target '" + std::string(name) + "'");
}

void prepare(const Target& t) {
  static std::mutex mutex;
  static std::map<std::string, bool> ready;
  std::lock_guard lock(mutex);
  if (!ready[t.name]) {
    t.init();
    ready[t.name] = true;
  }
}

void run_one(const Target& t, std::string_view bytes) {
  prepare(t);
  try {
    t.one(bytes);
  } catch (const Error& e) {
    // CUJAX_FUZZ_VERBOSE=1: say why each input was rejected (for looking at a corpus).
    static const bool verbose = std::getenv("CUJAX_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "rejected: %s\n", e.what());
  }
}

}  // namespace cujax::fuzz
