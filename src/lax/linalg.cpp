// lax.linalg: the factorizations as the custom calls JAX emits on the cpu platform
// (lapack_?potrf_ffi, getrf, geqrf, orgqr/ungqr, syevd/heevd, gesdd, trsm), with JAX's
// column-major layouts, backend_config and info outputs; failed batch elements become NaNs as
// JAX's lowering makes them. For cuda (linalg_platform.h) they lower as JAX lowers them there:
// cusolver_{potrf,getrf,geqrf,orgqr,syevd}_ffi, cu_lu_pivots_to_permutation and the SVD of
// linalg_cusolver.cpp; triangular_solve keeps lapack_?trsm_ffi (JAX's is stablehlo's op). The
// VJP and batching rules of these calls are in trace/linalg_rules.cpp.
#include "lax/linalg_call.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "cujax/grad.h"
#include "cujax/linalg.h"
#include "cujax/linalg_platform.h"
#include "cujax/numpy.h"
#include "lax/util.h"

namespace cujax::lax::linalg {

using lax::detail::fail;
using lax::detail::type_str;

namespace detail {

namespace {

// JAX's minor-to-major order: matrices column-major inside a row-major batch; anything else
// row-major.
std::string layout_text(int64_t rank, bool matrix) {
  std::vector<int64_t> m2m;
  if (matrix && rank >= 2) m2m = {rank - 2, rank - 1};
  for (int64_t d = rank - (matrix && rank >= 2 ? 3 : 1); d >= 0; --d) m2m.push_back(d);
  std::string s = "dense<";
  if (m2m.size() == 1) {
    s += std::to_string(m2m[0]);
  } else if (m2m.size() > 1) {  // a scalar's is `dense<>`, as MLIR prints it
    s += "[";
    for (size_t i = 0; i < m2m.size(); ++i) s += (i ? ", " : "") + std::to_string(m2m[i]);
    s += "]";
  }
  return s + "> : tensor<" + std::to_string(rank) + "xindex>";
}

ir::AttrRef layouts(const std::vector<ir::Type>& types, const std::vector<bool>& matrix) {
  std::vector<ir::AttrRef> e;
  for (size_t i = 0; i < types.size(); ++i)
    e.push_back(
        ir::Attribute::opaque(layout_text(static_cast<int64_t>(types[i].shape.size()), matrix[i])));
  return ir::Attribute::array(std::move(e));
}

ir::AttrRef dictionary(std::vector<ir::NamedAttribute> fields) {
  auto a = std::make_shared<ir::Attribute>();
  a->kind = ir::Attribute::Kind::Dictionary;
  a->fields = std::move(fields);
  return a;
}

}  // namespace

bool lower_for_cuda() {
  return lowering_platform() == "cuda";
}

char type_prefix(const std::string& op, const Array& x) {
  switch (x.dtype()) {
    case DType::F32:
      return 's';
    case DType::F64:
      return 'd';
    case DType::C64:
      return 'c';
    case DType::C128:
      return 'z';
    default:
      fail(op, "operand must be float32, float64, complex64 or complex128, got " + type_str(x));
  }
}

void check_matrix(const std::string& op, const Array& x, bool square) {
  lax::detail::check_valid(op, x);
  type_prefix(op, x);
  if (x.ndim() < 2)
    fail(op, "operand must be a matrix or a batch of matrices [..., m, n], got " + type_str(x));
  if (square && x.shape()[x.ndim() - 1] != x.shape()[x.ndim() - 2])
    fail(op, "operand must be a square matrix or a batch of them [..., n, n], got " + type_str(x));
}

Shape batch_of(const Shape& s, std::initializer_list<int64_t> tail) {
  Shape b(s.begin(), s.end() - 2);
  b.insert(b.end(), tail);
  return b;
}

std::vector<Array> lapack_call(const CallSpec& c, const std::vector<Array>& operands) {
  trace::OpSpec s;
  s.name = "stablehlo.custom_call";
  std::vector<ir::Type> in_types;
  for (const Array& a : operands) in_types.push_back(ir::Type::tensor(a.shape(), a.dtype()));
  std::vector<ir::NamedAttribute> config;
  for (const auto& [k, v] : c.config)
    config.push_back({k, ir::Attribute::integer_attr(v, DType::U8)});
  for (const auto& [k, v] : c.config_i32)
    config.push_back({k, ir::Attribute::integer_attr(v, DType::I32)});
  for (const auto& [k, v] : c.config_bool) config.push_back({k, ir::Attribute::boolean_attr(v)});
  // MLIR keeps a dictionary's fields sorted by name.
  std::sort(
      config.begin(), config.end(),
      [](const ir::NamedAttribute& a, const ir::NamedAttribute& b) { return a.name < b.name; });
  s.attributes.push_back({"call_target_name", ir::Attribute::string_attr(c.target)});
  s.attributes.push_back({"mhlo.backend_config", dictionary(std::move(config))});
  if (c.batch_attr) {
    const int64_t nb = c.batch_dims >= 0 ? c.batch_dims : operands[0].ndim() - 2;
    s.attributes.push_back(
        {"mhlo.frontend_attributes",
         dictionary({{"num_batch_dims", ir::Attribute::string_attr(std::to_string(nb))}})});
  }
  s.attributes.push_back({"operand_layouts", layouts(in_types, c.operand_matrix)});
  // Result i overwrites operand i (result 0 only, or every operand with alias_each).
  std::vector<ir::AttrRef> aliases;
  const int n_alias = c.alias_each ? static_cast<int>(operands.size()) : c.alias_operand >= 0;
  for (int i = 0; i < n_alias; ++i) {
    const int operand = c.alias_each ? i : c.alias_operand;
    const std::vector<int64_t> out =
        c.results.size() > 1 ? std::vector<int64_t>{i} : std::vector<int64_t>{};
    aliases.push_back(ir::Attribute::struct_attr(
        "stablehlo.output_operand_alias",
        {{"output_tuple_indices", ir::Attribute::int_list(out)},
         {"operand_index", ir::Attribute::integer_attr(operand, std::nullopt)},
         {"operand_tuple_indices", ir::Attribute::int_list({})}}));
  }
  if (!aliases.empty())
    s.attributes.push_back({"output_operand_aliases", ir::Attribute::array(std::move(aliases))});
  s.attributes.push_back({"result_layouts", layouts(c.results, c.result_matrix)});
  s.result_types = c.results;
  return trace::bind(s, operands);
}

Array nan_unless(const Array& ok, const Array& x) {
  // ok has x's batch shape (its leading dimensions).
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < ok.ndim(); ++d) dims.push_back(d);
  const Array mask = lax::broadcast_in_dim(ok, x.shape(), dims);
  return lax::select(mask, x, lax::full(x.shape(), NAN, x.dtype()));
}

Array info_ok(const Array& info) {
  return lax::eq(info, lax::full(info.shape(), 0, DType::I32));
}

Array adjoint(const Array& x) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.ndim() - 2; ++d) perm.push_back(d);
  perm.push_back(x.ndim() - 1);
  perm.push_back(x.ndim() - 2);
  const Array t = lax::transpose(x, perm);
  return is_complex(x.dtype()) ? lax::conj(t) : t;
}

