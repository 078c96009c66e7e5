// jnp.linalg on lax.linalg's factorizations: cholesky, qr, svd, eigh, eigvalsh, solve, inv,
// det, slogdet, lstsq, pinv, matrix_rank, matrix_power, norm, cond and multi_dot, with JAX's
// defaults. Integer inputs promote to the default float type, as in JAX.
#include <cmath>
#include <limits>

#include "cujax/linalg.h"
#include "lax/linalg_call.h"
#include "numpy/internal.h"

namespace cujax::numpy::linalg {

namespace ll = lax::linalg;
using detail::fail;

namespace {

Array inexact(const std::string& fn, const Array& a) {
  return detail::promote("linalg." + fn, {a}, false, detail::Promote::Inexact).args[0];
}

void need_matrix(const std::string& fn, const Array& a, bool square) {
  if (a.ndim() < 2)
    fail("linalg." + fn, "needs a matrix or a batch of matrices [..., m, n], got shape " +
                             shape_to_string(a.shape()));
  if (square && a.shape()[a.ndim() - 1] != a.shape()[a.ndim() - 2])
    fail("linalg." + fn,
         "needs square matrices [..., n, n], got shape " + shape_to_string(a.shape()));
}

double eps(DType t) {
  return complex_component(t) == DType::F64 ? std::numeric_limits<double>::epsilon()
                                            : std::numeric_limits<float>::epsilon();
}

// The identity broadcast to a's shape.
Array eye_like(const Array& a) {
  const int64_t n = a.shape().back();
  return broadcast_to(astype(eye(n), a.dtype()), a.shape());
}

// The parity of the row permutation (true: odd), from LU's pivots.
Array odd_permutation(const Array& pivots) {
  const Array moved =
      not_equal(pivots, lax::broadcasted_iota(DType::I32, pivots.shape(), pivots.ndim() - 1));
  return not_equal(remainder(sum(astype(moved, DType::I32), -1), 2), 0);
}

}  // namespace

Array cholesky(const Array& a_in, bool upper) {
  const Array a = inexact("cholesky", a_in);
  need_matrix("cholesky", a, true);
  const Array l = ll::cholesky(a);
  return upper ? ll::detail::adjoint(l) : l;
}

std::pair<Array, Array> qr(const Array& a_in, const std::string& mode) {
  const Array a = inexact("qr", a_in);
  need_matrix("qr", a, false);
  if (mode != "reduced" && mode != "complete" && mode != "r")
    fail("linalg.qr", "mode must be 'reduced', 'complete' or 'r', got '" + mode + "'");
  auto [q, r] = ll::qr(a, mode == "complete");
  if (mode == "r") return {Array(), r};
  return {q, r};
}

ll::SvdResult svd(const Array& a_in, bool full_matrices, bool compute_uv, bool hermitian) {
  const Array a = inexact("svd", a_in);
  need_matrix("svd", a, hermitian);
  if (!hermitian) return ll::svd(a, full_matrices, compute_uv);
  // From the eigendecomposition: s = |w| in descending order, u = v, vh = (v sign(w))^H.
  auto [v, w] = ll::eigh(a);
  const Array s_unsorted = abs(w);
  const Array order = argsort(s_unsorted, -1, true);
  ll::SvdResult r;
  r.s = take_along_axis(s_unsorted, order, -1);
  if (!compute_uv) return r;
  Shape os = order.shape();
  os.insert(os.end() - 1, 1);
  const Array cols = reshape(order, os);
  r.u = take_along_axis(v, cols, -1);
  const Array signs = astype(sign(take_along_axis(w, order, -1)), a.dtype());
  r.vh = ll::detail::adjoint(multiply(r.u, expand_dims(signs, -2)));
  return r;
}

std::pair<Array, Array> eigh(const Array& a_in, const std::string& UPLO, bool symmetrize_input) {
  const Array a = inexact("eigh", a_in);
  need_matrix("eigh", a, true);
  if (UPLO != "L" && UPLO != "U")
    fail("linalg.eigh", "UPLO must be 'L' or 'U', got '" + UPLO + "'");
  auto [v, w] = ll::eigh(a, UPLO == "L", symmetrize_input);
  return {w, v};
}

Array eigvalsh(const Array& a, const std::string& UPLO) {
  return eigh(a, UPLO).first;
}

std::pair<Array, Array> eig(const Array& a_in) {
  const Array a = inexact("eig", a_in);
  need_matrix("eig", a, true);
  const ll::EigResult r = ll::eig(a, false, true);
  return {r.w, r.vr};
}

Array eigvals(const Array& a_in) {
  const Array a = inexact("eigvals", a_in);
  need_matrix("eigvals", a, true);
  return ll::eig(a, false, false).w;
}

Array solve(const Array& a_in, const Array& b_in) {
  auto p = detail::promote("linalg.solve", {a_in, b_in}, false, detail::Promote::Inexact);
  const Array &a = p.args[0], &b0 = p.args[1];
  need_matrix("solve", a, true);
  const int64_t n = a.shape().back();
  const bool vector = b0.ndim() == 1;
  const Array b = vector ? expand_dims(b0, -1) : b0;
  if (b.ndim() < 2 || b.shape()[b.ndim() - 2] != n)
    fail("linalg.solve", "b of shape " + shape_to_string(b0.shape()) + " does not fit a of shape " +
                             shape_to_string(a.shape()) +
                             " (b must be [..., n] or [..., n, k] with n = " + std::to_string(n) +
                             ")");
  const Shape ab(a.shape().begin(), a.shape().end() - 2),
      bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = detail::broadcast_shapes("linalg.solve", {ab, bb});
  Shape as = batch, bs = batch;
  as.insert(as.end(), {n, n});
  bs.insert(bs.end(), {n, b.shape().back()});
  auto [lu, pivots, perm] = ll::lu(broadcast_to(a, as));
  const Array x = ll::detail::lu_solve(lu, perm, broadcast_to(b, bs), 0);
  return vector ? squeeze(x, -1) : x;
}

Array inv(const Array& a_in) {
  const Array a = inexact("inv", a_in);
  need_matrix("inv", a, true);
  return solve(a, eye_like(a));
}

std::pair<Array, Array> slogdet(const Array& a_in) {
  const Array a = inexact("slogdet", a_in);
  need_matrix("slogdet", a, true);
  auto [lu, pivots, perm] = ll::lu(a);
  const Array d = diagonal(lu, 0, -2, -1);
  const Array absd = abs(d);
  const Array logabsdet = sum(log(absd), -1);
  const Array phases = is_complex(a.dtype()) ? divide(d, astype(absd, a.dtype())) : sign(d);
  Array s = prod(phases, -1);
  s = where(odd_permutation(pivots), negative(s), s);
  s = where(any(equal(absd, 0), -1), zeros_like(s), s);
  return {s, logabsdet};
}

Array det(const Array& a_in) {
  const Array a = inexact("det", a_in);
  need_matrix("det", a, true);
  auto [lu, pivots, perm] = ll::lu(a);
  const Array p = prod(diagonal(lu, 0, -2, -1), -1);
  return where(odd_permutation(pivots), negative(p), p);
}

std::tuple<Array, Array, Array, Array> lstsq(const Array& a_in, const Array& b_in,
                                             std::optional<double> rcond) {
  auto p = detail::promote("linalg.lstsq", {a_in, b_in}, false, detail::Promote::Inexact);
  const Array &a = p.args[0], &b0 = p.args[1];
  if (a.ndim() != 2)
    fail("linalg.lstsq", "a must be a matrix, got shape " + shape_to_string(a.shape()));
  const int64_t m = a.shape()[0], n = a.shape()[1];
  const bool vector = b0.ndim() == 1;
  const Array b = vector ? expand_dims(b0, -1) : b0;
  if (b.ndim() != 2 || b.shape()[0] != m)
    fail("linalg.lstsq", "b of shape " + shape_to_string(b0.shape()) + " does not fit a of shape " +
                             shape_to_string(a.shape()));
  const double rc = rcond.value_or(eps(a.dtype()) * static_cast<double>(std::max(m, n)));
  const ll::SvdResult r = ll::svd(a, false);
  const Array keep = greater_equal(r.s, multiply(max(r.s), rc));
  const Array s_inv = where(keep, divide(1, where(keep, r.s, 1)), 0);
  const Array uhb = matmul(ll::detail::adjoint(r.u), b);
  Array x =
      matmul(ll::detail::adjoint(r.vh), multiply(expand_dims(astype(s_inv, a.dtype()), -1), uhb));
  const Array rank = sum(astype(keep, DType::I32));
  const Array resid_full = sum(square(abs(subtract(b, matmul(a, x)))), 0);
  if (vector) x = squeeze(x, -1);
  const Array resid = vector ? squeeze(resid_full, 0) : resid_full;
  return {x, resid, rank, r.s};
}

Array pinv(const Array& a_in, std::optional<double> rtol, bool hermitian) {
  const Array a = inexact("pinv", a_in);
  need_matrix("pinv", a, false);
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape().back();
  const double rt = rtol.value_or(10.0 * static_cast<double>(std::max(m, n)) * eps(a.dtype()));
  const ll::SvdResult r = svd(a, false, true, hermitian);
  const Array cutoff = multiply(max(r.s, -1, true), rt);
  const Array keep = greater(r.s, cutoff);
  const Array s_inv = astype(where(keep, divide(1, where(keep, r.s, 1)), 0), a.dtype());
  return matmul(multiply(ll::detail::adjoint(r.vh), expand_dims(s_inv, -2)),
                ll::detail::adjoint(r.u));
}

Array matrix_rank(const Array& a_in, std::optional<double> rtol) {
  const Array a = inexact("matrix_rank", a_in);
  if (a.ndim() < 2) return astype(any(not_equal(a, 0)), DType::I32);
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape().back();
  const double rt = rtol.value_or(static_cast<double>(std::max(m, n)) * eps(a.dtype()));
  const Array s = ll::svd(a, false, false).s;
  return sum(astype(greater(s, multiply(max(s, -1, true), rt)), DType::I32), -1);
}

Array matrix_power(const Array& a_in, int64_t n) {
  need_matrix("matrix_power", a_in, true);
  Array base = n < 0 ? inv(a_in) : a_in;
  uint64_t e = n < 0 ? static_cast<uint64_t>(-(n + 1)) + 1 : static_cast<uint64_t>(n);
  if (e == 0) return eye_like(base);
  std::optional<Array> acc;
  while (true) {
    if (e & 1) acc = acc ? matmul(*acc, base) : base;
    e >>= 1;
    if (!e) break;
    base = matmul(base, base);
  }
  return *acc;
}

namespace {

Array vector_norm(const Array& x, const NormOrd& ord, int64_t axis, bool keepdims) {
  const Array ax = abs(x);
  if (std::holds_alternative<std::monostate>(ord)) return sqrt(sum(square(ax), axis, keepdims));
  if (std::holds_alternative<std::string>(ord))
    fail("linalg.norm", "invalid order '" + std::get<std::string>(ord) + "' for a vector norm");
  const double p = std::get<double>(ord);
  if (std::isinf(p)) return p > 0 ? max(ax, axis, keepdims) : min(ax, axis, keepdims);
  if (p == 0) return sum(astype(not_equal(ax, 0), ax.dtype()), axis, keepdims);
  if (p == 1) return sum(ax, axis, keepdims);
  if (p == 2) return sqrt(sum(square(ax), axis, keepdims));
  return power(sum(power(ax, p), axis, keepdims), 1.0 / p);
}

Array matrix_norm(const Array& x, const NormOrd& ord, int64_t r, int64_t c, bool keepdims) {
  // Moves the two axes last, reduces, and restores them as ones for keepdims.
  const auto finish = [&](Array v) {
    if (!keepdims) return v;
    return expand_dims(v, Axes(std::vector<int64_t>{std::min(r, c), std::max(r, c)}));
  };
  const Array ax = abs(x);
  std::string name;
  double p = 0;
  if (std::holds_alternative<std::monostate>(ord))
    name = "fro";
  else if (std::holds_alternative<std::string>(ord))
    name = std::get<std::string>(ord);
  else
    p = std::get<double>(ord);
  if (name == "fro") return finish(sqrt(sum(square(ax), Axes(std::vector<int64_t>{r, c}))));
  const Array moved = moveaxis(x, std::vector<int64_t>{r, c}, std::vector<int64_t>{-2, -1});
  if (name == "nuc") return finish(sum(ll::svd(moved, false, false).s, -1));
  if (!name.empty()) fail("linalg.norm", "invalid order '" + name + "' for a matrix norm");
  if (p == 2 || p == -2) {
    const Array s = ll::svd(moved, false, false).s;
    return finish(p > 0 ? max(s, -1) : min(s, -1));
  }
  const Array am = abs(moved);
  if (p == 1 || p == -1) {
    const Array cols = sum(am, -2);
    return finish(p > 0 ? max(cols, -1) : min(cols, -1));
  }
  if (std::isinf(p)) {
    const Array rows = sum(am, -1);
    return finish(p > 0 ? max(rows, -1) : min(rows, -1));
  }
  fail("linalg.norm", "invalid order " + std::to_string(p) + " for a matrix norm");
}

}  // namespace

Array norm(const Array& x_in, const NormOrd& ord, const std::optional<std::vector<int64_t>>& axis,
           bool keepdims) {
  const Array x = inexact("norm", x_in);
  std::vector<int64_t> axes;
  if (axis) {
    for (int64_t a : *axis) axes.push_back(detail::normalize_axis("linalg.norm", a, x.ndim()));
  } else if (x.ndim() == 1 || x.ndim() == 2) {
    for (int64_t a = 0; a < x.ndim(); ++a) axes.push_back(a);
  } else if (std::holds_alternative<std::monostate>(ord)) {
    // No axis and no ord: the 2-norm of the flattened array.
    const Array v = sqrt(sum(square(abs(x))));
    return keepdims ? reshape(v, Shape(static_cast<size_t>(x.ndim()), 1)) : v;
  } else {
    fail("linalg.norm", "needs axis for an ord on an array of shape " + shape_to_string(x.shape()));
  }
  if (axes.size() == 1) return vector_norm(x, ord, axes[0], keepdims);
  if (axes.size() == 2 && axes[0] != axes[1])
    return matrix_norm(x, ord, axes[0], axes[1], keepdims);
  fail("linalg.norm", "axis must name one or two distinct axes");
}

Array cond(const Array& x_in, const NormOrd& p) {
  const Array x = inexact("cond", x_in);
  need_matrix("cond", x, false);
  const bool two = std::holds_alternative<std::monostate>(p) ||
                   (std::holds_alternative<double>(p) && std::fabs(std::get<double>(p)) == 2);
  if (two) {
    const Array s = ll::svd(x, false, false).s;
    const Array r = divide(max(s, -1), min(s, -1));
    return std::holds_alternative<double>(p) && std::get<double>(p) < 0 ? divide(1, r) : r;
  }
  need_matrix("cond", x, true);
  return multiply(norm(x, p, std::vector<int64_t>{-2, -1}),
                  norm(inv(x), p, std::vector<int64_t>{-2, -1}));
}

Array multi_dot(const std::vector<Array>& arrays) {
  if (arrays.size() < 2)
    fail("linalg.multi_dot", "needs at least two arrays, got " + std::to_string(arrays.size()));
  Array acc = arrays[0];
  for (size_t i = 1; i < arrays.size(); ++i) acc = matmul(acc, arrays[i]);
  return acc;
}

Array tensorsolve(const Array& a_in, const Array& b_in,
                  const std::optional<std::vector<int64_t>>& axes) {
  auto p = detail::promote("linalg.tensorsolve", {a_in, b_in}, false, detail::Promote::Inexact);
  Array a = p.args[0];
  const Array& b = p.args[1];
  if (axes) {
    std::vector<int64_t> dst;
    for (size_t i = 0; i < axes->size(); ++i)
      dst.push_back(a.ndim() - static_cast<int64_t>(axes->size()) + static_cast<int64_t>(i));
    a = moveaxis(a, *axes, dst);
  }
  const Shape q(a.shape().begin() + std::min<int64_t>(b.ndim(), a.ndim()), a.shape().end());
  if (b.ndim() > a.ndim() || Shape(a.shape().begin(), a.shape().begin() + b.ndim()) != b.shape() ||
      num_elements(q) != b.size())
    fail("linalg.tensorsolve", "a of shape " + shape_to_string(a.shape()) +
                                   " does not fit b of shape " + shape_to_string(b.shape()) +
                                   " (a must be b.shape + x.shape with x.size == b.size)");
  return reshape(solve(reshape(a, {b.size(), b.size()}), ravel(b)), q);
}

Array tensorinv(const Array& a_in, int64_t ind) {
  const Array a = inexact("tensorinv", a_in);
  if (ind <= 0 || ind >= a.ndim())
    fail("linalg.tensorinv", "ind must be in [1, " + std::to_string(a.ndim() - 1) + "], got " +
                                 std::to_string(ind) + " for shape " + shape_to_string(a.shape()));
  const Shape first(a.shape().begin(), a.shape().begin() + ind);
  const Shape rest(a.shape().begin() + ind, a.shape().end());
  if (num_elements(first) != num_elements(rest))
    fail("linalg.tensorinv", "the first " + std::to_string(ind) + " axes of shape " +
                                 shape_to_string(a.shape()) +
                                 " do not hold as many elements as the others");
  Shape out = rest;
  out.insert(out.end(), first.begin(), first.end());
  return reshape(inv(reshape(a, {num_elements(first), num_elements(rest)})), out);
}

}  // namespace cujax::numpy::linalg
