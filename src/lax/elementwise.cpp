// Element-wise ops: arithmetic, comparisons, math functions, select/clamp and conversions.
#include <numbers>

#include "cujax/grad.h"
#include "lax/util.h"

namespace cujax::lax {

using namespace detail;

namespace {

Array binary(const std::string& op, const std::string& name, const Array& x, const Array& y,
             Kinds kinds) {
  check_valid(op, x);
  check_valid(op, y);
  if (x.shape() != y.shape() || x.dtype() != y.dtype())
    fail(op,
         "operands must have the same shape and dtype, got " + type_str(x) + " and " + type_str(y));
  check_dtype(op, x, kinds, "operands");
  return trace::bind1(spec(name, x.shape(), x.dtype()), {x, y});
}

Array unary(const std::string& op, const std::string& name, const Array& x, Kinds kinds,
            std::optional<DType> result = std::nullopt) {
  check_dtype(op, x, kinds);
  return trace::bind1(spec(name, x.shape(), result.value_or(x.dtype())), {x});
}

}  // namespace

// ------------------------------------------------------------------ binary

Array add(const Array& x, const Array& y) {
  return binary("add", "stablehlo.add", x, y, Kinds::Num);
}
Array sub(const Array& x, const Array& y) {
  return binary("sub", "stablehlo.subtract", x, y, Kinds::Num);
}
Array mul(const Array& x, const Array& y) {
  return binary("mul", "stablehlo.multiply", x, y, Kinds::Num);
}
Array div(const Array& x, const Array& y) {
  return binary("div", "stablehlo.divide", x, y, Kinds::Num);
}
Array rem(const Array& x, const Array& y) {
  return binary("rem", "stablehlo.remainder", x, y, Kinds::RealNum);
}
Array pow(const Array& x, const Array& y) {
  return binary("pow", "stablehlo.power", x, y, Kinds::Num);
}
Array max(const Array& x, const Array& y) {
  return binary("max", "stablehlo.maximum", x, y, Kinds::Any);
}
Array min(const Array& x, const Array& y) {
  return binary("min", "stablehlo.minimum", x, y, Kinds::Any);
}
Array atan2(const Array& x, const Array& y) {
  return binary("atan2", "stablehlo.atan2", x, y, Kinds::Float);
}
Array bitwise_and(const Array& x, const Array& y) {
  return binary("bitwise_and", "stablehlo.and", x, y, Kinds::IntOrBool);
}
Array bitwise_or(const Array& x, const Array& y) {
  return binary("bitwise_or", "stablehlo.or", x, y, Kinds::IntOrBool);
}
Array bitwise_xor(const Array& x, const Array& y) {
  return binary("bitwise_xor", "stablehlo.xor", x, y, Kinds::IntOrBool);
}
Array shift_left(const Array& x, const Array& y) {
  return binary("shift_left", "stablehlo.shift_left", x, y, Kinds::Int);
}
Array shift_right_logical(const Array& x, const Array& y) {
  return binary("shift_right_logical", "stablehlo.shift_right_logical", x, y, Kinds::Int);
}
Array shift_right_arithmetic(const Array& x, const Array& y) {
  return binary("shift_right_arithmetic", "stablehlo.shift_right_arithmetic", x, y, Kinds::Int);
}

// ------------------------------------------------------------------ comparisons

Array eq(const Array& x, const Array& y) {
  return compare("eq", x, y, "EQ");
}
Array ne(const Array& x, const Array& y) {
  return compare("ne", x, y, "NE");
}
Array lt(const Array& x, const Array& y) {
  return compare("lt", x, y, "LT");
}
Array le(const Array& x, const Array& y) {
  return compare("le", x, y, "LE");
}
Array gt(const Array& x, const Array& y) {
  return compare("gt", x, y, "GT");
}
Array ge(const Array& x, const Array& y) {
  return compare("ge", x, y, "GE");
}

// ------------------------------------------------------------------ unary

Array neg(const Array& x) {
  return unary("neg", "stablehlo.negate", x, Kinds::Num);
}
// |x|; of a complex x, the real modulus (complex64 -> f32), as jax.lax.abs.
Array abs(const Array& x) {
  check_dtype("abs", x, Kinds::SignedOrInexact);
  return unary("abs", "stablehlo.abs", x, Kinds::SignedOrInexact, complex_component(x.dtype()));
}
Array sign(const Array& x) {
  check_dtype("sign", x, Kinds::Num);
  // stablehlo.sign takes signed and floating-point operands; JAX lowers unsigned as x == 0 ? 0 : 1.
  if (is_unsigned_int(x.dtype())) {
    const Array is_zero = eq(x, like(x, 0));
    return select(is_zero, like(x, 0), like(x, 1));
  }
  return unary("sign", "stablehlo.sign", x, Kinds::Num);
}
Array floor(const Array& x) {
  return unary("floor", "stablehlo.floor", x, Kinds::Float);
}
Array ceil(const Array& x) {
  return unary("ceil", "stablehlo.ceil", x, Kinds::Float);
}
Array round(const Array& x, bool away_from_zero) {
  return unary("round",
               away_from_zero ? "stablehlo.round_nearest_afz" : "stablehlo.round_nearest_even", x,
               Kinds::Float);
}
Array exp(const Array& x) {
  return unary("exp", "stablehlo.exponential", x, Kinds::Inexact);
}
Array expm1(const Array& x) {
  return unary("expm1", "stablehlo.exponential_minus_one", x, Kinds::Inexact);
}
Array log(const Array& x) {
  return unary("log", "stablehlo.log", x, Kinds::Inexact);
}
Array log1p(const Array& x) {
  return unary("log1p", "stablehlo.log_plus_one", x, Kinds::Inexact);
}
Array tanh(const Array& x) {
  return unary("tanh", "stablehlo.tanh", x, Kinds::Inexact);
}
Array logistic(const Array& x) {
  return unary("logistic", "stablehlo.logistic", x, Kinds::Inexact);
}
Array sin(const Array& x) {
  return unary("sin", "stablehlo.sine", x, Kinds::Inexact);
}
Array cos(const Array& x) {
  return unary("cos", "stablehlo.cosine", x, Kinds::Inexact);
}
Array tan(const Array& x) {
  return unary("tan", "stablehlo.tan", x, Kinds::Inexact);
}
Array sqrt(const Array& x) {
  return unary("sqrt", "stablehlo.sqrt", x, Kinds::Inexact);
}
Array rsqrt(const Array& x) {
  return unary("rsqrt", "stablehlo.rsqrt", x, Kinds::Inexact);
}
Array cbrt(const Array& x) {
  return unary("cbrt", "stablehlo.cbrt", x, Kinds::Inexact);
}
Array is_finite(const Array& x) {
  return unary("is_finite", "stablehlo.is_finite", x, Kinds::Float, DType::Bool);
}
Array bitwise_not(const Array& x) {
  return unary("bitwise_not", "stablehlo.not", x, Kinds::IntOrBool);
}
Array population_count(const Array& x) {
  return unary("population_count", "stablehlo.popcnt", x, Kinds::Int);
}
Array clz(const Array& x) {
  return unary("clz", "stablehlo.count_leading_zeros", x, Kinds::Int);
}

// The error functions and the inverse trigonometric and hyperbolic functions are chlo ops, as
// jax.lax emits them; the compiler expands them for every backend (compiler/chlo_decompose.cpp).
Array erf(const Array& x) {
  return unary("erf", "chlo.erf", x, Kinds::Float);
}
Array erfc(const Array& x) {
  return unary("erfc", "chlo.erfc", x, Kinds::Float);
}
Array erf_inv(const Array& x) {
  return unary("erf_inv", "chlo.erf_inv", x, Kinds::Float);
}

Array square(const Array& x) {
  check_dtype("square", x, Kinds::Num);
  return mul(x, x);
}

Array reciprocal(const Array& x) {
  check_dtype("reciprocal", x, Kinds::Num);
  return div(like(x, 1.0), x);
}

Array integer_pow(const Array& x, int y) {
  check_dtype("integer_pow", x, Kinds::Num);
  if (y == 0) return like(x, 1.0);
  const bool negative = y < 0;
  if (negative && !dtype_in(x.dtype(), Kinds::Inexact))
    fail("integer_pow",
         "a negative exponent needs a floating-point or complex operand, got " + type_str(x));
  unsigned n =
      negative ? static_cast<unsigned>(-static_cast<int64_t>(y)) : static_cast<unsigned>(y);
  // Square-and-multiply, as JAX lowers integer_pow.
  Array acc;
  Array base = x;
  while (n > 0) {
    if (n & 1u) acc = acc.valid() ? mul(acc, base) : base;
    n >>= 1;
    if (n > 0) base = mul(base, base);
  }
  return negative ? div(like(x, 1.0), acc) : acc;
}

Array exp2(const Array& x) {
  check_dtype("exp2", x, Kinds::Inexact);
  return exp(mul(like(x, std::numbers::ln2), x));
}

Array asin(const Array& x) {
  return unary("asin", "chlo.asin", x, Kinds::Inexact);
}
Array acos(const Array& x) {
  return unary("acos", "chlo.acos", x, Kinds::Inexact);
}
Array atan(const Array& x) {
  return unary("atan", "chlo.atan", x, Kinds::Inexact);
}
Array sinh(const Array& x) {
  return unary("sinh", "chlo.sinh", x, Kinds::Inexact);
}
Array cosh(const Array& x) {
  return unary("cosh", "chlo.cosh", x, Kinds::Inexact);
}
Array asinh(const Array& x) {
  return unary("asinh", "chlo.asinh", x, Kinds::Inexact);
}
Array acosh(const Array& x) {
  return unary("acosh", "chlo.acosh", x, Kinds::Inexact);
}
Array atanh(const Array& x) {
  return unary("atanh", "chlo.atanh", x, Kinds::Inexact);
}

// ------------------------------------------------------------------ select, clamp

Array select(const Array& pred, const Array& on_true, const Array& on_false) {
  check_valid("select", pred);
  check_valid("select", on_true);
  check_valid("select", on_false);
  if (pred.dtype() != DType::Bool)
    fail("select", "the predicate must be bool, got " + type_str(pred));
  if (on_true.shape() != on_false.shape() || on_true.dtype() != on_false.dtype())
    fail("select", "on_true and on_false must have the same shape and dtype, got " +
                       type_str(on_true) + " and " + type_str(on_false));
  if (!pred.shape().empty() && pred.shape() != on_true.shape())
    fail("select", "the predicate must be a scalar or have the operands' shape, got " +
                       type_str(pred) + " for operands " + type_str(on_true));
  return trace::bind1(spec("stablehlo.select", on_true.shape(), on_true.dtype()),
                      {pred, on_true, on_false});
}

Array clamp(const Array& min, const Array& x, const Array& max) {
  check_valid("clamp", min);
  check_valid("clamp", x);
  check_valid("clamp", max);
  check_dtype("clamp", x, Kinds::Real);
  for (const Array* b : {&min, &max}) {
    if (b->dtype() != x.dtype() || (!b->shape().empty() && b->shape() != x.shape()))
      fail("clamp",
           "min and max must be scalars or have the operand's shape, all of one dtype, got " +
               type_str(min) + ", " + type_str(x) + " and " + type_str(max));
  }
  // JAX broadcasts scalar bounds before the op.
  const Array lo = min.shape() == x.shape() ? min : broadcast_scalar(min, x.shape());
  const Array hi = max.shape() == x.shape() ? max : broadcast_scalar(max, x.shape());
  return trace::bind1(spec("stablehlo.clamp", x.shape(), x.dtype()), {lo, x, hi});
}

Array stop_gradient(const Array& x) {
  check_valid("stop_gradient", x);
  return cujax::stop_gradient(x);  // the autodiff marker lives with grad
}

// ------------------------------------------------------------------ conversions

Array convert_element_type(const Array& x, DType dtype) {
  check_valid("convert_element_type", x);
  if (x.dtype() == dtype) return trace::with_weak_type(x, false);
  if (dtype == DType::Bool) return ne(x, like(x, 0.0));
  // Complex to real keeps the real part, as jax.lax lowers it (real, then convert).
  if (is_complex(x.dtype()) && !is_complex(dtype)) return convert_element_type(real(x), dtype);
  return trace::bind1(spec("stablehlo.convert", x.shape(), dtype), {x});
}

Array bitcast_convert_type(const Array& x, DType dtype) {
  check_valid("bitcast_convert_type", x);
  if (x.dtype() == DType::Bool || dtype == DType::Bool)
    fail("bitcast_convert_type", "bool has no bit layout to reinterpret, got " + type_str(x) +
                                     " to " + std::string(mlir_name(dtype)));
  const int in_bits = bit_width(x.dtype()), out_bits = bit_width(dtype);
  Shape shape = x.shape();
  if (out_bits < in_bits) {
    shape.push_back(in_bits / out_bits);
  } else if (out_bits > in_bits) {
    const int64_t ratio = out_bits / in_bits;
    if (shape.empty() || shape.back() != ratio)
      fail("bitcast_convert_type", "converting " + type_str(x) + " to the wider " +
                                       std::string(mlir_name(dtype)) +
                                       " needs a last dimension of " + std::to_string(ratio));
    shape.pop_back();
  }
  return trace::bind1(spec("stablehlo.bitcast_convert", shape, dtype), {x});
}

Array reduce_precision(const Array& x, int exponent_bits, int mantissa_bits) {
  check_dtype("reduce_precision", x, Kinds::Float);
  if (exponent_bits < 1 || mantissa_bits < 0)
    fail("reduce_precision", "needs exponent_bits >= 1 and mantissa_bits >= 0, got " +
                                 std::to_string(exponent_bits) + " and " +
                                 std::to_string(mantissa_bits));
  return trace::bind1(
      spec("stablehlo.reduce_precision", x.shape(), x.dtype(),
           {{"exponent_bits", ir::Attribute::integer_attr(exponent_bits, DType::I32)},
            {"mantissa_bits", ir::Attribute::integer_attr(mantissa_bits, DType::I32)}}),
      {x});
}

}  // namespace cujax::lax
