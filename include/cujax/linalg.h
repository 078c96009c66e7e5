// Linear algebra under JAX's names: jax.lax.linalg, jax.numpy.linalg and jax.scipy.linalg.
//
//   namespace jnp = cujax::numpy;
//   Array l = jnp::linalg::cholesky(a);                  // a = l l^H
//   auto [q, r] = jnp::linalg::qr(a);                    // mode "reduced"
//   Array x = cujax::scipy::linalg::cho_solve({l, true}, b);
//
// The factorizations lower as JAX lowers them on the cpu platform: to the custom calls
// `lapack_?potrf_ffi`, `lapack_?getrf_ffi`, `lapack_?geqrf_ffi` + `lapack_?orgqr_ffi`
// (`ungqr` for complex), `lapack_?syevd_ffi` (`heevd`), `lapack_?gesdd_ffi`,
// `lapack_?trsm_ffi`, `lapack_?geev_ffi`, `lapack_?gees_ffi`, `lapack_?gehrd_ffi`,
// `lapack_?sytrd_ffi` (`hetrd`) and `lapack_?gtsv_ffi`, with JAX's column-major operand and
// result layouts, its `mhlo.backend_config` and its `info` outputs. grad, jvp and vmap work
// through them (docs/linalg.md lists which). A factorization that fails (not positive
// definite, no convergence) gives NaNs in the failed batch elements, never an exception.
// Every operand may carry leading batch dimensions; dtypes are f32, f64, complex64 and
// complex128. See docs/linalg.md.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "cujax/array.h"
#include "cujax/numpy.h"

