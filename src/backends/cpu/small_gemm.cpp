// Register-blocked products: C[M, N] = op(A) * op(B) in tiles of up to 64 rows and 64 columns.
// A block of up to eight rows keeps its sums in registers while one pass over K streams the
// block's weights, so a few-row product costs about what reading B costs whatever M is. The
// loops are plain C++ with GCC's generic vectors; they are built for AVX-512, AVX2 and the
// baseline and picked once at load time. This file is compiled with -ffp-contract=fast
// (CMakeLists.txt) so the multiply-adds fuse, as BLAS's do.
#include "backends/cpu/small_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/parallel.h"
#include "backends/cpu/strided_copy.h"

namespace cujax::cpu {

namespace {

// Columns of C per parallel unit (a multiple of every block width below).
constexpr int64_t kUnitCols = 64;
// Rows one pass over a unit's weights keeps in registers (the kernels below take 1 to 8).
constexpr int64_t kBlockRows = 8;
// Rows per parallel unit when there are many: the unit's weights stay in L1 across its blocks.
constexpr int64_t kUnitRows = 64;
// Depth up to which a unit's weights (kUnitCols x K floats, 128 KiB) stay in L2 for many rows.
constexpr int64_t kMaxDepthManyRows = 512;
// Multiply-adds below which the product stays on the calling thread, and below which it is
// split only onto a pool worker that is awake: up to about 30 us of work at the loops' rate, as
// long as waking a sleeping worker can take on a busy VM. A decode step's products at 4 slots
// (4 x 128 x 512) gain from an awake worker, and lose the wake-up when a server's threads keep
// the other core.
constexpr int64_t kParallelMacs = int64_t{1} << 18;
constexpr int64_t kParallelMacsAsleep = int64_t{1} << 20;

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

// C[:, 0, NV * V) for B stored K x N (b and c already offset to the block's first column). A's
// element (m, k) is a[m * lda + k * ak]: ak = 1 for A stored M x K, lda = 1 for A stored K x M
// (a transposed A costs nothing here, each element being read alone).
template <int M, int NV, int V>
CUJAX_INLINE void nn_block(int64_t K, const float* a, int64_t lda, int64_t ak, const float* b,
                           int64_t ldb, float* c, int64_t ldc) {
  Vec<V> acc[M][NV] = {};
  for (int64_t k = 0; k < K; ++k) {
    Vec<V> bk[NV];
    for (int j = 0; j < NV; ++j) bk[j] = load<V>(b + k * ldb + j * V);
    for (int m = 0; m < M; ++m) {
      const float am = a[m * lda + k * ak];
      for (int j = 0; j < NV; ++j) acc[m][j] += am * bk[j];
    }
  }
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < NV; ++j) std::memcpy(c + m * ldc + j * V, &acc[m][j], sizeof acc[m][j]);
}

// Vectors of B per block for M rows: the widest of 4, 2 and 1 whose M x NV sums, NV vectors of
// B and a broadcast of A fit in the vector registers (32 with AVX-512, 16 below), so that enough
// independent sums hide the multiply-add latency and each row of B is read in long runs (a
// step's weights come from L3 or memory: 4 rows in blocks of 4 vectors took 30-40% less time
// than in blocks of 2).
template <int M, int V>
constexpr int kBlockVectors = [] {
  constexpr int regs = V == 16 ? 32 : 16;
  for (int nv : {4, 2})
    if ((M + 1) * nv + 2 <= regs) return nv;
  return 1;
}();

// Columns [n0, n1) of C, B stored K x N. V is the vector width in floats.
template <int M, int V>
CUJAX_INLINE void nn_cols(int64_t n0, int64_t n1, int64_t K, const float* a, int64_t lda,
                          int64_t ak, const float* b, int64_t ldb, float* c, int64_t ldc) {
  constexpr int NV = kBlockVectors<M, V>;
  int64_t n = n0;
  for (; n + NV * V <= n1; n += NV * V) nn_block<M, NV, V>(K, a, lda, ak, b + n, ldb, c + n, ldc);
  for (; n + V <= n1; n += V) nn_block<M, 1, V>(K, a, lda, ak, b + n, ldb, c + n, ldc);
  for (; n < n1; ++n) {  // the last columns, fewer than a vector
    float acc[M] = {};
    for (int64_t k = 0; k < K; ++k)
      for (int m = 0; m < M; ++m) acc[m] += a[m * lda + k * ak] * b[k * ldb + n];
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
                       int64_t ak, const float* b, int64_t ldb, bool tb, float* c, int64_t ldc) {
#define CUJAX_SMALL_GEMM_CASE(m)                            \
  case m:                                                   \
    if (tb)                                                 \
      nt_cols<m, V>(n0, n1, K, a, lda, b, ldb, c, ldc);     \
    else                                                    \
      nn_cols<m, V>(n0, n1, K, a, lda, ak, b, ldb, c, ldc); \
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

// Columns [n0, n1) of C for M <= 8 rows; A's element (m, k) is a[m * lda + k * ak], with ak = 1
// when tb.
using ColsFn = void (*)(int64_t M, int64_t n0, int64_t n1, int64_t K, const float* a, int64_t lda,
                        int64_t ak, const float* b, int64_t ldb, bool tb, float* c, int64_t ldc);

void cols_baseline(int64_t M, int64_t n0, int64_t n1, int64_t K, const float* a, int64_t lda,
                   int64_t ak, const float* b, int64_t ldb, bool tb, float* c, int64_t ldc) {
  cols<4>(M, n0, n1, K, a, lda, ak, b, ldb, tb, c, ldc);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target("avx2,fma"))) void cols_avx2(int64_t M, int64_t n0, int64_t n1, int64_t K,
                                                   const float* a, int64_t lda, int64_t ak,
                                                   const float* b, int64_t ldb, bool tb, float* c,
                                                   int64_t ldc) {
  cols<8>(M, n0, n1, K, a, lda, ak, b, ldb, tb, c, ldc);
}

__attribute__((target("avx512f,avx512vl,fma"))) void cols_avx512(int64_t M, int64_t n0, int64_t n1,
                                                                 int64_t K, const float* a,
                                                                 int64_t lda, int64_t ak,
                                                                 const float* b, int64_t ldb,
                                                                 bool tb, float* c, int64_t ldc) {
  cols<16>(M, n0, n1, K, a, lda, ak, b, ldb, tb, c, ldc);
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

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
const bool kLoopsAvx512 = kCols == cols_avx512;
#else
const bool kLoopsAvx512 = false;
#endif

// Whether OpenBLAS runs its AVX-512 kernels: it picked them from the CPU when it loaded (before
// this file's statics), unless OPENBLAS_CORETYPE names others.
bool blas_has_avx512() {
  const std::string core = openblas_get_corename();
  return core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids";
}

// AVX-512 loops against OpenBLAS's AVX2 kernels: the loops take far more products.
const bool kLoopsAheadOfBlas = kLoopsAvx512 && !blas_has_avx512();

// X stored rows x cols (row stride ld) -> cols x rows, by the backend's tiled strided copy.
std::vector<float> transpose(int64_t rows, int64_t cols, const float* x, int64_t ld) {
  std::vector<float> t(static_cast<size_t>(rows * cols));
  index::StridedCopy copy;
  copy.push(cols, 1, rows);
  copy.push(rows, ld, 1);
  copy.simplify();
  run_strided_copy(copy, x, t.data(), sizeof(float));
  return t;
}

}  // namespace

// Measured against OpenBLAS 0.3.21 on the 2-core AMD EPYC (Zen 5) VM, 2026-12-07. With OpenBLAS's
// AVX-512 kernels (its own choice there) and B hot in L2, both run at the FMA units' peak for
// M >= 3 and OpenBLAS is faster for M = 2, so the streaming pays only once B spills from L2;
// the dot-product form (tb) pays later. Where OpenBLAS runs AVX2 kernels (OPENBLAS_CORETYPE=
// Haswell, as the development machine sets it) and these loops AVX-512 ones, they win far more
// often (docs/performance.md, "products on OpenBLAS's AVX2 kernels"): 3-4x on every few-row
// product of a decode or prefill step (M <= 16, weights cold as they are in a model's step),
// and 1.4-1.6x on products with K <= 512 at any M (a training step's forward products and the
// backward ones of its activations; the dot-product form, slower than OpenBLAS at many rows,
// is transposed first, and a transposed A is read in place). Weight gradients (K = the batch's
// tokens) stay on OpenBLAS: with K = 2048 a tile's weights leave L1, and the loops ran at half its
// rate.
bool small_gemm_f32_pays(int64_t M, int64_t N, int64_t K, bool ta, bool tb) {
  if (M < 1) return false;
  if (kLoopsAheadOfBlas) return M <= kSmallGemmMaxRows || K <= kMaxDepthManyRows;
  if (ta || M > kSmallGemmFewRows) return false;
  const int64_t weights = N * K;
  if (tb) return weights >= (int64_t{1} << 20);
  return weights >= (int64_t{1} << 19) || (M >= 3 && weights >= (int64_t{1} << 18));
}

void small_gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, bool ta,
                    const float* b, int64_t ldb, bool tb, float* c, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  // A stored K x M is read in place by the streaming form; the dot-product form loads A's rows
  // as vectors, so there they are made once (M x K floats, against M x N x K multiply-adds).
  std::vector<float> rows;
  if (ta && tb && M <= kSmallGemmMaxRows) {
    rows = transpose(K, M, a, lda);
    a = rows.data();
    lda = K;
    ta = false;
  }
  // A's element (m, k) is a[m * a_m + k * a_k].
  const int64_t a_m = ta ? 1 : lda, a_k = ta ? lda : 1;
  // Many rows against B stored N x K: the dot-product form reduces every column's sums across
  // a vector, so B is transposed once (N x K floats, against M x N x K multiply-adds) and the
  // rows take the streaming form.
  std::vector<float> transposed;
  if (tb && M > kSmallGemmMaxRows) {
    transposed = transpose(N, K, b, ldb);
    b = transposed.data();
    ldb = N;
    tb = false;
  }
  // A tile: rows [m0, m1) of columns [n0, n1), in blocks of kBlockRows rows, so the blocks after
  // the first read the tile's weights from cache.
  const auto tile = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    for (int64_t m = m0; m < m1; m += kBlockRows)
      kCols(std::min(kBlockRows, m1 - m), n0, n1, K, a + m * a_m, a_m, a_k, b, ldb, tb, c + m * ldc,
            ldc);
  };
  const int64_t col_units = (N + kUnitCols - 1) / kUnitCols;
  const int64_t row_units = (M + kUnitRows - 1) / kUnitRows;
  const auto units = [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t r = u / col_units, n = u % col_units;
      tile(r * kUnitRows, std::min(M, (r + 1) * kUnitRows), n * kUnitCols,
           std::min(N, (n + 1) * kUnitCols));
    }
  };
  const int64_t macs = M * N * K;
  if (macs < kParallelMacs || (macs < kParallelMacsAsleep && !worker_awake())) {
    units(0, row_units * col_units);
    return;
  }
  const int64_t unit_macs = std::min(M, kUnitRows) * K * kUnitCols;
  parallel_for(row_units * col_units, std::max<int64_t>(1, kParallelMacs / 2 / unit_macs), units);
}

}  // namespace cujax::cpu
