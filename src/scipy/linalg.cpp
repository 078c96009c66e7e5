// jax.scipy.linalg on lax.linalg: solve_triangular, cho_factor, cho_solve, lu, lu_factor,
// lu_solve, qr (with pivoting) and block_diag, with SciPy's argument conventions.
#include <limits>

#include "cujax/linalg.h"
#include "lax/linalg_call.h"
#include "numpy/internal.h"

namespace cujax::scipy::linalg {

namespace ll = lax::linalg;
namespace jnp = cujax::numpy;

namespace {

[[noreturn]] void fail(const std::string& fn, const std::string& message) {
  throw Error("scipy.linalg." + fn + ": " + message);
}

std::pair<Array, Array> promoted(const std::string& fn, const Array& a, const Array& b) {
  auto p = jnp::detail::promote("scipy.linalg." + fn, {a, b}, false, jnp::detail::Promote::Inexact);
  return {p.args[0], p.args[1]};
}

// b as [..., n, k] (a vector becomes one column) and a, b broadcast to one batch shape.
struct Operands {
  Array a, b;
  bool vector = false;
};
Operands solve_operands(const std::string& fn, const Array& a_in, const Array& b_in) {
  auto [a, b] = promoted(fn, a_in, b_in);
  if (a.ndim() < 2 || a.shape().back() != a.shape()[a.ndim() - 2])
    fail(fn,
         "a must be a square matrix or a batch of them, got shape " + shape_to_string(a.shape()));
  const int64_t n = a.shape().back();
  Operands o;
  o.vector = b.ndim() == 1;
  if (o.vector) b = jnp::expand_dims(b, -1);
  if (b.ndim() < 2 || b.shape()[b.ndim() - 2] != n)
    fail(fn, "b of shape " + shape_to_string(b_in.shape()) + " does not fit a of shape " +
                 shape_to_string(a.shape()));
  const Shape ab(a.shape().begin(), a.shape().end() - 2),
      bb(b.shape().begin(), b.shape().end() - 2);
  const Shape batch = jnp::detail::broadcast_shapes("scipy.linalg." + fn, {ab, bb});
  Shape as = batch, bs = batch;
  as.insert(as.end(), {n, n});
  bs.insert(bs.end(), {n, b.shape().back()});
  o.a = jnp::broadcast_to(a, as);
  o.b = jnp::broadcast_to(b, bs);
  return o;
}

Array finish(const Operands& o, const Array& x) {
  return o.vector ? jnp::squeeze(x, -1) : x;
}

void check_trans(const std::string& fn, int trans) {
  if (trans < 0 || trans > 2) fail(fn, "trans must be 0, 1 or 2, got " + std::to_string(trans));
}

}  // namespace

Array solve_triangular(const Array& a, const Array& b, int trans, bool lower, bool unit_diagonal) {
  check_trans("solve_triangular", trans);
  const Operands o = solve_operands("solve_triangular", a, b);
  return finish(o,
                ll::triangular_solve(o.a, o.b, true, lower, trans != 0, trans == 2, unit_diagonal));
}

std::pair<Array, bool> cho_factor(const Array& a, bool lower) {
  return {jnp::linalg::cholesky(a, !lower), lower};
}

Array cho_solve(const std::pair<Array, bool>& c_and_lower, const Array& b) {
  const auto& [c, lower] = c_and_lower;
  const Operands o = solve_operands("cho_solve", c, b);
  // lower: L L^H x = b; upper: U^H U x = b.
  const Array y = ll::triangular_solve(o.a, o.b, true, lower, !lower, !lower);
  return finish(o, ll::triangular_solve(o.a, y, true, lower, lower, lower));
}

std::tuple<Array, Array, Array> lu(const Array& a_in, bool permute_l) {
  const Array a =
      jnp::detail::promote("scipy.linalg.lu", {a_in}, false, jnp::detail::Promote::Inexact).args[0];
  auto [f, pivots, perm] = ll::lu(a);
  const int64_t nd = a.ndim(), m = a.shape()[nd - 2], n = a.shape()[nd - 1], k = std::min(m, n);
  std::vector<int64_t> start(static_cast<size_t>(nd), 0);
  Shape l_lim = a.shape(), u_lim = a.shape();
  l_lim[nd - 1] = k;
  u_lim[nd - 2] = k;
  const Array l =
      jnp::add(jnp::tril(lax::slice(f, start, l_lim), -1), jnp::astype(jnp::eye(m, k), a.dtype()));
  const Array u = jnp::triu(lax::slice(f, start, u_lim));
  // a[perm] = L U, so a = P L U with P[perm[i], i] = 1.
  const Array p = jnp::astype(jnp::swapaxes(jnp::one_hot(perm, m, DType::F32), -1, -2), a.dtype());
  if (permute_l) return {jnp::matmul(p, l), u, Array()};
  return {p, l, u};
}

std::pair<Array, Array> lu_factor(const Array& a_in) {
  const Array a =
      jnp::detail::promote("scipy.linalg.lu_factor", {a_in}, false, jnp::detail::Promote::Inexact)
          .args[0];
  auto [f, pivots, perm] = ll::lu(a);
  return {f, pivots};
}

Array lu_solve(const std::pair<Array, Array>& lu_and_piv, const Array& b, int trans) {
  check_trans("lu_solve", trans);
  const auto& [f, piv] = lu_and_piv;
  const Operands o = solve_operands("lu_solve", f, b);
  const Array perm = ll::lu_pivots_to_permutation(
      jnp::broadcast_to(piv, Shape(o.a.shape().begin(), o.a.shape().end() - 1)),
      o.a.shape().back());
  return finish(o, ll::detail::lu_solve(o.a, perm, o.b, trans));
}

ll::QrResult qr(const Array& a, const std::string& mode, bool pivoting) {
  if (mode != "full" && mode != "economic" && mode != "r")
    fail("qr", "mode must be 'full', 'economic' or 'r', got '" + mode + "'");
  const Array x =
      jnp::detail::promote("scipy.linalg.qr", {a}, false, jnp::detail::Promote::Inexact).args[0];
  if (x.ndim() < 2) fail("qr", "needs a matrix, got shape " + shape_to_string(x.shape()));
  ll::QrResult r = ll::qr(x, mode != "economic", pivoting);
  if (mode == "r") r.q = Array();
  return r;
}

std::pair<Array, Array> qr(const Array& a, const std::string& mode) {
  ll::QrResult r = qr(a, mode, false);
  return {r.q, r.r};
}

Array block_diag(const std::vector<Array>& arrays) {
  if (arrays.empty()) return jnp::zeros({1, 0});
  std::vector<ArrayLike> like(arrays.begin(), arrays.end());
  const auto p = jnp::detail::promote("scipy.linalg.block_diag", like, false);
  std::vector<Array> blocks;
  int64_t cols = 0;
  for (const Array& x : p.args) {
    if (x.ndim() > 2)
      fail("block_diag",
           "arguments must have at most two dimensions, got shape " + shape_to_string(x.shape()));
    blocks.push_back(jnp::atleast_2d(x));
    cols += blocks.back().shape()[1];
  }
  std::vector<Array> rows;
  int64_t left = 0;
  for (const Array& b : blocks) {
    const int64_t w = b.shape()[1];
    rows.push_back(jnp::pad(b, {{0, 0}, {left, cols - left - w}}));
    left += w;
  }
  return jnp::concatenate(rows, 0);
}

std::pair<Array, Array> schur(const Array& a_in, const std::string& output) {
  if (output != "real" && output != "complex")
    fail("schur", "output must be 'real' or 'complex', got '" + output + "'");
  Array a = jnp::detail::promote("scipy.linalg.schur", {a_in}, false, jnp::detail::Promote::Inexact)
                .args[0];
  if (output == "complex" && !is_complex(a.dtype())) a = jnp::astype(a, to_complex(a.dtype()));
  return ll::schur(a);
}

std::pair<Array, Array> hessenberg(const Array& a_in, bool calc_q) {
  const Array a =
      jnp::detail::promote("scipy.linalg.hessenberg", {a_in}, false, jnp::detail::Promote::Inexact)
          .args[0];
  auto [f, taus] = ll::hessenberg(a);
  const Array h = jnp::triu(f, -1);
  if (!calc_q) return {h, Array()};
  // Q = diag(1, Q') with Q' the product of the reflectors below the subdiagonal.
  const int64_t nd = f.ndim(), n = f.shape().back();
  std::vector<int64_t> start(static_cast<size_t>(nd), 0);
  start[nd - 2] = 1;
  Shape limit = f.shape();
  limit[nd - 1] = n - 1;
  const Array q1 = ll::householder_product(lax::slice(f, start, limit), taus);
  std::vector<lax::PadConfig> pad(static_cast<size_t>(nd));
  pad[nd - 2].low = 1;
  pad[nd - 1].low = 1;
  Array q = lax::pad(q1, lax::full({}, 0, f.dtype()), pad);
  return {h, jnp::at_set(q, {jnp::Ellipsis, 0, 0}, 1)};
}

namespace {

// Padé approximants of exp as (U, V), exp(A) ~ (V - U)^-1 (V + U): U holds the odd powers, V
// the even ones, with the coefficients of Higham's scaling-and-squaring method (the ones
// jax.scipy.linalg.expm uses).
std::pair<Array, Array> pade(const Array& a, const std::vector<double>& b) {
  const Array eye =
      jnp::broadcast_to(jnp::astype(jnp::eye(a.shape().back()), a.dtype()), a.shape());
  const Array a2 = jnp::matmul(a, a);
  std::vector<Array> powers{eye, a2};  // A^0, A^2, A^4, A^6, ...
  const size_t degree = b.size() - 1;
  if (degree == 13) {
    const Array a4 = jnp::matmul(a2, a2), a6 = jnp::matmul(a4, a2);
    const Array u_hi = jnp::matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2);
    const Array u = jnp::matmul(a, u_hi + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye);
    const Array v = jnp::matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 +
                    b[2] * a2 + b[0] * eye;
    return {u, v};
  }
  while (2 * powers.size() <= degree) powers.push_back(jnp::matmul(powers.back(), a2));
  Array odd = jnp::zeros_like(a), even = jnp::zeros_like(a);
  for (size_t k = 0; 2 * k <= degree; ++k) {
    even = even + b[2 * k] * powers[k];
    if (2 * k + 1 <= degree) odd = odd + b[2 * k + 1] * powers[k];
  }
  return {jnp::matmul(a, odd), even};
}

}  // namespace

