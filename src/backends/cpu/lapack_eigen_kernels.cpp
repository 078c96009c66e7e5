// JAX's eigen- and singular-value custom calls on the host: symmetric/Hermitian eigenvalues
// (syevd/heevd, cusolver_syevd), SVD (gesdd, gesvd, cusolver_gesvd, cusolver_gesvdj), general
// eigenvalues (geev) and the Schur form (gees). Buffers are in the call's layouts
// (linalg_kernels.h): LAPACK's column-major matrices, one per batch element.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/lapack.h"
#include "backends/cpu/lapack_call.h"
#include "backends/cpu/linalg_kernels.h"

namespace cujax::cpu {
namespace {

using lapack::fchar;
using lapack::fint;

template <class T>
using Real = lapack::real_t<T>;

template <class T>
bool all_finite(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (lapack::is_complex_v<T>) {
      if (!std::isfinite(p[i].real()) || !std::isfinite(p[i].imag())) return false;
    } else {
      if (!std::isfinite(p[i])) return false;
    }
  }
  return true;
}

// ------------------------------------------------------------------ syevd / heevd

LinalgBody syevd(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, true);
  const Shape& s = call.operands[0];
  const int64_t n = d.cols;
  call.require_result(0, call.dtype, s);
  call.require_result(1, complex_component(call.dtype), batch_shape(s, {n}));
  call.require_result(2, DType::I32, batch_shape(s));
  const fchar uplo = call.cuda ? (call.bool_field("lower", true) ? 'L' : 'U')
                               : char_field(call, "uplo", 'L', "LU");
  const fchar jobz = call.cuda ? 'V' : char_field(call, "mode", 'V', "VN");
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    using R = Real<T>;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      if (n == 0) return;
      const fint nn = static_cast<fint>(n);
      T* a = out[0].data_as<T>();
      R* w = out[1].data_as<R>();
      fint info = 0, lwork = -1, liwork = -1, lrwork = -1, iquery = 0;
      T query{};
      R rquery{};
      if constexpr (lapack::is_complex_v<T>)
        CUJAX_LAPACK_PICK_COMPLEX(T, heevd_, &jobz, &uplo, &nn, a, &nn, w, &query, &lwork, &rquery,
                                  &lrwork, &iquery, &liwork, &info, 1, 1);
      else
        CUJAX_LAPACK_PICK_REAL(T, syevd_, &jobz, &uplo, &nn, a, &nn, w, &query, &lwork, &iquery,
                               &liwork, &info, 1, 1);
      lwork = lapack::work_size(query);
      liwork = std::max<fint>(1, iquery);
      lrwork = lapack::work_size(rquery);
      std::vector<T> work(static_cast<size_t>(lwork));
      std::vector<fint> iwork(static_cast<size_t>(liwork));
      std::vector<R> rwork(static_cast<size_t>(lrwork));
      for (int64_t b = 0; b < d.batch; ++b) {
        T* ab = a + b * n * n;
        R* wb = w + b * n;
        if constexpr (lapack::is_complex_v<T>)
          CUJAX_LAPACK_PICK_COMPLEX(T, heevd_, &jobz, &uplo, &nn, ab, &nn, wb, work.data(), &lwork,
                                    rwork.data(), &lrwork, iwork.data(), &liwork, &info, 1, 1);
        else
          CUJAX_LAPACK_PICK_REAL(T, syevd_, &jobz, &uplo, &nn, ab, &nn, wb, work.data(), &lwork,
                                 iwork.data(), &liwork, &info, 1, 1);
        out[2].data_as<int32_t>()[b] = info;
      }
    };
  });
}

// ------------------------------------------------------------------ SVD

// One SVD of an m x n column-major matrix `a` (destroyed): s, and U (ldu) and V^H (ldvt) as
// `job` asks ('A': all, 'S': min(m, n) vectors, 'N': none). `dc`: divide and conquer (gesdd),
// else gesvd. Returns LAPACK's info.
template <class T>
struct Svd {
  using R = Real<T>;
  fint m, n, ldu, ldvt;
  fchar job;
  bool dc;
  std::vector<T> work;
  std::vector<R> rwork;
  std::vector<fint> iwork;
  fint lwork = -1;

