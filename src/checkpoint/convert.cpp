// save_leaves and convert: any checkpoint cujax reads, written in one of the formats it writes.
#include <filesystem>

#include "checkpoint/files.h"
#include "checkpoint/layout.h"
#include "checkpoint/msgpack_checkpoint.h"
#include "checkpoint/safetensors.h"
#include "cujax/checkpoint.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint {

namespace fs = std::filesystem;

void save_leaves(const std::string& path, const std::vector<Leaf>& leaves,
                 const std::string& format) {
  if (fs::exists(path)) throw Error("checkpoint: " + path + " already exists");
  if (format == "ocdbt" || format == "zarr") {
    HostState state;
    for (const auto& l : leaves) state.entries.push_back({l.path, l.value, "cpu:0"});
    layout::save_checkpoint(path, state, {.use_ocdbt = format == "ocdbt", .value_suffix = false},
                            false);
  } else if (format == "safetensors") {
    safetensors::write_file(path, leaves);
  } else if (format == "msgpack") {
    const std::string bytes = msgpack_checkpoint::serialize(leaves);
    const fs::path tmp = files::tmp_sibling(path);
    try {
      files::write_synced(tmp, bytes);
      files::commit(tmp, path, false);
    } catch (...) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw;
    }
  } else {
    throw Error("checkpoint: unknown format '" + format +
                "' (ocdbt, zarr, safetensors or msgpack)");
  }
}

void convert(const std::string& src, const std::string& dst, const std::string& format) {
  save_leaves(dst, load_any(src).leaves, format);
}

}  // namespace cujax::checkpoint
