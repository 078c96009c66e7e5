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
// The key tuple of a parameter name as Python prints it: "('a', '0', 'value')".
std::string key_tuple_repr(const std::string& name);
// _METADATA for the parameters of `state`.
json::Value tree_metadata(const HostState& state, bool use_ocdbt = false);
// _sharding: base64url(param name) -> JSON text of a SingleDeviceSharding.
json::Value sharding_metadata(const HostState& state);
// _CHECKPOINT_METADATA with the given item_handlers and metrics.
json::Value checkpoint_metadata(json::Value item_handlers, json::Value metrics,
                                int64_t init_timestamp_nsecs);
// Writes the parameters (zarr folders, or with `use_ocdbt` one OCDBT database holding the same
// keys), _METADATA and _sharding into the existing folder `dir`.
void write_item(const std::filesystem::path& dir, const HostState& state, bool use_ocdbt = false);

}  // namespace cujax::checkpoint::layout
