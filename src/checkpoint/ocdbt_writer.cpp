// Writing a new OCDBT database for one process, as TensorStore lays it out: one data file
// d/<32 hex> holding the out-of-line values and then the B+tree leaf, and manifest.ocdbt (single
// kind, generation 1) pointing at it. Written last, the manifest makes the database appear.
#include <zstd.h>

#include <random>

#include "checkpoint/files.h"
#include "checkpoint/ocdbt.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint::ocdbt {

namespace fs = std::filesystem;

namespace {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// magic, length, version 0, compression, body (zstd when level >= 0), CRC32C.
std::string frame(uint32_t magic, const std::string& body, int zstd_level) {
  std::string payload;
  put_varint(payload, 0);
  put_varint(payload, 1);
  std::string z(ZSTD_compressBound(body.size()), '\0');
  const size_t n = ZSTD_compress(z.data(), z.size(), body.data(), body.size(), zstd_level);
  if (ZSTD_isError(n)) throw Error(std::string("ocdbt: zstd: ") + ZSTD_getErrorName(n));
  z.resize(n);
  payload += z;
  std::string out;
  for (int i = 3; i >= 0; --i) out += static_cast<char>((magic >> (8 * i)) & 0xff);
  put_le(out, 4 + 8 + payload.size() + 4, 8);
  out += payload;
  put_le(out, crc32c(out), 4);
  return out;
}

// One data file named `path`: count 1, no prefix, suffix = path, base path empty.
void put_table(std::string& out, const std::string& path) {
  put_varint(out, 1);
  put_varint(out, path.size());
  put_varint(out, 0);
  out += path;
}

std::string random_hex(size_t bytes) {
  std::random_device rd;
  std::string s;
  static const char* digits = "0123456789abcdef";
  for (size_t i = 0; i < bytes; ++i) {
    const unsigned b = rd() & 0xff;
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

}  // namespace

void write_database(const fs::path& dir, const std::map<std::string, std::string>& values,
                    const WriteOptions& options) {
  if (fs::exists(dir / "manifest.ocdbt"))
    throw Error("ocdbt: " + dir.string() + " already holds a database");
  if (values.empty()) throw Error("ocdbt: writing an empty database is not supported");
  fs::create_directories(dir / "d");
  const std::string data_path = "d/" + random_hex(16);

  // Out-of-line values first, then the leaf that points at them.
  std::string data;
  std::vector<uint64_t> offsets;
  uint64_t indirect_bytes = 0;
  for (const auto& [k, v] : values) {
    if (k.size() > 65535) throw Error("ocdbt: key longer than 65535 bytes");
    if (v.size() > options.max_inline_value_bytes) {
      offsets.push_back(data.size());
      data += v;
      indirect_bytes += v.size();
    } else {
      offsets.push_back(UINT64_MAX);
    }
  }
  std::string leaf;
  leaf += '\0';  // height 0
  if (indirect_bytes > 0)
    put_table(leaf, data_path);
  else
    put_varint(leaf, 0);  // no data files: every value inline
  put_varint(leaf, values.size());
  std::string prev;
  bool first = true;
  for (const auto& [k, v] : values) {  // common prefix with the previous key
    if (!first) {
      size_t p = 0;
      while (p < prev.size() && p < k.size() && prev[p] == k[p]) ++p;
      put_varint(leaf, p);
    }
    first = false;
    prev = k;
  }
  prev.clear();
  std::string suffixes;
  first = true;
  for (const auto& [k, v] : values) {
    size_t p = 0;
    if (!first)
      while (p < prev.size() && p < k.size() && prev[p] == k[p]) ++p;
    put_varint(leaf, k.size() - p);
    suffixes += k.substr(p);
    first = false;
    prev = k;
  }
  leaf += suffixes;
  for (const auto& [k, v] : values) put_varint(leaf, v.size());
  for (uint64_t off : offsets) leaf += static_cast<char>(off == UINT64_MAX ? 0 : 1);
  for (uint64_t off : offsets)
    if (off != UINT64_MAX) put_varint(leaf, 0);  // the one data file
  for (uint64_t off : offsets)
    if (off != UINT64_MAX) put_varint(leaf, off);
  size_t i = 0;
  for (const auto& [k, v] : values)
    if (offsets[i++] == UINT64_MAX) leaf += v;
  if (leaf.size() > options.max_decoded_node_bytes)
    throw Error("ocdbt: " + std::to_string(values.size()) +
                " keys do not fit one B+tree node (splitting nodes is not written yet)");
  const std::string node = frame(kBtreeNodeMagic, leaf, options.zstd_level);
  const uint64_t node_offset = data.size();
  data += node;
  files::write_synced(dir / data_path, data);
  files::sync_dir(dir / "d");

  std::string m;
  std::random_device rd;
  for (int b = 0; b < 16; ++b) m += static_cast<char>(rd() & 0xff);  // uuid
  m += '\0';                                                         // single manifest
  put_varint(m, options.max_inline_value_bytes);
  put_varint(m, options.max_decoded_node_bytes);
  m += static_cast<char>(options.version_tree_arity_log2);
  put_varint(m, 1);  // zstd
  put_le(m, static_cast<uint32_t>(options.zstd_level), 4);
  put_table(m, data_path);
  put_varint(m, 1);  // one version: generation 1
  put_varint(m, 1);
  m += '\0';  // root height
  put_varint(m, 0);
  put_varint(m, node_offset);
  put_varint(m, node.size());
  put_varint(m, values.size());
  put_varint(m, node.size());
  put_varint(m, indirect_bytes);
  put_le(m, static_cast<uint64_t>(files::now_nanos()), 8);
  put_varint(m, 0);  // no version nodes
  files::write_synced(dir / "manifest.ocdbt", frame(kManifestMagic, m, options.zstd_level));
  files::sync_dir(dir);
}

}  // namespace cujax::checkpoint::ocdbt
