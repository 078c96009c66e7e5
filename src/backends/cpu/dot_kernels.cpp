// Matrix products: dot_general (and the legacy dot), convolution and triangular_solve.
//
// Products accumulate in a type chosen once from the operand and result types: f32 (also for
// f16/bf16 operands and results, rounded once at the end) or f64, both through CBLAS; for
// integer and boolean results the result's width as unsigned arithmetic, so overflow wraps.
// Operands are copied into a [batch, rows, depth] layout only when their own layout cannot be
// handed to the GEMM as it is (a transpose folds into the GEMM's trans flags).
//
// Convolution gathers input windows into rows (im2col, in bounded chunks) and multiplies them
// with the kernel; 1x1 convolutions without padding or dilation use the input directly.
//
// triangular_solve follows XLA's TriangularSolveExpander, which is what produced the expected
// values JAX programs are checked against: diagonal blocks (128 wide) are inverted row by row,
// then the solution is built block by block with matrix products; small matrices in large
// batches use direct substitution. Products use fused multiply-adds in a fixed order, so the
// results are the same on every machine.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/linalg_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/small_gemm.h"

namespace cujax::cpu {

namespace {

constexpr int64_t kCopyGrain = 1 << 15;       // elements per parallel chunk of a copy
constexpr int64_t kGemmGrainFlops = 1 << 16;  // multiply-adds per parallel chunk of a GEMM
constexpr int64_t kGemmBlocksPerThread = 2;   // blocks of a large BLAS product per thread
constexpr int64_t kGemmMinBlock = 16;         // rows or columns of one block, at least
constexpr int64_t kBlasMinFlops = 1 << 12;    // smaller batched products skip CBLAS
// Products up to this size run on one thread, so batches of them are spread over our threads.
constexpr int64_t kBlasSingleThreadFlops = 1 << 18;
constexpr int64_t kIm2colBudget = 1 << 20;  // elements of one im2col chunk
constexpr int64_t kTrsmBlock = 128;         // XLA's TriangularSolveExpander block size

template <class T>
constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
template <class T>
constexpr bool is_fp_v = std::is_floating_point_v<T> || is_half_v<T>;

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

AccKind choose_acc(DType lhs, DType rhs, DType out) {
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
[[maybe_unused]] const bool kBlasOnOneThread = (openblas_set_num_threads(1), true);

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

// ------------------------------------------------------------------ dot_general

// An operand the GEMM reads where it is stored: batch element i is the matrix at offsets[i]
// with rows ld apart and contiguous columns (or, when trans, its transpose). The batch may
// sit between the rows and the columns, as attention's (batch, seq, heads, head_dim) does.
struct InPlace {
  bool ok = false, trans = false;
  int64_t ld = 1;
  std::vector<int64_t> offsets;
};

struct DotPlan {
  DType lhs_dtype, rhs_dtype, out_dtype;
  Shape out_shape;
  AccKind acc;
  int64_t B = 1, M = 1, N = 1, K = 1;
  View lhs_view, rhs_view;  // into [B, M, K] and [B, K, N]
  // How the GEMM reads an operand as stored (when its dtype is the accumulator's).
  InPlace lhs_place, rhs_place;
  bool blas_ok = true;  // every extent fits CBLAS's int
};

// The stride of `dims` read as one index in order (the last fastest), 0 when all have size 1,
// -1 when they do not merge; `extent` is their product.
int64_t merged_stride(const Shape& shape, const std::vector<int64_t>& strides,
                      const std::vector<int64_t>& dims, int64_t& extent) {
  int64_t stride = 0, expected = 0;
  extent = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    const int64_t d = dims[i];
    if (shape[d] == 1) continue;
    if (stride == 0)
      stride = strides[d];
    else if (strides[d] != expected)
      return -1;
    expected = strides[d] * shape[d];
    extent *= shape[d];
  }
  return stride;
}

// `rows` and `cols` are the operand's dimensions that make op(X)'s rows and columns, in order.
InPlace in_place(const Shape& shape, const std::vector<int64_t>& batch,
                 const std::vector<int64_t>& rows, const std::vector<int64_t>& cols) {
  const std::vector<int64_t> st = row_major_strides(shape);
  int64_t nr = 1, nc = 1;
  const int64_t rs = merged_stride(shape, st, rows, nr), cs = merged_stride(shape, st, cols, nc);
  InPlace p;
  if (rs < 0 || cs < 0) return p;
  if (cs <= 1 && (nr == 1 || rs >= nc)) {
    p.ok = true;
    p.ld = nr == 1 ? std::max<int64_t>(1, nc) : rs;
  } else if (rs <= 1 && (nc == 1 || cs >= nr)) {
    p.ok = p.trans = true;
    p.ld = nc == 1 ? std::max<int64_t>(1, nr) : cs;
  } else {
    return p;
  }
  int64_t count = 1;
  for (int64_t d : batch) count *= shape[d];
  p.offsets.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t rem = i, off = 0;
    for (size_t j = batch.size(); j-- > 0;) {
      off += (rem % shape[batch[j]]) * st[batch[j]];
      rem /= shape[batch[j]];
    }
    p.offsets[static_cast<size_t>(i)] = off;
  }
  return p;
}

std::vector<int64_t> concat(std::initializer_list<const std::vector<int64_t>*> parts) {
  std::vector<int64_t> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

// Dimensions of `rank` not in `a` or `b`, ascending.
std::vector<int64_t> free_dims(int64_t rank, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end())
      out.push_back(d);
  return out;
}

template <class A>
std::vector<HostTensor> run_dot(const DotPlan& p, const HostTensor& lhs, const HostTensor& rhs) {
  if (num_elements(p.out_shape) == 0 || p.K == 0) return {HostTensor(p.out_dtype, p.out_shape)};
  // Every path below writes all of C, so it needs no zero fill.
  HostTensor out = HostTensor::uninitialized(p.out_dtype, p.out_shape);
  const int64_t B = p.B, M = p.M, N = p.N, K = p.K;
  constexpr bool kFloat = std::is_floating_point_v<A>;
  const bool blas = kFloat && p.blas_ok && (B == 1 || M * N * K >= kBlasMinFlops);

  const A* a;
  bool ta = false;
  int64_t lda = K;
  const int64_t* a_at = nullptr;  // per batch element, when read in place
  std::unique_ptr<A[]> abuf;
  if (blas && p.lhs_place.ok && lhs.dtype() == dtype_of<A>()) {
    a = lhs.data_as<A>();
    ta = p.lhs_place.trans;
    lda = p.lhs_place.ld;
    a_at = p.lhs_place.offsets.data();
  } else if (lhs.dtype() == dtype_of<A>() && p.lhs_view.contiguous() && p.lhs_view.offset == 0) {
    a = lhs.data_as<A>();
  } else {
    abuf = uninitialized<A>(B * M * K);
    load_as(lhs, p.lhs_view, abuf.get());
    a = abuf.get();
  }
  const A* b;
  bool tb = false;
  int64_t ldb = N;
  const int64_t* b_at = nullptr;
  std::unique_ptr<A[]> bbuf;
  if (blas && p.rhs_place.ok && rhs.dtype() == dtype_of<A>()) {
    b = rhs.data_as<A>();
    tb = p.rhs_place.trans;
    ldb = p.rhs_place.ld;
    b_at = p.rhs_place.offsets.data();
  } else if (rhs.dtype() == dtype_of<A>() && p.rhs_view.contiguous() && p.rhs_view.offset == 0) {
    b = rhs.data_as<A>();
  } else {
    bbuf = uninitialized<A>(B * K * N);
    load_as(rhs, p.rhs_view, bbuf.get());
    b = bbuf.get();
  }
  A* c;
  std::unique_ptr<A[]> cbuf;
  if (out.dtype() == dtype_of<A>()) {
    c = out.data_as<A>();
  } else {
    cbuf = uninitialized<A>(B * M * N);
    c = cbuf.get();
  }

  const int64_t grain = std::max<int64_t>(1, kGemmGrainFlops / std::max<int64_t>(1, M * N * K));
  // Batches of small products, or enough products to keep every thread busy (attention's 64
  // of 128 x 32 x 128 per layer), spread whole products over the threads.
  const bool by_product =
      B > 1 && (M * N * K <= kBlasSingleThreadFlops || B >= kGemmBlocksPerThread * num_threads());
  auto product = [&](int64_t i) {
    matmul<A>(M, N, K, a + (a_at ? a_at[i] : i * M * K), lda, ta, b + (b_at ? b_at[i] : i * K * N),
              ldb, tb, c + i * M * N, N);
  };
  if (blas && by_product) {
    parallel_for(B, grain, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) product(i);
    });
  } else if (blas) {
    for (int64_t i = 0; i < B; ++i) product(i);
  } else if (B > 1) {
    // Many small products: several per task.
    parallel_for(B, grain, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i)
        gemm_rows<A>(0, M, N, K, a + i * M * K, K, b + i * K * N, N, c + i * M * N, N);
    });
  } else {
    gemm_loops<A>(M, N, K, a, K, b, N, c, N);
  }

  if (cbuf) store_from(c, View::flat(B * M * N), out);
  return {out};
}

