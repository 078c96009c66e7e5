// StableHLO text printer: the pretty syntax of JAX's `Lowered.as_text()` (MLIR's printer with
// the StableHLO and func dialects), generic op form for everything without a pretty form.
//
// Value names follow MLIR's rules so that JAX output prints back byte for byte: numbers per
// function in textual order, region values numbered after all values of the enclosing region,
// sibling regions starting from the same state, `%c`/`%cst` for constants, `%iterArg` for while
// arguments, `%argN` for entry block arguments, `_N` suffixes from one shared conflict counter.
#include "cujax/ir/printer.h"
#include "cujax/core/dynamic_shape.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "ir/asm_util.h"
#include "ir/op_table.h"
#include "ir/sdy.h"

namespace cujax::ir {

namespace {

using namespace asm_util;
using syntax::Form;
using Kind = Attribute::Kind;

void append_type(std::string& out, const Type& t) {
  if (t.is_token) {
    out += "!stablehlo.token";
    return;
  }
  out += "tensor<";
  for (int64_t d : t.shape) {
    out += d == kDynamicDim ? std::string("?") : std::to_string(d);
    out += 'x';
  }
  out += t.quantized ? t.quantized->str() : std::string(mlir_name(t.dtype));
  out += '>';
}

void append_symbol(std::string& out, std::string_view name) {
  out += '@';
  if (is_bare_identifier(name)) {
    out += name;
  } else {
    out += quote_string(name);
  }
}

void append_attr_name(std::string& out, std::string_view name) {
  if (is_bare_identifier(name)) {
    out += name;
  } else {
    out += quote_string(name);
  }
}

// Element `i` of a tensor as MLIR prints it.
void append_element(std::string& out, const HostTensor& t, int64_t i) {
  const DType dt = t.dtype();
  const auto* base = static_cast<const std::byte*>(t.data()) + static_cast<size_t>(i) * size_of(dt);
  if (is_complex(dt)) {  // (re,im), as MLIR prints complex elements
    const DType part = complex_component(dt);
    const size_t half = size_of(part);
    uint64_t re = 0, im = 0;
    std::memcpy(&re, base, half);
    std::memcpy(&im, base + half, half);
    out += '(';
    out += format_float(re, part);
    out += ',';
    out += format_float(im, part);
    out += ')';
    return;
  }
  uint64_t bits = 0;
  std::memcpy(&bits, base, size_of(dt));
  if (dt == DType::Bool) {
    out += bits & 0xff ? "true" : "false";
  } else if (is_float(dt)) {
    out += format_float(bits, dt);
  } else if (is_narrow_int(dt)) {
    out += std::to_string(narrow_int_to_int64(dt, static_cast<uint8_t>(bits)));
  } else if (is_unsigned_int(dt)) {
    out += std::to_string(bits);
  } else {
    const int w = bit_width(dt);
    const uint64_t sign = w >= 64 ? 0 : uint64_t{1} << (w - 1);
    const int64_t v =
        w >= 64 ? static_cast<int64_t>(bits) : static_cast<int64_t>((bits ^ sign) - sign);
    out += std::to_string(v);
  }
}

void append_dense_list(std::string& out, const HostTensor& t, size_t dim, int64_t& next) {
  out += '[';
  const int64_t n = t.shape()[dim];
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    if (dim + 1 < t.shape().size()) {
      append_dense_list(out, t, dim + 1, next);
    } else {
      append_element(out, t, next++);
    }
  }
  out += ']';
}

// `type`: the literal's type where it is not the tensor's own (a quantized type).
void append_dense(std::string& out, const HostTensor& t, const std::optional<Type>& type) {
  out += "dense<";
  const int64_t n = t.size();
  const size_t esize = size_of(t.dtype());
  const auto* p = static_cast<const std::byte*>(t.data());
  bool splat = n > 0;
  for (int64_t i = 1; splat && i < n; ++i)
    splat = std::memcmp(p, p + static_cast<size_t>(i) * esize, esize) == 0;
  if (n == 0) {
    // dense<>
  } else if (splat) {
    append_element(out, t, 0);
  } else if (n > 100) {
    static const char* kHex = "0123456789ABCDEF";
    out += "\"0x";
    const size_t nbytes = t.nbytes();
    const size_t start = out.size();
    out.resize(start + 2 * nbytes);
    for (size_t i = 0; i < nbytes; ++i) {
      const auto b = static_cast<unsigned>(p[i]);
      out[start + 2 * i] = kHex[b >> 4];
      out[start + 2 * i + 1] = kHex[b & 15];
    }
    out += '"';
  } else {
    int64_t next = 0;
    append_dense_list(out, t, 0, next);
  }
  out += "> : ";
  append_type(out, type ? *type : Type::tensor(t.shape(), t.dtype()));
}

bool is_int_list(const Attribute& a) {
  if (a.kind != Kind::Array) return false;
  for (const auto& e : a.elements)
    if (e->kind != Kind::Integer || e->dtype) return false;
  return true;
}

void append_int_list(std::string& out, const std::vector<int64_t>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(v[i]);
  }
  out += ']';
}

std::vector<int64_t> list_values(const Attribute& a) {
  std::vector<int64_t> v;
  for (const auto& e : a.elements) v.push_back(e->integer);
  return v;
}

