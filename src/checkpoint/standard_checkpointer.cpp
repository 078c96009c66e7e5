#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "checkpoint/files.h"
#include "checkpoint/kvstore.h"
#include "checkpoint/layout.h"
#include "checkpoint/zarr.h"
#include "cujax/checkpoint.h"
#include "cujax/core/error.h"
#include "cujax/distributed.h"
#include "cujax/numpy.h"
#include "cujax/sharding.h"

namespace cujax::checkpoint {

namespace fs = std::filesystem;

namespace {

// Keys of a Python tuple repr such as "('a', 0, \"b'c\")", for _METADATA entries that carry
// no key_metadata.
std::vector<std::string> parse_key_tuple(const std::string& s, const std::string& file) {
  std::vector<std::string> keys;
  size_t i = 0;
  auto fail = [&]() -> void {
    throw Error("checkpoint: " + file + ": cannot read key '" + s + "'");
  };
  if (s.empty() || s[0] != '(') fail();
  ++i;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',')) ++i;
    if (i < s.size() && s[i] == ')') return keys;
    if (i >= s.size()) break;
    std::string key;
    if (s[i] == '\'' || s[i] == '"') {
      const char q = s[i++];
      while (i < s.size() && s[i] != q) {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        key += s[i++];
      }
      if (i >= s.size()) fail();
      ++i;
    } else {
      while (i < s.size() && s[i] != ',' && s[i] != ')' && s[i] != ' ') key += s[i++];
    }
    keys.push_back(key);
  }
  fail();
  return keys;
}

struct StoredParam {
  std::string name;  // key prefix in the item's store: keys joined with "."
  std::string value_type;
};

// An Orbax pytree item opened for reading: its folder, the key-value store its arrays live in
// (a plain folder or an OCDBT database) and the parameters it holds.
struct Item {
  fs::path dir;
  std::unique_ptr<KvStore> store;
  std::vector<StoredParam> params;
};

bool has_array_keys(const fs::path& dir) {
  return fs::exists(dir / "_METADATA") || fs::exists(dir / "manifest.ocdbt");
}

Item open_item(const fs::path& path) {
  if (!fs::is_directory(path)) throw Error("checkpoint: " + path.string() + " is not a folder");
  Item item{path, nullptr, {}};
  // Orbax's v1 API (composite checkpoints) keeps the pytree in the item folder "state".
  if (!has_array_keys(path) && fs::is_directory(path / "state") && has_array_keys(path / "state"))
    item.dir = path / "state";
  const fs::path& dir = item.dir;
  const fs::path file = dir / "_METADATA";
  const bool ocdbt = fs::exists(dir / "manifest.ocdbt");
  std::optional<json::Value> meta;
  if (fs::exists(file)) meta = json::parse(files::read(file), file.string());
  if (meta) {
    if (const json::Value* o = meta->get("use_ocdbt"); o && o->as_bool() && !ocdbt)
      throw Error("checkpoint: " + dir.string() +
                  ": _METADATA says use_ocdbt but the OCDBT manifest " +
                  (dir / "manifest.ocdbt").string() + " is missing");
  }
  item.store = open_store(dir);
  if (!meta && !ocdbt)
    throw Error("checkpoint: " + path.string() + " is not an Orbax checkpoint (no _METADATA)");
  if (!meta) {
    // An OCDBT item without tree metadata (Orbax restores one given a target): the arrays are
    // the keys holding zarr metadata.
    for (const std::string& k : item.store->keys()) {
      for (const std::string sfx : {"/.zarray", "/zarr.json"}) {
        if (k.size() > sfx.size() && k.compare(k.size() - sfx.size(), sfx.size(), sfx) == 0)
          item.params.push_back({k.substr(0, k.size() - sfx.size()), "jax.Array"});
      }
    }
    if (item.params.empty())
      throw Error("checkpoint: " + path.string() +
                  " holds no _METADATA and its OCDBT database no zarr arrays");
    return item;
  }
  for (const auto& [key, entry] : meta->at("tree_metadata").as_object()) {
    std::vector<std::string> keys;
    if (const json::Value* km = entry.get("key_metadata"); km && !km->as_array().empty()) {
      for (const auto& k : km->as_array()) {
        const json::Value& v = k.at("key");
        keys.push_back(v.is_string() ? v.as_string() : std::to_string(v.as_int()));
      }
    } else {
      keys = parse_key_tuple(key, file.string());
    }
    std::string name;
    for (size_t i = 0; i < keys.size(); ++i) name += (i ? "." : "") + keys[i];
    StoredParam p{name, "jax.Array"};
    if (const json::Value* vm = entry.get("value_metadata")) {
      if (const json::Value* skip = vm->get("skip_deserialize"); skip && skip->as_bool()) continue;
      if (const json::Value* t = vm->get("value_type")) p.value_type = t->as_string();
    }
    item.params.push_back(std::move(p));
  }
  return item;
}

std::string describe(const ShapeDtype& a) {
  return std::string(numpy_name(a.dtype)) + shape_to_string(a.shape);
}

}  // namespace

