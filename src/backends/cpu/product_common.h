// What the CPU backend's products share (dot_kernels.cpp, convolution_kernels.cpp,
// triangular_solve_kernels.cpp): accumulator types and conversions, strided copies into dense
// arrays, and the GEMM (`matmul`: CBLAS, small_gemm_f32 or our own loops).
//
// Products accumulate in a type chosen once from the operand and result types: f32 (also for
// f16/bf16 operands and results, rounded once at the end) or f64, both through CBLAS; for
// integer and boolean results the result's width as unsigned arithmetic, so overflow wraps.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/small_gemm.h"

namespace cujax::cpu::products {

inline constexpr int64_t kCopyGrain = 1 << 15;       // elements per parallel chunk of a copy
inline constexpr int64_t kGemmGrainFlops = 1 << 16;  // multiply-adds per parallel chunk of a GEMM
inline constexpr int64_t kGemmBlocksPerThread = 2;   // blocks of a large BLAS product per thread
inline constexpr int64_t kGemmMinBlock = 16;         // rows or columns of one block, at least
// Products up to this size run on one thread, so batches of them are spread over our threads.
inline constexpr int64_t kBlasSingleThreadFlops = 1 << 18;

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
template <class T>
inline constexpr bool is_fp_v = std::is_floating_point_v<T> || is_half_v<T>;

template <class T>
std::unique_ptr<T[]> uninitialized(int64_t n) {
  return std::unique_ptr<T[]>(new T[static_cast<size_t>(std::max<int64_t>(n, 1))]);
}

// ------------------------------------------------------------------ conversions

// Operand element -> accumulator. Integer accumulators are unsigned of the result's width (or
// 32 bits for narrower results): reducing modulo 2^w commutes with + and *, so converting the
// operand straight to the accumulator gives the same low bits as converting it to the result
// type first.
template <class A, class S>
inline A to_acc(S x) {
  if constexpr (std::is_floating_point_v<A>) {
    if constexpr (is_half_v<S>) {
      return static_cast<A>(static_cast<float>(x));
    } else {
      return static_cast<A>(x);
    }
  } else {
    if constexpr (is_fp_v<S>) {
      return A(0);  // not reached: float operands accumulate in f64
    } else {
      return static_cast<A>(x);
    }
  }
}

// Saturating float -> integer conversion; NaN gives 0.
template <class R>
inline R float_to_int(double v) {
  if (std::isnan(v)) return R(0);
  if (v >= static_cast<double>(std::numeric_limits<R>::max())) return std::numeric_limits<R>::max();
  if (v <= static_cast<double>(std::numeric_limits<R>::min())) return std::numeric_limits<R>::min();
  return static_cast<R>(v);
}

// Accumulator -> result element.
template <class R, class A>
inline R from_acc(A v) {
  if constexpr (std::is_same_v<R, bool>) {
    return v != A(0);
  } else if constexpr (is_half_v<R>) {
    if constexpr (std::is_floating_point_v<A>) {
      return R(v);  // one rounding from float or double
    } else {
      return R(static_cast<double>(v));
    }
  } else if constexpr (std::is_floating_point_v<R>) {
    return static_cast<R>(v);
  } else if constexpr (std::is_floating_point_v<A>) {
    return float_to_int<R>(static_cast<double>(v));
  } else {
    return static_cast<R>(v);  // modular
  }
}

enum class AccKind { F32, F64, U32, U64 };

inline AccKind choose_acc(DType lhs, DType rhs, DType out) {
  if (is_float(out))
    return (lhs == DType::F64 || rhs == DType::F64 || out == DType::F64) ? AccKind::F64
                                                                         : AccKind::F32;
  if (is_float(lhs) || is_float(rhs)) return AccKind::F64;
  return bit_width(out) == 64 ? AccKind::U64 : AccKind::U32;
}

template <class F>
decltype(auto) visit_acc(AccKind k, F&& f) {
  switch (k) {
    case AccKind::F32:
      return f(TypeTag<float>{});
    case AccKind::F64:
      return f(TypeTag<double>{});
    case AccKind::U32:
      return f(TypeTag<uint32_t>{});
    case AccKind::U64:
      break;
  }
  return f(TypeTag<uint64_t>{});
}

// ------------------------------------------------------------------ strided copies

// A strided view of a source array, read in row-major order of `dims` into a dense array.
// Strides may be negative (a reversed dimension); `offset` is the first element's position.
struct View {
  Shape dims;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  int64_t size = 0;

