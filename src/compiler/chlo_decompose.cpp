#include "compiler/chlo_decompose.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <unordered_map>

#include "compiler/module_copy.h"
#include "cujax/core/error.h"

namespace cujax::compiler {

namespace {

using V = ir::Value*;
[[noreturn]] void unsupported(const ir::Operation& op, const std::string& why);
using ValueMap = std::unordered_map<const ir::Value*, ir::Value*>;

// Appends StableHLO ops to a block. Operands of a binary op share a type; constants take the
// type of the value they combine with.
class Builder {
 public:
  explicit Builder(ir::Block& block) : block_(block) {}

  V op(std::string name, std::vector<V> operands, const ir::Type& type,
       std::vector<ir::NamedAttribute> attrs = {}) {
    auto o = ir::make_op(std::move(name), std::move(operands), {type});
    o->attributes = std::move(attrs);
    return block_.push_back(std::move(o))->result(0);
  }
  V unary(std::string name, V x) { return op(std::move(name), {x}, x->type); }
  V binary(std::string name, V x, V y) { return op(std::move(name), {x, y}, x->type); }

  V add(V x, V y) { return binary("stablehlo.add", x, y); }
  V sub(V x, V y) { return binary("stablehlo.subtract", x, y); }
  V mul(V x, V y) { return binary("stablehlo.multiply", x, y); }
  V div(V x, V y) { return binary("stablehlo.divide", x, y); }
  V max(V x, V y) { return binary("stablehlo.maximum", x, y); }
  V min(V x, V y) { return binary("stablehlo.minimum", x, y); }
  V atan2(V x, V y) { return binary("stablehlo.atan2", x, y); }
  V and_(V x, V y) { return binary("stablehlo.and", x, y); }
  V or_(V x, V y) { return binary("stablehlo.or", x, y); }
  V shift_right_logical(V x, V y) { return binary("stablehlo.shift_right_logical", x, y); }
  V shift_right_arithmetic(V x, V y) { return binary("stablehlo.shift_right_arithmetic", x, y); }
  V neg(V x) { return unary("stablehlo.negate", x); }
  V abs(V x) { return unary("stablehlo.abs", x); }
  V sign(V x) { return unary("stablehlo.sign", x); }
  V exp(V x) { return unary("stablehlo.exponential", x); }
  V expm1(V x) { return unary("stablehlo.exponential_minus_one", x); }
  V log(V x) { return unary("stablehlo.log", x); }
  V log1p(V x) { return unary("stablehlo.log_plus_one", x); }
  V sqrt(V x) { return unary("stablehlo.sqrt", x); }
  V sin(V x) { return unary("stablehlo.sine", x); }
  V cos(V x) { return unary("stablehlo.cosine", x); }
  V tan(V x) { return unary("stablehlo.tan", x); }
  V floor(V x) { return unary("stablehlo.floor", x); }

  V compare(V x, V y, const char* direction, const char* type = nullptr) {
    const DType t = x->type.dtype;
    const char* ct = type ? type : is_float(t) ? "FLOAT" : is_signed_int(t) ? "SIGNED" : "UNSIGNED";
    return op(
        "stablehlo.compare", {x, y}, ir::Type::tensor(x->type.shape, DType::Bool),
        {{"compare_type", ir::Attribute::enum_attr("comparison_type", ct)},
         {"comparison_direction", ir::Attribute::enum_attr("comparison_direction", direction)}});
  }
  V lt(V x, V y) { return compare(x, y, "LT"); }
  V le(V x, V y) { return compare(x, y, "LE"); }
  V gt(V x, V y) { return compare(x, y, "GT"); }
  V ge(V x, V y) { return compare(x, y, "GE"); }
  V eq(V x, V y) { return compare(x, y, "EQ"); }
  V ne(V x, V y) { return compare(x, y, "NE"); }
  V not_(V x) { return unary("stablehlo.not", x); }
  V is_nan(V x) { return ne(x, x); }
  V is_inf(V x) { return eq(abs(x), cst(x, INFINITY)); }
  V is_finite(V x) {
    return op("stablehlo.is_finite", {x}, ir::Type::tensor(x->type.shape, DType::Bool));
  }
  V select(V p, V t, V f) { return op("stablehlo.select", {p, t, f}, t->type); }

  V convert(V x, DType t) {
    if (x->type.dtype == t) return x;
    return op("stablehlo.convert", {x}, ir::Type::tensor(x->type.shape, t));
  }
  V bitcast(V x, DType t) {
    return op("stablehlo.bitcast_convert", {x}, ir::Type::tensor(x->type.shape, t));
  }
  V reshape(V x, const Shape& shape) {
    if (x->type.shape == shape) return x;
    return op("stablehlo.reshape", {x}, ir::Type::tensor(shape, x->type.dtype));
  }

  // A scalar constant broadcast to `like`'s shape, of its element type.
  V cst(V like, double value) {
    return splat(scalar_of(like->type.dtype, value), like->type.shape);
  }
  // The same from raw integer bits (exact for 64-bit masks).
  V bits(V like, uint64_t value) {
    HostTensor t(like->type.dtype, {});
    std::memcpy(t.data(), &value, size_of(like->type.dtype));  // little-endian
    return splat(t, like->type.shape);
  }
  V splat(const HostTensor& scalar, const Shape& shape) {
    V s = op("stablehlo.constant", {}, ir::Type::tensor({}, scalar.dtype()),
             {{"value", ir::Attribute::dense_elements(scalar)}});
    if (shape.empty()) return s;
    return op("stablehlo.broadcast_in_dim", {s}, ir::Type::tensor(shape, scalar.dtype()),
              {{"broadcast_dimensions", ir::Attribute::dense_array({})}});
  }

  // Horner's rule: c[0] x^(n-1) + ... + c[n-1].
  V polynomial(V x, const std::vector<double>& c) {
    V p = cst(x, c[0]);
    for (size_t i = 1; i < c.size(); ++i) p = add(mul(p, x), cst(x, c[i]));
    return p;
  }

  static HostTensor scalar_of(DType t, double v) {
    HostTensor s(t, {});
    visit_dtype(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T>)
        s.data_as<T>()[0] = static_cast<T>(static_cast<int64_t>(v));
      else
        s.data_as<T>()[0] = static_cast<T>(v);
    });
    return s;
  }

  ir::Block& block() { return block_; }

 private:
  ir::Block& block_;
};

using Unary = std::function<V(Builder&, V)>;

// f16 and bf16 computed in f32 and rounded once, as XLA's chlo legalization does.
V upcast(Builder& b, V x, const Unary& f) {
  const DType t = x->type.dtype;
  if (t == DType::F16 || t == DType::BF16) return b.convert(f(b, b.convert(x, DType::F32)), t);
  return f(b, x);
}

bool is_f64(V x) {
  return x->type.dtype == DType::F64;
}