HostState to_host(const State& state) {
  HostState out;
  for (const auto& [path, a] : state) {
    if (!a.valid()) throw Error("checkpoint: State path '" + path + "' holds no array");
    const auto devices = a.devices();
    // clone(): the host copy may share storage with the device buffer, which a later donated
    // call could overwrite while an asynchronous save is still writing it.
    out.entries.push_back({path, a.to_host().clone(), devices.empty() ? "cpu:0" : devices[0]});
  }
  return out;
}

namespace {

// Orbax's save by several processes: every process writes its share of the arrays (entry i by
// process i mod N, whole arrays) as ocdbt.process_<i>/ in one temporary folder, then process 0
// writes the top-level database over them and the metadata, and commits. The temporary folder's
// name is the same in every process, so none has to be sent; a save a crash cut short leaves it
// behind and the next save removes it.
void save_by_processes(const std::string& path, const HostState& state, bool force) {
  const int me = distributed::process_index(), n = distributed::process_count();
  const fs::path final_path = fs::path(path).lexically_normal();
  if (files::is_tmp(final_path))
    throw Error("checkpoint: the name " + path + " must not contain " + kTmpMarker);
  // Every process sees the same folder: each refuses alike, before any barrier.
  if (fs::exists(final_path) && !force)
    throw Error("checkpoint: " + path + " already exists (save with force=true to replace it)");
  layout::check_names(state);
  const fs::path tmp = final_path.string() + kTmpMarker + "-processes";
  const std::string tag = "checkpoint save " + final_path.string();
  const int64_t init = files::now_nanos();
  if (me == 0) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    if (final_path.has_parent_path()) fs::create_directories(final_path.parent_path());
    fs::create_directory(tmp);
  }
  sync_global_devices(tag + ": folder made");
  HostState share;
  for (size_t i = static_cast<size_t>(me); i < state.entries.size(); i += static_cast<size_t>(n))
    share.entries.push_back(state.entries[i]);
  const layout::ItemOptions options{.use_ocdbt = true};
  layout::write_process_share(tmp, share, me, options);
  sync_global_devices(tag + ": every process wrote its arrays");
  if (me == 0) {
    try {
      layout::write_top_level(tmp, state, options);
      files::write_synced(tmp / "_CHECKPOINT_METADATA",
                          json::dump(layout::checkpoint_metadata(layout::kStandardHandler,
                                                                 json::Value::object(), init)));
      files::sync_dir(tmp);
      files::commit(tmp, final_path, force);
    } catch (...) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
      throw;
    }
  }
  sync_global_devices(tag + ": committed");
}

}  // namespace

void StandardCheckpointer::save(const std::string& path, const State& state, bool force) const {
  if (options_.all_processes && distributed::process_count() > 1) {
    // Arrays sharded over several processes are gathered (every process takes part).
    State whole;
    for (const auto& [p, a] : state)
      whole.set(p, is_fully_addressable(a) ? a : process_allgather(a));
    save(path, to_host(whole), force);
    return;
  }
  save(path, to_host(state), force);
}

void StandardCheckpointer::save(const std::string& path, const HostState& state, bool force) const {
  if (options_.all_processes && distributed::process_count() > 1) {
    if (!options_.use_ocdbt)
      throw Error("checkpoint: a save by every process writes Orbax's OCDBT layout (use_ocdbt)");
    save_by_processes(path, state, force);
    return;
  }
  layout::save_checkpoint(path, state, {.use_ocdbt = options_.use_ocdbt}, force);
}

std::vector<std::pair<std::string, ShapeDtype>> StandardCheckpointer::metadata(
    const std::string& path) const {
  std::vector<std::pair<std::string, ShapeDtype>> out;
  const Item item = open_item(path);
  for (const auto& p : item.params) {
    const zarr::ArrayInfo info = zarr::read_info(*item.store, p.name);
    out.push_back({p.name, ShapeDtype{info.shape, info.dtype, false}});
  }
  return out;
}

State StandardCheckpointer::restore(const std::string& path, const State& target) const {
  std::vector<std::pair<std::string, ShapeDtype>> avals;
  for (const auto& [p, a] : target) avals.emplace_back(p, a.aval());
  return restore(path, avals);
}

