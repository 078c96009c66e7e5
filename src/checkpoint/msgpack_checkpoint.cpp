#include "checkpoint/msgpack_checkpoint.h"

#define MSGPACK_NO_BOOST
#include <msgpack.hpp>

#include <cstring>

#include "checkpoint/files.h"
#include "checkpoint/kvstore.h"
#include "checkpoint/zarr.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint::msgpack_checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPlaceholder = "PLACEHOLDER://";

struct Walker {
  fs::path dir;
  std::string where;
  std::vector<Leaf> leaves;
  bool placeholders = false, tensorstore = false;

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error("msgpack checkpoint: " + where + ": '" + path + "': " + what);
  }

  std::string key_of(const msgpack::object& k, const std::string& path) const {
    switch (k.type) {
      case msgpack::type::STR:
        return std::string(k.via.str.ptr, k.via.str.size);
      case msgpack::type::POSITIVE_INTEGER:
        return std::to_string(k.via.u64);
      case msgpack::type::NEGATIVE_INTEGER:
        return std::to_string(k.via.i64);
      default:
        fail(path, "a map key that is not a string or an integer");
    }
  }

  // Flax's ext types 1 and 3: msgpack [shape, dtype name, bytes].
  HostTensor ext_array(const char* data, uint32_t size, const std::string& path) const {
    msgpack::object_handle oh;
    try {
      oh = msgpack::unpack(data, size, nullptr, nullptr,
                           msgpack::unpack_limit(size, 0, size, size, 0, 4));
    } catch (const std::exception& e) {
      fail(path, std::string("ext payload: ") + e.what());
    }
    const msgpack::object& o = oh.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 3)
      fail(path, "ext payload is not [shape, dtype, bytes]");
    const msgpack::object& shape_o = o.via.array.ptr[0];
    const msgpack::object& dtype_o = o.via.array.ptr[1];
    const msgpack::object& data_o = o.via.array.ptr[2];
    if (shape_o.type != msgpack::type::ARRAY) fail(path, "shape is not a list");
    Shape shape;
    uint64_t n = 1;
    for (uint32_t i = 0; i < shape_o.via.array.size; ++i) {
      const msgpack::object& d = shape_o.via.array.ptr[i];
      if (d.type != msgpack::type::POSITIVE_INTEGER)
        fail(path, "a dimension is not a natural number");
      if (d.via.u64 > 0 && n > (uint64_t{1} << 40) / d.via.u64) fail(path, "shape too large");
      n *= d.via.u64;
      shape.push_back(static_cast<int64_t>(d.via.u64));
    }
    if (dtype_o.type != msgpack::type::STR) fail(path, "dtype is not a string");
    const std::string dt(dtype_o.via.str.ptr, dtype_o.via.str.size);
    const auto dtype = dtype_from_numpy_name(dt);
    if (!dtype) fail(path, "unsupported dtype \"" + dt + "\"");
    if (data_o.type != msgpack::type::BIN) fail(path, "data is not bytes");
    if (data_o.via.bin.size != n * size_of(*dtype))
      fail(path, std::to_string(data_o.via.bin.size) + " bytes for " + dt + shape_to_string(shape) +
                     " (" + std::to_string(n * size_of(*dtype)) + " expected)");
    HostTensor t(*dtype, shape);
    if (t.nbytes()) std::memcpy(t.data(), data_o.via.bin.ptr, t.nbytes());
    return t;
  }

  const msgpack::object* field(const msgpack::object& map, const char* name) const {
    for (uint32_t i = 0; i < map.via.map.size; ++i) {
      const msgpack::object& k = map.via.map.ptr[i].key;
      if (k.type == msgpack::type::STR && std::string_view(k.via.str.ptr, k.via.str.size) == name)
        return &map.via.map.ptr[i].val;
    }
    return nullptr;
  }

  std::string str_field(const msgpack::object& map, const char* name,
                        const std::string& path) const {
    const msgpack::object* v = field(map, name);
    if (!v || v->type != msgpack::type::STR) fail(path, std::string("no string \"") + name + "\"");
    return std::string(v->via.str.ptr, v->via.str.size);
  }

  Shape int_list(const msgpack::object* v, const std::string& path, const char* what) const {
    if (!v || v->type != msgpack::type::ARRAY) fail(path, std::string("no list \"") + what + "\"");
    Shape s;
    for (uint32_t i = 0; i < v->via.array.size; ++i) {
      const msgpack::object& d = v->via.array.ptr[i];
      if (d.type != msgpack::type::POSITIVE_INTEGER)
        fail(path, std::string(what) + " holds a non-natural number");
      s.push_back(static_cast<int64_t>(d.via.u64));
    }
    return s;
  }

  fs::path inside(const std::string& rel, const std::string& path) const {
    const fs::path p = fs::path(rel).lexically_normal();
    if (p.empty() || p.is_absolute() || *p.begin() == "..")
      fail(path, "array folder '" + rel + "' is outside the checkpoint folder");
    return dir / p;
  }

  // t5x: {driver: zarr, dtype, kvstore: {driver, path}, metadata: {chunks, compressor, shape}}.
  HostTensor tensorstore_spec(const msgpack::object& m, const std::string& path) const {
    const msgpack::object* kv = field(m, "kvstore");
    const msgpack::object* meta = field(m, "metadata");
    if (!kv || kv->type != msgpack::type::MAP || !meta || meta->type != msgpack::type::MAP)
      fail(path, "TensorStore spec without kvstore or metadata");
    const fs::path folder = inside(str_field(*kv, "path", path), path);
    zarr::ArrayInfo info;
    const std::string dt = str_field(m, "dtype", path);
    const auto dtype = dtype_from_numpy_name(dt);
    if (!dtype) fail(path, "unsupported dtype \"" + dt + "\"");
    info.dtype = *dtype;
    info.shape = int_list(field(*meta, "shape"), path, "shape");
    info.chunks = int_list(field(*meta, "chunks"), path, "chunks");
    if (info.chunks.size() != info.shape.size()) fail(path, "chunks and shape differ in rank");
    for (int64_t c : info.chunks)
      if (c < 1 || c > (int64_t{1} << 40)) fail(path, "chunk size out of range");
    info.zstd = false;
    if (const msgpack::object* c = field(*meta, "compressor"); c && c->type == msgpack::type::MAP) {
      const std::string id = str_field(*c, "id", path);
      if (id == "gzip" || id == "zlib")
        info.gzip = true;
      else if (id == "zstd")
        info.zstd = true;
      else
        fail(path, "compressor \"" + id + "\" (cujax reads gzip, zlib, zstd)");
    }
    info.metadata_key = "checkpoint";
    return zarr::read_array(DirStore(folder), "", info);
  }

  void walk(const msgpack::object& o, const std::string& path) {
    switch (o.type) {
      case msgpack::type::MAP: {
        if (field(o, "driver") && field(o, "kvstore")) {
          tensorstore = true;
          leaves.push_back({path, tensorstore_spec(o, path)});
          return;
        }
        if (field(o, "__msgpack_chunked_array__"))
          fail(path, "chunked arrays (over 2^30 bytes) are not read yet");
        for (uint32_t i = 0; i < o.via.map.size; ++i) {
          const std::string k = key_of(o.via.map.ptr[i].key, path);
          walk(o.via.map.ptr[i].val, path.empty() ? k : path + "." + k);
        }
        return;
      }
      case msgpack::type::EXT: {
        const int8_t type = o.via.ext.type();
        if (type == 1 || type == 3) {  // size excludes the type byte
          leaves.push_back({path, ext_array(o.via.ext.data(), o.via.ext.size, path)});
          return;
        }
        fail(path, "msgpack ext type " + std::to_string(type) + " (cujax reads 1 and 3)");
      }
      case msgpack::type::STR: {
        const std::string s(o.via.str.ptr, o.via.str.size);
        if (s.rfind(kPlaceholder, 0) == 0) {
          placeholders = true;
          const fs::path folder = inside(s.substr(std::strlen(kPlaceholder)), path);
          const zarr::ArrayInfo info = zarr::read_info(folder);
          leaves.push_back({path, zarr::read_array(folder, info)});
        }
        return;  // other strings are not arrays
      }
      default:
        return;  // numbers, booleans and nil: Python values, not arrays
    }
  }
};

}  // namespace

