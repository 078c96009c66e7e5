#include "checkpoint/ocdbt.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <functional>

#include "checkpoint/zarr.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint::ocdbt {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxPathLength = 65535;
constexpr uint64_t kMaxManifestBytes = 1 << 24;  // decoded; a manifest holds a few dozen entries
constexpr size_t kMaxNodes = 1 << 20;            // B+tree nodes read for one database
constexpr uint64_t kMaxKeyLength = 65535;
// Keys share prefixes, so a node's keys may add up to more than its bytes, but not without
// bound: at most this many bytes of keys per decoded byte (plus a floor).
constexpr uint64_t kKeyBytesPerNodeByte = 256;

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Cursor over one object's (decoded) body; errors name the object and the byte.
struct Reader {
  std::string_view data;
  std::string where;  // "<file> (object at byte N)"
  size_t pos = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("ocdbt: " + where + ": " + what + " (at byte " + std::to_string(pos) +
                " of the decoded body)");
  }
  size_t remaining() const { return data.size() - pos; }
  uint8_t byte() {
    if (pos >= data.size()) fail("unexpected end");
    return static_cast<uint8_t>(data[pos++]);
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = byte();
      if (shift == 63 && b > 1) fail("varint overflows 64 bits");
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  uint64_t u64le() {
    if (remaining() < 8) fail("unexpected end");
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= static_cast<uint64_t>(static_cast<uint8_t>(data[pos + i])) << (8 * i);
    pos += 8;
    return v;
  }
  std::string_view bytes(uint64_t n) {
    if (n > remaining())
      fail("needs " + std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left");
    std::string_view s = data.substr(pos, n);
    pos += n;
    return s;
  }
  // A count of items that each take at least `min_bytes`: bounded by the bytes left.
  uint64_t count(const char* what, uint64_t min_bytes = 1) {
    const uint64_t n = varint();
    if (n > remaining() / min_bytes)
      fail(std::string(what) + " " + std::to_string(n) + " exceeds what the " +
           std::to_string(remaining()) + " remaining bytes can hold");
    return n;
  }
};

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

uint32_t load_le32(std::string_view s) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(s[i])) << (8 * i);
  return v;
}

// The zstd stream `src` decoded, failing past `max_out` bytes (a node never decodes larger).
std::string zstd_stream(std::string_view src, uint64_t max_out, const Reader& r) {
  try {
    return zarr::zstd_decode(src, max_out, "zstd body");
  } catch (const Error& e) {
    r.fail(e.what());
  }
}

// Checks an object's framing (magic, length, version, CRC32C) and returns its decoded body.
std::string decode_object(std::string_view raw, uint32_t magic, const char* kind,
                          const std::string& where, uint64_t max_decoded) {
  Reader head{raw, where};
  if (raw.size() < 4 + 8 + 2 + 4)
    head.fail(std::string(kind) + " of " + std::to_string(raw.size()) + " bytes is too short");
  uint32_t m = 0;
  for (int i = 0; i < 4; ++i) m = (m << 8) | static_cast<uint8_t>(raw[i]);
  if (m != magic)
    head.fail(std::string("magic ") + hex(m) + " is not a " + kind + "'s " + hex(magic));
  head.pos = 4;
  const uint64_t length = head.u64le();
  if (length != raw.size())
    head.fail("length field says " + std::to_string(length) + " bytes, the " + kind + " has " +
              std::to_string(raw.size()));
  const uint32_t stored = load_le32(raw.substr(raw.size() - 4));
  const uint32_t computed = crc32c(raw.substr(0, raw.size() - 4));
  if (stored != computed)
    head.fail("CRC32C mismatch: stored " + hex(stored) + ", computed " + hex(computed));
  Reader r{raw.substr(0, raw.size() - 4), where, 12};
  if (const uint64_t v = r.varint(); v != 0) r.fail("format version " + std::to_string(v));
  const uint64_t comp = r.varint();
  const std::string_view body = raw.substr(r.pos, raw.size() - 4 - r.pos);
  if (comp == 0) {
    if (body.size() > max_decoded) r.fail("body exceeds " + std::to_string(max_decoded) + " bytes");
    return std::string(body);
  }
  if (comp != 1) r.fail("compression " + std::to_string(comp) + " (0 none, 1 zstd)");
  return zstd_stream(body, max_decoded, r);
}

