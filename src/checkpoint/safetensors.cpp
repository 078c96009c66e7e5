#include "checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "checkpoint/files.h"
#include "cujax/core/error.h"
#include "cujax/core/json.h"

namespace cujax::checkpoint::safetensors {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxHeader = 100'000'000;  // the reference reader's limit

const std::vector<std::pair<std::string, DType>>& dtype_table() {
  static const std::vector<std::pair<std::string, DType>> t = {{"BOOL", DType::Bool},
                                                               {"U8", DType::U8},
                                                               {"I8", DType::I8},
                                                               {"I16", DType::I16},
                                                               {"U16", DType::U16},
                                                               {"F16", DType::F16},
                                                               {"BF16", DType::BF16},
                                                               {"I32", DType::I32},
                                                               {"U32", DType::U32},
                                                               {"F32", DType::F32},
                                                               {"F64", DType::F64},
                                                               {"I64", DType::I64},
                                                               {"U64", DType::U64},
                                                               {"C64", DType::C64},
                                                               {"F8_E5M2", DType::F8E5M2},
                                                               {"F8_E4M3", DType::F8E4M3FN},
                                                               {"F8_E4M3FNUZ", DType::F8E4M3FNUZ},
                                                               {"F8_E5M2FNUZ", DType::F8E5M2FNUZ},
                                                               {"F8_E8M0", DType::F8E8M0FNU}};
  return t;
}

}  // namespace

std::string dtype_name(DType t) {
  for (const auto& [n, d] : dtype_table())
    if (d == t) return n;
  throw Error("safetensors has no name for dtype " + std::string(numpy_name(t)));
}

