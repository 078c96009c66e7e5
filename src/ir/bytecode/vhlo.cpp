// VHLO -> StableHLO: the ops, types and attributes of a portable artifact as StableHLO
// generic-syntax text, which parse_module turns into the ir::Module.
//
// Why text and not ir::Module directly: the parser already owns every rule that makes a module
// (function signatures, symbol and region checks, how each attribute kind is stored), so going
// through its generic syntax keeps one definition of them; the cost is one extra pass over a
// module, small next to running it. The mapping follows StableHLO's VhloLegalizeToStablehlo:
// attributes VHLO spells out are dropped where they hold StableHLO's default, the split
// dimension-number attributes are joined back into #stablehlo.dot/gather/scatter/conv, and
// older op versions read as the newest with the attributes they lack at their defaults.
#include <bit>
#include <cstring>
#include <map>
#include <set>

#include "../asm_util.h"
#include "../op_table.h"
#include "container.h"
#include "cujax/core/error.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/parser.h"
#include "vhlo_attrs.h"
#include "vhlo_ops.h"

namespace cujax::ir {
namespace {

using BAttrRef = bytecode::AttrRef;
using bytecode::BAttr;
using bytecode::BModule;
using bytecode::BOp;
using bytecode::BType;
using bytecode::TypeRef;
using K = BAttr::Kind;

std::string type_text(const BType& t) {
  switch (t.kind) {
    case BType::Kind::Element:
      return t.elem;
    case BType::Kind::Tensor: {
      std::string s = "tensor<";
      for (int64_t d : t.shape) s += (d == INT64_MIN ? std::string("?") : std::to_string(d)) + "x";
      s += t.element->elem;
      if (!t.encoding.empty()) s += ", " + t.encoding;
      return s + ">";
    }
    case BType::Kind::Unranked:
      return "tensor<*x" + t.element->elem + ">";
    case BType::Kind::Token:
      return "!stablehlo.token";
    case BType::Kind::Tuple: {
      std::string s = "tuple<";
      for (size_t i = 0; i < t.inputs.size(); ++i) s += (i ? ", " : "") + type_text(*t.inputs[i]);
      return s + ">";
    }
    case BType::Kind::None:
      return "none";
    case BType::Kind::Function: {
      std::string s = "(";
      for (size_t i = 0; i < t.inputs.size(); ++i) s += (i ? ", " : "") + type_text(*t.inputs[i]);
      s += ") -> (";
      for (size_t i = 0; i < t.outputs.size(); ++i) s += (i ? ", " : "") + type_text(*t.outputs[i]);
      return s + ")";
    }
    case BType::Kind::Other:
      return t.text;
  }
  return t.text;
}

std::string hex(std::string_view bytes) {
  static const char* k = "0123456789ABCDEF";
  std::string s = "0x";
  for (unsigned char c : bytes) {
    s += k[c >> 4];
    s += k[c & 15];
  }
  return s;
}

int64_t num_elements(const BType& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 0) return -1;
    if (d != 0 && n > INT64_MAX / d) return -1;
    n *= d;
  }
  return n;
}

// Integer value of an Int attribute, sign-extended unless its type is unsigned.
int64_t int_value(const BAttr& a) {
  const int bits = a.type ? a.type->bits : 64;
  uint64_t v = a.bits;
  if (bits < 64) {
    v &= (uint64_t(1) << bits) - 1;
    const bool is_unsigned = a.type && a.type->elem.rfind("ui", 0) == 0;
    if (!is_unsigned && (v >> (bits - 1)) & 1) v |= ~((uint64_t(1) << bits) - 1);
  }
  return static_cast<int64_t>(v);
}

class Emitter {
 public:
  Emitter(const BModule& m, std::string name) : m_(m), name_(std::move(name)) {}

  [[noreturn]] void fail(const BOp& op, const std::string& msg) const {
    throw Error(name_ + ": byte " + std::to_string(op.offset) + ": " + op.dialect + "." + op.name +
                ": " + msg + " (producer " + m_.producer + ")");
  }

  std::string run() {
    if (m_.top.size() != 1 || m_.top[0]->dialect != "builtin" || m_.top[0]->name != "module")
      throw Error(name_ + ": the bytecode does not hold one builtin.module");
    const BOp& mod = *m_.top[0];
    std::string out = "module";
    std::vector<std::pair<std::string, BAttrRef>> rest;
    for (const auto& [k, v] : mod.attrs) {
      if (k == "sym_name" && v->kind == K::String) {
        out += " @" + symbol(v->text);
      } else if (k != "sym_visibility") {
        rest.emplace_back(k, v);
      }
    }
    if (!rest.empty()) out += " attributes " + dict_text(rest, mod);
    out += " {\n";
    if (mod.regions.size() != 1 || mod.regions[0]->blocks.size() != 1)
      fail(mod, "expected one block");
    for (const auto& op : mod.regions[0]->blocks[0]->ops) {
      if (op->dialect == "sdy" && op->name == "mesh") {
        mesh(*op, out);
        continue;
      }
      if (op->dialect != "vhlo" || op->name != "func_v1")
        fail(*op, "only functions and sdy.mesh may be in the module");
      func(*op, out);
    }
    out += "}\n";
    return out;
  }