// ---------------------------------------------------------------- error functions

// erf for f32: the rational approximation x P(x^2) / Q(x^2) on x clamped to [-4, 4].
V erf_f32(Builder& b, V x) {
  static const std::vector<double> alpha = {
      -2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06, -5.69250639462346e-05,
      -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02};
  static const std::vector<double> beta = {-1.45660718464996e-05, -2.13374055278905e-04,
                                           -1.68282697438203e-03, -7.37332916720468e-03,
                                           -1.42647390514189e-02};
  V c = b.max(b.min(x, b.cst(x, 4.0)), b.cst(x, -4.0));
  V c2 = b.mul(c, c);
  V r = b.div(b.mul(c, b.polynomial(c2, alpha)), b.polynomial(c2, beta));
  return b.max(b.min(r, b.cst(x, 1.0)), b.cst(x, -1.0));
}

// Cephes' f64 erf on |x| < 1.
V erf_f64_small(Builder& b, V x) {
  static const std::vector<double> t = {9.60497373987051638749E0, 9.00260197203842689217E1,
                                        2.23200534594684319226E3, 7.00332514112805075473E3,
                                        5.55923013010394962768E4};
  static const std::vector<double> u = {1.00000000000000000000E0, 3.35617141647503099647E1,
                                        5.21357949780152679795E2, 4.59432382970980127987E3,
                                        2.26290000613890934246E4, 4.92673942608635921086E4};
  V x2 = b.mul(x, x);
  return b.div(b.mul(x, b.polynomial(x2, t)), b.polynomial(x2, u));
}

// Cephes' f64 erfc on |x| >= 1.
V erfc_f64_large(Builder& b, V x) {
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
  V z = b.neg(b.mul(x, x));
  V ax = b.abs(x);
  V ez = b.exp(z);
  V near = b.div(b.mul(ez, b.polynomial(ax, p)), b.polynomial(ax, q));
  V far = b.div(b.mul(ez, b.polynomial(ax, r)), b.polynomial(ax, s));
  V approx = b.select(b.lt(ax, b.cst(x, 8.0)), near, far);
  V zero = b.cst(x, 0.0);
  V clamped = b.select(b.lt(z, b.cst(x, -maxlog)), zero, approx);
  return b.select(b.lt(x, zero), b.sub(b.cst(x, 2.0), clamped), clamped);
}

// Cephes' f32 erfc on |x| >= 1.
V erfc_f32_large(Builder& b, V x) {
  static const std::vector<double> p = {
      +2.326819970068386E-2, -1.387039388740657E-1, +3.687424674597105E-1,
      -5.824733027278666E-1, +6.210004621745983E-1, -4.944515323274145E-1,
      +3.404879937665872E-1, -2.741127028184656E-1, +5.638259427386472E-1};
  static const std::vector<double> r = {
      -1.047766399936249E+1, +1.297719955372516E+1, -7.495518717768503E+0, +2.921019019210786E+0,
      -1.015265279202700E+0, +4.218463358204948E-1, -2.820767439740514E-1, +5.641895067754075E-1};
  const double maxlog = 88.72283905206835;
  V x2 = b.mul(x, x);
  V z = b.neg(x2);
  V ax = b.abs(x);
  V one = b.cst(x, 1.0);
  V inv_x2 = b.div(one, x2);
  V scale = b.mul(b.exp(z), b.div(one, ax));
  V poly = b.select(b.lt(ax, b.cst(x, 2.0)), b.polynomial(inv_x2, p), b.polynomial(inv_x2, r));
  V approx = b.mul(scale, poly);
  V zero = b.cst(x, 0.0);
  V clamped = b.select(b.lt(z, b.cst(x, -maxlog)), zero, approx);
  return b.select(b.lt(x, zero), b.sub(b.cst(x, 2.0), clamped), clamped);
}

// Cephes' f32 erf on |x| <= 1.
V erf_f32_small(Builder& b, V x) {
  static const std::vector<double> t = {
      +7.853861353153693E-5, -8.010193625184903E-4, +5.188327685732524E-3, -2.685381193529856E-2,
      +1.128358514861418E-1, -3.761262582423300E-1, +1.128379165726710E+0};
  return b.mul(x, b.polynomial(b.mul(x, x), t));
}

V erf(Builder& b, V x) {
  if (is_f64(x)) {
    V one = b.cst(x, 1.0);
    return b.select(b.lt(b.abs(x), one), erf_f64_small(b, x), b.sub(one, erfc_f64_large(b, x)));
  }
  return upcast(b, x, erf_f32);
}

V erfc(Builder& b, V x) {
  if (is_f64(x)) {
    V one = b.cst(x, 1.0);
    return b.select(b.lt(b.abs(x), one), b.sub(one, erf_f64_small(b, x)), erfc_f64_large(b, x));
  }
  return upcast(b, x, [](Builder& b, V v) {
    V one = b.cst(v, 1.0);
    return b.select(b.lt(b.abs(v), one), b.sub(one, erf_f32_small(b, v)), erfc_f32_large(b, v));
  });
}

// Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011): polynomials in
// w = -log(1 - x^2), single and double precision.
V erf_inv(Builder& b, V x) {
  if (is_f64(x)) {
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
    V w = b.neg(b.log1p(b.neg(b.mul(x, x))));
    V small = b.polynomial(b.sub(w, b.cst(x, 3.125)), w_small);
    V sw = b.sqrt(w);
    V mid = b.polynomial(b.sub(sw, b.cst(x, 3.25)), w_mid);
    V large = b.polynomial(b.sub(sw, b.cst(x, 5.0)), w_large);
    V p = b.select(b.lt(w, b.cst(x, 6.25)), small, b.select(b.lt(w, b.cst(x, 16.0)), mid, large));
    V result = b.mul(p, x);
    return b.select(b.eq(b.abs(x), b.cst(x, 1.0)), b.mul(x, b.cst(x, INFINITY)), result);
  }
  return upcast(b, x, [](Builder& b, V v) {
    static const std::vector<double> w_small = {2.81022636e-08,  3.43273939e-07, -3.5233877e-06,
                                                -4.39150654e-06, 0.00021858087,  -0.00125372503,
                                                -0.00417768164,  0.246640727,    1.50140941};
    static const std::vector<double> w_large = {-0.000200214257, 0.000100950558, 0.00134934322,
                                                -0.00367342844,  0.00573950773,  -0.0076224613,
                                                0.00943887047,   1.00167406,     2.83297682};
    V w = b.neg(b.log1p(b.neg(b.mul(v, v))));
    V small = b.polynomial(b.sub(w, b.cst(v, 2.5)), w_small);
    V large = b.polynomial(b.sub(b.sqrt(w), b.cst(v, 3.0)), w_large);
    V p = b.select(b.lt(w, b.cst(v, 5.0)), small, large);
    V result = b.mul(p, v);
    return b.select(b.eq(b.abs(v), b.cst(v, 1.0)), b.mul(v, b.cst(v, INFINITY)), result);
  });
}

