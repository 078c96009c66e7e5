// The StableHLO verifier: operand dominance, function calls and returns, region signatures, and
// the type and shape constraints (C1, C2, ...) that the StableHLO specification gives each op.
// Ops it does not know are accepted as they are; the backends report what they cannot run.
#include "cujax/ir/verifier.h"

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cujax/core/error.h"
#include "ir/op_table.h"
#include "ir/pass_through.h"
#include "ir/type_walk.h"

namespace cujax::ir {
namespace {

using Dims = std::vector<int64_t>;

std::string list_str(const Dims& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string types_str(const std::vector<Type>& ts) {
  std::string s = "(";
  for (size_t i = 0; i < ts.size(); ++i) s += (i ? ", " : "") + ts[i].str();
  return s + ")";
}

std::string value_str(const Value* v) {
  if (v->name_hint.empty()) return "";
  return " (%" + v->name_hint + ")";
}

Type scalar(DType t) {
  return Type::tensor({}, t);
}

using ops::Kinds;

bool dtype_in(DType t, Kinds k) {
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

std::string_view kinds_name(Kinds k) {
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
bool promotable(DType from, DType to) {
  if (from == to) return true;
  if (is_float(from) && is_float(to)) return bit_width(from) <= bit_width(to);
  if (is_signed_int(from) && is_signed_int(to)) return bit_width(from) <= bit_width(to);
  if (is_unsigned_int(from) && is_unsigned_int(to)) return bit_width(from) <= bit_width(to);
  return false;
}

// Sizes of the windows an op slides over an operand (reduce_window, convolution,
// select_and_scatter): (padded - dilated window) / stride + 1, or 0 for empty windows.
int64_t num_windows(int64_t size, int64_t base_dilation, int64_t pad_lo, int64_t pad_hi,
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

// ---------------------------------------------------------------------------------------------
// Element-wise ops

// Operands and result of one type, of element type class `kinds` (counts: the op table).
void elementwise_same(OpCheck& c, Kinds kinds) {
  c.tensor_operand(0);
  for (size_t i = 1; i < c.num_operands(); ++i) c.operand_is(i, c.operand(0), "same as operand 0");
  c.operand_kind(0, kinds);
  c.result_is(0, c.operand(0), "same as operand 0");
}

void check_compare(OpCheck& c) {
  c.tensor_operand(0);
  c.operand_is(1, c.operand(0), "same as operand 0");
  c.result_is(0, Type::tensor(c.operand(0).shape, DType::Bool),
              "compare gives i1 in the shape of its operands");
  c.enum_value("comparison_direction", {"EQ", "NE", "GE", "GT", "LE", "LT"}, true);
  auto type =
      c.enum_value("compare_type", {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"}, false);
  if (!type) return;
  const DType t = c.operand(0).dtype;
  bool ok = true;
  if (*type == "FLOAT") ok = is_float(t) || is_complex(t);
  if (*type == "TOTALORDER") ok = is_float(t);
  if (*type == "SIGNED") ok = is_signed_int(t);
  if (*type == "UNSIGNED") ok = is_unsigned_int(t) || t == DType::Bool;
  if (!ok) c.fail("compare_type " + *type + " does not fit operands of type " + c.operand(0).str());
}

// abs: the operand's type, or for a complex operand its part type.
void check_abs(OpCheck& c) {
  c.tensor_operand(0);
  const Type& a = c.operand(0);
  if (!is_complex(a.dtype)) {
    elementwise_same(c, Kinds::SignedOrFloat);
    return;
  }
  c.result_is(0, Type::tensor(a.shape, complex_component(a.dtype)),
              "abs of a complex operand has its part type");
}

void check_is_finite(OpCheck& c) {
  c.operand_kind(0, Kinds::Float);
  c.result_is(0, Type::tensor(c.operand(0).shape, DType::Bool),
              "is_finite gives i1 in the shape of its operand");
}

void check_select(OpCheck& c) {
  c.all_tensors();
  c.operand_kind(0, Kinds::Any);
  if (c.operand(0).dtype != DType::Bool)
    c.fail("operand 0 has type " + c.operand(0).str() +
           ", expected a tensor of i1 (the predicate)");
  c.operand_is(2, c.operand(1), "same as operand 1");
  if (c.operand(0).rank() != 0 && c.operand(0).shape != c.operand(1).shape)
    c.operand_is(0, Type::tensor(c.operand(1).shape, DType::Bool),
                 "the predicate is a scalar or has the shape of operand 1");
  c.result_is(0, c.operand(1), "same as operand 1");
}

void check_clamp(OpCheck& c) {
  c.all_tensors();
  const Type& x = c.operand(1);
  for (size_t i : {size_t{0}, size_t{2}}) {
    if (c.operand(i).rank() == 0)
      c.operand_is(i, scalar(x.dtype), "a scalar or the type of operand 1");
    else
      c.operand_is(i, x, "a scalar or the type of operand 1");
  }
  c.result_is(0, x, "same as operand 1");
}

void check_convert(OpCheck& c) {
  c.all_tensors();
  if (c.result(0).shape != c.operand(0).shape)
    c.result_is(0, Type::tensor(c.operand(0).shape, c.result(0).dtype),
                "convert keeps the shape of operand 0");
}

void check_bitcast_convert(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& out = c.result(0);
  const int wi = bit_width(in.dtype), wo = bit_width(out.dtype);
  Shape expected = in.shape;
  std::string why = "same shape for element types of the same width";
  if (wi > wo) {
    if (wi % wo) c.fail("cannot bitcast " + in.str() + " to " + out.str());
    expected.push_back(wi / wo);
    why = "a " + std::to_string(wi) + "-bit element becomes " + std::to_string(wi / wo) +
          " elements of " + std::to_string(wo) + " bits";
  } else if (wi < wo) {
    if (wo % wi || in.shape.empty() || in.shape.back() != wo / wi)
      c.fail("operand 0 has type " + in.str() + ", expected a last dimension of " +
             std::to_string(wo / wi) + " to bitcast to " + std::string(mlir_name(out.dtype)));
    expected.pop_back();
    why = std::to_string(wo / wi) + " elements of " + std::to_string(wi) + " bits become one of " +
          std::to_string(wo) + " bits";
  }
  c.result_is(0, Type::tensor(expected, out.dtype), why);
}

// uniform_quantize: a float tensor quantized, or a quantized one requantized, to the result's
// quantized type of the same shape and expressed type.
void check_uniform_quantize(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& out = c.result(0);
  if (!out.is_quantized()) c.fail("result has type " + out.str() + ", expected a quantized type");
  const DType expressed = in.is_quantized() ? in.quantized->expressed : in.dtype;
  if (!in.is_quantized() && !is_float(in.dtype))
    c.fail("operand 0 has type " + in.str() + ", expected a float or quantized tensor");
  if (in.shape != out.shape || expressed != out.quantized->expressed)
    c.fail("operand 0 has type " + in.str() + ", expected the shape of the result " + out.str() +
           " and its expressed type " + std::string(mlir_name(out.quantized->expressed)));
}

void check_uniform_dequantize(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  if (!in.is_quantized())
    c.fail("operand 0 has type " + in.str() + ", expected a quantized tensor");
  c.result_is(0, Type::tensor(in.shape, in.quantized->expressed),
              "the operand's shape and expressed type");
}

void check_reduce_precision(OpCheck& c) {
  elementwise_same(c, Kinds::Float);
  const int64_t e = c.integer("exponent_bits");
  const int64_t m = c.integer("mantissa_bits");
  if (e < 1) c.fail("exponent_bits = " + std::to_string(e) + ", expected >= 1");
  if (m < 0) c.fail("mantissa_bits = " + std::to_string(m) + ", expected >= 0");
}

// ---------------------------------------------------------------------------------------------
// Shapes and data movement

void check_constant(OpCheck& c) {
  const Attribute& v = c.required("value");
  if (v.kind != Attribute::Kind::DenseElements) return;  // kept verbatim (e.g. dense_resource)
  const Type t = v.type ? *v.type : Type::tensor(v.tensor.shape(), v.tensor.dtype());
  if (t != c.result(0))
    c.fail("attribute 'value' has type " + t.str() + ", expected " + c.result(0).str() +
           " (the result type)");
}

void check_iota(OpCheck& c) {
  c.all_tensors();
  c.result_kind(0, Kinds::IntFloatOrComplex);
  const int64_t d = c.integer("iota_dimension");
  if (d < 0 || d >= c.result(0).rank())
    c.fail("iota_dimension = " + std::to_string(d) + " is out of range for result type " +
           c.result(0).str());
}

void check_broadcast_in_dim(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& out = c.result(0);
  const Dims dims = c.ints("broadcast_dimensions");
  c.size_is("broadcast_dimensions", dims, in.rank(), "the rank of operand 0, " + in.str());
  c.in_range("broadcast_dimensions", dims, 0, out.rank());
  c.unique("broadcast_dimensions", dims);
  if (out.dtype != in.dtype)
    c.result_is(0, Type::tensor(out.shape, in.dtype), "same element type as operand 0");
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t s = in.shape[i], t = out.shape[static_cast<size_t>(dims[i])];
    if (s != 1 && s != t)
      c.fail("operand 0 dimension " + std::to_string(i) + " has size " + std::to_string(s) +
             ", expected 1 or " + std::to_string(t) + " (result dimension " +
             std::to_string(dims[i]) + " of " + out.str() + ")");
  }
}

void check_reshape(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& out = c.result(0);
  if (out.dtype != in.dtype)
    c.result_is(0, Type::tensor(out.shape, in.dtype), "same element type as operand 0");
  if (out.num_elements() != in.num_elements())
    c.fail("result 0 has type " + out.str() + " with " + std::to_string(out.num_elements()) +
           " elements, expected " + std::to_string(in.num_elements()) + " (as operand 0, " +
           in.str() + ")");
}

void check_transpose(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Dims perm = c.ints("permutation");
  Dims sorted_perm = perm;
  std::sort(sorted_perm.begin(), sorted_perm.end());
  bool is_perm = static_cast<int64_t>(perm.size()) == in.rank();
  for (size_t i = 0; is_perm && i < sorted_perm.size(); ++i)
    is_perm = sorted_perm[i] == static_cast<int64_t>(i);
  if (!is_perm)
    c.fail("permutation = " + list_str(perm) + " is not a permutation of the " +
           std::to_string(in.rank()) + " dimensions of operand 0, " + in.str());
  Shape s;
  for (int64_t p : perm) s.push_back(in.shape[static_cast<size_t>(p)]);
  c.result_is(0, Type::tensor(s, in.dtype), "operand 0 transposed by " + list_str(perm));
}

void check_slice(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Dims start = c.ints("start_indices");
  const Dims limit = c.ints("limit_indices");
  const Dims strides = c.ints_or("strides", Dims(in.shape.size(), 1));
  const std::string why = "the rank of operand 0, " + in.str();
  c.size_is("start_indices", start, in.rank(), why);
  c.size_is("limit_indices", limit, in.rank(), why);
  c.size_is("strides", strides, in.rank(), why);
  c.all_positive("strides", strides);
  Shape s;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > in.shape[d])
      c.fail("dimension " + std::to_string(d) + " slices [" + std::to_string(start[d]) + ", " +
             std::to_string(limit[d]) + "), expected 0 <= start <= limit <= " +
             std::to_string(in.shape[d]) + " (operand 0 is " + in.str() + ")");
    s.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  }
  c.result_is(0, Type::tensor(s, in.dtype),
              "slice " + list_str(start) + " to " + list_str(limit) + " by " + list_str(strides));
}

// Start index operands [first, end) are integer scalars of one type.
void check_start_indices(OpCheck& c, size_t first, int64_t rank) {
  const size_t n = c.num_operands() - first;
  if (static_cast<int64_t>(n) != rank)
    c.fail("has " + std::to_string(n) + " start index operands, expected " + std::to_string(rank) +
           " (the rank of operand 0, " + c.operand(0).str() + ")");
  for (size_t i = first; i < c.num_operands(); ++i) {
    c.tensor_operand(i);
    if (c.operand(i).rank() != 0 || !is_integer(c.operand(i).dtype))
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected a 0-dimensional integer tensor (a start index)");
    if (i > first) c.operand_is(i, c.operand(first), "same as the first start index");
  }
}

void check_dynamic_slice(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  check_start_indices(c, 1, in.rank());
  const Dims sizes = c.ints("slice_sizes");
  c.size_is("slice_sizes", sizes, in.rank(), "the rank of operand 0, " + in.str());
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] < 0 || sizes[d] > in.shape[d])
      c.fail("slice_sizes = " + list_str(sizes) + " does not fit in operand 0, " + in.str());
  c.result_is(0, Type::tensor(sizes, in.dtype), "slice_sizes " + list_str(sizes));
}

void check_dynamic_update_slice(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& update = c.operand(1);
  if (update.dtype != in.dtype || update.rank() != in.rank())
    c.fail("operand 1 has type " + update.str() + ", expected the element type and rank of " +
           "operand 0, " + in.str());
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (update.shape[d] > in.shape[d])
      c.fail("operand 1 has type " + update.str() + ", which does not fit in operand 0, " +
             in.str());
  check_start_indices(c, 2, in.rank());
  c.result_is(0, in, "same as operand 0");
}

void check_pad(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  c.operand_is(1, scalar(in.dtype), "the padding value is a scalar of operand 0's element type");
  const Dims lo = c.ints("edge_padding_low");
  const Dims hi = c.ints("edge_padding_high");
  const Dims interior = c.ints("interior_padding");
  const std::string why = "the rank of operand 0, " + in.str();
  c.size_is("edge_padding_low", lo, in.rank(), why);
  c.size_is("edge_padding_high", hi, in.rank(), why);
  c.size_is("interior_padding", interior, in.rank(), why);
  Shape s;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (interior[d] < 0)
      c.fail("interior_padding = " + list_str(interior) + " has a negative value");
    const int64_t n = in.shape[d];
    const int64_t size = lo[d] + n + std::max<int64_t>(n - 1, 0) * interior[d] + hi[d];
    if (size < 0)
      c.fail("padding dimension " + std::to_string(d) + " of " + in.str() +
             " gives a negative size " + std::to_string(size));
    s.push_back(size);
  }
  c.result_is(
      0, Type::tensor(s, in.dtype),
      "low " + list_str(lo) + ", high " + list_str(hi) + ", interior " + list_str(interior));
}

void check_concatenate(OpCheck& c) {
  c.all_tensors();
  const Type& first = c.operand(0);
  const int64_t dim = c.integer("dimension");
  if (dim < 0 || dim >= first.rank())
    c.fail("dimension = " + std::to_string(dim) + " is out of range for operand 0, " + first.str());
  Shape s = first.shape;
  for (size_t i = 1; i < c.num_operands(); ++i) {
    const Type& t = c.operand(i);
    Shape a = t.shape, b = first.shape;
    bool ok = t.dtype == first.dtype && t.rank() == first.rank();
    if (ok) {
      a[static_cast<size_t>(dim)] = b[static_cast<size_t>(dim)] = 0;
      ok = a == b;
    }
    if (!ok)
      c.fail("operand " + std::to_string(i) + " has type " + t.str() + ", expected " +
             "the type of operand 0, " + first.str() + ", except in dimension " +
             std::to_string(dim));
    s[static_cast<size_t>(dim)] += t.shape[static_cast<size_t>(dim)];
  }
  c.result_is(0, Type::tensor(s, first.dtype),
              "the operands joined along dimension " + std::to_string(dim));
}

void check_reverse(OpCheck& c) {
  c.all_tensors();
  const Dims dims = c.ints("dimensions");
  c.in_range("dimensions", dims, 0, c.operand(0).rank());
  c.unique("dimensions", dims);
  c.result_is(0, c.operand(0), "same as operand 0");
}

void check_get_dimension_size(OpCheck& c) {
  c.all_tensors();
  const int64_t d = c.integer("dimension");
  if (d < 0 || d >= c.operand(0).rank())
    c.fail("dimension = " + std::to_string(d) + " is out of range for operand 0, " +
           c.operand(0).str());
  c.result_is(0, scalar(DType::I32), "the size as a 32-bit integer");
}

// ---------------------------------------------------------------------------------------------
// Reductions and windows

// Checks inputs[0..n) share a shape and init values [n, 2n) are scalars; returns the element
// types of the accumulators (the init values').
std::vector<DType> reduction_inputs(OpCheck& c, const std::string& op_kind) {
  if (c.num_operands() == 0 || c.num_operands() % 2)
    c.fail("expects inputs and as many init values, got " + std::to_string(c.num_operands()) +
           " operands");
  c.all_tensors();
  const size_t n = c.num_operands() / 2;
  if (c.num_results() != n)
    c.fail("has " + std::to_string(c.num_results()) + " results, expected " + std::to_string(n) +
           " (one per " + op_kind + " input)");
  std::vector<DType> acc;
  for (size_t i = 0; i < n; ++i) {
    if (c.operand(i).shape != c.operand(0).shape)
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected the shape of operand 0, " + c.operand(0).str());
    const Type& init = c.operand(n + i);
    if (init.rank() != 0)
      c.fail("operand " + std::to_string(n + i) + " has type " + init.str() +
             ", expected a 0-dimensional tensor (the init value of input " + std::to_string(i) +
             ")");
    if (!promotable(c.operand(i).dtype, init.dtype))
      c.fail("operand " + std::to_string(n + i) + " has type " + init.str() +
             ", expected element type " + std::string(mlir_name(c.operand(i).dtype)) +
             " (as input " + std::to_string(i) + ")");
    acc.push_back(init.dtype);
  }
  return acc;
}

// The body of reduce-like ops: (tensor<E0>, ..., tensor<E0>, ...) -> (tensor<E0>, ...).
void reducer_signature(OpCheck& c, size_t region, const std::string& name,
                       const std::vector<DType>& acc) {
  std::vector<Type> args, results;
  for (DType t : acc) results.push_back(scalar(t));
  args = results;
  args.insert(args.end(), results.begin(), results.end());
  c.region_signature(region, name, args, results);
}

void check_reduce(OpCheck& c) {
  const std::vector<DType> acc = reduction_inputs(c, "reduce");
  const Type& in = c.operand(0);
  const Dims dims = c.ints("dimensions");
  c.in_range("dimensions", dims, 0, in.rank());
  c.unique("dimensions", dims);
  Shape s;
  for (int64_t d = 0; d < in.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end())
      s.push_back(in.shape[static_cast<size_t>(d)]);
  for (size_t i = 0; i < acc.size(); ++i)
    c.result_is(i, Type::tensor(s, acc[i]),
                "input " + std::to_string(i) + " reduced across " + list_str(dims));
  reducer_signature(c, 0, "body", acc);
}

void check_reduce_window(OpCheck& c) {
  const std::vector<DType> acc = reduction_inputs(c, "reduce_window");
  const Type& in = c.operand(0);
  const int64_t r = in.rank();
  const Dims ones(static_cast<size_t>(r), 1);
  const Dims window = c.ints("window_dimensions");
  const Dims strides = c.ints_or("window_strides", ones);
  const Dims base = c.ints_or("base_dilations", ones);
  const Dims wdil = c.ints_or("window_dilations", ones);
  const std::string why = "the rank of operand 0, " + in.str();
  c.size_is("window_dimensions", window, r, why);
  c.size_is("window_strides", strides, r, why);
  c.size_is("base_dilations", base, r, why);
  c.size_is("window_dilations", wdil, r, why);
  c.all_positive("window_dimensions", window);
  c.all_positive("window_strides", strides);
  c.all_positive("base_dilations", base);
  c.all_positive("window_dilations", wdil);
  const Dims pad = c.padding("padding", r);
  Shape s;
  for (size_t d = 0; d < static_cast<size_t>(r); ++d)
    s.push_back(num_windows(in.shape[d], base[d], pad[2 * d], pad[2 * d + 1], window[d], wdil[d],
                            strides[d]));
  for (size_t i = 0; i < acc.size(); ++i)
    c.result_is(i, Type::tensor(s, acc[i]), "the number of windows in each dimension");
  reducer_signature(c, 0, "body", acc);
}

void check_select_and_scatter(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& source = c.operand(1);
  const int64_t r = in.rank();
  const Dims window = c.ints("window_dimensions");
  const Dims strides = c.ints_or("window_strides", Dims(static_cast<size_t>(r), 1));
  const std::string why = "the rank of operand 0, " + in.str();
  c.size_is("window_dimensions", window, r, why);
  c.size_is("window_strides", strides, r, why);
  c.all_positive("window_dimensions", window);
  c.all_positive("window_strides", strides);
  const Dims pad = c.padding("padding", r);
  Shape s;
  for (size_t d = 0; d < static_cast<size_t>(r); ++d)
    s.push_back(num_windows(in.shape[d], 1, pad[2 * d], pad[2 * d + 1], window[d], 1, strides[d]));
  c.operand_is(1, Type::tensor(s, in.dtype), "one source element per window of operand 0");
  (void)source;
  c.operand_is(2, scalar(in.dtype), "the init value is a scalar of operand 0's element type");
  c.result_is(0, in, "same as operand 0");
  const Type e = scalar(in.dtype);
  c.region_signature(0, "select", {e, e}, {scalar(DType::Bool)});
  c.region_signature(1, "scatter", {e, e}, {e});
}

void check_sort(OpCheck& c) {
  c.all_tensors();
  const size_t n = c.num_operands();
  const Type& first = c.operand(0);
  for (size_t i = 1; i < n; ++i)
    if (c.operand(i).shape != first.shape)
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected the shape of operand 0, " + first.str());
  for (size_t i = 0; i < n; ++i)
    c.result_is(i, c.operand(i), "same as operand " + std::to_string(i));
  const int64_t d = c.integer_or("dimension", -1);
  if (d < -first.rank() || d >= first.rank() || (first.rank() == 0))
    c.fail("dimension = " + std::to_string(d) + " is out of range for operand 0, " + first.str());
  std::vector<Type> args;
  for (size_t i = 0; i < n; ++i) {
    args.push_back(scalar(c.operand(i).dtype));
    args.push_back(scalar(c.operand(i).dtype));
  }
  c.region_signature(0, "comparator", args, {scalar(DType::Bool)});
}

// ---------------------------------------------------------------------------------------------
// Contractions

void check_dot_general(OpCheck& c) {
  c.all_tensors();
  const Type& lhs = c.operand(0);
  const Type& rhs = c.operand(1);
  const Attribute& dn = c.struct_attr("dot_dimension_numbers", "stablehlo.dot");
  const Dims lb = c.field_ints(dn, "lhs_batching_dimensions");
  const Dims rb = c.field_ints(dn, "rhs_batching_dimensions");
  const Dims lc = c.field_ints(dn, "lhs_contracting_dimensions");
  const Dims rc = c.field_ints(dn, "rhs_contracting_dimensions");
  if (lb.size() != rb.size())
    c.fail("lhs_batching_dimensions = " + list_str(lb) +
           " and rhs_batching_dimensions = " + list_str(rb) + " differ in length");
  if (lc.size() != rc.size())
    c.fail("lhs_contracting_dimensions = " + list_str(lc) +
           " and rhs_contracting_dimensions = " + list_str(rc) + " differ in length");
  c.in_range("lhs_batching_dimensions", lb, 0, lhs.rank());
  c.in_range("lhs_contracting_dimensions", lc, 0, lhs.rank());
  c.in_range("rhs_batching_dimensions", rb, 0, rhs.rank());
  c.in_range("rhs_contracting_dimensions", rc, 0, rhs.rank());
  Dims l_all = lb, r_all = rb;
  l_all.insert(l_all.end(), lc.begin(), lc.end());
  r_all.insert(r_all.end(), rc.begin(), rc.end());
  c.unique("lhs batching and contracting dimensions", l_all);
  c.unique("rhs batching and contracting dimensions", r_all);
  auto size = [](const Type& t, int64_t d) { return t.shape[static_cast<size_t>(d)]; };
  for (size_t i = 0; i < lb.size(); ++i)
    if (size(lhs, lb[i]) != size(rhs, rb[i]))
      c.fail("batching dimension " + std::to_string(lb[i]) + " of lhs " + lhs.str() + " has size " +
             std::to_string(size(lhs, lb[i])) + " but dimension " + std::to_string(rb[i]) +
             " of rhs " + rhs.str() + " has size " + std::to_string(size(rhs, rb[i])));
  for (size_t i = 0; i < lc.size(); ++i)
    if (size(lhs, lc[i]) != size(rhs, rc[i]))
      c.fail("contracting dimension " + std::to_string(lc[i]) + " of lhs " + lhs.str() +
             " has size " + std::to_string(size(lhs, lc[i])) + " but dimension " +
             std::to_string(rc[i]) + " of rhs " + rhs.str() + " has size " +
             std::to_string(size(rhs, rc[i])));
  if (const Attribute* p = c.attr("precision_config");
      p && p->kind == Attribute::Kind::Array && !p->elements.empty() && p->elements.size() != 2)
    c.fail("precision_config has " + std::to_string(p->elements.size()) +
           " entries, expected 2 (lhs and rhs)");
  Shape s;
  for (int64_t d : lb) s.push_back(size(lhs, d));
  for (int64_t d = 0; d < lhs.rank(); ++d)
    if (std::find(l_all.begin(), l_all.end(), d) == l_all.end()) s.push_back(size(lhs, d));
  for (int64_t d = 0; d < rhs.rank(); ++d)
    if (std::find(r_all.begin(), r_all.end(), d) == r_all.end()) s.push_back(size(rhs, d));
  // The result element type may differ from the operands' (preferred_element_type).
  c.result_is(0, Type::tensor(s, c.result(0).dtype),
              "batch dimensions, then the free dimensions of lhs, then of rhs");
}

// Convolution dimension numbers, from #stablehlo.conv<raw ...> fields or the compact
// "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]" form.
struct ConvDims {
  int64_t in_batch = -1, in_feature = -1, k_in = -1, k_out = -1, out_batch = -1, out_feature = -1;
  Dims in_spatial, k_spatial, out_spatial;
};

bool parse_conv_list(std::string_view& s, char a, char b, int64_t& da, int64_t& db, Dims& spatial) {
  size_t p = s.find('[');
  if (p == std::string_view::npos) return false;
  s.remove_prefix(p + 1);
  std::vector<std::pair<int64_t, int64_t>> sp;  // (spatial index, dimension)
  int64_t dim = 0;
  while (!s.empty() && s.front() != ']') {
    const char ch = s.front();
    if (ch == ' ' || ch == ',') {
      s.remove_prefix(1);
      continue;
    }
    if (ch == a) {
      da = dim++;
      s.remove_prefix(1);
    } else if (ch == b) {
      db = dim++;
      s.remove_prefix(1);
    } else if (ch >= '0' && ch <= '9') {
      int64_t v = 0;
      while (!s.empty() && s.front() >= '0' && s.front() <= '9') {
        v = v * 10 + (s.front() - '0');
        s.remove_prefix(1);
      }
      sp.emplace_back(v, dim++);
    } else {
      return false;
    }
  }
  if (s.empty()) return false;
  s.remove_prefix(1);
  std::sort(sp.begin(), sp.end());
  spatial.clear();
  for (size_t i = 0; i < sp.size(); ++i) {
    if (sp[i].first != static_cast<int64_t>(i)) return false;
    spatial.push_back(sp[i].second);
  }
  return true;
}

ConvDims conv_dims(const OpCheck& c) {
  const Attribute& a = c.required("dimension_numbers");
  ConvDims d;
  if (a.kind == Attribute::Kind::Struct || a.kind == Attribute::Kind::Dictionary) {
    d.in_batch = c.field_int(a, "input_batch_dimension", std::nullopt);
    d.in_feature = c.field_int(a, "input_feature_dimension", std::nullopt);
    d.in_spatial = c.field_ints(a, "input_spatial_dimensions");
    d.k_in = c.field_int(a, "kernel_input_feature_dimension", std::nullopt);
    d.k_out = c.field_int(a, "kernel_output_feature_dimension", std::nullopt);
    d.k_spatial = c.field_ints(a, "kernel_spatial_dimensions");
    d.out_batch = c.field_int(a, "output_batch_dimension", std::nullopt);
    d.out_feature = c.field_int(a, "output_feature_dimension", std::nullopt);
    d.out_spatial = c.field_ints(a, "output_spatial_dimensions");
    return d;
  }
  if (a.kind == Attribute::Kind::Opaque) {
    std::string_view s = a.text;
    if (parse_conv_list(s, 'b', 'f', d.in_batch, d.in_feature, d.in_spatial) &&
        parse_conv_list(s, 'i', 'o', d.k_in, d.k_out, d.k_spatial) &&
        parse_conv_list(s, 'b', 'f', d.out_batch, d.out_feature, d.out_spatial) &&
        d.in_batch >= 0 && d.in_feature >= 0 && d.k_in >= 0 && d.k_out >= 0 && d.out_batch >= 0 &&
        d.out_feature >= 0)
      return d;
  }
  c.fail("attribute 'dimension_numbers' must be #stablehlo.conv<...>");
}

void check_convolution(OpCheck& c) {
  c.all_tensors();
  const Type& lhs = c.operand(0);
  const Type& rhs = c.operand(1);
  const Type& out = c.result(0);
  const int64_t n = lhs.rank();
  if (rhs.rank() != n)
    c.fail("operand 1 has type " + rhs.str() + ", expected the rank of operand 0, " + lhs.str());
  if (n < 2) c.fail("operand 0 has type " + lhs.str() + ", expected rank >= 2");
  if (out.rank() != n)
    c.fail("result 0 has type " + out.str() + ", expected rank " + std::to_string(n));
  const size_t ns = static_cast<size_t>(n - 2);
  const Dims ones(ns, 1);
  const Dims strides = c.ints_or("window_strides", ones);
  const Dims lhs_dil = c.ints_or("lhs_dilation", ones);
  const Dims rhs_dil = c.ints_or("rhs_dilation", ones);
  const std::string why = "one per spatial dimension";
  c.size_is("window_strides", strides, n - 2, why);
  c.size_is("lhs_dilation", lhs_dil, n - 2, why);
  c.size_is("rhs_dilation", rhs_dil, n - 2, why);
  c.all_positive("window_strides", strides);
  c.all_positive("lhs_dilation", lhs_dil);
  c.all_positive("rhs_dilation", rhs_dil);
  if (c.attr("window_reversal"))
    c.size_is("window_reversal", c.ints("window_reversal"), n - 2, why);
  const Dims pad = c.padding("padding", n - 2);
  const ConvDims d = conv_dims(c);
  const std::string spatial_why = "the rank of the operands minus 2";
  c.size_is("input_spatial_dimensions", d.in_spatial, n - 2, spatial_why);
  c.size_is("kernel_spatial_dimensions", d.k_spatial, n - 2, spatial_why);
  c.size_is("output_spatial_dimensions", d.out_spatial, n - 2, spatial_why);
  Dims in_all = {d.in_batch, d.in_feature}, k_all = {d.k_in, d.k_out},
       out_all = {d.out_batch, d.out_feature};
  in_all.insert(in_all.end(), d.in_spatial.begin(), d.in_spatial.end());
  k_all.insert(k_all.end(), d.k_spatial.begin(), d.k_spatial.end());
  out_all.insert(out_all.end(), d.out_spatial.begin(), d.out_spatial.end());
  c.in_range("input dimension numbers", in_all, 0, n);
  c.unique("input dimension numbers", in_all);
  c.in_range("kernel dimension numbers", k_all, 0, n);
  c.unique("kernel dimension numbers", k_all);
  c.in_range("output dimension numbers", out_all, 0, n);
  c.unique("output dimension numbers", out_all);
  const int64_t fgc = c.integer_or("feature_group_count", 1);
  const int64_t bgc = c.integer_or("batch_group_count", 1);
  if (fgc <= 0 || bgc <= 0 || (fgc != 1 && bgc != 1))
    c.fail("feature_group_count = " + std::to_string(fgc) + " and batch_group_count = " +
           std::to_string(bgc) + ": both must be positive and one of them 1");
  auto dim = [](const Type& t, int64_t i) { return t.shape[static_cast<size_t>(i)]; };
  const int64_t batch = dim(lhs, d.in_batch), features = dim(lhs, d.in_feature);
  const int64_t k_in = dim(rhs, d.k_in), k_out = dim(rhs, d.k_out);
  if (batch % bgc)
    c.fail("the lhs batch size " + std::to_string(batch) +
           " is not a multiple of batch_group_count = " + std::to_string(bgc));
  if (features % fgc)
    c.fail("the lhs feature size " + std::to_string(features) +
           " is not a multiple of feature_group_count = " + std::to_string(fgc));
  if (k_in != features / fgc)
    c.fail("kernel input feature dimension " + std::to_string(d.k_in) + " of " + rhs.str() +
           " has size " + std::to_string(k_in) + ", expected " + std::to_string(features / fgc) +
           " (lhs features " + std::to_string(features) + " / feature_group_count " +
           std::to_string(fgc) + ")");
  if (k_out % bgc || k_out % fgc)
    c.fail("kernel output feature size " + std::to_string(k_out) +
           " is not a multiple of the group counts");
  if (const Attribute* p = c.attr("precision_config");
      p && p->kind == Attribute::Kind::Array && !p->elements.empty() && p->elements.size() != 2)
    c.fail("precision_config has " + std::to_string(p->elements.size()) +
           " entries, expected 2 (lhs and rhs)");
  Shape s(static_cast<size_t>(n), 0);
  s[static_cast<size_t>(d.out_batch)] = batch / bgc;
  s[static_cast<size_t>(d.out_feature)] = k_out;
  for (size_t i = 0; i < ns; ++i)
    s[static_cast<size_t>(d.out_spatial[i])] =
        num_windows(dim(lhs, d.in_spatial[i]), lhs_dil[i], pad[2 * i], pad[2 * i + 1],
                    dim(rhs, d.k_spatial[i]), rhs_dil[i], strides[i]);
  // The result element type may differ from the operands' (preferred_element_type).
  c.result_is(0, Type::tensor(s, out.dtype), "the convolution's window count per dimension");
}

void check_triangular_solve(OpCheck& c) {
  c.all_tensors();
  const Type& a = c.operand(0);
  const Type& b = c.operand(1);
  c.operand_kind(0, Kinds::FloatOrComplex);
  if (a.rank() < 2) c.fail("operand 0 has type " + a.str() + ", expected rank >= 2");
  const int64_t r = a.rank();
  if (a.shape[r - 1] != a.shape[r - 2])
    c.fail("operand 0 has type " + a.str() + ", expected square matrices");
  if (b.rank() != r || b.dtype != a.dtype)
    c.fail("operand 1 has type " + b.str() + ", expected the rank and element type of operand 0, " +
           a.str());
  for (int64_t i = 0; i < r - 2; ++i)
    if (a.shape[i] != b.shape[i])
      c.fail("operand 1 has type " + b.str() + ", expected the batch dimensions of operand 0, " +
             a.str());
  const bool left = c.attr("left_side") && c.attr("left_side")->boolean;
  const int64_t k = left ? b.shape[r - 2] : b.shape[r - 1];
  if (k != a.shape[r - 1])
    c.fail("operand 1 has type " + b.str() + ", whose " + (left ? "rows" : "columns") +
           " do not match the order " + std::to_string(a.shape[r - 1]) + " of operand 0");
  c.enum_value("transpose_a", {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT", "TRANSPOSE_INVALID"}, false);
  c.result_is(0, b, "same as operand 1");
}

void check_cholesky(OpCheck& c) {
  c.all_tensors();
  const Type& a = c.operand(0);
  c.operand_kind(0, Kinds::FloatOrComplex);
  if (a.rank() < 2 || a.shape[a.rank() - 1] != a.shape[a.rank() - 2])
    c.fail("operand 0 has type " + a.str() + ", expected square matrices");
  c.result_is(0, a, "same as operand 0");
}

// ---------------------------------------------------------------------------------------------
// Gather and scatter

// Batch dimension sizes of an index tensor: its shape without index_vector_dim.
Shape index_batch_sizes(const Type& indices, int64_t index_vector_dim) {
  Shape s;
  for (int64_t d = 0; d < indices.rank(); ++d)
    if (d != index_vector_dim) s.push_back(indices.shape[static_cast<size_t>(d)]);
  return s;
}

void check_gather(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& idx = c.operand(1);
  c.operand_kind(1, Kinds::Integer);
  const Attribute& dn = c.struct_attr("dimension_numbers", "stablehlo.gather");
  const Dims offset = c.field_ints(dn, "offset_dims");
  const Dims collapsed = c.field_ints(dn, "collapsed_slice_dims");
  const Dims obatch = c.field_ints(dn, "operand_batching_dims");
  const Dims ibatch = c.field_ints(dn, "start_indices_batching_dims");
  const Dims start_map = c.field_ints(dn, "start_index_map");
  const int64_t ivd = c.field_int(dn, "index_vector_dim", 0);
  const Dims sizes = c.ints("slice_sizes");
  if (static_cast<int64_t>(offset.size() + collapsed.size() + obatch.size()) != in.rank())
    c.fail("offset_dims " + list_str(offset) + ", collapsed_slice_dims " + list_str(collapsed) +
           " and operand_batching_dims " + list_str(obatch) +
           " must cover the rank of operand 0, " + in.str());
  if (ivd < 0 || ivd > idx.rank())
    c.fail("index_vector_dim = " + std::to_string(ivd) + " is out of range for operand 1, " +
           idx.str());
  const int64_t index_len = ivd < idx.rank() ? idx.shape[static_cast<size_t>(ivd)] : 1;
  c.size_is("start_index_map", start_map, index_len,
            "the index vector length of operand 1, " + idx.str());
  c.unique("offset_dims", offset);
  c.sorted("offset_dims", offset);
  Dims cb = collapsed;
  cb.insert(cb.end(), obatch.begin(), obatch.end());
  c.unique("collapsed_slice_dims and operand_batching_dims", cb);
  c.sorted("collapsed_slice_dims", collapsed);
  c.sorted("operand_batching_dims", obatch);
  c.in_range("collapsed_slice_dims", collapsed, 0, in.rank());
  c.in_range("operand_batching_dims", obatch, 0, in.rank());
  c.unique("start_indices_batching_dims", ibatch);
  c.in_range("start_indices_batching_dims", ibatch, 0, idx.rank());
  if (std::find(ibatch.begin(), ibatch.end(), ivd) != ibatch.end())
    c.fail("start_indices_batching_dims = " + list_str(ibatch) + " contains index_vector_dim");
  if (obatch.size() != ibatch.size())
    c.fail("operand_batching_dims and start_indices_batching_dims differ in length");
  for (size_t i = 0; i < obatch.size(); ++i)
    if (in.shape[static_cast<size_t>(obatch[i])] != idx.shape[static_cast<size_t>(ibatch[i])])
      c.fail("operand batching dimension " + std::to_string(obatch[i]) + " of " + in.str() +
             " and start indices batching dimension " + std::to_string(ibatch[i]) + " of " +
             idx.str() + " differ in size");
  Dims sm = start_map;
  sm.insert(sm.end(), obatch.begin(), obatch.end());
  c.unique("start_index_map and operand_batching_dims", sm);
  c.in_range("start_index_map", start_map, 0, in.rank());
  c.size_is("slice_sizes", sizes, in.rank(), "the rank of operand 0, " + in.str());
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] < 0 || sizes[d] > in.shape[d])
      c.fail("slice_sizes = " + list_str(sizes) + " does not fit in operand 0, " + in.str());
  for (int64_t d : cb)
    if (sizes[static_cast<size_t>(d)] > 1)
      c.fail("slice_sizes = " + list_str(sizes) + " has " +
             std::to_string(sizes[static_cast<size_t>(d)]) +
             " in a collapsed or batching dimension " + std::to_string(d) + ", expected 0 or 1");
  const Shape batch = index_batch_sizes(idx, ivd);
  Shape offsets;
  for (int64_t d = 0; d < in.rank(); ++d)
    if (std::find(cb.begin(), cb.end(), d) == cb.end()) offsets.push_back(sizes[d]);
  const int64_t rank = static_cast<int64_t>(batch.size() + offsets.size());
  c.in_range("offset_dims", offset, 0, rank);
  Shape s(static_cast<size_t>(rank), 0);
  size_t bi = 0, oi = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(offset.begin(), offset.end(), d) != offset.end())
      s[d] = offsets[oi++];
    else
      s[d] = batch[bi++];
  }
  c.result_is(0, Type::tensor(s, in.dtype), "index batch dimensions with slices at offset_dims");
}

