// One array in zarr format, as tensorstore writes it for Orbax. v2: `.zarray` (JSON) and one
// key per chunk, each a zstd frame (or raw bytes) of the C-order, full-chunk-size contents.
// v3: `zarr.json` and chunk keys `c/i/j`, usually one shard per array (`sharding_indexed`:
// inner chunks through bytes + zstd, then an index of (offset, nbytes) pairs with a CRC32C).
// The keys come from a KvStore: a plain folder or an OCDBT database.
#pragma once

#include <filesystem>
#include <string>

#include "checkpoint/kvstore.h"
#include "cujax/core/host_tensor.h"
#include "cujax/core/json.h"

namespace cujax::checkpoint::zarr {

// "<f4", "|b1", "bfloat16", ...
std::string dtype_string(DType t);
// The `.zarray` that write_array writes for `t`: one chunk equal to the shape, zstd level 1.
json::Value zarray_for(const HostTensor& t);
// The key of the one chunk zarray_for describes ("0.0", "0" for rank 0), and its zstd frame.
std::string single_chunk_key(const HostTensor& t);
std::string single_chunk(const HostTensor& t);
// Writes `.zarray` and the chunk into the existing folder `dir`, fsynced.
void write_array(const std::filesystem::path& dir, const HostTensor& t);

struct ArrayInfo {
  int zarr_format = 2;
  Shape shape;
  Shape chunks;  // v3: the outer (shard) chunk shape
  DType dtype = DType::F32;
  bool big_endian = false;      // v2; v3 takes the endianness from its "bytes" codec
  std::string separator = ".";  // chunk key separator
  std::string key_prefix;       // v3 "default" chunk keys start "c"
  bool zstd = true;             // v2: false when chunks are stored raw (compressor null)
  bool gzip = false;            // v2: chunks are gzip or zlib streams (t5x)
  json::Value fill_value;
  json::Value codecs;        // v3: the codec chain
  std::string metadata_key;  // "<name>/.zarray" or "<name>/zarr.json"
};
// Parses `<name>/.zarray` (zarr v2) or `<name>/zarr.json` (zarr v3) in `store`; throws Error
// naming the file for what cujax cannot read.
ArrayInfo read_info(const KvStore& store, const std::string& name);
// Reads every chunk of the array (edge chunks stored at full size). A missing chunk is filled
// with fill_value, or is an error when there is none; a chunk that does not decode to the
// chunk's size is an error naming the file.
HostTensor read_array(const KvStore& store, const std::string& name, const ArrayInfo& info);

// The same for a zarr folder on disk.
ArrayInfo read_info(const std::filesystem::path& dir);
HostTensor read_array(const std::filesystem::path& dir, const ArrayInfo& info);

// zarr v3: decodes one stored chunk through `codecs` (bytes, zstd, gzip, crc32c,
// sharding_indexed) into `chunk`'s C-order bytes; `where` names the chunk for errors.
std::string decode_v3_chunk(std::string_view stored, const json::Value& codecs, const Shape& chunk,
                            DType dtype, const json::Value& fill, const std::string& where);
// A gzip or zlib stream inflated, refused past `limit` bytes.
std::string gzip_decode(std::string_view src, size_t limit, const std::string& where);
// A zstd stream (one or more frames, sizes not needed) decoded, refused past `limit` bytes;
// errors read "`where`: zstd error: ..." (zarr v3 chunks, OCDBT nodes).
std::string zstd_decode(std::string_view src, size_t limit, const std::string& where);
// One element of `dtype` holding a zarr fill_value (a number, a bool, "NaN", "Infinity").
std::string fill_bytes(const json::Value& fill, DType dtype, const std::string& where);
// Copies the C-order `chunk` at grid position `index` into the C-order array `dst` of `shape`
// (the part of an edge chunk inside the array).
void copy_chunk(char* dst, const Shape& shape, const char* chunk, const Shape& chunk_shape,
                const std::vector<int64_t>& index, size_t width);

}  // namespace cujax::checkpoint::zarr
