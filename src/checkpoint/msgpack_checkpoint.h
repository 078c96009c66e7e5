// Flax's msgpack checkpoints: flax.serialization.to_bytes state, legacy Orbax checkpoints (a
// msgpack `checkpoint` file whose large arrays are "PLACEHOLDER://<param>" strings standing for
// zarr v2 folders beside it) and t5x's native checkpoints (msgpack whose arrays are TensorStore
// zarr specs naming a folder of gzip chunks with no .zarray). Arrays inside the msgpack are
// Flax's ext types: 1 ndarray and 3 NumPy scalar, each (shape, dtype name, C-order bytes).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cujax/checkpoint.h"

namespace cujax::checkpoint::msgpack_checkpoint {

struct Loaded {
  std::string format;  // "flax msgpack", "orbax msgpack", "t5x"
  std::vector<Leaf> leaves;
};
// The leaves of msgpack `bytes`, keys joined with "."; arrays stored outside it are read from
// folders under `dir`. t5x's top-level "optimizer" key is dropped ("state.param_states.kernel").
Loaded parse(std::string_view bytes, const std::filesystem::path& dir, const std::string& where);
// `path` a folder holding `checkpoint`, or a msgpack file.
Loaded read(const std::filesystem::path& path);
// flax.serialization.to_bytes of the nested dicts the leaves' '.'-joined paths make: every
// array ext type 1 (shape, dtype name, C-order bytes). Throws Error for a path that is both a
// leaf and a dict, or has an empty key.
std::string serialize(const std::vector<Leaf>& leaves);

}  // namespace cujax::checkpoint::msgpack_checkpoint