void check_scatter(OpCheck& c) {
  if (c.num_operands() < 3 || c.num_operands() % 2 == 0)
    c.fail("expects N inputs, the indices and N updates, got " + std::to_string(c.num_operands()) +
           " operands");
  c.all_tensors();
  const size_t n = (c.num_operands() - 1) / 2;
  if (c.num_results() != n)
    c.fail("has " + std::to_string(c.num_results()) + " results, expected " + std::to_string(n) +
           " (one per input)");
  const Type& in = c.operand(0);
  const Type& idx = c.operand(n);
  c.operand_kind(n, Kinds::Integer);
  for (size_t i = 1; i < n; ++i)
    if (c.operand(i).shape != in.shape)
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected the shape of operand 0, " + in.str());
  for (size_t i = 0; i < n; ++i) {
    const Type& u = c.operand(n + 1 + i);
    if (u.shape != c.operand(n + 1).shape)
      c.fail("operand " + std::to_string(n + 1 + i) + " has type " + u.str() +
             ", expected the shape of the first update, " + c.operand(n + 1).str());
    if (u.dtype != c.operand(i).dtype)
      c.fail("operand " + std::to_string(n + 1 + i) + " has type " + u.str() +
             ", expected the element type of input " + std::to_string(i) + ", " +
             c.operand(i).str());
  }
  const Type& upd = c.operand(n + 1);
  const Attribute& dn = c.struct_attr("scatter_dimension_numbers", "stablehlo.scatter");
  const Dims window = c.field_ints(dn, "update_window_dims");
  const Dims inserted = c.field_ints(dn, "inserted_window_dims");
  const Dims ibatch = c.field_ints(dn, "input_batching_dims");
  const Dims sbatch = c.field_ints(dn, "scatter_indices_batching_dims");
  const Dims to_operand = c.field_ints(dn, "scatter_dims_to_operand_dims");
  const int64_t ivd = c.field_int(dn, "index_vector_dim", 0);
  if (static_cast<int64_t>(window.size() + inserted.size() + ibatch.size()) != in.rank())
    c.fail("update_window_dims " + list_str(window) + ", inserted_window_dims " +
           list_str(inserted) + " and input_batching_dims " + list_str(ibatch) +
           " must cover the rank of operand 0, " + in.str());
  c.unique("update_window_dims", window);
  c.sorted("update_window_dims", window);
  c.in_range("update_window_dims", window, 0, upd.rank());
  Dims ib = inserted;
  ib.insert(ib.end(), ibatch.begin(), ibatch.end());
  c.unique("inserted_window_dims and input_batching_dims", ib);
  c.sorted("inserted_window_dims", inserted);
  c.sorted("input_batching_dims", ibatch);
  c.in_range("inserted_window_dims", inserted, 0, in.rank());
  c.in_range("input_batching_dims", ibatch, 0, in.rank());
  c.unique("scatter_indices_batching_dims", sbatch);
  c.in_range("scatter_indices_batching_dims", sbatch, 0, idx.rank());
  if (std::find(sbatch.begin(), sbatch.end(), ivd) != sbatch.end())
    c.fail("scatter_indices_batching_dims = " + list_str(sbatch) + " contains index_vector_dim");
  if (ibatch.size() != sbatch.size())
    c.fail("input_batching_dims and scatter_indices_batching_dims differ in length");
  for (size_t i = 0; i < ibatch.size(); ++i)
    if (in.shape[static_cast<size_t>(ibatch[i])] != idx.shape[static_cast<size_t>(sbatch[i])])
      c.fail("input batching dimension " + std::to_string(ibatch[i]) + " of " + in.str() +
             " and scatter indices batching dimension " + std::to_string(sbatch[i]) + " of " +
             idx.str() + " differ in size");
  if (ivd < 0 || ivd > idx.rank())
    c.fail("index_vector_dim = " + std::to_string(ivd) + " is out of range for the indices, " +
           idx.str());
  const int64_t index_len = ivd < idx.rank() ? idx.shape[static_cast<size_t>(ivd)] : 1;
  c.size_is("scatter_dims_to_operand_dims", to_operand, index_len,
            "the index vector length of the indices, " + idx.str());
  Dims tb = to_operand;
  tb.insert(tb.end(), ibatch.begin(), ibatch.end());
  c.unique("scatter_dims_to_operand_dims and input_batching_dims", tb);
  c.in_range("scatter_dims_to_operand_dims", to_operand, 0, in.rank());
  // Updates: scatter dimensions (the indices' batch sizes) and window dimensions that fit in
  // the input's non-inserted dimensions.
  const Shape scatter_sizes = index_batch_sizes(idx, ivd);
  Shape window_bounds;
  for (int64_t d = 0; d < in.rank(); ++d)
    if (std::find(ib.begin(), ib.end(), d) == ib.end())
      window_bounds.push_back(in.shape[static_cast<size_t>(d)]);
  if (upd.rank() != static_cast<int64_t>(scatter_sizes.size() + window.size()))
    c.fail("updates have type " + upd.str() + ", expected rank " +
           std::to_string(scatter_sizes.size() + window.size()) + " (" +
           std::to_string(scatter_sizes.size()) + " scatter and " + std::to_string(window.size()) +
           " window dimensions)");
  size_t si = 0, wi = 0;
  for (int64_t d = 0; d < upd.rank(); ++d) {
    const int64_t size = upd.shape[static_cast<size_t>(d)];
    if (std::find(window.begin(), window.end(), d) != window.end()) {
      if (size > window_bounds[wi])
        c.fail("update window dimension " + std::to_string(d) + " of " + upd.str() + " has size " +
               std::to_string(size) + ", larger than " + std::to_string(window_bounds[wi]) +
               " in operand 0, " + in.str());
      ++wi;
    } else if (size != scatter_sizes[si++]) {
      c.fail("update scatter dimension " + std::to_string(d) + " of " + upd.str() + " has size " +
             std::to_string(size) + ", expected " + std::to_string(scatter_sizes[si - 1]) +
             " (from the indices, " + idx.str() + ")");
    }
  }
  std::vector<DType> acc;
  for (size_t i = 0; i < n; ++i) {
    acc.push_back(c.result(i).dtype);
    if (!promotable(c.operand(i).dtype, c.result(i).dtype))
      c.result_is(i, c.operand(i), "same as operand " + std::to_string(i));
    c.result_is(i, Type::tensor(c.operand(i).shape, c.result(i).dtype),
                "the shape of operand " + std::to_string(i));
  }
  reducer_signature(c, 0, "update_computation", acc);
}

