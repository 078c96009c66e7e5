// JAX's factorization and solver custom calls on the host: Cholesky (potrf), LU (getrf), QR
// (geqrf, orgqr/ungqr; column-pivoted geqp3), Hessenberg (gehrd), tridiagonal reduction
// (sytrd/hetrd), triangular (trsm) and tridiagonal (gtsv, cuSPARSE's gtsv2) solves, and the cuda
// helpers cu_lu_pivots_to_permutation and cu_threefry2x32. Buffers are in the call's layouts
// (linalg_kernels.h): LAPACK's column-major matrices, one per batch element.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>

#include "backends/cpu/lapack.h"
#include "backends/cpu/lapack_call.h"
#include "backends/cpu/linalg_kernels.h"

namespace cujax::cpu {
namespace {

using lapack::fchar;
using lapack::fint;

template <class T>
using Real = lapack::real_t<T>;

// ------------------------------------------------------------------ potrf

LinalgBody potrf(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, true);
  const Shape& s = call.operands[0];
  call.require_result(0, call.dtype, s);
  call.require_result(1, DType::I32, batch_shape(s));
  const fchar uplo = call.cuda ? (call.bool_field("lower", true) ? 'L' : 'U')
                               : char_field(call, "uplo", 'L', "LU");
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      const fint n = static_cast<fint>(d.rows), lda = std::max<fint>(1, n);
      for (int64_t b = 0; b < d.batch; ++b) {
        fint info = 0;
        if (n > 0)
          CUJAX_LAPACK_PICK(T, potrf_, &uplo, &n, out[0].data_as<T>() + b * n * n, &lda, &info, 1);
        out[1].data_as<int32_t>()[b] = info;
      }
    };
  });
}

// ------------------------------------------------------------------ getrf

LinalgBody getrf(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, false);
  const Shape& s = call.operands[0];
  const int64_t k = std::min(d.rows, d.cols);
  call.require_result(0, call.dtype, s);
  call.require_result(1, DType::I32, batch_shape(s, {k}));
  call.require_result(2, DType::I32, batch_shape(s));
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      const fint m = static_cast<fint>(d.rows), n = static_cast<fint>(d.cols);
      const fint lda = std::max<fint>(1, m);
      for (int64_t b = 0; b < d.batch; ++b) {
        fint info = 0;
        if (m > 0 && n > 0)
          CUJAX_LAPACK_PICK(T, getrf_, &m, &n, out[0].data_as<T>() + b * d.rows * d.cols, &lda,
                            out[1].data_as<int32_t>() + b * k, &info);
        out[2].data_as<int32_t>()[b] = info;
      }
    };
  });
}

// ------------------------------------------------------------------ geqrf, orgqr

LinalgBody geqrf(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, false);
  const Shape& s = call.operands[0];
  const int64_t k = std::min(d.rows, d.cols);
  call.require_result(0, call.dtype, s);
  call.require_result(1, call.dtype, batch_shape(s, {k}));
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      const fint m = static_cast<fint>(d.rows), n = static_cast<fint>(d.cols);
      const fint lda = std::max<fint>(1, m);
      if (m == 0 || n == 0) return;
      T query{};
      fint lwork = -1, info = 0;
      CUJAX_LAPACK_PICK(T, geqrf_, &m, &n, out[0].data_as<T>(), &lda, out[1].data_as<T>(), &query,
                        &lwork, &info);
      lwork = lapack::work_size(query);
      std::vector<T> work(static_cast<size_t>(lwork));
      for (int64_t b = 0; b < d.batch; ++b)
        CUJAX_LAPACK_PICK(T, geqrf_, &m, &n, out[0].data_as<T>() + b * d.rows * d.cols, &lda,
                          out[1].data_as<T>() + b * k, work.data(), &lwork, &info);
    };
  });
}