// The compact `[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]` spelling of #stablehlo.conv, when the
// struct has exactly the canonical fields and each list is a permutation.
bool conv_compact(const Attribute& a, std::string* out) {
  static constexpr std::string_view kFields[] = {
      "input_batch_dimension",           "input_feature_dimension",
      "input_spatial_dimensions",        "kernel_input_feature_dimension",
      "kernel_output_feature_dimension", "kernel_spatial_dimensions",
      "output_batch_dimension",          "output_feature_dimension",
      "output_spatial_dimensions"};
  if (a.fields.size() != 9) return false;
  for (size_t i = 0; i < 9; ++i) {
    const auto& f = a.fields[i];
    if (f.name != kFields[i]) return false;
    const bool list = i % 3 == 2;
    if (list ? !is_int_list(*f.value) : (f.value->kind != Kind::Integer || f.value->dtype))
      return false;
  }
  std::string s;
  const char letters[3][2] = {{'b', 'f'}, {'i', 'o'}, {'b', 'f'}};
  for (int g = 0; g < 3; ++g) {
    const int64_t d0 = a.fields[3 * g].value->integer;
    const int64_t d1 = a.fields[3 * g + 1].value->integer;
    const std::vector<int64_t> sp = list_values(*a.fields[3 * g + 2].value);
    const int64_t n = static_cast<int64_t>(sp.size()) + 2;
    std::vector<std::string> slots(static_cast<size_t>(n));
    auto put = [&](int64_t pos, std::string v) {
      if (pos < 0 || pos >= n || !slots[pos].empty()) return false;
      slots[pos] = std::move(v);
      return true;
    };
    if (!put(d0, std::string(1, letters[g][0])) || !put(d1, std::string(1, letters[g][1])))
      return false;
    for (size_t k = 0; k < sp.size(); ++k)
      if (!put(sp[k], std::to_string(k))) return false;
    if (g == 1) s += "x";
    if (g == 2) s += "->";
    s += '[';
    for (int64_t i = 0; i < n; ++i) {
      if (i) s += ", ";
      s += slots[i];
    }
    s += ']';
  }
  if (out) *out = std::move(s);
  return true;
}

void append_attr(std::string& out, const Attribute& a);

void append_dict_body(std::string& out, const std::vector<NamedAttribute>& fields) {
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ", ";
    append_attr_name(out, fields[i].name);
    if (fields[i].value && fields[i].value->kind != Kind::Unit) {
      out += " = ";
      append_attr(out, *fields[i].value);
    }
  }
}

void append_scalar_float(std::string& out, double v, DType t) {
  out += format_float(float_bits_from_double(v, t), t);
}

void append_attr(std::string& out, const Attribute& a) {
  switch (a.kind) {
    case Kind::Unit:
      out += "unit";
      return;
    case Kind::Bool:
      out += a.boolean ? "true" : "false";
      return;
    case Kind::Integer:
      if (a.dtype && *a.dtype == DType::U64) {
        out += std::to_string(static_cast<uint64_t>(a.integer));
      } else {
        out += std::to_string(a.integer);
      }
      if (a.dtype) {
        out += " : ";
        out += mlir_name(*a.dtype);
      }
      return;
    case Kind::Float:
      if (a.dtype && is_float(*a.dtype)) {
        append_scalar_float(out, a.floating, *a.dtype);
        out += " : ";
        out += mlir_name(*a.dtype);
      } else {
        append_scalar_float(out, a.floating, DType::F64);
      }
      return;
    case Kind::String:
      out += quote_string(a.text);
      return;
    case Kind::Symbol:
      append_symbol(out, a.text);
      return;
    case Kind::TypeAttr:
      if (a.type) {
        append_type(out, *a.type);
      } else {
        out += "none";
      }
      return;
    case Kind::Array:
      out += '[';
      for (size_t i = 0; i < a.elements.size(); ++i) {
        if (i) out += ", ";
        append_attr(out, *a.elements[i]);
      }
      out += ']';
      return;
    case Kind::DenseArray: {
      const DType dt = a.dtype.value_or(DType::I64);
      out += "array<";
      out += mlir_name(dt);
      const size_t n = is_float(dt) ? a.floats.size() : a.ints.size();
      if (n) out += ": ";
      for (size_t i = 0; i < n; ++i) {
        if (i) out += ", ";
        if (is_float(dt)) {
          append_scalar_float(out, a.floats[i], dt);
        } else if (dt == DType::Bool) {
          out += a.ints[i] ? "true" : "false";
        } else if (dt == DType::U64) {
          out += std::to_string(static_cast<uint64_t>(a.ints[i]));
        } else {
          out += std::to_string(a.ints[i]);
        }
      }
      out += '>';
      return;
    }
    case Kind::DenseElements:
      append_dense(out, a.tensor, a.type);
      return;
    case Kind::Dictionary:
      out += '{';
      append_dict_body(out, a.fields);
      out += '}';
      return;
    case Kind::Enum:
      out += "#stablehlo<";
      out += a.text;
      out += ' ';
      out += a.enum_value;
      out += '>';
      return;
    case Kind::Struct: {
      out += '#';
      out += a.text;
      out += '<';
      std::string compact;
      if (a.text == "stablehlo.conv") {
        if (conv_compact(a, &compact)) {
          out += compact;
        } else {
          out += "raw ";
          append_dict_body(out, a.fields);
        }
      } else {
        append_dict_body(out, a.fields);
      }
      out += '>';
      return;
    }
    case Kind::Opaque:
      out += a.text;
      return;
  }
}

// ---- module printer -------------------------------------------------------------------------

struct NameScope {
  const NameScope* parent = nullptr;
  std::unordered_set<std::string> used;
  bool contains(const std::string& s) const {
    for (const NameScope* p = this; p; p = p->parent)
      if (p->used.count(s)) return true;
    return false;
  }
};

struct NameState {
  int64_t next_value = 0;
  int64_t next_arg = 0;
  int64_t next_conflict = 0;
};

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// "%" + name, without GCC 12's spurious -Wrestrict on `"%" + std::string`.
std::string pct(std::string_view n) {
  std::string s;
  s.reserve(n.size() + 1);
  s += '%';
  s += n;
  return s;
}

