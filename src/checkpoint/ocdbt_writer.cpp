// Writing a new OCDBT database, as TensorStore lays it out: one data file d/<32 hex> holding the
// out-of-line values and then the B+tree nodes, and manifest.ocdbt (single kind, generation 1)
// pointing at the root. Written last, the manifest makes the database appear. Orbax's
// top-level database over the per-process ones is the same with values left where they are.
#include <zstd.h>

#include <algorithm>
#include <random>
#include <set>

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

// A data file as node tables name it: its path relative to the database folder and how much of
// that path is the base path (the part a child node's table would inherit).
struct DataFileName {
  std::string path;
  size_t base_length = 0;
  bool operator<(const DataFileName& o) const { return path < o.path; }
};

size_t common_prefix(const std::string& a, const std::string& b) {
  size_t p = 0;
  while (p < a.size() && p < b.size() && a[p] == b[p]) ++p;
  return p;
}

// The data-file table: count, prefix lengths shared with the previous path, suffix lengths,
// base path lengths, then the suffixes.
void put_table(std::string& out, const std::vector<DataFileName>& files) {
  put_varint(out, files.size());
  auto shared = [&](size_t i) { return i ? common_prefix(files[i - 1].path, files[i].path) : 0; };
  for (size_t i = 1; i < files.size(); ++i) put_varint(out, shared(i));
  for (size_t i = 0; i < files.size(); ++i) put_varint(out, files[i].path.size() - shared(i));
  for (const auto& f : files) put_varint(out, f.base_length);
  for (size_t i = 0; i < files.size(); ++i) out += files[i].path.substr(shared(i));
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

// One key of the tree being written: its value inline, or a range of a data file.
struct Entry {
  std::string key;
  const std::string* bytes = nullptr;  // inline value
  const DataFileName* file = nullptr;  // out of line: file, offset, length
  uint64_t offset = 0, length = 0;
  uint64_t size() const { return file ? length : bytes->size(); }
};

// Writes the B+tree over `entries` (ascending keys) at the end of `data`, which becomes the data
// file `data_path` of `dir` (it may already hold out-of-line values), then manifest.ocdbt.
void write_tree(const fs::path& dir, const std::vector<Entry>& entries, std::string data,
                const DataFileName& data_path, const WriteOptions& options) {
  uint64_t indirect_bytes = 0;
  for (const auto& e : entries) {
    if (e.key.size() > 65535) throw Error("ocdbt: key longer than 65535 bytes");
    if (e.file) indirect_bytes += e.length;
  }
  // Leaves of at most max_leaf_entries keys; with more than one, an interior root over them.
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
    c.first_key = entries[start].key;
    c.common = common_prefix(c.first_key, entries[end - 1].key);
    if (entries.size() <= per_leaf) c.common = 0;  // a lone leaf is the root: no parent prefix
    std::vector<std::string> keys;
    std::set<DataFileName> used;
    for (size_t e = start; e < end; ++e) {
      keys.push_back(entries[e].key.substr(c.common));
      if (entries[e].file) {
        used.insert(*entries[e].file);
        c.indirect += entries[e].length;
      }
    }
    const std::vector<DataFileName> table(used.begin(), used.end());
    std::string leaf;
    leaf += '\0';  // height 0
    put_table(leaf, table);
    put_varint(leaf, keys.size());
    put_keys<Child>(leaf, keys);
    for (size_t e = start; e < end; ++e) put_varint(leaf, entries[e].size());
    for (size_t e = start; e < end; ++e) leaf += static_cast<char>(entries[e].file ? 1 : 0);
    for (size_t e = start; e < end; ++e)
      if (entries[e].file)
        put_varint(leaf,
                   std::lower_bound(table.begin(), table.end(), *entries[e].file) - table.begin());
    for (size_t e = start; e < end; ++e)
      if (entries[e].file) put_varint(leaf, entries[e].offset);
    for (size_t e = start; e < end; ++e)
      if (!entries[e].file) leaf += *entries[e].bytes;
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
    put_table(root, {data_path});
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
  fs::create_directories(dir / "d");
  files::write_synced(dir / data_path.path, data);
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
  put_table(m, {data_path});
  put_varint(m, 1);  // one version: generation 1
  put_varint(m, 1);
  m += static_cast<char>(root_height);
  put_varint(m, 0);
  put_varint(m, node_offset);
  put_varint(m, node_length);
  put_varint(m, entries.size());
  put_varint(m, tree_bytes);
  put_varint(m, indirect_bytes);
  put_le(m, static_cast<uint64_t>(files::now_nanos()), 8);
  put_varint(m, 0);  // no version nodes
  files::write_synced(dir / "manifest.ocdbt", frame(kManifestMagic, m, options.zstd_level));
  files::sync_dir(dir);
}

void refuse_existing(const fs::path& dir) {
  if (fs::exists(dir / "manifest.ocdbt"))
    throw Error("ocdbt: " + dir.string() + " already holds a database");
}

}  // namespace

void write_database(const fs::path& dir, const std::map<std::string, std::string>& values,
                    const WriteOptions& options) {
  refuse_existing(dir);
  if (values.empty()) throw Error("ocdbt: writing an empty database is not supported");
  const DataFileName data_path{"d/" + random_hex(16), 0};
  // Out-of-line values first, then the nodes that point at them.
  std::string data;
  std::vector<Entry> entries;
  for (const auto& [k, v] : values) {
    Entry e{k, &v};
    if (v.size() > options.max_inline_value_bytes) {
      e.file = &data_path;
      e.offset = data.size();
      e.length = v.size();
      data += v;
    }
    entries.push_back(std::move(e));
  }
  write_tree(dir, entries, std::move(data), data_path, options);
}

void merge_databases(const fs::path& dir, const std::vector<std::string>& subdirs,
                     const WriteOptions& options) {
  refuse_existing(dir);
  std::vector<Database> dbs;
  for (const auto& sub : subdirs) dbs.emplace_back(dir / sub);
  // Every data file a process database's values live in, named from `dir`.
  std::map<std::string, DataFileName> names;
  std::map<std::string, std::pair<const Database::ValueRef*, size_t>> all;  // key -> value, db
  for (size_t i = 0; i < dbs.size(); ++i) {
    for (const auto& [k, v] : dbs[i].entries()) {
      if (!all.emplace(k, std::pair{&v, i}).second)
        throw Error("ocdbt: key '" + k + "' is in both " + (dir / subdirs[all[k].second]).string() +
                    " and " + (dir / subdirs[i]).string());
      if (!v.is_inline) {
        const std::string path = subdirs[i] + "/" + v.file;
        names.emplace(path, DataFileName{path, subdirs[i].size() + 1});
      }
    }
  }
  if (all.empty()) throw Error("ocdbt: the process databases under " + dir.string() + " are empty");
  std::vector<Entry> entries;
  for (const auto& [k, ref] : all) {
    const auto& [v, i] = ref;
    Entry e{k, &v->bytes};
    if (!v->is_inline) {
      e.file = &names.at(subdirs[i] + "/" + v->file);
      e.offset = v->offset;
      e.length = v->length;
    }
    entries.push_back(std::move(e));
  }
  write_tree(dir, entries, {}, DataFileName{"d/" + random_hex(16), 0}, options);
}

}  // namespace cujax::checkpoint::ocdbt