// ---------------------------------------------------------------- gamma functions

// Lanczos' approximation with g = 7 and 9 terms (Numerical Recipes' and Boost's choice, as in
// XLA): Gamma(z + 1) = sqrt(2 pi) t^(z + 1/2) e^-t A(z), t = z + g + 1/2.
constexpr double kLanczosGamma = 7;
constexpr double kLanczosBase = 0.99999999999980993227684700473478;
constexpr double kLanczosCoefficients[] = {
    676.520368121885098567009190444019, -1259.13921672240287047156078755283,
    771.3234287776530788486528258894,   -176.61502916214059906584551354,
    12.507343278686904814458936853,     -0.13857109526572011689554707,
    9.984369578019570859563e-6,         1.50563273514931155834e-7};

V lgamma_impl(Builder& b, V x) {
  const double pi = std::numbers::pi;
  V one = b.cst(x, 1.0);
  V half = b.cst(x, 0.5);
  V reflect = b.lt(x, half);
  V z = b.select(reflect, b.neg(x), b.sub(x, one));
  V sum = b.cst(x, kLanczosBase);
  for (int i = 0; i < 8; ++i)
    sum = b.add(sum, b.div(b.cst(x, kLanczosCoefficients[i]), b.add(b.add(z, b.cst(x, i)), one)));
  const double gh = kLanczosGamma + 0.5;
  V t = b.add(b.cst(x, gh), z);
  V log_t = b.add(b.cst(x, std::log(gh)), b.log1p(b.div(z, b.cst(x, gh))));
  V log_y = b.add(
      b.add(b.cst(x, 0.5 * std::log(2 * pi)), b.mul(b.sub(b.add(z, half), b.div(t, log_t)), log_t)),
      b.log(sum));
  // Reflection: lgamma(x) = log(pi) - log|sin(pi x)| - lgamma(1 - x), with sin's argument
  // reduced to [0, 1/2] first.
  V ax = b.abs(x);
  V frac = b.sub(ax, b.floor(ax));
  V reduced = b.select(b.gt(frac, half), b.sub(one, frac), frac);
  V denom = b.log(b.sin(b.mul(b.cst(x, pi), reduced)));
  V reflection = b.select(b.is_finite(denom), b.sub(b.sub(b.cst(x, std::log(pi)), denom), log_y),
                          b.neg(denom));
  V result = b.select(reflect, reflection, log_y);
  return b.select(b.is_inf(x), b.cst(x, INFINITY), result);
}

V lgamma(Builder& b, V x) {
  return upcast(b, x, lgamma_impl);
}

// The derivative of the Lanczos series' logarithm, with digamma's reflection formula.
V digamma_impl(Builder& b, V x) {
  const double pi = std::numbers::pi;
  V one = b.cst(x, 1.0);
  V zero = b.cst(x, 0.0);
  V reflect = b.lt(x, b.cst(x, 0.5));
  V z = b.select(reflect, b.neg(x), b.sub(x, one));
  V num = zero;
  V denom = b.cst(x, kLanczosBase);
  for (int i = 0; i < 8; ++i) {
    V zi = b.add(b.add(z, b.cst(x, i)), one);
    V c = b.cst(x, kLanczosCoefficients[i]);
    num = b.sub(num, b.div(c, b.mul(zi, zi)));
    denom = b.add(denom, b.div(c, zi));
  }
  const double gh = kLanczosGamma + 0.5;
  V t = b.add(b.cst(x, gh), z);
  V log_t = b.add(b.cst(x, std::log(gh)), b.log1p(b.div(z, b.cst(x, gh))));
  V y = b.sub(b.add(log_t, b.div(num, denom)), b.div(b.cst(x, kLanczosGamma), t));
  V reduced = b.add(x, b.abs(b.floor(b.add(x, b.cst(x, 0.5)))));
  V pix = b.mul(b.cst(x, pi), reduced);
  V reflection = b.sub(y, b.div(b.mul(b.cst(x, pi), b.cos(pix)), b.sin(pix)));
  V real = b.select(reflect, reflection, y);
  // Poles at the non-positive integers.
  V pole = b.and_(b.le(x, zero), b.eq(x, b.floor(x)));
  return b.select(pole, b.cst(x, NAN), real);
}

V digamma(Builder& b, V x) {
  return upcast(b, x, digamma_impl);
}

// Hurwitz zeta(x, q) = sum_n (q + n)^-x by Euler-Maclaurin summation: 10 terms directly, then
// the integral, half the next term and 12 Bernoulli corrections at a = q + 10 (Horner form).
V zeta_impl(Builder& b, V x, V q) {
  // (2j)! / B_2j for j = 1..12.
  static const double kRatios[] = {12.0,
                                   -720.0,
                                   30240.0,
                                   -1209600.0,
                                   47900160.0,
                                   -1.8924375803183791606e9,
                                   7.47242496e10,
                                   -2.950130727918164224e12,
                                   1.1646782814350067249e14,
                                   -4.5979787224074726105e15,
                                   1.8152105401943546773e17,
                                   -7.1661652561756670113e18};
  V one = b.cst(x, 1.0);
  V zero = b.cst(x, 0.0);
  V neg_x = b.neg(x);
  auto power = [&](V base) { return b.op("stablehlo.power", {base, neg_x}, base->type); };
  V a = q;
  V head = power(q);
  for (int n = 1; n < 10; ++n) {
    a = b.add(a, one);
    head = b.add(head, power(a));
  }
  a = b.add(a, one);
  V w = power(a);  // a^-x
  V inv_a2 = b.div(one, b.mul(a, a));
  V h = zero;
  for (int j = 12; j >= 2; --j) {
    V factor = b.mul(b.add(x, b.cst(x, 2.0 * j - 3)), b.add(x, b.cst(x, 2.0 * j - 2)));
    h = b.mul(b.mul(factor, inv_a2), b.add(h, b.cst(x, 1.0 / kRatios[j - 1])));
  }
  V tail = b.mul(b.div(b.mul(x, w), a), b.add(b.cst(x, 1.0 / kRatios[0]), h));
  V s = b.add(b.add(b.add(head, b.div(b.mul(w, a), b.sub(x, one))), b.mul(b.cst(x, 0.5), w)), tail);
  // Where the first omitted term is below the sum's precision the corrections add nothing
  // (and may be inf * 0 for large x).
  const double eps =
      is_f64(x) ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
  s = b.select(b.lt(b.abs(w), b.mul(b.abs(head), b.cst(x, eps))), head, s);
  V out = b.select(b.eq(x, one), b.cst(x, INFINITY), s);
  out = b.select(b.lt(x, one), b.cst(x, NAN), out);
  // q <= 0: defined for integer x only, with poles at the integers q.
  V q_nonpositive = b.le(q, zero);
  V x_int = b.eq(x, b.floor(x));
  out = b.select(b.and_(q_nonpositive, b.not_(x_int)), b.cst(x, NAN), out);
  V x_even = b.and_(x_int, b.eq(b.binary("stablehlo.remainder", x, b.cst(x, 2.0)), zero));
  V pole = b.and_(q_nonpositive, b.eq(q, b.floor(q)));
  return b.select(pole, b.select(x_even, b.cst(x, INFINITY), b.cst(x, NAN)), out);
}

