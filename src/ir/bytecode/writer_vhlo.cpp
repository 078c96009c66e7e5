// StableHLO -> VHLO for a target StableHLO version, the inverse of vhlo.cpp and the way
// StableHLO's StablehloLegalizeToVhlo and VhloToVersion do it: each op becomes the newest VHLO
// op version that the target has (vhlo_ops.inc), every attribute VHLO declares is spelled out
// (StableHLO's defaults where the op leaves it out), the dimension-number structs are split into
// VHLO's separate attributes, and attributes and types take VHLO's bytecode encodings
// (StableHLO's VhloBytecode.cpp codes). An op or a type the target does not have yet, or an
// attribute an older op version cannot hold, is refused with the op and the version named.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>

#include "../asm_util.h"
#include "../op_table.h"
#include "cujax/core/dynamic_shape.h"
#include "cujax/core/error.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/printer.h"
#include "vhlo_attrs.h"
#include "vhlo_ops.h"
#include "writer.h"

namespace cujax::ir::bytecode::write {
namespace {

using Kind = Attribute::Kind;

// VHLO's type codes (VhloBytecode.cpp) of the element types cujax holds.
int element_code(DType t) {
  switch (t) {
    case DType::Bool:
      return 0;
    case DType::BF16:
      return 2;
    case DType::F16:
      return 3;
    case DType::F32:
      return 4;
    case DType::F64:
      return 5;
    case DType::F8E4M3FN:
      return 6;
    case DType::F8E5M2:
      return 7;
    case DType::I4:
      return 10;
    case DType::I8:
      return 11;
    case DType::I16:
      return 12;
    case DType::I32:
      return 13;
    case DType::I64:
      return 14;
    case DType::U4:
      return 15;
    case DType::U8:
      return 16;
    case DType::U16:
      return 17;
    case DType::U32:
      return 18;
    case DType::U64:
      return 19;
    case DType::F8E4M3FNUZ:
      return 27;
    case DType::F8E5M2FNUZ:
      return 28;
    case DType::F8E4M3B11FNUZ:
      return 29;
    case DType::I2:
      return 31;
    case DType::U2:
      return 32;
    case DType::F8E4M3:
      return 35;
    case DType::F8E3M4:
      return 36;
    case DType::F4E2M1FN:
      return 37;
    case DType::F6E2M3FN:
      return 38;
    case DType::F6E3M2FN:
      return 39;
    case DType::F8E8M0FNU:
      return 40;
    default:
      return -1;  // complex: a type of its own
  }
}

int enum_code(const std::string& kind, const std::string& value, int* attr_code) {
  static const std::vector<std::pair<std::string, std::pair<int, std::vector<const char*>>>> k = {
      {"comparison_direction", {3, {"EQ", "NE", "GE", "GT", "LE", "LT"}}},
      {"comparison_type", {4, {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"}}},
      {"fft_type", {7, {"FFT", "IFFT", "RFFT", "IRFFT"}}},
      {"precision", {11, {"DEFAULT", "HIGH", "HIGHEST"}}},
      {"rng_algorithm", {12, {"DEFAULT", "THREE_FRY", "PHILOX"}}},
      {"rng_distribution", {13, {"", "UNIFORM", "NORMAL"}}},
      {"transpose", {16, {"TRANSPOSE_INVALID", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"}}},
      {"result_accuracy_mode", {19, {"DEFAULT", "HIGHEST", "TOLERANCE"}}},
      {"custom_call_api_version",
       {5,
        {"API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
         "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"}}},
  };
  for (const auto& [name, e] : k) {
    if (name != kind) continue;
    for (size_t i = 0; i < e.second.size(); ++i)
      if (value == e.second[i]) {
        *attr_code = e.first;
        return static_cast<int>(i);
      }
  }
  return -1;
}

// MLIR's APInt of a known width: one byte up to 8 bits, else the value sign-extended from its
// width as a signed varint.
void apint(NodeBuilder& b, uint64_t bits, int width) {
  if (width <= 8) {
    b.byte(static_cast<uint8_t>(bits));
    return;
  }
  if (width < 64) {
    bits &= (uint64_t(1) << width) - 1;
    if ((bits >> (width - 1)) & 1) bits |= ~((uint64_t(1) << width) - 1);
  }
  b.svarint(static_cast<int64_t>(bits));
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

class ToVhlo {
 public:
  ToVhlo(const Module& m, std::string target, Nodes& nodes)
      : m_(m), target_(std::move(target)), nodes_(nodes), aliases_(location_aliases(m)) {}

  WOp run() {
    WOp mod;
    mod.dialect = "builtin";
    mod.name = "module";
    mod.is_module = true;
    mod.isolated = true;
    mod.loc = loc(m_.loc);
    if (!m_.name.empty()) mod.inherent.emplace_back("sym_name", builtin_string(m_.name));
    for (const auto& a : m_.attributes)
      mod.discardable.emplace_back(a.name, builtin_attr(*a.value));
    mod.regions.emplace_back();
    mod.regions[0].blocks.emplace_back();
    for (const auto& f : m_.functions) mod.regions[0].blocks[0].ops.push_back(func(*f));
    return mod;
  }

 private:
  [[noreturn]] void fail(const Operation& op, const std::string& msg) const {
    throw Error("cannot write " + op.where() + " for StableHLO " + target_ + ": " + msg);
  }
  NodeP get(NodeBuilder& b) { return nodes_.get(std::move(b.n)); }
  NodeP get(NodeBuilder&& b) { return nodes_.get(std::move(b.n)); }

  // ---- types -------------------------------------------------------------------------------
  // A type the target did not have yet (VhloTypes.td's versions) is refused.
  void require(const char* since, const std::string& what) {
    if (version_less(target_, since))
      throw Error("cannot write " + what + " for StableHLO " + target_ +
                  ": it did not exist yet (it was added in " + since + ")");
  }
  NodeP element(DType t) {
    if (is_complex(t)) return get(NodeBuilder(true, "vhlo", 1).type(element(complex_component(t))));
    const int code = element_code(t);
    if (code < 0) throw Error("element type " + std::string(mlir_name(t)) + " has no VHLO type");
    const char* since = code == 27 || code == 28   ? "0.10.0"
                        : code == 29               ? "0.11.0"
                        : code == 31 || code == 32 ? "1.2.0"
                        : code == 35 || code == 36 ? "1.7.0"
                        : code >= 37 && code <= 40 ? "1.8.0"
                                                   : "0.9.0";
    require(since, "element type " + std::string(mlir_name(t)));
    return get(NodeBuilder(true, "vhlo", static_cast<uint64_t>(code)));
  }
  NodeP quantized(const QuantizedType& q) {
    const bool per_axis = q.quantization_dimension.has_value();
    if (per_axis) require("0.18.0", "per-axis quantized type " + q.str());
    NodeBuilder b(true, "vhlo", per_axis ? 30 : 24);
    b.varint(is_signed_int(q.storage) ? 1 : 0).type(element(q.storage)).type(element(q.expressed));
    auto scale = [](double s) {
      uint64_t bits = 0;
      std::memcpy(&bits, &s, 8);
      return static_cast<int64_t>(bits);
    };
    if (per_axis) {
      b.varint(static_cast<uint64_t>(*q.quantization_dimension))
          .svarint(q.storage_min)
          .svarint(q.storage_max)
          .varint(q.scales.size());
      for (double s : q.scales) b.svarint(scale(s));
      b.varint(q.zero_points.size());
      for (int64_t z : q.zero_points) b.svarint(z);
    } else {
      b.svarint(scale(q.scales.at(0)))
          .svarint(q.zero_points.at(0))
          .svarint(q.storage_min)
          .svarint(q.storage_max);
    }
    return get(b);
  }
  NodeP type(const Type& t) {
    if (t.is_token) return get(NodeBuilder(true, "vhlo", 22));
    NodeBuilder b(true, "vhlo", 20);
    b.varint(t.shape.size());
    for (int64_t d : t.shape) b.svarint(d == kDynamicDim ? INT64_MIN : d);  // MLIR's kDynamic
    b.type(t.quantized ? quantized(*t.quantized) : element(t.dtype));
    return get(b);
  }
  NodeP tensor_i64(const std::vector<int64_t>& v) {
    return tensor_of(Type::tensor({static_cast<int64_t>(v.size())}, DType::I64),
                     std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8), false);
  }
  NodeP tensor_i64_2d(const std::vector<int64_t>& v, int64_t rows) {
    return tensor_of(Type::tensor({rows, 2}, DType::I64),
                     std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8), false);
  }
  NodeP tensor_bool(const std::vector<int64_t>& v) {
    std::string bytes;
    for (int64_t x : v) bytes += static_cast<char>(x ? 1 : 0);
    return tensor_of(Type::tensor({static_cast<int64_t>(v.size())}, DType::Bool), bytes, true);
  }
  // A dense tensor as MLIR stores it: one element when all are equal (a splat), booleans packed
  // eight to a byte (a splat as 0x00 or 0xFF).
  NodeP tensor_of(const Type& t, const std::string& raw, bool is_bool) {
    const size_t n = static_cast<size_t>(t.num_elements());
    const size_t esize = n ? raw.size() / n : 0;
    bool splat = n > 0;
    for (size_t i = 1; splat && i < n; ++i)
      splat = std::memcmp(raw.data(), raw.data() + i * esize, esize) == 0;
    std::string blob;
    if (is_bool) {
      if (splat) {
        blob = std::string(1, raw[0] ? '\xff' : '\0');
      } else {
        blob.assign((n + 7) / 8, '\0');
        for (size_t i = 0; i < n; ++i)
          if (raw[i]) blob[i / 8] = static_cast<char>(blob[i / 8] | (1 << (i % 8)));
      }
    } else {
      blob = splat ? raw.substr(0, esize) : raw;
    }
    return get(NodeBuilder(false, "vhlo", 15).type(type(t)).blob(std::move(blob)));
  }

  // ---- attributes --------------------------------------------------------------------------
  NodeP vstring(const std::string& s) { return get(NodeBuilder(false, "vhlo", 14).string(s)); }
  NodeP vbool(bool v) { return get(NodeBuilder(false, "vhlo", 2).varint(v ? 1 : 0)); }
  NodeP vint(int64_t v, DType t = DType::I64) {
    NodeBuilder b(false, "vhlo", 9);
    b.type(element(t));
    apint(b, static_cast<uint64_t>(v), bit_width(t));
    return get(b);
  }
  NodeP venum(const std::string& kind, const std::string& value) {
    int code = 0;
    const int v = enum_code(kind, value, &code);
    if (v < 0) throw Error("#stablehlo<" + kind + " " + value + "> has no VHLO form");
    return get(
        NodeBuilder(false, "vhlo", static_cast<uint64_t>(code)).varint(static_cast<uint64_t>(v)));
  }
  NodeP varray(std::vector<NodeP> v) {
    NodeBuilder b(false, "vhlo", 1);
    b.varint(v.size());
    for (NodeP x : v) b.attr(x);
    return get(b);
  }
  NodeP vdict(std::vector<std::pair<std::string, NodeP>> e) {
    std::stable_sort(e.begin(), e.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    NodeBuilder b(false, "vhlo", 6);
    b.varint(e.size());
    for (const auto& [k, v] : e) b.attr(vstring(k)).attr(v);
    return get(b);
  }
  NodeP vtype_attr(NodeP t) { return get(NodeBuilder(false, "vhlo", 17).type(t)); }
  NodeP none_type_attr() { return vtype_attr(get(NodeBuilder(true, "vhlo", 33))); }
  NodeP builtin_string(const std::string& s) {
    return get(NodeBuilder(false, "builtin", 2).string(s));
  }
  // Another dialect's attribute (Shardy's, ...): its assembly text, under its dialect.
  NodeP asm_attr(const std::string& text) {
    Node n;
    n.dialect = "builtin";
    if (!text.empty() && text[0] == '#') {
      size_t e = 1;
      while (e < text.size() && (asm_util::is_ident_char(text[e])) && text[e] != '.') ++e;
      n.dialect = text.substr(1, e - 1);
    }
    n.custom = false;
    n.asm_text = text;
    return nodes_.get(std::move(n));
  }

  NodeP float_attr(const Attribute& a, bool builtin) {
    const DType t = a.dtype.value_or(DType::F64);
    NodeBuilder b(false, builtin ? "builtin" : "vhlo", builtin ? 9 : 8);
    b.type(builtin ? builtin_element(t) : element(t));
    apint(b, asm_util::float_bits_from_double(a.floating, t), bit_width(t));
    return get(b);
  }

  NodeP vattr(const Attribute& a) {
    switch (a.kind) {
      case Kind::Unit:
        return get(NodeBuilder(false, "builtin", 7));
      case Kind::Bool:
        return vbool(a.boolean);
      case Kind::Integer:
        return vint(a.integer, a.dtype.value_or(DType::I64));
      case Kind::Float:
        return float_attr(a, false);
      case Kind::String:
        return vstring(a.text);
      case Kind::Symbol:
        return get(NodeBuilder(false, "builtin", 4).attr(builtin_string(a.text)));
      case Kind::TypeAttr:
        return vtype_attr(type(*a.type));
      case Kind::Array: {
        std::vector<NodeP> v;
        for (const auto& e : a.elements) v.push_back(vattr(*e));
        return varray(std::move(v));
      }
      case Kind::DenseArray: {
        NodeBuilder b(false, "builtin", 17);
        b.type(builtin_element(*a.dtype)).varint(a.ints.size());
        std::string blob;
        const size_t es = size_of(*a.dtype);
        for (int64_t v : a.ints) blob.append(reinterpret_cast<const char*>(&v), es);
        return get(b.blob(std::move(blob)));
      }
      case Kind::DenseElements: {
        const Type t = a.type ? *a.type : Type::tensor(a.tensor.shape(), a.tensor.dtype());
        return tensor_of(t,
                         std::string(static_cast<const char*>(a.tensor.data()), a.tensor.nbytes()),
                         a.tensor.dtype() == DType::Bool);
      }
      case Kind::Dictionary: {
        std::vector<std::pair<std::string, NodeP>> e;
        for (const auto& f : a.fields) e.emplace_back(f.name, vattr(*f.value));
        return vdict(std::move(e));
      }
      case Kind::Enum:
        return venum(a.text, a.enum_value);
      case Kind::Struct:
        if (a.text == "stablehlo.output_operand_alias") {
          NodeBuilder b(false, "vhlo", 10);
          auto list = [&](const char* n) {
            const Attribute* f = a.field(n);
            const auto v = f ? as_ints(*f) : std::vector<int64_t>{};
            b.varint(v.size());
            for (int64_t x : v) b.svarint(x);
          };
          list("output_tuple_indices");
          const Attribute* idx = a.field("operand_index");
          b.svarint(idx ? idx->integer : 0);
          list("operand_tuple_indices");
          return get(b);
        }
        if (a.text == "stablehlo.result_accuracy") return result_accuracy(&a);
        return asm_attr(print_attribute(a));
      case Kind::Opaque:
        if (NodeP t = index_tensor(a.text)) return t;
        return asm_attr(a.text);
    }
    return asm_attr(print_attribute(a));
  }

  // `dense<[[0, 1]]> : tensor<1x2xindex>` (custom-call layouts), which cujax's IR keeps as
  // text: a VHLO tensor of index elements. nullptr for other text.
  NodeP index_tensor(const std::string& text) {
    const std::string_view t(text);
    const size_t colon = t.rfind("> : tensor<");
    if (!starts_with(t, "dense<") || colon == std::string_view::npos || !t.ends_with("xindex>"))
      return nullptr;
    std::vector<int64_t> shape, values;
    std::string_view dims = t.substr(colon + 11, t.size() - 7 - (colon + 11));
    while (!dims.empty()) {
      const size_t x = dims.find('x');
      const std::string d(dims.substr(0, x));
      if (d.empty() || d.find_first_not_of("0123456789") != std::string::npos) return nullptr;
      shape.push_back(std::stoll(d));
      dims = x == std::string_view::npos ? std::string_view() : dims.substr(x + 1);
    }
    const std::string body(t.substr(6, colon - 6));
    for (size_t i = 0; i < body.size();) {
      if (body[i] == '-' || asm_util::is_digit(body[i])) {
        size_t used = 0;
        values.push_back(std::stoll(body.substr(i), &used));
        i += used;
      } else if (body[i] == '[' || body[i] == ']' || body[i] == ',' || body[i] == ' ') {
        ++i;
      } else {
        return nullptr;
      }
    }
    const Type ty = Type::tensor(shape, DType::I64);
    const size_t n = static_cast<size_t>(ty.num_elements());
    if (values.size() == 1 && n != 1) values.assign(n, values[0]);
    if (values.size() != n) return nullptr;
    const NodeP index = get(NodeBuilder(true, "vhlo", 9));
    NodeBuilder tb(true, "vhlo", 20);
    tb.varint(shape.size());
    for (int64_t d : shape) tb.svarint(d);
    const NodeP tensor_type = get(tb.type(index));
    bool splat = n > 0;
    for (size_t i = 1; splat && i < n; ++i) splat = values[i] == values[0];
    const std::string raw(reinterpret_cast<const char*>(values.data()), (splat ? 1 : n) * 8);
    return get(NodeBuilder(false, "vhlo", 15).type(tensor_type).blob(raw));
  }

  NodeP result_accuracy(const Attribute* a) {
    auto f64 = [&](const char* n) {
      const Attribute* f = a ? a->field(n) : nullptr;
      const double v =
          f ? (f->kind == Kind::Float ? f->floating : static_cast<double>(f->integer)) : 0.0;
      uint64_t bits = 0;
      std::memcpy(&bits, &v, 8);
      return static_cast<int64_t>(bits);
    };
    const Attribute* ulps = a ? a->field("ulps") : nullptr;
    const Attribute* mode = a ? a->field("mode") : nullptr;
    std::string m = "DEFAULT";
    if (mode && mode->kind == Kind::Enum) m = mode->enum_value;
    if (mode && mode->kind == Kind::Opaque) {
      for (const char* v : {"DEFAULT", "HIGHEST", "TOLERANCE"})
        if (mode->text.find(v) != std::string::npos) m = v;
    }
    return get(NodeBuilder(false, "vhlo", 20)
                   .svarint(f64("atol"))
                   .svarint(f64("rtol"))
                   .svarint(ulps ? ulps->integer : 0)
                   .attr(venum("result_accuracy_mode", m)));
  }

  // Builtin encodings, for builtin.module's attributes.
  NodeP builtin_element(DType t) {
    switch (t) {
      case DType::BF16:
        return get(NodeBuilder(true, "builtin", 3));
      case DType::F16:
        return get(NodeBuilder(true, "builtin", 4));
      case DType::F32:
        return get(NodeBuilder(true, "builtin", 5));
      case DType::F64:
        return get(NodeBuilder(true, "builtin", 6));
      default:
        if (!is_integer(t) && t != DType::Bool)
          throw Error("module attribute of type " + std::string(mlir_name(t)));
        return get(
            NodeBuilder(true, "builtin", 0)
                .varint((static_cast<uint64_t>(bit_width(t)) << 2) | (is_unsigned_int(t) ? 2 : 0)));
    }
  }
  NodeP builtin_attr(const Attribute& a) {
    switch (a.kind) {
      case Kind::Integer: {
        const DType t = a.dtype.value_or(DType::I64);
        NodeBuilder b(false, "builtin", 8);
        b.type(builtin_element(t));
        apint(b, static_cast<uint64_t>(a.integer), bit_width(t));
        return get(b);
      }
      case Kind::Bool: {
        NodeBuilder b(false, "builtin", 8);
        b.type(builtin_element(DType::Bool)).byte(a.boolean ? 1 : 0);
        return get(b);
      }
      case Kind::Float:
        return float_attr(a, true);
      case Kind::String:
        return builtin_string(a.text);
      case Kind::Unit:
        return get(NodeBuilder(false, "builtin", 7));
      case Kind::Array: {
        NodeBuilder b(false, "builtin", 0);
        b.varint(a.elements.size());
        for (const auto& e : a.elements) b.attr(builtin_attr(*e));
        return get(b);
      }
      case Kind::Dictionary: {
        auto fields = a.fields;
        std::stable_sort(fields.begin(), fields.end(),
                         [](const auto& x, const auto& y) { return x.name < y.name; });
        NodeBuilder b(false, "builtin", 1);
        b.varint(fields.size());
        for (const auto& f : fields) b.attr(builtin_string(f.name)).attr(builtin_attr(*f.value));
        return get(b);
      }
      default:
        return vattr(a);
    }
  }

  // ---- ops ---------------------------------------------------------------------------------
  // The VHLO op of `base` for the target: its newest version the target has.
  const VhloOpInfo* version_of(const Operation& op, const std::string& base) {
    const VhloOpInfo* chosen = nullptr;
    const char* first = nullptr;
    for (int v = 1; v < 10; ++v) {
      const VhloOpInfo* info = find_vhlo_op(base + "_v" + std::to_string(v));
      if (!info) continue;
      if (!first) first = info->min_version;
      const bool started = !version_less(target_, info->min_version);
      const bool ended = std::string_view(info->max_version) != "current" &&
                         version_less(info->max_version, target_);
      if (started && !ended) chosen = info;
    }
    if (!first) fail(op, "no VHLO op holds " + op.name);
    if (!chosen)
      fail(op, op.name + " did not exist yet in StableHLO " + target_ + " (it was added in " +
                   first + ")");
    return chosen;
  }

  static std::vector<int64_t> field_ints(const Attribute* s, const char* n) {
    const Attribute* f = s ? s->field(n) : nullptr;
    return f ? as_ints(*f) : std::vector<int64_t>{};
  }
  static int64_t field_int(const Attribute* s, const char* n, int64_t dflt) {
    const Attribute* f = s ? s->field(n) : nullptr;
    return f && f->kind == Kind::Integer ? f->integer : dflt;
  }

  // Every attribute the VHLO op version declares, from the StableHLO op or at its default.
  void attributes(const Operation& op, const std::string& b, const VhloOpInfo& info, WOp& w) {
    std::map<std::string, NodeP> v;
    std::set<std::string> declared(info.attributes.begin(), info.attributes.end());
    // The newest version's attribute names: an older version must leave the extra ones at
    // their defaults.
    std::set<std::string> newest = declared;
    for (int k = 1; k < 10; ++k)
      if (const VhloOpInfo* i = find_vhlo_op(b + "_v" + std::to_string(k)))
        newest.insert(i->attributes.begin(), i->attributes.end());
    std::vector<std::pair<std::string, NodeP>> extra;
    const Type* in0 = op.operands.empty() ? nullptr : &op.operands[0]->type;
    for (const auto& na : op.attributes) {
      const std::string& n = na.name;
      const Attribute& a = *na.value;
      if (n == "dimension_numbers" || n == "scatter_dimension_numbers" ||
          n == "dot_dimension_numbers") {
        if (a.kind != Kind::Struct) fail(op, n + " is not a #stablehlo dimension-number struct");
        split(a, v);
      } else if (n == "algorithm" && b == "dot_general") {
        const char* names[] = {"lhs_precision_type",          "rhs_precision_type",
                               "accumulation_type",           "lhs_component_count",
                               "rhs_component_count",         "num_primitive_operations",
                               "allow_imprecise_accumulation"};
        if (a.kind != Kind::Struct) fail(op, "algorithm is not #stablehlo.dot_algorithm");
        for (const char* f : names) {
          const Attribute* x = a.field(f);
          if (!x) fail(op, std::string("algorithm without ") + f);
          v[f] = x->kind == Kind::TypeAttr  ? vtype_attr(type(*x->type))
                 : x->kind == Kind::Bool    ? vbool(x->boolean)
                 : x->kind == Kind::Integer ? vint(x->integer)
                                            : vattr(*x);
        }
      } else if (n == "channel_handle") {
        v["channel_id"] = vint(field_int(&a, "handle", 0));
        if (b == "send" || b == "recv") v["channel_type"] = vint(field_int(&a, "type", 0));
      } else if ((n == "use_global_device_ids" || n == "has_dynamic_root") &&
                 a.kind == Kind::Unit) {
        v[n] = vbool(true);
      } else if (n == "api_version" && b == "custom_call" && a.kind == Kind::Integer) {
        // StableHLO holds the API version as an i32, VHLO as its enum.
        if (a.integer < 0 || a.integer > 4) fail(op, "api_version " + std::to_string(a.integer));
        v[n] = get(NodeBuilder(false, "vhlo", 5).varint(static_cast<uint64_t>(a.integer)));
      } else if ((b == "custom_call" && n == "called_computations") ||
                 (b == "composite" && n == "decomposition") || (b == "call" && n == "callee")) {
        if (a.kind == Kind::Symbol) {
          v[n] = vstring(a.text);
        } else {
          std::vector<NodeP> xs;
          for (const auto& e : a.elements) xs.push_back(vstring(e->text));
          v[n] = varray(std::move(xs));
        }
      } else if (declared.count(n) || newest.count(n)) {
        if (n == "window_reversal") {
          v[n] = tensor_bool(as_ints(a));
        } else if (vhlo_dense_array_attr(b, n) && a.kind != Kind::DenseElements) {
          v[n] = tensor_i64(as_ints(a));
        } else if (n == "result_accuracy") {
          v[n] = result_accuracy(&a);
        } else if (n == "precision_config" && a.kind == Kind::Array) {
          std::vector<NodeP> xs;
          for (const auto& e : a.elements) xs.push_back(vattr(*e));
          v[n] = varray(std::move(xs));
        } else {
          v[n] = vattr(a);
        }
      } else {
        extra.emplace_back(n, vattr(a));
      }
    }
    // StableHLO's defaults for what the op leaves out.
    const size_t spatial = spatial_count_;
    for (const std::string& n : newest) {
      if (v.count(n)) continue;
      NodeP d = default_of(b, n, in0, spatial);
      if (!d) {
        if (declared.count(n)) fail(op, "missing attribute " + n);
        continue;
      }
      v[n] = d;
    }
    for (const std::string& n : newest) {
      if (declared.count(n)) continue;
      if (v.count(n) && v[n] != default_of(b, n, in0, spatial))
        fail(op, "attribute " + n + " is not at its default, and " + info.name +
                     " (the op version StableHLO " + target_ + " has) cannot hold it");
    }
    for (const char* n : info.attributes) w.inherent.emplace_back(n, v.at(n));
    w.discardable = std::move(extra);
  }

  // The dimension-number structs, split into VHLO's attributes.
  void split(const Attribute& s, std::map<std::string, NodeP>& v) {
    if (s.text == "stablehlo.conv") {
      for (const char* n : {"input_batch_dimension", "input_feature_dimension",
                            "kernel_input_feature_dimension", "kernel_output_feature_dimension",
                            "output_batch_dimension", "output_feature_dimension"})
        v[n] = vint(field_int(&s, n, 0));
      for (const char* n :
           {"input_spatial_dimensions", "kernel_spatial_dimensions", "output_spatial_dimensions"})
        v[n] = tensor_i64(field_ints(&s, n));
      spatial_count_ = field_ints(&s, "input_spatial_dimensions").size();
      return;
    }
    for (const auto& f : s.fields) {
      if (f.name == "index_vector_dim")
        v[f.name] = vint(f.value->integer);
      else
        v[f.name] = tensor_i64(as_ints(*f.value));
    }
    // The lists each struct holds; the text leaves out the empty ones.
    static const std::map<std::string, std::vector<const char*>> lists = {
        {"stablehlo.dot",
         {"lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
          "rhs_contracting_dimensions"}},
        {"stablehlo.gather",
         {"offset_dims", "collapsed_slice_dims", "operand_batching_dims",
          "start_indices_batching_dims", "start_index_map"}},
        {"stablehlo.scatter",
         {"update_window_dims", "inserted_window_dims", "input_batching_dims",
          "scatter_indices_batching_dims", "scatter_dims_to_operand_dims"}},
    };
    auto it = lists.find(s.text);
    if (it == lists.end()) return;
    for (const char* n : it->second)
      if (!v.count(n)) v[n] = tensor_i64({});
    const bool dot = s.text == "stablehlo.dot";
    if (!dot && !v.count("index_vector_dim")) v["index_vector_dim"] = vint(0);
  }

  // StableHLO's default of an attribute VHLO spells out (vhlo_attrs.h); nullptr for one
  // without a default.
  NodeP default_of(const std::string& b, const std::string& n, const Type* in0, size_t spatial) {
    const VhloDefault* d = vhlo_default(b, n);
    if (!d) return nullptr;
    const size_t len = d->extent == VhloDefault::Extent::SpatialDims ? spatial
                       : in0                                         ? in0->shape.size()
                                                                     : 0;
    using DK = VhloDefault::Kind;
    switch (d->kind) {
      case DK::False:
        return vbool(false);
      case DK::Int:
        return vint(d->value);
      case DK::EmptyString:
        return vstring("");
      case DK::EmptyArray:
        return varray({});
      case DK::EmptyDict:
        return vdict({});
      case DK::EmptyTensor:
        return tensor_i64({});
      case DK::EmptyPairs:
        return tensor_i64_2d({}, 0);
      case DK::Enum:
        return venum(d->enum_kind, d->enum_value);
      case DK::Ones:
        return tensor_i64(std::vector<int64_t>(len, 1));
      case DK::ZeroPadding:
        return tensor_i64_2d(std::vector<int64_t>(2 * len, 0), static_cast<int64_t>(len));
      case DK::FalseList:
        return tensor_bool(std::vector<int64_t>(len, 0));
      case DK::DefaultPrecision:
        return varray({venum("precision", "DEFAULT"), venum("precision", "DEFAULT")});
      case DK::NoneType:
        return none_type_attr();
      case DK::DefaultAccuracy:
        return result_accuracy(nullptr);
    }
    return nullptr;
  }

  NodeP loc(const std::string& text) { return location(text, aliases_, nodes_); }

  WOp operation(const Operation& op) {
    const std::string b(ops::vhlo_base(op.name));
    if (b.empty()) fail(op, op.name + " is not a StableHLO op that VHLO holds");
    const VhloOpInfo* info = version_of(op, b);
    WOp w;
    w.dialect = "vhlo";
    w.name = info->name;
    w.loc = loc(op.loc);
    spatial_count_ = 0;
    attributes(op, b, *info, w);
    for (const Value* v : op.operands) w.operands.push_back(v);
    for (const auto& r : op.results) {
      w.results.push_back(r.get());
      w.result_types.push_back(type(r->type));
    }
    if (std::string_view(info->name).starts_with("all_gather_v1") ||
        std::string_view(info->name).starts_with("all_reduce_v1") ||
        std::string_view(info->name).starts_with("all_to_all_v1")) {
      if (op.operands.size() != 1) fail(op, std::string(info->name) + " takes one operand");
    }
    for (const auto& r : op.regions) w.regions.push_back(region(*r));
    w.isolated = !w.regions.empty() && !uses_values_from_above(op);
    return w;
  }

  // MLIR's writer treats an op with regions as isolated (its regions numbered on their own, in
  // a nested section) when nothing inside them uses a value defined outside the op.
  static bool uses_values_from_above(const Operation& op) {
    std::set<const Value*> inside;
    std::vector<const Value*> used;
    auto walk = [&](auto&& self, const Operation& o) -> void {
      for (const auto& r : o.regions)
        for (const auto& b : r->blocks) {
          for (const auto& a : b->arguments) inside.insert(a.get());
          for (const auto& n : b->ops) {
            for (const auto& res : n->results) inside.insert(res.get());
            for (const Value* v : n->operands) used.push_back(v);
            self(self, *n);
          }
        }
    };
    walk(walk, op);
    for (const Value* v : used)
      if (!inside.count(v)) return true;
    return false;
  }

  WRegion region(const Region& r) {
    WRegion w;
    for (const auto& blk : r.blocks) {
      WBlock wb;
      for (const auto& a : blk->arguments) {
        wb.args.push_back(a.get());
        wb.arg_types.push_back(type(a->type));
        wb.arg_locs.push_back(loc(a->loc));
      }
      for (const auto& op : blk->ops) wb.ops.push_back(operation(*op));
      w.blocks.push_back(std::move(wb));
    }
    return w;
  }

  NodeP attr_dicts(const std::vector<std::vector<NamedAttribute>>& lists) {
    bool any = false;
    for (const auto& l : lists) any = any || !l.empty();
    if (!any) return varray({});
    std::vector<NodeP> v;
    for (const auto& l : lists) {
      std::vector<std::pair<std::string, NodeP>> e;
      for (const auto& a : l) e.emplace_back(a.name, vattr(*a.value));
      v.push_back(vdict(std::move(e)));
    }
    return varray(std::move(v));
  }

  WOp func(const Function& f) {
    WOp w;
    w.dialect = "vhlo";
    w.name = "func_v1";
    w.isolated = true;
    w.loc = loc(f.loc);
    NodeBuilder ft(true, "vhlo", 8);
    const auto args = f.arg_types();
    ft.varint(args.size());
    for (const auto& t : args) ft.type(type(t));
    ft.varint(f.result_types.size());
    for (const auto& t : f.result_types) ft.type(type(t));
    const NodeP fty = get(ft);
    w.inherent = {{"sym_name", vstring(f.name)},
                  {"function_type", vtype_attr(fty)},
                  {"sym_visibility", vstring(f.visibility)},
                  {"arg_attrs", attr_dicts(f.arg_attrs)},
                  {"res_attrs", attr_dicts(f.result_attrs)}};
    for (const auto& a : f.attributes) w.discardable.emplace_back(a.name, vattr(*a.value));
    w.regions.push_back(region(f.body));
    return w;
  }

  const Module& m_;
  std::string target_;
  Nodes& nodes_;
  std::map<std::string, std::string> aliases_;
  size_t spatial_count_ = 0;
};

}  // namespace

WOp to_vhlo(const Module& m, const std::string& target, Nodes& nodes) {
  return ToVhlo(m, target, nodes).run();
}

}  // namespace cujax::ir::bytecode::write

namespace cujax::ir {

namespace {
// The MLIR bytecode version StableHLO writes for a target (StableHLO's compatibility notes:
// 0.9 wrote version 0, 0.10-0.11 version 1, 0.12-0.13 version 3, 0.14 version 4, 0.15 on 6).
uint64_t bytecode_version_for(std::string_view v) {
  using bytecode::version_less;
  if (version_less(v, "0.10.0")) return 0;
  if (version_less(v, "0.12.0")) return 1;
  if (version_less(v, "0.14.0")) return 3;
  if (version_less(v, "0.15.0")) return 4;
  return 6;
}
}  // namespace

const char* default_portable_artifact_target() {
  return "0.9.0";
}

std::string write_bytecode(const Module& m, std::string_view target_version) {
  const std::string target(target_version);
  if (!bytecode::version_less("0.0.0", target) && target != "0.0.0")
    throw Error("target '" + target + "' is not a StableHLO version X.Y.Z");
  if (bytecode::version_less(target, "0.9.0"))
    throw Error("StableHLO " + target + " is older than the oldest VHLO version (0.9.0)");
  if (bytecode::version_less(bytecode::newest_known_stablehlo_version(), target))
    throw Error("StableHLO " + target + " is newer than the newest cujax writes (" +
                bytecode::newest_known_stablehlo_version() + ")");
  bytecode::write::Nodes nodes;
  const auto vhlo = bytecode::write::to_vhlo(m, target, nodes);
  return bytecode::write::emit(vhlo, bytecode_version_for(target), "StableHLO_v" + target, nodes);
}

}  // namespace cujax::ir