Loaded parse(std::string_view bytes, const fs::path& dir, const std::string& where) {
  msgpack::object_handle oh;
  try {
    // Every element takes at least one byte, so no count may exceed the file's size.
    const size_t n = bytes.size();
    oh = msgpack::unpack(bytes.data(), n, nullptr, nullptr,
                         msgpack::unpack_limit(n, n, n, n, n, 64));
  } catch (const std::exception& e) {
    throw Error("msgpack checkpoint: " + where + ": not valid msgpack: " + e.what());
  }
  const msgpack::object& root = oh.get();
  if (root.type != msgpack::type::MAP)
    throw Error("msgpack checkpoint: " + where + ": the top level is not a map");
  Walker w{dir, where, {}};
  bool t5x = false;
  if (const msgpack::object* opt = w.field(root, "optimizer"); opt && w.field(root, "version")) {
    t5x = true;
    w.walk(*opt, "");
  } else {
    w.walk(root, "");
  }
  return {t5x ? "t5x" : w.placeholders ? "orbax msgpack" : "flax msgpack", std::move(w.leaves)};
}

Loaded read(const fs::path& path) {
  const fs::path file = fs::is_directory(path) ? path / "checkpoint" : path;
  if (!fs::is_regular_file(file))
    throw Error("msgpack checkpoint: " + file.string() + " is missing");
  return parse(files::read(file), file.parent_path(), file.string());
}

