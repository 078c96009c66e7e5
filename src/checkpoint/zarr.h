// One array in zarr v2 format, as tensorstore writes it for Orbax: a folder with `.zarray`
// (JSON) and one file per chunk, each chunk a zstd frame (or raw bytes) of the C-order,
// full-chunk-size contents.
#pragma once

#include <filesystem>
#include <string>

#include "cujax/core/host_tensor.h"
#include "cujax/core/json.h"

namespace cujax::checkpoint::zarr {

// "<f4", "|b1", "bfloat16", ...
std::string dtype_string(DType t);
// The `.zarray` that write_array writes for `t`: one chunk equal to the shape, zstd level 1.
json::Value zarray_for(const HostTensor& t);
// Writes `.zarray` and the chunk into the existing folder `dir`, fsynced.
void write_array(const std::filesystem::path& dir, const HostTensor& t);

struct ArrayInfo {
  Shape shape;
  Shape chunks;
  DType dtype = DType::F32;
  bool big_endian = false;
  std::string separator = ".";
  bool zstd = true;  // false: chunks are stored raw (compressor null)
  json::Value fill_value;
};
// Parses `<dir>/.zarray`; throws Error naming the file for what cujax cannot read.
ArrayInfo read_info(const std::filesystem::path& dir);
// Reads every chunk of the array (edge chunks stored at full size). A missing chunk is filled
// with fill_value, or is an error when there is none; a chunk that does not decompress to the
// chunk's size is an error naming the file.
HostTensor read_array(const std::filesystem::path& dir, const ArrayInfo& info);

}  // namespace cujax::checkpoint::zarr
