// The verifier's type rules for element-wise ops (families of op_table.h).
#include <algorithm>
#include <string>
#include <vector>

#include "ir/verify_op.h"

namespace cujax::ir::rules {
namespace {

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

}  // namespace

void add_elementwise_rules(Checkers& m) {
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
}

}  // namespace cujax::ir::rules
