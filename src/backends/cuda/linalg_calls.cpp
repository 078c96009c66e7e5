#include "backends/cuda/linalg_calls.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <functional>
#include <optional>
#include <type_traits>

#include "backends/common/index.h"
#include "backends/cpu/linalg_kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cusolver.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/linalg_launch.h"
#include "backends/cuda/op_launch.h"

namespace cujax::cuda {

namespace {

using cpu::batch_shape;
using cpu::LinalgCall;
using cpu::matrix_dims;
using cpu::MatrixDims;

// A family's work on the buffers in the call's layouts: `in` the operands (never written),
// `out` the results, allocated and zeroed.
using Body =
    std::function<void(Device&, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out)>;

// JAX's cuda target -> the family name the cpu backend uses for it; "" for any other target.
std::string family_of(const std::string& target) {
  if (target.starts_with("cusolver_") && target.ends_with("_ffi")) {
    const std::string name = target.substr(9, target.size() - 13);
    for (const char* known :
         {"potrf", "getrf", "geqrf", "orgqr", "syevd", "gesvd", "gesvdj", "sytrd"})
      if (name == known) return name;
    return "";
  }
  if (target == "cu_lu_pivots_to_permutation") return "pivots_to_permutation";
  if (target == "cu_threefry2x32_ffi" || target == "cu_threefry2x32") return "threefry";
  if (target == "cusparse_gtsv2_ffi") return "gtsv2";
  // The triangular solve that lax.linalg keeps on every platform, real types (op_launch.h).
  if (target == "lapack_strsm_ffi" || target == "lapack_dtrsm_ffi") return "trsm";
  return "";
}

// ------------------------------------------------------------------ layouts

// minor_to_major of operand/result i: the layouts attribute (`dense<[0, 1]> : tensor<2xindex>`
// or an integer list), else row-major; nullopt when it is not a permutation of the dimensions.
std::optional<std::vector<int64_t>> layout_of(const ir::Operation& op, const char* attr, size_t i,
                                              size_t rank) {
  std::vector<int64_t> m2m(rank);
  for (size_t d = 0; d < rank; ++d) m2m[d] = static_cast<int64_t>(rank - 1 - d);
  const ir::Attribute* layouts = op.attr(attr);
  if (!layouts || layouts->kind != ir::Attribute::Kind::Array || i >= layouts->elements.size())
    return m2m;
  const ir::Attribute& a = *layouts->elements[i];
  std::vector<int64_t> given;
  if (a.kind == ir::Attribute::Kind::Opaque) {
    const size_t open = a.text.find("dense<");
    const size_t close = a.text.find('>', open == std::string::npos ? 0 : open);
    if (open == std::string::npos || close == std::string::npos) return std::nullopt;
    const std::string body = a.text.substr(open + 6, close - open - 6);
    for (size_t p = 0; p < body.size();) {
      if (body[p] >= '0' && body[p] <= '9') {
        size_t used = 0;
        given.push_back(std::stoll(body.substr(p), &used));
        p += used;
      } else if (std::strchr("[], ", body[p])) {
        ++p;
      } else {
        return std::nullopt;
      }
    }
  } else {
    given = ir::as_ints(a);
  }
  std::vector<bool> seen(rank, false);
  if (given.size() != rank) return std::nullopt;
  for (int64_t d : given) {
    if (d < 0 || d >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(d)])
      return std::nullopt;
    seen[static_cast<size_t>(d)] = true;
  }
  return given;
}

bool is_row_major(const std::vector<int64_t>& m2m) {
  for (size_t d = 0; d < m2m.size(); ++d)
    if (m2m[d] != static_cast<int64_t>(m2m.size() - 1 - d)) return false;
  return true;
}

// The row-major array `a` as the bytes of layout m2m (to_physical), or those bytes back.
DeviceArray relayout(Device& d, const DeviceArray& a, const std::vector<int64_t>& m2m,
                     bool to_physical) {
  if (is_row_major(m2m) || a.size() <= 1) return a;
  const size_t rank = a.shape.size();
  std::vector<int64_t> phys(rank), row(rank);
  int64_t s = 1;
  for (int64_t dim : m2m) {
    phys[static_cast<size_t>(dim)] = s;
    s *= a.shape[static_cast<size_t>(dim)];
  }
  s = 1;
  for (size_t k = rank; k-- > 0;) {
    row[k] = s;
    s *= a.shape[k];
  }
  index::StridedCopy c;
  for (size_t k = 0; k < rank; ++k)
    c.push(a.shape[k], to_physical ? row[k] : phys[k], to_physical ? phys[k] : row[k]);
  DeviceArray out = d.allocate(a.dtype, a.shape);
  launch_strided_copy(size_of(a.dtype), c, a.data.get(), out.data.get(), d.stream());
  return out;
}

// ------------------------------------------------------------------ helpers

void copy_into(Device& d, DeviceArray& dst, const DeviceArray& src) {
  if (src.nbytes() == 0) return;
  CUJAX_CUDA_CHECK(cudaMemcpyAsync(dst.data.get(), src.data.get(), src.nbytes(),
                                   cudaMemcpyDeviceToDevice, d.stream()));
}

template <class T>
T* ptr(const DeviceArray& a) {
  return static_cast<T*>(a.data.get());
}

// Device scratch of n elements of T (at least one), released in stream order.
template <class T>
std::shared_ptr<void> scratch(Device& d, int64_t n) {
  return d.allocate(static_cast<size_t>(std::max<int64_t>(1, n)) * sizeof(T));
}

// Calls f with the routines of `api` (cuSOLVER's or cuSPARSE's) for element type t.
template <class Api, class F>
void with_routines(const Api& api, DType t, F f) {
  switch (t) {
    case DType::F32:
      return f(api.s);
    case DType::F64:
      return f(api.d);
    case DType::C64:
      return f(api.c);
    default:
      return f(api.z);
  }
}
template <class F>
void with_solver(DType t, F f) {
  with_routines(solver_api(), t, f);
}
template <class F>
void with_sparse(DType t, F f) {
  with_routines(sparse_api(), t, f);
}
template <class R>
using scalar_of = typename std::remove_cvref_t<R>::scalar;
template <class R>
using real_of = typename std::remove_cvref_t<R>::real;

// The matrix operand 0 of a solver call: f32/f64/c64/c128, rank >= 2, square when `square`,
// dimensions within cuSOLVER's 32-bit integers.
MatrixDims solver_matrix(const LinalgCall& call, bool square) {
  call.require(call.dtype == DType::F32 || call.dtype == DType::F64 || call.dtype == DType::C64 ||
                   call.dtype == DType::C128,
               "operand of type " + std::string(numpy_name(call.dtype)));
  const Shape& s = call.operands.at(0);
  call.require(s.size() >= 2, "operand is not a (batch of) matri(x/ces)");
  const MatrixDims d = matrix_dims(s);
  call.require(!square || d.rows == d.cols, "operand is not square");
  call.require(d.rows <= INT_MAX / 8 && d.cols <= INT_MAX / 8,
               "dimensions exceed cuSOLVER's 32-bit integers");
  return d;
}

cublasFillMode_t fill_mode(const LinalgCall& call) {
  return call.bool_field("lower", true) ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
}

// ------------------------------------------------------------------ factorizations

// (a) -> (a, info)
Body potrf(const LinalgCall& call) {
  const MatrixDims m = solver_matrix(call, true);
  const Shape& s = call.operands[0];
  call.require_result(0, call.dtype, s);
  call.require_result(1, DType::I32, batch_shape(s));
  const cublasFillMode_t uplo = fill_mode(call);
  const int n = static_cast<int>(m.rows);
  const DType t = call.dtype;
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    copy_into(d, out[0], in[0]);
    if (n == 0) return;
    with_solver(t, [&](const auto& r) {
      using T = scalar_of<decltype(r)>;
      cusolverDnHandle_t h = solver_handle(d);
      T* a = ptr<T>(out[0]);
      int lwork = 0;
      CUJAX_SOLVER_CHECK(r.potrf_bs(h, uplo, n, a, n, &lwork));
      auto work = scratch<T>(d, lwork);
      for (int64_t b = 0; b < m.batch; ++b)
        CUJAX_SOLVER_CHECK(r.potrf(h, uplo, n, a + b * n * n, n, static_cast<T*>(work.get()), lwork,
                                   ptr<int>(out[1]) + b));
    });
  };
}