struct DataFile {
  std::string path;  // relative to the database folder
  std::string base;  // the transitive path for nodes read from it
};

bool safe_path(const std::string& p) {
  if (p.empty() || p[0] == '/') return false;
  for (const auto& part : fs::path(p)) {
    if (part == "..") return false;
  }
  return true;
}

std::vector<DataFile> read_table(Reader& r, const std::string& transitive) {
  const uint64_t n = r.count("data file count", 2);
  std::vector<uint64_t> prefix(n, 0), suffix(n), base(n);
  for (uint64_t i = 1; i < n; ++i) prefix[i] = r.varint();
  for (auto& s : suffix) s = r.varint();
  for (auto& b : base) b = r.varint();
  std::vector<DataFile> out;
  out.reserve(n);
  std::string prev;
  for (uint64_t i = 0; i < n; ++i) {
    if (prefix[i] > prev.size())
      r.fail("data file " + std::to_string(i) + ": prefix length " + std::to_string(prefix[i]) +
             " exceeds the previous path's " + std::to_string(prev.size()));
    if (suffix[i] > kMaxPathLength) r.fail("data file path too long");
    std::string path = prev.substr(0, prefix[i]) + std::string(r.bytes(suffix[i]));
    if (path.size() + transitive.size() > kMaxPathLength) r.fail("data file path too long");
    if (base[i] > path.size())
      r.fail("data file " + std::to_string(i) + ": base path length " + std::to_string(base[i]) +
             " exceeds the path's " + std::to_string(path.size()));
    DataFile f{transitive + path, transitive + path.substr(0, base[i])};
    if (!safe_path(f.path)) r.fail("data file path '" + f.path + "' leaves the database folder");
    out.push_back(std::move(f));
    prev = std::move(path);
  }
  return out;
}

const DataFile& file_at(Reader& r, const std::vector<DataFile>& table) {
  const uint64_t id = r.varint();
  if (id >= table.size())
    r.fail("data file id " + std::to_string(id) + " outside the table of " +
           std::to_string(table.size()));
  return table[id];
}

void check_range(Reader& r, uint64_t offset, uint64_t length) {
  if (offset > UINT64_MAX - length)
    r.fail("offset " + std::to_string(offset) + " + length " + std::to_string(length) +
           " overflows");
}

std::vector<Version> read_version_leaf(Reader& r, const std::vector<DataFile>& table,
                                       int arity_log2) {
  const uint64_t n = r.count("version count", 2);
  if (n == 0 || n > (uint64_t{1} << arity_log2))
    r.fail("version count " + std::to_string(n) + " outside [1, " +
           std::to_string(uint64_t{1} << arity_log2) + "]");
  std::vector<Version> v(n);
  for (auto& e : v) {
    e.generation = r.varint();
    if (e.generation == 0) r.fail("generation number 0");
  }
  for (size_t i = 1; i < n; ++i)
    if (v[i].generation <= v[i - 1].generation) r.fail("generation numbers not increasing");
  if (n > (v.back().generation - 1) % (uint64_t{1} << arity_log2) + 1)
    r.fail("more versions than the last generation allows in one node");
  for (auto& e : v) e.root_height = r.byte();
  for (auto& e : v) {
    const DataFile& f = file_at(r, table);
    e.root_file = f.path;
    e.root_base = f.base;
  }
  for (auto& e : v) e.root_offset = r.varint();
  for (auto& e : v) {
    e.root_length = r.varint();
    check_range(r, e.root_offset, e.root_length);
  }
  for (auto& e : v) e.num_keys = r.varint();
  for (auto& e : v) e.num_tree_bytes = r.varint();
  for (auto& e : v) e.num_indirect_value_bytes = r.varint();
  for (auto& e : v) e.commit_time = r.u64le();
  return v;
}

}  // namespace

