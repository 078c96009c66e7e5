// Element-wise ops: arithmetic, comparisons, math functions, select/clamp and conversions.
#include <cmath>
#include <limits>
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

// Horner's rule: c[0] x^(n-1) + ... + c[n-1].
Array polynomial(const Array& x, const std::vector<double>& coefficients) {
  Array p = like(x, coefficients[0]);
  for (size_t i = 1; i < coefficients.size(); ++i) p = add(mul(p, x), like(x, coefficients[i]));
  return p;
}

// Runs `f` on x upcast to f32 for f16/bf16 inputs, as XLA does for these functions.
template <class F>
Array upcast_f32(const Array& x, F&& f) {
  if (x.dtype() == DType::F16 || x.dtype() == DType::BF16)
    return convert_element_type(f(convert_element_type(x, DType::F32)), x.dtype());
  return f(x);
}

// erf for f32: XLA's rational approximation x P(x^2) / Q(x^2) on x clamped to [-4, 4].
Array erf_f32(const Array& x) {
  static const std::vector<double> alpha = {
      -2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06, -5.69250639462346e-05,
      -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02};
  static const std::vector<double> beta = {-1.45660718464996e-05, -2.13374055278905e-04,
                                           -1.68282697438203e-03, -7.37332916720468e-03,
                                           -1.42647390514189e-02};
  const Array c = clamp(like(x, -4.0), x, like(x, 4.0));
  const Array c2 = mul(c, c);
  const Array r = div(mul(c, polynomial(c2, alpha)), polynomial(c2, beta));
  return clamp(like(x, -1.0), r, like(x, 1.0));
}

// f64 erf/erfc: the Cephes approximations XLA uses (erf on |x| < 1, erfc on |x| >= 1).
Array erf_f64_small(const Array& x) {
  static const std::vector<double> t = {9.60497373987051638749E0, 9.00260197203842689217E1,
                                        2.23200534594684319226E3, 7.00332514112805075473E3,
                                        5.55923013010394962768E4};
  static const std::vector<double> u = {1.00000000000000000000E0, 3.35617141647503099647E1,
                                        5.21357949780152679795E2, 4.59432382970980127987E3,
                                        2.26290000613890934246E4, 4.92673942608635921086E4};
  const Array x2 = mul(x, x);
  return div(mul(x, polynomial(x2, t)), polynomial(x2, u));
}

Array erfc_f64_large(const Array& x) {
  static const std::vector<double> p = {
      2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
      4.86371970985681366614E1,   1.96520832956077098242E2,  5.26445194995477358631E2,
      9.34528527171957607540E2,   1.02755188689515710272E3,  5.57535335369399327526E2};
  static const std::vector<double> q = {
      1.00000000000000000000E0, 1.32281951154744992508E1, 8.67072140885989742329E1,
      3.54937778887819891062E2, 9.75708501743205489753E2, 1.82390916687909736289E3,
      2.24633760818710981792E3, 1.65666309194161350182E3, 5.57535340817727675546E2};
  static const std::vector<double> r = {5.64189583547755073984E-1, 1.27536670759978104416E0,
                                        5.01905042251180477414E0,  6.16021097993053585195E0,
                                        7.40974269950448939160E0,  2.97886665372100240670E0};
  static const std::vector<double> s = {1.00000000000000000000E0, 2.26052863220117276590E0,
                                        9.39603524938001434673E0, 1.20489539808096656605E1,
                                        1.70814450747565897222E1, 9.60896809063285878198E0,
                                        3.36907645100081516050E0};
  const double maxlog = 7.09782712893383996843E2;
  const Array z = neg(mul(x, x));
  const Array ax = abs(x);
  const Array ez = exp(z);
  const Array near = div(mul(ez, polynomial(ax, p)), polynomial(ax, q));
  const Array far = div(mul(ez, polynomial(ax, r)), polynomial(ax, s));
  const Array approx = select(lt(ax, like(x, 8.0)), near, far);
  const Array zero = like(x, 0.0);
  const Array clamped = select(lt(z, like(x, -maxlog)), zero, approx);
  return select(lt(x, zero), sub(like(x, 2.0), clamped), clamped);
}