namespace {

// The nested dicts of '.'-joined paths, keys in the order the leaves first name them.
struct Node {
  const HostTensor* leaf = nullptr;
  std::vector<std::string> keys;
  std::vector<Node> children;  // children[i] under keys[i]
  Node& child(const std::string& key);
};

Node& Node::child(const std::string& key) {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return children[i];
  keys.push_back(key);
  return children.emplace_back();
}

void pack(msgpack::packer<msgpack::sbuffer>& pk, const Node& node) {
  if (node.leaf) {
    const HostTensor& t = *node.leaf;
    msgpack::sbuffer body;
    msgpack::packer<msgpack::sbuffer> b(&body);
    b.pack_array(3);
    b.pack_array(static_cast<uint32_t>(t.shape().size()));
    for (int64_t d : t.shape()) b.pack(static_cast<uint64_t>(d));
    b.pack(std::string(numpy_name(t.dtype())));
    b.pack_bin(static_cast<uint32_t>(t.nbytes()));
    b.pack_bin_body(static_cast<const char*>(t.data()), static_cast<uint32_t>(t.nbytes()));
    pk.pack_ext(body.size(), 1);
    pk.pack_ext_body(body.data(), static_cast<uint32_t>(body.size()));
    return;
  }
  pk.pack_map(static_cast<uint32_t>(node.children.size()));
  for (size_t i = 0; i < node.children.size(); ++i) {
    pk.pack(node.keys[i]);
    pack(pk, node.children[i]);
  }
}

}  // namespace

std::string serialize(const std::vector<Leaf>& leaves) {
  Node root;
  for (const auto& leaf : leaves) {
    if (leaf.value.nbytes() >= (uint64_t{1} << 30))
      throw Error("msgpack checkpoint: '" + leaf.path + "' " +
                  "is 1 GiB or more, which Flax writes as a chunked array (not written)");
    Node* n = &root;
    size_t start = 0;
    while (true) {
      const size_t dot = leaf.path.find('.', start);
      const std::string key = leaf.path.substr(start, dot - start);
      if (key.empty()) throw Error("msgpack checkpoint: '" + leaf.path + "' has an empty key");
      if (n->leaf) throw Error("msgpack checkpoint: '" + leaf.path + "' is inside another leaf");
      n = &n->child(key);
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    if (n->leaf || !n->children.empty())
      throw Error("msgpack checkpoint: '" + leaf.path + "' is a leaf and a dict, or appears twice");
    n->leaf = &leaf.value;
  }
  msgpack::sbuffer out;
  msgpack::packer<msgpack::sbuffer> pk(&out);
  pack(pk, root);
  return std::string(out.data(), out.size());
}

}  // namespace cujax::checkpoint::msgpack_checkpoint