Array lu_solve(const Array& lu, const Array& permutation, const Array& b, int trans) {
  const int64_t last = b.ndim() - 1;
  // Rows of b gathered by the permutation: take_along_axis over the row axis.
  Shape ps = permutation.shape();
  ps.push_back(1);
  const Array idx = lax::reshape(permutation, ps);
  if (trans == 0) {
    const Array pb = numpy::take_along_axis(b, idx, last - 1);
    const Array y = triangular_solve(lu, pb, true, true, false, false, true);
    return triangular_solve(lu, y, true, false, false, false, false);
  }
  const bool conj = trans == 2;
  const Array y = triangular_solve(lu, b, true, false, true, conj, false);
  const Array z = triangular_solve(lu, y, true, true, true, conj, true);
  // x = P^T z: x[permutation[i]] = z[i], i.e. z gathered by the inverse permutation.
  Shape is = permutation.shape();
  is.push_back(1);
  const Array inverse = lax::reshape(numpy::argsort(permutation, -1), is);
  return numpy::take_along_axis(z, lax::convert_element_type(inverse, DType::I32), last - 1);
}

}  // namespace detail

using namespace detail;

Array cholesky(const Array& x_in, bool symmetrize_input) {
  check_matrix("linalg.cholesky", x_in, true);
  Array x = x_in;
  if (symmetrize_input) x = lax::div(lax::add(x, adjoint(x)), lax::full(x.shape(), 2, x.dtype()));
  CallSpec c;
  if (lower_for_cuda()) {
    type_prefix("linalg.cholesky", x);
    c.target = "cusolver_potrf_ffi";
    c.config_bool = {{"lower", true}};
    c.batch_attr = true;
  } else {
    c.target = std::string("lapack_") + type_prefix("linalg.cholesky", x) + "potrf_ffi";
    c.config = {{"uplo", 'L'}};
  }
  c.results = {ir::Type::tensor(x.shape(), x.dtype()),
               ir::Type::tensor(batch_of(x.shape(), {}), DType::I32)};
  c.operand_matrix = {true};
  c.result_matrix = {true, false};
  c.alias_operand = 0;
  const std::vector<Array> r = lapack_call(c, {x});
  return numpy::tril(nan_unless(info_ok(r[1]), r[0]));
}

