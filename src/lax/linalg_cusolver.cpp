// lax.linalg.svd as JAX lowers it on cuda: cusolver_gesvdj_ffi (Jacobi, which returns V rather
// than V^H) for matrices up to 1024 x 1024, cusolver_gesvd_ffi (QR) beyond, on the tall
// orientation (a wide matrix's SVD is its adjoint's with the factors swapped).
#include "lax/linalg_call.h"
#include "lax/util.h"

namespace cujax::lax::linalg::detail {

SvdResult cusolver_svd(const Array& x, bool full_matrices, bool compute_uv) {
  const int64_t m = x.shape()[x.ndim() - 2], n = x.shape()[x.ndim() - 1];
  const int64_t k = std::min(m, n);
  const DType real = complex_component(x.dtype());
  SvdResult out;
  CallSpec c;
  c.config_bool = {{"compute_uv", compute_uv}, {"full_matrices", full_matrices}};
  c.operand_matrix = {true};
  c.result_matrix = {true, false, true, true, false};
  c.alias_operand = 0;
  if (m <= 1024 && n <= 1024) {
    const int64_t uc = full_matrices ? m : k, vc = full_matrices ? n : k;
    c.target = "cusolver_gesvdj_ffi";
    c.results = {ir::Type::tensor(x.shape(), x.dtype()),
                 ir::Type::tensor(batch_of(x.shape(), {k}), real),
                 ir::Type::tensor(batch_of(x.shape(), {m, uc}), x.dtype()),
                 ir::Type::tensor(batch_of(x.shape(), {n, vc}), x.dtype()),
                 ir::Type::tensor(batch_of(x.shape(), {}), DType::I32)};
    const std::vector<Array> r = lapack_call(c, {x});
    const Array ok = info_ok(r[4]);
    out.s = nan_unless(ok, r[1]);
    if (compute_uv) {
      out.u = nan_unless(ok, r[2]);
      out.vh = nan_unless(ok, adjoint(r[3]));
    }
    return out;
  }
  if (m < n) {
    const SvdResult t = cusolver_svd(adjoint(x), full_matrices, compute_uv);
    out.s = t.s;
    if (compute_uv) {
      out.u = adjoint(t.vh);
      out.vh = adjoint(t.u);
    }
    return out;
  }
  c.target = "cusolver_gesvd_ffi";
  c.config_bool.push_back({"transposed", false});
  const int64_t uc = !compute_uv ? 0 : full_matrices ? m : n, ur = compute_uv ? m : 0;
  const int64_t vn = compute_uv ? n : 0;
  c.results = {ir::Type::tensor(x.shape(), x.dtype()),
               ir::Type::tensor(batch_of(x.shape(), {n}), real),
               ir::Type::tensor(batch_of(x.shape(), {ur, uc}), x.dtype()),
               ir::Type::tensor(batch_of(x.shape(), {vn, vn}), x.dtype()),
               ir::Type::tensor(batch_of(x.shape(), {}), DType::I32)};
  const std::vector<Array> r = lapack_call(c, {x});
  const Array ok = info_ok(r[4]);
  out.s = nan_unless(ok, r[1]);
  if (compute_uv) {
    out.u = nan_unless(ok, r[2]);
    out.vh = nan_unless(ok, r[3]);
  }
  return out;
}

}  // namespace cujax::lax::linalg::detail