struct DotDims {
  std::vector<int64_t> lb, rb, lc, rc;
};

Kernel dot_kernel_for(const ir::Operation& op, const DotDims& dims) {
  if (op.operands.size() != 2 || op.results.size() != 1) unsupported(op, "takes two operands");
  const ir::Type& lt = op.operands[0]->type;
  const ir::Type& rt = op.operands[1]->type;
  const ir::Type& ot = op.result(0)->type;
  if (lt.is_token || rt.is_token || ot.is_token) unsupported(op, "needs tensor operands");
  const int64_t lr = lt.rank(), rr = rt.rank();
  if (dims.lb.size() != dims.rb.size()) unsupported(op, "batching dimension lists differ in size");
  if (dims.lc.size() != dims.rc.size())
    unsupported(op, "contracting dimension lists differ in size");
  auto check_side = [&](const std::vector<int64_t>& batch, const std::vector<int64_t>& contract,
                        int64_t rank, const char* side) {
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (const auto* list : {&batch, &contract})
      for (int64_t d : *list) {
        if (d < 0 || d >= rank || seen[d])
          unsupported(
              op, std::string("invalid or repeated ") + side + " dimension " + std::to_string(d));
        seen[d] = true;
      }
  };
  check_side(dims.lb, dims.lc, lr, "lhs");
  check_side(dims.rb, dims.rc, rr, "rhs");
  for (size_t i = 0; i < dims.lb.size(); ++i)
    if (lt.shape[dims.lb[i]] != rt.shape[dims.rb[i]])
      unsupported(op, "batching dimension sizes differ");
  for (size_t i = 0; i < dims.lc.size(); ++i)
    if (lt.shape[dims.lc[i]] != rt.shape[dims.rc[i]])
      unsupported(op, "contracting dimension sizes differ");

  const auto lf = free_dims(lr, dims.lb, dims.lc);
  const auto rf = free_dims(rr, dims.rb, dims.rc);
  auto p = std::make_shared<DotPlan>();
  p->lhs_dtype = lt.dtype;
  p->rhs_dtype = rt.dtype;
  p->out_dtype = ot.dtype;
  p->out_shape = ot.shape;
  p->acc = choose_acc(lt.dtype, rt.dtype, ot.dtype);
  Shape expect;
  for (int64_t d : dims.lb) {
    expect.push_back(lt.shape[d]);
    p->B *= lt.shape[d];
  }
  for (int64_t d : lf) {
    expect.push_back(lt.shape[d]);
    p->M *= lt.shape[d];
  }
  for (int64_t d : rf) {
    expect.push_back(rt.shape[d]);
    p->N *= rt.shape[d];
  }
  for (int64_t d : dims.lc) p->K *= lt.shape[d];
  if (expect != ot.shape)
    unsupported(op, "result shape " + shape_to_string(ot.shape) + " does not match " +
                        shape_to_string(expect));

  // Any pairing order of the contracting dimensions is valid; prefer one that lets both
  // operands go to the GEMM as they are.
  std::vector<size_t> order(dims.lc.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<std::vector<size_t>> candidates = {order};
  auto by_lhs = order, by_rhs = order;
  std::sort(by_lhs.begin(), by_lhs.end(),
            [&](size_t x, size_t y) { return dims.lc[x] < dims.lc[y]; });
  std::sort(by_rhs.begin(), by_rhs.end(),
            [&](size_t x, size_t y) { return dims.rc[x] < dims.rc[y]; });
  candidates.push_back(by_lhs);
  candidates.push_back(by_rhs);
  int best_score = -1;
  for (const auto& ord : candidates) {
    std::vector<int64_t> lc, rc;
    for (size_t i : ord) {
      lc.push_back(dims.lc[i]);
      rc.push_back(dims.rc[i]);
    }
    InPlace lp = in_place(lt.shape, dims.lb, lf, lc), rp = in_place(rt.shape, dims.rb, rc, rf);
    const int score = lp.ok + rp.ok;
    if (score > best_score) {
      best_score = score;
      p->lhs_place = std::move(lp);
      p->rhs_place = std::move(rp);
      p->lhs_view = View::permuted(lt.shape, concat({&dims.lb, &lf, &lc}));
      p->rhs_view = View::permuted(rt.shape, concat({&dims.rb, &rc, &rf}));
    }
  }
  p->blas_ok = fits_blas_int(p->M) && fits_blas_int(p->N) && fits_blas_int(p->K);

  return [p](std::span<const HostTensor> in, ExecContext&) {
    return visit_acc(p->acc, [&](auto tag) {
      using A = typename decltype(tag)::type;
      return run_dot<A>(*p, in[0], in[1]);
    });
  };
}

std::vector<int64_t> struct_ints(const ir::Attribute* s, const char* name) {
  if (!s) return {};
  const ir::Attribute* f = s->field(name);
  if (!f) return {};
  if (f->kind == ir::Attribute::Kind::Integer) return {f->integer};
  return ir::as_ints(*f);
}

Kernel dot_general_kernel(const ir::Operation& op, Compiler&) {
  const ir::Attribute* dn = op.attr("dot_dimension_numbers");
  if (dn && dn->kind != ir::Attribute::Kind::Struct && dn->kind != ir::Attribute::Kind::Dictionary)
    unsupported(op, "dot_dimension_numbers must be a #stablehlo.dot attribute");
  DotDims d;
  try {
    d.lb = struct_ints(dn, "lhs_batching_dimensions");
    d.rb = struct_ints(dn, "rhs_batching_dimensions");
    d.lc = struct_ints(dn, "lhs_contracting_dimensions");
    d.rc = struct_ints(dn, "rhs_contracting_dimensions");
  } catch (const Error& e) {
    unsupported(op, std::string("bad dot_dimension_numbers: ") + e.what());
  }
  return dot_kernel_for(op, d);
}

// The legacy stablehlo.dot: vector/matrix products contracting lhs's last and rhs's first dim.
Kernel dot_kernel(const ir::Operation& op, Compiler&) {
  if (op.operands.size() != 2) unsupported(op, "takes two operands");
  const int64_t lr = op.operands[0]->type.rank(), rr = op.operands[1]->type.rank();
  if (lr < 1 || lr > 2 || rr < 1 || rr > 2) unsupported(op, "needs rank 1 or 2 operands");
  DotDims d;
  d.lc = {lr - 1};
  d.rc = {0};
  return dot_kernel_for(op, d);
}

// ------------------------------------------------------------------ convolution

struct ConvPlan {
  DType out_dtype;
  Shape out_shape;
  AccKind acc;
  int64_t nsp = 0;              // spatial dimensions
  int64_t N = 0, C = 0, O = 0;  // input batch, input features, kernel output features
  int64_t Nout = 0, G = 1, Cg = 0, Og = 0;
  int64_t fgc = 1, bgc = 1;
  Shape in_sp, k_sp, out_sp;
  int64_t S = 1, Wk = 1, P = 1;            // products of the spatial extents
  std::vector<int64_t> in_sp_stride;       // stride of each spatial dim in the canonical input
  std::vector<std::vector<int64_t>> taps;  // [d][p * k_sp[d] + k] -> input index, or -1
  bool pointwise = false;
  View in_view;   // lhs -> [N, S..., C]
  View k_view;    // rhs -> [G, Wk..., Cg, Og], window reversal applied
  View out_view;  // [Nout, P..., O] -> result layout
};

// One im2col row: the windows of output row `row` (reading input batch group `bg`), laid out
// [feature group][kernel position][feature in group], zero where a window leaves the input.
template <class A>
void im2col_row(const ConvPlan& p, const A* x, int64_t bg, int64_t row, A* dst) {
  const int64_t np = row / p.P;
  int64_t pflat = row % p.P;
  int64_t pos[8];
  std::vector<int64_t> pos_big;
  int64_t* pidx = pos;
  if (p.nsp > 8) {
    pos_big.resize(p.nsp);
    pidx = pos_big.data();
  }
  for (int64_t d = p.nsp - 1; d >= 0; --d) {
    pidx[d] = pflat % p.out_sp[d];
    pflat /= p.out_sp[d];
  }
  const A* xb = x + (bg * p.Nout + np) * p.S * p.C;
  const int64_t cg = p.Cg, wk = p.Wk;
  for (int64_t kflat = 0; kflat < wk; ++kflat) {
    int64_t rem = kflat, off = 0;
    bool valid = true;
    for (int64_t d = p.nsp - 1; d >= 0; --d) {
      const int64_t k = rem % p.k_sp[d];
      rem /= p.k_sp[d];
      const int64_t t = p.taps[d][pidx[d] * p.k_sp[d] + k];
      if (t < 0) {
        valid = false;
        break;
      }
      off += t * p.in_sp_stride[d];
    }
    for (int64_t g = 0; g < p.fgc; ++g) {
      A* o = dst + (g * wk + kflat) * cg;
      if (cg == 1) {
        o[0] = valid ? xb[off + g] : A(0);
      } else if (valid) {
        std::copy_n(xb + off + g * cg, cg, o);
      } else {
        std::fill_n(o, cg, A(0));
      }
    }
  }
}

template <class A>
std::vector<HostTensor> run_conv(const ConvPlan& p, const HostTensor& lhs, const HostTensor& rhs) {
  HostTensor out(p.out_dtype, p.out_shape);
  if (out.size() == 0) return {out};
  const int64_t depth = p.Wk * p.Cg;  // one group's share of an im2col row
  const int64_t width = depth * p.fgc;
  auto y = uninitialized<A>(out.size());
  if (depth == 0 || lhs.size() == 0) {
    std::fill_n(y.get(), out.size(), A(0));
  } else {
    auto x = uninitialized<A>(lhs.size());
    load_as(lhs, p.in_view, x.get());
    auto kc = uninitialized<A>(rhs.size());
    load_as(rhs, p.k_view, kc.get());
    const int64_t rows = p.Nout * p.P;
    // Batch groups read different input rows; feature groups share one im2col row each.
    // Products of many narrow groups (depthwise) run in our loops, a block of rows per task,
    // rather than as one BLAS call per group.
    constexpr bool kBlas = std::is_floating_point_v<A>;
    const bool loops = !kBlas || p.Og * depth <= 1024;
    for (int64_t bg = 0; bg < p.bgc; ++bg) {
      const int64_t yoff = p.bgc > 1 ? bg * p.Og : 0;
      const A* kb = kc.get() + (p.bgc > 1 ? bg * depth * p.Og : 0);
      auto kernel_of = [&](int64_t g) { return kb + g * depth * p.Og; };
      if (p.pointwise) {
        const A* a = x.get() + bg * p.Nout * p.S * p.C;
        for (int64_t g = 0; g < p.fgc; ++g)
          matmul<A>(rows, p.Og, depth, a + g * depth, p.C, false, kernel_of(g), p.Og, false,
                    y.get() + yoff + g * p.Og, p.O);
        continue;
      }
      if (loops) {
        constexpr int64_t kRows = 64;
        const int64_t blocks = (rows + kRows - 1) / kRows;
        const int64_t flops = kRows * width * p.Og;
        parallel_for(
            blocks, std::max<int64_t>(1, kGemmGrainFlops / flops), [&](int64_t b0, int64_t b1) {
              auto col = uninitialized<A>(kRows * width);
              for (int64_t blk = b0; blk < b1; ++blk) {
                const int64_t r0 = blk * kRows, nr = std::min(kRows, rows - r0);
                for (int64_t i = 0; i < nr; ++i)
                  im2col_row(p, x.get(), bg, r0 + i, col.get() + i * width);
                for (int64_t g = 0; g < p.fgc; ++g)
                  gemm_rows<A>(0, nr, p.Og, depth, col.get() + g * depth, width, kernel_of(g), p.Og,
                               y.get() + r0 * p.O + yoff + g * p.Og, p.O);
              }
            });
        continue;
      }
      const int64_t chunk = std::clamp<int64_t>(kIm2colBudget / width, 1, rows);
      auto col = uninitialized<A>(chunk * width);
      for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t nr = std::min(chunk, rows - r0);
        parallel_for(nr, std::max<int64_t>(1, kCopyGrain / width), [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) im2col_row(p, x.get(), bg, r0 + i, col.get() + i * width);
        });
        for (int64_t g = 0; g < p.fgc; ++g)
          matmul<A>(nr, p.Og, depth, col.get() + g * depth, width, false, kernel_of(g), p.Og, false,
                    y.get() + r0 * p.O + yoff + g * p.Og, p.O);
      }
    }
  }
  store_from(y.get(), p.out_view, out);
  return {out};
}