// ---------------------------------------------------------------------------------------------
// Control flow, calls and collectives

void check_while(OpCheck& c) {
  const std::vector<Type> types = c.operand_types();
  for (size_t i = 0; i < types.size(); ++i)
    c.result_is(i, types[i], "same as operand " + std::to_string(i));
  c.region_signature(0, "cond", types, {scalar(DType::Bool)});
  c.region_signature(1, "body", types, types);
}

void check_case(OpCheck& c) {
  c.operand_is(0, scalar(DType::I32), "the branch index");
  if (c.op().regions.empty()) c.fail("expects at least one branch region");
  const std::vector<Type> results = c.result_types();
  for (size_t i = 0; i < c.op().regions.size(); ++i)
    c.region_signature(i, "branch " + std::to_string(i), {}, results);
}

void check_if(OpCheck& c) {
  c.operand_is(0, scalar(DType::Bool), "the predicate");
  const std::vector<Type> results = c.result_types();
  c.region_signature(0, "true_branch", {}, results);
  c.region_signature(1, "false_branch", {}, results);
}

void check_optimization_barrier(OpCheck& c) {
  for (size_t i = 0; i < c.num_operands(); ++i)
    c.result_is(i, c.operand(i), "same as operand " + std::to_string(i));
}

void check_rng_bit_generator(OpCheck& c) {
  c.all_tensors();
  const Type& state = c.operand(0);
  if (state.rank() != 1 || !is_integer(state.dtype))
    c.fail("operand 0 has type " + state.str() + ", expected a 1-dimensional integer tensor");
  c.result_is(0, state, "the new state has the type of operand 0");
  c.result_kind(1, Kinds::IntOrFloat);
  auto alg = c.enum_value("rng_algorithm", {"DEFAULT", "THREE_FRY", "PHILOX"}, false);
  if (alg && state.dtype == DType::U64) {
    const int64_t n = state.shape[0];
    if ((*alg == "THREE_FRY" && n != 2) || (*alg == "PHILOX" && n != 2 && n != 3))
      c.fail("operand 0 has type " + state.str() + ", which is not a " + *alg + " state");
  }
}

