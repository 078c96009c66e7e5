// lax.linalg's factorizations of general square matrices: eig (lapack_?geev_ffi), schur
// (lapack_?gees_ffi) and hessenberg (lapack_?gehrd_ffi); and the tridiagonal ones: tridiagonal
// (lapack_?sytrd_ffi / hetrd) and tridiagonal_solve (lapack_?gtsv_ffi). Lowered as JAX lowers
// them on cpu; for cuda (linalg_platform.h) the tridiagonal ones become cusolver_sytrd_ffi and
// cusparse_gtsv2_ffi, and eig, schur and hessenberg stay LAPACK's, as JAX has them on cpu only.
#include "cujax/linalg.h"
#include "lax/linalg_call.h"
#include "lax/util.h"

namespace cujax::lax::linalg {

using namespace detail;

EigResult eig(const Array& x, bool compute_left_eigenvectors, bool compute_right_eigenvectors) {
  const std::string op = "linalg.eig";
  check_matrix(op, x, true);
  const bool cplx = is_complex(x.dtype());
  const DType ct = cplx ? x.dtype() : to_complex(x.dtype());
  const int64_t n = x.shape().back();
  CallSpec c;
  c.target = std::string("lapack_") + type_prefix(op, x) + "geev_ffi";
  c.config = {{"compute_left", compute_left_eigenvectors ? 'V' : 'N'},
              {"compute_right", compute_right_eigenvectors ? 'V' : 'N'}};
  const ir::Type vec = ir::Type::tensor(batch_of(x.shape(), {n}), x.dtype());
  const ir::Type vectors = ir::Type::tensor(x.shape(), ct);
  const ir::Type info = ir::Type::tensor(batch_of(x.shape(), {}), DType::I32);
  if (cplx) {
    c.results = {vec, vectors, vectors, info};
    c.result_matrix = {false, true, true, false};
  } else {
    c.results = {vec, vec, vectors, vectors, info};
    c.result_matrix = {false, false, true, true, false};
  }
  c.operand_matrix = {true};
  const std::vector<Array> r = lapack_call(c, {x});
  const size_t k = cplx ? 1 : 2;
  const Array ok = info_ok(r[k + 2]);
  EigResult out;
  out.w = nan_unless(ok, cplx ? r[0] : lax::complex(r[0], r[1]));
  if (compute_left_eigenvectors) out.vl = nan_unless(ok, r[k]);
  if (compute_right_eigenvectors) out.vr = nan_unless(ok, r[k + 1]);
  return out;
}

std::pair<Array, Array> schur(const Array& x, bool compute_schur_vectors) {
  const std::string op = "linalg.schur";
  check_matrix(op, x, true);
  const bool cplx = is_complex(x.dtype());
  const int64_t n = x.shape().back();
  CallSpec c;
  c.target = std::string("lapack_") + type_prefix(op, x) + "gees_ffi";
  c.config = {{"mode", compute_schur_vectors ? 'V' : 'N'}, {"sort", 'N'}};
  const ir::Type mat = ir::Type::tensor(x.shape(), x.dtype());
  const ir::Type vec = ir::Type::tensor(batch_of(x.shape(), {n}), x.dtype());
  const ir::Type scalar = ir::Type::tensor(batch_of(x.shape(), {}), DType::I32);
  if (cplx) {
    c.results = {mat, mat, vec, scalar, scalar};
    c.result_matrix = {true, true, false, false, false};
  } else {
    c.results = {mat, mat, vec, vec, scalar, scalar};
    c.result_matrix = {true, true, false, false, false, false};
  }
  c.operand_matrix = {true};
  c.alias_operand = 0;
  const std::vector<Array> r = lapack_call(c, {x});
  const Array ok = info_ok(r.back());
  return {nan_unless(ok, r[0]), compute_schur_vectors ? nan_unless(ok, r[1]) : Array()};
}

std::pair<Array, Array> hessenberg(const Array& a) {
  const std::string op = "linalg.hessenberg";
  check_matrix(op, a, true);
  const int64_t n = a.shape().back();
  if (n == 0) lax::detail::fail(op, "needs a non-empty matrix, got " + lax::detail::type_str(a));
  CallSpec c;
  c.target = std::string("lapack_") + type_prefix(op, a) + "gehrd_ffi";
  c.config_i32 = {{"high", static_cast<int32_t>(n)}, {"low", 1}};
  c.results = {ir::Type::tensor(a.shape(), a.dtype()),
               ir::Type::tensor(batch_of(a.shape(), {n - 1}), a.dtype()),
               ir::Type::tensor(batch_of(a.shape(), {}), DType::I32)};
  c.operand_matrix = {true};
  c.result_matrix = {true, false, false};
  c.alias_operand = 0;
  const std::vector<Array> r = lapack_call(c, {a});
  const Array ok = info_ok(r[2]);
  return {nan_unless(ok, r[0]), nan_unless(ok, r[1])};
}

TridiagonalResult tridiagonal(const Array& a, bool lower) {
  const std::string op = "linalg.tridiagonal";
  check_matrix(op, a, true);
  const int64_t n = a.shape().back();
  if (n == 0) lax::detail::fail(op, "needs a non-empty matrix, got " + lax::detail::type_str(a));
  const DType real = complex_component(a.dtype());
  CallSpec c;
  c.target = std::string("lapack_") + type_prefix(op, a) +
             (is_complex(a.dtype()) ? "hetrd_ffi" : "sytrd_ffi");
  c.config = {{"uplo", lower ? 'L' : 'U'}};
  if (lower_for_cuda()) {
    c.target = "cusolver_sytrd_ffi";
    c.config = {};
    c.config_bool = {{"lower", lower}};
  }
  c.results = {ir::Type::tensor(a.shape(), a.dtype()),
               ir::Type::tensor(batch_of(a.shape(), {n}), real),
               ir::Type::tensor(batch_of(a.shape(), {n - 1}), real),
               ir::Type::tensor(batch_of(a.shape(), {n - 1}), a.dtype()),
               ir::Type::tensor(batch_of(a.shape(), {}), DType::I32)};
  c.operand_matrix = {true};
  c.result_matrix = {true, false, false, false, false};
  c.alias_operand = 0;
  const std::vector<Array> r = lapack_call(c, {a});
  const Array ok = info_ok(r[4]);
  return {nan_unless(ok, r[0]), nan_unless(ok, r[1]), nan_unless(ok, r[2]), nan_unless(ok, r[3])};
}

Array tridiagonal_solve(const Array& dl, const Array& d, const Array& du, const Array& b) {
  const std::string op = "linalg.tridiagonal_solve";
  check_matrix(op, b, false);
  const int64_t m = b.shape()[b.ndim() - 2];
  const Shape diag = batch_of(b.shape(), {m});
  for (const Array* x : {&dl, &d, &du})
    if (x->shape() != diag || x->dtype() != b.dtype())
      lax::detail::fail(op, "dl, d and du must be " + lax::detail::type_str(b.dtype(), diag) +
                                " for b " + lax::detail::type_str(b) + ", got " +
                                lax::detail::type_str(dl) + ", " + lax::detail::type_str(d) +
                                " and " + lax::detail::type_str(du));
  CallSpec c;
  if (lower_for_cuda()) {  // cuSPARSE's gtsv2: x alone, no info
    type_prefix(op, b);
    c.target = "cusparse_gtsv2_ffi";
    c.results = {ir::Type::tensor(b.shape(), b.dtype())};
    c.operand_matrix = {false, false, false, true};
    c.result_matrix = {true};
    c.alias_operand = 3;
    c.batch_attr = true;
    return lapack_call(c, {dl, d, du, b})[0];
  }
  c.target = std::string("lapack_") + type_prefix(op, b) + "gtsv_ffi";
  const ir::Type dt = ir::Type::tensor(diag, b.dtype());
  c.results = {dt, dt, dt, ir::Type::tensor(b.shape(), b.dtype()),
               ir::Type::tensor(batch_of(b.shape(), {}), DType::I32)};
  c.operand_matrix = {false, false, false, true};
  c.result_matrix = {false, false, false, true, false};
  c.alias_each = true;
  const std::vector<Array> r = lapack_call(c, {dl, d, du, b});
  return nan_unless(info_ok(r[4]), r[3]);
}

}  // namespace cujax::lax::linalg
