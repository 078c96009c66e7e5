// The VJP and batching rules of lax.linalg's custom calls (lapack_?*_ffi, lax/linalg.cpp).
//
// VJPs: trsm's and gtsv's are written out (JAX's transpose rules). potrf, getrf, geev,
// syevd/heevd and gesdd have JAX's JVP rules (cholesky_jvp_rule, lu_jvp_rule, eig_jvp_rule,
// eigh_jvp_rule, svd_jvp_rule), which
// are linear in the tangent; their VJP is that linear map transposed by the backward walk itself,
// as JAX transposes its JVPs. Like JAX's primitives, the rules take the perturbation of the
// whole (Hermitian) matrix; the symmetrization before the call carries it to both triangles.
//
// Batching: the calls already map over leading dimensions, so vmap moves the batch dimension to
// the front and re-emits the call with its layouts and num_batch_dims one dimension wider.
#include "trace/linalg_rules.h"

#include "cujax/linalg.h"
#include "cujax/numpy.h"
#include "trace/batching_rules.h"
#include "trace/vjp_rules.h"

namespace cujax::trace {

namespace {

namespace jnp = cujax::numpy;
namespace ll = cujax::lax::linalg;

// "potrf" for lapack_spotrf_ffi and cusolver_potrf_ffi (JAX's cuda lowering, which returns
// what LAPACK's does but for gesvdj's V and gtsv2's lone x); "gtsv2" for cusparse_gtsv2_ffi.
std::string family_of(const std::string& target) {
  if (target.rfind("cusolver_", 0) == 0) return target.substr(9, target.size() - 13);
  if (target == "cusparse_gtsv2_ffi") return "gtsv2";
  if (target == "cu_lu_pivots_to_permutation") return "pivots_to_permutation";
  return target.substr(8, target.size() - 12);
}

char config_char(const ir::Operation& op, const char* name, char dflt) {
  const ir::Attribute* c = op.attr("mhlo.backend_config");
  const ir::Attribute* f = c ? c->field(name) : nullptr;
  return f && f->kind == ir::Attribute::Kind::Integer ? static_cast<char>(f->integer) : dflt;
}

// The SVD's mode: LAPACK's `mode`, or cuSOLVER's compute_uv and full_matrices.
char svd_mode(const ir::Operation& op) {
  const ir::Attribute* c = op.attr("mhlo.backend_config");
  const ir::Attribute* uv = c ? c->field("compute_uv") : nullptr;
  if (!uv || uv->kind != ir::Attribute::Kind::Bool) return config_char(op, "mode", 'A');
  const ir::Attribute* full = c->field("full_matrices");
  return !uv->boolean                                                          ? 'N'
         : (full && full->kind == ir::Attribute::Kind::Bool && !full->boolean) ? 'S'
                                                                               : 'A';
}

[[noreturn]] void no_grad(const ir::Operation& op, const std::string& why) {
  throw Error("grad of stablehlo.custom_call @" + custom_call_target(op) + ": " + why);
}

// The last two dimensions swapped (no conjugation).
Array mT(const Array& x) {
  return jnp::swapaxes(x, -1, -2);
}
Array mH(const Array& x) {
  return is_complex(x.dtype()) ? jnp::conj(mT(x)) : mT(x);
}
Array eye_as(const Array& x) {
  return jnp::broadcast_to(jnp::astype(jnp::eye(x.shape().back()), x.dtype()), x.shape());
}
Array diag_of(const Array& x) {
  return jnp::diagonal(x, 0, -2, -1);
}
// A batch of diagonal matrices from vectors [..., n].
Array to_diag(const Array& v) {
  Shape s = v.shape();
  s.push_back(v.shape().back());
  return jnp::multiply(jnp::expand_dims(v, -1), eye_as(jnp::zeros(s, v.dtype())));
}

// ----- JVPs (tangents of the float results, with their result indices)

struct Tangents {
  std::vector<size_t> results;
  std::vector<Array> values;
};

// cholesky_jvp_rule: L' = L phi(L^-1 A' L^-H), phi the lower triangle with half the diagonal.
Tangents potrf_jvp(const VjpArgs& a, const Array& da) {
  if (config_char(a.op, "uplo", 'L') != 'L') no_grad(a.op, "only uplo = 'L' is differentiable");
  const Array l = jnp::tril(a.results[0]);
  const Array y = ll::triangular_solve(l, da, true, true);
  const Array x = ll::triangular_solve(l, y, false, true, true, true);
  const Array phi = jnp::subtract(jnp::tril(x), jnp::multiply(jnp::multiply(x, eye_as(x)), 0.5));
  return {{0}, {jnp::matmul(l, phi)}};
}

// lu_jvp_rule (De Hoog, Anderssen and Lukas): with L [m, m] (unit lower, padded with I's
// columns), U [n, n] (upper, padded with I's rows) and X = L^-1 P A' U^-1 [m, n],
// LU' = L tril(X, -1) + triu(X) U.
Tangents getrf_jvp(const VjpArgs& a, const Array& da) {
  const Array& lu = a.results[0];
  const int64_t nd = lu.ndim();
  const int64_t m = lu.shape()[nd - 2], n = lu.shape().back(), k = std::min(m, n);
  const Array pivots = jnp::subtract(a.results[1], 1);
  const Array perm = ll::lu_pivots_to_permutation(pivots, m);
  const Array pa = jnp::take_along_axis(da, jnp::expand_dims(perm, -1), -2);
  std::vector<int64_t> start(static_cast<size_t>(nd), 0);
  Shape cols = lu.shape(), rows = lu.shape();
  cols[nd - 1] = k;
  rows[nd - 2] = k;
  std::vector<std::pair<int64_t, int64_t>> lpad(static_cast<size_t>(nd), {0, 0});
  std::vector<std::pair<int64_t, int64_t>> upad = lpad;
  lpad[nd - 1] = {0, m - k};
  upad[nd - 2] = {0, n - k};
  Shape ls = lu.shape();
  ls[nd - 1] = m;
  const Array l = jnp::add(jnp::pad(jnp::tril(lax::slice(lu, start, cols), -1), lpad),
                           eye_as(jnp::zeros(ls, lu.dtype())));
  // U's padding rows carry the identity's trailing block so that U stays invertible.
  const Array u_eye = to_diag(jnp::astype(jnp::greater_equal(jnp::arange(n), k), lu.dtype()));
  const Array u = jnp::add(jnp::pad(jnp::triu(lax::slice(lu, start, rows)), upad), u_eye);
  const Array la = ll::triangular_solve(l, pa, true, true, false, false, true);
  const Array x = ll::triangular_solve(u, la, false, false);
  return {{0}, {jnp::add(jnp::matmul(l, jnp::tril(x, -1)), jnp::matmul(jnp::triu(x), u))}};
}

// eig_jvp_rule: eigenvalues only (JAX refuses eigenvector derivatives). With V the right
// eigenvectors, computed again as JAX does, w' = diag(V^-1 A' V).
Tangents geev_jvp(const VjpArgs& a, const Array& da) {
  if (config_char(a.op, "compute_left", 'N') == 'V' ||
      config_char(a.op, "compute_right", 'N') == 'V')
    no_grad(a.op,
            "the derivatives of eigenvectors are not implemented, only eigenvalues (as in JAX; "
            "see https://github.com/jax-ml/jax/issues/2748): use compute_left_eigenvectors = "
            "compute_right_eigenvectors = false, or jnp::linalg::eigvals");
  const Array v = ll::eig(a.operands[0], false, true).vr;
  const Array dw =
      jnp::sum(jnp::multiply(jnp::linalg::solve(v, jnp::astype(da, v.dtype())), mT(v)), -1);
  if (is_complex(a.operands[0].dtype())) return {{0}, {dw}};
  return {{0, 1}, {jnp::real(dw), jnp::imag(dw)}};
}

// eigh_jvp_rule: with M = V^H A' V, V' = V (F o M), w' = real(diag(M)), F_ij = 1 / (w_j - w_i).
Tangents syevd_jvp(const VjpArgs& a, const Array& da) {
  if (config_char(a.op, "mode", 'V') != 'V') no_grad(a.op, "needs the eigenvectors (mode 'V')");
  const Array& v = a.results[0];
  const Array& w = a.results[1];
  const Array eye = eye_as(jnp::zeros(v.shape(), w.dtype()));
  const Array f =
      jnp::subtract(jnp::reciprocal(jnp::add(
                        eye, jnp::subtract(jnp::expand_dims(w, -2), jnp::expand_dims(w, -1)))),
                    eye);
  const Array m = jnp::matmul(jnp::matmul(mH(v), da), v);
  const Array dv = jnp::matmul(v, jnp::multiply(jnp::astype(f, v.dtype()), m));
  return {{0, 1}, {dv, jnp::real(diag_of(m))}};
}

// svd_jvp_rule (reduced matrices; full ones only where they are the same, m == n).
Tangents gesdd_jvp(const VjpArgs& a, const Array& da) {
  const char mode = svd_mode(a.op);
  // cusolver_gesvdj_ffi returns V: the rule runs on V^H and gives V's tangent back.
  const bool gives_v = family_of(custom_call_target(a.op)) == "gesvdj";
  const Array& x = a.operands[0];
  const int64_t m = x.shape()[x.ndim() - 2], n = x.shape().back();
  if (mode == 'A' && m != n)
    no_grad(a.op, "the SVD with full_matrices of a non-square matrix " +
                      shape_to_string(x.shape()) + " is not differentiable (as in JAX)");
  Array u, s, vt;
  if (mode == 'N') {
    const ll::SvdResult r = ll::svd(x, false, true);
    u = r.u, s = r.s, vt = r.vh;
  } else {
    u = a.results[2], s = a.results[1], vt = gives_v ? mH(a.results[3]) : a.results[3];
  }
  const DType t = x.dtype();
  const Array v = mH(vt);
  const Array ds_mat = jnp::matmul(jnp::matmul(mH(u), da), v);
  const Array ds = jnp::real(diag_of(ds_mat));
  if (mode == 'N') return {{1}, {ds}};
  const Array s_row = jnp::expand_dims(s, -2), s_col = jnp::expand_dims(s, -1);
  const Array s_diffs = jnp::multiply(jnp::add(s_row, s_col), jnp::subtract(s_row, s_col));
  const Array zeros_at = jnp::astype(jnp::equal(s_diffs, 0), s.dtype());
  const Array f =
      jnp::astype(jnp::subtract(jnp::reciprocal(jnp::add(s_diffs, zeros_at)), zeros_at), t);
  const Array dss = jnp::multiply(jnp::astype(s_row, t), ds_mat);
  const Array sds = jnp::multiply(jnp::astype(s_col, t), ds_mat);
  const Array s_zero = jnp::astype(jnp::equal(s, 0), s.dtype());
  const Array s_inv = jnp::subtract(jnp::reciprocal(jnp::add(s, s_zero)), s_zero);
  const Array duv_diag = jnp::multiply(jnp::multiply(jnp::subtract(ds_mat, mH(ds_mat)), 0.5),
                                       jnp::astype(to_diag(s_inv), t));
  Array du = jnp::matmul(u, jnp::add(jnp::multiply(f, jnp::add(dss, mH(dss))), duv_diag));
  Array dv = jnp::matmul(v, jnp::multiply(f, jnp::add(sds, mH(sds))));
  if (m > n) {
    const Array dav = jnp::matmul(da, v);
    du = jnp::add(du, jnp::divide(jnp::subtract(dav, jnp::matmul(u, jnp::matmul(mH(u), dav))),
                                  jnp::astype(s_row, t)));
  }
  if (n > m) {
    const Array dahu = jnp::matmul(mH(da), u);
    dv = jnp::add(dv, jnp::divide(jnp::subtract(dahu, jnp::matmul(v, jnp::matmul(vt, dahu))),
                                  jnp::astype(s_row, t)));
  }
  return {{1, 2, 3}, {ds, du, gives_v ? dv : mH(dv)}};
}

// The VJP of a call whose JVP `jvp` is linear in its tangent: the backward walk of that JVP.
std::vector<std::optional<Array>> transpose_jvp(const VjpArgs& a,
                                                Tangents (*jvp)(const VjpArgs&, const Array&)) {
  const Array da = fresh(zeros_like(a.operands[0]));
  const Mark m = mark();
  const Tangents t = jvp(a, da);
  std::vector<Array> cts;
  for (size_t i : t.results) cts.push_back(a.cts[i]);
  return {backward(ops_since(m), {da}, t.values, cts)[0]};
}

// JAX's triangular_solve transpose rule: b's cotangent solves with op(a) transposed; a's is
// -(b_ct x^T) (left side) or -(x^T b_ct), brought back through op and masked to the triangle.
std::vector<std::optional<Array>> trsm_vjp(const VjpArgs& a) {
  const Array &x = a.results[0], &ct = a.cts[0];
  const bool left = config_char(a.op, "side", 'L') == 'L';
  const bool lower = config_char(a.op, "uplo", 'L') == 'L';
  const char trans = config_char(a.op, "trans_x", 'N');
  const bool unit = config_char(a.op, "diag", 'N') == 'U';
  const Array b_ct =
      ll::triangular_solve(a.operands[0], ct, left, lower, trans == 'N', trans == 'C', unit);
  std::optional<Array> a_ct;
  if (a.needed[0]) {
    Array g = jnp::negative(left ? jnp::matmul(b_ct, mT(x)) : jnp::matmul(mT(x), b_ct));
    if (trans == 'T') g = mT(g);
    if (trans == 'C') g = mH(g);
    a_ct = lower ? jnp::tril(g, unit ? -1 : 0) : jnp::triu(g, unit ? 1 : 0);
  }
  return {a_ct, b_ct};
}

// x moved by one along `axis`: x_prev[i] = x[i - 1] (zero first), or x_next[i] = x[i + 1].
Array shifted(const Array& x, int64_t axis, bool prev) {
  const int64_t m = x.shape()[static_cast<size_t>(axis)];
  std::vector<std::pair<int64_t, int64_t>> pad(static_cast<size_t>(x.ndim()), {0, 0});
  pad[static_cast<size_t>(axis)] =
      prev ? std::pair<int64_t, int64_t>{1, 0} : std::pair<int64_t, int64_t>{0, 1};
  std::vector<int64_t> start(static_cast<size_t>(x.ndim()), 0);
  Shape limit = x.shape();
  if (prev)
    limit[static_cast<size_t>(axis)] = m - 1;
  else
    start[static_cast<size_t>(axis)] = 1;
  return jnp::pad(lax::slice(x, start, limit), pad);
}

// The transpose rule of tridiagonal_solve: b's cotangent solves the transposed system (its
// sub- and super-diagonals swapped); the diagonals' cotangents are -b_ct x^T on the three
// diagonals.
std::vector<std::optional<Array>> gtsv_vjp(const VjpArgs& a) {
  const Array &dl = a.operands[0], &d = a.operands[1], &du = a.operands[2];
  const size_t xi = a.results.size() == 1 ? 0 : 3;  // cusparse_gtsv2_ffi returns x alone
  const Array& x = a.results[xi];
  const int64_t last = dl.ndim() - 1;
  const Array b_ct =
      ll::tridiagonal_solve(shifted(du, last, true), d, shifted(dl, last, false), a.cts[xi]);
  const int64_t rows = x.ndim() - 2;
  const auto minus_dot = [&](const Array& y) {
    return jnp::negative(jnp::sum(jnp::multiply(b_ct, y), -1));
  };
  return {minus_dot(shifted(x, rows, true)), minus_dot(x), minus_dot(shifted(x, rows, false)),
          b_ct};
}

// ----- batching

std::vector<int64_t> layout_ints(const ir::Attribute& a) {
  if (a.kind != ir::Attribute::Kind::Opaque) return ir::as_ints(a);
  const size_t open = a.text.find("dense<");
  const size_t close = a.text.find('>', open);
  std::vector<int64_t> out;
  if (open == std::string::npos || close == std::string::npos)
    throw Error("vmap of a linear-algebra custom call: layout '" + a.text + "' is not a list");
  const std::string body = a.text.substr(open + 6, close - open - 6);
  for (size_t p = 0; p < body.size();) {
    if (body[p] >= '0' && body[p] <= '9') {
      size_t used = 0;
      out.push_back(std::stoll(body.substr(p), &used));
      p += used;
    } else {
      ++p;
    }
  }
  return out;
}

// Each layout with a new outermost (major-most) dimension in front.
ir::AttrRef wider_layouts(const ir::Attribute* layouts) {
  std::vector<ir::AttrRef> e;
  for (const auto& l : layouts->elements) {
    std::vector<int64_t> m2m;
    for (int64_t d : layout_ints(*l)) m2m.push_back(d + 1);
    m2m.push_back(0);
    std::string s = "dense<";
    if (m2m.size() > 1) s += "[";
    for (size_t i = 0; i < m2m.size(); ++i) s += (i ? ", " : "") + std::to_string(m2m[i]);
    if (m2m.size() > 1) s += "]";
    e.push_back(ir::Attribute::opaque(s + "> : tensor<" + std::to_string(m2m.size()) + "xindex>"));
  }
  return ir::Attribute::array(std::move(e));
}

}  // namespace

std::string custom_call_target(const ir::Operation& op) {
  const ir::Attribute* t = op.attr("call_target_name");
  return t ? t->text : "";
}

bool is_linalg_call(const ir::Operation& op) {
  const std::string t = custom_call_target(op);
  return (t.rfind("lapack_", 0) == 0 && t.size() > 12 && t.compare(t.size() - 4, 4, "_ffi") == 0) ||
         (t.rfind("cusolver_", 0) == 0 && t.size() > 13 &&
          t.compare(t.size() - 4, 4, "_ffi") == 0) ||
         t == "cusparse_gtsv2_ffi" || t == "cu_lu_pivots_to_permutation";
}

std::vector<std::optional<Array>> linalg_vjp(const VjpArgs& a) {
  const std::string f = family_of(custom_call_target(a.op));
  if (f == "trsm") return trsm_vjp(a);
  if (f == "potrf") return transpose_jvp(a, potrf_jvp);
  if (f == "getrf") return transpose_jvp(a, getrf_jvp);
  if (f == "syevd" || f == "heevd") return transpose_jvp(a, syevd_jvp);
  if (f == "gesdd" || f == "gesvdj" || f == "gesvd") return transpose_jvp(a, gesdd_jvp);
  if (f == "gtsv" || f == "gtsv2") return gtsv_vjp(a);
  if (f == "geev") return transpose_jvp(a, geev_jvp);
  // JAX defines no derivative for these primitives either; its message names the primitive.
  static const std::pair<const char*, const char*> jax_names[] = {{"gees", "schur"},
                                                                  {"gehrd", "hessenberg"},
                                                                  {"sytrd", "tridiagonal"},
                                                                  {"hetrd", "tridiagonal"},
                                                                  {"orgqr", "householder_product"},
                                                                  {"ungqr", "householder_product"},
                                                                  {"geqrf", "geqrf"},
                                                                  {"geqp3", "geqp3"}};
  for (const auto& [family, name] : jax_names)
    if (f == family)
      no_grad(a.op, std::string("Differentiation rule for '") + name + "' not implemented");
  no_grad(a.op,
          "it has no VJP rule (differentiable: potrf, getrf, geev, syevd/heevd, gesdd, trsm, "
          "gtsv)");
}

std::vector<Batched> linalg_batch(const BatchArgs& a) {
  std::vector<Array> in;
  for (size_t i = 0; i < a.operands.size(); ++i)
    in.push_back(batching::batch_at(a.operands[i], a.bdims[i], a.size, 0));
  std::vector<ir::NamedAttribute> overrides;
  for (const char* name : {"operand_layouts", "result_layouts"})
    if (const ir::Attribute* l = a.op.attr(name)) overrides.push_back({name, wider_layouts(l)});
  if (const ir::Attribute* fa = a.op.attr("mhlo.frontend_attributes")) {
    auto copy = std::make_shared<ir::Attribute>(*fa);
    for (auto& f : copy->fields)
      if (f.name == "num_batch_dims" && f.value->kind == ir::Attribute::Kind::String)
        f.value = ir::Attribute::string_attr(std::to_string(std::stoll(f.value->text) + 1));
    overrides.push_back({"mhlo.frontend_attributes", copy});
  }
  return batching::at_front(
      batching::rebind(a.op, in, batching::batched_types(a.op, a.size, 0), overrides));
}

}  // namespace cujax::trace
