// VJP rules of the element-wise ops, and the helpers the rule files share. Each rule follows
// jax/_src/lax/lax.py's JVP (transposed) with the public lax ops, so the cotangent ops are
// ordinary recorded ops that can be differentiated again.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "trace/vjp_rules.h"

#include "cujax/special.h"

namespace cujax::trace::vjp {

using namespace cujax::lax;

Array like(const Array& x, double value) {
  return full(x.shape(), value, x.dtype());
}

Array zeros(const Shape& shape, DType dtype) {
  return full(shape, 0.0, dtype);
}

Array unbroadcast(const Array& g, const Shape& shape, const std::vector<int64_t>& bdims) {
  const int64_t out_rank = g.ndim();
  std::vector<int64_t> sum_dims;
  for (int64_t d = 0; d < out_rank; ++d) {
    auto it = std::find(bdims.begin(), bdims.end(), d);
    if (it == bdims.end()) {
      sum_dims.push_back(d);
    } else {
      const size_t i = static_cast<size_t>(it - bdims.begin());
      if (shape[i] == 1 && g.shape()[d] != 1) sum_dims.push_back(d);
    }
  }
  Array r = sum_dims.empty() ? g : reduce_sum(g, sum_dims);
  // The kept dimensions, in output order, correspond to the operand dimensions sorted by bdims.
  std::vector<int64_t> kept;  // operand dims, in output order
  for (int64_t d = 0; d < out_rank; ++d) {
    if (std::find(sum_dims.begin(), sum_dims.end(), d) != sum_dims.end()) continue;
    auto it = std::find(bdims.begin(), bdims.end(), d);
    kept.push_back(static_cast<int64_t>(it - bdims.begin()));
  }
  if (!std::is_sorted(kept.begin(), kept.end())) {
    // Order the kept dims as the operand has them.
    std::vector<int64_t> perm(kept.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) { return kept[a] < kept[b]; });
    r = transpose(r, perm);
  }
  if (r.shape() != shape) r = reshape(r, shape);
  return r;
}

std::string body_kind(const ir::Operation& op) {
  if (op.regions.empty() || op.regions[0]->blocks.empty()) return "";
  const ir::Block& b = op.regions[0]->front();
  std::vector<const ir::Operation*> body;
  for (const auto& o : b.ops) body.push_back(o.get());
  if (body.empty() || body.back()->name != "stablehlo.return") return "";
  const ir::Operation* ret = body.back();
  if (body.size() == 1) {
    if (ret->operands.size() == 1 && b.arguments.size() == 2 &&
        ret->operands[0] == b.arguments[1].get())
      return "select_update";
    return "";
  }
  // Conversions of the scalar arguments (convert) may come first; one computation op last.
  const ir::Operation* comp = body[body.size() - 2];
  if (body.size() != 2 || ret->operands.size() != 1 || ret->operands[0] != comp->result(0))
    return "";
  if (comp->operands.size() != 2 || comp->operands[0]->owner_block != &b ||
      comp->operands[1]->owner_block != &b)
    return "";
  return comp->name;
}

std::vector<int64_t> ints_or(const ir::Operation& op, const std::string& name,
                             std::vector<int64_t> dflt) {
  auto v = op.ints_if_present(name);
  return v ? *v : dflt;
}

std::vector<int64_t> struct_ints(const ir::Attribute* s, const std::string& field) {
  if (!s) return {};
  const ir::Attribute* f = s->field(field);
  return f ? ir::as_ints(*f) : std::vector<int64_t>{};
}

int64_t struct_int(const ir::Attribute* s, const std::string& field, int64_t dflt) {
  if (!s) return dflt;
  const ir::Attribute* f = s->field(field);
  return f ? f->integer : dflt;
}

namespace {

// g * d for the single operand of a unary op.
void unary(Rules& r, const std::string& name, std::function<Array(const Array&, const Array&)> d) {
  r[name] = [d](const VjpArgs& a) -> Cts {
    return {mul(a.cts[0], d(a.operands[0], a.results[0]))};
  };
}

Cts zero_rule(const VjpArgs& a) {
  Cts out;
  for (const auto& x : a.operands) out.push_back(like(x, 0.0));
  return out;
}

// JAX's _balanced_eq: 1 where x is the result and y is not, 0.5 on ties, 0 elsewhere.
Array balanced_eq(const Array& x, const Array& z, const Array& y) {
  return select(eq(x, z), select(eq(y, z), like(x, 0.5), like(x, 1.0)), like(x, 0.0));
}

}  // namespace