  Svd(int64_t m_, int64_t n_, int64_t ldu_, int64_t ldvt_, fchar job_, bool dc_)
      : m(static_cast<fint>(m_)),
        n(static_cast<fint>(n_)),
        ldu(static_cast<fint>(std::max<int64_t>(1, ldu_))),
        ldvt(static_cast<fint>(std::max<int64_t>(1, ldvt_))),
        job(job_),
        dc(dc_) {
    const int64_t mn = std::min(m, n), mx = std::max(m, n);
    iwork.resize(static_cast<size_t>(std::max<int64_t>(1, 8 * mn)));
    if constexpr (lapack::is_complex_v<T>) {
      const int64_t r =
          dc ? std::max({7 * mn, 5 * mn * mn + 7 * mn, 2 * mx * mn + 2 * mn * mn + mn}) : 5 * mn;
      rwork.resize(static_cast<size_t>(std::max<int64_t>(1, r)));
    }
  }

  fint run(T* a, R* s, T* u, T* vt) {
    T dummy_u{}, dummy_vt{};
    if (!u) u = &dummy_u;
    if (!vt) vt = &dummy_vt;
    const fint lda = std::max<fint>(1, m);
    fint info = 0;
    auto call = [&](T* w, fint lw) {
      if (dc) {
        if constexpr (lapack::is_complex_v<T>)
          CUJAX_LAPACK_PICK_COMPLEX(T, gesdd_, &job, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, w, &lw,
                                    rwork.data(), iwork.data(), &info, 1);
        else
          CUJAX_LAPACK_PICK_REAL(T, gesdd_, &job, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, w, &lw,
                                 iwork.data(), &info, 1);
      } else {
        if constexpr (lapack::is_complex_v<T>)
          CUJAX_LAPACK_PICK_COMPLEX(T, gesvd_, &job, &job, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt,
                                    w, &lw, rwork.data(), &info, 1, 1);
        else
          CUJAX_LAPACK_PICK_REAL(T, gesvd_, &job, &job, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, w,
                                 &lw, &info, 1, 1);
      }
    };
    if (m == 0 || n == 0) return 0;
    if (lwork < 0) {
      T query{};
      call(&query, -1);
      lwork = lapack::work_size(query);
      work.resize(static_cast<size_t>(lwork));
    }
    call(work.data(), lwork);
    return info;
  }
};

// lapack_?gesdd_ffi / lapack_?gesvd_ffi: (a) -> (a, s, u, vt, info), mode 'A', 'S' or 'N'.
LinalgBody lapack_svd(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, false);
  const Shape& s = call.operands[0];
  const int64_t m = d.rows, n = d.cols, k = std::min(m, n);
  const fchar job = char_field(call, "mode", 'A', "ASN");
  call.require_result(0, call.dtype, s);
  call.require_result(1, complex_component(call.dtype), batch_shape(s, {k}));
  call.require(call.results.size() == 5, "returns a, s, u, vt and info");
  const Shape& us = call.results[2].shape;
  const Shape& vs = call.results[3].shape;
  if (job != 'N') {
    call.require_result(2, call.dtype, batch_shape(s, {m, job == 'A' ? m : k}));
    call.require_result(3, call.dtype, batch_shape(s, {job == 'A' ? n : k, n}));
  }
  call.require_result(4, DType::I32, batch_shape(s));
  const MatrixDims ud = matrix_dims(us), vd = matrix_dims(vs);
  const bool dc = call.family == "gesdd";
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    using R = Real<T>;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      Svd<T> svd(m, n, job == 'N' ? 1 : m, job == 'N' ? 1 : vd.rows, job, dc);
      const bool uv = job != 'N';
      for (int64_t b = 0; b < d.batch; ++b)
        out[4].data_as<int32_t>()[b] =
            svd.run(out[0].data_as<T>() + b * m * n, out[1].data_as<R>() + b * k,
                    uv ? out[2].data_as<T>() + b * ud.rows * ud.cols : nullptr,
                    uv ? out[3].data_as<T>() + b * vd.rows * vd.cols : nullptr);
    };
  });
}