std::tuple<Array, Array, Array> lu(const Array& x) {
  check_matrix("linalg.lu", x, false);
  const int64_t m = x.shape()[x.ndim() - 2], n = x.shape()[x.ndim() - 1];
  const int64_t k = std::min(m, n);
  CallSpec c;
  c.target = std::string("lapack_") + type_prefix("linalg.lu", x) + "getrf_ffi";
  if (lower_for_cuda()) c.target = "cusolver_getrf_ffi";
  c.results = {ir::Type::tensor(x.shape(), x.dtype()),
               ir::Type::tensor(batch_of(x.shape(), {k}), DType::I32),
               ir::Type::tensor(batch_of(x.shape(), {}), DType::I32)};
  c.operand_matrix = {true};
  c.result_matrix = {true, false, false};
  c.alias_operand = 0;
  const std::vector<Array> r = lapack_call(c, {x});
  const Array pivots = lax::sub(r[1], lax::full(r[1].shape(), 1, DType::I32));
  // info > 0 (an exactly singular U) is still a factorization; only info < 0 fails.
  const Array ok = lax::ge(r[2], lax::full(r[2].shape(), 0, DType::I32));
  const Array lu_out = nan_unless(ok, r[0]);
  return {lu_out, pivots, lu_pivots_to_permutation(pivots, m)};
}

Array lu_pivots_to_permutation(const Array& pivots, int64_t permutation_size) {
  const std::string op = "linalg.lu_pivots_to_permutation";
  lax::detail::check_valid(op, pivots);
  if (pivots.dtype() != DType::I32 || pivots.ndim() < 1)
    fail(op, "pivots must be int32 [..., k], got " + type_str(pivots));
  const int64_t k = pivots.shape().back();
  if (permutation_size < k)
    fail(op, "permutation_size " + std::to_string(permutation_size) +
                 " is smaller than the number of pivots in " + type_str(pivots));
  Shape ps(pivots.shape().begin(), pivots.shape().end() - 1);
  ps.push_back(permutation_size);
  if (lower_for_cuda()) {
    CallSpec c;
    c.target = "cu_lu_pivots_to_permutation";
    c.results = {ir::Type::tensor(ps, DType::I32)};
    c.operand_matrix = {false};
    c.result_matrix = {false};
    c.batch_attr = true;
    c.batch_dims = pivots.ndim() - 1;
    return lapack_call(c, {pivots})[0];
  }
  const int64_t last = static_cast<int64_t>(ps.size()) - 1;
  const Array iota = lax::broadcasted_iota(DType::I32, ps, last);
  auto body = [&](const Array& i, const Array& perm) {
    const Array j = lax::dynamic_slice_in_dim(pivots, i, 1, last);  // [..., 1]
    const Array pi = lax::dynamic_slice_in_dim(perm, i, 1, last);
    const Array pj = numpy::take_along_axis(perm, j, last);
    const Array at_i = lax::eq(iota, lax::broadcast_in_dim(i, ps, {}));
    Shape one = ps;
    one.back() = 1;
    std::vector<int64_t> dims;
    for (int64_t d = 0; d <= last; ++d) dims.push_back(d);
    const auto wide = [&](const Array& v) {
      return lax::broadcast_in_dim(lax::reshape(v, one), ps, dims);
    };
    const Array at_j = lax::eq(iota, wide(j));
    return lax::select(at_i, wide(pj), lax::select(at_j, wide(pi), perm));
  };
  return lax::fori_loop(int64_t{0}, k, body, iota);
}