void check_rng(OpCheck& c) {
  c.all_tensors();
  for (size_t i : {size_t{0}, size_t{1}})
    c.operand_is(i, scalar(c.result(0).dtype), "a scalar of the result's element type");
}

// Size of each group of a replica_groups attribute (its second dimension), or 0 when absent.
int64_t replica_group_size(const OpCheck& c) {
  const Attribute* a = c.attr("replica_groups");
  if (!a || a->kind != Attribute::Kind::DenseElements) return 0;
  const Shape& s = a->tensor.shape();
  if (s.size() != 2) c.fail("attribute 'replica_groups' must be a 2-dimensional tensor");
  Dims ids = c.ints("replica_groups");
  ids.erase(std::remove(ids.begin(), ids.end(), -1), ids.end());
  c.unique("replica_groups", ids);
  return s[1];
}

std::vector<Type> binary_reducer(DType t) {
  return {scalar(t), scalar(t)};
}

void check_all_reduce(OpCheck& c) {
  c.all_tensors();
  replica_group_size(c);
  const std::vector<Type> ret = c.region_returns(0, "computation");
  if (ret.size() != 1 || ret[0].rank() != 0)
    c.fail("region 'computation' returns " + types_str(ret) + ", expected one scalar");
  const DType e = ret[0].dtype;
  c.region_signature(0, "computation", binary_reducer(e), {scalar(e)});
  for (size_t i = 0; i < c.num_operands(); ++i) {
    if (!promotable(c.operand(i).dtype, e))
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", which does not fit the computation's element type " + std::string(mlir_name(e)));
    c.result_is(i, Type::tensor(c.operand(i).shape, e),
                "the shape of operand " + std::to_string(i));
  }
}