class ModulePrinter {
 public:
  std::string out;

  void module(const Module& m) {
    for (const auto& a : m.aliases)
      if (!is_loc_alias(a) && !ir::detail::is_sdy_mesh(a)) out += a + "\n";
    out += "module";
    if (!m.name.empty()) {
      out += ' ';
      append_symbol(out, m.name);
    }
    if (!m.attributes.empty()) {
      out += " attributes {";
      append_dict_body(out, m.attributes);
      out += '}';
    }
    out += " {\n";
    for (const auto& a : m.aliases)
      if (ir::detail::is_sdy_mesh(a)) out += "  " + a + "\n";
    for (const auto& f : m.functions) function(*f);
    out += '}';
    if (!m.loc.empty()) out += " " + m.loc;
    out += '\n';
    for (const auto& a : m.aliases)
      if (is_loc_alias(a)) out += a + "\n";
  }

 private:
  static bool is_loc_alias(std::string_view a) {
    const size_t eq = a.find('=');
    if (eq == std::string_view::npos || a.empty() || a[0] != '#') return false;
    size_t i = eq + 1;
    while (i < a.size() && (a[i] == ' ' || a[i] == '\t')) ++i;
    return a.substr(i, 4) == "loc(";
  }

  // ---- naming ----

  std::string unique_name(const std::string& base, NameScope& scope, NameState& st) {
    if (!scope.contains(base)) {
      scope.used.insert(base);
      return base;
    }
    while (true) {
      std::string probe = base + "_" + std::to_string(st.next_conflict++);
      if (!scope.contains(probe)) {
        scope.used.insert(probe);
        return probe;
      }
    }
  }

  static bool is_named_constant(const Operation& op) {
    return op.name == "stablehlo.constant" && op.num_results() == 1 && !op.result(0)->type.is_token;
  }

  void number_region(const Region& region, NameState st, const NameScope* parent) {
    NameScope scope;
    scope.parent = parent;
    const bool iter_args = region.parent_op && region.parent_op->name == "stablehlo.while";
    for (size_t bi = 0; bi < region.blocks.size(); ++bi) {
      const Block& b = *region.blocks[bi];
      for (const auto& arg : b.arguments) {
        if (bi == 0 && iter_args) {
          names_[arg.get()] = pct(unique_name("iterArg", scope, st));
        } else if (bi == 0) {
          names_[arg.get()] = pct(unique_name("arg" + std::to_string(st.next_arg++), scope, st));
        } else {
          names_[arg.get()] = pct(std::to_string(st.next_value++));
        }
      }
      for (const auto& op : b.ops) {
        if (op->num_results() == 0) continue;
        auto& groups = groups_[op.get()];
        if (is_named_constant(*op)) {
          const DType dt = op->result(0)->type.dtype;
          const std::string n = pct(unique_name(is_float(dt) ? "cst" : "c", scope, st));
          names_[op->result(0)] = n;
          groups.push_back({n, 1});
          continue;
        }
        if (op->name == "stablehlo.rng_bit_generator" && op->num_results() == 2) {
          // StableHLO names these results, as its OpAsmOpInterface does.
          for (size_t i = 0; i < 2; ++i) {
            const std::string n = pct(unique_name(i ? "output" : "output_state", scope, st));
            names_[op->result(i)] = n;
            groups.push_back({n, 1});
          }
          continue;
        }
        const std::string base = pct(std::to_string(st.next_value++));
        groups.push_back({base, op->num_results()});
        if (op->num_results() == 1) {
          names_[op->result(0)] = base;
        } else {
          for (size_t i = 0; i < op->num_results(); ++i)
            names_[op->result(i)] = base + "#" + std::to_string(i);
        }
      }
    }
    for (const auto& b : region.blocks)
      for (const auto& op : b->ops)
        for (const auto& r : op->regions) number_region(*r, st, &scope);
  }

  const std::string& name(const Value* v) const {
    static const std::string kUnknown = "%<<UNKNOWN SSA VALUE>>";
    auto it = names_.find(v);
    return it == names_.end() ? kUnknown : it->second;
  }

  // ---- pieces ----

  void value_list(const std::vector<Value*>& vs) {
    for (size_t i = 0; i < vs.size(); ++i) {
      if (i) out += ", ";
      out += name(vs[i]);
    }
  }

  void type_list(const std::vector<Type>& ts) {
    for (size_t i = 0; i < ts.size(); ++i) {
      if (i) out += ", ";
      append_type(out, ts[i]);
    }
  }

  static std::vector<Type> operand_types(const Operation& op) {
    std::vector<Type> v;
    for (const Value* x : op.operands) v.push_back(x->type);
    return v;
  }
  static std::vector<Type> result_types(const Operation& op) {
    std::vector<Type> v;
    for (const auto& r : op.results) v.push_back(r->type);
    return v;
  }

  void functional_type(const Operation& op) {
    out += '(';
    type_list(operand_types(op));
    out += ") -> ";
    if (op.num_results() == 1) {
      append_type(out, op.result(0)->type);
    } else {
      out += '(';
      type_list(result_types(op));
      out += ')';
    }
  }

  // custom<SameOperandsAndResultType>
  void same_type(const Operation& op) {
    const Type& r = op.result(0)->type;
    bool same = true;
    for (const Value* v : op.operands) same = same && v->type == r;
    if (same) {
      append_type(out, r);
    } else {
      functional_type(op);
    }
  }