// Both operands computed in f32 for f16/bf16.
V upcast2(Builder& b, V x, V y, V (*f)(Builder&, V, V)) {
  const DType t = x->type.dtype;
  if (t == DType::F16 || t == DType::BF16)
    return b.convert(f(b, b.convert(x, DType::F32), b.convert(y, DType::F32)), t);
  return f(b, x, y);
}

V zeta(Builder& b, V x, V q) {
  return upcast2(b, x, q, zeta_impl);
}

// polygamma(n, x) = (-1)^(n+1) n! zeta(n + 1, x) for integer n >= 1, digamma for n = 0.
V polygamma_impl(Builder& b, V n, V x) {
  V one = b.cst(x, 1.0);
  V zero = b.cst(x, 0.0);
  V n1 = b.add(n, one);
  V odd = b.ne(b.binary("stablehlo.remainder", n, b.cst(n, 2.0)), zero);
  V sign = b.select(odd, one, b.cst(x, -1.0));
  V factorial = b.exp(lgamma_impl(b, n1));
  V r = b.mul(b.mul(sign, factorial), zeta_impl(b, n1, x));
  r = b.select(b.eq(n, zero), digamma_impl(b, x), r);
  V valid = b.and_(b.eq(n, b.floor(n)), b.ge(n, zero));
  return b.select(valid, r, b.cst(x, NAN));
}

V polygamma(Builder& b, V n, V x) {
  return upcast2(b, n, x, polygamma_impl);
}

// ---------------------------------------------------------------- Bessel

// Cephes' Chebyshev series: coefficients from the highest degree, constant term halved.
V chebyshev(Builder& b, V x, const std::vector<double>& c) {
  V b0 = b.cst(x, c[0]);
  V b1 = b.cst(x, 0.0);
  V b2 = b1;
  for (size_t i = 1; i < c.size(); ++i) {
    b2 = b1;
    b1 = b0;
    b0 = b.add(b.sub(b.mul(x, b1), b2), b.cst(x, c[i]));
  }
  return b.mul(b.cst(x, 0.5), b.sub(b0, b2));
}

// exp(-|x|) I1(x): Cephes' i1e, two Chebyshev expansions split at |x| = 8 (the single-precision
// series are the tails of the double ones).
V bessel_i1e(Builder& b, V x) {
  static const std::vector<double> a = {
      2.77791411276104639959E-18,  -2.11142121435816608115E-17, 1.55363195773620046921E-16,
      -1.10559694773538630805E-15, 7.60068429473540693410E-15,  -5.04218550472791168711E-14,
      3.22379336594557470981E-13,  -1.98397439776494371520E-12, 1.17361862988909016308E-11,
      -6.66348972350202774223E-11, 3.62559028155211703701E-10,  -1.88724975172282928790E-9,
      9.38153738649577178388E-9,   -4.44505912879632808065E-8,  2.00329475355213526229E-7,
      -8.56872026469545474066E-7,  3.47025130813767847674E-6,   -1.32731636560394358279E-5,
      4.78156510755005422638E-5,   -1.61760815825896745588E-4,  5.12285956168575772895E-4,
      -1.51357245063125314899E-3,  4.15642294431288815669E-3,   -1.05640848946261981558E-2,
      2.47264490306265168283E-2,   -5.29459812080949914269E-2,  1.02643658689847095384E-1,
      -1.76416518357834055153E-1,  2.52587186443633654823E-1};
  static const std::vector<double> bb = {
      7.51729631084210481353E-18,  4.41434832307170791151E-18,  -4.65030536848935832153E-17,
      -3.20952592199342395980E-17, 2.96262899764595013876E-16,  3.30820231092092828324E-16,
      -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
      4.27244001671195135429E-14,  -2.10154184277266431302E-14, -4.08355111109219731823E-13,
      -7.19855177624590851209E-13, 2.03562854414708950722E-12,  1.41258074366137813316E-11,
      3.25260358301548823856E-11,  -1.89749581235054123450E-11, -5.58974346219658380687E-10,
      -3.83538038596423702205E-9,  -2.63146884688951950684E-8,  -2.51223623787020892529E-7,
      -3.88256480887769039346E-6,  -1.10588938762623716291E-4,  -9.76109749136146840777E-3,
      7.78576235018280120474E-1};
  return upcast(b, x, [](Builder& b, V v) {
    const bool f64 = is_f64(v);
    const std::vector<double> sa(f64 ? a.begin() : a.end() - 17, a.end());
    const std::vector<double> sb(f64 ? bb.begin() : bb.end() - 7, bb.end());
    V z = b.abs(v);
    V eight = b.cst(v, 8.0);
    V zs = b.min(z, eight);
    V small = b.mul(chebyshev(b, b.sub(b.mul(b.cst(v, 0.5), zs), b.cst(v, 2.0)), sa), zs);
    V zl = b.max(z, eight);
    V large = b.div(chebyshev(b, b.sub(b.div(b.cst(v, 32.0), zl), b.cst(v, 2.0)), sb), b.sqrt(zl));
    V r = b.select(b.le(z, eight), small, large);
    return b.select(b.lt(v, b.cst(v, 0.0)), b.neg(r), r);
  });
}

// ---------------------------------------------------------------- trigonometric, hyperbolic

V tan(Builder& b, V x) {
  return upcast(b, x, [](Builder& b, V v) { return b.tan(v); });
}

V sinh(Builder& b, V x) {
  return upcast(b, x, [](Builder& b, V v) {
    // e^(x + log 1/2) - e^(-x + log 1/2) does not overflow before the halving; for |x| < 1,
    // (expm1(x) + expm1(x) / (expm1(x) + 1)) / 2 avoids the cancellation of e^x - e^-x.
    V log_half = b.cst(v, -std::numbers::ln2);
    V large = b.sub(b.exp(b.add(v, log_half)), b.exp(b.add(b.neg(v), log_half)));
    V one = b.cst(v, 1.0);
    V e = b.expm1(v);
    V small = b.mul(b.cst(v, 0.5), b.add(e, b.div(e, b.add(one, e))));
    return b.select(b.lt(b.abs(v), one), small, large);
  });
}

