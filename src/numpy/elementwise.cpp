// Element-wise functions and the C++ operators on Array.
#include <cmath>
#include <limits>
#include <numbers>

#include "numpy/internal.h"

namespace cujax::numpy {

using detail::convert;
using detail::fail;
using detail::promote;
using detail::Promote;
using detail::promoted_operand;
using detail::set_weak;

namespace {

using LaxBinary = Array (*)(const Array&, const Array&);
using LaxUnary = Array (*)(const Array&);

Array binary(const char* fn, const ArrayLike& x, const ArrayLike& y, LaxBinary op,
             Promote how = Promote::Plain) {
  auto p = promote(fn, {x, y}, true, how);
  return set_weak(op(p.args[0], p.args[1]), p.type.weak_type);
}

Array compare(const char* fn, const ArrayLike& x, const ArrayLike& y, LaxBinary op) {
  auto p = promote(fn, {x, y});
  const Array &a = p.args[0], &b = p.args[1];
  if (is_complex(p.type.dtype) && op != lax::eq && op != lax::ne) {
    // Ordered by real part, then imaginary part, as jnp's comparisons of complex numbers.
    const Array ra = lax::real(a), rb = lax::real(b);
    return lax::select(lax::eq(ra, rb), op(lax::imag(a), lax::imag(b)), op(ra, rb));
  }
  return op(a, b);
}

Array unary_inexact(const char* fn, const ArrayLike& x, LaxUnary op) {
  Array a = promoted_operand(fn, x, Promote::Inexact);
  return set_weak(op(a), a.weak_type());
}

// A constant like `x` (dtype and shape).
Array c(const Array& x, double v) {
  return detail::full_as(x, v);
}

void require_integer_or_bool(const char* fn, DType t) {
  if (!is_integer(t) && t != DType::Bool)
    fail(fn, "only integer and bool types are supported, got " + detail::dtype_str(t));
}

void require_numeric(const char* fn, DType t) {
  if (t == DType::Bool) fail(fn, "not supported for bool");
}

void require_real(const char* fn, DType t) {
  if (is_complex(t)) fail(fn, "not defined for complex numbers, got " + detail::dtype_str(t));
}

DType int_of_width(DType t) {
  switch (size_of(t)) {
    case 2:
      return DType::I16;
    case 4:
      return DType::I32;
    default:
      return DType::I64;
  }
}

Array to_bool(const Array& x) {
  return convert(x, DType::Bool);
}

// x ** n for a static integer n, by repeated squaring (jax.lax.integer_pow).
Array integer_pow(const Array& x, int64_t n) {
  if (n == 0) return c(x, 1);
  const bool neg = n < 0;
  uint64_t e = static_cast<uint64_t>(neg ? -n : n);
  Array acc;
  Array base = x;
  while (true) {
    if (e & 1) acc = acc.valid() ? lax::mul(acc, base) : base;
    e >>= 1;
    if (!e) break;
    base = lax::mul(base, base);
  }
  return neg ? lax::div(c(acc, 1), acc) : acc;
}

}  // namespace

Array add(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("add", {x, y});
  if (p.type.dtype == DType::Bool)
    return lax::bitwise_or(p.args[0], p.args[1]);  // NumPy: logical or
  return set_weak(lax::add(p.args[0], p.args[1]), p.type.weak_type);
}

Array subtract(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("subtract", {x, y});
  require_numeric("subtract", p.type.dtype);
  return set_weak(lax::sub(p.args[0], p.args[1]), p.type.weak_type);
}

Array multiply(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("multiply", {x, y});
  if (p.type.dtype == DType::Bool) return lax::bitwise_and(p.args[0], p.args[1]);
  return set_weak(lax::mul(p.args[0], p.args[1]), p.type.weak_type);
}

Array divide(const ArrayLike& x, const ArrayLike& y) {
  return binary("divide", x, y, lax::div, Promote::Inexact);
}

Array true_divide(const ArrayLike& x, const ArrayLike& y) {
  return binary("true_divide", x, y, lax::div, Promote::Inexact);
}

Array floor_divide(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("floor_divide", {x, y});
  require_numeric("floor_divide", p.type.dtype);
  const Array& a = p.args[0];
  const Array& b = p.args[1];
  const DType t = p.type.dtype;
  Array out;
  if (is_unsigned_int(t)) {
    out = lax::div(a, b);
  } else if (is_signed_int(t)) {
    Array d = lax::div(a, b);
    Array r = lax::rem(a, b);
    Array signs_differ = lax::ne(lax::lt(a, c(a, 0)), lax::lt(b, c(b, 0)));
    Array fix = lax::bitwise_and(signs_differ, lax::ne(r, c(r, 0)));
    out = lax::select(fix, lax::sub(d, c(d, 1)), d);
  } else {
    // JAX's _float_divmod.
    Array m = lax::rem(a, b);
    Array d = lax::div(lax::sub(a, m), b);
    Array ind = lax::bitwise_and(lax::ne(m, c(m, 0)), lax::ne(lax::sign(b), lax::sign(m)));
    d = lax::select(ind, lax::sub(d, c(d, 1)), d);
    out = lax::round(d);
  }
  return set_weak(out, p.type.weak_type);
}

Array remainder(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("remainder", {x, y});
  require_numeric("remainder", p.type.dtype);
  const Array& a = p.args[0];
  const Array& b = p.args[1];
  Array r = lax::rem(a, b);
  if (!is_unsigned_int(p.type.dtype)) {
    Array do_plus =
        lax::bitwise_and(lax::ne(lax::lt(r, c(r, 0)), lax::lt(b, c(b, 0))), lax::ne(r, c(r, 0)));
    r = lax::select(do_plus, lax::add(r, b), r);
  }
  return set_weak(r, p.type.weak_type);
}

Array mod(const ArrayLike& x, const ArrayLike& y) {
  return remainder(x, y);
}

Array fmod(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("fmod", {x, y});
  require_numeric("fmod", p.type.dtype);
  return set_weak(lax::rem(p.args[0], p.args[1]), p.type.weak_type);
}

Array power(const ArrayLike& x, const ArrayLike& y) {
  if (y.is_scalar() && y.scalar().kind == Scalar::Kind::Int) {
    auto p = promote("power", {x, y}, false);
    Array a = p.args[0];
    require_numeric("power", a.dtype());
    if (y.scalar().i < 0 && !is_float(a.dtype()) && !is_complex(a.dtype()))
      fail("power", "integers to negative integer powers are not allowed");
    return set_weak(integer_pow(a, y.scalar().i), p.type.weak_type);
  }
  auto p = promote("power", {x, y});
  require_numeric("power", p.type.dtype);
  return set_weak(lax::pow(p.args[0], p.args[1]), p.type.weak_type);
}

Array float_power(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("float_power", {x, y}, true, Promote::Inexact);
  return set_weak(lax::pow(p.args[0], p.args[1]), p.type.weak_type);
}

Array maximum(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("maximum", {x, y});
  if (p.type.dtype == DType::Bool) return lax::bitwise_or(p.args[0], p.args[1]);
  return set_weak(lax::max(p.args[0], p.args[1]), p.type.weak_type);
}

Array minimum(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("minimum", {x, y});
  if (p.type.dtype == DType::Bool) return lax::bitwise_and(p.args[0], p.args[1]);
  return set_weak(lax::min(p.args[0], p.args[1]), p.type.weak_type);
}

Array arctan2(const ArrayLike& x, const ArrayLike& y) {
  return binary("arctan2", x, y, lax::atan2, Promote::Inexact);
}

Array hypot(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("hypot", {x, y}, true, Promote::Inexact);
  Array a = lax::abs(p.args[0]);
  Array b = lax::abs(p.args[1]);
  Array hi = lax::max(a, b);
  Array lo = lax::min(a, b);
  Array zero = lax::eq(hi, c(hi, 0));
  Array safe = lax::select(zero, c(hi, 1), hi);
  Array ratio = lax::div(lo, safe);
  Array r = lax::mul(hi, lax::sqrt(lax::add(c(hi, 1), lax::mul(ratio, ratio))));
  r = lax::select(zero, hi, r);
  // inf wins over NaN, as in C's hypot
  Array inf = lax::bitwise_or(lax::eq(a, c(a, INFINITY)), lax::eq(b, c(b, INFINITY)));
  return set_weak(lax::select(inf, c(r, INFINITY), r), p.type.weak_type);
}

Array copysign(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("copysign", {x, y}, true, Promote::Inexact);
  Array mag = lax::abs(p.args[0]);
  return set_weak(lax::select(signbit(p.args[1]), lax::neg(mag), mag), p.type.weak_type);
}

Array negative(const ArrayLike& x) {
  Array a = promoted_operand("negative", x);
  require_numeric("negative", a.dtype());
  return set_weak(lax::neg(a), a.weak_type());
}

Array positive(const ArrayLike& x) {
  return promoted_operand("positive", x);
}

Array abs(const ArrayLike& x) {
  Array a = promoted_operand("abs", x);
  if (is_unsigned_int(a.dtype()) || a.dtype() == DType::Bool) return a;
  return set_weak(lax::abs(a), a.weak_type());
}

Array absolute(const ArrayLike& x) {
  return abs(x);
}

Array sign(const ArrayLike& x) {
  Array a = promoted_operand("sign", x);
  if (a.dtype() == DType::Bool) return a;
  if (is_unsigned_int(a.dtype()))
    return set_weak(convert(lax::ne(a, c(a, 0)), a.dtype()), a.weak_type());
  return set_weak(lax::sign(a), a.weak_type());
}

Array square(const ArrayLike& x) {
  Array a = promoted_operand("square", x);
  require_numeric("square", a.dtype());
  return set_weak(lax::mul(a, a), a.weak_type());
}

Array reciprocal(const ArrayLike& x) {
  Array a = promoted_operand("reciprocal", x, Promote::Inexact);
  return set_weak(lax::div(c(a, 1), a), a.weak_type());
}

Array exp(const ArrayLike& x) {
  return unary_inexact("exp", x, lax::exp);
}
Array exp2(const ArrayLike& x) {
  Array a = promoted_operand("exp2", x, Promote::Inexact);
  return set_weak(lax::exp(lax::mul(a, c(a, std::numbers::ln2))), a.weak_type());
}
Array expm1(const ArrayLike& x) {
  return unary_inexact("expm1", x, lax::expm1);
}
Array log(const ArrayLike& x) {
  return unary_inexact("log", x, lax::log);
}
Array log2(const ArrayLike& x) {
  Array a = promoted_operand("log2", x, Promote::Inexact);
  return set_weak(lax::div(lax::log(a), c(a, std::numbers::ln2)), a.weak_type());
}
Array log10(const ArrayLike& x) {
  Array a = promoted_operand("log10", x, Promote::Inexact);
  return set_weak(lax::div(lax::log(a), c(a, std::numbers::ln10)), a.weak_type());
}
Array log1p(const ArrayLike& x) {
  return unary_inexact("log1p", x, lax::log1p);
}
Array sqrt(const ArrayLike& x) {
  return unary_inexact("sqrt", x, lax::sqrt);
}
Array rsqrt(const ArrayLike& x) {
  return unary_inexact("rsqrt", x, lax::rsqrt);
}
Array cbrt(const ArrayLike& x) {
  return unary_inexact("cbrt", x, lax::cbrt);
}
Array sin(const ArrayLike& x) {
  return unary_inexact("sin", x, lax::sin);
}
Array cos(const ArrayLike& x) {
  return unary_inexact("cos", x, lax::cos);
}
Array tan(const ArrayLike& x) {
  return unary_inexact("tan", x, lax::tan);
}
Array tanh(const ArrayLike& x) {
  return unary_inexact("tanh", x, lax::tanh);
}

Array arcsin(const ArrayLike& x) {
  Array a = promoted_operand("arcsin", x, Promote::Inexact);
  if (is_complex(a.dtype())) return set_weak(lax::asin(a), a.weak_type());
  Array r = lax::atan2(a, lax::sqrt(lax::sub(c(a, 1), lax::mul(a, a))));
  return set_weak(r, a.weak_type());
}
Array arccos(const ArrayLike& x) {
  Array a = promoted_operand("arccos", x, Promote::Inexact);
  if (is_complex(a.dtype())) return set_weak(lax::acos(a), a.weak_type());
  Array r = lax::atan2(lax::sqrt(lax::sub(c(a, 1), lax::mul(a, a))), a);
  return set_weak(r, a.weak_type());
}
Array arctan(const ArrayLike& x) {
  Array a = promoted_operand("arctan", x, Promote::Inexact);
  if (is_complex(a.dtype())) return set_weak(lax::atan(a), a.weak_type());
  return set_weak(lax::atan2(a, c(a, 1)), a.weak_type());
}
Array sinh(const ArrayLike& x) {
  Array a = promoted_operand("sinh", x, Promote::Inexact);
  Array r = lax::mul(lax::sub(lax::expm1(a), lax::expm1(lax::neg(a))), c(a, 0.5));
  return set_weak(r, a.weak_type());
}
Array cosh(const ArrayLike& x) {
  Array a = promoted_operand("cosh", x, Promote::Inexact);
  Array r = lax::mul(lax::add(lax::exp(a), lax::exp(lax::neg(a))), c(a, 0.5));
  return set_weak(r, a.weak_type());
}
Array arcsinh(const ArrayLike& x) {
  Array a = promoted_operand("arcsinh", x, Promote::Inexact);
  if (is_complex(a.dtype())) return set_weak(lax::asinh(a), a.weak_type());
  Array m = lax::abs(a);
  Array r = lax::log(lax::add(m, lax::sqrt(lax::add(lax::mul(m, m), c(m, 1)))));
  return set_weak(lax::mul(lax::sign(a), r), a.weak_type());
}
Array arccosh(const ArrayLike& x) {
  Array a = promoted_operand("arccosh", x, Promote::Inexact);
  if (is_complex(a.dtype())) return set_weak(lax::acosh(a), a.weak_type());
  Array r = lax::log(lax::add(a, lax::sqrt(lax::mul(lax::sub(a, c(a, 1)), lax::add(a, c(a, 1))))));
  return set_weak(r, a.weak_type());
}
Array arctanh(const ArrayLike& x) {
  Array a = promoted_operand("arctanh", x, Promote::Inexact);
  if (is_complex(a.dtype())) return set_weak(lax::atanh(a), a.weak_type());
  Array r = lax::mul(c(a, 0.5), lax::log1p(lax::div(lax::mul(c(a, 2), a), lax::sub(c(a, 1), a))));
  return set_weak(r, a.weak_type());
}

Array floor(const ArrayLike& x) {
  Array a = promoted_operand("floor", x);
  require_real("floor", a.dtype());
  if (!is_float(a.dtype())) return a;
  return set_weak(lax::floor(a), a.weak_type());
}
Array ceil(const ArrayLike& x) {
  Array a = promoted_operand("ceil", x);
  require_real("ceil", a.dtype());
  if (!is_float(a.dtype())) return a;
  return set_weak(lax::ceil(a), a.weak_type());
}
Array trunc(const ArrayLike& x) {
  Array a = promoted_operand("trunc", x);
  require_real("trunc", a.dtype());
  if (!is_float(a.dtype())) return a;
  Array r = lax::select(lax::lt(a, c(a, 0)), lax::ceil(a), lax::floor(a));
  return set_weak(r, a.weak_type());
}
Array rint(const ArrayLike& x) {
  return round(x, 0);
}

Array round(const ArrayLike& x, int decimals) {
  Array a = promoted_operand("round", x);
  require_real("round", a.dtype());
  if (a.dtype() == DType::Bool) return a;
  if (!is_float(a.dtype())) {
    if (decimals >= 0) return a;
    // Round in floating point and convert back, as JAX does for integers.
    const DType ft = size_of(a.dtype()) >= 4 ? DType::F64 : DType::F32;
    Array f = convert(a, ft);
    const double factor = std::pow(10.0, -decimals);
    Array r = lax::mul(lax::round(lax::div(f, c(f, factor)), false), c(f, factor));
    return set_weak(convert(r, a.dtype()), a.weak_type());
  }
  if (decimals == 0) return set_weak(lax::round(a, false), a.weak_type());
  // f16/bf16 are scaled in f32 so that the factor does not overflow.
  const DType ct = size_of(a.dtype()) < 4 ? DType::F32 : a.dtype();
  Array f = convert(a, ct);
  const double factor = std::pow(10.0, decimals);
  Array r = lax::div(lax::round(lax::mul(f, c(f, factor)), false), c(f, factor));
  return set_weak(convert(r, a.dtype()), a.weak_type());
}

Array clip(const ArrayLike& x, const std::optional<ArrayLike>& min,
           const std::optional<ArrayLike>& max) {
  Array r = x.to_array();
  if (min) r = maximum(*min, r);
  if (max) r = minimum(*max, r);
  return r;
}

Array where(const ArrayLike& condition, const ArrayLike& x, const ArrayLike& y) {
  Array cond = to_bool(condition.to_array());
  std::vector<Shape> shapes{cond.shape(), x.shape(), y.shape()};
  const Shape s = detail::broadcast_shapes("where", shapes);
  auto p = promote("where", {x, y}, false);
  Array a = detail::broadcast_to_shape(p.args[0], s);
  Array b = detail::broadcast_to_shape(p.args[1], s);
  return set_weak(lax::select(detail::broadcast_to_shape(cond, s), a, b), p.type.weak_type);
}

Array equal(const ArrayLike& x, const ArrayLike& y) {
  return compare("equal", x, y, lax::eq);
}
Array not_equal(const ArrayLike& x, const ArrayLike& y) {
  return compare("not_equal", x, y, lax::ne);
}
Array less(const ArrayLike& x, const ArrayLike& y) {
  return compare("less", x, y, lax::lt);
}
Array less_equal(const ArrayLike& x, const ArrayLike& y) {
  return compare("less_equal", x, y, lax::le);
}
Array greater(const ArrayLike& x, const ArrayLike& y) {
  return compare("greater", x, y, lax::gt);
}
Array greater_equal(const ArrayLike& x, const ArrayLike& y) {
  return compare("greater_equal", x, y, lax::ge);
}

// Of a complex x: finite when both parts are, NaN or infinite when either part is (as JAX).
Array isfinite(const ArrayLike& x) {
  Array a = x.to_array();
  if (is_complex(a.dtype()))
    return lax::bitwise_and(isfinite(lax::real(a)), isfinite(lax::imag(a)));
  if (!is_float(a.dtype())) return lax::full(a.shape(), 1, DType::Bool);
  return lax::is_finite(a);
}
Array isnan(const ArrayLike& x) {
  Array a = x.to_array();
  if (is_complex(a.dtype())) return lax::bitwise_or(isnan(lax::real(a)), isnan(lax::imag(a)));
  if (!is_float(a.dtype())) return lax::full(a.shape(), 0, DType::Bool);
  return lax::ne(a, a);
}
Array isinf(const ArrayLike& x) {
  Array a = x.to_array();
  if (is_complex(a.dtype())) return lax::bitwise_or(isinf(lax::real(a)), isinf(lax::imag(a)));
  if (!is_float(a.dtype())) return lax::full(a.shape(), 0, DType::Bool);
  return lax::eq(lax::abs(a), c(a, INFINITY));
}
Array signbit(const ArrayLike& x) {
  Array a = x.to_array();
  require_real("signbit", a.dtype());
  if (is_unsigned_int(a.dtype()) || a.dtype() == DType::Bool)
    return lax::full(a.shape(), 0, DType::Bool);
  if (is_signed_int(a.dtype())) return lax::lt(a, c(a, 0));
  Array bits = lax::bitcast_convert_type(a, int_of_width(a.dtype()));
  return lax::lt(bits, c(bits, 0));
}

Array isclose(const ArrayLike& x, const ArrayLike& y, double rtol, double atol, bool equal_nan) {
  auto p = promote("isclose", {x, y});
  const Array& a = p.args[0];
  const Array& b = p.args[1];
  if (!is_float(p.type.dtype) && !is_complex(p.type.dtype)) return lax::eq(a, b);
  // Moduli, for complex numbers too (real tolerances).
  const Array abs_b = lax::abs(b);
  Array tol = lax::add(c(abs_b, atol), lax::mul(c(abs_b, rtol), abs_b));
  Array out = lax::le(lax::abs(lax::sub(a, b)), tol);
  // Infinities are close only to themselves.
  Array inf = lax::bitwise_or(isinf(a), isinf(b));
  out = lax::select(inf, lax::eq(a, b), out);
  if (equal_nan) out = lax::bitwise_or(out, lax::bitwise_and(isnan(a), isnan(b)));
  return out;
}

Array allclose(const ArrayLike& x, const ArrayLike& y, double rtol, double atol, bool equal_nan) {
  return all(isclose(x, y, rtol, atol, equal_nan));
}

Array array_equal(const ArrayLike& x, const ArrayLike& y) {
  if (x.shape() != y.shape()) return lax::full({}, 0, DType::Bool);
  return all(equal(x, y));
}

namespace {
Array logical(const char* fn, const ArrayLike& x, const ArrayLike& y, LaxBinary op) {
  std::vector<Shape> shapes{x.shape(), y.shape()};
  const Shape s = detail::broadcast_shapes(fn, shapes);
  Array a = detail::broadcast_to_shape(to_bool(x.to_array()), s);
  Array b = detail::broadcast_to_shape(to_bool(y.to_array()), s);
  return op(a, b);
}

Array bitwise(const char* fn, const ArrayLike& x, const ArrayLike& y, LaxBinary op) {
  auto p = promote(fn, {x, y});
  require_integer_or_bool(fn, p.type.dtype);
  return set_weak(op(p.args[0], p.args[1]), p.type.weak_type);
}
}  // namespace

Array logical_and(const ArrayLike& x, const ArrayLike& y) {
  return logical("logical_and", x, y, lax::bitwise_and);
}
Array logical_or(const ArrayLike& x, const ArrayLike& y) {
  return logical("logical_or", x, y, lax::bitwise_or);
}
Array logical_xor(const ArrayLike& x, const ArrayLike& y) {
  return logical("logical_xor", x, y, lax::bitwise_xor);
}
Array logical_not(const ArrayLike& x) {
  return lax::bitwise_not(to_bool(x.to_array()));
}

Array bitwise_and(const ArrayLike& x, const ArrayLike& y) {
  return bitwise("bitwise_and", x, y, lax::bitwise_and);
}
Array bitwise_or(const ArrayLike& x, const ArrayLike& y) {
  return bitwise("bitwise_or", x, y, lax::bitwise_or);
}
Array bitwise_xor(const ArrayLike& x, const ArrayLike& y) {
  return bitwise("bitwise_xor", x, y, lax::bitwise_xor);
}
Array bitwise_not(const ArrayLike& x) {
  Array a = promoted_operand("bitwise_not", x);
  require_integer_or_bool("bitwise_not", a.dtype());
  return set_weak(lax::bitwise_not(a), a.weak_type());
}
Array invert(const ArrayLike& x) {
  return bitwise_not(x);
}
Array left_shift(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("left_shift", {x, y});
  if (!is_integer(p.type.dtype))
    fail("left_shift", "only integer types are supported, got " + detail::dtype_str(p.type.dtype));
  return set_weak(lax::shift_left(p.args[0], p.args[1]), p.type.weak_type);
}
Array right_shift(const ArrayLike& x, const ArrayLike& y) {
  auto p = promote("right_shift", {x, y});
  if (!is_integer(p.type.dtype))
    fail("right_shift", "only integer types are supported, got " + detail::dtype_str(p.type.dtype));
  Array r = is_signed_int(p.type.dtype) ? lax::shift_right_arithmetic(p.args[0], p.args[1])
                                        : lax::shift_right_logical(p.args[0], p.args[1]);
  return set_weak(r, p.type.weak_type);
}

}  // namespace cujax::numpy