namespace cujax::lax::linalg {

// The lower Cholesky factor L of x = L L^H. symmetrize_input: x is replaced by (x + x^H) / 2
// first; otherwise only x's lower triangle is read.
Array cholesky(const Array& x, bool symmetrize_input = true);

// LU with partial pivoting of x [..., m, n]: (lu, pivots, permutation). lu holds L (unit
// diagonal, below) and U; pivots [..., min(m, n)] are 0-based row swaps (i32); permutation
// [..., m] is the row order they give, so x[permutation] = L U.
std::tuple<Array, Array, Array> lu(const Array& x);
// The permutation [..., permutation_size] that applying the swaps i <-> pivots[..., i] in order
// gives.
Array lu_pivots_to_permutation(const Array& pivots, int64_t permutation_size);

// QR of x [..., m, n]: q [..., m, m] and r [..., m, n] with full_matrices, else q [..., m, k]
// and r [..., k, n] (k = min(m, n)).
std::pair<Array, Array> qr(const Array& x, bool full_matrices = true);
// JAX's qr(x, pivoting=...): with pivoting, the column-pivoted QR (LAPACK's geqp3) x[..., :, p] =
// q r with |diag(r)| non-increasing, p [..., n] (i32); without, p is invalid.
struct QrResult {
  Array q, r, p;
};
QrResult qr(const Array& x, bool full_matrices, bool pivoting);
// Column-pivoted Householder QR of a [..., m, n] (lax.linalg.geqp3): jpvt [..., n] (i32; a
// nonzero entry fixes that column in front, JAX passes zeros) -> (a, jpvt, taus): R and the
// reflectors in a as geqrf leaves them, jpvt the 1-based column order, taus [..., min(m, n)].
std::tuple<Array, Array, Array> geqp3(const Array& a, const Array& jpvt);
// The product of the Householder reflectors (I - tau_i v_i v_i^H) that a [..., m, n] (below its
// diagonal) and taus [..., k] hold: the first n columns of Q (LAPACK's orgqr / ungqr).
Array householder_product(const Array& a, const Array& taus);

// Eigenvectors and eigenvalues of the Hermitian x: (v, w) with x v = v diag(w), w ascending
// and real. lower: which triangle is read when symmetrize_input is false. sort_eigenvalues:
// LAPACK sorts them whatever it says (as JAX's cpu lowering). subset_by_index [start, end): only
// those eigenpairs, v [..., n, end - start] and w [..., end - start], sliced from the full
// decomposition (JAX's cpu lowering refuses a subset other than (0, n)).
std::pair<Array, Array> eigh(
    const Array& x, bool lower = true, bool symmetrize_input = true, bool sort_eigenvalues = true,
    const std::optional<std::pair<int64_t, int64_t>>& subset_by_index = std::nullopt);

// x = u diag(s) vh; s descending and real. Without compute_uv u and vh are invalid Arrays.
// subset_by_index [start, end): only those singular triplets (s [..., end - start], u's columns,
// vh's rows), sliced from the full decomposition (JAX's cpu lowering refuses such a subset);
// with full_matrices only the whole range (0, min(m, n)), as JAX.
struct SvdResult {
  Array u, s, vh;
};
SvdResult svd(const Array& x, bool full_matrices = true, bool compute_uv = true,
              const std::optional<std::pair<int64_t, int64_t>>& subset_by_index = std::nullopt);

// Eigenvalues w and left/right eigenvectors (complex, unit 2-norm columns) of a general x:
// x vr = vr diag(w), vl^H x = diag(w) vl^H. Vectors not asked for are invalid Arrays.
struct EigResult {
  Array w, vl, vr;
};
EigResult eig(const Array& x, bool compute_left_eigenvectors = true,
              bool compute_right_eigenvectors = true);

// The Schur form x = vs t vs^H: (t, vs); t quasi-upper-triangular for real x (2x2 blocks for
// complex pairs), upper triangular for complex x. Without vectors vs is invalid.
std::pair<Array, Array> schur(const Array& x, bool compute_schur_vectors = true);

// Reduction to upper Hessenberg form (LAPACK's gehrd): (a, taus) with the Hessenberg matrix on
// and above the first subdiagonal and the reflectors below it.
std::pair<Array, Array> hessenberg(const Array& a);

// Reduction of a Hermitian a to real symmetric tridiagonal form Q^H a Q = T (sytrd / hetrd):
// arr holds the reflectors in the triangle `lower` names, d [..., n] T's diagonal and
// e [..., n-1] its off-diagonal (both real), taus [..., n-1] the reflectors' scales.
struct TridiagonalResult {
  Array arr, d, e, taus;
};
TridiagonalResult tridiagonal(const Array& a, bool lower = true);

// Solves the tridiagonal system A x = b, A with sub-diagonal dl (dl[..., 0] unused), diagonal d
// and super-diagonal du (du[..., m-1] unused), each [..., m]; b [..., m, n]. A singular system
// gives NaNs.
Array tridiagonal_solve(const Array& dl, const Array& d, const Array& du, const Array& b);

// Solves op(a) x = b (left_side) or x op(a) = b for triangular a [..., k, k]; op transposes
// and/or conjugates a. Only the triangle `lower` names is read; unit_diagonal: its diagonal is
// taken to be ones. a and b have the same batch dimensions.
Array triangular_solve(const Array& a, const Array& b, bool left_side = false, bool lower = false,
                       bool transpose_a = false, bool conjugate_a = false,
                       bool unit_diagonal = false);

}  // namespace cujax::lax::linalg