Array householder_product(const Array& a, const Array& taus) {
  const std::string op = "linalg.householder_product";
  check_matrix(op, a, false);
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape()[a.ndim() - 1];
  const Shape want_tau_batch = batch_of(a.shape(), {});
  if (taus.dtype() != a.dtype() || taus.ndim() != a.ndim() - 1 ||
      Shape(taus.shape().begin(), taus.shape().end() - 1) != want_tau_batch ||
      taus.shape().back() > n || n > m)
    fail(op, "needs a [..., m, n] with m >= n and taus [..., k] with k <= n of a's dtype, got " +
                 type_str(a) + " and " + type_str(taus));
  CallSpec c;
  const char p = type_prefix(op, a);
  c.target = std::string("lapack_") + p + (is_complex(a.dtype()) ? "ungqr_ffi" : "orgqr_ffi");
  if (lower_for_cuda()) c.target = "cusolver_orgqr_ffi";
  c.results = {ir::Type::tensor(a.shape(), a.dtype())};
  c.operand_matrix = {true, false};
  c.result_matrix = {true};
  c.alias_operand = 0;
  c.batch_attr = true;
  return lapack_call(c, {a, taus})[0];
}

namespace {

// (q, r, p): p the 0-based column order with pivoting (geqp3), else invalid (geqrf).
std::tuple<Array, Array, Array> qr_factors(const Array& x, bool full_matrices, bool pivoting) {
  const std::string op = "linalg.qr";
  const int64_t m = x.shape()[x.ndim() - 2], n = x.shape()[x.ndim() - 1];
  const int64_t k = std::min(m, n);
  std::vector<Array> r;
  Array p;
  if (pivoting) {
    auto [a, jpvt, taus] = geqp3(x, lax::full(batch_of(x.shape(), {n}), 0, DType::I32));
    r = {a, taus};
    p = lax::sub(jpvt, lax::full(jpvt.shape(), 1, DType::I32));
  } else {
    CallSpec c;
    c.target = std::string("lapack_") + type_prefix(op, x) + "geqrf_ffi";
    if (lower_for_cuda()) c.target = "cusolver_geqrf_ffi";
    c.results = {ir::Type::tensor(x.shape(), x.dtype()),
                 ir::Type::tensor(batch_of(x.shape(), {k}), x.dtype())};
    c.operand_matrix = {true};
    c.result_matrix = {true, false};
    c.alias_operand = 0;
    c.batch_attr = true;
    r = lapack_call(c, {x});
  }
  const int64_t nd = x.ndim();
  std::vector<int64_t> start(static_cast<size_t>(nd), 0);
  Shape limit = x.shape();
  Array q;
  if (m < n) {
    limit[nd - 1] = m;
    q = householder_product(lax::slice(r[0], start, limit), r[1]);
  } else if (full_matrices && m > n) {
    std::vector<lax::PadConfig> pad(static_cast<size_t>(nd));
    pad[nd - 1].high = m - n;
    q = householder_product(lax::pad(r[0], lax::detail::constant(0, x.dtype()), pad), r[1]);
  } else {
    q = householder_product(r[0], r[1]);
  }
  Array rr = r[0];
  if (!full_matrices && m > n) {
    limit = x.shape();
    limit[nd - 2] = k;
    rr = lax::slice(rr, start, limit);
  }
  return {q, numpy::triu(rr), p};
}

// qr_jvp_rule: with X = Q^H dx R^-1 and O = tril(X, -1) - tril(X, -1)^H (plus X's imaginary
// diagonal), dQ = Q (O - X) + dx R^-1 and dR = (X - O) R.
std::pair<Array, Array> qr_jvp(const Array& q, const Array& r, const Array& dx) {
  const Array dx_rinv = triangular_solve(r, dx);
  const Array x = numpy::matmul(adjoint(q), dx_rinv);
  const Array lower = numpy::tril(x, -1);
  Array o = numpy::subtract(lower, adjoint(lower));
  if (is_complex(x.dtype())) {
    const Array eye = numpy::astype(numpy::eye(x.shape().back()), x.dtype());
    o = numpy::add(
        o, numpy::multiply(eye, numpy::subtract(x, numpy::astype(numpy::real(x), x.dtype()))));
  }
  return {numpy::add(numpy::matmul(q, numpy::subtract(o, x)), dx_rinv),
          numpy::matmul(numpy::subtract(x, o), r)};
}

}  // namespace

