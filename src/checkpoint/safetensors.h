// safetensors files (Hugging Face's format, also what flax's safetensors.flax writes):
//   u64 LE header length N, N bytes of UTF-8 JSON {name: {dtype, shape, data_offsets [b, e)},
//   "__metadata__": {str: str}}, then the tensors' little-endian C-order bytes.
// Read with the format's rules: N bounded and inside the file, offsets contiguous from 0 with
// no gap or overlap, each tensor's bytes exactly its shape's size, the buffer ending the file.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cujax/checkpoint.h"

namespace cujax::checkpoint::safetensors {

// "F32", "BF16", ...; throws for a dtype safetensors cannot name.
std::string dtype_name(DType t);
// The tensors of a safetensors file's bytes, in the order of their offsets; `where` names it.
std::vector<Leaf> parse(std::string_view bytes, const std::string& where);
std::vector<Leaf> read_file(const std::filesystem::path& path);
// The bytes of a safetensors file holding `leaves` (sorted by dtype size, then name, as the
// reference writer orders them; header padded with spaces to a multiple of 8).
std::string serialize(const std::vector<Leaf>& leaves,
                      const std::map<std::string, std::string>& metadata = {});
// Writes atomically (a temporary sibling, fsync, rename).
void write_file(const std::filesystem::path& path, const std::vector<Leaf>& leaves,
                const std::map<std::string, std::string>& metadata = {});

}  // namespace cujax::checkpoint::safetensors