namespace cujax::numpy::linalg {

Array cholesky(const Array& a, bool upper = false);
// mode "reduced" (q [..., m, k], r [..., k, n]), "complete" (q [..., m, m], r [..., m, n]) or
// "r" (r [..., k, n] only: the pair's first element is invalid).
std::pair<Array, Array> qr(const Array& a, const std::string& mode = "reduced");
// (u, s, vh); compute_uv false: only s (u and vh invalid).
lax::linalg::SvdResult svd(const Array& a, bool full_matrices = true, bool compute_uv = true,
                           bool hermitian = false);
// (eigenvalues, eigenvectors) as jnp.linalg.eigh; UPLO "L" or "U".
std::pair<Array, Array> eigh(const Array& a, const std::string& UPLO = "L",
                             bool symmetrize_input = true);
Array eigvalsh(const Array& a, const std::string& UPLO = "L");
// (eigenvalues, right eigenvectors), both complex.
std::pair<Array, Array> eig(const Array& a);
Array eigvals(const Array& a);
// a [..., n, n]; b [..., n] or [..., n, k] (broadcast over the batch dimensions).
Array solve(const Array& a, const Array& b);
Array inv(const Array& a);
Array det(const Array& a);
// (sign, logabsdet); sign is 0 and logabsdet -inf for a singular matrix.
std::pair<Array, Array> slogdet(const Array& a);
// (x, residuals, rank, s) minimizing |a x - b|; rcond: singular values below rcond * max(s)
// count as zero (none: eps * max(m, n)).
std::tuple<Array, Array, Array, Array> lstsq(const Array& a, const Array& b,
                                             std::optional<double> rcond = std::nullopt);
Array pinv(const Array& a, std::optional<double> rtol = std::nullopt, bool hermitian = false);
Array matrix_rank(const Array& a, std::optional<double> rtol = std::nullopt);
Array matrix_power(const Array& a, int64_t n);
// ord: nullopt (Frobenius / 2-norm of a vector), a number (inf as
// std::numeric_limits<double>::infinity()), or "fro" / "nuc". axis: none (a vector for 1-D, a
// matrix for 2-D input), one axis (vector norm) or two (matrix norm).
using NormOrd = std::variant<std::monostate, double, std::string>;
Array norm(const Array& x, const NormOrd& ord = {},
           const std::optional<std::vector<int64_t>>& axis = {}, bool keepdims = false);
Array cond(const Array& x, const NormOrd& p = {});
Array multi_dot(const std::vector<Array>& arrays);
// x with tensordot(a, x, x.ndim) == b; axes of a are first moved to the end.
Array tensorsolve(const Array& a, const Array& b,
                  const std::optional<std::vector<int64_t>>& axes = std::nullopt);
// The inverse of a seen as a matrix of its first `ind` axes by the rest.
Array tensorinv(const Array& a, int64_t ind = 2);

}  // namespace cujax::numpy::linalg

namespace cujax::scipy::linalg {

Array solve_triangular(const Array& a, const Array& b, int trans = 0, bool lower = false,
                       bool unit_diagonal = false);
// (c, lower): c's triangle `lower` names holds the factor (the other is zero here).
std::pair<Array, bool> cho_factor(const Array& a, bool lower = false);
Array cho_solve(const std::pair<Array, bool>& c_and_lower, const Array& b);
// (p, l, u) with a = p l u; permute_l: (p l, u) as the pair (first, second) and p invalid.
std::tuple<Array, Array, Array> lu(const Array& a, bool permute_l = false);
// (lu, piv): piv the 0-based row swaps, as SciPy's.
std::pair<Array, Array> lu_factor(const Array& a);
Array lu_solve(const std::pair<Array, Array>& lu_and_piv, const Array& b, int trans = 0);
// mode "full", "economic" or "r" (q invalid).
std::pair<Array, Array> qr(const Array& a, const std::string& mode = "full");
// qr(a, mode, pivoting=True): (q, r, p) with a[..., :, p] = q r (q invalid for mode "r"); without
// pivoting p is invalid.
lax::linalg::QrResult qr(const Array& a, const std::string& mode, bool pivoting);
// Eigenvalues (ascending) of the real symmetric (or complex Hermitian) tridiagonal matrix with
// diagonal d [n] and off-diagonal e [n - 1], by bisection on Sturm counts as JAX does.
// eigvals_only must be true (JAX computes no eigenvectors either); select "a" (all) or "i"
// (indices select_range[0] to select_range[1], inclusive); tol: the absolute tolerance (at
// least eps * |T|).
Array eigh_tridiagonal(const Array& d, const Array& e, bool eigvals_only = false,
                       const std::string& select = "a",
                       const std::optional<std::pair<double, double>>& select_range = std::nullopt,
                       std::optional<double> tol = std::nullopt);
Array block_diag(const std::vector<Array>& arrays);
// exp(a) by scaling and squaring with a Padé approximant (degree 3 to 13 by a's 1-norm, as
// JAX); NaN where more than max_squarings squarings would be needed.
Array expm(const Array& a, int64_t max_squarings = 16);
// (T, Z) with a = Z T Z^H; output "complex" converts a real a first (triangular T).
std::pair<Array, Array> schur(const Array& a, const std::string& output = "real");
// (H, Q) with a = Q H Q^H, H upper Hessenberg; without calc_q, Q is invalid.
std::pair<Array, Array> hessenberg(const Array& a, bool calc_q = false);

}  // namespace cujax::scipy::linalg