// f32 erfc on |x| >= 1 (Cephes, as XLA).
Array erfc_f32_large(const Array& x) {
  static const std::vector<double> p = {
      +2.326819970068386E-2, -1.387039388740657E-1, +3.687424674597105E-1,
      -5.824733027278666E-1, +6.210004621745983E-1, -4.944515323274145E-1,
      +3.404879937665872E-1, -2.741127028184656E-1, +5.638259427386472E-1};
  static const std::vector<double> r = {
      -1.047766399936249E+1, +1.297719955372516E+1, -7.495518717768503E+0, +2.921019019210786E+0,
      -1.015265279202700E+0, +4.218463358204948E-1, -2.820767439740514E-1, +5.641895067754075E-1};
  const double maxlog = 88.72283905206835;
  const Array x2 = mul(x, x);
  const Array z = neg(x2);
  const Array ax = abs(x);
  const Array one = like(x, 1.0);
  const Array inv_x2 = div(one, x2);
  const Array scale = mul(exp(z), div(one, ax));
  const Array poly = select(lt(ax, like(x, 2.0)), polynomial(inv_x2, p), polynomial(inv_x2, r));
  const Array approx = mul(scale, poly);
  const Array zero = like(x, 0.0);
  const Array clamped = select(lt(z, like(x, -maxlog)), zero, approx);
  return select(lt(x, zero), sub(like(x, 2.0), clamped), clamped);
}