V cosh(Builder& b, V x) {
  return upcast(b, x, [](Builder& b, V v) {
    V log_half = b.cst(v, -std::numbers::ln2);
    return b.add(b.exp(b.add(v, log_half)), b.exp(b.add(b.neg(v), log_half)));
  });
}

V asin(Builder& b, V x) {
  return upcast(b, x, [](Builder& b, V v) {
    // asin(x) = 2 atan2(x, 1 + sqrt(1 - x^2)), with 1 - x^2 as (1 - x)(1 + x).
    V one = b.cst(v, 1.0);
    V s = b.sqrt(b.mul(b.sub(one, v), b.add(one, v)));
    return b.mul(b.cst(v, 2.0), b.atan2(v, b.add(one, s)));
  });
}

V acos(Builder& b, V x) {
  return upcast(b, x, [](Builder& b, V v) {
    // acos(x) = 2 atan2(sqrt(1 - x^2), 1 + x) for x != -1, pi at -1.
    V one = b.cst(v, 1.0);
    V s = b.sqrt(b.mul(b.sub(one, v), b.add(one, v)));
    V r = b.mul(b.cst(v, 2.0), b.atan2(s, b.add(one, v)));
    return b.select(b.ne(v, b.cst(v, -1.0)), r, b.cst(v, std::numbers::pi));
  });
}

V atan(Builder& b, V x) {
  return upcast(b, x, [](Builder& b, V v) { return b.atan2(v, b.cst(v, 1.0)); });
}

double sqrt_max(V x) {
  return is_f64(x) ? std::sqrt(std::numeric_limits<double>::max())
                   : std::sqrt(static_cast<double>(std::numeric_limits<float>::max()));
}

V asinh(Builder& b, V x) {
  return upcast(b, x, [](Builder& b, V v) {
    // sign(x) asinh(|x|): log1p(a + a^2 / (1 + sqrt(a^2 + 1))) for a <= 1, log(a + sqrt(a^2 + 1))
    // up to sqrt(max), then log(2) + log(a) where a^2 would overflow.
    V one = b.cst(v, 1.0);
    V a = b.abs(v);
    V a2 = b.mul(a, a);
    V root = b.sqrt(b.add(a2, one));
    V small = b.log1p(b.add(a, b.div(a2, b.add(one, root))));
    V naive = b.log(b.add(a, root));
    V overflow = b.add(b.log(a), b.cst(v, std::numbers::ln2));
    V r = b.select(b.ge(a, b.cst(v, sqrt_max(v))), overflow, b.select(b.le(a, one), small, naive));
    return b.mul(b.sign(v), r);
  });
}

V acosh(Builder& b, V x) {
  return upcast(b, x, [](Builder& b, V v) {
    // log(x + sqrt((x + 1)(x - 1))), log(2) + log(x) where x^2 would overflow; NaN below -1.
    V one = b.cst(v, 1.0);
    V naive = b.log(b.add(v, b.sqrt(b.mul(b.add(v, one), b.sub(v, one)))));
    V overflow = b.add(b.log(v), b.cst(v, std::numbers::ln2));
    V r = b.select(b.ge(v, b.cst(v, sqrt_max(v))), overflow, naive);
    return b.select(b.lt(v, b.cst(v, -1.0)), b.cst(v, NAN), r);
  });
}

V atanh(Builder& b, V x) {
  return upcast(b, x, [](Builder& b, V v) {
    // (log1p(x) - log1p(-x)) / 2; NaN for |x| > 1.
    V r = b.mul(b.sub(b.log1p(v), b.log1p(b.neg(v))), b.cst(v, 0.5));
    return b.select(b.gt(b.abs(v), b.cst(v, 1.0)), b.cst(v, NAN), r);
  });
}

// ---------------------------------------------------------------- bits

DType unsigned_of_width(size_t bytes) {
  switch (bytes) {
    case 1:
      return DType::U8;
    case 2:
      return DType::U16;
    case 4:
      return DType::U32;
    default:
      return DType::U64;
  }
}

// The float after x in the direction of y, on the bit patterns (no upcast: the answer is one
// ULP of x's own type).
V next_after(Builder& b, V x, V y) {
  const DType ft = x->type.dtype;
  const DType ut = unsigned_of_width(size_of(ft));
  const int nbits = static_cast<int>(size_of(ft) * 8);
  V xi = b.bitcast(x, ut);
  V yi = b.bitcast(y, ut);
  V sign_mask = b.bits(xi, uint64_t{1} << (nbits - 1));
  V abs_mask = b.bits(xi, (nbits == 64 ? ~uint64_t{0} : (uint64_t{1} << nbits) - 1) >> 1);
  V abs_x = b.and_(xi, abs_mask);
  V abs_y = b.and_(yi, abs_mask);
  V zero = b.bits(xi, 0);
  V one = b.bits(xi, 1);
  V all_ones = b.bits(xi, nbits == 64 ? ~uint64_t{0} : (uint64_t{1} << nbits) - 1);
  // From zero: the smallest subnormal with y's sign.
  V from_zero = b.or_(b.and_(yi, sign_mask), one);
  // Moving toward zero when x's magnitude exceeds y's or the signs differ: the pattern - 1.
  V signs_differ = b.ne(b.and_(xi, sign_mask), b.and_(yi, sign_mask));
  V toward_zero = b.or_(b.gt(abs_x, abs_y), signs_differ);
  V step = b.add(xi, b.select(toward_zero, all_ones, one));
  V r = b.select(b.eq(abs_x, zero), from_zero, step);
  r = b.select(b.eq(x, y), yi, r);
  V out = b.bitcast(r, ft);
  V nan = b.or_(b.is_nan(x), b.is_nan(y));
  return b.select(nan, b.cst(x, NAN), out);
}