// cusolver_gesvd_ffi: (a) -> (a, s, u, vt, info) of the m x n matrix with m >= n that the
// buffer holds column-major: a itself, or (transposed) the rows x cols operand read as its
// transpose.
LinalgBody cusolver_gesvd(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, false);
  const Shape& s = call.operands[0];
  const bool full = call.bool_field("full_matrices", true);
  const bool compute_uv = call.bool_field("compute_uv", true);
  const bool transposed = call.bool_field("transposed", false);
  const int64_t m = transposed ? d.cols : d.rows, n = transposed ? d.rows : d.cols;
  call.require(n <= m, "needs m >= n (JAX transposes wide matrices first)");
  const fchar job = compute_uv ? (full ? 'A' : 'S') : 'N';
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
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    using R = Real<T>;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      Svd<T> svd(m, n, m, n, job, /*dc=*/false);
      const int64_t u_step = m * (full ? m : n);
      for (int64_t b = 0; b < d.batch; ++b)
        out[4].data_as<int32_t>()[b] =
            svd.run(out[0].data_as<T>() + b * m * n, out[1].data_as<R>() + b * n,
                    compute_uv ? out[2].data_as<T>() + b * u_step : nullptr,
                    compute_uv ? out[3].data_as<T>() + b * n * n : nullptr);
    };
  });
}

// cusolver_gesvdj_ffi: (a) -> (a, s, u, v, info); V, not V^H, as cuSOLVER's gesvdj returns it.
LinalgBody cusolver_gesvdj(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, false);
  const Shape& s = call.operands[0];
  const bool full = call.bool_field("full_matrices", true);
  const bool compute_uv = call.bool_field("compute_uv", true);
  const int64_t m = d.rows, n = d.cols, k = std::min(m, n);
  const int64_t uc = full ? m : k, vc = full ? n : k;
  call.require_result(0, call.dtype, s);
  call.require_result(1, complex_component(call.dtype), batch_shape(s, {k}));
  call.require_result(2, call.dtype, batch_shape(s, {m, uc}));
  call.require_result(3, call.dtype, batch_shape(s, {n, vc}));
  call.require_result(4, DType::I32, batch_shape(s));
  const fchar job = compute_uv ? (full ? 'A' : 'S') : 'N';
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    using R = Real<T>;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      Svd<T> svd(m, n, m, vc, job, /*dc=*/true);
      std::vector<T> vt(static_cast<size_t>(std::max<int64_t>(1, vc * n)));
      for (int64_t b = 0; b < d.batch; ++b) {
        out[4].data_as<int32_t>()[b] =
            svd.run(out[0].data_as<T>() + b * m * n, out[1].data_as<R>() + b * k,
                    compute_uv ? out[2].data_as<T>() + b * m * uc : nullptr,
                    compute_uv ? vt.data() : nullptr);
        if (!compute_uv) continue;
        T* v = out[3].data_as<T>() + b * n * vc;  // n x vc; vt is vc x n (ld vc)
        for (int64_t j = 0; j < vc; ++j)
          for (int64_t i = 0; i < n; ++i) {
            const T x = vt[static_cast<size_t>(j + i * vc)];
            if constexpr (lapack::is_complex_v<T>)
              v[i + j * n] = std::conj(x);
            else
              v[i + j * n] = x;
          }
      }
    };
  });
}

// ------------------------------------------------------------------ geev