// Column-pivoted QR: a [..., m, n] and jpvt [..., n] (nonzero: a column fixed in front; JAX
// passes zeros) -> the reflectors and R as geqrf's, jpvt the 1-based column order, tau [..., k].
LinalgBody geqp3(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, false);
  const Shape& s = call.operands[0];
  const int64_t k = std::min(d.rows, d.cols);
  call.require(call.operands.size() == 2 && call.operands[1] == batch_shape(s, {d.cols}),
               "takes a [..., m, n] matrix and [..., n] int32 column pivots");
  call.require_result(0, call.dtype, s);
  call.require_result(1, DType::I32, batch_shape(s, {d.cols}));
  call.require_result(2, call.dtype, batch_shape(s, {k}));
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      out[1] = in[1];
      const fint m = static_cast<fint>(d.rows), n = static_cast<fint>(d.cols);
      const fint lda = std::max<fint>(1, m);
      if (m == 0 || n == 0) return;
      T query{};
      fint lwork = -1, info = 0;
      std::vector<Real<T>> rwork(static_cast<size_t>(2 * n));
      const auto call_geqp3 = [&](T* a, fint* jpvt, T* tau, T* work) {
        if constexpr (lapack::is_complex_v<T>)
          CUJAX_LAPACK_PICK_COMPLEX(T, geqp3_, &m, &n, a, &lda, jpvt, tau, work, &lwork,
                                    rwork.data(), &info);
        else
          CUJAX_LAPACK_PICK_REAL(T, geqp3_, &m, &n, a, &lda, jpvt, tau, work, &lwork, &info);
      };
      call_geqp3(out[0].data_as<T>(), out[1].data_as<fint>(), out[2].data_as<T>(), &query);
      lwork = lapack::work_size(query);
      std::vector<T> work(static_cast<size_t>(lwork));
      for (int64_t b = 0; b < d.batch; ++b)
        call_geqp3(out[0].data_as<T>() + b * d.rows * d.cols, out[1].data_as<fint>() + b * d.cols,
                   out[2].data_as<T>() + b * k, work.data());
    };
  });
}

// Q's first n columns from geqrf's reflectors: a [..., m, n], tau [..., k].
LinalgBody orgqr(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, false);
  const Shape& s = call.operands[0];
  call.require(call.operands.size() == 2 && call.operands[1].size() + 1 == s.size() &&
                   batch_shape(s) == Shape(call.operands[1].begin(), call.operands[1].end() - 1),
               "takes a [..., m, n] matrix and [..., k] reflector scales");
  const int64_t k = call.operands[1].back();
  call.require(d.rows >= d.cols && d.cols >= k, "needs m >= n >= k (m = " + std::to_string(d.rows) +
                                                    ", n = " + std::to_string(d.cols) +
                                                    ", k = " + std::to_string(k) + ")");
  call.require_result(0, call.dtype, s);
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      const fint m = static_cast<fint>(d.rows), n = static_cast<fint>(d.cols);
      const fint kk = static_cast<fint>(k), lda = std::max<fint>(1, m);
      if (m == 0 || n == 0) return;
      T query{};
      fint lwork = -1, info = 0;
      T* a = out[0].data_as<T>();
      const T* tau = in[1].data_as<T>();
      if constexpr (lapack::is_complex_v<T>)
        CUJAX_LAPACK_PICK_COMPLEX(T, ungqr_, &m, &n, &kk, a, &lda, tau, &query, &lwork, &info);
      else
        CUJAX_LAPACK_PICK_REAL(T, orgqr_, &m, &n, &kk, a, &lda, tau, &query, &lwork, &info);
      lwork = lapack::work_size(query);
      std::vector<T> work(static_cast<size_t>(lwork));
      for (int64_t b = 0; b < d.batch; ++b) {
        T* ab = a + b * d.rows * d.cols;
        const T* tb = tau + b * k;
        if constexpr (lapack::is_complex_v<T>)
          CUJAX_LAPACK_PICK_COMPLEX(T, ungqr_, &m, &n, &kk, ab, &lda, tb, work.data(), &lwork,
                                    &info);
        else
          CUJAX_LAPACK_PICK_REAL(T, orgqr_, &m, &n, &kk, ab, &lda, tb, work.data(), &lwork, &info);
      }
    };
  });
}

// ------------------------------------------------------------------ gehrd, sytrd

LinalgBody gehrd(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, true);
  const Shape& s = call.operands[0];
  const int64_t n = d.cols;
  const int64_t low = call.int_field("low", 1), high = call.int_field("high", n);
  call.require(n == 0 || (low >= 1 && low <= std::max<int64_t>(1, high) && high <= n),
               "needs 1 <= low <= high <= n (low = " + std::to_string(low) +
                   ", high = " + std::to_string(high) + ", n = " + std::to_string(n) + ")");
  call.require_result(0, call.dtype, s);
  call.require_result(1, call.dtype, batch_shape(s, {std::max<int64_t>(0, n - 1)}));
  call.require_result(2, DType::I32, batch_shape(s));
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      if (n == 0) return;
      const fint nn = static_cast<fint>(n), lo = static_cast<fint>(low);
      const fint hi = static_cast<fint>(high);
      T query{};
      fint lwork = -1, info = 0;
      CUJAX_LAPACK_PICK(T, gehrd_, &nn, &lo, &hi, out[0].data_as<T>(), &nn, out[1].data_as<T>(),
                        &query, &lwork, &info);
      lwork = lapack::work_size(query);
      std::vector<T> work(static_cast<size_t>(lwork));
      for (int64_t b = 0; b < d.batch; ++b) {
        CUJAX_LAPACK_PICK(T, gehrd_, &nn, &lo, &hi, out[0].data_as<T>() + b * n * n, &nn,
                          out[1].data_as<T>() + b * (n - 1), work.data(), &lwork, &info);
        out[2].data_as<int32_t>()[b] = info;
      }
    };
  });
}