QrResult qr(const Array& x, bool full_matrices, bool pivoting) {
  check_matrix("linalg.qr", x, false);
  const int64_t m = x.shape()[x.ndim() - 2], n = x.shape().back();
  // JAX differentiates QR where R is square and invertible (m >= n, reduced or m == n); there
  // the factors travel as one array [Q; R] (and, pivoting, p's row as numbers of x's dtype, exact
  // below 2^24) through a custom_vjp whose backward pass transposes the JVP. Elsewhere grad stops
  // at the geqrf / geqp3 call with its error.
  if (m < n || (full_matrices && m != n)) {
    auto [q, r, p] = qr_factors(x, full_matrices, pivoting);
    return {q, r, p};
  }
  const auto pack = [](const Array& q, const Array& r, const Array& p) {
    std::vector<Array> parts{q, r};
    if (p.valid())
      parts.push_back(numpy::expand_dims(
          lax::convert_element_type(lax::convert_element_type(p, complex_component(q.dtype())),
                                    q.dtype()),
          -2));
    return numpy::concatenate(parts, -2);
  };
  const auto packed = [=](const Array& a) {
    auto [q, r, p] = qr_factors(a, full_matrices, pivoting);
    return pack(q, r, p);
  };
  const auto fwd = [=](const Array& a) {
    auto [q, r, p] = qr_factors(a, full_matrices, pivoting);
    std::vector<Array> res{q, r};
    if (pivoting) res.push_back(p);
    return std::pair<Array, std::vector<Array>>(pack(q, r, p), res);
  };
  // With pivoting the JVP is taken at x's permuted columns, x[..., :, p] = Q R (as JAX).
  const auto bwd = [m](const std::vector<Array>& res, const Array& g) {
    Shape xs = res[0].shape();
    xs.back() = res[1].shape().back();
    const Array dx = trace::fresh(numpy::zeros(xs, res[0].dtype()));
    const trace::Mark mark = trace::mark();
    const Array dxp =
        res.size() > 2 ? numpy::take_along_axis(dx, numpy::expand_dims(res[2], -2), -1) : dx;
    auto [dq, dr] = qr_jvp(res[0], res[1], dxp);
    const int64_t nd = g.ndim();
    std::vector<int64_t> start(static_cast<size_t>(nd), 0);
    Shape mid = g.shape(), end = g.shape();
    mid[nd - 2] = m;
    end[nd - 2] = m + res[1].shape()[nd - 2];
    std::vector<int64_t> rstart = start;
    rstart[nd - 2] = m;
    const Array q_ct = lax::slice(g, start, mid), r_ct = lax::slice(g, rstart, end);
    return trace::backward(trace::ops_since(mark), {dx}, {dq, dr}, {q_ct, r_ct});
  };
  const Array both = custom_vjp(packed, fwd, bwd)(x);
  const int64_t nd = x.ndim();
  const int64_t k = full_matrices ? m : std::min(m, n);
  std::vector<int64_t> start(static_cast<size_t>(nd), 0);
  Shape mid = both.shape(), end = both.shape();
  mid[nd - 2] = m;
  end[nd - 2] = m + k;
  std::vector<int64_t> rstart = start;
  rstart[nd - 2] = m;
  QrResult out{lax::slice(both, start, mid), lax::slice(both, rstart, end), Array()};
  if (pivoting) {
    std::vector<int64_t> pstart = start;
    pstart[nd - 2] = m + k;
    Array row = lax::slice(both, pstart, both.shape());
    if (is_complex(x.dtype())) row = lax::real(row);
    out.p = lax::convert_element_type(lax::reshape(row, batch_of(x.shape(), {n})), DType::I32);
  }
  return out;
}

std::pair<Array, Array> qr(const Array& x, bool full_matrices) {
  QrResult r = qr(x, full_matrices, false);
  return {r.q, r.r};
}