 private:
  static std::string symbol(const std::string& s) {
    return asm_util::is_bare_identifier(s) ? s : asm_util::quote_string(s);
  }
  static std::string value(int64_t id) { return "%v" + std::to_string(id); }

  const BAttr* find(const BOp& op, std::string_view name) const {
    for (const auto& [k, v] : op.attrs)
      if (k == name) return v.get();
    return nullptr;
  }

  // `sdy.mesh @name = <["a"=2]>`, as JAX prints a Shardy module.
  void mesh(const BOp& op, std::string& out) {
    const BAttr* name = find(op, "sym_name");
    const BAttr* m = find(op, "mesh");
    if (!name || name->kind != K::String || !m || m->kind != K::Sdy || m->enum_value != "mesh")
      fail(op, "expected a symbol name and an sdy mesh");
    out += "  sdy.mesh @" + symbol(name->text) + " = " + m->text;
    std::vector<std::pair<std::string, BAttrRef>> rest;
    for (const auto& [k, v] : op.attrs)
      if (k != "sym_name" && k != "mesh") rest.emplace_back(k, v);
    if (!rest.empty()) out += " " + dict_text(rest, op);
    out += "\n";
  }

  // ---- attributes --------------------------------------------------------------------------
  std::string dict_text(const std::vector<std::pair<std::string, BAttrRef>>& entries,
                        const BOp& op) {
    std::string s = "{";
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) s += ", ";
      const auto& [k, v] = entries[i];
      s += (asm_util::is_bare_identifier(k) ? k : asm_util::quote_string(k));
      if (v->kind == K::Unit) continue;
      s += " = " + attr(*v, op);
    }
    return s + "}";
  }

  std::string tensor_text(const BAttr& a, const BOp& op) {
    const BType& t = *a.type;
    const int64_t n = num_elements(t);
    std::string blob = a.blob;
    const BType& e = *t.element;
    if (e.elem == "i1" && !a.is_builtin && n >= 0) {
      // VHLO packs booleans eight to a byte; a single 0xFF byte is a splat of true.
      const size_t packed = static_cast<size_t>((n + 7) / 8);
      if (blob.size() == 1 && static_cast<unsigned char>(blob[0]) == 0xFF) {
        blob = std::string(1, '\1');
      } else if (blob.size() == packed && blob.size() != static_cast<size_t>(n)) {
        std::string out(static_cast<size_t>(n), '\0');
        for (int64_t i = 0; i < n; ++i) out[i] = (blob[i / 8] >> (i % 8)) & 1;
        blob = out;
      }
    }
    if (e.bits % 8 != 0 && e.elem != "i1") fail(op, "dense elements of sub-byte type " + e.elem);
    const size_t esize = e.elem == "i1" ? 1 : static_cast<size_t>(e.bits / 8);
    if (n < 0 || (blob.size() != esize * static_cast<size_t>(n) && blob.size() != esize))
      fail(op,
           "dense elements of " + type_text(t) + " hold " + std::to_string(blob.size()) + " bytes");
    if (blob.empty()) return "dense<> : " + type_text(t);
    if (e.elem == "index") {
      // The text form JAX prints for index tensors (layouts): decimal elements, nested by shape;
      // one element's bytes is a splat, which MLIR prints as the bare value.
      const bool splat = blob.size() == esize;
      std::string s;
      int64_t k = 0;
      auto rec = [&](auto&& self, size_t dim) -> void {
        if (dim == t.shape.size()) {
          int64_t v = 0;
          std::memcpy(&v, blob.data() + k++ * esize, esize);
          s += std::to_string(v);
          return;
        }
        s += "[";
        for (int64_t i = 0; i < t.shape[dim]; ++i) {
          if (i) s += ", ";
          self(self, dim + 1);
        }
        s += "]";
      };
      if (splat) {
        rec(rec, t.shape.size());
      } else {
        rec(rec, 0);
      }
      return "dense<" + s + "> : " + type_text(t);
    }
    return "dense<\"" + hex(blob) + "\"> : " + type_text(t);
  }

  // Integers of a 1-D integer tensor (VHLO's dimension lists).
  std::vector<int64_t> ints(const BAttr& a, const BOp& op, std::string_view what,
                            bool any_rank = false) {
    if (a.kind != K::Tensor || (!any_rank && a.type->shape.size() != 1) ||
        a.type->element->is_float || a.type->element->is_complex)
      fail(op, std::string(what) + " is not a 1-D integer tensor");
    const BType& e = *a.type->element;
    const size_t esize = e.elem == "i1" ? 1 : static_cast<size_t>(e.bits / 8);
    const int64_t n = num_elements(*a.type);
    std::vector<int64_t> out;
    if (esize == 0 || n < 0) fail(op, std::string(what) + " has a bad shape");
    const bool splat = a.blob.size() == esize && n != 1;
    if (!splat && a.blob.size() != esize * static_cast<size_t>(n))
      fail(op, std::string(what) + " has the wrong size");
    if (n > 0 && static_cast<size_t>(n) > a.blob.size() * 8 + 64)
      fail(op, std::string(what) + " is too long");
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = 0;
      std::memcpy(&v, a.blob.data() + (splat ? 0 : i * esize), esize);
      BAttr tmp;
      tmp.bits = v;
      tmp.type = a.type->element;
      out.push_back(e.elem == "i1" ? static_cast<int64_t>(v & 1) : int_value(tmp));
    }
    return out;
  }
  static std::string list(const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }

  std::string attr(const BAttr& a, const BOp& op) {
    switch (a.kind) {
      case K::Array: {
        std::string s = "[";
        for (size_t i = 0; i < a.elements.size(); ++i)
          s += (i ? ", " : "") + attr(*a.elements[i], op);
        return s + "]";
      }
      case K::Bool:
        return a.boolean ? "true" : "false";
      case K::Enum:
        if (a.text == "custom_call_api_version") {
          static const char* names[] = {
              "API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
              "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"};
          for (int i = 0; i < 5; ++i)
            if (a.enum_value == names[i]) return std::to_string(i) + " : i32";
        }
        return "#stablehlo<" + a.text + " " + a.enum_value + ">";
      case K::Dict: {
        std::vector<std::pair<std::string, BAttrRef>> e;
        for (const auto& [k, v] : a.entries) {
          if (k->kind != K::String) fail(op, "dictionary key is not a string");
          e.emplace_back(k->text, v);
        }
        return dict_text(e, op);
      }
      case K::Float:
        return asm_util::hex_float_bits(
                   a.bits &
                   (a.type->bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << a.type->bits) - 1)) +
               " : " + type_text(*a.type);
      case K::Int:
        if (a.type->elem == "i1") return (a.bits & 1) ? "true" : "false";
        if (a.type->elem.rfind("ui", 0) == 0)
          return std::to_string(a.type->bits >= 64 ? a.bits
                                                   : a.bits & ((uint64_t(1) << a.type->bits) - 1)) +
                 " : " + a.type->elem;
        return std::to_string(int_value(a)) + " : " + a.type->elem;
      case K::String:
        return asm_util::quote_string(a.text);
      case K::Symbol:
        return "@" + symbol(a.text);
      case K::Tensor:
        return tensor_text(a, op);
      case K::TypeA:
        return type_text(*a.type);
      case K::Unit:
        return "unit";
      case K::TypeExtensions: {
        std::string s = "#stablehlo.bounds<";
        for (size_t i = 0; i < a.ints.size(); ++i)
          s += (i ? ", " : "") +
               (a.ints[i] == INT64_MIN ? std::string("?") : std::to_string(a.ints[i]));
        return s + ">";
      }
      case K::ResultAccuracy:
        return "#stablehlo.result_accuracy<atol = " + asm_util::format_float(a.bits, DType::F64) +
               ", rtol = " + asm_util::format_float(static_cast<uint64_t>(a.ints[0]), DType::F64) +
               ", ulps = " + std::to_string(a.index) + ", mode = #stablehlo.result_accuracy_mode<" +
               a.elements[0]->enum_value + ">>";
      case K::OutputOperandAlias:
        return "#stablehlo.output_operand_alias<output_tuple_indices = " + list(a.ints) +
               ", operand_index = " + std::to_string(a.index) +
               ", operand_tuple_indices = " + list(a.ints2) + ">";
      case K::DenseArray: {
        if (a.type->kind != BType::Kind::Element || a.type->bits % 8 || a.type->bits == 0 ||
            a.type->is_float)
          fail(op, "dense array of " + type_text(*a.type));
        const size_t esize = static_cast<size_t>(a.type->bits / 8);
        if (a.blob.size() != esize * static_cast<size_t>(a.index))
          fail(op, "dense array of the wrong size");
        std::string s = "array<" + a.type->elem;
        for (int64_t i = 0; i < a.index; ++i) {
          uint64_t v = 0;
          std::memcpy(&v, a.blob.data() + i * esize, esize);
          BAttr tmp;
          tmp.bits = v;
          tmp.type = a.type;
          s += (i ? ", " : ": ") + std::to_string(int_value(tmp));
        }
        return s + ">";
      }
      case K::Sdy:
        return bytecode::sdy_attr_text(a);
      case K::Location:
      case K::Verbatim:
        return a.text;
    }
    return a.text;
  }

  // ---- VHLO ops ----------------------------------------------------------------------------
  static std::string base_name(const std::string& n) {
    const auto p = n.rfind("_v");
    return p == std::string::npos ? n : n.substr(0, p);
  }

  bool is_splat_int(const BAttr* a, int64_t v, const BOp& op) {
    if (!a || a->kind != K::Tensor) return false;
    auto xs = ints(*a, op, "attribute", true);
    if (xs.empty()) return false;
    for (int64_t x : xs)
      if (x != v) return false;
    return true;
  }
  static bool is_enum(const BAttr* a, const char* v) {
    return a && a->kind == K::Enum && a->enum_value == v;
  }
  static bool all_enum(const BAttr* a, const char* v) {
    if (!a || a->kind != K::Array) return false;
    for (const auto& e : a->elements)
      if (!is_enum(e.get(), v)) return false;
    return true;
  }
  static bool is_bool(const BAttr* a, bool v) { return a && a->kind == K::Bool && a->boolean == v; }
  static bool is_int(const BAttr* a, int64_t v) {
    return a && a->kind == K::Int && int_value(*a) == v;
  }
  static bool is_empty_array(const BAttr* a) {
    return a && a->kind == K::Array && a->elements.empty();
  }
  static bool is_empty_string(const BAttr* a) {
    return a && a->kind == K::String && a->text.empty();
  }
  static bool is_empty_dict(const BAttr* a) {
    return a && a->kind == K::Dict && a->entries.empty();
  }
  static bool is_empty_tensor(const BAttr* a) {
    return a && a->kind == K::Tensor && a->blob.empty();
  }
  static bool is_none_type(const BAttr* a) {
    return a && a->kind == K::TypeA && a->type->kind == BType::Kind::None;
  }

  // Whether `a` holds StableHLO's default `d` (vhlo_attrs.h).
  bool holds(const bytecode::VhloDefault& d, const BAttr* a, const BOp& op) {
    using DK = bytecode::VhloDefault::Kind;
    switch (d.kind) {
      case DK::False:
        return is_bool(a, false);
      case DK::Int:
        return is_int(a, d.value);
      case DK::EmptyString:
        return is_empty_string(a);
      case DK::EmptyArray:
        return is_empty_array(a);
      case DK::EmptyDict:
        return is_empty_dict(a);
      case DK::EmptyTensor:
      case DK::EmptyPairs:
        return is_empty_tensor(a);
      case DK::Enum:
        return is_enum(a, d.enum_value);
      case DK::Ones:
        return is_splat_int(a, 1, op);
      case DK::ZeroPadding:
      case DK::FalseList:
        return is_splat_int(a, 0, op);
      case DK::DefaultPrecision:
        return all_enum(a, "DEFAULT");
      case DK::NoneType:
        return is_none_type(a);
      case DK::DefaultAccuracy:
        // Zero tolerances (either sign) in DEFAULT mode.
        return a && a->kind == K::ResultAccuracy && (a->bits << 1) == 0 &&
               (static_cast<uint64_t>(a->ints[0]) << 1) == 0 && a->index == 0 &&
               is_enum(a->elements[0].get(), "DEFAULT");
    }
    return false;
  }

  // Which attributes hold StableHLO's defaults (VhloLegalizeToStablehlo's removeDefaults).
  std::set<std::string> defaults(const std::string& b, const BOp& op) {
    std::set<std::string> d;
    for (const auto& [k, v] : op.attrs)
      if (const bytecode::VhloDefault* def = bytecode::vhlo_default(b, k))
        if (holds(*def, v.get(), op)) d.insert(k);
    if (b == "custom_call") {
      // A typed-FFI backend_config is a dictionary, empty by default.
      if (is_empty_dict(find(op, "backend_config"))) d.insert("backend_config");
      // Layouts are given for operands and results together or not at all.
      if (d.count("operand_layouts") != d.count("result_layouts")) {
        d.erase("operand_layouts");
        d.erase("result_layouts");
      }
    }
    return d;
  }

  std::string ints_of(const BOp& op, const char* name) {
    const BAttr* a = find(op, name);
    if (!a) return "[]";  // older op versions lack the batching dimensions
    return list(ints(*a, op, name));
  }
  int64_t int_of(const BOp& op, const char* name) {
    const BAttr* a = find(op, name);
    if (!a || a->kind != K::Int) fail(op, std::string("missing integer attribute ") + name);
    return int_value(*a);
  }

  // Joins VHLO's split dimension numbers back into StableHLO's struct attributes.
  void implode(const std::string& b, const BOp& op,
               std::vector<std::pair<std::string, std::string>>& out, std::set<std::string>& used) {
    auto field = [&](std::string& s, const char* key, const char* attr_name) {
      used.insert(attr_name);
      const std::string v = ints_of(op, attr_name);
      if (v == "[]") return;
      if (s.back() != '<') s += ", ";
      s += std::string(key) + " = " + v;
    };
    if (b == "dot_general") {
      std::string s = "#stablehlo.dot<";
      field(s, "lhs_batching_dimensions", "lhs_batching_dimensions");
      field(s, "rhs_batching_dimensions", "rhs_batching_dimensions");
      field(s, "lhs_contracting_dimensions", "lhs_contracting_dimensions");
      field(s, "rhs_contracting_dimensions", "rhs_contracting_dimensions");
      out.emplace_back("dot_dimension_numbers", s + ">");
      const char* algo[] = {"lhs_precision_type",          "rhs_precision_type",
                            "accumulation_type",           "lhs_component_count",
                            "rhs_component_count",         "num_primitive_operations",
                            "allow_imprecise_accumulation"};
      for (const char* n : algo) used.insert(n);
      const BAttr* first = find(op, "lhs_precision_type");
      if (first && !is_none_type(find(op, "lhs_component_count")) && !is_none_type(first)) {
        std::string a = "#stablehlo.dot_algorithm<";
        for (int i = 0; i < 7; ++i) {
          const BAttr* v = find(op, algo[i]);
          if (!v) fail(op, std::string("missing ") + algo[i]);
          a += std::string(i ? ", " : "") + algo[i] + " = " +
               (v->kind == K::Int ? std::to_string(int_value(*v)) : attr(*v, op));
        }
        out.emplace_back("algorithm", a + ">");
      }
    }
    if (b == "gather" || b == "dynamic_gather") {
      std::string s = "#stablehlo.gather<";
      field(s, "offset_dims", "offset_dims");
      field(s, "collapsed_slice_dims", "collapsed_slice_dims");
      field(s, "operand_batching_dims", "operand_batching_dims");
      field(s, "start_indices_batching_dims", "start_indices_batching_dims");
      field(s, "start_index_map", "start_index_map");
      used.insert("index_vector_dim");
      index_vector_dim(s, int_of(op, "index_vector_dim"));
      out.emplace_back("dimension_numbers", s + ">");
    }
    if (b == "scatter") {
      std::string s = "#stablehlo.scatter<";
      field(s, "update_window_dims", "update_window_dims");
      field(s, "inserted_window_dims", "inserted_window_dims");
      field(s, "input_batching_dims", "input_batching_dims");
      field(s, "scatter_indices_batching_dims", "scatter_indices_batching_dims");
      field(s, "scatter_dims_to_operand_dims", "scatter_dims_to_operand_dims");
      used.insert("index_vector_dim");
      index_vector_dim(s, int_of(op, "index_vector_dim"));
      out.emplace_back("scatter_dimension_numbers", s + ">");
    }
    if (b == "convolution" || b == "dynamic_conv") {
      for (const char* n :
           {"input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
            "kernel_input_feature_dimension", "kernel_output_feature_dimension",
            "kernel_spatial_dimensions", "output_batch_dimension", "output_feature_dimension",
            "output_spatial_dimensions"})
        used.insert(n);
      auto layout = [&](int64_t b0, char c0, int64_t b1, char c1, const char* spatial) {
        const auto sp = ints(*need(op, spatial), op, spatial);
        const size_t rank = sp.size() + 2;
        std::vector<std::string> dims(rank);
        auto put = [&](int64_t d, std::string v) {
          if (d < 0 || static_cast<size_t>(d) >= rank || !dims[d].empty())
            fail(op, "bad convolution dimensions");
          dims[d] = std::move(v);
        };
        put(b0, std::string(1, c0));
        put(b1, std::string(1, c1));
        for (size_t i = 0; i < sp.size(); ++i) put(sp[i], std::to_string(i));
        std::string s = "[";
        for (size_t i = 0; i < rank; ++i) s += (i ? ", " : "") + dims[i];
        return s + "]";
      };
      out.emplace_back(
          "dimension_numbers",
          "#stablehlo.conv<" +
              layout(int_of(op, "input_batch_dimension"), 'b',
                     int_of(op, "input_feature_dimension"), 'f', "input_spatial_dimensions") +
              "x" +
              layout(int_of(op, "kernel_input_feature_dimension"), 'i',
                     int_of(op, "kernel_output_feature_dimension"), 'o',
                     "kernel_spatial_dimensions") +
              "->" +
              layout(int_of(op, "output_batch_dimension"), 'b',
                     int_of(op, "output_feature_dimension"), 'f', "output_spatial_dimensions") +
              ">");
    }
    if (b == "recv" || b == "send") {
      used.insert("channel_id");
      used.insert("channel_type");
      out.emplace_back(
          "channel_handle",
          "#stablehlo.channel_handle<handle = " + std::to_string(int_of(op, "channel_id")) +
              ", type = " + std::to_string(int_of(op, "channel_type")) + ">");
    }
  }
  std::string describe(const BOp& op) const {
    std::string s = " (attributes:";
    for (const auto& [k, v] : op.attrs)
      s += " " + k + "=" + std::to_string(static_cast<int>(v->kind));
    return s + ")";
  }
  // StableHLO prints index_vector_dim only where it is not its default, 0.
  static void index_vector_dim(std::string& s, int64_t v) {
    if (v != 0)
      s += (s.back() != '<' ? ", " : "") + std::string("index_vector_dim = ") + std::to_string(v);
  }
  const BAttr* need(const BOp& op, const char* name) {
    const BAttr* a = find(op, name);
    if (!a) fail(op, std::string("missing attribute ") + name);
    return a;
  }

  std::string special(const std::string& b, const std::string& n, const BAttr& a, const BOp& op,
                      std::string& out_name) {
    out_name = n;
    if (n == "channel_id" &&
        (b == "all_gather" || b == "all_reduce" || b == "all_to_all" || b == "collective_permute" ||
         b == "reduce_scatter" || b == "collective_broadcast" || b == "collective_reduce")) {
      out_name = "channel_handle";
      if (a.kind != K::Int) fail(op, "channel_id is not an integer");
      return "#stablehlo.channel_handle<handle = " + std::to_string(int_value(a)) + ", type = 0>";
    }
    if ((n == "use_global_device_ids" || n == "has_dynamic_root") && a.kind == K::Bool) {
      return a.boolean ? "unit" : "";
    }
    if ((b == "custom_call" && n == "called_computations") ||
        (b == "composite" && n == "decomposition") || (b == "call" && n == "callee")) {
      if (a.kind == K::String) return "@" + symbol(a.text);
      if (a.kind == K::Array) {
        std::string s = "[";
        for (size_t i = 0; i < a.elements.size(); ++i) {
          if (a.elements[i]->kind != K::String) fail(op, n + " holds a non-string");
          s += (i ? ", @" : "@") + symbol(a.elements[i]->text);
        }
        return s + "]";
      }
      fail(op, n + " is not a symbol");
    }
    if (bytecode::vhlo_dense_array_attr(b, n)) {
      const auto v = ints(a, op, n);
      const bool is_bool = n == "window_reversal";
      std::string s = is_bool ? "array<i1" : "array<i64";
      for (size_t i = 0; i < v.size(); ++i)
        s += (i ? ", " : ": ") +
             (is_bool ? std::string(v[i] ? "true" : "false") : std::to_string(v[i]));
      return s + ">";
    }
    return attr(a, op);
  }

  std::string op_name(const BOp& op, bool in_func_body) {
    if (op.dialect != "vhlo")
      fail(op, "only VHLO ops, sdy.mesh and sdy.sharding_constraint can be read");
    const bytecode::VhloOpInfo* info = bytecode::find_vhlo_op(op.name);
    if (!info)
      fail(op, "unknown VHLO op (newest StableHLO cujax knows: " +
                   std::string(bytecode::newest_known_stablehlo_version()) + ")");
    return ops::from_vhlo_base(base_name(op.name), in_func_body);
  }

  void op_text(const BOp& op, bool in_func_body, std::string& out, const std::string& indent,
               int depth) {
    if (depth > bytecode::kMaxDepth) fail(op, "regions nested too deeply");
    if (op.dialect == "sdy" && op.name == "sharding_constraint")
      return sharding_constraint(op, out, indent);
    const std::string name = op_name(op, in_func_body);
    const std::string b = base_name(op.name);
    out += indent;
    for (size_t i = 0; i < op.result_ids.size(); ++i)
      out += (i ? ", " : "") + value(op.result_ids[i]);
    if (!op.result_ids.empty()) out += " = ";
    out += "\"" + name + "\"(";
    for (size_t i = 0; i < op.operands.size(); ++i) out += (i ? ", " : "") + value(op.operands[i]);
    out += ")";
    if (!op.regions.empty()) {
      out += " (";
      for (size_t r = 0; r < op.regions.size(); ++r) {
        out += r ? ", {\n" : "{\n";
        region_text(*op.regions[r], out, indent + "  ", depth + 1, false);
        out += indent + "}";
      }
      out += ")";
    }
    // Attributes: defaults dropped, split ones joined, the rest converted one to one.
    const std::set<std::string> dropped = defaults(b, op);
    std::vector<std::pair<std::string, std::string>> attrs;
    std::set<std::string> used;
    implode(b, op, attrs, used);
    for (const auto& [k, v] : op.attrs) {
      if (dropped.count(k) || used.count(k)) continue;
      std::string out_name;
      const std::string text = special(b, k, *v, op, out_name);
      if (!text.empty()) attrs.emplace_back(out_name, text);
    }
    if (!attrs.empty()) {
      out += " {";
      for (size_t i = 0; i < attrs.size(); ++i) {
        out += (i ? ", " : "") + (asm_util::is_bare_identifier(attrs[i].first)
                                      ? attrs[i].first
                                      : asm_util::quote_string(attrs[i].first));
        if (attrs[i].second != "unit") out += " = " + attrs[i].second;
      }
      out += "}";
    }
    out += " : (";
    for (size_t i = 0; i < op.operands.size(); ++i) out += (i ? ", " : "") + operand_type(op, i);
    out += ") -> ";
    if (op.result_types.size() == 1) {
      out += type_text(*op.result_types[0]);
    } else {
      out += "(";
      for (size_t i = 0; i < op.result_types.size(); ++i)
        out += (i ? ", " : "") + type_text(*op.result_types[i]);
      out += ")";
    }
    if (op.loc && op.loc->kind == K::Location && op.loc->text != "unknown")
      out += " loc(" + op.loc->text + ")";
    out += "\n";
    for (size_t i = 0; i < op.result_ids.size(); ++i) types_[op.result_ids[i]] = op.result_types[i];
  }

  // `%r = sdy.sharding_constraint %x <@mesh, [{"a"}]> : tensor<8xf32>`, as JAX prints it.
  void sharding_constraint(const BOp& op, std::string& out, const std::string& indent) {
    const BAttr* sh = find(op, "sharding");
    if (!sh || sh->kind != K::Sdy || sh->enum_value != "sharding")
      fail(op, "expected an sdy sharding");
    if (op.attrs.size() != 1) fail(op, "attributes beside the sharding");
    if (op.operands.size() != 1 || op.result_types.size() != 1)
      fail(op, "expected one operand and one result");
    out += indent + value(op.result_ids[0]) + " = sdy.sharding_constraint " +
           value(op.operands[0]) + " " + sh->text + " : " + type_text(*op.result_types[0]);
    if (op.loc && op.loc->kind == K::Location && op.loc->text != "unknown")
      out += " loc(" + op.loc->text + ")";
    out += "\n";
    types_[op.result_ids[0]] = op.result_types[0];
  }

  std::string operand_type(const BOp& op, size_t i) {
    auto it = types_.find(op.operands[i]);
    if (it == types_.end())
      fail(op, "operand " + std::to_string(i) + " is used before it is defined");
    return type_text(*it->second);
  }

  void region_text(const bytecode::BRegion& r, std::string& out, const std::string& indent,
                   int depth, bool func_body) {
    for (size_t bi = 0; bi < r.blocks.size(); ++bi) {
      const auto& blk = *r.blocks[bi];
      if (!func_body) {
        out += indent + "^bb" + std::to_string(bi) + "(";
        for (size_t i = 0; i < blk.args.size(); ++i) {
          out += (i ? ", " : "") + value(blk.args[i].second) + ": " + type_text(*blk.args[i].first);
          types_[blk.args[i].second] = blk.args[i].first;
        }
        out += "):\n";
      }
      for (const auto& op : blk.ops) op_text(*op, func_body, out, indent + "  ", depth);
    }
  }

  void func(const BOp& op, std::string& out) {
    const BAttr* name = find(op, "sym_name");
    const BAttr* ftype = find(op, "function_type");
    if (!name || name->kind != K::String || !ftype || ftype->kind != K::TypeA ||
        ftype->type->kind != BType::Kind::Function)
      fail(op, "function without sym_name or function_type" + describe(op));
    const BAttr* vis = find(op, "sym_visibility");
    const BAttr* arg_attrs = find(op, "arg_attrs");
    const BAttr* res_attrs = find(op, "res_attrs");
    const BType& ft = *ftype->type;
    if (op.regions.size() != 1 || op.regions[0]->blocks.size() != 1)
      fail(op, "function body must be one block");
    const auto& entry = *op.regions[0]->blocks[0];
    if (entry.args.size() != ft.inputs.size())
      fail(op, "function arguments disagree with its type");
    out += "  func.func ";
    if (vis && vis->kind == K::String && !vis->text.empty()) out += vis->text + " ";
    out += "@" + symbol(name->text) + "(";
    auto attrs_at = [&](const BAttr* list, size_t i) -> std::string {
      if (!list || list->kind != K::Array || i >= list->elements.size()) return "";
      const BAttr& d = *list->elements[i];
      if (d.kind != K::Dict || d.entries.empty()) return "";
      return " " + attr(d, op);
    };
    for (size_t i = 0; i < entry.args.size(); ++i) {
      out += (i ? ", " : "") + value(entry.args[i].second) + ": " +
             type_text(*entry.args[i].first) + attrs_at(arg_attrs, i);
      types_[entry.args[i].second] = entry.args[i].first;
    }
    out += ") -> (";
    for (size_t i = 0; i < ft.outputs.size(); ++i)
      out += (i ? ", " : "") + type_text(*ft.outputs[i]) + attrs_at(res_attrs, i);
    out += ")";
    std::vector<std::pair<std::string, BAttrRef>> extra;
    for (const auto& [k, v] : op.attrs)
      if (k != "sym_name" && k != "function_type" && k != "sym_visibility" && k != "arg_attrs" &&
          k != "res_attrs")
        extra.emplace_back(k, v);
    if (!extra.empty()) out += " attributes " + dict_text(extra, op);
    out += " {\n";
    region_text(*op.regions[0], out, "  ", 1, true);
    out += "  }\n";
  }

  const BModule& m_;
  std::string name_;
  std::map<int64_t, TypeRef> types_;
};

