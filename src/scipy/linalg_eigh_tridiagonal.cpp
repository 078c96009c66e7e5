// jax.scipy.linalg.eigh_tridiagonal: the eigenvalues of a symmetric (Hermitian) tridiagonal
// matrix by bisection, every wanted eigenvalue in parallel, as JAX computes them: Sturm counts
// (how many eigenvalues lie below x) narrow each eigenvalue's interval, starting from the
// Gershgorin bounds, until the widest interval is below the tolerance.
#include <algorithm>
#include <limits>

#include "cujax/lax.h"
#include "cujax/linalg.h"
#include "cujax/numpy.h"

namespace cujax::scipy::linalg {

namespace {

namespace jnp = cujax::numpy;

[[noreturn]] void fail(const std::string& message) {
  throw Error("scipy.linalg.eigh_tridiagonal: " + message);
}

struct Finfo {
  double eps, max, tiny;
  int nmant;
};
template <class T>
Finfo finfo_of() {
  using L = std::numeric_limits<T>;
  return {L::epsilon(), L::max(), L::min(), L::digits - 1};
}

Array first(const Array& x, int64_t k) {
  return lax::slice(x, {0}, {k});
}
Array from(const Array& x, int64_t k) {
  return lax::slice(x, {k}, {x.shape()[0]});
}

// The number of eigenvalues below each x [k] (the Sturm sequence's negative pivots), pivots
// kept away from zero by pivmin.
Array sturm_counts(const Array& alpha, const Array& beta_sq, const Array& pivmin,
                   const Array& alpha0_perturbation, const Array& x) {
  const int64_t n = alpha.shape()[0];
  const Array zeros = jnp::zeros(x.shape(), DType::I32), ones = jnp::ones(x.shape(), DType::I32);
  const Array a0 = first(alpha, 1);
  Array q = jnp::subtract(a0, x);
  const Array count = jnp::where(jnp::less(q, 0), ones, zeros);
  q = jnp::where(jnp::equal(a0, x), alpha0_perturbation, q);
  const auto step = [&](const Array& i, const std::pair<Array, Array>& qc) {
    const Array ai = lax::dynamic_slice_in_dim(alpha, i, 1, 0);
    const Array bi = lax::dynamic_slice_in_dim(beta_sq, jnp::subtract(i, 1), 1, 0);
    const Array qi = jnp::subtract(jnp::subtract(ai, jnp::divide(bi, qc.first)), x);
    const Array small = jnp::less_equal(qi, pivmin);
    return std::pair<Array, Array>(jnp::where(small, jnp::minimum(qi, jnp::negative(pivmin)), qi),
                                   jnp::where(small, jnp::add(qc.second, ones), qc.second));
  };
  return lax::fori_loop(int64_t{1}, n, step, std::pair<Array, Array>(q, count)).second;
}

}  // namespace

Array eigh_tridiagonal(const Array& d, const Array& e, bool eigvals_only, const std::string& select,
                       const std::optional<std::pair<double, double>>& select_range,
                       std::optional<double> tol) {
  if (!eigvals_only)
    fail("calculation of eigenvectors is not implemented (as in JAX): pass eigvals_only = true");
  if (d.dtype() != e.dtype())
    fail(std::string("diagonal and off-diagonal values must have the same dtype, got ") +
         std::string(mlir_name(d.dtype())) + " and " + std::string(mlir_name(e.dtype())));
  if (!is_float(d.dtype()) && !is_complex(d.dtype()))
    fail(std::string("only float32, float64, complex64 and complex128 inputs are supported, got ") +
         std::string(mlir_name(d.dtype())));
  if (d.ndim() != 1 || e.ndim() != 1 || (d.shape()[0] > 0 && e.shape()[0] != d.shape()[0] - 1))
    fail("needs d [n] and e [n - 1], got shapes " + shape_to_string(d.shape()) + " and " +
         shape_to_string(e.shape()));
  const int64_t n = d.shape()[0];
  if (n <= 1) return jnp::real(d);

  Array alpha, beta_abs, beta_sq;
  if (is_complex(d.dtype())) {
    alpha = jnp::real(d);
    beta_sq = jnp::real(jnp::multiply(e, jnp::conj(e)));
    beta_abs = jnp::sqrt(beta_sq);
  } else {
    alpha = d;
    beta_abs = jnp::abs(e);
    beta_sq = jnp::square(e);
  }
  const DType rt = alpha.dtype();
  const Finfo fi = rt == DType::F32 ? finfo_of<float>() : finfo_of<double>();
  const auto c = [rt](double v) { return lax::full({}, v, rt); };

  // The Gershgorin bounds of the spectrum, and a bound on |T|.
  const int64_t m = n - 1;
  const Array off =
      jnp::concatenate({first(beta_abs, 1), jnp::add(first(beta_abs, m - 1), from(beta_abs, 1)),
                        from(beta_abs, m - 1)});
  const Array lambda_max = jnp::amax(jnp::add(alpha, off));
  const Array lambda_min = jnp::amin(jnp::subtract(alpha, off));
  const Array t_norm = jnp::maximum(jnp::abs(lambda_min), jnp::abs(lambda_max));

  // The smallest pivot allowed in the Sturm sequence (against overflow), and the tolerance.
  const double safemin = std::max(1 / fi.max, (1 + fi.eps) * fi.tiny);
  Array pivmin = jnp::multiply(c(safemin), jnp::maximum(c(1), jnp::amax(beta_sq)));
  Array alpha0_perturbation = jnp::square(jnp::multiply(c(fi.eps), first(beta_abs, 1)));
  alpha0_perturbation = jnp::reshape(alpha0_perturbation, {});
  Array abs_tol = jnp::multiply(c(fi.eps), t_norm);
  if (tol) abs_tol = jnp::maximum(c(*tol), abs_tol);
  // At most one bisection step per mantissa bit (plus one).
  const int64_t max_it = fi.nmant + 1;

  Array target;
  if (select == "a") {
    target = jnp::arange(0, n, 1, DType::I32);
  } else if (select == "i") {
    if (!select_range) fail("for select = 'i', select_range must be specified");
    const auto [lo, hi] = *select_range;
    if (lo > hi) fail("got an empty index range in select_range");
    if (lo < 0 || hi >= static_cast<double>(n))
      fail("select_range [" + std::to_string(static_cast<int64_t>(lo)) + ", " +
           std::to_string(static_cast<int64_t>(hi)) + "] is outside the " + std::to_string(n) +
           " eigenvalue indices");
    target = jnp::arange(static_cast<int64_t>(lo), static_cast<int64_t>(hi) + 1, 1, DType::I32);
  } else if (select == "v") {
    fail("select = 'v' is not implemented (as in JAX)");
  } else {
    fail("select must have a value in {'a', 'i', 'v'}, got '" + select + "'");
  }

  // Every bisection starts from the Gershgorin interval, a little wider.
  const double fudge = 2.1;
  const Array norm_slack = jnp::multiply(c(static_cast<double>(n) * fudge * fi.eps), t_norm);
  const Shape ts = target.shape();
  const Array lower0 = jnp::broadcast_to(
      jnp::subtract(jnp::subtract(lambda_min, norm_slack), jnp::multiply(c(2 * fudge), pivmin)),
      ts);
  const Array upper0 = jnp::broadcast_to(
      jnp::add(jnp::add(lambda_max, norm_slack), jnp::multiply(c(fudge), pivmin)), ts);
  pivmin = jnp::broadcast_to(pivmin, ts);
  alpha0_perturbation = jnp::broadcast_to(alpha0_perturbation, ts);
  const Array half = c(0.5);

  using State = std::tuple<Array, Array, Array, Array>;  // i, lower, mid, upper
  const auto cond = [&](const State& s) {
    return jnp::logical_and(
        jnp::less(std::get<0>(s), lax::full({}, static_cast<double>(max_it), DType::I32)),
        jnp::less(abs_tol, jnp::amax(jnp::subtract(std::get<3>(s), std::get<1>(s)))));
  };
  const auto body = [&](const State& s) {
    const auto& [i, lower, mid, upper] = s;
    const Array counts = sturm_counts(alpha, beta_sq, pivmin, alpha0_perturbation, mid);
    const Array lo = jnp::where(jnp::less_equal(counts, target), mid, lower);
    const Array hi = jnp::where(jnp::greater(counts, target), mid, upper);
    return State(jnp::add(i, lax::full({}, 1, DType::I32)), lo,
                 jnp::multiply(half, jnp::add(lo, hi)), hi);
  };
  const State init(lax::full({}, 0, DType::I32), lower0,
                   jnp::multiply(half, jnp::add(upper0, lower0)), upper0);
  return std::get<2>(lax::while_loop(cond, body, init));
}

}  // namespace cujax::scipy::linalg
