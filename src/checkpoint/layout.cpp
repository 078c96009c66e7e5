#include "checkpoint/layout.h"

#include <algorithm>
#include <map>
#include <set>

#include "checkpoint/files.h"
#include "checkpoint/ocdbt.h"
#include "checkpoint/zarr.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint::layout {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_keys(const std::string& name) {
  std::vector<std::string> keys;
  size_t start = 0;
  while (true) {
    const size_t dot = name.find('.', start);
    keys.push_back(name.substr(start, dot - start));
    if (dot == std::string::npos) return keys;
    start = dot + 1;
  }
}

// Python's repr of a str: single quotes unless the text has one and no double quote.
std::string py_repr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == '\\' || c == q) out += '\\';
    out += c;
  }
  return out + q;
}

std::string base64url(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  const size_t rest = in.size() - i;
  if (rest) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (rest == 2) v |= static_cast<uint8_t>(in[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// JAX's str() of a device: "TFRT_CPU_0" for CPU devices, "cuda:0" for GPUs.
std::string jax_device_str(const std::string& device) {
  if (device.rfind("cpu:", 0) == 0) return "TFRT_CPU_" + device.substr(4);
  return device;
}

void check_name(const std::string& path) {
  bool bad =
      path.empty() || path.find('/') != std::string::npos || path.find('\0') != std::string::npos;
  for (const auto& k : split_keys(path)) bad = bad || k.empty();
  if (bad)
    throw Error("checkpoint: invalid State path '" + path + "' (dotted keys, none empty, no '/')");
}

}  // namespace

std::string param_name(const std::string& state_path) {
  return state_path + ".value";
}

namespace {
std::string stored_name(const std::string& path, const ItemOptions& options) {
  return options.value_suffix ? param_name(path) : path;
}
}  // namespace

std::string key_tuple_repr(const std::string& name) {
  const auto keys = split_keys(name);
  std::string s = "(";
  for (size_t i = 0; i < keys.size(); ++i) s += (i ? ", " : "") + py_repr(keys[i]);
  return s + (keys.size() == 1 ? ",)" : ")");
}

json::Value tree_metadata(const HostState& state, const ItemOptions& options) {
  json::Value tree = json::Value::object();
  for (const auto& e : state.entries) {
    const std::string name = stored_name(e.path, options);
    json::Value keys{json::Value::Array{}};
    // Every key is a dict key (key_type 2): NNX State is nested dicts, and its list indices
    // are stored as string keys ("layers", "0", ...).
    for (const auto& k : split_keys(name)) {
      json::Value km = json::Value::object();
      km.set("key", k);
      km.set("key_type", 2);
      keys.push_back(std::move(km));
    }
    json::Value value = json::Value::object();
    value.set("value_type", "jax.Array");
    value.set("skip_deserialize", false);
    json::Value entry = json::Value::object();
    entry.set("key_metadata", std::move(keys));
    entry.set("value_metadata", std::move(value));
    tree.set(key_tuple_repr(name), std::move(entry));
  }
  json::Value m = json::Value::object();
  m.set("tree_metadata", std::move(tree));
  m.set("use_ocdbt", options.use_ocdbt);
  m.set("use_zarr3", false);
  m.set("store_array_data_equal_to_fill_value", true);
  m.set("custom_metadata", nullptr);
  return m;
}

json::Value array_metadatas(const HostState& state, const ItemOptions& options) {
  json::Value list{json::Value::Array{}};
  for (const auto& e : state.entries) {
    json::Value shape{json::Value::Array{}};
    for (int64_t d : e.value.shape()) shape.push_back(d);
    json::Value m = json::Value::object();
    m.set("param_name", stored_name(e.path, options));
    m.set("write_shape", shape);
    m.set("chunk_shape", shape);  // one chunk per array
    m.set("ext_metadata", nullptr);
    json::Value entry = json::Value::object();
    entry.set("array_metadata", std::move(m));
    list.push_back(std::move(entry));
  }
  json::Value out = json::Value::object();
  out.set("array_metadatas", std::move(list));
  return out;
}

json::Value sharding_metadata(const HostState& state, const ItemOptions& options) {
  json::Value m = json::Value::object();
  for (const auto& e : state.entries) {
    json::Value s = json::Value::object();
    s.set("sharding_type", "SingleDeviceSharding");
    s.set("device_str", jax_device_str(e.device));
    m.set(base64url(stored_name(e.path, options)), json::dump(s));
  }
  return m;
}

json::Value checkpoint_metadata(json::Value item_handlers, json::Value metrics,
                                int64_t init_timestamp_nsecs) {
  json::Value m = json::Value::object();
  m.set("item_handlers", std::move(item_handlers));
  m.set("metrics", std::move(metrics));
  m.set("performance_metrics", json::Value::object());
  m.set("init_timestamp_nsecs", init_timestamp_nsecs);
  m.set("commit_timestamp_nsecs", files::now_nanos());
  m.set("custom_metadata", json::Value::object());
  return m;
}

void check_names(const HostState& state) {
  std::set<std::string> seen;
  for (const auto& e : state.entries) {
    check_name(e.path);
    if (!seen.insert(e.path).second)
      throw Error("checkpoint: State path '" + e.path + "' appears twice");
  }
}

void write_process_share(const fs::path& dir, const HostState& share, int process,
                         const ItemOptions& options) {
  const std::string n = std::to_string(process);
  std::map<std::string, std::string> values;
  for (const auto& e : share.entries) {
    const std::string name = stored_name(e.path, options);
    values[name + "/.zarray"] = json::dump(zarr::zarray_for(e.value));
    if (e.value.size() > 0)
      values[name + "/" + zarr::single_chunk_key(e.value)] = zarr::single_chunk(e.value);
  }
  if (!values.empty()) ocdbt::write_database(dir / ("ocdbt.process_" + n), values);
  fs::create_directories(dir / "array_metadatas");
  files::write_synced(dir / "array_metadatas" / ("process_" + n),
                      json::dump(array_metadatas(share, options)));
  files::sync_dir(dir / "array_metadatas");
}

void write_top_level(const fs::path& dir, const HostState& state, const ItemOptions& options) {
  if (options.use_ocdbt) {
    std::vector<std::string> processes;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("ocdbt.process_", 0) == 0 && fs::exists(e.path() / "manifest.ocdbt"))
        processes.push_back(name);
    }
    std::sort(processes.begin(), processes.end());
    // Merged, not copied: the top-level database refers to the process databases' data files.
    ocdbt::merge_databases(dir, processes);
  }
  files::write_synced(dir / "_METADATA", json::dump(tree_metadata(state, options)));
  files::write_synced(dir / "_sharding", json::dump(sharding_metadata(state, options)));
  files::sync_dir(dir);
}

