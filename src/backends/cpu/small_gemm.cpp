// Few-row products: C[M, N] = A[M, K] * op(B) for M <= 8. A block of C's columns keeps all M
// rows' sums in registers while one pass over K streams the block's weights once, so the
// product costs about what reading B costs whatever M is. The loops are plain C++ with
// GCC's generic vectors; they are built for AVX-512, AVX2 and the baseline
// and picked once at load time. This file is compiled with -ffp-contract=fast (CMakeLists.txt)
// so the multiply-adds fuse, as BLAS's do.
#include "backends/cpu/small_gemm.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/parallel.h"

namespace cujax::cpu {

namespace {

// Columns of C per parallel unit (a multiple of every block width below).
constexpr int64_t kUnitCols = 64;
// Multiply-adds below which the product stays on the calling thread.
constexpr int64_t kParallelMacs = int64_t{1} << 18;

#define CUJAX_INLINE [[gnu::always_inline]] inline

// V floats in GCC's generic vectors, lowered to the instructions of the function's target.
template <int V>
struct VecOf {
  typedef float type __attribute__((vector_size(4 * V)));
};
template <int V>
using Vec = typename VecOf<V>::type;

template <int V>
CUJAX_INLINE Vec<V> load(const float* p) {
  Vec<V> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// C[:, 0, NV * V) for B stored K x N (b and c already offset to the block's first column).
template <int M, int NV, int V>
CUJAX_INLINE void nn_block(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
                           float* c, int64_t ldc) {
  Vec<V> acc[M][NV] = {};
  for (int64_t k = 0; k < K; ++k) {
    Vec<V> bk[NV];
    for (int j = 0; j < NV; ++j) bk[j] = load<V>(b + k * ldb + j * V);
    for (int m = 0; m < M; ++m) {
      const float am = a[m * lda + k];
      for (int j = 0; j < NV; ++j) acc[m][j] += am * bk[j];
    }
  }
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < NV; ++j) std::memcpy(c + m * ldc + j * V, &acc[m][j], sizeof acc[m][j]);
}

// Columns [n0, n1) of C, B stored K x N. V is the vector width in floats; rows with few slots
// get wider blocks so that enough independent sums hide the multiply-add latency.
template <int M, int V>
CUJAX_INLINE void nn_cols(int64_t n0, int64_t n1, int64_t K, const float* a, int64_t lda,
                          const float* b, int64_t ldb, float* c, int64_t ldc) {
  constexpr int NV = M <= 2 ? 4 : M <= 4 ? 2 : 1;
  int64_t n = n0;
  for (; n + NV * V <= n1; n += NV * V) nn_block<M, NV, V>(K, a, lda, b + n, ldb, c + n, ldc);
  for (; n + V <= n1; n += V) nn_block<M, 1, V>(K, a, lda, b + n, ldb, c + n, ldc);
  for (; n < n1; ++n) {  // the last columns, fewer than a vector
    float acc[M] = {};
    for (int64_t k = 0; k < K; ++k)
      for (int m = 0; m < M; ++m) acc[m] += a[m * lda + k] * b[k * ldb + n];
    for (int m = 0; m < M; ++m) c[m * ldc + n] = acc[m];
  }
}

// C[:, 0, NB) for B stored N x K: NB rows of B, each a dot product with every row of A.
template <int M, int NB, int V>
CUJAX_INLINE void nt_block(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb,
                           float* c, int64_t ldc) {
  Vec<V> acc[NB][M] = {};
  int64_t k = 0;
  for (; k + V <= K; k += V) {
    Vec<V> am[M];
    for (int m = 0; m < M; ++m) am[m] = load<V>(a + m * lda + k);
    for (int i = 0; i < NB; ++i) {
      const Vec<V> bi = load<V>(b + i * ldb + k);
      for (int m = 0; m < M; ++m) acc[i][m] += am[m] * bi;
    }
  }
  for (int i = 0; i < NB; ++i)
    for (int m = 0; m < M; ++m) {
      float s = 0;
      for (int j = 0; j < V; ++j) s += acc[i][m][j];
      for (int64_t t = k; t < K; ++t) s += a[m * lda + t] * b[i * ldb + t];
      c[m * ldc + i] = s;
    }
}

template <int M, int V>
CUJAX_INLINE void nt_cols(int64_t n0, int64_t n1, int64_t K, const float* a, int64_t lda,
                          const float* b, int64_t ldb, float* c, int64_t ldc) {
  constexpr int NB = M <= 2 ? 4 : M <= 4 ? 2 : 1;
  int64_t n = n0;
  for (; n + NB <= n1; n += NB) nt_block<M, NB, V>(K, a, lda, b + n * ldb, ldb, c + n, ldc);
  for (; n < n1; ++n) nt_block<M, 1, V>(K, a, lda, b + n * ldb, ldb, c + n, ldc);
}

template <int V>
CUJAX_INLINE void cols(int64_t M, int64_t n0, int64_t n1, int64_t K, const float* a, int64_t lda,
                       const float* b, int64_t ldb, bool tb, float* c, int64_t ldc) {
#define CUJAX_SMALL_GEMM_CASE(m)                        \
  case m:                                               \
    if (tb)                                             \
      nt_cols<m, V>(n0, n1, K, a, lda, b, ldb, c, ldc); \
    else                                                \
      nn_cols<m, V>(n0, n1, K, a, lda, b, ldb, c, ldc); \
    return;
  switch (M) {
    CUJAX_SMALL_GEMM_CASE(1)
    CUJAX_SMALL_GEMM_CASE(2)
    CUJAX_SMALL_GEMM_CASE(3)
    CUJAX_SMALL_GEMM_CASE(4)
    CUJAX_SMALL_GEMM_CASE(5)
    CUJAX_SMALL_GEMM_CASE(6)
    CUJAX_SMALL_GEMM_CASE(7)
    CUJAX_SMALL_GEMM_CASE(8)
    default:
      return;
  }
#undef CUJAX_SMALL_GEMM_CASE
}

using ColsFn = void (*)(int64_t M, int64_t n0, int64_t n1, int64_t K, const float* a, int64_t lda,
                        const float* b, int64_t ldb, bool tb, float* c, int64_t ldc);

void cols_baseline(int64_t M, int64_t n0, int64_t n1, int64_t K, const float* a, int64_t lda,
                   const float* b, int64_t ldb, bool tb, float* c, int64_t ldc) {
  cols<4>(M, n0, n1, K, a, lda, b, ldb, tb, c, ldc);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx2,fma"))) void cols_avx2(int64_t M, int64_t n0, int64_t n1, int64_t K,
                                                   const float* a, int64_t lda, const float* b,
                                                   int64_t ldb, bool tb, float* c, int64_t ldc) {
  cols<8>(M, n0, n1, K, a, lda, b, ldb, tb, c, ldc);
}

__attribute__((target("avx512f,avx512vl,fma"))) void cols_avx512(int64_t M, int64_t n0, int64_t n1,
                                                                 int64_t K, const float* a,
                                                                 int64_t lda, const float* b,
                                                                 int64_t ldb, bool tb, float* c,
                                                                 int64_t ldc) {
  cols<16>(M, n0, n1, K, a, lda, b, ldb, tb, c, ldc);
}

ColsFn pick_cols() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")) return cols_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return cols_avx2;
  return cols_baseline;
}
#else
ColsFn pick_cols() {
  return cols_baseline;
}
#endif

const ColsFn kCols = pick_cols();

}  // namespace