namespace {

// A value stored in a checkpoint, to match against a target path.
struct Stored {
  std::string name;
  std::function<ShapeDtype()> aval;  // read when matched (or to describe an extra one)
  std::function<Array()> read;
  std::string not_array;  // Orbax value types that are not arrays: why it cannot be restored
};

// Matches every target path with a stored value (the first of names(path) present), checks
// shapes and dtypes (casting when `cast`), and reads them; one Error lists every mismatch.
// Stored values no target path took are extra unless `ignore_extra(name)`.
State match_and_read(const std::string& where, const std::vector<Stored>& stored,
                     const std::vector<std::pair<std::string, ShapeDtype>>& target,
                     const std::function<std::vector<std::string>(const std::string&)>& names,
                     const std::function<bool(const std::string&)>& ignore_extra, bool cast) {
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < stored.size(); ++i) by_name.emplace(stored[i].name, i);
  std::vector<std::string> problems;
  std::vector<bool> used(stored.size(), false);
  std::vector<std::pair<size_t, size_t>> matches;  // target index, stored index
  for (size_t t = 0; t < target.size(); ++t) {
    const auto& [p, a] = target[t];
    auto it = by_name.end();
    for (const auto& n : names(p))
      if ((it = by_name.find(n)) != by_name.end()) break;
    if (it == by_name.end()) {
      problems.push_back("missing parameter '" + p + "' (the target has " + describe(a) + ")");
      continue;
    }
    used[it->second] = true;
    const Stored& sp = stored[it->second];
    if (!sp.not_array.empty()) {
      problems.push_back("parameter '" + sp.name + "' holds a " + sp.not_array + ", not an array");
      continue;
    }
    const ShapeDtype got = sp.aval();
    if (got.shape != a.shape)
      problems.push_back("'" + p + "': shape " + shape_to_string(got.shape) +
                         " in the checkpoint, " + shape_to_string(a.shape) + " in the target");
    if (got.dtype != a.dtype && !cast)
      problems.push_back("'" + p + "': dtype " + std::string(numpy_name(got.dtype)) +
                         " in the checkpoint, " + std::string(numpy_name(a.dtype)) +
                         " in the target (restore with cast_dtypes to convert it)");
    matches.emplace_back(t, it->second);
  }
  for (size_t i = 0; i < stored.size(); ++i) {
    if (used[i] || ignore_extra(stored[i].name)) continue;
    std::string what = "extra parameter '" + stored[i].name + "' in the checkpoint";
    try {
      what += " (" + describe(stored[i].aval()) + ")";
    } catch (const Error&) {
      // Its shape only decorates the message.
    }
    problems.push_back(what + ", not in the target");
  }
  if (!problems.empty()) {
    std::string msg = "checkpoint: " + where + " does not match the target (" +
                      std::to_string(problems.size()) + " mismatch" +
                      (problems.size() == 1 ? "" : "es") + "):";
    for (const auto& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
  State out;
  for (const auto& [t, i] : matches) {
    Array a = stored[i].read();
    if (a.dtype() != target[t].second.dtype) a = numpy::astype(a, target[t].second.dtype);
    out.set(target[t].first, std::move(a));
  }
  return out;
}

bool is_orbax_item(const fs::path& path) {
  // A folder holding a msgpack `checkpoint` and no Orbax metadata is legacy Orbax or t5x.
  return fs::is_directory(path) &&
         (has_array_keys(path) || !fs::is_regular_file(path / "checkpoint"));
}

}  // namespace

State StandardCheckpointer::restore(
    const std::string& path, const std::vector<std::pair<std::string, ShapeDtype>>& target) const {
  const bool cast = options_.cast_dtypes;
  if (!is_orbax_item(path)) {
    // Flax msgpack, legacy Orbax, t5x or safetensors: leaves named by '.'- or '/'-joined keys.
    LoadedCheckpoint loaded = load_any(path);
    const bool t5x = loaded.format == "t5x";
    std::vector<Stored> stored;
    for (auto& leaf : loaded.leaves) {
      std::string name = leaf.path;
      std::replace(name.begin(), name.end(), '/', '.');
      const HostTensor value = leaf.value;
      stored.push_back({name,
                        [value] {
                          return ShapeDtype{value.shape(), value.dtype(), false};
                        },
                        [value] { return array(value); }, ""});
    }
    // A model's parameters are t5x's optimizer target ("target.<path>"); its optimizer state
    // ("state.<path>") is no extra parameter.
    return match_and_read(
        path, stored, target,
        [&](const std::string& p) -> std::vector<std::string> {
          if (t5x) return {"target." + p};
          return {p, layout::param_name(p)};
        },
        [&](const std::string& n) { return t5x && n.rfind("target.", 0) != 0; }, cast);
  }
  const Item item = open_item(path);
  std::vector<Stored> stored;
  for (const StoredParam& sp : item.params) {
    const bool array_type =
        sp.value_type == "jax.Array" || sp.value_type == "np.ndarray" || sp.value_type == "scalar";
    const KvStore* store = item.store.get();
    const std::string name = sp.name;
    auto info = std::make_shared<std::optional<zarr::ArrayInfo>>();
    auto read_info = [store, name, info]() -> const zarr::ArrayInfo& {
      if (!*info) *info = zarr::read_info(*store, name);
      return **info;
    };
    stored.push_back(
        {name,
         [read_info] {
           const zarr::ArrayInfo& i = read_info();
           return ShapeDtype{i.shape, i.dtype, false};
         },
         [store, name, read_info] { return array(zarr::read_array(*store, name, read_info())); },
         array_type ? "" : sp.value_type});
  }
  return match_and_read(
      path, stored, target,
      [](const std::string& p) -> std::vector<std::string> {
        return {layout::param_name(p), p};
      },
      [](const std::string&) { return false; }, cast);
}

}  // namespace cujax::checkpoint
