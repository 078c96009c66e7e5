// load_any: a checkpoint's every leaf with no target, whatever its format.
#include <filesystem>
#include <fstream>

#include "checkpoint/msgpack_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "cujax/checkpoint.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint {

namespace fs = std::filesystem;

namespace {

// A safetensors file whatever its name: a little-endian header length that fits the file, then
// the header's '{' (a msgpack file's first 8 bytes make a length far past its size).
bool looks_like_safetensors(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  unsigned char head[9];
  if (!in.read(reinterpret_cast<char*>(head), sizeof head) || head[8] != '{') return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | head[i];
  std::error_code ec;
  const uintmax_t size = fs::file_size(p, ec);
  return !ec && n <= size - 8;
}

}  // namespace

LoadedCheckpoint load_any(const std::string& path) {
  const fs::path p(path);
  if (fs::is_regular_file(p)) {
    if (p.extension() == ".safetensors" || looks_like_safetensors(p))
      return {"safetensors", safetensors::read_file(p)};
    auto m = msgpack_checkpoint::read(p);  // flax.serialization.to_bytes state
    return {m.format, std::move(m.leaves)};
  }
  if (!fs::is_directory(p)) throw Error("checkpoint: " + path + " does not exist");
  if (fs::is_regular_file(p / "checkpoint")) {  // legacy Orbax/Flax, t5x
    auto m = msgpack_checkpoint::read(p);
    return {m.format, std::move(m.leaves)};
  }
  const bool ocdbt = fs::exists(p / "manifest.ocdbt") || fs::exists(p / "state" / "manifest.ocdbt");
  StandardCheckpointer ckpt;
  const auto meta = ckpt.metadata(path);
  const State state = ckpt.restore(path, meta);
  LoadedCheckpoint out{ocdbt ? "orbax ocdbt" : "orbax zarr", {}};
  for (const auto& [name, aval] : meta) out.leaves.push_back({name, state.at(name).to_host()});
  return out;
}

}  // namespace cujax::checkpoint