// Real geev's eigenvectors as complex ones: a complex pair (wi[j] > 0) is columns j and j+1,
// v_j = x_j + i x_{j+1} and v_{j+1} its conjugate.
template <class R>
void unpack_eigenvectors(int64_t n, const R* wi, const R* packed, std::complex<R>* out) {
  for (int64_t j = 0; j < n; ++j) {
    const R* x = packed + j * n;
    std::complex<R>* v = out + j * n;
    if (wi[j] == R(0) || j + 1 == n) {
      for (int64_t i = 0; i < n; ++i) v[i] = {x[i], R(0)};
    } else {
      const R* y = x + n;
      for (int64_t i = 0; i < n; ++i) {
        v[i] = {x[i], y[i]};
        v[i + n] = {x[i], -y[i]};
      }
      ++j;
    }
  }
}

// Real: (a) -> (wr, wi, vl, vr, info), vl and vr complex; complex: (a) -> (w, vl, vr, info).
// A matrix with a non-finite entry gets info = -4 without calling LAPACK (as JAX's kernel).
LinalgBody geev(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, true);
  const Shape& s = call.operands[0];
  const int64_t n = d.cols;
  const fchar jobvl = char_field(call, "compute_left", 'V', "VN");
  const fchar jobvr = char_field(call, "compute_right", 'V', "VN");
  const bool cplx = is_complex(call.dtype);
  // Eigenvectors are complex: the operand's own type, or the complex type of a real one.
  const DType vectors = cplx ? call.dtype : to_complex(call.dtype);
  size_t r = 0;
  call.require_result(r++, call.dtype, batch_shape(s, {n}));
  if (!cplx) call.require_result(r++, call.dtype, batch_shape(s, {n}));
  call.require_result(r++, vectors, s);
  call.require_result(r++, vectors, s);
  call.require_result(r, DType::I32, batch_shape(s));
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    using R = Real<T>;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      if (n == 0) return;
      const fint nn = static_cast<fint>(n);
      std::vector<T> a(static_cast<size_t>(n * n));
      fint info = 0, lwork = -1;
      T query{};
      std::vector<R> rwork(static_cast<size_t>(2 * n));
      if constexpr (lapack::is_complex_v<T>) {
        T* w = out[0].data_as<T>();
        T* vl = out[1].data_as<T>();
        T* vr = out[2].data_as<T>();
        CUJAX_LAPACK_PICK_COMPLEX(T, geev_, &jobvl, &jobvr, &nn, a.data(), &nn, w, vl, &nn, vr, &nn,
                                  &query, &lwork, rwork.data(), &info, 1, 1);
        lwork = lapack::work_size(query);
        std::vector<T> work(static_cast<size_t>(lwork));
        for (int64_t b = 0; b < d.batch; ++b) {
          const T* src = in[0].data_as<T>() + b * n * n;
          int32_t& info_b = out[3].data_as<int32_t>()[b];
          if (!all_finite(src, n * n)) {
            info_b = -4;
            continue;
          }
          std::copy(src, src + n * n, a.begin());
          CUJAX_LAPACK_PICK_COMPLEX(T, geev_, &jobvl, &jobvr, &nn, a.data(), &nn, w + b * n,
                                    vl + b * n * n, &nn, vr + b * n * n, &nn, work.data(), &lwork,
                                    rwork.data(), &info, 1, 1);
          info_b = info;
        }
      } else {
        T* wr = out[0].data_as<T>();
        T* wi = out[1].data_as<T>();
        std::vector<T> vl(static_cast<size_t>(n * n)), vr(static_cast<size_t>(n * n));
        CUJAX_LAPACK_PICK_REAL(T, geev_, &jobvl, &jobvr, &nn, a.data(), &nn, wr, wi, vl.data(), &nn,
                               vr.data(), &nn, &query, &lwork, &info, 1, 1);
        lwork = lapack::work_size(query);
        std::vector<T> work(static_cast<size_t>(lwork));
        for (int64_t b = 0; b < d.batch; ++b) {
          const T* src = in[0].data_as<T>() + b * n * n;
          int32_t& info_b = out[4].data_as<int32_t>()[b];
          if (!all_finite(src, n * n)) {
            info_b = -4;
            continue;
          }
          std::copy(src, src + n * n, a.begin());
          CUJAX_LAPACK_PICK_REAL(T, geev_, &jobvl, &jobvr, &nn, a.data(), &nn, wr + b * n,
                                 wi + b * n, vl.data(), &nn, vr.data(), &nn, work.data(), &lwork,
                                 &info, 1, 1);
          info_b = info;
          if (info != 0) continue;
          using C = std::complex<T>;
          if (jobvl == 'V')
            unpack_eigenvectors<T>(n, wi + b * n, vl.data(), out[2].data_as<C>() + b * n * n);
          if (jobvr == 'V')
            unpack_eigenvectors<T>(n, wi + b * n, vr.data(), out[3].data_as<C>() + b * n * n);
        }
      }
    };
  });
}