uint32_t crc32c(std::string_view bytes, uint32_t crc) {
  const auto& t = crc_table();
  crc = ~crc;
  for (unsigned char c : bytes) crc = t[(crc ^ c) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::string Database::read_range(const std::string& file, uint64_t offset, uint64_t length) const {
  const fs::path p = dir_ / file;
  std::error_code ec;
  const uint64_t size = fs::file_size(p, ec);
  if (ec) throw Error("ocdbt: data file " + p.string() + " is missing or unreadable");
  if (offset > size || length > size - offset)
    throw Error("ocdbt: " + p.string() + ": range at byte " + std::to_string(offset) + " of " +
                std::to_string(length) + " bytes runs past the file's end (" +
                std::to_string(size) + " bytes)");
  std::ifstream in(p, std::ios::binary);
  std::string out(length, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(out.data(), static_cast<std::streamsize>(length)))
    throw Error("ocdbt: cannot read " + p.string() + " at byte " + std::to_string(offset));
  return out;
}

Database::Database(fs::path dir) : dir_(std::move(dir)) {
  read_manifest();
  size_t budget = kMaxNodes;
  if (latest_.num_keys > 0)
    read_btree({latest_.root_file, latest_.root_offset, latest_.root_length}, latest_.root_base, "",
               latest_.root_height, budget);
}

void Database::read_manifest() {
  manifest_file_ = dir_ / "manifest.ocdbt";
  auto load = [&](const fs::path& p) {
    std::error_code ec;
    const uint64_t size = fs::file_size(p, ec);
    if (ec) throw Error("ocdbt: " + p.string() + " is missing");
    if (size > kMaxManifestBytes) throw Error("ocdbt: " + p.string() + " is too large");
    return read_range(p.lexically_relative(dir_).string(), 0, size);
  };
  auto parse_config = [](Reader& r) {
    Config c;
    c.uuid = std::string(r.bytes(16));
    const uint8_t kind = r.byte();
    if (kind > 1) r.fail("manifest kind " + std::to_string(kind));
    c.numbered_manifest = kind == 1;
    c.max_inline_value_bytes = r.varint();
    c.max_decoded_node_bytes = r.varint();
    c.version_tree_arity_log2 = r.byte();
    if (c.version_tree_arity_log2 < 1 || c.version_tree_arity_log2 > 16)
      r.fail("version tree arity log2 " + std::to_string(c.version_tree_arity_log2));
    const uint64_t comp = r.varint();
    if (comp > 1) r.fail("compression method " + std::to_string(comp));
    c.zstd = comp == 1;
    if (c.zstd) c.zstd_level = static_cast<int32_t>(load_le32(r.bytes(4)));
    return c;
  };
  std::string body = decode_object(load(manifest_file_), kManifestMagic, "manifest",
                                   manifest_file_.string(), kMaxManifestBytes);
  Reader r{body, manifest_file_.string() + " (decoded manifest)"};
  config_ = parse_config(r);
  if (config_.numbered_manifest) {
    // manifest.ocdbt holds the configuration only; the newest manifest.<16 hex> the versions.
    std::string best;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name.size() == 9 + 16 && name.rfind("manifest.", 0) == 0 &&
          name.find_first_not_of("0123456789abcdef", 9) == std::string::npos && name > best)
        best = name;
    }
    if (best.empty())
      throw Error("ocdbt: " + manifest_file_.string() +
                  " names a numbered manifest but no manifest.<16 hex digits> file exists");
    manifest_file_ = dir_ / best;
    body = decode_object(load(manifest_file_), kManifestMagic, "manifest", manifest_file_.string(),
                         kMaxManifestBytes);
    r = Reader{body, manifest_file_.string() + " (decoded manifest)"};
    const Config c = parse_config(r);
    if (c.numbered_manifest) r.fail("a numbered manifest must hold the versions");
    config_.max_decoded_node_bytes = c.max_decoded_node_bytes;
  }
  const auto table = read_table(r, "");
  inline_versions_ = read_version_leaf(r, table, config_.version_tree_arity_log2);
  const uint64_t n = r.count("version node count", 5);
  if (n > 64) r.fail("version node count " + std::to_string(n));
  version_nodes_.resize(n);
  for (auto& v : version_nodes_) {
    v.generation = r.varint();
    if (v.generation == 0) r.fail("generation number 0");
  }
  for (auto& v : version_nodes_) {
    const DataFile& f = file_at(r, table);
    v.ref.file = f.path;
    v.base = f.base;
  }
  for (auto& v : version_nodes_) v.ref.offset = r.varint();
  for (auto& v : version_nodes_) {
    v.ref.length = r.varint();
    check_range(r, v.ref.offset, v.ref.length);
  }
  for (auto& v : version_nodes_) v.num_generations = r.varint();
  for (auto& v : version_nodes_) v.commit_time = r.u64le();
  for (auto& v : version_nodes_) v.height = r.byte();
  for (size_t i = 1; i < n; ++i)
    if (version_nodes_[i].generation <= version_nodes_[i - 1].generation ||
        version_nodes_[i].height >= version_nodes_[i - 1].height)
      r.fail("version nodes out of order");
  if (r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " bytes after the version tree");
  latest_ = inline_versions_.back();
}

