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

State StandardCheckpointer::restore(
    const std::string& path, const std::vector<std::pair<std::string, ShapeDtype>>& target) const {
  const Item item = open_item(path);
  const std::vector<StoredParam>& stored = item.params;
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < stored.size(); ++i) by_name[stored[i].name] = i;

  std::vector<std::string> problems;
  std::vector<bool> used(stored.size(), false);
  struct Match {
    std::string path;
    std::string name;
    zarr::ArrayInfo info;
  };
  std::vector<Match> matches;
  for (const auto& [p, a] : target) {
    auto it = by_name.find(layout::param_name(p));
    if (it == by_name.end()) it = by_name.find(p);
    if (it == by_name.end()) {
      problems.push_back("missing parameter '" + p + "' (the target has " + describe(a) + ")");
      continue;
    }
    used[it->second] = true;
    const StoredParam& sp = stored[it->second];
    if (sp.value_type != "jax.Array" && sp.value_type != "np.ndarray" &&
        sp.value_type != "scalar") {
      problems.push_back("parameter '" + sp.name + "' holds a " + sp.value_type + ", not an array");
      continue;
    }
    Match m{p, sp.name, zarr::read_info(*item.store, sp.name)};
    if (m.info.shape != a.shape)
      problems.push_back("'" + p + "': shape " + shape_to_string(m.info.shape) +
                         " in the checkpoint, " + shape_to_string(a.shape) + " in the target");
    if (m.info.dtype != a.dtype)
      problems.push_back("'" + p + "': dtype " + std::string(numpy_name(m.info.dtype)) +
                         " in the checkpoint, " + std::string(numpy_name(a.dtype)) +
                         " in the target");
    matches.push_back(std::move(m));
  }
  for (size_t i = 0; i < stored.size(); ++i) {
    if (used[i]) continue;
    std::string what = "extra parameter '" + stored[i].name + "' in the checkpoint";
    try {
      const zarr::ArrayInfo info = zarr::read_info(*item.store, stored[i].name);
      what += " (" + describe(ShapeDtype{info.shape, info.dtype, false}) + ")";
    } catch (const Error&) {
      // Its shape only decorates the message.
    }
    problems.push_back(what + ", not in the target");
  }
  if (!problems.empty()) {
    std::string msg = "checkpoint: " + path + " does not match the target (" +
                      std::to_string(problems.size()) + " mismatch" +
                      (problems.size() == 1 ? "" : "es") + "):";
    for (const auto& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
  State out;
  for (const auto& m : matches)
    out.set(m.path, array(zarr::read_array(*item.store, m.name, m.info)));
  return out;
}

}  // namespace cujax::checkpoint
