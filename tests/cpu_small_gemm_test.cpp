// CPU backend: the few-row f32 products (src/backends/cpu/small_gemm.cpp) against a
// double-precision loop, on shapes that are not multiples of any vector width, directly and
// through dot_general.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/small_gemm.h"
#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

std::vector<float> uniform_values(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// C[m, n] = sum_k A[m, k] * B[k, n] (B[n, k] when tb) in double.
std::vector<double> reference(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, bool ta,
                              const float* b, int64_t ldb, bool tb) {
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += static_cast<double>(ta ? a[k * lda + m] : a[m * lda + k]) *
             (tb ? b[n * ldb + k] : b[k * ldb + n]);
      c[m * N + n] = s;
    }
  return c;
}

// Operands in [-1, 1]: each of the K rounded products and sums errs by at most K ulp of 1.
double tolerance(int64_t K) {
  return 2.0 * static_cast<double>(K) * 1.2e-7 + 1e-7;
}

void check_direct(int64_t M, int64_t N, int64_t K, bool tb, std::mt19937& rng, bool ta = false) {
  SCOPED_TRACE("M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               (ta ? " A transposed" : "") + (tb ? " B transposed" : ""));
  // Padded strides: the kernel must read and write only the M x K, K x N and M x N parts.
  const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
  const auto a = uniform_values((ta ? K : M) * lda, rng);
  const auto b = uniform_values((tb ? N : K) * ldb, rng);
  std::vector<float> c(static_cast<size_t>(M * ldc), -7.0f);
  cpu::small_gemm_f32(M, N, K, a.data(), lda, ta, b.data(), ldb, tb, c.data(), ldc);
  const auto want = reference(M, N, K, a.data(), lda, ta, b.data(), ldb, tb);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n)
      ASSERT_NEAR(c[m * ldc + n], want[m * N + n], tolerance(K)) << "at " << m << ", " << n;
    for (int64_t n = N; n < ldc; ++n) ASSERT_EQ(c[m * ldc + n], -7.0f) << "padding written";
  }
}

TEST(CpuSmallGemm, OddShapesEveryRowCountBothLayouts) {
  std::mt19937 rng(41);
  const int64_t shapes[][2] = {{1, 1}, {7, 13}, {17, 33}, {131, 70}, {45, 257}, {5, 3}};
  for (bool tb : {false, true})
    for (int64_t M = 1; M <= cpu::kSmallGemmMaxRows; ++M)
      for (const auto& s : shapes) check_direct(M, s[1], s[0], tb, rng);
}

TEST(CpuSmallGemm, LargeProductsSplitOverThreads) {
  std::mt19937 rng(7);
  for (bool tb : {false, true})
    for (int64_t M : {1, 5, 8}) check_direct(M, 1001, 301, tb, rng);
}

// Many rows go in tiles of up to 64 rows and 64 columns, eight rows at a time; the dot-product
// form is transposed first, and so is a transposed A. Heights, widths and depths off every tile
// and vector size.
TEST(CpuSmallGemm, ManyRowsInTilesEveryLayout) {
  std::mt19937 rng(5);
  const int64_t shapes[][3] = {{17, 5, 9}, {150, 130, 70}, {333, 67, 129}, {2048, 64, 32}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const auto& s : shapes) check_direct(s[0], s[1], s[2], tb, rng, ta);
  // Few rows of a transposed A, against both layouts of B.
  for (bool tb : {false, true})
    for (int64_t M = 1; M <= cpu::kSmallGemmMaxRows; M += 5)
      check_direct(M, 45, 257, tb, rng, true);
}

// A slot's result must not depend on how many slots share the step: every row is summed in
// the same order whatever M is, so batched decoding gives each sequence the bits it gets alone.
TEST(CpuSmallGemm, EachRowIndependentOfRowCount) {
  std::mt19937 rng(11);
  const int64_t N = 300, K = 203;
  // Past kSmallGemmMaxRows the dot-product form is transposed first, so only the streaming form
  // is compared with a single row there.
  const std::pair<int64_t, bool> cases[] = {
      {cpu::kSmallGemmMaxRows, false}, {cpu::kSmallGemmMaxRows, true}, {77, false}};
  for (const auto& [M, tb] : cases) {
    const auto a = uniform_values(M * K, rng);
    const auto b = uniform_values(N * K, rng);
    const int64_t ldb = tb ? K : N;
    std::vector<float> all(static_cast<size_t>(M * N)), one(static_cast<size_t>(N));
    cpu::small_gemm_f32(M, N, K, a.data(), K, false, b.data(), ldb, tb, all.data(), N);
    for (int64_t m = 0; m < M; ++m) {
      cpu::small_gemm_f32(1, N, K, a.data() + m * K, K, false, b.data(), ldb, tb, one.data(), N);
      for (int64_t n = 0; n < N; ++n)
        ASSERT_EQ(all[m * N + n], one[n]) << "row " << m << ", column " << n << (tb ? " (tb)" : "");
    }
  }
}

// Runs stablehlo.dot_general with the given contracting dimensions on the cpu backend.
HostTensor run_dot(const HostTensor& l, const HostTensor& r, int64_t rc, const Shape& out) {
  ir::Module m;
  auto& f = m.add_function("main");
  ir::Value* x = f.entry().add_argument(ir::Type::tensor(l.shape(), l.dtype()));
  ir::Value* w = f.entry().add_argument(ir::Type::tensor(r.shape(), r.dtype()));
  const ir::Type result = ir::Type::tensor(out, DType::F32);
  auto op = ir::make_op("stablehlo.dot_general", {x, w}, {result});
  op->set_attr(
      "dot_dimension_numbers",
      ir::Attribute::struct_attr("stablehlo.dot",
                                 {{"lhs_contracting_dimensions", ir::Attribute::int_list({1})},
                                  {"rhs_contracting_dimensions", ir::Attribute::int_list({rc})}}));
  ir::Value* y = f.entry().push_back(std::move(op))->result(0);
  f.entry().push_back(ir::make_op("func.return", {y}, {}));
  f.result_types = {result};
  const std::vector<HostTensor> inputs{l, r};
  return runtime::get_backend("cpu").compile(m)->execute_on_host(inputs).at(0);
}

// A decode step's products: x[M, K] @ W[K, N] and x[M, K] @ E[N, K]^T, at sizes where
// dot_general takes the few-row path.
TEST(CpuSmallGemm, DotGeneralDecodeProducts) {
  std::mt19937 rng(3);
  struct Case {
    int64_t M, N, K;
    bool tb;
  };
  for (const Case& c : {Case{4, 900, 601, false}, Case{3, 1001, 1100, true}}) {
    ASSERT_TRUE(cpu::small_gemm_f32_pays(c.M, c.N, c.K, false, c.tb))
        << "the case must use the path";
    const auto a = uniform_values(c.M * c.K, rng);
    const auto b = uniform_values(c.N * c.K, rng);
    const auto l = HostTensor::from_vector<float>(a, {c.M, c.K});
    const auto r = HostTensor::from_vector<float>(b, c.tb ? Shape{c.N, c.K} : Shape{c.K, c.N});
    const auto got = run_dot(l, r, c.tb ? 1 : 0, {c.M, c.N}).to_vector<float>();
    const auto want =
        reference(c.M, c.N, c.K, a.data(), c.K, false, b.data(), c.tb ? c.K : c.N, c.tb);
    for (int64_t i = 0; i < c.M * c.N; ++i)
      ASSERT_NEAR(got[i], want[i], tolerance(c.K)) << "element " << i << (c.tb ? " (E^T)" : "");
  }
}

}  // namespace
}  // namespace cujax