void Database::read_btree(const NodeRef& ref, const std::string& base, const std::string& prefix,
                          int height, size_t& budget) {
  if (budget == 0)
    throw Error("ocdbt: " + dir_.string() + ": more than " + std::to_string(kMaxNodes) +
                " B+tree nodes");
  --budget;
  const std::string where =
      (dir_ / ref.file).string() + " (B+tree node at byte " + std::to_string(ref.offset) + ")";
  const std::string body =
      decode_object(read_range(ref.file, ref.offset, ref.length), kBtreeNodeMagic, "B+tree node",
                    where, std::max<uint64_t>(config_.max_decoded_node_bytes, 1 << 20));
  Reader r{body, where};
  const int h = r.byte();
  if (h != height)
    r.fail("height " + std::to_string(h) + ", its parent says " + std::to_string(height));
  const auto table = read_table(r, base);
  const uint64_t n = r.count("entry count", 2);
  if (n == 0) r.fail("empty B+tree node");
  std::vector<uint64_t> plen(n, 0), slen(n), common(n, 0);
  for (uint64_t i = 1; i < n; ++i) plen[i] = r.varint();
  for (auto& s : slen) s = r.varint();
  if (height > 0)
    for (auto& c : common) c = r.varint();
  std::vector<std::string> keys(n);
  const uint64_t key_budget = std::max<uint64_t>(1 << 24, kKeyBytesPerNodeByte * body.size());
  uint64_t key_bytes = 0;
  for (uint64_t i = 0; i < n; ++i) {
    if (plen[i] > kMaxKeyLength || slen[i] > kMaxKeyLength || plen[i] + slen[i] > kMaxKeyLength)
      r.fail("key " + std::to_string(i) + " longer than " + std::to_string(kMaxKeyLength) +
             " bytes");
    key_bytes += plen[i] + slen[i] + prefix.size();
    if (key_bytes > key_budget)
      r.fail("keys add up to more than " + std::to_string(key_budget) + " bytes");
    const std::string& prev = i ? keys[i - 1] : keys[0];
    if (plen[i] > (i ? prev.size() : 0))
      r.fail("key " + std::to_string(i) + ": prefix length " + std::to_string(plen[i]) +
             " exceeds the previous key's length");
    keys[i] = (i ? prev.substr(0, plen[i]) : std::string()) + std::string(r.bytes(slen[i]));
    if (i && keys[i] <= prev) r.fail("keys out of order");
    if (common[i] > keys[i].size()) r.fail("subtree prefix longer than its key");
  }
  if (height > 0) {
    std::vector<NodeRef> refs(n);
    std::vector<std::string> bases(n);
    for (uint64_t i = 0; i < n; ++i) {
      const DataFile& f = file_at(r, table);
      refs[i].file = f.path;
      bases[i] = f.base;
    }
    for (auto& c : refs) c.offset = r.varint();
    for (auto& c : refs) {
      c.length = r.varint();
      check_range(r, c.offset, c.length);
    }
    for (int stat = 0; stat < 3; ++stat)
      for (uint64_t i = 0; i < n; ++i) r.varint();  // num_keys, num_tree_bytes, indirect bytes
    if (r.remaining() != 0) r.fail("trailing bytes after the entries");
    for (uint64_t i = 0; i < n; ++i)
      read_btree(refs[i], bases[i], prefix + keys[i].substr(0, common[i]), height - 1, budget);
    return;
  }
  std::vector<uint64_t> len(n);
  std::vector<uint8_t> kind(n);
  for (auto& l : len) l = r.varint();
  for (auto& k : kind) {
    k = r.byte();
    if (k > 1) r.fail("value kind " + std::to_string(k));
  }
  std::vector<ValueRef> values(n);
  for (uint64_t i = 0; i < n; ++i)
    if (kind[i] == 1) {
      values[i].is_inline = false;
      values[i].file = file_at(r, table).path;
    }
  for (uint64_t i = 0; i < n; ++i)
    if (kind[i] == 1) {
      values[i].offset = r.varint();
      values[i].length = len[i];
      check_range(r, values[i].offset, len[i]);
    }
  for (uint64_t i = 0; i < n; ++i)
    if (kind[i] == 0) values[i].bytes = std::string(r.bytes(len[i]));
  if (r.remaining() != 0) r.fail("trailing bytes after the values");
  if (entries_.size() + n > (size_t{1} << 24)) r.fail("more than 2^24 keys in the database");
  for (uint64_t i = 0; i < n; ++i) entries_[prefix + keys[i]] = std::move(values[i]);
}