// The high half of the double-width product.
V mulhi(Builder& b, V x, V y) {
  const DType t = x->type.dtype;
  const bool is_signed = is_signed_int(t);
  const int nbits = static_cast<int>(size_of(t) * 8);
  if (nbits < 64) {
    const DType wide = is_signed ? (nbits == 8    ? DType::I16
                                    : nbits == 16 ? DType::I32
                                                  : DType::I64)
                                 : (nbits == 8    ? DType::U16
                                    : nbits == 16 ? DType::U32
                                                  : DType::U64);
    V p = b.mul(b.convert(x, wide), b.convert(y, wide));
    V shift = b.cst(p, nbits);
    V hi = is_signed ? b.shift_right_arithmetic(p, shift) : b.shift_right_logical(p, shift);
    return b.convert(hi, t);
  }
  // 64 bits: schoolbook on 32-bit halves in u64, then the signed correction
  // hi_s(x, y) = hi_u(x, y) - (x < 0 ? y : 0) - (y < 0 ? x : 0).
  V xu = is_signed ? b.bitcast(x, DType::U64) : x;
  V yu = is_signed ? b.bitcast(y, DType::U64) : y;
  V mask = b.bits(xu, 0xffffffffu);
  V s32 = b.bits(xu, 32);
  V xl = b.and_(xu, mask), xh = b.shift_right_logical(xu, s32);
  V yl = b.and_(yu, mask), yh = b.shift_right_logical(yu, s32);
  V ll = b.mul(xl, yl), lh = b.mul(xl, yh), hl = b.mul(xh, yl), hh = b.mul(xh, yh);
  V cross = b.add(b.add(b.shift_right_logical(ll, s32), b.and_(lh, mask)), b.and_(hl, mask));
  V hi = b.add(b.add(b.add(hh, b.shift_right_logical(lh, s32)), b.shift_right_logical(hl, s32)),
               b.shift_right_logical(cross, s32));
  if (!is_signed) return hi;
  V zero = b.cst(x, 0);
  V zu = b.bits(xu, 0);
  hi = b.sub(hi, b.select(b.lt(x, zero), yu, zu));
  hi = b.sub(hi, b.select(b.lt(y, zero), xu, zu));
  return b.bitcast(hi, t);
}

// ---------------------------------------------------------------- structured ops

// The k largest (or with largest = false the k smallest) along the last dimension, in total
// order (NaN above +inf), ties keeping the lower index, and their indices: a stable sort and a
// slice.
std::vector<V> top_k(Builder& b, const ir::Operation& op, V x) {
  const int64_t k = op.int_attr("k");
  const Shape& shape = x->type.shape;
  if (shape.empty())
    throw UnsupportedError(op.where() + ": chlo.top_k needs an operand of rank >= 1");
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  if (k < 0 || k > shape[last])
    unsupported(op, "k = " + std::to_string(k) + " is out of range for " + x->type.str());
  const DType index_type = op.result(1)->type.dtype;
  V iota = b.op("stablehlo.iota", {}, ir::Type::tensor(shape, index_type),
                {{"iota_dimension", ir::Attribute::integer_attr(last, DType::I64)}});
  auto sort = ir::make_op("stablehlo.sort", {x, iota}, {x->type, iota->type});
  sort->attributes = {{"dimension", ir::Attribute::integer_attr(last, DType::I64)},
                      {"is_stable", ir::Attribute::boolean_attr(true)}};
  ir::Block& cmp = sort->add_region().add_block();
  const ir::Type st = ir::Type::tensor({}, x->type.dtype);
  const ir::Type it = ir::Type::tensor({}, index_type);
  V a = cmp.add_argument(st);
  V c = cmp.add_argument(st);
  cmp.add_argument(it);
  cmp.add_argument(it);
  Builder cb(cmp);
  const ir::Attribute* largest = op.attr("largest");
  const bool descending =
      !largest || largest->kind != ir::Attribute::Kind::Bool || largest->boolean;
  V gt =
      cb.compare(a, c, descending ? "GT" : "LT", is_float(x->type.dtype) ? "TOTALORDER" : nullptr);
  cmp.push_back(ir::make_op("stablehlo.return", {gt}, {}));
  ir::Operation* s = b.block().push_back(std::move(sort));
  std::vector<V> out;
  for (int i = 0; i < 2; ++i) {
    V sorted = s->result(i);
    std::vector<int64_t> start(shape.size(), 0), limit(shape.begin(), shape.end()),
        strides(shape.size(), 1);
    limit[last] = k;
    out.push_back(b.op("stablehlo.slice", {sorted}, op.result(i)->type,
                       {{"limit_indices", ir::Attribute::dense_array(limit)},
                        {"start_indices", ir::Attribute::dense_array(start)},
                        {"strides", ir::Attribute::dense_array(strides)}}));
  }
  return out;
}