void check_all_gather(OpCheck& c) {
  c.all_tensors();
  const int64_t dim = c.integer("all_gather_dim");
  const int64_t group = replica_group_size(c);
  for (size_t i = 0; i < c.num_operands(); ++i) {
    const Type& t = c.operand(i);
    if (dim < 0 || dim >= t.rank())
      c.fail("all_gather_dim = " + std::to_string(dim) + " is out of range for operand " +
             std::to_string(i) + ", " + t.str());
    Shape s = t.shape;
    if (group > 0) {
      s[static_cast<size_t>(dim)] *= group;
      c.result_is(i, Type::tensor(s, t.dtype),
                  "operand " + std::to_string(i) + " gathered from " + std::to_string(group) +
                      " processes along dimension " + std::to_string(dim));
    } else if (c.result(i).dtype != t.dtype || c.result(i).rank() != t.rank()) {
      c.fail("result " + std::to_string(i) + " has type " + c.result(i).str() +
             ", expected the element type and rank of operand " + std::to_string(i));
    }
  }
}

void check_reduce_scatter(OpCheck& c) {
  c.all_tensors();
  const Type& t = c.operand(0);
  const int64_t dim = c.integer("scatter_dimension");
  if (dim < 0 || dim >= t.rank())
    c.fail("scatter_dimension = " + std::to_string(dim) + " is out of range for operand 0, " +
           t.str());
  const int64_t group = replica_group_size(c);
  const std::vector<Type> ret = c.region_returns(0, "computation");
  if (ret.size() != 1 || ret[0].rank() != 0)
    c.fail("region 'computation' returns " + types_str(ret) + ", expected one scalar");
  const DType e = ret[0].dtype;
  c.region_signature(0, "computation", binary_reducer(e), {scalar(e)});
  if (!promotable(t.dtype, e))
    c.fail("operand 0 has type " + t.str() + ", which does not fit the computation's element " +
           "type " + std::string(mlir_name(e)));
  Shape s = t.shape;
  if (group > 0) {
    if (s[static_cast<size_t>(dim)] % group)
      c.fail("dimension " + std::to_string(dim) + " of operand 0, " + t.str() +
             ", is not a multiple of the group size " + std::to_string(group));
    s[static_cast<size_t>(dim)] /= group;
    c.result_is(0, Type::tensor(s, e),
                "operand 0 split into " + std::to_string(group) + " parts along dimension " +
                    std::to_string(dim));
  }
}