// (a) -> (lu, pivots [..., k] 1-based, info)
Body getrf(const LinalgCall& call) {
  const MatrixDims m = solver_matrix(call, false);
  const Shape& s = call.operands[0];
  const int64_t k = std::min(m.rows, m.cols);
  call.require_result(0, call.dtype, s);
  call.require_result(1, DType::I32, batch_shape(s, {k}));
  call.require_result(2, DType::I32, batch_shape(s));
  const int rows = static_cast<int>(m.rows), cols = static_cast<int>(m.cols);
  const DType t = call.dtype;
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    copy_into(d, out[0], in[0]);
    if (rows == 0 || cols == 0) return;
    with_solver(t, [&](const auto& r) {
      using T = scalar_of<decltype(r)>;
      cusolverDnHandle_t h = solver_handle(d);
      T* a = ptr<T>(out[0]);
      int lwork = 0;
      CUJAX_SOLVER_CHECK(r.getrf_bs(h, rows, cols, a, rows, &lwork));
      auto work = scratch<T>(d, lwork);
      for (int64_t b = 0; b < m.batch; ++b)
        CUJAX_SOLVER_CHECK(r.getrf(h, rows, cols, a + b * rows * cols, rows,
                                   static_cast<T*>(work.get()), ptr<int>(out[1]) + b * k,
                                   ptr<int>(out[2]) + b));
    });
  };
}

