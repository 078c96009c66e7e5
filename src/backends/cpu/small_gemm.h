// Matrix products in register-blocked tiles, eight rows' sums in registers: each weight of a
// block's columns is read once for all its rows, where OpenBLAS's small-matrix sgemm costs about
// M times its single-row time. Used for the few rows of a decode or prefill step and, when
// OpenBLAS runs AVX2 kernels on an AVX-512 CPU, for every product with K <= 512 as well.
#pragma once

#include <cstdint>

namespace cujax::cpu {

// Rows of a decode or prefill step's products that always take these loops where they are
// AVX-512 and OpenBLAS's kernels are not, and (kSmallGemmFewRows) otherwise when the weights
// spill from L2.
constexpr int64_t kSmallGemmMaxRows = 16;
constexpr int64_t kSmallGemmFewRows = 8;

// Whether small_gemm_f32 beats cblas_sgemm for this shape (measured on the development
// machine, docs/performance.md "batched decoding" and "Products on OpenBLAS's AVX2 kernels").
bool small_gemm_f32_pays(int64_t M, int64_t N, int64_t K, bool ta, bool tb);

// C[M, N] = op(A) * op(B) with A stored M x K (row stride lda) or, when ta, K x M, and B stored
// K x N (row stride ldb) or, when tb, N x K. Each element sums its K products in ascending order,
// so a row's result does not depend on M. Splits rows and columns over the backend's threads when
// the product is large enough.
void small_gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, bool ta,
                    const float* b, int64_t ldb, bool tb, float* c, int64_t ldc);

}  // namespace cujax::cpu