namespace cujax {

#define CUJAX_NUMPY_DEFINE_OPERATOR(op, fn)               \
  Array operator op(const Array& x, const Array& y) {     \
    return numpy::fn(x, y);                               \
  }                                                       \
  Array operator op(const Array& x, const ArrayLike& y) { \
    return numpy::fn(x, y);                               \
  }                                                       \
  Array operator op(const ArrayLike& x, const Array& y) { \
    return numpy::fn(x, y);                               \
  }
CUJAX_NUMPY_DEFINE_OPERATOR(+, add)
CUJAX_NUMPY_DEFINE_OPERATOR(-, subtract)
CUJAX_NUMPY_DEFINE_OPERATOR(*, multiply)
CUJAX_NUMPY_DEFINE_OPERATOR(/, divide)
CUJAX_NUMPY_DEFINE_OPERATOR(%, remainder)
CUJAX_NUMPY_DEFINE_OPERATOR(&, bitwise_and)
CUJAX_NUMPY_DEFINE_OPERATOR(|, bitwise_or)
CUJAX_NUMPY_DEFINE_OPERATOR(^, bitwise_xor)
CUJAX_NUMPY_DEFINE_OPERATOR(==, equal)
CUJAX_NUMPY_DEFINE_OPERATOR(!=, not_equal)
CUJAX_NUMPY_DEFINE_OPERATOR(<, less)
CUJAX_NUMPY_DEFINE_OPERATOR(<=, less_equal)
CUJAX_NUMPY_DEFINE_OPERATOR(>, greater)
CUJAX_NUMPY_DEFINE_OPERATOR(>=, greater_equal)
#undef CUJAX_NUMPY_DEFINE_OPERATOR

Array operator-(const Array& x) {
  return numpy::negative(x);
}
Array operator+(const Array& x) {
  return numpy::positive(x);
}
Array operator~(const Array& x) {
  return numpy::bitwise_not(x);
}

Array& operator+=(Array& x, const ArrayLike& y) {
  x = numpy::add(x, y);
  return x;
}
Array& operator-=(Array& x, const ArrayLike& y) {
  x = numpy::subtract(x, y);
  return x;
}
Array& operator*=(Array& x, const ArrayLike& y) {
  x = numpy::multiply(x, y);
  return x;
}
Array& operator/=(Array& x, const ArrayLike& y) {
  x = numpy::divide(x, y);
  return x;
}

}  // namespace cujax