void write_item(const fs::path& dir, const HostState& state, const ItemOptions& options) {
  check_names(state);
  if (options.use_ocdbt) {
    // Orbax's default layout for one process: its own database (ocdbt.process_0/) and the
    // top-level one over it.
    write_process_share(dir, state, 0, options);
  } else {
    for (const auto& e : state.entries) {
      const fs::path p = dir / stored_name(e.path, options);
      fs::create_directory(p);
      zarr::write_array(p, e.value);
    }
  }
  write_top_level(dir, state, options);
}

void save_checkpoint(const std::string& path, const HostState& state, const ItemOptions& options,
                     bool force) {
  const fs::path final_path = fs::path(path).lexically_normal();
  if (files::is_tmp(final_path))
    throw Error("checkpoint: the name " + path + " must not contain " + kTmpMarker);
  if (fs::exists(final_path) && !force)
    throw Error("checkpoint: " + path + " already exists (save with force=true to replace it)");
  if (final_path.has_parent_path()) fs::create_directories(final_path.parent_path());
  const fs::path tmp = files::tmp_sibling(final_path);
  try {
    const int64_t init = files::now_nanos();
    fs::create_directory(tmp);
    write_item(tmp, state, options);
    files::write_synced(
        tmp / "_CHECKPOINT_METADATA",
        json::dump(checkpoint_metadata(kStandardHandler, json::Value::object(), init)));
    files::sync_dir(tmp);
    files::commit(tmp, final_path, force);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace cujax::checkpoint::layout