// (a) -> (a, tau [..., k]); no info, as JAX's kernel.
Body geqrf(const LinalgCall& call) {
  const MatrixDims m = solver_matrix(call, false);
  const Shape& s = call.operands[0];
  const int64_t k = std::min(m.rows, m.cols);
  call.require_result(0, call.dtype, s);
  call.require_result(1, call.dtype, batch_shape(s, {k}));
  const int rows = static_cast<int>(m.rows), cols = static_cast<int>(m.cols);
  const DType t = call.dtype;
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    copy_into(d, out[0], in[0]);
    if (rows == 0 || cols == 0) return;
    with_solver(t, [&](const auto& r) {
      using T = scalar_of<decltype(r)>;
      cusolverDnHandle_t h = solver_handle(d);
      T* a = ptr<T>(out[0]);
      int lwork = 0;
      CUJAX_SOLVER_CHECK(r.geqrf_bs(h, rows, cols, a, rows, &lwork));
      auto work = scratch<T>(d, lwork);
      auto info = scratch<int>(d, 1);
      for (int64_t b = 0; b < m.batch; ++b)
        CUJAX_SOLVER_CHECK(r.geqrf(h, rows, cols, a + b * rows * cols, rows, ptr<T>(out[1]) + b * k,
                                   static_cast<T*>(work.get()), lwork,
                                   static_cast<int*>(info.get())));
    });
  };
}

// (a [..., m, n], tau [..., k]) -> q's first n columns, m >= n >= k.
Body orgqr(const LinalgCall& call) {
  const MatrixDims m = solver_matrix(call, false);
  const Shape& s = call.operands[0];
  call.require(call.operands.size() == 2 && call.operands[1].size() + 1 == s.size() &&
                   batch_shape(s) == Shape(call.operands[1].begin(), call.operands[1].end() - 1),
               "takes a [..., m, n] matrix and [..., k] reflector scales");
  const int64_t k = call.operands[1].back();
  call.require(m.rows >= m.cols && m.cols >= k, "needs m >= n >= k");
  call.require_result(0, call.dtype, s);
  const int rows = static_cast<int>(m.rows), cols = static_cast<int>(m.cols);
  const int kk = static_cast<int>(k);
  const DType t = call.dtype;
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    copy_into(d, out[0], in[0]);
    if (rows == 0 || cols == 0) return;
    with_solver(t, [&](const auto& r) {
      using T = scalar_of<decltype(r)>;
      cusolverDnHandle_t h = solver_handle(d);
      T* a = ptr<T>(out[0]);
      const T* tau = ptr<T>(in[1]);
      int lwork = 0;
      CUJAX_SOLVER_CHECK(r.orgqr_bs(h, rows, cols, kk, a, rows, tau, &lwork));
      auto work = scratch<T>(d, lwork);
      auto info = scratch<int>(d, 1);
      for (int64_t b = 0; b < m.batch; ++b)
        CUJAX_SOLVER_CHECK(r.orgqr(h, rows, cols, kk, a + b * rows * cols, rows, tau + b * k,
                                   static_cast<T*>(work.get()), lwork,
                                   static_cast<int*>(info.get())));
    });
  };
}

