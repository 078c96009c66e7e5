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

size_t common_prefix(const std::string& a, const std::string& b) {
  size_t p = 0;
  while (p < a.size() && p < b.size() && a[p] == b[p]) ++p;
  return p;
}

// The key columns of a node: prefix lengths shared with the previous key, suffix lengths,
// (interior nodes) subtree common prefix lengths, then the suffixes.
template <typename Child>
void put_keys(std::string& out, const std::vector<std::string>& keys,
              const std::vector<Child>* children = nullptr) {
  for (size_t i = 1; i < keys.size(); ++i) put_varint(out, common_prefix(keys[i - 1], keys[i]));
  for (size_t i = 0; i < keys.size(); ++i)
    put_varint(out, keys[i].size() - (i ? common_prefix(keys[i - 1], keys[i]) : 0));
  if (children)
    for (const auto& c : *children) put_varint(out, c.common);
  for (size_t i = 0; i < keys.size(); ++i)
    out += keys[i].substr(i ? common_prefix(keys[i - 1], keys[i]) : 0);
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
  // Leaves of at most max_leaf_entries keys; with more than one, an interior root over them.
  struct Entry {
    const std::string* key;
    const std::string* value;
    uint64_t offset;  // UINT64_MAX: inline
  };
  std::vector<Entry> entries;
  size_t i = 0;
  for (const auto& [k, v] : values) entries.push_back({&k, &v, offsets[i++]});
  const size_t per_leaf = std::max<size_t>(1, options.max_leaf_entries);
  struct Child {
    std::string first_key;
    size_t common = 0;  // prefix shared by every key of the leaf, left out of its keys
    uint64_t offset = 0, length = 0, num_keys = 0, indirect = 0;
  };
  std::vector<Child> children;
  for (size_t start = 0; start < entries.size(); start += per_leaf) {
    const size_t end = std::min(entries.size(), start + per_leaf);
    Child c;
    c.first_key = *entries[start].key;
    c.common = common_prefix(c.first_key, *entries[end - 1].key);
    if (entries.size() <= per_leaf) c.common = 0;  // a lone leaf is the root: no parent prefix
    std::vector<std::string> keys;
    bool indirect = false;
    for (size_t e = start; e < end; ++e) {
      keys.push_back(entries[e].key->substr(c.common));
      if (entries[e].offset != UINT64_MAX) {
        indirect = true;
        c.indirect += entries[e].value->size();
      }
    }
    std::string leaf;
    leaf += '\0';  // height 0
    if (indirect)
      put_table(leaf, data_path);
    else
      put_varint(leaf, 0);  // no data files: every value inline
    put_varint(leaf, keys.size());
    put_keys<Child>(leaf, keys);
    for (size_t e = start; e < end; ++e) put_varint(leaf, entries[e].value->size());
    for (size_t e = start; e < end; ++e)
      leaf += static_cast<char>(entries[e].offset == UINT64_MAX ? 0 : 1);
    for (size_t e = start; e < end; ++e)
      if (entries[e].offset != UINT64_MAX) put_varint(leaf, 0);  // the one data file
    for (size_t e = start; e < end; ++e)
      if (entries[e].offset != UINT64_MAX) put_varint(leaf, entries[e].offset);
    for (size_t e = start; e < end; ++e)
      if (entries[e].offset == UINT64_MAX) leaf += *entries[e].value;
    if (leaf.size() > options.max_decoded_node_bytes)
      throw Error("ocdbt: a B+tree leaf of " + std::to_string(keys.size()) +
                  " keys exceeds the node limit (lower max_leaf_entries)");
    const std::string node = frame(kBtreeNodeMagic, leaf, options.zstd_level);
    c.offset = data.size();
    c.length = node.size();
    c.num_keys = keys.size();
    data += node;
    children.push_back(std::move(c));
  }
  int root_height = 0;
  uint64_t node_offset = children[0].offset, node_length = children[0].length;
  uint64_t tree_bytes = children[0].length;
  if (children.size() > 1) {
    root_height = 1;
    std::string root;
    root += '\1';  // height 1
    put_table(root, data_path);
    put_varint(root, children.size());
    std::vector<std::string> keys;
    for (const auto& c : children) keys.push_back(c.first_key);
    put_keys(root, keys, &children);
    for (size_t c = 0; c < children.size(); ++c) put_varint(root, 0);
    for (const auto& c : children) put_varint(root, c.offset);
    for (const auto& c : children) put_varint(root, c.length);
    for (const auto& c : children) put_varint(root, c.num_keys);
    for (const auto& c : children) put_varint(root, c.length);
    for (const auto& c : children) put_varint(root, c.indirect);
    const std::string node = frame(kBtreeNodeMagic, root, options.zstd_level);
    node_offset = data.size();
    node_length = node.size();
    tree_bytes = node.size();
    for (const auto& c : children) tree_bytes += c.length;
    data += node;
  }
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
  m += static_cast<char>(root_height);
  put_varint(m, 0);
  put_varint(m, node_offset);
  put_varint(m, node_length);
  put_varint(m, values.size());
  put_varint(m, tree_bytes);
  put_varint(m, indirect_bytes);
  put_le(m, static_cast<uint64_t>(files::now_nanos()), 8);
  put_varint(m, 0);  // no version nodes
  files::write_synced(dir / "manifest.ocdbt", frame(kManifestMagic, m, options.zstd_level));
  files::sync_dir(dir);
}

}  // namespace cujax::checkpoint::ocdbt