  void rest_attrs(const Operation& op, std::initializer_list<std::string_view> consumed) {
    bool any = false;
    for (const auto& a : op.attributes) {
      if (std::find(consumed.begin(), consumed.end(), a.name) != consumed.end()) continue;
      out += any ? ", " : " {";
      any = true;
      append_attr_name(out, a.name);
      if (a.value && a.value->kind != Kind::Unit) {
        out += " = ";
        append_attr(out, *a.value);
      }
    }
    if (any) out += '}';
  }

  void block_args(const Block& b) {
    for (size_t i = 0; i < b.arguments.size(); ++i) {
      if (i) out += ", ";
      const Value* v = b.arguments[i].get();
      out += name(v);
      out += ": ";
      append_type(out, v->type);
      if (!v->loc.empty()) out += " " + v->loc;
    }
  }

  // { ops } with the entry block's arguments printed as ^bb0(...) when `entry_args`.
  void region(const Region& r, int indent, bool entry_args) {
    out += "{\n";
    for (size_t bi = 0; bi < r.blocks.size(); ++bi) {
      const Block& b = *r.blocks[bi];
      if (bi > 0 || (entry_args && !b.arguments.empty())) {
        out.append(static_cast<size_t>(indent), ' ');
        out += "^bb" + std::to_string(bi);
        if (!b.arguments.empty()) {
          out += '(';
          block_args(b);
          out += ')';
        }
        out += ":\n";
      }
      for (const auto& op : b.ops) operation(*op, indent + 2, false);
    }
    out.append(static_cast<size_t>(indent), ' ');
    out += '}';
  }

  // ---- ops ----

  static const Attribute* attr_of(const Operation& op, std::string_view n, Kind k) {
    const Attribute* a = op.attr(n);
    return a && a->kind == k ? a : nullptr;
  }
  static const Attribute* i64_array(const Operation& op, std::string_view n) {
    const Attribute* a = attr_of(op, n, Kind::DenseArray);
    return a && a->dtype == DType::I64 ? a : nullptr;
  }
  static const Attribute* i64_int(const Operation& op, std::string_view n) {
    const Attribute* a = attr_of(op, n, Kind::Integer);
    return a && a->dtype == DType::I64 ? a : nullptr;
  }
  static bool is_ident_value(const std::string& s) { return is_bare_identifier(s); }
  static const Attribute* enum_of(const Operation& op, std::string_view n, std::string_view kind) {
    const Attribute* a = attr_of(op, n, Kind::Enum);
    return a && a->text == kind && is_ident_value(a->enum_value) ? a : nullptr;
  }
  static bool precision_list(const Attribute* a) {
    if (!a || a->kind != Kind::Array) return false;
    for (const auto& e : a->elements)
      if (e->kind != Kind::Enum || e->text != "precision" || !is_ident_value(e->enum_value))
        return false;
    return true;
  }
  void append_precision(const Attribute& a) {
    out += "precision = [";
    for (size_t i = 0; i < a.elements.size(); ++i) {
      if (i) out += ", ";
      out += a.elements[i]->enum_value;
    }
    out += ']';
  }
  void append_ints_attr(const Attribute& a) { append_int_list(out, a.ints); }

  // chlo's forms, as JAX prints them: `chlo.erf %x : type -> type`, `chlo.next_after %x, %y :
  // type, type -> type`, `chlo.top_k(%x, k = 3) : type -> (type, type)`.
  bool pretty_chlo(const Operation& op) {
    if (!op.regions.empty() || op.operands.empty()) return false;
    if (op.name == "chlo.top_k") {
      const Attribute* k = op.attr("k");
      if (!k || k->kind != Kind::Integer || op.operands.size() != 1 || op.num_results() != 2)
        return false;
      out += op.name + "(" + name(op.operands[0]) + ", k = " + std::to_string(k->integer) + ")";
      rest_attrs(op, {"k"});
    } else {
      if (op.num_results() != 1) return false;
      out += op.name + " ";
      value_list(op.operands);
      rest_attrs(op, {});
    }
    out += " : ";
    type_list(operand_types(op));
    out += " -> ";
    if (op.num_results() == 1) {
      append_type(out, op.result(0)->type);
    } else {
      out += '(';
      type_list(result_types(op));
      out += ')';
    }
    return true;
  }