// (a) -> (a, d [..., n], e [..., n-1], tau [..., n-1], info)
Body sytrd(const LinalgCall& call) {
  const MatrixDims m = solver_matrix(call, true);
  const Shape& s = call.operands[0];
  const int64_t n = m.cols, n1 = std::max<int64_t>(0, n - 1);
  const DType rt = complex_component(call.dtype);
  call.require_result(0, call.dtype, s);
  call.require_result(1, rt, batch_shape(s, {n}));
  call.require_result(2, rt, batch_shape(s, {n1}));
  call.require_result(3, call.dtype, batch_shape(s, {n1}));
  call.require_result(4, DType::I32, batch_shape(s));
  const cublasFillMode_t uplo = fill_mode(call);
  const DType t = call.dtype;
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    copy_into(d, out[0], in[0]);
    if (n == 0) return;
    with_solver(t, [&](const auto& r) {
      using T = scalar_of<decltype(r)>;
      using R = real_of<decltype(r)>;
      cusolverDnHandle_t h = solver_handle(d);
      const int nn = static_cast<int>(n);
      T* a = ptr<T>(out[0]);
      R* dd = ptr<R>(out[1]);
      R* e = ptr<R>(out[2]);
      T* tau = ptr<T>(out[3]);
      int lwork = 0;
      CUJAX_SOLVER_CHECK(r.sytrd_bs(h, uplo, nn, a, nn, dd, e, tau, &lwork));
      auto work = scratch<T>(d, lwork);
      for (int64_t b = 0; b < m.batch; ++b)
        CUJAX_SOLVER_CHECK(r.sytrd(h, uplo, nn, a + b * n * n, nn, dd + b * n, e + b * n1,
                                   tau + b * n1, static_cast<T*>(work.get()), lwork,
                                   ptr<int>(out[4]) + b));
    });
  };
}

// ------------------------------------------------------------------ eigen and singular values

// (a) -> (v, w [..., n], info); eigenvectors always (JAX's cusolver_syevd has no mode).
Body syevd(const LinalgCall& call) {
  const MatrixDims m = solver_matrix(call, true);
  const Shape& s = call.operands[0];
  const int64_t n = m.cols;
  call.require_result(0, call.dtype, s);
  call.require_result(1, complex_component(call.dtype), batch_shape(s, {n}));
  call.require_result(2, DType::I32, batch_shape(s));
  const cublasFillMode_t uplo = fill_mode(call);
  const DType t = call.dtype;
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    copy_into(d, out[0], in[0]);
    if (n == 0) return;
    with_solver(t, [&](const auto& r) {
      using T = scalar_of<decltype(r)>;
      using R = real_of<decltype(r)>;
      cusolverDnHandle_t h = solver_handle(d);
      const int nn = static_cast<int>(n);
      const cusolverEigMode_t jobz = CUSOLVER_EIG_MODE_VECTOR;
      T* a = ptr<T>(out[0]);
      R* w = ptr<R>(out[1]);
      int lwork = 0;
      CUJAX_SOLVER_CHECK(r.syevd_bs(h, jobz, uplo, nn, a, nn, w, &lwork));
      auto work = scratch<T>(d, lwork);
      for (int64_t b = 0; b < m.batch; ++b)
        CUJAX_SOLVER_CHECK(r.syevd(h, jobz, uplo, nn, a + b * n * n, nn, w + b * n,
                                   static_cast<T*>(work.get()), lwork, ptr<int>(out[2]) + b));
    });
  };
}

