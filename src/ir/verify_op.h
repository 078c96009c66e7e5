// What the verifier's type rules share: OpCheck, which checks one op and names it in every
// failure, and the helpers for element type classes, dimension lists and windows. The rules
// themselves are in verify_<family>.cpp, one file per op family of op_table.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/ir/ir.h"
#include "cujax/ir/verifier.h"
#include "ir/op_table.h"

namespace cujax::ir::rules {

using Dims = std::vector<int64_t>;

inline std::string list_str(const Dims& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

inline std::string types_str(const std::vector<Type>& ts) {
  std::string s = "(";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s + ")";
}

inline Type scalar(DType t) {
  return Type::tensor({}, t);
}

using ops::Kinds;

inline bool dtype_in(DType t, Kinds k) {
  switch (k) {
    case Kinds::Any:
      return true;
    case Kinds::Integer:
      return is_integer(t);
    case Kinds::IntOrBool:
      return is_integer(t) || t == DType::Bool;
    case Kinds::IntOrFloat:
      return is_integer(t) || is_float(t);
    case Kinds::SignedOrFloat:
      return is_signed_int(t) || is_float(t);
    case Kinds::Float:
      return is_float(t);
    case Kinds::FloatOrComplex:
      return is_float(t) || is_complex(t);
    case Kinds::IntFloatOrComplex:
      return is_integer(t) || is_float(t) || is_complex(t);
    case Kinds::SignedFloatOrComplex:
      return is_signed_int(t) || is_float(t) || is_complex(t);
  }
  return false;
}

inline std::string_view kinds_name(Kinds k) {
  switch (k) {
    case Kinds::Any:
      return "any";
    case Kinds::Integer:
      return "integer";
    case Kinds::IntOrBool:
      return "integer or boolean";
    case Kinds::IntOrFloat:
      return "integer or floating-point";
    case Kinds::SignedOrFloat:
      return "signed integer or floating-point";
    case Kinds::Float:
      return "floating-point";
    case Kinds::FloatOrComplex:
      return "floating-point or complex";
    case Kinds::IntFloatOrComplex:
      return "integer, floating-point or complex";
    case Kinds::SignedFloatOrComplex:
      return "signed integer, floating-point or complex";
  }
  return "";
}

// `from` can be widened to `to` without changing its kind (is_promotable in the spec).
inline bool promotable(DType from, DType to) {
  if (from == to) return true;
  if (is_float(from) && is_float(to)) return bit_width(from) <= bit_width(to);
  if (is_signed_int(from) && is_signed_int(to)) return bit_width(from) <= bit_width(to);
  if (is_unsigned_int(from) && is_unsigned_int(to)) return bit_width(from) <= bit_width(to);
  return false;
}

// Sizes of the windows an op slides over an operand (reduce_window, convolution,
// select_and_scatter): (padded - dilated window) / stride + 1, or 0 for empty windows.
inline int64_t num_windows(int64_t size, int64_t base_dilation, int64_t pad_lo, int64_t pad_hi,
                           int64_t window, int64_t window_dilation, int64_t stride) {
  const int64_t dilated = size == 0 ? 0 : (size - 1) * base_dilation + 1;
  const int64_t padded = pad_lo + dilated + pad_hi;
  const int64_t dilated_window = window == 0 ? 0 : (window - 1) * window_dilation + 1;
  if (padded <= 0 || dilated_window > padded) return 0;
  return (padded - dilated_window) / stride + 1;
}

// Checks one op. Every failure names the op (and its line:column when parsed).
class OpCheck {
 public:
  OpCheck(const Operation& op, const Module& module, const Function& function)
      : op_(op), module_(module), function_(function) {}

  const Operation& op() const { return op_; }
  const Module& module() const { return module_; }
  const Function& function() const { return function_; }

  [[noreturn]] void fail(const std::string& message) const {
    throw VerifyError(op_.where() + ": " + message);
  }

  size_t num_operands() const { return op_.operands.size(); }
  size_t num_results() const { return op_.results.size(); }
  const Type& operand(size_t i) const {
    return operand_view_.empty() ? op_.operands.at(i)->type : operand_view_.at(i);
  }
  const Type& result(size_t i) const {
    return result_view_.empty() ? op_.results.at(i)->type : result_view_.at(i);
  }
  // The op checked on other types than its own: each quantized operand and result replaced by
  // `as(type)` (its expressed type for the ops that compute on quantized values).
  template <typename F>
  void view_quantized_as(F as) {
    for (const Value* v : op_.operands)
      operand_view_.push_back(v->type.is_quantized() ? as(v->type) : v->type);
    for (const auto& r : op_.results)
      result_view_.push_back(r->type.is_quantized() ? as(r->type) : r->type);
  }
  std::vector<Type> operand_types(size_t begin = 0, size_t end = SIZE_MAX) const {
    std::vector<Type> ts;
    for (size_t i = begin; i < std::min(end, num_operands()); ++i) ts.push_back(operand(i));
    return ts;
  }
  std::vector<Type> result_types() const {
    std::vector<Type> ts;
    for (size_t i = 0; i < num_results(); ++i) ts.push_back(result(i));
    return ts;
  }

  // ---- counts and types ----

  void operands_are(size_t n) const {
    if (num_operands() != n)
      fail("expects " + std::to_string(n) + " operand" + (n == 1 ? "" : "s") + ", got " +
           std::to_string(num_operands()));
  }
  void operands_at_least(size_t n) const {
    if (num_operands() < n)
      fail("expects at least " + std::to_string(n) + " operand" + (n == 1 ? "" : "s") + ", got " +
           std::to_string(num_operands()));
  }
  void results_are(size_t n) const {
    if (num_results() != n)
      fail("expects " + std::to_string(n) + " result" + (n == 1 ? "" : "s") + ", got " +
           std::to_string(num_results()));
  }
  // No operand or result is a token.
  void all_tensors() const {
    for (size_t i = 0; i < num_operands(); ++i) tensor_operand(i);
    for (size_t i = 0; i < num_results(); ++i)
      if (result(i).is_token)
        fail("result " + std::to_string(i) + " is a token, expected a tensor");
  }
  void tensor_operand(size_t i) const {
    if (operand(i).is_token)
      fail("operand " + std::to_string(i) + " is a token, expected a tensor");
  }
  void operand_kind(size_t i, Kinds k) const {
    const Type& t = operand(i);
    if (t.is_token || !dtype_in(t.dtype, k))
      fail("operand " + std::to_string(i) + " has type " + t.str() + ", expected a tensor of " +
           std::string(kinds_name(k)) + " type");
  }
  void result_kind(size_t i, Kinds k) const {
    const Type& t = result(i);
    if (t.is_token || !dtype_in(t.dtype, k))
      fail("result " + std::to_string(i) + " has type " + t.str() + ", expected a tensor of " +
           std::string(kinds_name(k)) + " type");
  }
  void operand_is(size_t i, const Type& expected, const std::string& why) const {
    if (operand(i) != expected)
      fail("operand " + std::to_string(i) + " has type " + operand(i).str() + ", expected " +
           expected.str() + " (" + why + ")");
  }
  void result_is(size_t i, const Type& expected, const std::string& why) const {
    if (result(i) != expected)
      fail("result " + std::to_string(i) + " has type " + result(i).str() + ", expected " +
           expected.str() + " (" + why + ")");
  }
  void operand_rank(size_t i, int64_t rank, const std::string& why) const {
    if (operand(i).rank() != rank)
      fail("operand " + std::to_string(i) + " has type " + operand(i).str() + ", expected rank " +
           std::to_string(rank) + " (" + why + ")");
  }
  void operand_dtype(size_t i, DType dtype, const std::string& why) const {
    if (operand(i).dtype != dtype)
      fail("operand " + std::to_string(i) + " has type " + operand(i).str() +
           ", expected element type " + std::string(mlir_name(dtype)) + " (" + why + ")");
  }

  // ---- attributes ----

  const Attribute* attr(std::string_view name) const { return op_.attr(name); }
  const Attribute& required(std::string_view name) const {
    const Attribute* a = op_.attr(name);
    if (!a) fail("missing attribute '" + std::string(name) + "'");
    return *a;
  }
  Dims ints(std::string_view name) const { return ints_of(required(name), name); }
  Dims ints_or(std::string_view name, Dims fallback) const {
    const Attribute* a = op_.attr(name);
    return a ? ints_of(*a, name) : fallback;
  }
  int64_t integer(std::string_view name) const { return integer_of(required(name), name); }
  int64_t integer_or(std::string_view name, int64_t fallback) const {
    const Attribute* a = op_.attr(name);
    return a ? integer_of(*a, name) : fallback;
  }
  // An enum attribute's value, checked against the allowed ones; nullopt when absent.
  std::optional<std::string> enum_value(std::string_view name,
                                        std::initializer_list<std::string_view> allowed,
                                        bool is_required) const {
    const Attribute* a = op_.attr(name);
    if (!a) {
      if (is_required) fail("missing attribute '" + std::string(name) + "'");
      return std::nullopt;
    }
    std::string v;
    if (a->kind == Attribute::Kind::Enum)
      v = a->enum_value;
    else if (a->kind == Attribute::Kind::String)
      v = a->text;
    else
      fail("attribute '" + std::string(name) + "' must be an enum");
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
      std::string list;
      for (auto s : allowed) list += (list.empty() ? "" : ", ") + std::string(s);
      fail("attribute '" + std::string(name) + "' is " + v + ", expected one of " + list);
    }
    return v;
  }
  // A #stablehlo.<struct_name><...> attribute (or a dictionary with the same fields).
  const Attribute& struct_attr(std::string_view name, std::string_view struct_name) const {
    const Attribute& a = required(name);
    if (a.kind != Attribute::Kind::Struct && a.kind != Attribute::Kind::Dictionary)
      fail("attribute '" + std::string(name) + "' must be #" + std::string(struct_name) + "<...>");
    return a;
  }
  Dims field_ints(const Attribute& s, std::string_view field) const {
    const Attribute* f = s.field(field);
    if (!f) return {};  // MLIR leaves empty lists out
    return ints_of(*f, field);
  }
  int64_t field_int(const Attribute& s, std::string_view field,
                    std::optional<int64_t> fallback) const {
    const Attribute* f = s.field(field);
    if (!f) {
      if (!fallback) fail("missing field '" + std::string(field) + "' in " + s.text);
      return *fallback;
    }
    return integer_of(*f, field);
  }
  // An N x 2 padding attribute, flattened row-major; zeros when absent.
  Dims padding(std::string_view name, int64_t rows) const {
    const Attribute* a = op_.attr(name);
    if (!a) return Dims(static_cast<size_t>(2 * rows), 0);
    Dims p = ints_of(*a, name);
    bool ok = static_cast<int64_t>(p.size()) == 2 * rows;
    if (a->kind == Attribute::Kind::DenseElements && rows > 0)
      ok = ok && a->tensor.shape() == Shape{rows, 2};
    if (!ok)
      fail("attribute '" + std::string(name) + "' has " + std::to_string(p.size()) +
           " values, expected " + std::to_string(rows) + "x2");
    return p;
  }

  // ---- dimension lists ----

  void size_is(const std::string& what, const Dims& dims, int64_t n, const std::string& why) const {
    if (static_cast<int64_t>(dims.size()) != n)
      fail(what + " has " + std::to_string(dims.size()) + " elements, expected " +
           std::to_string(n) + " (" + why + ")");
  }
  void in_range(const std::string& what, const Dims& dims, int64_t lo, int64_t hi) const {
    for (int64_t d : dims)
      if (d < lo || d >= hi)
        fail(what + " = " + list_str(dims) + " has " + std::to_string(d) + ", out of range [" +
             std::to_string(lo) + ", " + std::to_string(hi) + ")");
  }
  void unique(const std::string& what, const Dims& dims) const {
    std::unordered_set<int64_t> seen;
    for (int64_t d : dims)
      if (!seen.insert(d).second)
        fail(what + " = " + list_str(dims) + " repeats " + std::to_string(d));
  }
  void sorted(const std::string& what, const Dims& dims) const {
    if (!std::is_sorted(dims.begin(), dims.end()))
      fail(what + " = " + list_str(dims) + " is not sorted");
  }
  void all_positive(const std::string& what, const Dims& dims) const {
    for (int64_t d : dims)
      if (d <= 0)
        fail(what + " = " + list_str(dims) + " has " + std::to_string(d) + ", expected > 0");
  }

  // ---- regions ----

  // The single block of region `index`, named `name` in messages.
  const Block& region_block(size_t index, const std::string& name) const {
    if (op_.regions.size() <= index)
      fail("expects a region '" + name + "' (region " + std::to_string(index) + "), got " +
           std::to_string(op_.regions.size()) + " region" + (op_.regions.size() == 1 ? "" : "s"));
    const Region& r = *op_.regions[index];
    if (r.blocks.size() != 1)
      fail("region '" + name + "' has " + std::to_string(r.blocks.size()) + " blocks, expected 1");
    return *r.blocks.front();
  }
  // Region `index` takes `args` and returns `results` through stablehlo.return.
  void region_signature(size_t index, const std::string& name, const std::vector<Type>& args,
                        const std::vector<Type>& results) const {
    const Block& b = region_block(index, name);
    std::vector<Type> got;
    for (const auto& a : b.arguments) got.push_back(a->type);
    if (got.size() != args.size())
      fail("region '" + name + "' takes " + std::to_string(got.size()) + " argument" +
           (got.size() == 1 ? "" : "s") + " " + types_str(got) + ", expected " +
           std::to_string(args.size()) + " " + types_str(args));
    for (size_t i = 0; i < args.size(); ++i)
      if (got[i] != args[i])
        fail("region '" + name + "' argument " + std::to_string(i) + " has type " + got[i].str() +
             ", expected " + args[i].str());
    const Operation* term = b.terminator();
    if (!term || term->name != "stablehlo.return")
      fail("region '" + name + "' must end with stablehlo.return, found " +
           (term ? term->where() : std::string("an empty block")));
    std::vector<Type> returned;
    for (const Value* v : term->operands)
      if (v) returned.push_back(v->type);
    if (returned != results)
      fail("region '" + name + "' returns " + types_str(returned) + " at " + term->where() +
           ", expected " + types_str(results));
  }
  // Types the region's stablehlo.return gives (for ops whose results follow the region).
  std::vector<Type> region_returns(size_t index, const std::string& name) const {
    const Block& b = region_block(index, name);
    const Operation* term = b.terminator();
    if (!term || term->name != "stablehlo.return")
      fail("region '" + name + "' must end with stablehlo.return, found " +
           (term ? term->where() : std::string("an empty block")));
    std::vector<Type> returned;
    for (const Value* v : term->operands)
      if (v) returned.push_back(v->type);
    return returned;
  }

 private:
  Dims ints_of(const Attribute& a, std::string_view name) const {
    try {
      return as_ints(a);
    } catch (const Error&) {
      fail("attribute '" + std::string(name) + "' must be a list of integers");
    }
  }
  int64_t integer_of(const Attribute& a, std::string_view name) const {
    if (a.kind == Attribute::Kind::Integer) return a.integer;
    Dims v = ints_of(a, name);
    if (v.size() != 1) fail("attribute '" + std::string(name) + "' must be an integer");
    return v[0];
  }

  const Operation& op_;
  const Module& module_;
  const Function& function_;
  std::vector<Type> operand_view_;  // empty: the op's own types
  std::vector<Type> result_view_;
};

// The body of reduce-like ops: (tensor<E0>, ..., tensor<E0>, ...) -> (tensor<E0>, ...).
inline void reducer_signature(OpCheck& c, size_t region, const std::string& name,
                              const std::vector<DType>& acc) {
  std::vector<Type> args, results;
  for (DType t : acc) results.push_back(scalar(t));
  args = results;
  args.insert(args.end(), results.begin(), results.end());
  c.region_signature(region, name, args, results);
}

using Checker = std::function<void(OpCheck&)>;
using Checkers = std::unordered_map<std::string, Checker>;

// Each family's rules, by op name.
void add_elementwise_rules(Checkers& m);
void add_shape_rules(Checkers& m);
void add_reduction_rules(Checkers& m);
void add_contraction_rules(Checkers& m);
void add_gather_rules(Checkers& m);
void add_control_rules(Checkers& m);

}  // namespace cujax::ir::rules