LinalgBody sytrd(const LinalgCall& call) {
  const MatrixDims d = matrix_operand(call, true);
  const Shape& s = call.operands[0];
  const int64_t n = d.cols, n1 = std::max<int64_t>(0, n - 1);
  const DType rt = complex_component(call.dtype);
  call.require_result(0, call.dtype, s);
  call.require_result(1, rt, batch_shape(s, {n}));
  call.require_result(2, rt, batch_shape(s, {n1}));
  call.require_result(3, call.dtype, batch_shape(s, {n1}));
  call.require_result(4, DType::I32, batch_shape(s));
  const fchar uplo = call.cuda ? (call.bool_field("lower", true) ? 'L' : 'U')
                               : char_field(call, "uplo", 'L', "LU");
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    using R = Real<T>;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[0];
      if (n == 0) return;
      const fint nn = static_cast<fint>(n);
      T query{};
      fint lwork = -1, info = 0;
      T* a = out[0].data_as<T>();
      R* dd = out[1].data_as<R>();
      R* e = out[2].data_as<R>();
      T* tau = out[3].data_as<T>();
      if constexpr (lapack::is_complex_v<T>)
        CUJAX_LAPACK_PICK_COMPLEX(T, hetrd_, &uplo, &nn, a, &nn, dd, e, tau, &query, &lwork, &info,
                                  1);
      else
        CUJAX_LAPACK_PICK_REAL(T, sytrd_, &uplo, &nn, a, &nn, dd, e, tau, &query, &lwork, &info, 1);
      lwork = lapack::work_size(query);
      std::vector<T> work(static_cast<size_t>(lwork));
      for (int64_t b = 0; b < d.batch; ++b) {
        T* ab = a + b * n * n;
        R* db = dd + b * n;
        R* eb = e + b * n1;
        T* tb = tau + b * n1;
        if constexpr (lapack::is_complex_v<T>)
          CUJAX_LAPACK_PICK_COMPLEX(T, hetrd_, &uplo, &nn, ab, &nn, db, eb, tb, work.data(), &lwork,
                                    &info, 1);
        else
          CUJAX_LAPACK_PICK_REAL(T, sytrd_, &uplo, &nn, ab, &nn, db, eb, tb, work.data(), &lwork,
                                 &info, 1);
        out[4].data_as<int32_t>()[b] = info;
      }
    };
  });
}

// ------------------------------------------------------------------ trsm