std::optional<std::string> Database::get(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  if (it->second.is_inline) return it->second.bytes;
  return read_range(it->second.file, it->second.offset, it->second.length);
}

std::vector<std::string> Database::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [k, v] : entries_) out.push_back(k);
  return out;
}

std::string Database::describe(const std::string& key) const {
  auto it = entries_.find(key);
  std::string s = "OCDBT " + dir_.string() + " key '" + key + "'";
  if (it != entries_.end() && !it->second.is_inline)
    s += " (" + (dir_ / it->second.file).string() + " at byte " +
         std::to_string(it->second.offset) + ")";
  return s;
}

std::vector<Version> Database::versions() const {
  std::vector<Version> out;
  // Version nodes hold older generations; walk each subtree (heights strictly decrease).
  std::function<void(const NodeRef&, const std::string&, int)> walk =
      [&](const NodeRef& ref, const std::string& base, int height) {
        const std::string where = (dir_ / ref.file).string() + " (version node at byte " +
                                  std::to_string(ref.offset) + ")";
        const std::string body =
            decode_object(read_range(ref.file, ref.offset, ref.length), kVersionNodeMagic,
                          "version node", where, kMaxManifestBytes);
        Reader r{body, where};
        if (r.byte() != config_.version_tree_arity_log2)
          r.fail("arity differs from the manifest's");
        const int h = r.byte();
        if (h != height)
          r.fail("height " + std::to_string(h) + ", expected " + std::to_string(height));
        const auto table = read_table(r, base);
        if (h == 0) {
          for (auto& v : read_version_leaf(r, table, config_.version_tree_arity_log2))
            out.push_back(v);
          return;
        }
        const uint64_t n = r.count("version node children", 5);
        std::vector<NodeRef> refs(n);
        std::vector<std::string> bases(n);
        for (uint64_t i = 0; i < n; ++i) r.varint();  // generation numbers
        for (uint64_t i = 0; i < n; ++i) {
          const DataFile& f = file_at(r, table);
          refs[i].file = f.path;
          bases[i] = f.base;
        }
        for (auto& c : refs) c.offset = r.varint();
        for (auto& c : refs) c.length = r.varint();
        for (uint64_t i = 0; i < n; ++i) r.varint();  // num_generations
        for (uint64_t i = 0; i < n; ++i) r.u64le();   // commit_time
        for (uint64_t i = 0; i < n; ++i) walk(refs[i], bases[i], h - 1);
      };
  for (const auto& v : version_nodes_) walk(v.ref, v.base, v.height);
  out.insert(out.end(), inline_versions_.begin(), inline_versions_.end());
  std::sort(out.begin(), out.end(),
            [](const Version& a, const Version& b) { return a.generation < b.generation; });
  return out;
}

}  // namespace cujax::checkpoint::ocdbt
