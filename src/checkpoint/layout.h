// The files of one Orbax item folder (shared by StandardCheckpointer and CheckpointManager).
#pragma once

#include <filesystem>
#include <string>

#include "cujax/checkpoint.h"
#include "cujax/core/json.h"

namespace cujax::checkpoint::layout {

// Orbax's handler type string, recorded in _CHECKPOINT_METADATA's item_handlers.
inline constexpr const char* kStandardHandler =
    "orbax.checkpoint._src.handlers.standard_checkpoint_handler.StandardCheckpointHandler";

// "<path>.value": the parameter name of a State path, as Flax NNX stores a Variable.
std::string param_name(const std::string& state_path);

struct ItemOptions {
  bool use_ocdbt = true;  // Orbax's default layout, else zarr v2 folders
  // Parameter names are State paths + ".value" (NNX Variables), or the paths as they are
  // (leaves of another checkpoint being converted).
  bool value_suffix = true;
};
// The key tuple of a parameter name as Python prints it: "('a', '0', 'value')".
std::string key_tuple_repr(const std::string& name);
// _METADATA for the parameters of `state`.
json::Value tree_metadata(const HostState& state, const ItemOptions& options);
// array_metadatas/process_N: each parameter's name, write shape and chunk shape.
json::Value array_metadatas(const HostState& state, const ItemOptions& options);
// _sharding: base64url(param name) -> JSON text of a SingleDeviceSharding.
json::Value sharding_metadata(const HostState& state, const ItemOptions& options);
// _CHECKPOINT_METADATA with the given item_handlers and metrics.
json::Value checkpoint_metadata(json::Value item_handlers, json::Value metrics,
                                int64_t init_timestamp_nsecs);
// Writes the parameters (zarr folders, or with `use_ocdbt` Orbax's default layout: the same
// keys in ocdbt.process_0/ and the top-level database over it, with array_metadatas/),
// _METADATA and _sharding into the existing folder `dir`.
void write_item(const std::filesystem::path& dir, const HostState& state,
                const ItemOptions& options);

// The steps of write_item, for a save by several processes: the names checked; one process's
// arrays as its database ocdbt.process_<process>/ and array_metadatas/process_<process>; then
// (process 0, once every process has written) the top-level database over every
// ocdbt.process_N/ present, _METADATA and _sharding for the whole state.
void check_names(const HostState& state);
void write_process_share(const std::filesystem::path& dir, const HostState& share, int process,
                         const ItemOptions& options);
void write_top_level(const std::filesystem::path& dir, const HostState& state,
                     const ItemOptions& options);
// StandardCheckpointer::save: the item and _CHECKPOINT_METADATA written in a temporary sibling
// folder, then renamed to `path` (exchanged with it when `force`).
void save_checkpoint(const std::string& path, const HostState& state, const ItemOptions& options,
                     bool force);

}  // namespace cujax::checkpoint::layout