int64_t struct_int(const ir::Operation& op, const ir::Attribute& s, const char* name) {
  const ir::Attribute* f = s.field(name);
  if (!f) unsupported(op, std::string("dimension_numbers lacks ") + name);
  if (f->kind == ir::Attribute::Kind::Integer) return f->integer;
  const auto v = ir::as_ints(*f);
  if (v.size() != 1)
    unsupported(op, std::string("dimension_numbers field ") + name + " is not one integer");
  return v[0];
}

int64_t int_attr_or(const ir::Operation& op, const char* name, int64_t dflt) {
  const ir::Attribute* a = op.attr(name);
  if (!a) return dflt;
  if (a->kind == ir::Attribute::Kind::Integer) return a->integer;
  const auto v = ir::as_ints(*a);
  if (v.size() != 1) unsupported(op, std::string(name) + " must be an integer");
  return v[0];
}

Kernel convolution_kernel(const ir::Operation& op, Compiler&) {
  if (op.operands.size() != 2 || op.results.size() != 1) unsupported(op, "takes two operands");
  const ir::Type& lt = op.operands[0]->type;
  const ir::Type& rt = op.operands[1]->type;
  const ir::Type& ot = op.result(0)->type;
  const ir::Attribute* dn = op.attr("dimension_numbers");
  if (!dn ||
      (dn->kind != ir::Attribute::Kind::Struct && dn->kind != ir::Attribute::Kind::Dictionary))
    unsupported(op, "needs a #stablehlo.conv dimension_numbers attribute");
  auto p = std::make_shared<ConvPlan>();
  try {
    const int64_t rank = lt.rank();
    if (rank < 2 || rt.rank() != rank || ot.rank() != rank)
      unsupported(op, "operands and result must have the same rank >= 2");
    const int64_t nsp = rank - 2;
    p->nsp = nsp;
    const int64_t ib = struct_int(op, *dn, "input_batch_dimension");
    const int64_t ifd = struct_int(op, *dn, "input_feature_dimension");
    const auto is = struct_ints(dn, "input_spatial_dimensions");
    const int64_t kid = struct_int(op, *dn, "kernel_input_feature_dimension");
    const int64_t kod = struct_int(op, *dn, "kernel_output_feature_dimension");
    const auto ks = struct_ints(dn, "kernel_spatial_dimensions");
    const int64_t ob = struct_int(op, *dn, "output_batch_dimension");
    const int64_t ofd = struct_int(op, *dn, "output_feature_dimension");
    const auto os = struct_ints(dn, "output_spatial_dimensions");
    if (static_cast<int64_t>(is.size()) != nsp || static_cast<int64_t>(ks.size()) != nsp ||
        static_cast<int64_t>(os.size()) != nsp)
      unsupported(op, "spatial dimension lists must have rank - 2 entries");
    auto check_perm = [&](std::vector<int64_t> dims, const char* what) {
      std::vector<bool> seen(rank, false);
      for (int64_t d : dims) {
        if (d < 0 || d >= rank || seen[d])
          unsupported(op, std::string("invalid ") + what + " dimensions");
        seen[d] = true;
      }
    };
    std::vector<int64_t> in_perm = {ib};
    in_perm.insert(in_perm.end(), is.begin(), is.end());
    in_perm.push_back(ifd);
    check_perm(in_perm, "input");
    std::vector<int64_t> k_dims = ks;
    k_dims.push_back(kid);
    k_dims.push_back(kod);
    check_perm(k_dims, "kernel");
    std::vector<int64_t> o_dims = {ob};
    o_dims.insert(o_dims.end(), os.begin(), os.end());
    o_dims.push_back(ofd);
    check_perm(o_dims, "output");

    auto ints_or = [&](const char* name, int64_t dflt, size_t n) {
      auto v = op.ints_if_present(name);
      if (!v) return std::vector<int64_t>(n, dflt);
      if (v->size() != n) unsupported(op, std::string(name) + " has the wrong length");
      return *v;
    };
    const auto stride = ints_or("window_strides", 1, nsp);
    const auto pad = ints_or("padding", 0, 2 * nsp);
    const auto ldil = ints_or("lhs_dilation", 1, nsp);
    const auto rdil = ints_or("rhs_dilation", 1, nsp);
    const auto rev = ints_or("window_reversal", 0, nsp);
    p->fgc = int_attr_or(op, "feature_group_count", 1);
    p->bgc = int_attr_or(op, "batch_group_count", 1);
    for (int64_t d = 0; d < nsp; ++d)
      if (stride[d] <= 0 || ldil[d] <= 0 || rdil[d] <= 0)
        unsupported(op, "strides and dilations must be positive");
    if (p->fgc < 1 || p->bgc < 1 || (p->fgc > 1 && p->bgc > 1))
      unsupported(op, "invalid feature_group_count / batch_group_count");

    p->N = lt.shape[ib];
    p->C = lt.shape[ifd];
    p->O = rt.shape[kod];
    p->G = p->fgc * p->bgc;
    if (p->C % p->fgc != 0 || rt.shape[kid] * p->fgc != p->C)
      unsupported(op, "kernel input features must be input features / feature_group_count");
    if (p->O % p->G != 0)
      unsupported(op, "kernel output features are not divisible by the group count");
    if (p->N % p->bgc != 0) unsupported(op, "input batch is not divisible by batch_group_count");
    p->Cg = p->C / p->fgc;
    p->Og = p->O / p->G;
    p->Nout = p->N / p->bgc;

    Shape expect(rank);
    expect[ob] = p->Nout;
    expect[ofd] = p->O;
    for (int64_t d = 0; d < nsp; ++d) {
      const int64_t s = lt.shape[is[d]], k = rt.shape[ks[d]];
      const int64_t dil_in = s == 0 ? 0 : (s - 1) * ldil[d] + 1;
      const int64_t padded = pad[2 * d] + dil_in + pad[2 * d + 1];
      const int64_t dil_win = k == 0 ? 0 : (k - 1) * rdil[d] + 1;
      const int64_t windows =
          (padded <= 0 || dil_win > padded) ? 0 : (padded - dil_win) / stride[d] + 1;
      expect[os[d]] = windows;
      p->in_sp.push_back(s);
      p->k_sp.push_back(k);
      p->out_sp.push_back(windows);
    }
    if (expect != ot.shape)
      unsupported(op, "result shape " + shape_to_string(ot.shape) + " does not match " +
                          shape_to_string(expect));
    p->out_dtype = ot.dtype;
    p->out_shape = ot.shape;
    p->acc = choose_acc(lt.dtype, rt.dtype, ot.dtype);
    p->S = num_elements(p->in_sp);
    p->Wk = num_elements(p->k_sp);
    p->P = num_elements(p->out_sp);
    p->in_sp_stride.assign(nsp, p->C);
    for (int64_t d = nsp - 2; d >= 0; --d)
      p->in_sp_stride[d] = p->in_sp_stride[d + 1] * p->in_sp[d + 1];

    p->taps.resize(nsp);
    bool pointwise = p->Wk == 1;
    for (int64_t d = 0; d < nsp; ++d) {
      const int64_t k_n = p->k_sp[d];
      auto& t = p->taps[d];
      t.assign(p->out_sp[d] * k_n, -1);
      for (int64_t o = 0; o < p->out_sp[d]; ++o)
        for (int64_t k = 0; k < k_n; ++k) {
          const int64_t q = o * stride[d] + k * rdil[d] - pad[2 * d];  // in dilated input
          if (q < 0 || q % ldil[d] != 0 || q / ldil[d] >= p->in_sp[d]) continue;
          t[o * k_n + k] = q / ldil[d];
        }
      if (stride[d] != 1 || ldil[d] != 1 || pad[2 * d] != 0 || pad[2 * d + 1] != 0)
        pointwise = false;
    }
    p->pointwise = pointwise;

    p->in_view = View::permuted(lt.shape, in_perm);
    // Kernel view [G, k..., Cg, Og]: the output feature dim splits into (G, Og); reversed
    // spatial dims read backwards.
    {
      const auto st = row_major_strides(rt.shape);
      View v;
      v.dims.push_back(p->G);
      v.strides.push_back(st[kod] * p->Og);
      for (int64_t d = 0; d < nsp; ++d) {
        const int64_t k_n = p->k_sp[d];
        v.dims.push_back(k_n);
        if (rev[d] && k_n > 0) {
          v.strides.push_back(-st[ks[d]]);
          v.offset += (k_n - 1) * st[ks[d]];
        } else {
          v.strides.push_back(st[ks[d]]);
        }
      }
      v.dims.push_back(p->Cg);
      v.strides.push_back(st[kid]);
      v.dims.push_back(p->Og);
      v.strides.push_back(st[kod]);
      v.coalesce();
      p->k_view = v;
    }
    // Result dim r reads canonical dim c where o_dims[c] = r.
    {
      Shape canon = {p->Nout};
      canon.insert(canon.end(), p->out_sp.begin(), p->out_sp.end());
      canon.push_back(p->O);
      const auto cst = row_major_strides(canon);
      View v;
      v.dims = ot.shape;
      v.strides.assign(rank, 0);
      for (int64_t c = 0; c < rank; ++c) v.strides[o_dims[c]] = cst[c];
      v.coalesce();
      p->out_view = v;
    }
    if (p->acc == AccKind::F32 || p->acc == AccKind::F64) {
      const int64_t max_rows = p->pointwise ? p->Nout * p->P : kIm2colBudget;
      if (!fits_blas_int(max_rows) || !fits_blas_int(p->Wk * p->C) || !fits_blas_int(p->O))
        unsupported(op, "convolution too large for the BLAS interface");
    }
  } catch (const UnsupportedError&) {
    throw;
  } catch (const Error& e) {
    unsupported(op, e.what());
  }
  return [p](std::span<const HostTensor> in, ExecContext&) {
    return visit_acc(p->acc, [&](auto tag) {
      using A = typename decltype(tag)::type;
      return run_conv<A>(*p, in[0], in[1]);
    });
  };
}