void check_all_to_all(OpCheck& c) {
  c.all_tensors();
  const int64_t split = c.integer("split_dimension");
  const int64_t concat = c.integer("concat_dimension");
  const int64_t count = c.integer("split_count");
  if (count <= 0) c.fail("split_count = " + std::to_string(count) + ", expected > 0");
  replica_group_size(c);
  for (size_t i = 0; i < c.num_operands(); ++i) {
    const Type& t = c.operand(i);
    for (int64_t d : {split, concat})
      if (d < 0 || d >= t.rank())
        c.fail("dimension " + std::to_string(d) + " is out of range for operand " +
               std::to_string(i) + ", " + t.str());
    Shape s = t.shape;
    if (s[static_cast<size_t>(split)] % count)
      c.fail("dimension " + std::to_string(split) + " of operand " + std::to_string(i) + ", " +
             t.str() + ", is not a multiple of split_count = " + std::to_string(count));
    s[static_cast<size_t>(split)] /= count;
    s[static_cast<size_t>(concat)] *= count;
    c.result_is(
        i, Type::tensor(s, t.dtype),
        "split along " + std::to_string(split) + ", joined along " + std::to_string(concat));
  }
}

void check_process_id(OpCheck& c) {
  c.result_is(0, scalar(DType::U32), "a 32-bit unsigned id");
}