// op(a) x = b (side 'L') or x op(a) = b (side 'R'), a [..., k, k], b [..., m, n].
LinalgBody trsm(const LinalgCall& call) {
  call.require(call.operands.size() == 2, "takes a and b");
  const Shape& as = call.operands[0];
  const Shape& bs = call.operands[1];
  call.require(as.size() >= 2 && bs.size() >= 2, "needs matrices a and b");
  const MatrixDims a = matrix_dims(as), b = matrix_dims(bs);
  const fchar side = char_field(call, "side", 'L', "LR");
  const fchar uplo = char_field(call, "uplo", 'L', "LU");
  const fchar trans = char_field(call, "trans_x", 'N', "NTC");
  const fchar diag = char_field(call, "diag", 'N', "NU");
  const int64_t k = side == 'L' ? b.rows : b.cols;
  call.require(a.rows == k && a.cols == k && (a.batch == b.batch || a.batch == 1),
               "a " + ir::Type::tensor(as, call.dtype).str() + " does not fit b " +
                   ir::Type::tensor(bs, call.dtype).str() + " on side " + std::string(1, side));
  to_fint(call, b.rows);
  to_fint(call, b.cols);
  call.require_result(0, call.dtype, bs);
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      out[0] = in[1];
      if (b.rows == 0 || b.cols == 0) return;
      const int m = static_cast<int>(b.rows), n = static_cast<int>(b.cols);
      const int lda = std::max(1, static_cast<int>(k)), ldb = m;
      const auto cs = side == 'L' ? CblasLeft : CblasRight;
      const auto cu = uplo == 'L' ? CblasLower : CblasUpper;
      const auto ct = trans == 'N' ? CblasNoTrans : trans == 'T' ? CblasTrans : CblasConjTrans;
      const auto cd = diag == 'U' ? CblasUnit : CblasNonUnit;
      for (int64_t i = 0; i < b.batch; ++i) {
        const T* ai = in[0].data_as<T>() + (a.batch == 1 ? 0 : i) * k * k;
        T* bi = out[0].data_as<T>() + i * b.rows * b.cols;
        if constexpr (std::is_same_v<T, float>)
          cblas_strsm(CblasColMajor, cs, cu, ct, cd, m, n, 1.0f, ai, lda, bi, ldb);
        else if constexpr (std::is_same_v<T, double>)
          cblas_dtrsm(CblasColMajor, cs, cu, ct, cd, m, n, 1.0, ai, lda, bi, ldb);
        else {
          const T one(1);
          if constexpr (std::is_same_v<T, lapack::c64>)
            cblas_ctrsm(CblasColMajor, cs, cu, ct, cd, m, n, &one, ai, lda, bi, ldb);
          else
            cblas_ztrsm(CblasColMajor, cs, cu, ct, cd, m, n, &one, ai, lda, bi, ldb);
        }
      }
    };
  });
}

// ------------------------------------------------------------------ gtsv, gtsv2

// dl, d, du [..., n] (dl[0] and du[n-1] unused) and b [..., n, nrhs]. LAPACK's gtsv returns
// all four (dl, d, du overwritten by the factorization) and info; cuSPARSE's gtsv2 only x, with
// NaNs where the system is singular.
LinalgBody gtsv(const LinalgCall& call) {
  call.require(call.operands.size() == 4, "takes dl, d, du and b");
  const Shape& bs = call.operands[3];
  call.require(bs.size() >= 2, "b " + ir::Type::tensor(bs, call.dtype).str() + " is not a matrix");
  const MatrixDims b = matrix_dims(bs);
  const Shape diag_shape = batch_shape(bs, {b.rows});
  for (int i = 0; i < 3; ++i)
    call.require(call.operands[static_cast<size_t>(i)] == diag_shape,
                 "operand " + std::to_string(i) + " is " +
                     ir::Type::tensor(call.operands[static_cast<size_t>(i)], call.dtype).str() +
                     ", expected " + ir::Type::tensor(diag_shape, call.dtype).str());
  to_fint(call, b.rows);
  to_fint(call, b.cols);
  const bool cusparse = call.family == "gtsv2";
  if (cusparse) {
    call.require_result(0, call.dtype, bs);
  } else {
    for (int i = 0; i < 4; ++i)
      call.require_result(static_cast<size_t>(i), call.dtype,
                          call.operands[static_cast<size_t>(i)]);
    call.require_result(4, DType::I32, batch_shape(bs));
  }
  return with_lapack_type(call, [=](auto tag) -> LinalgBody {
    using T = typename decltype(tag)::type;
    return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
      std::vector<HostTensor> w = {in[0].clone(), in[1].clone(), in[2].clone(), in[3]};
      const fint n = static_cast<fint>(b.rows), nrhs = static_cast<fint>(b.cols);
      const fint ldb = std::max<fint>(1, n);
      for (int64_t i = 0; i < b.batch; ++i) {
        fint info = 0;
        T* x = w[3].data_as<T>() + i * b.rows * b.cols;
        if (n > 0 && nrhs > 0)
          CUJAX_LAPACK_PICK(T, gtsv_, &n, &nrhs, w[0].data_as<T>() + i * n + 1,
                            w[1].data_as<T>() + i * n, w[2].data_as<T>() + i * n, x, &ldb, &info);
        if (cusparse && info != 0)
          std::fill(x, x + b.rows * b.cols, T(std::numeric_limits<Real<T>>::quiet_NaN()));
        if (!cusparse) out[4].data_as<int32_t>()[i] = info;
      }
      if (cusparse) {
        out[0] = w[3];
      } else {
        for (size_t k = 0; k < 4; ++k) out[k] = w[k];
      }
    };
  });
}

// ------------------------------------------------------------------ cuda helpers

