// Matrix products with few rows (M <= 8, the slots of a decode step): each weight is read once
// for all rows, where OpenBLAS's small-matrix sgemm costs about M times its single-row time.
#pragma once

#include <cstdint>

namespace cujax::cpu {

constexpr int64_t kSmallGemmMaxRows = 8;

// Whether small_gemm_f32 beats cblas_sgemm for this shape (thresholds measured on the
// development machine, docs/performance.md "batched decoding").
bool small_gemm_f32_pays(int64_t M, int64_t N, int64_t K, bool tb);

// C[M, N] = A[M, K] * op(B) with A row-major (row stride lda) and B stored K x N (row stride
// ldb) or, when tb, N x K. Requires 1 <= M <= kSmallGemmMaxRows; splits N over the backend's
// threads when the product is large enough.
void small_gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b,
                    int64_t ldb, bool tb, float* c, int64_t ldc);

}  // namespace cujax::cpu