void check_after_all(OpCheck& c) {
  for (size_t i = 0; i < c.num_operands(); ++i)
    if (!c.operand(i).is_token)
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected !stablehlo.token");
  c.result_is(0, Type::token(), "a token");
}

void check_collective_permute(OpCheck& c) {
  c.result_is(0, c.operand(0), "same as operand 0");
}

void check_call(OpCheck& c) {
  const Attribute* a = c.attr("callee");
  if (!a || (a->kind != Attribute::Kind::Symbol && a->kind != Attribute::Kind::String))
    c.fail("missing attribute 'callee'");
  const Function* f = c.module().lookup(a->text);
  if (!f) c.fail("calls @" + a->text + ", which is not defined in the module");
  const std::vector<Type> params = f->arg_types();
  const std::vector<Type> args = c.operand_types();
  if (args.size() != params.size())
    c.fail("passes " + std::to_string(args.size()) + " argument" + (args.size() == 1 ? "" : "s") +
           " to @" + f->name + ", which takes " + std::to_string(params.size()) + " " +
           types_str(params));
  for (size_t i = 0; i < args.size(); ++i)
    c.operand_is(i, params[i], "argument " + std::to_string(i) + " of @" + f->name);
  const std::vector<Type> results = c.result_types();
  if (results != f->result_types)
    c.fail("has result types " + types_str(results) + ", expected " + types_str(f->result_types) +
           " (the results of @" + f->name + ")");
}

void check_func_return(OpCheck& c) {
  const Function& f = c.function();
  const Operation& op = c.op();
  if (!op.parent || op.parent->parent != &f.body)
    c.fail("only allowed at the end of a function body (use stablehlo.return in regions)");
  if (c.num_results()) c.fail("has results");
  const std::vector<Type> got = c.operand_types();
  if (got.size() != f.result_types.size())
    c.fail("returns " + std::to_string(got.size()) + " value" + (got.size() == 1 ? "" : "s") + " " +
           types_str(got) + ", expected " + std::to_string(f.result_types.size()) + " " +
           types_str(f.result_types) + " (the results of @" + f.name + ")");
  for (size_t i = 0; i < got.size(); ++i)
    c.operand_is(i, f.result_types[i], "result " + std::to_string(i) + " of @" + f.name);
}

void check_stablehlo_return(OpCheck& c) {
  const Operation& op = c.op();
  if (!op.parent || !op.parent->parent || !op.parent->parent->parent_op)
    c.fail("only allowed at the end of an op's region (use func.return in functions)");
  if (c.num_results()) c.fail("has results");
}

// The operand and result counts the op table gives.
void check_counts(OpCheck& c, const ops::OpDef& d) {
  if (d.num_operands >= 0)
    c.operands_are(static_cast<size_t>(d.num_operands));
  else if (d.min_operands > 0)
    c.operands_at_least(static_cast<size_t>(d.min_operands));
  if (d.num_results >= 0) {
    c.results_are(static_cast<size_t>(d.num_results));
  } else if (d.num_results == ops::kPerOperand && c.num_results() != c.num_operands()) {
    c.fail("has " + std::to_string(c.num_results()) + " results, expected " +
           std::to_string(c.num_operands()) + " (one per operand)");
  }
}

using Checker = std::function<void(OpCheck&)>;