// ------------------------------------------------------------------ gees

// Real: (a) -> (t, vs, wr, wi, sdim, info); complex: (a) -> (t, vs, w, sdim, info). Only
// sort = 'N' (JAX's kernel orders no eigenvalues either).
LinalgBody gees(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, true);
  const Shape& s = call.operands[0];
  const int64_t n = d.cols;
  const fchar jobvs = char_field(call, "mode", 'V', "VN");
  const fchar sort = char_field(call, "sort", 'N', "NS");
  call.require(sort == 'N', "ordering eigenvalues on the diagonal (sort = 'S') is not implemented");
  const bool cplx = call.dtype == DType::C64 || call.dtype == DType::C128;
  call.require_result(0, call.dtype, s);
  call.require_result(1, call.dtype, s);
  size_t r = 2;
  call.require_result(r++, call.dtype, batch_shape(s, {n}));
  if (!cplx) call.require_result(r++, call.dtype, batch_shape(s, {n}));
  call.require_result(r++, DType::I32, batch_shape(s));
  call.require_result(r, DType::I32, batch_shape(s));
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    using R = Real<T>;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      if (n == 0) return;
      const fint nn = static_cast<fint>(n);
      fint info = 0, sdim = 0, lwork = -1;
      T query{};
      T* a = out[0].data_as<T>();
      T* vs = out[1].data_as<T>();
      std::vector<R> rwork(static_cast<size_t>(n));
      const size_t sdim_at = cplx ? 3 : 4;
      auto call_gees = [&](T* ab, T* vsb, T* w0, T* w1, T* work, fint lw) {
        if constexpr (lapack::is_complex_v<T>) {
          (void)w1;
          CUJAX_LAPACK_PICK_COMPLEX(T, gees_, &jobvs, &sort, nullptr, &nn, ab, &nn, &sdim, w0, vsb,
                                    &nn, work, &lw, rwork.data(), nullptr, &info, 1, 1);
        } else {
          CUJAX_LAPACK_PICK_REAL(T, gees_, &jobvs, &sort, nullptr, &nn, ab, &nn, &sdim, w0, w1, vsb,
                                 &nn, work, &lw, nullptr, &info, 1, 1);
        }
      };
      T* w0 = out[2].data_as<T>();
      T* w1 = cplx ? nullptr : out[3].data_as<T>();
      call_gees(a, vs, w0, w1, &query, -1);
      lwork = lapack::work_size(query);
      std::vector<T> work(static_cast<size_t>(lwork));
      for (int64_t b = 0; b < d.batch; ++b) {
        call_gees(a + b * n * n, vs + b * n * n, w0 + b * n, w1 ? w1 + b * n : nullptr, work.data(),
                  lwork);
        out[sdim_at].data_as<int32_t>()[b] = sdim;
        out[sdim_at + 1].data_as<int32_t>()[b] = info;
      }
    };
  });
}

}  // namespace

LinalgBody lapack_eigen_body(const LinalgCall& call) {
  const std::string& f = call.family;
  if (f == "syevd") return syevd(call);
  if (f == "gesdd" || (f == "gesvd" && !call.cuda)) return lapack_svd(call);
  if (f == "gesvd") return cusolver_gesvd(call);
  if (f == "gesvdj") return cusolver_gesvdj(call);
  if (f == "geev") return geev(call);
  if (f == "gees") return gees(call);
  return {};
}

}  // namespace cujax::cpu