// pivots [..., k] (0-based row swaps, as JAX passes them) -> the permutation [..., p] they
// apply to iota(p).
LinalgBody pivots_to_permutation(const LinalgCall& call) {
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
  return [=](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
    const int32_t* piv = in[0].data_as<int32_t>();
    int32_t* perm = out[0].data_as<int32_t>();
    for (int64_t b = 0; b < batch; ++b) {
      int32_t* pb = perm + b * p;
      std::iota(pb, pb + p, 0);
      for (int64_t i = 0; i < std::min(k, p); ++i) {
        const int64_t j = piv[b * k + i];
        if (j >= 0 && j < p) std::swap(pb[i], pb[j]);
      }
    }
  };
}

inline uint32_t rotl(uint32_t v, int r) {
  return (v << r) | (v >> (32 - r));
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CUJAX_HASH_LOOP __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CUJAX_HASH_LOOP
#endif

// Threefry-2x32 with 20 rounds (Salmon et al., as jax.random's threefry2x32_p) of n elements of
// keys k0, k1 and counts c0, c1. The rounds have no branches, so the loop over elements
// vectorizes (8 lanes with AVX2): a sampler hashes a counter per vocabulary entry and slot.
CUJAX_HASH_LOOP void threefry_elements(const uint32_t* k0, const uint32_t* k1, const uint32_t* c0,
                                       const uint32_t* c1, uint32_t* __restrict o0,
                                       uint32_t* __restrict o1, int64_t n) {
  static constexpr int kRot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  for (int64_t e = 0; e < n; ++e) {
    const uint32_t ks[3] = {k0[e], k1[e], k0[e] ^ k1[e] ^ 0x1BD11BDAu};
    uint32_t x0 = c0[e] + ks[0], x1 = c1[e] + ks[1];
    for (int g = 0; g < 5; ++g) {
      for (int r : kRot[g % 2]) {
        x0 += x1;
        x1 = rotl(x1, r) ^ x0;
      }
      x0 += ks[(g + 1) % 3];
      x1 += ks[(g + 2) % 3] + static_cast<uint32_t>(g + 1);
    }
    o0[e] = x0;
    o1[e] = x1;
  }
}

// cu_threefry2x32: the hash per element; an operand flagged scalar is the same for every element.
LinalgBody threefry(const LinalgCall& call) {
  call.require(call.operands.size() == 4 && call.results.size() == 2,
               "takes keys k0, k1 and counts x0, x1 and returns two arrays");
  const Shape& s = call.results[0].shape;
  for (size_t i = 0; i < 4; ++i)
    call.require(call.operands[i] == s || call.operands[i].empty(),
                 "operand " + std::to_string(i) + " does not have the result's shape");
  call.require_result(0, DType::U32, s);
  call.require_result(1, DType::U32, s);
  std::vector<bool> scalar;
  for (size_t i = 0; i < 4; ++i) scalar.push_back(call.operands[i].empty() && !s.empty());
  return [scalar](std::vector<HostTensor>& in, std::vector<HostTensor>& out) {
    for (size_t i = 0; i < 4; ++i)
      if (in[i].dtype() != DType::U32) throw Error("cu_threefry2x32: operands must be uint32");
    const int64_t n = out[0].size();
    const uint32_t* operand[4];
    std::vector<uint32_t> spread[4];  // a scalar operand repeated n times
    for (size_t i = 0; i < 4; ++i) {
      operand[i] = in[i].data_as<uint32_t>();
      if (scalar[i]) {
        spread[i].assign(static_cast<size_t>(n), operand[i][0]);
        operand[i] = spread[i].data();
      }
    }
    threefry_elements(operand[0], operand[1], operand[2], operand[3], out[0].data_as<uint32_t>(),
                      out[1].data_as<uint32_t>(), n);
  };
}

}  // namespace

LinalgBody lapack_factor_body(const LinalgCall& call) {
  const std::string& f = call.family;
  if (f == "potrf") return potrf(call);
  if (f == "getrf") return getrf(call);
  if (f == "geqrf") return geqrf(call);
  if (f == "geqp3") return geqp3(call);
  if (f == "orgqr") return orgqr(call);
  if (f == "gehrd") return gehrd(call);
  if (f == "sytrd") return sytrd(call);
  if (f == "trsm") return trsm(call);
  if (f == "gtsv" || f == "gtsv2") return gtsv(call);
  if (f == "pivots_to_permutation") return pivots_to_permutation(call);
  if (f == "threefry") return threefry(call);
  return {};
}

}  // namespace cujax::cpu