const std::unordered_map<std::string, Checker>& checkers() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<std::string, Checker>();
    auto& m = *t;
    // The plain element-wise ops: the table gives their element type class.
    for (const ops::OpDef& d : ops::kOps)
      if (d.kinds) m[std::string(d.name)] = [k = *d.kinds](OpCheck& c) { elementwise_same(c, k); };
    m["stablehlo.abs"] = check_abs;
    m["stablehlo.compare"] = check_compare;
    m["stablehlo.is_finite"] = check_is_finite;
    m["stablehlo.select"] = check_select;
    m["stablehlo.clamp"] = check_clamp;
    m["stablehlo.convert"] = check_convert;
    m["stablehlo.bitcast_convert"] = check_bitcast_convert;
    m["stablehlo.uniform_quantize"] = check_uniform_quantize;
    m["stablehlo.uniform_dequantize"] = check_uniform_dequantize;
    m["stablehlo.reduce_precision"] = check_reduce_precision;
    m["stablehlo.constant"] = check_constant;
    m["stablehlo.iota"] = check_iota;
    m["stablehlo.broadcast_in_dim"] = check_broadcast_in_dim;
    m["stablehlo.reshape"] = check_reshape;
    m["stablehlo.transpose"] = check_transpose;
    m["stablehlo.slice"] = check_slice;
    m["stablehlo.dynamic_slice"] = check_dynamic_slice;
    m["stablehlo.dynamic_update_slice"] = check_dynamic_update_slice;
    m["stablehlo.pad"] = check_pad;
    m["stablehlo.concatenate"] = check_concatenate;
    m["stablehlo.reverse"] = check_reverse;
    m["stablehlo.get_dimension_size"] = check_get_dimension_size;
    m["stablehlo.reduce"] = check_reduce;
    m["stablehlo.reduce_window"] = check_reduce_window;
    m["stablehlo.select_and_scatter"] = check_select_and_scatter;
    m["stablehlo.sort"] = check_sort;
    m["stablehlo.dot_general"] = check_dot_general;
    m["stablehlo.convolution"] = check_convolution;
    m["stablehlo.triangular_solve"] = check_triangular_solve;
    m["stablehlo.cholesky"] = check_cholesky;
    m["stablehlo.gather"] = check_gather;
    m["stablehlo.scatter"] = check_scatter;
    m["stablehlo.while"] = check_while;
    m["stablehlo.case"] = check_case;
    m["stablehlo.if"] = check_if;
    m["stablehlo.optimization_barrier"] = check_optimization_barrier;
    m["stablehlo.rng_bit_generator"] = check_rng_bit_generator;
    m["stablehlo.rng"] = check_rng;
    m["stablehlo.all_reduce"] = check_all_reduce;
    m["stablehlo.all_gather"] = check_all_gather;
    m["stablehlo.reduce_scatter"] = check_reduce_scatter;
    m["stablehlo.collective_permute"] = check_collective_permute;
    m["stablehlo.all_to_all"] = check_all_to_all;
    m["stablehlo.replica_id"] = check_process_id;
    m["stablehlo.partition_id"] = check_process_id;
    m["stablehlo.after_all"] = check_after_all;
    m["stablehlo.create_token"] = check_after_all;
    m["stablehlo.custom_call"] = [](OpCheck&) {};  // implementation-defined
    m["func.call"] = check_call;
    m["func.return"] = check_func_return;
    m["stablehlo.return"] = check_stablehlo_return;
    return t;
  }();
  return *table;
}

// ---------------------------------------------------------------------------------------------
// The walk: scopes of visible values, then each op's own rule, then its regions.

class Verifier {
 public:
  explicit Verifier(const Module& module) : module_(module) {}

  void run() {
    std::unordered_set<std::string> names;
    for (const auto& f : module_.functions)
      if (!names.insert(f->name).second)
        throw VerifyError("function @" + f->name + " is defined more than once");
    for (const auto& f : module_.functions) verify_function(*f);
  }

 private:
  void verify_function(const Function& f) {
    function_ = &f;
    if (f.body.blocks.empty()) return;  // a declaration
    if (f.body.blocks.size() != 1)
      throw VerifyError("function @" + f.name + " has " + std::to_string(f.body.blocks.size()) +
                        " blocks, expected 1");
    const Block& entry = f.entry();
    if (entry.ops.empty()) {
      if (entry.arguments.empty() && f.result_types.empty()) return;  // a declaration
      throw VerifyError("function @" + f.name + " has an empty body, expected func.return");
    }
    verify_block(entry);
    const Operation* term = entry.terminator();
    if (term->name != "func.return")
      throw VerifyError("function @" + f.name + " must end with func.return, found " +
                        term->where());
  }

  void verify_block(const Block& b) {
    std::vector<const Value*> added;
    for (const auto& a : b.arguments) {
      visible_.insert(a.get());
      added.push_back(a.get());
    }
    for (size_t i = 0; i < b.ops.size(); ++i) {
      const Operation& op = *b.ops[i];
      const bool terminator = op.name == "func.return" || op.name == "stablehlo.return";
      if (terminator && i + 1 != b.ops.size())
        throw VerifyError(op.where() + ": must be the last op of its block, but " +
                          b.ops[i + 1]->where() + " follows it");
      verify_op(op);
      for (const auto& r : op.results) {
        visible_.insert(r.get());
        added.push_back(r.get());
      }
    }
    for (const Value* v : added) visible_.erase(v);
  }

  void verify_op(const Operation& op) {
    for (size_t i = 0; i < op.operands.size(); ++i) check_defined(op, i);
    const ops::OpDef* def = ops::find(op.name);
    auto it = checkers().find(op.name);
    if (def || it != checkers().end()) {
      OpCheck c(op, module_, *function_);
      view_quantized(op, c);
      if (def) check_counts(c, *def);
      if (it != checkers().end()) it->second(c);
    }
    for (const auto& r : op.regions)
      for (const auto& b : r->blocks) verify_block(*b);
  }

  // An op on quantized values computes on what they stand for (the spec's
  // dequantize-op-quantize), so it is checked on their expressed types; bitcast_convert sees
  // their stored integers. The quantize ops, constants and the ops that pass values along
  // (control flow, calls, custom calls) check the quantized types themselves. Computing ops with
  // a region (reduce, sort, ...) are not supported on quantized values (compiler/quantized.h).
  static void view_quantized(const Operation& op, OpCheck& c) {
    if (!op_has_type(op, [](const Type& t) { return t.is_quantized(); })) return;
    const std::string& n = op.name;
    if (n == "stablehlo.bitcast_convert") {
      c.view_quantized_as([](const Type& t) { return Type::tensor(t.shape, t.dtype); });
    } else if (!passes_values_along(op) && n != "stablehlo.uniform_quantize" &&
               n != "stablehlo.uniform_dequantize" && n != "stablehlo.constant") {
      if (!op.regions.empty()) c.fail("quantized values in an op with a region are not supported");
      c.view_quantized_as(
          [](const Type& t) { return Type::tensor(t.shape, t.quantized->expressed); });
    }
  }

  // True when block `b` is `op`'s block or encloses it.
  static bool encloses(const Block* b, const Operation& op) {
    for (const Block* cur = op.parent; cur;) {
      if (cur == b) return true;
      const Region* r = cur->parent;
      const Operation* parent_op = r ? r->parent_op : nullptr;
      cur = parent_op ? parent_op->parent : nullptr;
    }
    return false;
  }

  void check_defined(const Operation& op, size_t i) const {
    const Value* v = op.operands[i];
    const std::string prefix = op.where() + ": operand " + std::to_string(i);
    if (!v) throw VerifyError(prefix + " is missing (null)");
    if (visible_.count(v)) return;
    const std::string name = value_str(v);
    if (v->defining_op) {
      const Operation* def = v->defining_op;
      if (def == &op) throw VerifyError(prefix + name + " is a result of the op itself");
      if (encloses(def->parent, op))
        throw VerifyError(prefix + name + " is used before its definition by " + def->where());
      throw VerifyError(prefix + name + " is defined by " + def->where() +
                        " in a region that does not enclose this op");
    }
    throw VerifyError(prefix + name + " is an argument of a block that does not enclose this op");
  }

  const Module& module_;
  const Function* function_ = nullptr;
  std::unordered_set<const Value*> visible_;
};

}  // namespace

void verify(const Module& module) {
  Verifier(module).run();
}

}  // namespace cujax::ir