// f32 erf on |x| <= 1 (Cephes, as XLA's erfc uses it).
Array erf_f32_small(const Array& x) {
  static const std::vector<double> t = {
      +7.853861353153693E-5, -8.010193625184903E-4, +5.188327685732524E-3, -2.685381193529856E-2,
      +1.128358514861418E-1, -3.761262582423300E-1, +1.128379165726710E+0};
  return mul(x, polynomial(mul(x, x), t));
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
  return binary("rem", "stablehlo.remainder", x, y, Kinds::Num);
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
Array abs(const Array& x) {
  return unary("abs", "stablehlo.abs", x, Kinds::SignedOrFloat);
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
  return unary("exp", "stablehlo.exponential", x, Kinds::Float);
}
Array expm1(const Array& x) {
  return unary("expm1", "stablehlo.exponential_minus_one", x, Kinds::Float);
}
Array log(const Array& x) {
  return unary("log", "stablehlo.log", x, Kinds::Float);
}
Array log1p(const Array& x) {
  return unary("log1p", "stablehlo.log_plus_one", x, Kinds::Float);
}
Array tanh(const Array& x) {
  return unary("tanh", "stablehlo.tanh", x, Kinds::Float);
}
Array logistic(const Array& x) {
  return unary("logistic", "stablehlo.logistic", x, Kinds::Float);
}
Array sin(const Array& x) {
  return unary("sin", "stablehlo.sine", x, Kinds::Float);
}
Array cos(const Array& x) {
  return unary("cos", "stablehlo.cosine", x, Kinds::Float);
}
Array tan(const Array& x) {
  return unary("tan", "stablehlo.tan", x, Kinds::Float);
}
Array sqrt(const Array& x) {
  return unary("sqrt", "stablehlo.sqrt", x, Kinds::Float);
}
Array rsqrt(const Array& x) {
  return unary("rsqrt", "stablehlo.rsqrt", x, Kinds::Float);
}
Array cbrt(const Array& x) {
  return unary("cbrt", "stablehlo.cbrt", x, Kinds::Float);
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

Array erf(const Array& x) {
  check_dtype("erf", x, Kinds::Float);
  if (x.dtype() == DType::F64) {
    const Array one = like(x, 1.0);
    return select(lt(abs(x), one), erf_f64_small(x), sub(one, erfc_f64_large(x)));
  }
  return upcast_f32(x, erf_f32);
}

Array erfc(const Array& x) {
  check_dtype("erfc", x, Kinds::Float);
  if (x.dtype() == DType::F64) {
    const Array one = like(x, 1.0);
    return select(lt(abs(x), one), sub(one, erf_f64_small(x)), erfc_f64_large(x));
  }
  return upcast_f32(x, [](const Array& v) {
    const Array one = like(v, 1.0);
    return select(lt(abs(v), one), sub(one, erf_f32_small(v)), erfc_f32_large(v));
  });
}

Array erf_inv(const Array& x) {
  check_dtype("erf_inv", x, Kinds::Float);
  // Giles' single-precision approximation (as XLA's ErfInv32), in w = -log(1 - x^2); f64 uses
  // the same form with the double-precision coefficients.
  if (x.dtype() == DType::F64) {
    static const std::vector<double> w_small = {
        -3.6444120640178196996e-21, -1.685059138182016589e-19,  1.2858480715256400167e-18,
        1.115787767802518096e-17,   -1.333171662854620906e-16,  2.0972767875968561637e-17,
        6.6376381343583238325e-15,  -4.0545662729752068639e-14, -8.1519341976054721522e-14,
        2.6335093153082322977e-12,  -1.2975133253453532498e-11, -5.4154120542946279317e-11,
        1.051212273321532285e-09,   -4.1126339803469836976e-09, -2.9070369957882005086e-08,
        4.2347877827932403518e-07,  -1.3654692000834678645e-06, -1.3882523362786468719e-05,
        0.0001867342080340571352,   -0.00074070253416626697512, -0.0060336708714301490533,
        0.24015818242558961693,     1.6536545626831027356};
    static const std::vector<double> w_mid = {
        2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
        1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
        2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
        6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
        0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
        -0.0037512085075692412107, 0.005370914553590063617,   1.0052589676941592334,
        3.0838856104922207635};
    static const std::vector<double> w_large = {
        -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
        -3.7894654401267369937e-09, 7.6157012080783393804e-09,  -1.4960026627149240478e-08,
        2.9147953450901080826e-08,  -6.7711997758452339498e-08, 2.2900482228026654717e-07,
        -9.9298272942317002539e-07, 4.5260625972231537039e-06,  -1.9681778105531670567e-05,
        7.5995277030017761139e-05,  -0.00021503011930044477347, -0.00013871931833623122026,
        1.0103004648645343977,      4.8499064014085844221};
    const Array one = like(x, 1.0);
    const Array w = neg(log1p(neg(mul(x, x))));
    const Array small = polynomial(sub(w, like(x, 3.125)), w_small);
    const Array sw = sqrt(w);
    const Array mid = polynomial(sub(sw, like(x, 3.25)), w_mid);
    const Array large = polynomial(sub(sw, like(x, 5.0)), w_large);
    const Array p = select(lt(w, like(x, 6.25)), small, select(lt(w, like(x, 16.0)), mid, large));
    const Array result = mul(p, x);
    const Array inf = like(x, INFINITY);
    return select(eq(abs(x), one), mul(x, inf), result);
  }
  return upcast_f32(x, [](const Array& v) {
    static const std::vector<double> w_small = {2.81022636e-08,  3.43273939e-07, -3.5233877e-06,
                                                -4.39150654e-06, 0.00021858087,  -0.00125372503,
                                                -0.00417768164,  0.246640727,    1.50140941};
    static const std::vector<double> w_large = {-0.000200214257, 0.000100950558, 0.00134934322,
                                                -0.00367342844,  0.00573950773,  -0.0076224613,
                                                0.00943887047,   1.00167406,     2.83297682};
    const Array w = neg(log1p(neg(mul(v, v))));
    const Array small = polynomial(sub(w, like(v, 2.5)), w_small);
    const Array large = polynomial(sub(sqrt(w), like(v, 3.0)), w_large);
    const Array p = select(lt(w, like(v, 5.0)), small, large);
    const Array result = mul(p, v);
    return select(eq(abs(v), like(v, 1.0)), mul(v, like(v, INFINITY)), result);
  });
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
  if (negative && !is_float(x.dtype()))
    fail("integer_pow", "a negative exponent needs a floating-point operand, got " + type_str(x));
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
  check_dtype("exp2", x, Kinds::Float);
  return exp(mul(like(x, std::numbers::ln2), x));
}

// The inverse trigonometric and hyperbolic functions, as CHLO decomposes them.
Array asin(const Array& x) {
  check_dtype("asin", x, Kinds::Float);
  // asin(x) = 2 atan2(x, 1 + sqrt(1 - x^2))
  const Array one = like(x, 1.0);
  return mul(like(x, 2.0), atan2(x, add(one, sqrt(sub(one, mul(x, x))))));
}

Array acos(const Array& x) {
  check_dtype("acos", x, Kinds::Float);
  // acos(x) = 2 atan2(sqrt(1 - x^2), 1 + x) for x != -1, pi for x = -1
  const Array one = like(x, 1.0);
  const Array r = mul(like(x, 2.0), atan2(sqrt(sub(one, mul(x, x))), add(one, x)));
  return select(ne(x, like(x, -1.0)), r, like(x, std::numbers::pi));
}

Array atan(const Array& x) {
  check_dtype("atan", x, Kinds::Float);
  return atan2(x, like(x, 1.0));
}

Array sinh(const Array& x) {
  check_dtype("sinh", x, Kinds::Float);
  return upcast_f32(x, [](const Array& v) {
    // For |x| < 1, (e^x - e^-x)/2 loses precision: use expm1. Large |x|: e^(|x| + log 1/2)
    // avoids overflowing before the halving.
    const Array half = like(v, 0.5);
    const Array big =
        sub(exp(add(v, like(v, -std::numbers::ln2))), exp(sub(neg(v), like(v, std::numbers::ln2))));
    const Array e = expm1(abs(v));
    const Array small_abs = mul(half, add(e, div(e, add(e, like(v, 1.0)))));
    const Array small = mul(sign(v), small_abs);
    return select(lt(abs(v), like(v, 1.0)), small, big);
  });
}

Array cosh(const Array& x) {
  check_dtype("cosh", x, Kinds::Float);
  return upcast_f32(x, [](const Array& v) {
    // e^(x + log 1/2) + e^(-x + log 1/2)
    return add(exp(add(v, like(v, -std::numbers::ln2))),
               exp(sub(neg(v), like(v, std::numbers::ln2))));
  });
}

Array asinh(const Array& x) {
  check_dtype("asinh", x, Kinds::Float);
  return upcast_f32(x, [](const Array& v) {
    // sign(x) log(|x| + sqrt(x^2 + 1)), with log(2|x|) for large |x| and log1p for small.
    const Array ax = abs(v);
    const Array one = like(v, 1.0);
    const double big = std::sqrt(static_cast<double>(std::numeric_limits<float>::max()));
    const Array large = add(log(ax), like(v, std::numbers::ln2));
    const Array a2 = mul(ax, ax);
    const Array small = log1p(add(ax, div(a2, add(one, sqrt(add(a2, one))))));
    const Array limit = like(v, v.dtype() == DType::F64 ? 1e150 : big);
    return mul(sign(v), select(ge(ax, limit), large, small));
  });
}

Array acosh(const Array& x) {
  check_dtype("acosh", x, Kinds::Float);
  return upcast_f32(x, [](const Array& v) {
    // log(x + sqrt((x + 1)(x - 1))), with log(2x) for large x; NaN for x < 1.
    const Array one = like(v, 1.0);
    const Array limit = like(v, v.dtype() == DType::F64 ? 1e150 : 1e18);
    const Array large = add(log(v), like(v, std::numbers::ln2));
    const Array xm1 = sub(v, one);
    const Array small = log1p(add(xm1, sqrt(mul(add(v, one), xm1))));
    const Array r = select(ge(v, limit), large, small);
    return select(lt(v, one), like(v, NAN), r);
  });
}

Array atanh(const Array& x) {
  check_dtype("atanh", x, Kinds::Float);
  return upcast_f32(x, [](const Array& v) {
    // 0.5 (log1p(x) - log1p(-x)); NaN for |x| > 1.
    const Array r = mul(like(v, 0.5), sub(log1p(v), log1p(neg(v))));
    return select(gt(abs(v), like(v, 1.0)), like(v, NAN), r);
  });
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
  check_dtype("clamp", x, Kinds::Any);
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