// ------------------------------------------------------------------ triangular_solve

// acc[i] = fma(a, x[i], acc[i]); one rounding per element, so every build gives the same bits.
__attribute__((target_clones("fma", "default"))) void fma_row(float* __restrict acc, float a,
                                                              const float* __restrict x,
                                                              int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = std::fma(a, x[i], acc[i]);
}
__attribute__((target_clones("fma", "default"))) void fma_row(double* __restrict acc, double a,
                                                              const double* __restrict x,
                                                              int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = std::fma(a, x[i], acc[i]);
}

struct TrsmPlan {
  DType dtype;
  Shape b_shape;
  int64_t batch = 1, n = 0, rows = 0, cols = 0;  // b is [batch, rows, cols]
  bool left = true, lower = true, unit = false, transpose = false;
  bool direct = false;  // substitution instead of inverted diagonal blocks
};

// Products of a row vector with a matrix: out[0..w) = sum_k coef[k] * mat[k * ld ..], summed in
// ascending k with fused multiply-adds, in one accumulator or (as XLA's matrix-matrix products
// do) two interleaved ones (even and odd k) added at the end.
template <class T>
struct RowProduct {
  std::vector<T> even, odd;
  void run(const T* coef, int64_t coef_stride, int64_t nk, const T* mat, int64_t ld, int64_t w,
           bool two_lanes, T* out) {
    even.assign(w, T(0));
    if (two_lanes) odd.assign(w, T(0));
    for (int64_t k = 0; k < nk; ++k) {
      T* acc = (two_lanes && (k & 1)) ? odd.data() : even.data();
      fma_row(acc, coef[k * coef_stride], mat + k * ld, w);
    }
    if (two_lanes) {
      for (int64_t i = 0; i < w; ++i) out[i] = even[i] + odd[i];
    } else {
      std::copy_n(even.data(), w, out);
    }
  }
};