// cusolver_gesvd_ffi: (a) -> (a, s, u, vt, info) of the m x n (m >= n) column-major matrix the
// buffer holds (`transposed`: the operand read as its transpose).
Body gesvd(const LinalgCall& call) {
  const MatrixDims md = solver_matrix(call, false);
  const Shape& s = call.operands[0];
  const bool full = call.bool_field("full_matrices", true);
  const bool compute_uv = call.bool_field("compute_uv", true);
  const bool transposed = call.bool_field("transposed", false);
  const int64_t m = transposed ? md.cols : md.rows, n = transposed ? md.rows : md.cols;
  call.require(n <= m, "needs m >= n (JAX transposes wide matrices first)");
  call.require_result(0, call.dtype, s);
  call.require_result(1, complex_component(call.dtype), batch_shape(s, {n}));
  call.require(call.results.size() == 5, "returns a, s, u, vt and info");
  if (compute_uv) {
    call.require_result(2, call.dtype,
                        batch_shape(s, full         ? std::initializer_list<int64_t>{m, m}
                                       : transposed ? std::initializer_list<int64_t>{n, m}
                                                    : std::initializer_list<int64_t>{m, n}));
    call.require_result(3, call.dtype, batch_shape(s, {n, n}));
  }
  call.require_result(4, DType::I32, batch_shape(s));
  const signed char job = compute_uv ? (full ? 'A' : 'S') : 'N';
  const DType t = call.dtype;
  const int64_t u_step = m * (full ? m : n);
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    copy_into(d, out[0], in[0]);
    if (m == 0 || n == 0) return;
    with_solver(t, [&](const auto& r) {
      using T = scalar_of<decltype(r)>;
      using R = real_of<decltype(r)>;
      cusolverDnHandle_t h = solver_handle(d);
      const int mm = static_cast<int>(m), nn = static_cast<int>(n);
      int lwork = 0;
      CUJAX_SOLVER_CHECK(r.gesvd_bs(h, mm, nn, &lwork));
      auto work = scratch<T>(d, lwork);
      auto rwork = scratch<R>(d, std::min(m, n));
      // Without vectors U and VT are never read or written; the results' buffers stand in.
      auto u_dummy = scratch<T>(d, 1);
      for (int64_t b = 0; b < md.batch; ++b) {
        T* u = compute_uv ? ptr<T>(out[2]) + b * u_step : static_cast<T*>(u_dummy.get());
        T* vt = compute_uv ? ptr<T>(out[3]) + b * n * n : static_cast<T*>(u_dummy.get());
        CUJAX_SOLVER_CHECK(r.gesvd(h, job, job, mm, nn, ptr<T>(out[0]) + b * m * n, mm,
                                   ptr<R>(out[1]) + b * n, u, mm, vt, compute_uv ? nn : 1,
                                   static_cast<T*>(work.get()), lwork, static_cast<R*>(rwork.get()),
                                   ptr<int>(out[4]) + b));
      }
    });
  };
}

// cusolver_gesvdj_ffi: (a) -> (a, s, u, v, info); V itself, not V^H.
Body gesvdj(const LinalgCall& call) {
  const MatrixDims md = solver_matrix(call, false);
  const Shape& s = call.operands[0];
  const bool full = call.bool_field("full_matrices", true);
  const bool compute_uv = call.bool_field("compute_uv", true);
  const int64_t m = md.rows, n = md.cols, k = std::min(m, n);
  const int64_t uc = full ? m : k, vc = full ? n : k;
  call.require_result(0, call.dtype, s);
  call.require_result(1, complex_component(call.dtype), batch_shape(s, {k}));
  call.require_result(2, call.dtype, batch_shape(s, {m, uc}));
  call.require_result(3, call.dtype, batch_shape(s, {n, vc}));
  call.require_result(4, DType::I32, batch_shape(s));
  const DType t = call.dtype;
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    copy_into(d, out[0], in[0]);
    if (m == 0 || n == 0) return;
    with_solver(t, [&](const auto& r) {
      using T = scalar_of<decltype(r)>;
      using R = real_of<decltype(r)>;
      cusolverDnHandle_t h = solver_handle(d);
      gesvdjInfo_t params = gesvdj_params(d);
      const int mm = static_cast<int>(m), nn = static_cast<int>(n);
      const cusolverEigMode_t jobz =
          compute_uv ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
      const int econ = full ? 0 : 1;
      T* a = ptr<T>(out[0]);
      R* sv = ptr<R>(out[1]);
      T* u = ptr<T>(out[2]);
      T* v = ptr<T>(out[3]);
      const int ldu = std::max(1, mm), ldv = std::max(1, nn);
      int lwork = 0;
      CUJAX_SOLVER_CHECK(
          r.gesvdj_bs(h, jobz, econ, mm, nn, a, mm, sv, u, ldu, v, ldv, &lwork, params));
      auto work = scratch<T>(d, lwork);
      for (int64_t b = 0; b < md.batch; ++b)
        CUJAX_SOLVER_CHECK(r.gesvdj(
            h, jobz, econ, mm, nn, a + b * m * n, mm, sv + b * k, u + b * m * uc, ldu,
            v + b * n * vc, ldv, static_cast<T*>(work.get()), lwork, ptr<int>(out[4]) + b, params));
    });
  };
}

// ------------------------------------------------------------------ gtsv2, cu_* helpers