  bool pretty(const Operation& op, int indent, bool top) {
    if (starts_with(op.name, "chlo.")) return pretty_chlo(op);
    const syntax::OpSyntax* s = syntax::find(op.name);
    if (!s) return false;
    const bool arity_ok =
        s->num_operands < 0 || op.operands.size() == static_cast<size_t>(s->num_operands);
    if (!arity_ok) return false;
    if (!op.regions.empty() && s->form != Form::Reduce && s->form != Form::While) return false;
    const size_t nres = op.num_results();
    std::string head;
    if (top && op.name == "func.return") {
      head = "return";
    } else if (top && op.name == "func.call") {
      head = "call";
    } else {
      head = op.name;
    }
    switch (s->form) {
      case Form::Elementwise:
        if (nres != 1) return false;
        out += head;
        if (!op.operands.empty()) out += ' ';
        value_list(op.operands);
        rest_attrs(op, {});
        out += " : ";
        same_type(op);
        return true;
      case Form::Functional:
        if (nres != 1) return false;
        out += head + " ";
        value_list(op.operands);
        rest_attrs(op, {});
        out += " : ";
        functional_type(op);
        return true;
      case Form::Compare: {
        const Attribute* dir = enum_of(op, "comparison_direction", "comparison_direction");
        const Attribute* ct = op.attr("compare_type");
        if (!dir || nres != 1 || !syntax::one_of(syntax::kComparisonDirections, dir->enum_value))
          return false;
        if (ct && (!enum_of(op, "compare_type", "comparison_type") ||
                   !syntax::one_of(syntax::kComparisonTypes, ct->enum_value)))
          return false;
        out += head + "  " + dir->enum_value + ", ";
        value_list(op.operands);
        if (ct) out += ",  " + ct->enum_value;
        rest_attrs(op, {"comparison_direction", "compare_type"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Constant: {
        if (nres != 1) return false;
        const Attribute* v = op.attr("value");
        if (!v) return false;
        const Type& rt = op.result(0)->type;
        if (v->kind == Kind::DenseElements) {
          if (rt.is_token ||
              rt != (v->type ? *v->type : Type::tensor(v->tensor.shape(), v->tensor.dtype())))
            return false;
        } else if (v->kind == Kind::Opaque && starts_with(v->text, "dense_resource<")) {
          std::string t;
          append_type(t, rt);
          if (v->text.size() < t.size() || v->text.substr(v->text.size() - t.size()) != t)
            return false;
        } else {
          return false;
        }
        out += head;
        rest_attrs(op, {"value"});
        out += ' ';
        append_attr(out, *v);
        return true;
      }
      case Form::Iota: {
        const Attribute* d = i64_int(op, "iota_dimension");
        if (!d || nres != 1) return false;
        out += head + " dim = " + std::to_string(d->integer);
        rest_attrs(op, {"iota_dimension"});
        out += " : ";
        append_type(out, op.result(0)->type);
        return true;
      }
      case Form::Slice: {
        const Attribute* st = i64_array(op, "start_indices");
        const Attribute* li = i64_array(op, "limit_indices");
        const Attribute* sd = i64_array(op, "strides");
        if (!st || !li || !sd || nres != 1 || st->ints.size() != li->ints.size() ||
            st->ints.size() != sd->ints.size())
          return false;
        out += head + " ";
        value_list(op.operands);
        out += " [";
        for (size_t i = 0; i < st->ints.size(); ++i) {
          if (i) out += ", ";
          out += std::to_string(st->ints[i]) + ":" + std::to_string(li->ints[i]);
          if (sd->ints[i] != 1) out += ":" + std::to_string(sd->ints[i]);
        }
        out += ']';
        rest_attrs(op, {"start_indices", "limit_indices", "strides"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::DynamicSlice: {
        const Attribute* sz = i64_array(op, "slice_sizes");
        if (!sz || nres != 1 || op.operands.empty()) return false;
        out += head + " ";
        value_list(op.operands);
        out += ", sizes = ";
        append_ints_attr(*sz);
        rest_attrs(op, {"slice_sizes"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::DimsList: {
        const Attribute* d = i64_array(op, s->attr);
        if (!d || nres != 1) return false;
        out += head + " ";
        value_list(op.operands);
        out += ", " + std::string(s->keyword) + " = ";
        append_ints_attr(*d);
        rest_attrs(op, {s->attr});
        out += " : ";
        if (s->same_type) {
          same_type(op);
        } else {
          functional_type(op);
        }
        return true;
      }
      case Form::DimValue: {
        const Attribute* d = i64_int(op, s->attr);
        if (!d || nres != 1) return false;
        out += head + " ";
        value_list(op.operands);
        out += ", dim = " + std::to_string(d->integer);
        rest_attrs(op, {s->attr});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Concatenate: {
        const Attribute* d = i64_int(op, "dimension");
        if (!d || nres != 1 || op.operands.empty()) return false;
        out += head + " ";
        value_list(op.operands);
        out += ", dim = " + std::to_string(d->integer);
        rest_attrs(op, {"dimension"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Pad: {
        const Attribute* lo = i64_array(op, "edge_padding_low");
        const Attribute* hi = i64_array(op, "edge_padding_high");
        const Attribute* in = i64_array(op, "interior_padding");
        if (!lo || !hi || !in || nres != 1) return false;
        out += head + " ";
        value_list(op.operands);
        out += ", low = ";
        append_ints_attr(*lo);
        out += ", high = ";
        append_ints_attr(*hi);
        out += ", interior = ";
        append_ints_attr(*in);
        rest_attrs(op, {"edge_padding_low", "edge_padding_high", "interior_padding"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::DotGeneral: {
        const Attribute* dn = attr_of(op, "dot_dimension_numbers", Kind::Struct);
        if (!dn || dn->text != "stablehlo.dot" || nres != 1) return false;
        static constexpr std::string_view kOrder[] = {
            "lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
            "rhs_contracting_dimensions"};
        std::vector<int64_t> dims[4];
        size_t next = 0;
        for (const auto& f : dn->fields) {
          while (next < 4 && kOrder[next] != f.name) ++next;
          if (next == 4 || !is_int_list(*f.value) || f.value->elements.empty()) return false;
          dims[next++] = list_values(*f.value);
        }
        const Attribute* prec = op.attr("precision_config");
        if (prec && !precision_list(prec)) return false;
        const Attribute* algo = op.attr("algorithm");
        std::string algo_text;
        if (algo) {
          if (algo->kind == Kind::Struct && algo->text == "stablehlo.dot_algorithm") {
            append_attr(algo_text, *algo);
            algo_text.erase(0, std::string_view("#stablehlo.dot_algorithm").size());
          } else if (algo->kind == Kind::Opaque &&
                     starts_with(algo->text, "#stablehlo.dot_algorithm<")) {
            algo_text = algo->text.substr(std::string_view("#stablehlo.dot_algorithm").size());
          } else {
            return false;
          }
        }
        out += head + " ";
        value_list(op.operands);
        out += ", ";
        if (!dims[0].empty() || !dims[1].empty()) {
          out += "batching_dims = ";
          append_int_list(out, dims[0]);
          out += " x ";
          append_int_list(out, dims[1]);
          out += ", ";
        }
        out += "contracting_dims = ";
        append_int_list(out, dims[2]);
        out += " x ";
        append_int_list(out, dims[3]);
        if (prec) {
          out += ", ";
          append_precision(*prec);
        }
        if (algo) out += ", algorithm = " + algo_text;
        rest_attrs(op, {"dot_dimension_numbers", "precision_config", "algorithm"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Dot: {
        const Attribute* prec = op.attr("precision_config");
        if ((prec && !precision_list(prec)) || nres != 1) return false;
        out += head + " ";
        value_list(op.operands);
        if (prec) {
          out += ", ";
          append_precision(*prec);
        }
        rest_attrs(op, {"precision_config"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Convolution: {
        const Attribute* dn = attr_of(op, "dimension_numbers", Kind::Struct);
        std::string dims;
        if (!dn || dn->text != "stablehlo.conv" || !conv_compact(*dn, &dims) || nres != 1)
          return false;
        const Attribute* stride = op.attr("window_strides");
        const Attribute* pad = op.attr("padding");
        const Attribute* lhs = op.attr("lhs_dilation");
        const Attribute* rhs = op.attr("rhs_dilation");
        const Attribute* rev = op.attr("window_reversal");
        if ((stride && !i64_array(op, "window_strides")) ||
            (lhs && !i64_array(op, "lhs_dilation")) || (rhs && !i64_array(op, "rhs_dilation")))
          return false;
        if (pad && (pad->kind != Kind::DenseElements || pad->tensor.dtype() != DType::I64 ||
                    pad->tensor.rank() != 2 || pad->tensor.shape()[1] != 2))
          return false;
        if (rev && (rev->kind != Kind::DenseArray || rev->dtype != DType::Bool)) return false;
        out += head + "(";
        value_list(op.operands);
        out += ") dim_numbers = " + dims + ", window = {";
        bool first = true;
        auto sep = [&] {
          if (!first) out += ", ";
          first = false;
        };
        if (stride) {
          sep();
          out += "stride = ";
          append_ints_attr(*stride);
        }
        if (pad) {
          sep();
          out += "pad = [";
          const int64_t* p = pad->tensor.data_as<int64_t>();
          for (int64_t i = 0; i < pad->tensor.shape()[0]; ++i) {
            if (i) out += ", ";
            out += "[" + std::to_string(p[2 * i]) + ", " + std::to_string(p[2 * i + 1]) + "]";
          }
          out += ']';
        }
        if (lhs) {
          sep();
          out += "lhs_dilate = ";
          append_ints_attr(*lhs);
        }
        if (rhs) {
          sep();
          out += "rhs_dilate = ";
          append_ints_attr(*rhs);
        }
        if (rev) {
          sep();
          out += "reverse = [";
          for (size_t i = 0; i < rev->ints.size(); ++i) {
            if (i) out += ", ";
            out += rev->ints[i] ? "true" : "false";
          }
          out += ']';
        }
        out += '}';
        rest_attrs(op, {"dimension_numbers", "window_strides", "padding", "lhs_dilation",
                        "rhs_dilation", "window_reversal"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Reduce:
        return pretty_reduce(op, indent, head);
      case Form::While:
        return pretty_while(op, indent, head);
      case Form::Select: {
        if (nres != 1) return false;
        out += head + " ";
        value_list(op.operands);
        rest_attrs(op, {});
        out += " : ";
        const Type& r = op.result(0)->type;
        if (op.operands[1]->type == r && op.operands[2]->type == r) {
          append_type(out, op.operands[0]->type);
          out += ", ";
          append_type(out, r);
        } else {
          functional_type(op);
        }
        return true;
      }
      case Form::CustomCall:
      case Form::Call: {
        const bool cc = s->form == Form::CustomCall;
        const Attribute* t = cc ? attr_of(op, "call_target_name", Kind::String)
                                : attr_of(op, "callee", Kind::Symbol);
        if (!t) return false;
        out += head + " ";
        append_symbol(out, t->text);
        out += '(';
        value_list(op.operands);
        out += ')';
        rest_attrs(op, {cc ? "call_target_name" : "callee"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Return:
        if (nres != 0) return false;
        out += head;
        if (!op.operands.empty()) out += ' ';
        value_list(op.operands);
        rest_attrs(op, {});
        if (!op.operands.empty()) {
          out += " : ";
          type_list(operand_types(op));
        }
        return true;
      case Form::OptimizationBarrier: {
        if (operand_types(op) != result_types(op)) return false;
        out += head;
        rest_attrs(op, {});
        if (op.operands.empty()) {
          out += " ()";
          return true;
        }
        out += ' ';
        value_list(op.operands);
        out += " : ";
        type_list(operand_types(op));
        return true;
      }
      case Form::ReducePrecision: {
        const Attribute* e = attr_of(op, "exponent_bits", Kind::Integer);
        const Attribute* m = attr_of(op, "mantissa_bits", Kind::Integer);
        if (!e || !m || e->dtype != DType::I32 || m->dtype != DType::I32 || e->integer < 0 ||
            m->integer < 0 || e->integer > INT32_MAX || m->integer > INT32_MAX || nres != 1)
          return false;
        out += head + " ";
        value_list(op.operands);
        out += ", format = e" + std::to_string(e->integer) + "m" + std::to_string(m->integer);
        rest_attrs(op, {"exponent_bits", "mantissa_bits"});
        out += " : ";
        same_type(op);
        return true;
      }
      case Form::EnumKeyword: {
        const Attribute* e = enum_of(op, s->attr, s->enum_name);
        if (!e) return false;
        out += head + " ";
        value_list(op.operands);
        out += ", " + std::string(s->keyword) + " =  " + e->enum_value;
        rest_attrs(op, {s->attr});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Fft: {
        const Attribute* t = enum_of(op, "fft_type", "fft_type");
        const Attribute* l = i64_array(op, "fft_length");
        if (!t || !l || nres != 1) return false;
        out += head + " ";
        value_list(op.operands);
        out += ", type =  " + t->enum_value + ", length = ";
        append_ints_attr(*l);
        rest_attrs(op, {"fft_type", "fft_length"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Einsum: {
        const Attribute* c = attr_of(op, "einsum_config", Kind::String);
        if (!c || nres != 1) return false;
        out += head + " ";
        value_list(op.operands);
        out += ", config = " + quote_string(c->text);
        rest_attrs(op, {"einsum_config"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Cholesky: {
        const Attribute* l = op.attr("lower");
        if ((l && l->kind != Kind::Bool) || nres != 1) return false;
        out += head + " ";
        value_list(op.operands);
        if (l) out += std::string(", lower = ") + (l->boolean ? "true" : "false");
        rest_attrs(op, {"lower"});
        out += " : ";
        same_type(op);
        return true;
      }
      case Form::Trace: {
        const Attribute* t = attr_of(op, "tag", Kind::String);
        if (!t || nres != 0) return false;
        out += head + " ";
        value_list(op.operands);
        out += ", " + quote_string(t->text);
        rest_attrs(op, {"tag"});
        out += " : ";
        append_type(out, op.operands[0]->type);
        return true;
      }
      case Form::TypeOnly:
        if (nres != 1) return false;
        out += head;
        rest_attrs(op, {});
        out += " : ";
        append_type(out, op.result(0)->type);
        return true;
      case Form::Composite: {
        const Attribute* n = attr_of(op, "name", Kind::String);
        if (!n) return false;
        out += head + " " + quote_string(n->text);
        if (!op.operands.empty()) out += ' ';
        value_list(op.operands);
        rest_attrs(op, {"name"});
        out += " : ";
        functional_type(op);
        return true;
      }
      case Form::Generic:  // syntax::find never gives it
        break;
    }
    return false;
  }

  // The one-line `reduce(...) applies <op>` form: what the parser builds from it, exactly.
  static bool reduce_is_compact(const Operation& op) {
    if (op.operands.size() != 2 || op.regions.size() != 1) return false;
    const Region& r = *op.regions[0];
    if (r.blocks.size() != 1) return false;
    const Block& b = *r.blocks[0];
    if (b.arguments.size() != 2 || b.ops.size() != 2 || op.operands[0]->type.is_token) return false;
    const Type scalar = Type::tensor({}, op.operands[0]->type.dtype);
    const Operation& inner = *b.ops[0];
    const Operation& ret = *b.ops[1];
    if (!syntax::is_compact_reducer(inner.name) || inner.operands.size() != 2 ||
        inner.operands[0] != b.arguments[0].get() || inner.operands[1] != b.arguments[1].get() ||
        inner.num_results() != 1 || !inner.attributes.empty() || !inner.regions.empty() ||
        inner.result(0)->type != scalar)
      return false;
    if (ret.name != "stablehlo.return" || ret.operands.size() != 1 ||
        ret.operands[0] != inner.result(0) || ret.num_results() != 0 || !ret.attributes.empty() ||
        !ret.regions.empty())
      return false;
    for (const auto& a : b.arguments)
      if (a->type != scalar || a->loc != op.loc) return false;
    return inner.loc == op.loc && ret.loc == op.loc;
  }

  bool pretty_reduce(const Operation& op, int indent, const std::string& head) {
    const Attribute* dims = i64_array(op, "dimensions");
    const size_t n = op.operands.size() / 2;
    if (!dims || op.operands.size() % 2 || n == 0 || op.regions.size() != 1 ||
        op.regions[0]->blocks.empty())
      return false;
    const Block& body = *op.regions[0]->blocks[0];
    const bool compact = reduce_is_compact(op);
    if (!compact && body.arguments.size() != 2 * n) return false;
    out += head;
    for (size_t i = 0; i < n; ++i) {
      if (i) out += ", ";
      out += "(" + name(op.operands[i]) + " init: " + name(op.operands[i + n]) + ")";
    }
    if (compact) out += " applies " + body.ops[0]->name;
    out += " across dimensions = ";
    append_ints_attr(*dims);
    rest_attrs(op, {"dimensions"});
    out += " : ";
    functional_type(op);
    if (compact) return true;
    out += '\n';
    out.append(static_cast<size_t>(indent), ' ');
    out += " reducer";
    auto arg = [&](const Value* v) {
      out += name(v) + ": ";
      append_type(out, v->type);
      if (!v->loc.empty()) out += " " + v->loc;
    };
    for (size_t i = 0; i < n; ++i) {
      out += '(';
      arg(body.arguments[i].get());
      out += ", ";
      arg(body.arguments[i + n].get());
      out += ") ";
    }
    out += ' ';
    region(*op.regions[0], indent, false);
    return true;
  }

  bool pretty_while(const Operation& op, int indent, const std::string& head) {
    if (op.regions.size() != 2) return false;
    const std::vector<Type> types = operand_types(op);
    if (types != result_types(op)) return false;
    for (const auto& r : op.regions) {
      if (r->blocks.empty()) return false;
      const Block& b = *r->blocks[0];
      if (b.arguments.size() != types.size()) return false;
      for (size_t i = 0; i < types.size(); ++i)
        if (b.arguments[i]->type != types[i] || !b.arguments[i]->loc.empty()) return false;
    }
    const Block& body = *op.regions[1]->blocks[0];
    out += head + "(";
    for (size_t i = 0; i < op.operands.size(); ++i) {
      if (i) out += ", ";
      out += name(body.arguments[i].get()) + " = " + name(op.operands[i]);
    }
    out += ')';
    if (!op.operands.empty()) {
      out += " : ";
      type_list(types);
    }
    if (!op.attributes.empty()) {
      out += " attributes {";
      append_dict_body(out, op.attributes);
      out += '}';
    }
    out += '\n';
    out.append(static_cast<size_t>(indent), ' ');
    out += " cond ";
    region(*op.regions[0], indent, false);
    out += " do ";
    region(*op.regions[1], indent, false);
    return true;
  }

  void generic(const Operation& op, int indent) {
    out += quote_string(op.name);
    out += '(';
    value_list(op.operands);
    out += ')';
    const bool props_dialect = starts_with(op.name, "stablehlo.") || starts_with(op.name, "func.");
    std::vector<NamedAttribute> props, discardable;
    for (const auto& a : op.attributes) {
      if (props_dialect && a.name.find('.') == std::string::npos) {
        props.push_back(a);
      } else {
        discardable.push_back(a);
      }
    }
    if (!props.empty()) {
      out += " <{";
      append_dict_body(out, props);
      out += "}>";
    }
    if (!op.regions.empty()) {
      out += " (";
      for (size_t i = 0; i < op.regions.size(); ++i) {
        if (i) out += ", ";
        region(*op.regions[i], indent, true);
      }
      out += ')';
    }
    if (!discardable.empty()) {
      out += " {";
      append_dict_body(out, discardable);
      out += '}';
    }
    out += " : ";
    functional_type(op);
  }

  void operation(const Operation& op, int indent, bool top) {
    out.append(static_cast<size_t>(indent), ' ');
    if (op.num_results() > 0) {
      auto it = groups_.find(&op);
      if (it == groups_.end()) {
        out += "%<<UNKNOWN SSA VALUE>>";
      } else {
        for (size_t i = 0; i < it->second.size(); ++i) {
          if (i) out += ", ";
          out += it->second[i].first;
          if (it->second[i].second > 1) out += ":" + std::to_string(it->second[i].second);
        }
      }
      out += " = ";
    }
    const size_t mark = out.size();
    if (!pretty(op, indent, top)) {
      out.resize(mark);
      generic(op, indent);
    }
    if (!op.loc.empty()) out += " " + op.loc;
    out += '\n';
  }

  void function(const Function& f) {
    names_.clear();
    groups_.clear();
    NameScope root;
    number_region(f.body, NameState{}, &root);
    out += "  func.func ";
    if (!f.visibility.empty()) out += f.visibility + " ";
    append_symbol(out, f.name);
    out += '(';
    const bool has_body =
        !f.body.blocks.empty() && (f.body.blocks.size() > 1 || !f.body.blocks[0]->ops.empty());
    if (!f.body.blocks.empty()) {
      const Block& entry = *f.body.blocks[0];
      for (size_t i = 0; i < entry.arguments.size(); ++i) {
        if (i) out += ", ";
        const Value* v = entry.arguments[i].get();
        if (has_body) out += name(v) + ": ";
        append_type(out, v->type);
        if (i < f.arg_attrs.size() && !f.arg_attrs[i].empty()) {
          out += " {";
          append_dict_body(out, f.arg_attrs[i]);
          out += '}';
        }
        if (!v->loc.empty()) out += " " + v->loc;
      }
    }
    out += ')';
    if (!f.result_types.empty()) {
      bool any_attrs = false;
      for (const auto& ra : f.result_attrs) any_attrs = any_attrs || !ra.empty();
      out += " -> ";
      const bool parens = f.result_types.size() > 1 || any_attrs;
      if (parens) out += '(';
      for (size_t i = 0; i < f.result_types.size(); ++i) {
        if (i) out += ", ";
        append_type(out, f.result_types[i]);
        if (i < f.result_attrs.size() && !f.result_attrs[i].empty()) {
          out += " {";
          append_dict_body(out, f.result_attrs[i]);
          out += '}';
        }
      }
      if (parens) out += ')';
    }
    if (!f.attributes.empty()) {
      out += " attributes {";
      append_dict_body(out, f.attributes);
      out += '}';
    }
    if (has_body) {
      out += " {\n";
      const Region& r = f.body;
      for (size_t bi = 0; bi < r.blocks.size(); ++bi) {
        const Block& b = *r.blocks[bi];
        if (bi > 0) {
          out += "  ^bb" + std::to_string(bi);
          if (!b.arguments.empty()) {
            out += '(';
            block_args(b);
            out += ')';
          }
          out += ":\n";
        }
        for (const auto& op : b.ops) operation(*op, 4, true);
      }
      out += "  }";
    }
    if (!f.loc.empty()) out += " " + f.loc;
    out += '\n';
  }

  std::unordered_map<const Value*, std::string> names_;
  // The result groups of each op: `%0:2` is {"%0", 2}; `%a, %b` is {"%a", 1}, {"%b", 1}.
  std::unordered_map<const Operation*, std::vector<std::pair<std::string, size_t>>> groups_;
};

}  // namespace

std::string print_type(const Type& type) {
  std::string s;
  append_type(s, type);
  return s;
}

std::string print_attribute(const Attribute& attr) {
  std::string s;
  append_attr(s, attr);
  return s;
}

std::string print_module(const Module& module) {
  ModulePrinter p;
  p.module(module);
  return std::move(p.out);
}

}  // namespace cujax::ir