// Solves one batch element in place: `x` holds b ([rows, cols]) on entry and the solution on
// exit; `a` is [n, n].
template <class T>
void trsm_one(const TrsmPlan& p, const T* a, T* x) {
  const int64_t n = p.n, rows = p.rows, cols = p.cols;
  if (rows * cols == 0) return;
  if (n == 1) {
    if (!p.unit)
      for (int64_t i = 0; i < rows * cols; ++i) x[i] = x[i] / a[0];
    return;
  }
  // op(a) with the ignored triangle zeroed and, for unit_diagonal, ones on the diagonal.
  std::vector<T> m(n * n, T(0));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const bool keep = p.lower ? (j < i || (j == i && !p.unit)) : (j > i || (j == i && !p.unit));
      T v = keep ? a[i * n + j] : T(0);
      if (i == j && p.unit) v = T(1);
      if (p.transpose) {
        m[j * n + i] = v;
      } else {
        m[i * n + j] = v;
      }
    }
  const bool t_lower = p.lower != p.transpose;  // op(a) is lower triangular
  // Left: op(a) x = b, rows of x independent of nothing, columns independent of each other.
  // Right: x op(a) = b, rows of x independent of each other.
  const bool forward = p.left ? t_lower : !t_lower;

  if (p.direct) {
    if (p.left) {
      parallel_for(cols, std::max<int64_t>(1, 4096 / (n * n)), [&](int64_t c0, int64_t c1) {
        const int64_t w = c1 - c0;
        RowProduct<T> rp;
        std::vector<T> dot(w);
        for (int64_t s = 0; s < n; ++s) {
          const int64_t j = forward ? s : n - 1 - s;
          const int64_t k0 = forward ? 0 : j + 1, k1 = forward ? j : n;
          T* xr = x + j * cols + c0;
          if (k1 > k0) {
            rp.run(m.data() + j * n + k0, 1, k1 - k0, x + k0 * cols + c0, cols, w, false,
                   dot.data());
            for (int64_t i = 0; i < w; ++i) xr[i] = xr[i] - dot[i];
          }
          if (!p.unit)
            for (int64_t i = 0; i < w; ++i) xr[i] = xr[i] / m[j * n + j];
        }
      });
    } else {
      parallel_for(rows, std::max<int64_t>(1, 4096 / (n * n)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          T* xr = x + r * n;
          for (int64_t s = 0; s < n; ++s) {
            const int64_t j = forward ? s : n - 1 - s;
            const int64_t k0 = forward ? 0 : j + 1, k1 = forward ? j : n;
            T acc = T(0);
            for (int64_t k = k0; k < k1; ++k) acc = std::fma(xr[k], m[k * n + j], acc);
            T v = k1 > k0 ? xr[j] - acc : xr[j];
            if (!p.unit) v = v / m[j * n + j];
            xr[j] = v;
          }
        }
      });
    }
    return;
  }

  // Invert the diagonal blocks of the (untransposed, masked) matrix, then transpose the
  // inverses along with it.
  const int64_t bs = std::min(kTrsmBlock, n);
  const int64_t nb = (n + bs - 1) / bs;
  std::vector<std::vector<T>> inv(nb);
  for (int64_t blk = 0; blk < nb; ++blk) {
    const int64_t j0 = blk * bs, r = std::min(bs, n - j0);
    auto at = [&](int64_t i, int64_t j) {  // masked a (not transposed), block-local
      return p.transpose ? m[(j0 + j) * n + j0 + i] : m[(j0 + i) * n + j0 + j];
    };
    std::vector<T> d(r), sc(r * r), out(r * r, T(0)), acc(r);
    for (int64_t i = 0; i < r; ++i) d[i] = at(i, i) == T(0) ? T(1) : at(i, i);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < r; ++j) sc[i * r + j] = at(i, j) / d[j];
    for (int64_t i = 0; i < r; ++i) out[i * r + i] = T(-1);
    const int64_t first = p.lower ? 0 : r - 1;
    out[first * r + first] = T(1);
    for (int64_t it = 1; it < r; ++it) {
      const int64_t j = p.lower ? it : r - 1 - it;
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t k = 0; k < r; ++k) fma_row(acc.data(), sc[j * r + k], out.data() + k * r, r);
      for (int64_t c = 0; c < r; ++c) out[j * r + c] = -acc[c];
    }
    auto& iv = inv[blk];
    iv.resize(r * r);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < r; ++j) {
        const T v = out[i * r + j] / d[i];
        if (p.transpose) {
          iv[j * r + i] = v;
        } else {
          iv[i * r + j] = v;
        }
      }
  }

  if (p.left) {
    // Columns of x are independent.
    parallel_for(cols, std::max<int64_t>(1, 4096 / (n * n)), [&](int64_t c0, int64_t c1) {
      const int64_t w = c1 - c0;
      RowProduct<T> rp;
      std::vector<T> rem(bs * w), dot(w);
      for (int64_t s = 0; s < nb; ++s) {
        const int64_t blk = forward ? s : nb - 1 - s;
        const int64_t j0 = blk * bs, r = std::min(bs, n - j0);
        const int64_t k0 = forward ? 0 : j0 + r, k1 = forward ? j0 : n;
        const bool lanes = r > 1 && cols > 1;
        for (int64_t i = 0; i < r; ++i) {
          std::copy_n(x + (j0 + i) * cols + c0, w, rem.data() + i * w);
          if (s > 0 && k1 > k0) {
            rp.run(m.data() + (j0 + i) * n + k0, 1, k1 - k0, x + k0 * cols + c0, cols, w, lanes,
                   dot.data());
            for (int64_t c = 0; c < w; ++c) rem[i * w + c] = rem[i * w + c] - dot[c];
          }
        }
        for (int64_t i = 0; i < r; ++i)
          rp.run(inv[blk].data() + i * r, 1, r, rem.data(), w, w, lanes, x + (j0 + i) * cols + c0);
      }
    });
  } else {
    // Rows of x are independent.
    parallel_for(rows, std::max<int64_t>(1, 4096 / (n * n)), [&](int64_t r0, int64_t r1) {
      RowProduct<T> rp;
      std::vector<T> rem(bs), dot(bs);
      for (int64_t q = r0; q < r1; ++q) {
        T* xr = x + q * n;
        for (int64_t s = 0; s < nb; ++s) {
          const int64_t blk = forward ? s : nb - 1 - s;
          const int64_t j0 = blk * bs, r = std::min(bs, n - j0);
          const int64_t k0 = forward ? 0 : j0 + r, k1 = forward ? j0 : n;
          const bool lanes = r > 1 && rows > 1;
          std::copy_n(xr + j0, r, rem.data());
          if (s > 0 && k1 > k0) {
            rp.run(xr + k0, 1, k1 - k0, m.data() + k0 * n + j0, n, r, lanes, dot.data());
            for (int64_t c = 0; c < r; ++c) rem[c] = rem[c] - dot[c];
          }
          rp.run(rem.data(), 1, r, inv[blk].data(), r, r, lanes, xr + j0);
        }
      }
    });
  }
}