// (dl, d, du [..., n], b [..., n, nrhs]) -> x; dl[0] and du[n-1] are ignored, as on the cpu.
Body gtsv2(const LinalgCall& call) {
  call.require(call.operands.size() == 4, "takes dl, d, du and b");
  const Shape& bs = call.operands[3];
  call.require(bs.size() >= 2, "b is not a (batch of) matri(x/ces)");
  call.require(call.dtype == DType::F32 || call.dtype == DType::F64 || call.dtype == DType::C64 ||
                   call.dtype == DType::C128,
               "operand of type " + std::string(numpy_name(call.dtype)));
  const MatrixDims b = matrix_dims(bs);
  call.require(b.rows <= INT_MAX / 8 && b.cols <= INT_MAX / 8,
               "dimensions exceed cuSPARSE's 32-bit integers");
  const Shape diag_shape = batch_shape(bs, {b.rows});
  for (size_t i = 0; i < 3; ++i)
    call.require(call.operands[i] == diag_shape,
                 "operand " + std::to_string(i) + " is not [..., n]");
  call.require_result(0, call.dtype, bs);
  const DType t = call.dtype;
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    copy_into(d, out[0], in[3]);
    if (b.rows == 0 || b.cols == 0) return;
    const size_t eb = size_of(t);
    // cuSPARSE reads dl[0] and du[n-1] as zeros: copies with those set.
    DeviceArray dl = d.allocate(t, in[0].shape), du = d.allocate(t, in[2].shape);
    copy_into(d, dl, in[0]);
    copy_into(d, du, in[2]);
    const size_t pitch = static_cast<size_t>(b.rows) * eb;
    const auto rows = static_cast<size_t>(b.batch);
    CUJAX_CUDA_CHECK(cudaMemset2DAsync(dl.data.get(), pitch, 0, eb, rows, d.stream()));
    CUJAX_CUDA_CHECK(cudaMemset2DAsync(static_cast<char*>(du.data.get()) + pitch - eb, pitch, 0, eb,
                                       rows, d.stream()));
    with_sparse(t, [&](const auto& r) {
      using T = scalar_of<decltype(r)>;
      cusparseHandle_t h = sparse_handle(d);
      const int n = static_cast<int>(b.rows), nrhs = static_cast<int>(b.cols);
      const T* l = ptr<T>(dl);
      const T* dg = ptr<T>(in[1]);
      const T* u = ptr<T>(du);
      T* x = ptr<T>(out[0]);
      size_t bytes = 0;
      CUJAX_SPARSE_CHECK(r.buffer_size(h, n, nrhs, l, dg, u, x, n, &bytes));
      auto buffer = d.allocate(std::max<size_t>(bytes, 1));
      for (int64_t i = 0; i < b.batch; ++i)
        CUJAX_SPARSE_CHECK(r.solve(h, n, nrhs, l + i * n, dg + i * n, u + i * n,
                                   x + i * b.rows * b.cols, n, buffer.get()));
    });
  };
}

Body pivots_to_permutation(const LinalgCall& call) {
  call.require(call.dtype == DType::I32 && call.operands.size() == 1 && !call.operands[0].empty(),
               "takes one int32 pivots array [..., k]");
  const Shape& s = call.operands[0];
  call.require(call.results.size() == 1 && call.results[0].dtype == DType::I32 &&
                   call.results[0].shape.size() == s.size() &&
                   std::equal(s.begin(), s.end() - 1, call.results[0].shape.begin()),
               "its result must be int32 [..., permutation_size] with the pivots' batch shape");
  const int64_t k = s.back(), p = call.results[0].shape.back();
  int64_t batch = 1;
  for (size_t i = 0; i + 1 < s.size(); ++i) batch *= s[i];
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    launch_pivots_to_permutation(ptr<int32_t>(in[0]), ptr<int32_t>(out[0]), batch, k, p,
                                 d.stream());
  };
}