  // Drops unit dimensions and merges dimensions that are contiguous in the source.
  void coalesce() {
    size = num_elements(dims);
    Shape d;
    std::vector<int64_t> s;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] == 1) continue;
      if (!d.empty() && s.back() == strides[i] * dims[i]) {
        d.back() *= dims[i];
        s.back() = strides[i];
      } else {
        d.push_back(dims[i]);
        s.push_back(strides[i]);
      }
    }
    dims = std::move(d);
    strides = std::move(s);
  }
  bool contiguous() const { return dims.empty() || (dims.size() == 1 && strides[0] == 1); }

  static View flat(int64_t n) {
    View v;
    v.dims = {n};
    v.strides = {1};
    v.coalesce();
    return v;
  }

  // Output dimension i reads source dimension perm[i].
  static View permuted(const Shape& shape, const std::vector<int64_t>& perm) {
    const auto st = row_major_strides(shape);
    View v;
    for (int64_t p : perm) {
      v.dims.push_back(shape[p]);
      v.strides.push_back(st[p]);
    }
    v.coalesce();
    return v;
  }
};

template <class S, class D, class F>
void copy_view(const View& v, const S* in, D* out, F conv) {
  if (v.size == 0) return;
  in += v.offset;
  if (v.contiguous()) {
    parallel_for(v.size, kCopyGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = conv(in[i]);
    });
    return;
  }
  const int64_t r = static_cast<int64_t>(v.dims.size());
  const int64_t inner = v.dims[r - 1], inner_stride = v.strides[r - 1];
  const int64_t rows = v.size / inner;
  parallel_for(rows, std::max<int64_t>(1, kCopyGrain / inner), [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(r - 1);
    int64_t off = 0, rem = b;
    for (int64_t d = r - 2; d >= 0; --d) {
      idx[d] = rem % v.dims[d];
      rem /= v.dims[d];
      off += idx[d] * v.strides[d];
    }
    for (int64_t row = b; row < e; ++row) {
      D* o = out + row * inner;
      const S* s = in + off;
      if (inner_stride == 1) {
        for (int64_t j = 0; j < inner; ++j) o[j] = conv(s[j]);
      } else {
        for (int64_t j = 0; j < inner; ++j) o[j] = conv(s[j * inner_stride]);
      }
      for (int64_t d = r - 2; d >= 0; --d) {
        off += v.strides[d];
        if (++idx[d] < v.dims[d]) break;
        off -= v.strides[d] * v.dims[d];
        idx[d] = 0;
      }
    }
  });
}

// Reads `t` through `v` into the accumulator type.
template <class A>
void load_as(const HostTensor& t, const View& v, A* out) {
  visit_dtype(t.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    copy_view(v, t.data_as<S>(), out, [](S x) { return to_acc<A>(x); });
  });
}

// Writes the dense accumulator array, read through `v`, into `out`.
template <class A>
void store_from(const A* acc, const View& v, HostTensor& out) {
  visit_dtype(out.dtype(), [&](auto tag) {
    using R = typename decltype(tag)::type;
    copy_view(v, acc, out.data_as<R>(), [](A x) { return from_acc<R>(x); });
  });
}

// ------------------------------------------------------------------ GEMM

// Columns [n0, n0 + W) of rows [m0, m1) of C += A[:, k0:k1] * B[k0:k1, :] (C = when `first`),
// with the W accumulators of a row in registers.
template <int W, class A>
inline void gemm_tile(int64_t m0, int64_t m1, int64_t n0, int64_t k0, int64_t k1, const A* a,
                      int64_t lda, const A* b, int64_t ldb, A* c, int64_t ldc, bool first) {
  for (int64_t m = m0; m < m1; ++m) {
    A acc[W];
    A* cr = c + m * ldc + n0;
    for (int j = 0; j < W; ++j) acc[j] = first ? A(0) : cr[j];
    const A* ar = a + m * lda;
    for (int64_t k = k0; k < k1; ++k) {
      const A av = ar[k];
      const A* br = b + k * ldb + n0;
      for (int j = 0; j < W; ++j) acc[j] += av * br[j];
    }
    for (int j = 0; j < W; ++j) cr[j] = acc[j];
  }
}

// Rows [m0, m1) of C[M,N] = A[M,K] * B[K,N], all row-major with leading dimensions; C is
// overwritten. Each element sums over k in ascending order.
template <class A>
void gemm_rows(int64_t m0, int64_t m1, int64_t N, int64_t K, const A* a, int64_t lda, const A* b,
               int64_t ldb, A* c, int64_t ldc) {
  constexpr int kW = 64 / sizeof(A);
  constexpr int64_t kKB = 256;
  if (K <= 0) {
    for (int64_t m = m0; m < m1; ++m) std::fill_n(c + m * ldc, N, A(0));
    return;
  }
  for (int64_t k0 = 0; k0 < K; k0 += kKB) {
    const int64_t k1 = std::min(K, k0 + kKB);
    const bool first = k0 == 0;
    int64_t n0 = 0;
    for (; n0 + kW <= N; n0 += kW) gemm_tile<kW>(m0, m1, n0, k0, k1, a, lda, b, ldb, c, ldc, first);
    if constexpr (kW > 8) {
      if (n0 + 8 <= N) {
        gemm_tile<8>(m0, m1, n0, k0, k1, a, lda, b, ldb, c, ldc, first);
        n0 += 8;
      }
    }
    if (n0 + 4 <= N) {
      gemm_tile<4>(m0, m1, n0, k0, k1, a, lda, b, ldb, c, ldc, first);
      n0 += 4;
    }
    for (; n0 < N; ++n0) gemm_tile<1>(m0, m1, n0, k0, k1, a, lda, b, ldb, c, ldc, first);
  }
}