template <class T>
void run_trsm(const TrsmPlan& p, const T* a, T* x) {
  const int64_t asz = p.n * p.n, bsz = p.rows * p.cols;
  parallel_for(p.batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) trsm_one(p, a + i * asz, x + i * bsz);
  });
}

bool bool_attr(const ir::Operation& op, const char* name) {
  const ir::Attribute* a = op.attr(name);
  if (!a) unsupported(op, std::string("needs the ") + name + " attribute");
  if (a->kind == ir::Attribute::Kind::Bool) return a->boolean;
  if (a->kind == ir::Attribute::Kind::Unit) return true;
  if (a->kind == ir::Attribute::Kind::Integer) return a->integer != 0;
  unsupported(op, std::string(name) + " must be a boolean");
}

Kernel triangular_solve_kernel(const ir::Operation& op, Compiler&) {
  if (op.operands.size() != 2 || op.results.size() != 1) unsupported(op, "takes two operands");
  const ir::Type& at = op.operands[0]->type;
  const ir::Type& bt = op.operands[1]->type;
  if (op.result(0)->type != bt) unsupported(op, "result type must equal b's type");
  if (!is_float(at.dtype) || at.dtype != bt.dtype)
    unsupported(op, "needs floating-point operands of one type");
  const int64_t rank = at.rank();
  if (rank < 2 || bt.rank() != rank) unsupported(op, "operands need the same rank >= 2");
  auto p = std::make_shared<TrsmPlan>();
  p->dtype = at.dtype;
  p->b_shape = bt.shape;
  p->left = bool_attr(op, "left_side");
  p->lower = bool_attr(op, "lower");
  p->unit = bool_attr(op, "unit_diagonal");
  const ir::Attribute* tr = op.attr("transpose_a");
  std::string t = "NO_TRANSPOSE";
  if (tr) {
    if (tr->kind == ir::Attribute::Kind::Enum) {
      t = tr->enum_value;
    } else if (tr->kind == ir::Attribute::Kind::String) {
      t = tr->text;
    } else {
      unsupported(op, "transpose_a must be a #stablehlo<transpose> enum");
    }
  }
  if (t == "NO_TRANSPOSE") {
    p->transpose = false;
  } else if (t == "TRANSPOSE" || t == "ADJOINT") {
    p->transpose = true;  // the adjoint of a real matrix is its transpose
  } else {
    unsupported(op, "unknown transpose_a value " + t);
  }
  p->n = at.shape[rank - 1];
  if (at.shape[rank - 2] != p->n) unsupported(op, "a must be square in its last two dims");
  for (int64_t d = 0; d < rank - 2; ++d) {
    if (at.shape[d] != bt.shape[d]) unsupported(op, "batch dimensions of a and b differ");
    p->batch *= at.shape[d];
  }
  p->rows = bt.shape[rank - 2];
  p->cols = bt.shape[rank - 1];
  if ((p->left ? p->rows : p->cols) != p->n)
    unsupported(op, "b's " + std::string(p->left ? "rows" : "columns") + " must match a");
  // XLA solves directly when the batch is large and the matrices small.
  p->direct = p->batch > kTrsmBlock / 16 && p->n < kTrsmBlock / 4;

  return [p](std::span<const HostTensor> in, ExecContext&) {
    const HostTensor& a = in[0];
    const HostTensor& b = in[1];
    HostTensor out(p->dtype, p->b_shape);
    if (out.size() == 0) return std::vector<HostTensor>{out};
    if (p->dtype == DType::F64) {
      std::memcpy(out.data(), b.data(), b.nbytes());
      run_trsm<double>(*p, a.data_as<double>(), out.data_as<double>());
      return std::vector<HostTensor>{out};
    }
    if (p->dtype == DType::F32) {
      std::memcpy(out.data(), b.data(), b.nbytes());
      run_trsm<float>(*p, a.data_as<float>(), out.data_as<float>());
      return std::vector<HostTensor>{out};
    }
    // f16 / bf16: solve in f32 and round once.
    const View va = View::flat(a.size()), vb = View::flat(b.size());
    auto af = uninitialized<float>(a.size());
    auto xf = uninitialized<float>(b.size());
    load_as(a, va, af.get());
    load_as(b, vb, xf.get());
    run_trsm<float>(*p, af.get(), xf.get());
    store_from(xf.get(), vb, out);
    return std::vector<HostTensor>{out};
  };
}

}  // namespace

void register_dot_kernels(KernelRegistry& r) {
  r.add("stablehlo.dot_general", dot_general_kernel);
  r.add("stablehlo.dot", dot_kernel);
  r.add("stablehlo.convolution", convolution_kernel);
  r.add("stablehlo.triangular_solve", triangular_solve_kernel);
}

}  // namespace cujax::cpu
