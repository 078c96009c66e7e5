// The module printer: value naming (MLIR's rules), regions, the generic op form
// (printer.cpp) and the pretty op forms of the op table (printer_ops.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cujax/ir/ir.h"
#include "ir/asm_util.h"
#include "ir/op_table.h"
#include "ir/printer_attr.h"

namespace cujax::ir::print_detail {

using namespace asm_util;
using syntax::Form;
using Kind = Attribute::Kind;

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

inline bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// "%" + name, without GCC 12's spurious -Wrestrict on `"%" + std::string`.
inline std::string pct(std::string_view n) {
  std::string s;
  s.reserve(n.size() + 1);
  s += '%';
  s += n;
  return s;
}

class ModulePrinter {
 public:
  std::string out;

  void module(const Module& m);

 private:
  static bool is_loc_alias(std::string_view a);

  // ---- naming ----

  std::string unique_name(const std::string& base, NameScope& scope, NameState& st);

  static bool is_named_constant(const Operation& op);

  void number_region(const Region& region, NameState st, const NameScope* parent);

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

  void block_args(const Block& b);

  // { ops } with the entry block's arguments printed as ^bb0(...) when `entry_args`.
  void region(const Region& r, int indent, bool entry_args);

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
  bool pretty_chlo(const Operation& op);

  bool pretty(const Operation& op, int indent, bool top);

  // The one-line `reduce(...) applies <op>` form: what the parser builds from it, exactly.
  static bool reduce_is_compact(const Operation& op);

  bool pretty_reduce(const Operation& op, int indent, const std::string& head);

  bool pretty_while(const Operation& op, int indent, const std::string& head);

  void generic(const Operation& op, int indent);

  void operation(const Operation& op, int indent, bool top);

  void function(const Function& f);

  std::unordered_map<const Value*, std::string> names_;
  // The result groups of each op: `%0:2` is {"%0", 2}; `%a, %b` is {"%a", 1}, {"%b", 1}.
  std::unordered_map<const Operation*, std::vector<std::pair<std::string, size_t>>> groups_;
};

}  // namespace cujax::ir::print_detail