// The same over all rows, split across threads.
template <class A>
void gemm_loops(int64_t M, int64_t N, int64_t K, const A* a, int64_t lda, const A* b, int64_t ldb,
                A* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  const int64_t grain = std::max<int64_t>(1, kGemmGrainFlops / std::max<int64_t>(1, N * K));
  parallel_for(M, grain,
               [&](int64_t m0, int64_t m1) { gemm_rows(m0, m1, N, K, a, lda, b, ldb, c, ldc); });
}

// OpenBLAS's own threads would compete with ours (and spin in sched_yield between calls, which
// on a small machine takes the cores the element-wise kernels need): every BLAS call runs on the
// calling thread, and products are split over our pool instead.
[[maybe_unused]] inline const bool kBlasOnOneThread = (openblas_set_num_threads(1), true);

inline CBLAS_TRANSPOSE blas_trans(bool t) {
  return t ? CblasTrans : CblasNoTrans;
}

// C = op(A) * op(B) with CBLAS for float and double (operands as stored: op(A) is M x K),
// the loops above otherwise (which need untransposed operands).
template <class A>
void matmul(int64_t M, int64_t N, int64_t K, const A* a, int64_t lda, bool ta, const A* b,
            int64_t ldb, bool tb, A* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t m = 0; m < M; ++m) std::fill_n(c + m * ldc, N, A(0));
    return;
  }
  if constexpr (std::is_same_v<A, float>) {
    // Few rows (a decode step's slots), or AVX2 BLAS kernels on an AVX-512 CPU (small_gemm.h).
    if (small_gemm_f32_pays(M, N, K, ta, tb)) {
      small_gemm_f32(M, N, K, a, lda, ta, b, ldb, tb, c, ldc);
      return;
    }
  }
  if constexpr (std::is_same_v<A, float> || std::is_same_v<A, double>) {
    // The block [m0, m1) x [n0, n1) of C: rows m0.. of op(A) start at column m0 of a transposed
    // A, columns n0.. of op(B) at row n0 of a transposed B.
    auto block = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      const A* am = ta ? a + m0 : a + m0 * lda;
      const A* bn = tb ? b + n0 * ldb : b + n0;
      if constexpr (std::is_same_v<A, float>)
        cblas_sgemm(CblasRowMajor, blas_trans(ta), blas_trans(tb), static_cast<int>(m1 - m0),
                    static_cast<int>(n1 - n0), static_cast<int>(K), 1.0f, am, static_cast<int>(lda),
                    bn, static_cast<int>(ldb), 0.0f, c + m0 * ldc + n0, static_cast<int>(ldc));
      else
        cblas_dgemm(CblasRowMajor, blas_trans(ta), blas_trans(tb), static_cast<int>(m1 - m0),
                    static_cast<int>(n1 - n0), static_cast<int>(K), 1.0, am, static_cast<int>(lda),
                    bn, static_cast<int>(ldb), 0.0, c + m0 * ldc + n0, static_cast<int>(ldc));
    };
    if (M * N * K <= kBlasSingleThreadFlops) {
      block(0, M, 0, N);
      return;
    }
    // A few blocks per thread (so one that starts late takes fewer), split along the dimension
    // whose blocks repack less: OpenBLAS packs the whole shared operand for every block, op(B)
    // (K x N) for a block of rows and op(A) (M x K) for a block of columns. Blocks of rows of a
    // weight gradient (M = 128, K = 2048) repacked all of op(B) eight times.
    const int64_t split = M >= N ? M : N;
    const int64_t blocks = std::min<int64_t>(kGemmBlocksPerThread * num_threads(),
                                             std::max<int64_t>(1, split / kGemmMinBlock));
    const int64_t per = (split + blocks - 1) / blocks;
    if (M >= N)
      parallel_for(M, per, [&](int64_t m0, int64_t m1) { block(m0, m1, 0, N); });
    else
      parallel_for(N, per, [&](int64_t n0, int64_t n1) { block(0, M, n0, n1); });
  } else {
    (void)ta;
    (void)tb;
    gemm_loops(M, N, K, a, lda, b, ldb, c, ldc);
  }
}

constexpr bool fits_blas_int(int64_t v) {
  return v <= INT_MAX;
}

inline std::vector<int64_t> struct_ints(const ir::Attribute* s, const char* name) {
  if (!s) return {};
  const ir::Attribute* f = s->field(name);
  if (!f) return {};
  if (f->kind == ir::Attribute::Kind::Integer) return {f->integer};
  return ir::as_ints(*f);
}

}  // namespace cujax::cpu::products