std::tuple<Array, Array, Array> geqp3(const Array& a, const Array& jpvt) {
  const std::string op = "linalg.geqp3";
  check_matrix(op, a, false);
  const int64_t m = a.shape()[a.ndim() - 2], n = a.shape().back();
  if (jpvt.dtype() != DType::I32 || jpvt.shape() != batch_of(a.shape(), {n}))
    fail(op, "jpvt must be " + type_str(DType::I32, batch_of(a.shape(), {n})) + " for a " +
                 type_str(a) + ", got " + type_str(jpvt));
  CallSpec c;
  c.target = std::string("lapack_") + type_prefix(op, a) + "geqp3_ffi";
  c.results = {ir::Type::tensor(a.shape(), a.dtype()), ir::Type::tensor(jpvt.shape(), DType::I32),
               ir::Type::tensor(batch_of(a.shape(), {std::min(m, n)}), a.dtype())};
  c.operand_matrix = {true, false};
  c.result_matrix = {true, false, false};
  c.alias_each = true;
  c.batch_attr = true;
  const std::vector<Array> r = lapack_call(c, {a, jpvt});
  return {r[0], r[1], r[2]};
}

std::pair<Array, Array> eigh(const Array& x_in, bool lower, bool symmetrize_input,
                             bool /*sort_eigenvalues: LAPACK always sorts*/,
                             const std::optional<std::pair<int64_t, int64_t>>& subset_by_index) {
  const std::string op = "linalg.eigh";
  check_matrix(op, x_in, true);
  if (subset_by_index) {
    const auto [start, end] = *subset_by_index;
    const int64_t n = x_in.shape().back();
    if (start < 0 || start >= end || end > n)
      fail(op, "subset_by_index [" + std::to_string(start) + ", " + std::to_string(end) +
                   ") is not a non-empty range of eigenvalue indices of " + type_str(x_in));
    auto [v, w] = eigh(x_in, lower, symmetrize_input);
    const int64_t nd = x_in.ndim();
    std::vector<int64_t> vstart(static_cast<size_t>(nd), 0), wstart(static_cast<size_t>(nd - 1), 0);
    Shape vlimit = v.shape(), wlimit = w.shape();
    vstart.back() = wstart.back() = start;
    vlimit.back() = wlimit.back() = end;
    return {lax::slice(v, vstart, vlimit), lax::slice(w, wstart, wlimit)};
  }
  Array x = x_in;
  if (symmetrize_input) x = lax::div(lax::add(x, adjoint(x)), lax::full(x.shape(), 2, x.dtype()));
  const bool cplx = is_complex(x.dtype());
  CallSpec c;
  c.target = std::string("lapack_") + type_prefix(op, x) + (cplx ? "heevd_ffi" : "syevd_ffi");
  c.config = {{"mode", 'V'}, {"uplo", lower ? 'L' : 'U'}};
  if (lower_for_cuda()) {
    c.target = "cusolver_syevd_ffi";
    c.config = {{"algorithm", 0}};  // JAX's EighImplementation default
    c.config_bool = {{"lower", lower}};
  }
  const int64_t n = x.shape().back();
  c.results = {ir::Type::tensor(x.shape(), x.dtype()),
               ir::Type::tensor(batch_of(x.shape(), {n}), complex_component(x.dtype())),
               ir::Type::tensor(batch_of(x.shape(), {}), DType::I32)};
  c.operand_matrix = {true};
  c.result_matrix = {true, false, false};
  c.alias_operand = 0;
  const std::vector<Array> r = lapack_call(c, {x});
  const Array ok = info_ok(r[2]);
  return {nan_unless(ok, r[0]), nan_unless(ok, r[1])};
}