void register_elementwise_rules(Rules& r) {
  r["stablehlo.add"] = [](const VjpArgs& a) -> Cts { return {a.cts[0], a.cts[0]}; };
  r["stablehlo.subtract"] = [](const VjpArgs& a) -> Cts { return {a.cts[0], neg(a.cts[0])}; };
  r["stablehlo.multiply"] = [](const VjpArgs& a) -> Cts {
    Cts out(2);
    if (a.needed[0]) out[0] = mul(a.cts[0], a.operands[1]);
    if (a.needed[1]) out[1] = mul(a.operands[0], a.cts[0]);
    return out;
  };
  r["stablehlo.divide"] = [](const VjpArgs& a) -> Cts {
    const Array &g = a.cts[0], &x = a.operands[0], &y = a.operands[1];
    Cts out(2);
    if (a.needed[0]) out[0] = div(g, y);
    if (a.needed[1]) out[1] = neg(div(mul(g, x), mul(y, y)));
    return out;
  };
  r["stablehlo.remainder"] = [](const VjpArgs& a) -> Cts {
    const Array &g = a.cts[0], &x = a.operands[0], &y = a.operands[1];
    Cts out(2);
    if (a.needed[0]) out[0] = g;
    if (a.needed[1]) {
      const Array q = div(x, y);
      out[1] = mul(neg(g), mul(sign(q), floor(abs(q))));
    }
    return out;
  };
  r["stablehlo.negate"] = [](const VjpArgs& a) -> Cts { return {neg(a.cts[0])}; };
  r["stablehlo.abs"] = [](const VjpArgs& a) -> Cts {
    const Array &g = a.cts[0], &x = a.operands[0];
    if (!is_complex(x.dtype())) return {mul(g, sign(x))};
    // JAX's _abs_jvp_rule transposed: g conj(x) / |x|, with |x| = 1 where it is 0.
    const Array& m = a.results[0];
    const Array safe = select(eq(m, like(m, 0.0)), like(m, 1.0), m);
    return {complex(div(mul(g, real(x)), safe), neg(div(mul(g, imag(x)), safe)))};
  };
  for (const char* n : {"stablehlo.sign", "stablehlo.floor", "stablehlo.ceil",
                        "stablehlo.round_nearest_afz", "stablehlo.round_nearest_even"})
    r[n] = zero_rule;
  unary(r, "stablehlo.exponential", [](const Array&, const Array& y) { return y; });
  unary(r, "stablehlo.exponential_minus_one",
        [](const Array&, const Array& y) { return add(y, like(y, 1.0)); });
  r["stablehlo.log"] = [](const VjpArgs& a) -> Cts { return {div(a.cts[0], a.operands[0])}; };
  r["stablehlo.log_plus_one"] = [](const VjpArgs& a) -> Cts {
    const Array& x = a.operands[0];
    return {div(a.cts[0], add(x, like(x, 1.0)))};
  };
  unary(r, "stablehlo.tanh",
        [](const Array&, const Array& y) { return sub(like(y, 1.0), mul(y, y)); });
  unary(r, "stablehlo.logistic",
        [](const Array&, const Array& y) { return mul(y, sub(like(y, 1.0), y)); });
  unary(r, "stablehlo.sine", [](const Array& x, const Array&) { return cos(x); });
  unary(r, "stablehlo.cosine", [](const Array& x, const Array&) { return neg(sin(x)); });
  unary(r, "stablehlo.tan",
        [](const Array&, const Array& y) { return add(like(y, 1.0), mul(y, y)); });
  // chlo special functions (jax/_src/lax/special.py's JVPs); zeta and polygamma are
  // differentiable in their second operand only, and nextafter not at all, as in JAX.
  unary(r, "chlo.lgamma", [](const Array& x, const Array&) { return digamma(x); });
  unary(r, "chlo.digamma", [](const Array& x, const Array&) { return polygamma(like(x, 1.0), x); });
  const double two_over_sqrt_pi = 2 / std::sqrt(std::numbers::pi);
  unary(r, "chlo.erf", [two_over_sqrt_pi](const Array& x, const Array&) {
    return mul(like(x, two_over_sqrt_pi), exp(neg(mul(x, x))));
  });
  unary(r, "chlo.erfc", [two_over_sqrt_pi](const Array& x, const Array&) {
    return mul(like(x, -two_over_sqrt_pi), exp(neg(mul(x, x))));
  });
  unary(r, "chlo.erf_inv", [](const Array&, const Array& y) {
    return mul(like(y, std::sqrt(std::numbers::pi) / 2), exp(mul(y, y)));
  });
  unary(r, "chlo.asin",
        [](const Array& x, const Array&) { return rsqrt(sub(like(x, 1.0), mul(x, x))); });
  unary(r, "chlo.acos",
        [](const Array& x, const Array&) { return neg(rsqrt(sub(like(x, 1.0), mul(x, x)))); });
  unary(r, "chlo.atan", [](const Array& x, const Array&) {
    return div(like(x, 1.0), add(like(x, 1.0), mul(x, x)));
  });
  unary(r, "chlo.sinh", [](const Array& x, const Array&) { return cosh(x); });
  unary(r, "chlo.cosh", [](const Array& x, const Array&) { return sinh(x); });
  unary(r, "chlo.asinh",
        [](const Array& x, const Array&) { return rsqrt(add(mul(x, x), like(x, 1.0))); });
  unary(r, "chlo.acosh", [](const Array& x, const Array&) {
    return rsqrt(mul(sub(x, like(x, 1.0)), add(x, like(x, 1.0))));
  });
  unary(r, "chlo.atanh", [](const Array& x, const Array&) {
    return div(like(x, 1.0), sub(like(x, 1.0), mul(x, x)));
  });
  // i1e' = i0e - i1e (sign(x) + 1/x), 1/2 at 0.
  unary(r, "chlo.bessel_i1e", [](const Array& x, const Array& y) {
    const Array not_tiny = gt(abs(x), like(x, 1e-30));
    const Array safe = select(not_tiny, x, like(x, 1.0));
    const Array d = sub(bessel_i0e(safe), mul(y, add(sign(safe), div(like(x, 1.0), safe))));
    return select(not_tiny, d, like(x, 0.5));
  });
  r["chlo.polygamma"] = [](const VjpArgs& a) -> Cts {
    const Array &m = a.operands[0], &x = a.operands[1];
    Cts out(2);
    if (a.needed[1]) out[1] = mul(a.cts[0], polygamma(add(m, like(m, 1.0)), x));
    return out;
  };
  r["chlo.zeta"] = [](const VjpArgs& a) -> Cts {
    const Array &x = a.operands[0], &q = a.operands[1];
    Cts out(2);
    if (a.needed[1]) out[1] = mul(a.cts[0], neg(mul(x, zeta(add(x, like(x, 1.0)), q))));
    return out;
  };
  r["stablehlo.sqrt"] = [](const VjpArgs& a) -> Cts {
    const Array& y = a.results[0];
    return {div(a.cts[0], mul(like(y, 2.0), y))};
  };
  unary(r, "stablehlo.rsqrt",
        [](const Array& x, const Array& y) { return mul(like(y, -0.5), div(y, x)); });
  r["stablehlo.cbrt"] = [](const VjpArgs& a) -> Cts {
    const Array& y = a.results[0];
    return {div(a.cts[0], mul(like(y, 3.0), mul(y, y)))};
  };
  r["stablehlo.power"] = [](const VjpArgs& a) -> Cts {
    const Array &g = a.cts[0], &x = a.operands[0], &y = a.operands[1], &z = a.results[0];
    Cts out(2);
    if (a.needed[0]) {
      // y x^(y-1), 0 where y == 0 (JAX's _pow_jvp_lhs).
      const Array jac =
          select(eq(y, like(y, 0.0)), like(y, 0.0), mul(y, pow(x, sub(y, like(y, 1.0)))));
      out[0] = mul(g, jac);
    }
    if (a.needed[1]) {
      // log(x) x^y, with log(1) where x == 0 (JAX's _pow_jvp_rhs).
      const Array safe_x = select(eq(x, like(x, 0.0)), like(x, 1.0), x);
      out[1] = mul(g, mul(log(safe_x), z));
    }
    return out;
  };
  for (const char* n : {"stablehlo.maximum", "stablehlo.minimum"}) {
    r[n] = [](const VjpArgs& a) -> Cts {
      const Array &g = a.cts[0], &x = a.operands[0], &y = a.operands[1], &z = a.results[0];
      Cts out(2);
      if (a.needed[0]) out[0] = mul(g, balanced_eq(x, z, y));
      if (a.needed[1]) out[1] = mul(g, balanced_eq(y, z, x));
      return out;
    };
  }
  r["stablehlo.atan2"] = [](const VjpArgs& a) -> Cts {
    const Array &g = a.cts[0], &x = a.operands[0], &y = a.operands[1];
    const Array denom = add(mul(x, x), mul(y, y));
    Cts out(2);
    if (a.needed[0]) out[0] = mul(g, div(y, denom));
    if (a.needed[1]) out[1] = mul(g, div(neg(x), denom));
    return out;
  };
  r["stablehlo.select"] = [](const VjpArgs& a) -> Cts {
    const Array &p = a.operands[0], &g = a.cts[0];
    const Array z = like(g, 0.0);
    Cts out(3);
    if (a.needed[1]) out[1] = select(p, g, z);
    if (a.needed[2]) out[2] = select(p, z, g);
    return out;
  };
  r["stablehlo.clamp"] = [](const VjpArgs& a) -> Cts {
    const Array &lo = a.operands[0], &x = a.operands[1], &hi = a.operands[2], &g = a.cts[0];
    auto fit = [&](const Array& b) {
      return b.shape() == x.shape() ? b : broadcast_in_dim(b, x.shape(), {});
    };
    const Array blo = fit(lo), bhi = fit(hi);
    const Array z = like(g, 0.0);
    Cts out(3);
    if (a.needed[0]) {
      const Array v = select(bitwise_and(gt(blo, x), lt(blo, bhi)), g, z);
      out[0] = lo.shape() == x.shape() ? v : reduce_sum(v, [&] {
        std::vector<int64_t> d(x.ndim());
        std::iota(d.begin(), d.end(), 0);
        return d;
      }());
    }
    if (a.needed[1]) out[1] = select(bitwise_and(gt(x, blo), lt(x, bhi)), g, z);
    if (a.needed[2]) {
      const Array v = select(lt(bhi, x), g, z);
      out[2] = hi.shape() == x.shape() ? v : reduce_sum(v, [&] {
        std::vector<int64_t> d(x.ndim());
        std::iota(d.begin(), d.end(), 0);
        return d;
      }());
    }
    return out;
  };
  r["stablehlo.convert"] = [](const VjpArgs& a) -> Cts {
    const Array& x = a.operands[0];
    auto inexact = [](DType t) { return is_float(t) || is_complex(t); };
    if (!inexact(x.dtype()) || !inexact(a.results[0].dtype())) return {std::nullopt};
    // Converting the cotangent back: complex to real keeps the real part (JAX's transpose of
    // a real-to-complex conversion), real to complex adds a zero imaginary part.
    return {convert_element_type(a.cts[0], x.dtype())};
  };
  r["stablehlo.reduce_precision"] = [](const VjpArgs& a) -> Cts { return {a.cts[0]}; };
  r["stablehlo.optimization_barrier"] = [](const VjpArgs& a) -> Cts {
    Cts out;
    for (const auto& g : a.cts) out.push_back(g.valid() ? std::optional<Array>(g) : std::nullopt);
    return out;
  };
  r["stablehlo.bitcast_convert"] = [](const VjpArgs&) -> Cts { return {std::nullopt}; };
  for (const char* n : {"stablehlo.while", "stablehlo.case", "stablehlo.if"}) {
    const std::string name = n;
    r[n] = [name](const VjpArgs&) -> Cts {
      throw Error("grad of " + name + " is not supported yet");
    };
  }
}

}  // namespace cujax::trace::vjp
