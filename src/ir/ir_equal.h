// Structural equality of modules, for tests and the fuzzer: same functions, ops, operand wiring,
// types, attributes (floats and tensors bit for bit) and locations. Value names and positions in
// the text are not compared; aliases are compared as a set (the printer moves location aliases).
#pragma once

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "cujax/ir/ir.h"
#include "cujax/ir/printer.h"

namespace cujax::ir::equal {

using Kind = Attribute::Kind;

inline bool attrs_equal(const Attribute& a, const Attribute& b, std::string* why);

inline bool named_equal(const std::vector<NamedAttribute>& a, const std::vector<NamedAttribute>& b,
                        std::string* why) {
  if (a.size() != b.size()) {
    *why = "attribute count " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name) {
      *why = "attribute name " + a[i].name + " vs " + b[i].name;
      return false;
    }
    if (!attrs_equal(*a[i].value, *b[i].value, why)) {
      *why = "attribute " + a[i].name + ": " + *why;
      return false;
    }
  }
  return true;
}

inline bool attrs_equal(const Attribute& a, const Attribute& b, std::string* why) {
  auto fail = [&](const std::string& m) {
    *why = m + " (" + print_attribute(a) + " vs " + print_attribute(b) + ")";
    return false;
  };
  if (a.kind != b.kind) return fail("kind");
  switch (a.kind) {
    case Kind::Unit:
      return true;
    case Kind::Bool:
      return a.boolean == b.boolean || fail("bool");
    case Kind::Integer:
      return (a.integer == b.integer && a.dtype == b.dtype) || fail("integer");
    case Kind::Float:
      return (std::bit_cast<uint64_t>(a.floating) == std::bit_cast<uint64_t>(b.floating) &&
              a.dtype == b.dtype) ||
             fail("float");
    case Kind::String:
    case Kind::Symbol:
    case Kind::Opaque:
      return a.text == b.text || fail("text");
    case Kind::TypeAttr:
      return a.type == b.type || fail("type");
    case Kind::Array:
      if (a.elements.size() != b.elements.size()) return fail("array size");
      for (size_t i = 0; i < a.elements.size(); ++i)
        if (!attrs_equal(*a.elements[i], *b.elements[i], why)) return false;
      return true;
    case Kind::DenseArray:
      return (a.dtype == b.dtype && a.ints == b.ints &&
              std::equal(a.floats.begin(), a.floats.end(), b.floats.begin(), b.floats.end(),
                         [](double x, double y) {
                           return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
                         })) ||
             fail("dense array");
    case Kind::DenseElements:
      return (a.tensor.dtype() == b.tensor.dtype() && a.tensor.shape() == b.tensor.shape() &&
              a.type == b.type &&
              std::memcmp(a.tensor.data(), b.tensor.data(), a.tensor.nbytes()) == 0) ||
             fail("dense elements");
    case Kind::Dictionary:
    case Kind::Struct:
      if (a.text != b.text) return fail("struct name");
      return named_equal(a.fields, b.fields, why);
    case Kind::Enum:
      return (a.text == b.text && a.enum_value == b.enum_value) || fail("enum");
  }
  return fail("unknown kind");
}

// Compares two modules; `why` says what differs.
class Comparer {
 public:
  std::string why;

  bool modules(const Module& a, const Module& b) {
    if (a.name != b.name || a.loc != b.loc) return fail("module name or loc");
    auto sa = a.aliases, sb = b.aliases;
    std::sort(sa.begin(), sa.end());
    std::sort(sb.begin(), sb.end());
    if (sa != sb) return fail("aliases");
    if (!named_equal(a.attributes, b.attributes, &why)) return false;
    if (a.functions.size() != b.functions.size()) return fail("function count");
    for (size_t i = 0; i < a.functions.size(); ++i)
      if (!function(*a.functions[i], *b.functions[i])) return false;
    return true;
  }

 private:
  bool fail(const std::string& m) {
    why = m;
    return false;
  }

  bool attr_lists(const std::vector<std::vector<NamedAttribute>>& a,
                  const std::vector<std::vector<NamedAttribute>>& b) {
    if (a.size() != b.size()) return fail("attribute list count");
    for (size_t i = 0; i < a.size(); ++i)
      if (!named_equal(a[i], b[i], &why)) return false;
    return true;
  }

  bool function(const Function& a, const Function& b) {
    if (a.name != b.name || a.visibility != b.visibility || a.loc != b.loc)
      return fail("function header of @" + a.name);
    if (a.result_types != b.result_types) return fail("result types of @" + a.name);
    if (!attr_lists(a.arg_attrs, b.arg_attrs) || !attr_lists(a.result_attrs, b.result_attrs) ||
        !named_equal(a.attributes, b.attributes, &why))
      return false;
    return region(a.body, b.body);
  }

  bool region(const Region& a, const Region& b) {
    if (a.blocks.size() != b.blocks.size()) return fail("block count");
    for (size_t i = 0; i < a.blocks.size(); ++i) {
      const Block& x = *a.blocks[i];
      const Block& y = *b.blocks[i];
      if (x.arguments.size() != y.arguments.size()) return fail("block argument count");
      for (size_t j = 0; j < x.arguments.size(); ++j) {
        if (x.arguments[j]->type != y.arguments[j]->type ||
            x.arguments[j]->loc != y.arguments[j]->loc)
          return fail("block argument");
        map_[x.arguments[j].get()] = y.arguments[j].get();
      }
      if (x.ops.size() != y.ops.size()) return fail("op count");
      for (size_t j = 0; j < x.ops.size(); ++j)
        if (!op(*x.ops[j], *y.ops[j])) return false;
    }
    return true;
  }

  bool op(const Operation& a, const Operation& b) {
    const std::string w = a.name + " at " + std::to_string(a.line) + ":" + std::to_string(a.column);
    if (a.name != b.name) return fail("op name " + a.name + " vs " + b.name);
    if (a.loc != b.loc) return fail("loc of " + w);
    if (a.operands.size() != b.operands.size()) return fail("operand count of " + w);
    for (size_t i = 0; i < a.operands.size(); ++i) {
      auto it = map_.find(a.operands[i]);
      if (it == map_.end() || it->second != b.operands[i]) return fail("operand of " + w);
    }
    if (a.num_results() != b.num_results()) return fail("result count of " + w);
    for (size_t i = 0; i < a.num_results(); ++i) {
      if (a.result(i)->type != b.result(i)->type) return fail("result type of " + w);
      map_[a.result(i)] = b.result(i);
    }
    if (!named_equal(a.attributes, b.attributes, &why)) {
      why = w + ": " + why;
      return false;
    }
    if (a.regions.size() != b.regions.size()) return fail("region count of " + w);
    for (size_t i = 0; i < a.regions.size(); ++i)
      if (!region(*a.regions[i], *b.regions[i])) return false;
    return true;
  }

  std::unordered_map<const Value*, const Value*> map_;
};

}  // namespace cujax::ir::equal
