// xla.OpSharding from its protobuf wire format (the fields of xla_data.proto that JAX's
// shardings use), its HloSharding text, and jax.export's NamedSharding -> OpSharding.
#include <algorithm>
#include <numeric>

#include "cujax/core/error.h"
#include "cujax/jax_export.h"

namespace cujax::jax_export {

namespace {

// Protobuf's wire format: tag = field << 3 | wire type; varints are 7 bits a byte, low first.
class WireReader {
 public:
  WireReader(std::string_view bytes, const std::string& what, size_t base)
      : bytes_(bytes), what_(what), base_(base) {}
  bool done() const { return pos_ >= bytes_.size(); }
  size_t offset() const { return base_ + pos_; }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(what_ + ": OpSharding byte " + std::to_string(offset()) + ": " + why);
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) fail("truncated varint");
      const auto b = static_cast<uint8_t>(bytes_[pos_++]);
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
    fail("varint longer than 10 bytes");
  }
  std::string_view length_delimited(size_t& start) {
    const uint64_t n = varint();
    if (n > bytes_.size() - pos_)
      fail("field of " + std::to_string(n) + " bytes runs past the end (" +
           std::to_string(bytes_.size() - pos_) + " left)");
    start = base_ + pos_;
    const std::string_view s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void skip(int wire_type) {
    size_t ignored = 0;
    switch (wire_type) {
      case 0:
        varint();
        return;
      case 1:
        advance(8);
        return;
      case 2:
        length_delimited(ignored);
        return;
      case 5:
        advance(4);
        return;
      default:
        fail("wire type " + std::to_string(wire_type) + " is not read");
    }
  }
  // A repeated integer field, packed (wire type 2) or one value (wire type 0).
  template <class T>
  void repeated(int wire_type, std::vector<T>& out) {
    if (wire_type == 0) {
      out.push_back(static_cast<T>(varint()));
      return;
    }
    if (wire_type != 2) fail("a repeated integer field has wire type " + std::to_string(wire_type));
    size_t start = 0;
    const std::string_view body = length_delimited(start);
    WireReader packed(body, what_, start);
    while (!packed.done()) out.push_back(static_cast<T>(packed.varint()));
  }

 private:
  void advance(size_t n) {
    if (n > bytes_.size() - pos_) fail("truncated fixed-width field");
    pos_ += n;
  }
  std::string_view bytes_;
  const std::string& what_;
  size_t base_;
  size_t pos_ = 0;
};

OpSharding parse_at(std::string_view bytes, const std::string& what, size_t base, int depth) {
  if (depth > 32) throw Error(what + ": OpSharding tuples nested more than 32 deep");
  WireReader r(bytes, what, base);
  OpSharding s;
  while (!r.done()) {
    const uint64_t tag = r.varint();
    const int wire = static_cast<int>(tag & 7);
    switch (tag >> 3) {
      case 1:
        if (wire != 0) r.fail("field type has wire type " + std::to_string(wire));
        s.type = static_cast<int>(r.varint());
        break;
      case 3:
        r.repeated(wire, s.tile_assignment_dimensions);
        break;
      case 4:
        r.repeated(wire, s.tile_assignment_devices);
        break;
      case 5: {
        if (wire != 2) r.fail("tuple_shardings has wire type " + std::to_string(wire));
        size_t start = 0;
        const std::string_view m = r.length_delimited(start);
        s.tuple_shardings.push_back(parse_at(m, what, start, depth + 1));
        break;
      }
      case 6:
        if (wire != 0) r.fail("replicate_on_last_tile_dim has wire type " + std::to_string(wire));
        s.replicate_on_last_tile_dim = r.varint() != 0;
        break;
      case 8:
        r.repeated(wire, s.last_tile_dims);
        break;
      case 9:
        r.repeated(wire, s.iota_reshape_dims);
        break;
      case 10:
        r.repeated(wire, s.iota_transpose_perm);
        break;
      default:
        r.skip(wire);  // shapes, metadata, sharding groups: not needed here
    }
  }
  return s;
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

const char* type_name(int t) {
  static const char* const names[] = {"replicated", "maximal", "tuple",    "other",
                                      "manual",     "unknown", "unreduced"};
  return t >= 0 && t < 7 ? names[t] : "?";
}

}  // namespace

OpSharding OpSharding::parse(std::string_view bytes, const std::string& what) {
  return parse_at(bytes, what, 0, 0);
}

std::vector<int64_t> OpSharding::devices() const {
  if (!tile_assignment_devices.empty() || iota_reshape_dims.empty()) return tile_assignment_devices;
  int64_t n = 1;
  for (int64_t d : iota_reshape_dims) {
    // No mesh has 2^24 devices: a bound that keeps the expansion small for any input.
    if (d < 0 || (d > 0 && n > (int64_t{1} << 24) / d))
      throw Error("OpSharding: iota dimensions [" + join(iota_reshape_dims) +
                  "] hold more than 2^24 devices");
    n *= d;
  }
  const size_t rank = iota_reshape_dims.size();
  std::vector<int> perm = iota_transpose_perm;
  if (perm.empty()) {
    perm.resize(rank);
    std::iota(perm.begin(), perm.end(), 0);
  }
  std::vector<int> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < rank; ++i)
    if (sorted.size() != rank || sorted[i] != static_cast<int>(i))
      throw Error("OpSharding: iota transpose " + std::string("is not a permutation of ") +
                  std::to_string(rank) + " dimensions");
  // Row-major strides of the reshaped iota, read in the transposed order.
  std::vector<int64_t> stride(rank, 1);
  for (size_t i = rank; i-- > 1;) stride[i - 1] = stride[i] * iota_reshape_dims[i];
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  std::vector<int64_t> idx(rank, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t dev = 0;
    for (size_t i = 0; i < rank; ++i) dev += idx[i] * stride[static_cast<size_t>(perm[i])];
    out.push_back(dev);
    for (size_t i = rank; i-- > 0;) {
      if (++idx[i] < iota_reshape_dims[static_cast<size_t>(perm[i])]) break;
      idx[i] = 0;
    }
  }
  return out;
}