Body threefry(const LinalgCall& call) {
  call.require(call.operands.size() == 4 && call.results.size() == 2,
               "takes keys k0, k1 and counts x0, x1 and returns two arrays");
  const Shape& s = call.results[0].shape;
  std::array<bool, 4> scalar{};
  for (size_t i = 0; i < 4; ++i) {
    call.require(call.operands[i] == s || call.operands[i].empty(),
                 "operand " + std::to_string(i) + " does not have the result's shape");
    scalar[i] = call.operands[i].empty() && !s.empty();
  }
  call.require(call.dtype == DType::U32, "operands must be uint32");
  call.require_result(0, DType::U32, s);
  call.require_result(1, DType::U32, s);
  return [=](Device& d, const std::vector<DeviceArray>& in, std::vector<DeviceArray>& out) {
    for (const DeviceArray& a : in)
      if (a.dtype != DType::U32) throw Error("cu_threefry2x32: operands must be uint32");
    ThreefryOperands ops{};
    for (size_t i = 0; i < 4; ++i) {
      ops.in[i] = ptr<uint32_t>(in[i]);
      ops.scalar[i] = scalar[i];
    }
    launch_threefry(ops, ptr<uint32_t>(out[0]), ptr<uint32_t>(out[1]), out[0].size(), d.stream());
  };
}

// lapack_?trsm_ffi (f32, f64) with the stablehlo.triangular_solve kernel, which reads the
// logical (row-major) arrays: op(a) x = b (side 'L') or x op(a) = b (side 'R').
DeviceKernel trsm_kernel(const LinalgCall& call, Device* device) {
  call.require(call.operands.size() == 2 && call.results.size() == 1, "takes a and b");
  const Shape &as = call.operands[0], &bs = call.operands[1];
  call.require(as.size() >= 2 && as.size() == bs.size(), "needs matrices a and b");
  const MatrixDims a = matrix_dims(as), b = matrix_dims(bs);
  const auto field = [&](const char* name, char fallback, const char* allowed) {
    const int64_t v = call.int_field(name, fallback);
    call.require(v > 0 && v < 128 && std::strchr(allowed, static_cast<int>(v)) != nullptr,
                 std::string("backend_config ") + name);
    return static_cast<char>(v);
  };
  TriangularSolve p;
  p.left = field("side", 'L', "LR") == 'L';
  p.lower = field("uplo", 'L', "LU") == 'L';
  p.transpose = field("trans_x", 'N', "NTC") != 'N';  // 'C' is 'T' for real types
  p.unit = field("diag", 'N', "NU") == 'U';
  p.m = a.rows;
  p.batch = b.batch;
  p.rows = b.rows;
  p.cols = b.cols;
  call.require(a.rows == a.cols && a.batch == b.batch && (p.left ? b.rows : b.cols) == a.rows,
               "a does not fit b");
  call.require_result(0, call.dtype, bs);
  const ir::Type rt = call.results[0];
  return [device, p, rt](std::span<const DeviceArray> in) {
    DeviceArray out = device->allocate(rt.dtype, rt.shape);
    launch_triangular_solve(rt.dtype, p, in[0].data.get(), in[1].data.get(), out.data.get(),
                            device->stream());
    std::vector<DeviceArray> v;
    v.push_back(std::move(out));
    return v;
  };
}

Body body_of(const LinalgCall& call) {
  const std::string& f = call.family;
  if (f == "potrf") return potrf(call);
  if (f == "getrf") return getrf(call);
  if (f == "geqrf") return geqrf(call);
  if (f == "orgqr") return orgqr(call);
  if (f == "sytrd") return sytrd(call);
  if (f == "syevd") return syevd(call);
  if (f == "gesvd") return gesvd(call);
  if (f == "gesvdj") return gesvdj(call);
  if (f == "gtsv2") return gtsv2(call);
  if (f == "pivots_to_permutation") return pivots_to_permutation(call);
  return threefry(call);
}

}  // namespace

const std::vector<std::string>& device_linalg_targets() {
  static const std::vector<std::string> targets = {
      "cusolver_potrf_ffi",  "cusolver_getrf_ffi",  "cusolver_geqrf_ffi",
      "cusolver_orgqr_ffi",  "cusolver_syevd_ffi",  "cusolver_gesvd_ffi",
      "cusolver_gesvdj_ffi", "cusolver_sytrd_ffi",  "cu_lu_pivots_to_permutation",
      "cusparse_gtsv2_ffi",  "cu_threefry2x32_ffi", "cu_threefry2x32",
      "lapack_strsm_ffi",    "lapack_dtrsm_ffi"};
  return targets;
}