// Measured against OpenBLAS 0.3.21 on the 2-core AMD EPYC (Zen 4) VM, 2026-12-07: while B fits
// in L2 both run at the FMA units' peak for M >= 3 and OpenBLAS is faster for M = 2, so the
// streaming pays only once B spills from L2 (1-4x there); the dot-product form (tb) pays later.
bool small_gemm_f32_pays(int64_t M, int64_t N, int64_t K, bool tb) {
  if (M < 1 || M > kSmallGemmMaxRows) return false;
  const int64_t weights = N * K;
  if (tb) return weights >= (int64_t{1} << 20);
  return weights >= (int64_t{1} << 19) || (M >= 3 && weights >= (int64_t{1} << 18));
}

void small_gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                    int64_t ldb, bool tb, float* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (M * N * K < kParallelMacs) {
    kCols(M, 0, N, K, a, lda, b, ldb, tb, c, ldc);
    return;
  }
  const int64_t units = (N + kUnitCols - 1) / kUnitCols;
  const int64_t grain = std::max<int64_t>(1, kParallelMacs / 2 / (M * K * kUnitCols));
  parallel_for(units, grain, [&](int64_t u0, int64_t u1) {
    kCols(M, u0 * kUnitCols, std::min(N, u1 * kUnitCols), K, a, lda, b, ldb, tb, c, ldc);
  });
}

}  // namespace cujax::cpu