std::string OpSharding::str() const {
  switch (type) {
    case REPLICATED:
      return "{replicated}";
    case MANUAL:
      return "{manual}";
    case UNKNOWN:
      return "{unknown}";
    case UNREDUCED:
      return "{unreduced}";
    case MAXIMAL:
      return "{maximal device=" +
             std::to_string(tile_assignment_devices.empty() ? 0 : tile_assignment_devices[0]) + "}";
    case TUPLE: {
      std::string s = "{";
      for (size_t i = 0; i < tuple_shardings.size(); ++i)
        s += (i ? ", " : "") + tuple_shardings[i].str();
      return s + "}";
    }
    default:
      break;
  }
  std::string s = "{devices=[" + join(tile_assignment_dimensions) + "]";
  if (!tile_assignment_devices.empty()) {
    s += join(tile_assignment_devices);
  } else {
    s += "<=[" + join(iota_reshape_dims) + "]";
    bool identity = true;
    for (size_t i = 0; i < iota_transpose_perm.size(); ++i)
      identity = identity && iota_transpose_perm[i] == static_cast<int>(i);
    if (!identity) {
      std::vector<int64_t> perm(iota_transpose_perm.begin(), iota_transpose_perm.end());
      s += "T(" + join(perm) + ")";
    }
  }
  if (replicate_on_last_tile_dim) s += " last_tile_dim_replicate";
  if (!last_tile_dims.empty()) {
    s += " last_tile_dims={";
    for (size_t i = 0; i < last_tile_dims.size(); ++i)
      s += std::string(i ? ", " : "") + type_name(last_tile_dims[i]);
    s += "}";
  }
  return s + "}";
}

uint64_t AbstractMesh::size() const {
  uint64_t n = 1;
  for (uint32_t d : axis_sizes) n *= d;
  return n;
}

std::string NamedSharding::str() const {
  std::string s = "NamedSharding(mesh={";
  for (size_t i = 0; i < mesh.axis_names.size(); ++i)
    s += (i ? ", '" : "'") + mesh.axis_names[i] +
         "': " + (i < mesh.axis_sizes.size() ? std::to_string(mesh.axis_sizes[i]) : "?");
  s += "}, spec=P(";
  for (size_t d = 0; d < spec.size(); ++d) {
    s += d ? ", " : "";
    if (spec[d].empty()) {
      s += "None";
    } else if (spec[d].size() == 1) {
      s += "'" + spec[d][0] + "'";
    } else {
      s += "(";
      for (size_t j = 0; j < spec[d].size(); ++j) s += (j ? ", '" : "'") + spec[d][j] + "'";
      s += ")";
    }
  }
  s += ")";
  if (memory_kind) s += ", memory_kind=" + *memory_kind;
  return s + ")";
}

OpSharding NamedSharding::to_op_sharding(size_t rank) const {
  if (mesh.axis_names.size() != mesh.axis_sizes.size())
    throw Error(str() + ": the mesh has " + std::to_string(mesh.axis_names.size()) +
                " axis names for " + std::to_string(mesh.axis_sizes.size()) + " sizes");
  if (spec.size() > rank)
    throw Error(str() + " has " + std::to_string(spec.size()) +
                " dimensions for an array of rank " + std::to_string(rank));
  OpSharding s;
  std::vector<int> order;  // mesh axes in tile order
  std::vector<bool> used(mesh.axis_sizes.size(), false);
  for (size_t d = 0; d < rank; ++d) {
    int64_t tiles = 1;
    if (d < spec.size())
      for (const std::string& name : spec[d]) {
        const auto it = std::find(mesh.axis_names.begin(), mesh.axis_names.end(), name);
        if (it == mesh.axis_names.end()) throw Error(str() + ": no mesh axis '" + name + "'");
        const auto a = static_cast<size_t>(it - mesh.axis_names.begin());
        if (used[a]) throw Error(str() + ": mesh axis '" + name + "' is used twice");
        used[a] = true;
        order.push_back(static_cast<int>(a));
        tiles *= mesh.axis_sizes[a];
      }
    s.tile_assignment_dimensions.push_back(tiles);
  }
  int64_t replicated = 1;
  for (size_t a = 0; a < used.size(); ++a)
    if (!used[a]) {
      order.push_back(static_cast<int>(a));
      replicated *= mesh.axis_sizes[a];
    }
  const bool all_one =
      std::all_of(s.tile_assignment_dimensions.begin(), s.tile_assignment_dimensions.end(),
                  [](int64_t t) { return t == 1; });
  if (all_one) {
    s.tile_assignment_dimensions.clear();
    return s;  // REPLICATED
  }
  s.type = OpSharding::OTHER;
  if (replicated > 1) {
    s.tile_assignment_dimensions.push_back(replicated);
    s.replicate_on_last_tile_dim = true;
  }
  for (uint32_t d : mesh.axis_sizes) s.iota_reshape_dims.push_back(d);
  s.iota_transpose_perm = order;
  return s;
}

std::string Sharding::hlo_text(size_t rank) const {
  if (hlo) return hlo->str();
  if (named) return named->to_op_sharding(rank).str();
  return "";
}

}  // namespace cujax::jax_export