SvdResult svd(const Array& x, bool full_matrices, bool compute_uv,
              const std::optional<std::pair<int64_t, int64_t>>& subset_by_index) {
  const std::string op = "linalg.svd";
  check_matrix(op, x, false);
  const int64_t m = x.shape()[x.ndim() - 2], n = x.shape()[x.ndim() - 1];
  const int64_t k = std::min(m, n);
  if (subset_by_index && *subset_by_index != std::pair<int64_t, int64_t>{0, k}) {
    const auto [start, end] = *subset_by_index;
    if (start < 0 || start >= end || end > k)
      fail(op, "subset_by_index [" + std::to_string(start) + ", " + std::to_string(end) +
                   ") is not a non-empty range of singular value indices of " + type_str(x));
    if (full_matrices) fail(op, "full_matrices and subset_by_index cannot both be set");
    SvdResult all = svd(x, false, compute_uv);
    const int64_t nd = x.ndim();
    const auto part = [&](const Array& a, int64_t axis) {
      std::vector<int64_t> lo(static_cast<size_t>(a.ndim()), 0);
      Shape hi = a.shape();
      lo[static_cast<size_t>(axis)] = start;
      hi[static_cast<size_t>(axis)] = end;
      return lax::slice(a, lo, hi);
    };
    all.s = part(all.s, nd - 2);
    if (compute_uv) {
      all.u = part(all.u, nd - 1);
      all.vh = part(all.vh, nd - 2);
    }
    return all;
  }
  if (lower_for_cuda()) return detail::cusolver_svd(x, full_matrices, compute_uv);
  const char mode = !compute_uv ? 'N' : full_matrices ? 'A' : 'S';
  CallSpec c;
  c.target = std::string("lapack_") + type_prefix(op, x) + "gesdd_ffi";
  c.config = {{"mode", mode}};
  const DType real = complex_component(x.dtype());
  const int64_t ur = compute_uv ? m : 0, uc = !compute_uv ? 0 : full_matrices ? m : k;
  const int64_t vr = !compute_uv ? 0 : full_matrices ? n : k, vc = compute_uv ? n : 0;
  c.results = {ir::Type::tensor(x.shape(), x.dtype()),
               ir::Type::tensor(batch_of(x.shape(), {k}), real),
               ir::Type::tensor(batch_of(x.shape(), {ur, uc}), x.dtype()),
               ir::Type::tensor(batch_of(x.shape(), {vr, vc}), x.dtype()),
               ir::Type::tensor(batch_of(x.shape(), {}), DType::I32)};
  c.operand_matrix = {true};
  c.result_matrix = {true, false, true, true, false};
  c.alias_operand = 0;
  const std::vector<Array> r = lapack_call(c, {x});
  const Array ok = info_ok(r[4]);
  SvdResult out;
  out.s = nan_unless(ok, r[1]);
  if (compute_uv) {
    out.u = nan_unless(ok, r[2]);
    out.vh = nan_unless(ok, r[3]);
  }
  return out;
}

Array triangular_solve(const Array& a_in, const Array& b, bool left_side, bool lower,
                       bool transpose_a, bool conjugate_a, bool unit_diagonal) {
  const std::string op = "linalg.triangular_solve";
  check_matrix(op, a_in, true);
  check_matrix(op, b, false);
  if (a_in.dtype() != b.dtype())
    fail(op, "a and b must have the same dtype, got " + type_str(a_in) + " and " + type_str(b));
  const int64_t k = a_in.shape().back();
  const int64_t bk = left_side ? b.shape()[b.ndim() - 2] : b.shape().back();
  if (a_in.ndim() != b.ndim() || batch_of(a_in.shape(), {}) != batch_of(b.shape(), {}) || bk != k)
    fail(op, "a " + type_str(a_in) + " does not fit b " + type_str(b) + " (left_side=" +
                 (left_side ? "true" : "false") + "): the batch dimensions must agree and b's " +
                 (left_side ? "rows" : "columns") + " must equal a's order");
  Array a = a_in;
  const bool cplx = is_complex(a.dtype());
  char trans = 'N';
  if (transpose_a)
    trans = conjugate_a && cplx ? 'C' : 'T';
  else if (conjugate_a && cplx)
    a = lax::conj(a);
  CallSpec c;
  c.target = std::string("lapack_") + type_prefix(op, a) + "trsm_ffi";
  c.config = {{"diag", unit_diagonal ? 'U' : 'N'},
              {"side", left_side ? 'L' : 'R'},
              {"trans_x", trans},
              {"uplo", lower ? 'L' : 'U'}};
  c.results = {ir::Type::tensor(b.shape(), b.dtype())};
  c.operand_matrix = {true, true};
  c.result_matrix = {true};
  c.alias_operand = 1;
  c.batch_attr = true;
  return lapack_call(c, {a, b})[0];
}

}  // namespace cujax::lax::linalg