// Sums x over `dim`.
V reduce_sum(Builder& b, V x, int64_t dim) {
  Shape shape = x->type.shape;
  shape.erase(shape.begin() + dim);
  V init = b.splat(Builder::scalar_of(x->type.dtype, 0), {});
  auto reduce =
      ir::make_op("stablehlo.reduce", {x, init}, {ir::Type::tensor(shape, x->type.dtype)});
  reduce->attributes = {{"dimensions", ir::Attribute::dense_array({dim})}};
  ir::Block& body = reduce->add_region().add_block();
  V l = body.add_argument(init->type);
  V r = body.add_argument(init->type);
  Builder rb(body);
  body.push_back(ir::make_op("stablehlo.return", {rb.add(l, r)}, {}));
  return b.block().push_back(std::move(reduce))->result(0);
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// ragged_dot with a ragged non-contracting lhs dimension (rows of lhs in consecutive groups,
// group g multiplied by rhs[g]): the dot with every group, then each row keeps its own group's
// product (a mask from the groups' start and end rows) and the group dimension is summed away.
V ragged_dot(Builder& b, const ir::Operation& op, const std::vector<V>& in) {
  if (in.size() != 3) unsupported(op, "takes lhs, rhs and group_sizes");
  V lhs = in[0], rhs = in[1], sizes = in[2];
  const ir::Attribute* dn = op.attr("ragged_dot_dimension_numbers");
  if (!dn || dn->kind != ir::Attribute::Kind::Struct)
    unsupported(op, "needs ragged_dot_dimension_numbers");
  auto field = [&](const char* name) {
    const ir::Attribute* f = dn->field(name);
    return f ? ir::as_ints(*f) : std::vector<int64_t>{};
  };
  const auto lb = field("lhs_batching_dimensions"), rb = field("rhs_batching_dimensions");
  const auto lc = field("lhs_contracting_dimensions"), rc = field("rhs_contracting_dimensions");
  const auto lr = field("lhs_ragged_dimensions"), rg = field("rhs_group_dimensions");
  if (lr.size() != 1 || rg.size() != 1)
    unsupported(op, "needs one lhs ragged dimension and one rhs group dimension");
  if (contains(lc, lr[0]) || contains(lb, lr[0]))
    unsupported(op, "with a ragged contracting or batch dimension has no decomposition yet");
  if (sizes->type.rank() != 1 || !is_integer(sizes->type.dtype))
    unsupported(op, "needs rank-1 integer group_sizes");
  const ir::Type out_type = op.result(0)->type;
  Shape shape;
  for (int64_t d : lb) shape.push_back(lhs->type.shape.at(d));
  int64_t m_pos = -1, g_pos = -1;
  for (int64_t d = 0; d < lhs->type.rank(); ++d)
    if (!contains(lb, d) && !contains(lc, d)) {
      if (d == lr[0]) m_pos = static_cast<int64_t>(shape.size());
      shape.push_back(lhs->type.shape[d]);
    }
  for (int64_t d = 0; d < rhs->type.rank(); ++d)
    if (!contains(rb, d) && !contains(rc, d)) {
      if (d == rg[0]) g_pos = static_cast<int64_t>(shape.size());
      shape.push_back(rhs->type.shape[d]);
    }
  if (m_pos < 0 || g_pos < 0) unsupported(op, "has inconsistent dimension numbers");
  std::vector<ir::NamedAttribute> fields;
  auto add_field = [&](const char* name, const std::vector<int64_t>& v) {
    if (!v.empty()) fields.push_back({name, ir::Attribute::int_list(v)});
  };
  add_field("lhs_batching_dimensions", lb);
  add_field("rhs_batching_dimensions", rb);
  add_field("lhs_contracting_dimensions", lc);
  add_field("rhs_contracting_dimensions", rc);
  V dot = b.op("stablehlo.dot_general", {lhs, rhs}, ir::Type::tensor(shape, out_type.dtype),
               {{"dot_dimension_numbers", ir::Attribute::struct_attr("stablehlo.dot", fields)}});
  // Group g covers rows [end_g - size_g, end_g), end = the inclusive running sum of the sizes.
  const int64_t groups = sizes->type.shape[0];
  const DType it = sizes->type.dtype;
  const Shape square = {groups, groups};
  auto iota = [&](const Shape& s, int64_t dim) {
    return b.op("stablehlo.iota", {}, ir::Type::tensor(s, it),
                {{"iota_dimension", ir::Attribute::integer_attr(dim, DType::I64)}});
  };
  auto broadcast = [&](V v, const Shape& s, int64_t dim) {
    return b.op("stablehlo.broadcast_in_dim", {v}, ir::Type::tensor(s, v->type.dtype),
                {{"broadcast_dimensions", ir::Attribute::dense_array({dim})}});
  };
  V row = iota(square, 0), col = iota(square, 1);
  V upto = b.select(b.le(col, row), broadcast(sizes, square, 1),
                    b.splat(Builder::scalar_of(it, 0), square));
  V ends = reduce_sum(b, upto, 1);
  V starts = b.sub(ends, sizes);
  V m = iota(shape, m_pos);
  V mask = b.and_(b.ge(m, broadcast(starts, shape, g_pos)), b.lt(m, broadcast(ends, shape, g_pos)));
  V kept = b.select(mask, dot, b.splat(Builder::scalar_of(out_type.dtype, 0), shape));
  return reduce_sum(b, kept, g_pos);
}

void rewrite_block(const ir::Block& from, ir::Block& to, ValueMap& map);

void rewrite_region(const ir::Region& from, ir::Region& to, ValueMap& map) {
  for (const auto& block : from.blocks) {
    ir::Block& nb = to.add_block();
    for (const auto& a : block->arguments) {
      V na = nb.add_argument(a->type);
      na->name_hint = a->name_hint;
      na->loc = a->loc;
      map[a.get()] = na;
    }
    rewrite_block(*block, nb, map);
  }
}

// chlo.scan as a stablehlo.while over the scan dimension: the state is the counter, the
// inputs, the outputs being filled and the carries; each step slices the inputs, runs the body
// and writes its outputs at the counter.
std::vector<V> scan(Builder& b, const ir::Operation& op, ValueMap& map) {
  const auto seg = op.ints_if_present("operandSegmentSizes");
  if (!seg || seg->size() != 2)
    throw UnsupportedError(op.where() + ": chlo.scan needs operandSegmentSizes");
  const size_t num_inputs = static_cast<size_t>((*seg)[0]);
  const size_t num_inits = static_cast<size_t>((*seg)[1]);
  const size_t num_outputs = op.num_results() - num_inits;
  const int64_t dim = op.int_attr("dimension");
  bool reverse = false;
  for (const auto& a : op.attributes) {
    if (a.name == "is_reverse" || a.name == "reverse") {
      if (a.value->kind != ir::Attribute::Kind::Bool) unsupported(op, "needs a boolean " + a.name);
      reverse = a.value->boolean;
    } else if (a.name != "dimension" && a.name != "operandSegmentSizes" &&
               a.name != "resultSegmentSizes" && a.name != "is_associative") {
      unsupported(op, "has an attribute this decomposition does not know: " + a.name);
    }
  }
  if (op.regions.size() != 1 || op.regions[0]->blocks.size() != 1)
    throw UnsupportedError(op.where() + ": chlo.scan needs one body block");
  const ir::Block& body = op.regions[0]->front();
  int64_t length = -1;
  for (size_t i = 0; i < num_inputs; ++i) length = op.operands[i]->type.shape.at(dim);
  for (size_t i = 0; i < num_outputs && length < 0; ++i) length = op.result(i)->type.shape.at(dim);
  if (length < 0) throw UnsupportedError(op.where() + ": chlo.scan has no scanned value");

  std::vector<V> init;
  const ir::Type counter_type = ir::Type::tensor({}, DType::I64);
  init.push_back(b.splat(Builder::scalar_of(DType::I64, 0), {}));
  for (size_t i = 0; i < num_inputs; ++i) init.push_back(map.at(op.operands[i]));
  for (size_t i = 0; i < num_outputs; ++i)
    init.push_back(
        b.splat(Builder::scalar_of(op.result(i)->type.dtype, 0), op.result(i)->type.shape));
  for (size_t i = 0; i < num_inits; ++i) init.push_back(map.at(op.operands[num_inputs + i]));
  std::vector<ir::Type> types;
  for (V v : init) types.push_back(v->type);

  auto loop = ir::make_op("stablehlo.while", init, types);
  {  // cond: counter < length
    ir::Block& cb = loop->add_region().add_block();
    std::vector<V> args;
    for (const auto& t : types) args.push_back(cb.add_argument(t));
    Builder c(cb);
    V lt = c.lt(args[0], c.cst(args[0], static_cast<double>(length)));
    cb.push_back(ir::make_op("stablehlo.return", {lt}, {}));
  }
  {
    ir::Block& bb = loop->add_region().add_block();
    std::vector<V> args;
    for (const auto& t : types) args.push_back(bb.add_argument(t));
    Builder w(bb);
    V i = args[0];
    V pos = reverse ? w.sub(w.cst(i, static_cast<double>(length - 1)), i) : i;
    V zero = w.cst(i, 0);
    auto starts = [&](int64_t rank) {
      std::vector<V> s(static_cast<size_t>(rank), zero);
      s[static_cast<size_t>(dim)] = pos;
      return s;
    };
    ValueMap inner = map;
    for (size_t k = 0; k < num_inputs; ++k) {
      V in = args[1 + k];
      Shape sizes = in->type.shape;
      sizes[static_cast<size_t>(dim)] = 1;
      std::vector<V> operands = {in};
      for (V s : starts(in->type.rank())) operands.push_back(s);
      V slice = w.op("stablehlo.dynamic_slice", operands, ir::Type::tensor(sizes, in->type.dtype),
                     {{"slice_sizes", ir::Attribute::dense_array(sizes)}});
      inner[body.arguments[k].get()] = w.reshape(slice, body.arguments[k]->type.shape);
    }
    for (size_t k = 0; k < num_inits; ++k)
      inner[body.arguments[num_inputs + k].get()] = args[1 + num_inputs + num_outputs + k];
    rewrite_block(body, bb, inner);
    // rewrite_block appended the body's ops and its return; take the return's operands.
    std::unique_ptr<ir::Operation> ret = std::move(bb.ops.back());
    bb.ops.pop_back();
    std::vector<V> next = {w.add(i, w.cst(i, 1))};
    for (size_t k = 0; k < num_inputs; ++k) next.push_back(args[1 + k]);
    for (size_t k = 0; k < num_outputs; ++k) {
      V acc = args[1 + num_inputs + k];
      Shape sizes = acc->type.shape;
      sizes[static_cast<size_t>(dim)] = 1;
      std::vector<V> operands = {acc, w.reshape(ret->operands.at(k), sizes)};
      for (V s : starts(acc->type.rank())) operands.push_back(s);
      next.push_back(w.op("stablehlo.dynamic_update_slice", operands, acc->type));
    }
    for (size_t k = 0; k < num_inits; ++k) next.push_back(ret->operands.at(num_outputs + k));
    bb.push_back(ir::make_op("stablehlo.return", next, {}));
  }
  ir::Operation* l = b.block().push_back(std::move(loop));
  std::vector<V> out;
  for (size_t k = 0; k < num_outputs; ++k) out.push_back(l->result(1 + num_inputs + k));
  for (size_t k = 0; k < num_inits; ++k) out.push_back(l->result(1 + num_inputs + num_outputs + k));
  return out;
}

using UnaryRule = V (*)(Builder&, V);

const std::unordered_map<std::string_view, UnaryRule>& unary_rules() {
  static const std::unordered_map<std::string_view, UnaryRule> rules = {
      {"chlo.erf", erf},       {"chlo.erfc", erfc},       {"chlo.erf_inv", erf_inv},
      {"chlo.lgamma", lgamma}, {"chlo.digamma", digamma}, {"chlo.bessel_i1e", bessel_i1e},
      {"chlo.tan", tan},       {"chlo.sinh", sinh},       {"chlo.cosh", cosh},
      {"chlo.asin", asin},     {"chlo.acos", acos},       {"chlo.atan", atan},
      {"chlo.asinh", asinh},   {"chlo.acosh", acosh},     {"chlo.atanh", atanh}};
  return rules;
}

[[noreturn]] void unsupported(const ir::Operation& op, const std::string& why) {
  throw UnsupportedError(op.where() + ": " + op.name + " " + why);
}

std::vector<V> decompose(Builder& b, const ir::Operation& op, ValueMap& map) {
  std::vector<V> in;
  for (const ir::Value* v : op.operands) in.push_back(map.at(v));
  if (op.name == "chlo.scan") return scan(b, op, map);
  if (op.name == "chlo.top_k") {
    return top_k(b, op, in.at(0));
  }
  for (V v : in)
    if (v->type.is_token) unsupported(op, "of a token");
  if (op.name == "chlo.ragged_dot") return {ragged_dot(b, op, in)};
  const DType t = in.empty() ? DType::F32 : in[0]->type.dtype;
  if (op.name == "chlo.mulhi") {
    if (in.size() != 2 || !is_integer(t)) unsupported(op, "takes two integer operands");
    return {mulhi(b, in[0], in[1])};
  }
  if (is_complex(t) && in.size() == 1 &&
      std::ranges::find(kComplexChloOps, std::string_view(op.name)) != kComplexChloOps.end())
    return {b.op(op.name, in, op.result(0)->type, op.attributes)};
  if (!is_float(t))
    unsupported(op,
                "of " + std::string(mlir_name(t)) + " has no decomposition (floating point only)");
  if (op.name == "chlo.next_after" || op.name == "chlo.zeta" || op.name == "chlo.polygamma") {
    if (in.size() != 2 || in[1]->type != in[0]->type)
      unsupported(op, "takes two operands of one type");
    if (op.name == "chlo.zeta") return {zeta(b, in[0], in[1])};
    if (op.name == "chlo.polygamma") return {polygamma(b, in[0], in[1])};
    return {next_after(b, in[0], in[1])};
  }
  auto it = unary_rules().find(op.name);
  if (it == unary_rules().end()) unsupported(op, "has no decomposition");
  if (in.size() != 1) unsupported(op, "takes one operand");
  return {it->second(b, in[0])};
}

bool is_chlo(const ir::Operation& op) {
  return op.name.starts_with("chlo.");
}

void rewrite_block(const ir::Block& from, ir::Block& to, ValueMap& map) {
  Builder b(to);
  for (const auto& o : from.ops) {
    if (is_chlo(*o)) {
      std::vector<V> results = decompose(b, *o, map);
      for (size_t i = 0; i < o->num_results(); ++i) {
        if (results.at(i)->type != o->result(i)->type)
          unsupported(*o, "decomposed to " + results[i]->type.str() + ", expected " +
                              o->result(i)->type.str());
        map[o->result(i)] = results[i];
      }
      continue;
    }
    std::vector<V> operands;
    for (const ir::Value* v : o->operands) operands.push_back(map.at(v));
    std::vector<ir::Type> types;
    for (const auto& r : o->results) types.push_back(r->type);
    auto copy = ir::make_op(o->name, std::move(operands), types);
    copy->attributes = o->attributes;
    copy->loc = o->loc;
    copy->line = o->line;
    copy->column = o->column;
    for (const auto& region : o->regions) rewrite_region(*region, copy->add_region(), map);
    for (size_t i = 0; i < o->results.size(); ++i) {
      copy->results[i]->name_hint = o->results[i]->name_hint;
      map[o->results[i].get()] = copy->results[i].get();
    }
    to.push_back(std::move(copy));
  }
}

bool region_has_chlo(const ir::Region& r) {
  for (const auto& block : r.blocks)
    for (const auto& o : block->ops) {
      if (is_chlo(*o)) return true;
      for (const auto& nested : o->regions)
        if (region_has_chlo(*nested)) return true;
    }
  return false;
}

}  // namespace

bool has_chlo(const ir::Module& module) {
  for (const auto& f : module.functions)
    if (region_has_chlo(f->body)) return true;
  return false;
}

std::unique_ptr<ir::Module> decompose_chlo(const ir::Module& module) {
  std::unique_ptr<ir::Module> out = copy_signatures(module);
  for (size_t i = 0; i < module.functions.size(); ++i) {
    ValueMap map;
    rewrite_region(module.functions[i]->body, out->functions[i]->body, map);
  }
  return out;
}

}  // namespace cujax::compiler