std::vector<Leaf> parse(std::string_view bytes, const std::string& where) {
  auto fail = [&](const std::string& what) -> void {
    throw Error("safetensors: " + where + ": " + what);
  };
  if (bytes.size() < 8)
    fail("file of " + std::to_string(bytes.size()) + " bytes has no header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  if (n > kMaxHeader)
    fail("header length " + std::to_string(n) + " exceeds the limit of 100000000");
  if (n > bytes.size() - 8)
    fail("header length " + std::to_string(n) + " runs past the file's end (" +
         std::to_string(bytes.size()) + " bytes)");
  const std::string_view header = bytes.substr(8, n);
  if (header.empty() || header[0] != '{') fail("header does not start with '{' (at byte 8)");
  const json::Value h = json::parse(header, where + " header");
  if (!h.is_object()) fail("header is not a JSON object");
  const std::string_view buffer = bytes.substr(8 + n);
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  std::set<std::string> names;
  for (const auto& [name, v] : h.as_object()) {
    if (!names.insert(name).second) fail("tensor '" + name + "' appears twice in the header");
    if (name == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object");
      for (const auto& [k, mv] : v.as_object())
        if (!mv.is_string()) fail("__metadata__ value '" + k + "' is not a string");
      continue;
    }
    if (!v.is_object()) fail("tensor '" + name + "' is not an object");
    Entry e{name, DType::F32, {}, 0, 0};
    const std::string& dt = v.at("dtype").as_string();
    bool found = false;
    for (const auto& [dn, d] : dtype_table())
      if (dn == dt) {
        e.dtype = d;
        found = true;
      }
    if (!found) fail("tensor '" + name + "': unsupported dtype \"" + dt + "\"");
    uint64_t count = 1;
    for (const auto& d : v.at("shape").as_array()) {
      const int64_t x = d.as_int();
      if (x < 0) fail("tensor '" + name + "': negative dimension");
      if (x > 0 && count > (uint64_t{1} << 62) / static_cast<uint64_t>(x))
        fail("tensor '" + name + "': shape overflows");
      count *= static_cast<uint64_t>(x);
      e.shape.push_back(x);
    }
    const auto& off = v.at("data_offsets").as_array();
    if (off.size() != 2) fail("tensor '" + name + "': data_offsets is not [begin, end]");
    if (off[0].as_int() < 0 || off[1].as_int() < off[0].as_int())
      fail("tensor '" + name + "': data_offsets [" + std::to_string(off[0].as_int()) + ", " +
           std::to_string(off[1].as_int()) + "] is not an interval");
    e.begin = static_cast<uint64_t>(off[0].as_int());
    e.end = static_cast<uint64_t>(off[1].as_int());
    const uint64_t width = size_of(e.dtype);
    if (count > UINT64_MAX / width || e.end - e.begin != count * width)
      fail("tensor '" + name + "': " + std::to_string(e.end - e.begin) + " bytes for shape " +
           shape_to_string(e.shape) + " of " + dt + " (" + std::to_string(count * width) +
           " expected)");
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t at = 0;
  for (const Entry& e : entries) {
    if (e.begin != at)
      fail("tensor '" + e.name + "' starts at buffer byte " + std::to_string(e.begin) + ", " +
           (e.begin < at ? "overlapping the previous tensor" : "leaving a gap") +
           " (the previous one ends at " + std::to_string(at) + ")");
    at = e.end;
  }
  if (at != buffer.size())
    fail("tensors end at buffer byte " + std::to_string(at) + " but the buffer (from file byte " +
         std::to_string(8 + n) + ") holds " + std::to_string(buffer.size()));
  std::vector<Leaf> out;
  for (const Entry& e : entries) {
    HostTensor t(e.dtype, e.shape);
    if (t.nbytes()) std::memcpy(t.data(), buffer.data() + e.begin, t.nbytes());
    out.push_back({e.name, std::move(t)});
  }
  return out;
}

std::vector<Leaf> read_file(const fs::path& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw Error("safetensors: cannot read " + path.string());
  (void)size;
  return parse(files::read(path), path.string());
}

std::string serialize(const std::vector<Leaf>& leaves,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<const Leaf*> order;
  std::set<std::string> names;
  for (const auto& l : leaves) {
    if (l.path == "__metadata__" || !names.insert(l.path).second)
      throw Error("safetensors: tensor name '" + l.path + "' is reserved or repeated");
    order.push_back(&l);
  }
  // Wider elements first keeps every tensor aligned to its element size.
  std::stable_sort(order.begin(), order.end(), [](const Leaf* a, const Leaf* b) {
    const size_t wa = size_of(a->value.dtype()), wb = size_of(b->value.dtype());
    return wa != wb ? wa > wb : a->path < b->path;
  });
  json::Value h = json::Value::object();
  if (!metadata.empty()) {
    json::Value m = json::Value::object();
    for (const auto& [k, v] : metadata) m.set(k, v);
    h.set("__metadata__", std::move(m));
  }
  uint64_t at = 0;
  for (const Leaf* l : order) {
    json::Value e = json::Value::object();
    e.set("dtype", dtype_name(l->value.dtype()));
    json::Value::Array shape;
    for (int64_t d : l->value.shape()) shape.emplace_back(d);
    e.set("shape", json::Value(std::move(shape)));
    json::Value::Array off{json::Value(static_cast<int64_t>(at)),
                           json::Value(static_cast<int64_t>(at + l->value.nbytes()))};
    e.set("data_offsets", json::Value(std::move(off)));
    h.set(l->path, std::move(e));
    at += l->value.nbytes();
  }
  std::string header = json::dump(h);
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  for (const Leaf* l : order)
    out.append(static_cast<const char*>(l->value.data()), l->value.nbytes());
  return out;
}

void write_file(const fs::path& path, const std::vector<Leaf>& leaves,
                const std::map<std::string, std::string>& metadata) {
  const std::string bytes = serialize(leaves, metadata);
  const fs::path tmp = files::tmp_sibling(path);
  try {
    files::write_synced(tmp, bytes);
    fs::rename(tmp, path);
    if (path.has_parent_path()) files::sync_dir(path.parent_path());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

}  // namespace cujax::checkpoint::safetensors