Array expm(const Array& a_in, int64_t max_squarings) {
  const Array a =
      jnp::detail::promote("scipy.linalg.expm", {a_in}, false, jnp::detail::Promote::Inexact)
          .args[0];
  if (a.ndim() < 2 || a.shape().back() != a.shape()[a.ndim() - 2])
    fail("expm",
         "needs a square matrix or a batch of them, got shape " + shape_to_string(a.shape()));
  const bool f64 = complex_component(a.dtype()) == DType::F64;
  // Per matrix: the 1-norm picks the approximant's degree and the number of squarings.
  const Array norm1 = jnp::max(jnp::sum(jnp::abs(a), -2), -1, true);  // [..., 1]
  const double maxnorm = f64 ? 5.371920351148152 : 3.925724783138660;
  const Array squarings =
      jnp::maximum(0, jnp::floor(jnp::log2(jnp::divide(norm1, maxnorm))));  // [..., 1]
  const Array scaled =
      jnp::divide(a, jnp::astype(jnp::expand_dims(jnp::power(2.0, squarings), -1), a.dtype()));
  const std::vector<std::vector<double>> coefficients = {
      {120., 60., 12., 1.},
      {30240., 15120., 3360., 420., 30., 1.},
      {17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.},
      {17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880., 3960., 90.,
       1.},
      {64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
       129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920., 40840800.,
       960960., 16380., 182., 1.}};
  const std::vector<double> bounds =
      f64 ? std::vector<double>{1.495585217958292e-002, 2.539398330063230e-001,
                                9.504178996162932e-001, 2.097847961257068e+000}
          : std::vector<double>{4.258730016922831e-001, 1.880152677804762e+000};
  // The first approximant whose bound the norm stays under; the last one past every bound (on
  // the scaled matrix, whose norm is then at most maxnorm).
  const size_t last = bounds.size() == 4 ? 4 : 2;
  auto [u, v] = pade(scaled, coefficients[last]);
  for (size_t i = bounds.size(); i-- > 0;) {
    auto [ui, vi] = pade(scaled, coefficients[i]);
    const Array use = jnp::expand_dims(jnp::less(norm1, bounds[i]), -1);
    u = jnp::where(use, ui, u);
    v = jnp::where(use, vi, v);
  }
  Array r = jnp::linalg::solve(v - u, v + u);
  const Array n_sq = jnp::expand_dims(squarings, -1);
  r = lax::fori_loop(
      int64_t{0}, max_squarings,
      [&](const Array& i, const Array& x) {
        const Array more = jnp::less(jnp::astype(i, n_sq.dtype()), n_sq);
        return jnp::where(more, jnp::matmul(x, x), x);
      },
      r);
  // Past max_squarings the result would be inaccurate: NaN, as JAX gives.
  return jnp::where(jnp::greater(n_sq, static_cast<double>(max_squarings)),
                    jnp::full_like(r, std::numeric_limits<double>::quiet_NaN()), r);
}

}  // namespace cujax::scipy::linalg