std::string_view producer_version(std::string_view producer) {
  constexpr std::string_view prefix = "StableHLO_v";
  if (producer.substr(0, prefix.size()) != prefix) return {};
  return producer.substr(prefix.size());
}

}  // namespace

bool is_bytecode(std::string_view bytes) {
  return bytes.size() >= 4 && bytes.substr(0, 4) == std::string_view("ML\xefR", 4);
}

std::string bytecode_producer(std::string_view bytes, std::string_view name) {
  if (!is_bytecode(bytes))
    throw Error(std::string(name) + ": byte 0: not MLIR bytecode (no \"ML\\xefR\" magic)");
  size_t p = 4;
  // The version varint, then the NUL-terminated producer.
  if (p >= bytes.size()) throw Error(std::string(name) + ": byte 4: truncated header");
  const unsigned char first = static_cast<unsigned char>(bytes[p]);
  p += first == 0 ? 9 : static_cast<size_t>(std::countr_zero(first)) + 1;
  const size_t end = bytes.find('\0', p);
  if (p > bytes.size() || end == std::string_view::npos)
    throw Error(std::string(name) + ": byte " + std::to_string(std::min(p, bytes.size())) +
                ": producer string without its terminating NUL");
  return std::string(bytes.substr(p, end - p));
}

std::string portable_artifact_version(std::string_view bytes, std::string_view name) {
  const std::string producer = bytecode_producer(bytes, name);
  const std::string_view v = producer_version(producer);
  if (v.empty())
    throw Error(std::string(name) + ": producer '" + producer + "' is not StableHLO_vX.Y.Z");
  return std::string(v);
}

std::string bytecode_to_stablehlo_text(std::string_view bytes, std::string_view name) {
  const std::string producer = bytecode_producer(bytes, name);
  const std::string_view v = producer_version(producer);
  if (!v.empty() && bytecode::version_less(bytecode::newest_known_stablehlo_version(), v))
    throw Error(std::string(name) + ": portable artifact of " + producer +
                " is newer than the newest StableHLO cujax reads (" +
                bytecode::newest_known_stablehlo_version() + ")");
  std::unique_ptr<bytecode::Container> keep;
  const BModule m = bytecode::read_container(bytes, name, &keep);
  return Emitter(m, std::string(name)).run();
}

std::unique_ptr<Module> read_bytecode(std::string_view bytes, std::string_view name) {
  const std::string text = bytecode_to_stablehlo_text(bytes, name);
  try {
    return parse_module(text);
  } catch (const ParseError& e) {
    throw Error(std::string(name) +
                ": the module the bytecode holds does not parse as StableHLO: " + e.what());
  }
}

}  // namespace cujax::ir