DeviceKernel linalg_call_kernel(const ir::Operation& op, Device* device) {
  const ir::Attribute* target = op.attr("call_target_name");
  if (!target || op.operands.empty()) return {};
  LinalgCall call;
  call.target = target->text;
  call.family = family_of(call.target);
  if (call.family.empty()) return {};
  call.where = op.where();
  call.cuda = true;
  call.dtype = op.operands[0]->type.dtype;
  for (const ir::Value* v : op.operands) call.operands.push_back(v->type.shape);
  for (size_t i = 0; i < op.num_results(); ++i) call.results.push_back(op.result(i)->type);
  const ir::Attribute* config = op.attr("mhlo.backend_config");
  if (config && config->kind == ir::Attribute::Kind::Dictionary) call.config = config;
  if (call.family == "trsm") {
    try {
      return trsm_kernel(call, device);
    } catch (const UnsupportedError&) {
      return {};
    }
  }
  std::vector<std::vector<int64_t>> in_layouts, out_layouts;
  for (size_t i = 0; i < call.operands.size(); ++i) {
    auto l = layout_of(op, "operand_layouts", i, call.operands[i].size());
    if (!l) return {};
    in_layouts.push_back(std::move(*l));
  }
  for (size_t i = 0; i < call.results.size(); ++i) {
    auto l = layout_of(op, "result_layouts", i, call.results[i].shape.size());
    if (!l) return {};
    out_layouts.push_back(std::move(*l));
  }
  Body body;
  try {
    body = body_of(call);
  } catch (const UnsupportedError&) {
    return {};  // the host path's factory names what is wrong
  }
  const std::vector<ir::Type> results = call.results;
  return [device, body, in_layouts, out_layouts, results](std::span<const DeviceArray> in) {
    Device& d = *device;
    std::vector<DeviceArray> phys_in, phys_out, out;
    for (size_t i = 0; i < in.size(); ++i)
      phys_in.push_back(relayout(d, in[i], in_layouts[i], true));
    for (const ir::Type& t : results) {
      DeviceArray a = d.allocate(t.dtype, t.shape);
      if (a.nbytes() > 0)
        CUJAX_CUDA_CHECK(cudaMemsetAsync(a.data.get(), 0, a.nbytes(), d.stream()));
      phys_out.push_back(std::move(a));
    }
    body(d, phys_in, phys_out);
    for (size_t i = 0; i < phys_out.size(); ++i)
      out.push_back(relayout(d, phys_out[i], out_layouts[i], false));
    return out;
  };
}

DeviceKernel cholesky_kernel(const ir::Operation& op, Device* device) {
  if (op.operands.size() != 1 || op.num_results() != 1) return {};
  const ir::Type t = op.operands[0]->type;
  if (op.result(0)->type != t || t.shape.size() < 2) return {};
  if (t.dtype != DType::F32 && t.dtype != DType::F64 && t.dtype != DType::C64 &&
      t.dtype != DType::C128)
    return {};
  const MatrixDims m = matrix_dims(t.shape);
  if (m.rows != m.cols || m.rows > INT_MAX / 8) return {};
  const ir::Attribute* lower_attr = op.attr("lower");
  const bool lower = lower_attr && lower_attr->kind == ir::Attribute::Kind::Bool
                         ? lower_attr->boolean
                         : (lower_attr && lower_attr->integer != 0);
  // Row-major lower is column-major upper: potrf runs on the operand's own bytes.
  const cublasFillMode_t uplo = lower ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  return [device, t, m, lower, uplo](std::span<const DeviceArray> in) {
    Device& d = *device;
    DeviceArray out = d.allocate(t.dtype, t.shape);
    copy_into(d, out, in[0]);
    const int n = static_cast<int>(m.rows);
    if (n > 0 && m.batch > 0) {
      auto info = scratch<int>(d, m.batch);
      with_solver(t.dtype, [&](const auto& r) {
        using T = scalar_of<decltype(r)>;
        cusolverDnHandle_t h = solver_handle(d);
        T* a = ptr<T>(out);
        int lwork = 0;
        CUJAX_SOLVER_CHECK(r.potrf_bs(h, uplo, n, a, n, &lwork));
        auto work = scratch<T>(d, lwork);
        for (int64_t b = 0; b < m.batch; ++b)
          CUJAX_SOLVER_CHECK(r.potrf(h, uplo, n, a + b * n * n, n, static_cast<T*>(work.get()),
                                     lwork, static_cast<int*>(info.get()) + b));
      });
      launch_cholesky_mask(t.dtype, out.data.get(), static_cast<const int32_t*>(info.get()),
                           m.batch, n, lower, d.stream());
    }
    std::vector<DeviceArray> v;
    v.push_back(std::move(out));
    return v;
  };
}

}  // namespace cujax::cuda
