// The CPU backend's LAPACK-backed custom calls (JAX's lapack_*_ffi and, run on the host, its
// cusolver_*_ffi targets) and StableHLO's cholesky, checked against the identities that define
// each factorization: L L^H = A, P L U = A, Q R = A with Q^H Q = I, A V = V diag(w),
// U diag(S) V^H = A, A x = b; over f32, f64, complex64 and complex128 and a batch of two.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cujax/core/dtype.h"
#include "cujax/core/error.h"
#include "cujax/core/host_tensor.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/backend.h"
#include "host_matrix.h"

namespace cujax {
namespace {

using cd = std::complex<double>;

std::vector<HostTensor> run(const std::string& text, const std::vector<HostTensor>& inputs) {
  auto module = ir::parse_module(text);
  auto exe = runtime::get_backend("cpu").compile(*module);
  return exe->execute_on_host(inputs);
}

using testutil::adjoint;
using testutil::eye;
using testutil::Mat;
using testutil::matmul;
using testutil::max_diff;

// Matrix `b` of a [batch, rows, cols] tensor (or [rows, cols] for b = 0), or a [batch, n]
// tensor's row b as one column (vector = true).
Mat matrix(const HostTensor& t, int64_t b, bool vector = false) {
  const Shape& s = t.shape();
  const int64_t rows = vector ? s.back() : s[s.size() - 2];
  const int64_t cols = vector ? 1 : s.back();
  Mat m(rows, cols);
  visit_dtype_with_complex(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, std::complex<float>> ||
                  std::is_same_v<T, std::complex<double>>) {
      const T* p = t.data_as<T>() + b * rows * cols;
      for (int64_t i = 0; i < rows * cols; ++i) m.v[static_cast<size_t>(i)] = cd(p[i]);
    }
  });
  return m;
}

template <class T>
struct Traits;
template <>
struct Traits<float> {
  static constexpr DType dtype = DType::F32;
  static constexpr const char* mlir = "f32";
  static constexpr const char* real = "f32";
  static constexpr char prefix = 's';
  static constexpr double tol = 2e-4;
};
template <>
struct Traits<double> {
  static constexpr DType dtype = DType::F64;
  static constexpr const char* mlir = "f64";
  static constexpr const char* real = "f64";
  static constexpr char prefix = 'd';
  static constexpr double tol = 1e-10;
};
template <>
struct Traits<std::complex<float>> {
  static constexpr DType dtype = DType::C64;
  static constexpr const char* mlir = "complex<f32>";
  static constexpr const char* real = "f32";
  static constexpr char prefix = 'c';
  static constexpr double tol = 2e-4;
};
template <>
struct Traits<std::complex<double>> {
  static constexpr DType dtype = DType::C128;
  static constexpr const char* mlir = "complex<f64>";
  static constexpr const char* real = "f64";
  static constexpr char prefix = 'z';
  static constexpr double tol = 1e-10;
};

template <class T>
constexpr bool kComplex = Traits<T>::dtype == DType::C64 || Traits<T>::dtype == DType::C128;

// Uniform entries in [-1, 1) (both parts for complex types).
template <class T>
HostTensor random_tensor(const Shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  HostTensor t(Traits<T>::dtype, shape);
  for (int64_t i = 0; i < t.size(); ++i) {
    if constexpr (kComplex<T>) {
      const double re = u(rng), im = u(rng);
      t.data_as<T>()[i] = T(re, im);
    } else {
      t.data_as<T>()[i] = static_cast<T>(u(rng));
    }
  }
  return t;
}

// A batch of Hermitian positive definite matrices: B B^H + n I.
template <class T>
HostTensor hpd_tensor(int64_t batch, int64_t n, uint32_t seed) {
  HostTensor b = random_tensor<T>({batch, n, n}, seed);
  HostTensor a(Traits<T>::dtype, {batch, n, n});
  for (int64_t k = 0; k < batch; ++k) {
    Mat m = matmul(matrix(b, k), adjoint(matrix(b, k)));
    for (int64_t i = 0; i < n * n; ++i) {
      cd x = m.v[static_cast<size_t>(i)] + (i % (n + 1) == 0 ? cd(double(n)) : cd(0));
      if constexpr (kComplex<T>)
        a.data_as<T>()[k * n * n + i] = T(x);
      else
        a.data_as<T>()[k * n * n + i] = static_cast<T>(x.real());
    }
  }
  return a;
}

std::string tensor_type(const Shape& s, const std::string& elem) {
  std::string t = "tensor<";
  for (int64_t d : s) t += std::to_string(d) + "x";
  return t + elem + ">";
}

// "[dense<[1, 2, 0]> : tensor<3xindex>, ...]": column-major matrices for the rank-3 arrays
// (the tests' batches of matrices, as JAX lays them out), row-major for the rest (vectors of a
// batch, scalars of a batch).
std::string layouts(const std::vector<size_t>& ranks) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    const size_t r = ranks[i];
    std::string l;
    if (r >= 3) {
      l = std::to_string(r - 2) + ", " + std::to_string(r - 1);
      for (size_t d = r - 2; d-- > 0;) l += ", " + std::to_string(d);
    } else {
      for (size_t d = r; d-- > 0;) l += (l.empty() ? "" : ", ") + std::to_string(d);
    }
    out += (i ? ", " : "") + std::string("dense<") + (r >= 2 ? "[" + l + "]" : l) + "> : tensor<" +
           std::to_string(r) + "xindex>";
  }
  return out + "]";
}

// main(args) = custom_call @target(args) {config} returning all results.
std::string call_program(const std::string& target, const std::string& config,
                         const std::vector<std::pair<Shape, std::string>>& args,
                         const std::vector<std::pair<Shape, std::string>>& results) {
  std::string params, arg_names, arg_types, res_types, rets;
  std::vector<size_t> in_ranks, out_ranks;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string t = tensor_type(args[i].first, args[i].second);
    params += (i ? ", " : "") + std::string("%a") + std::to_string(i) + ": " + t;
    arg_names += (i ? ", " : "") + std::string("%a") + std::to_string(i);
    arg_types += (i ? ", " : "") + t;
    in_ranks.push_back(args[i].first.size());
  }
  for (size_t i = 0; i < results.size(); ++i) {
    res_types += (i ? ", " : "") + tensor_type(results[i].first, results[i].second);
    rets += (i ? ", " : "") + std::string("%r#") + std::to_string(i);
    out_ranks.push_back(results[i].first.size());
  }
  return "func.func @main(" + params + ") -> (" + res_types +
         ") {\n  %r:" + std::to_string(results.size()) + " = stablehlo.custom_call @" + target +
         "(" + arg_names + ") {mhlo.backend_config = {" + config +
         "}, operand_layouts = " + layouts(in_ranks) + ", result_layouts = " + layouts(out_ranks) +
         "} : (" + arg_types + ") -> (" + res_types + ")\n  return " + rets + " : " + res_types +
         "\n}\n";
}

std::string lapack_name(char prefix, const std::string& real, const std::string& complex) {
  const bool c = prefix == 'c' || prefix == 'z';
  return "lapack_" + std::string(1, prefix) + (c ? complex : real) + "_ffi";
}

template <class T>
class CpuLapack : public ::testing::Test {};
using Types = ::testing::Types<float, double, std::complex<float>, std::complex<double>>;
TYPED_TEST_SUITE(CpuLapack, Types);

constexpr int64_t kBatch = 2;

template <class T>
void check_cholesky(const std::string& target, const std::string& config) {
  const int64_t n = 5;
  const HostTensor a = hpd_tensor<T>(kBatch, n, 1);
  const std::string e = Traits<T>::mlir;
  const std::vector<HostTensor> out = run(
      call_program(target, config, {{{kBatch, n, n}, e}}, {{{kBatch, n, n}, e}, {{kBatch}, "i32"}}),
      {a});
  for (int64_t b = 0; b < kBatch; ++b) {
    EXPECT_EQ(out[1].data_as<int32_t>()[b], 0);
    Mat l = matrix(out[0], b);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j) l(i, j) = 0;  // the other triangle is unspecified
    EXPECT_LT(max_diff(matmul(l, adjoint(l)), matrix(a, b)), Traits<T>::tol * n * n) << target;
  }
}

TYPED_TEST(CpuLapack, PotrfGivesLTimesLAdjointEqualToA) {
  using T = TypeParam;
  check_cholesky<T>(lapack_name(Traits<T>::prefix, "potrf", "potrf"), "uplo = 76 : ui8");
  check_cholesky<T>("cusolver_potrf_ffi", "lower = true");
}

TYPED_TEST(CpuLapack, PotrfReportsAMatrixThatIsNotPositiveDefinite) {
  using T = TypeParam;
  const int64_t n = 3;
  HostTensor a = hpd_tensor<T>(kBatch, n, 2);
  a.data_as<T>()[n * n + 2 * n + 2] = T(-100);  // batch 1: a negative pivot at (2, 2)
  const std::string e = Traits<T>::mlir;
  const std::vector<HostTensor> out =
      run(call_program(lapack_name(Traits<T>::prefix, "potrf", "potrf"), "uplo = 76 : ui8",
                       {{{kBatch, n, n}, e}}, {{{kBatch, n, n}, e}, {{kBatch}, "i32"}}),
          {a});
  EXPECT_EQ(out[1].data_as<int32_t>()[0], 0);
  EXPECT_EQ(out[1].data_as<int32_t>()[1], 3);  // LAPACK: the order of the failing minor
}

TYPED_TEST(CpuLapack, GetrfGivesPLUEqualToA) {
  using T = TypeParam;
  const int64_t m = 4, n = 6, k = 4;
  const HostTensor a = random_tensor<T>({kBatch, m, n}, 3);
  const std::string e = Traits<T>::mlir;
  for (const std::string& target :
       {lapack_name(Traits<T>::prefix, "getrf", "getrf"), std::string("cusolver_getrf_ffi")}) {
    const std::vector<HostTensor> out =
        run(call_program(target, "", {{{kBatch, m, n}, e}},
                         {{{kBatch, m, n}, e}, {{kBatch, k}, "i32"}, {{kBatch}, "i32"}}),
            {a});
    for (int64_t b = 0; b < kBatch; ++b) {
      EXPECT_EQ(out[2].data_as<int32_t>()[b], 0);
      const Mat lu = matrix(out[0], b);
      Mat l(m, k), u(k, n);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          if (j < i && j < k) l(i, j) = lu(i, j);
          if (i == j && j < k) l(i, j) = 1;
          if (j >= i && i < k) u(i, j) = lu(i, j);
        }
      Mat pa = matrix(a, b);  // the pivots' row swaps applied to A, in order (1-based)
      for (int64_t i = 0; i < k; ++i) {
        const int64_t p = out[1].data_as<int32_t>()[b * k + i] - 1;
        ASSERT_GE(p, i);
        ASSERT_LT(p, m);
        for (int64_t j = 0; j < n; ++j) std::swap(pa(i, j), pa(p, j));
      }
      EXPECT_LT(max_diff(matmul(l, u), pa), Traits<T>::tol * n) << target;
    }
  }
}

TYPED_TEST(CpuLapack, GeqrfAndOrgqrGiveOrthonormalQTimesREqualToA) {
  using T = TypeParam;
  const int64_t m = 5, n = 3;
  const HostTensor a = random_tensor<T>({kBatch, m, n}, 4);
  const std::string e = Traits<T>::mlir;
  const bool c = kComplex<T>;
  for (const bool cuda : {false, true}) {
    const std::string geqrf =
        cuda ? "cusolver_geqrf_ffi" : lapack_name(Traits<T>::prefix, "geqrf", "geqrf");
    const std::string orgqr =
        cuda ? "cusolver_orgqr_ffi" : lapack_name(Traits<T>::prefix, "orgqr", "ungqr");
    const std::vector<HostTensor> qr =
        run(call_program(geqrf, "", {{{kBatch, m, n}, e}}, {{{kBatch, m, n}, e}, {{kBatch, n}, e}}),
            {a});
    const std::vector<HostTensor> q =
        run(call_program(orgqr, "", {{{kBatch, m, n}, e}, {{kBatch, n}, e}}, {{{kBatch, m, n}, e}}),
            {qr[0], qr[1]});
    for (int64_t b = 0; b < kBatch; ++b) {
      const Mat qb = matrix(q[0], b);
      Mat r = matrix(qr[0], b);
      Mat rr(n, n);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i; j < n; ++j) rr(i, j) = r(i, j);
      EXPECT_LT(max_diff(matmul(qb, rr), matrix(a, b)), Traits<T>::tol * m) << geqrf << c;
      EXPECT_LT(max_diff(matmul(adjoint(qb), qb), eye(n)), Traits<T>::tol * m) << orgqr;
    }
  }
}

TYPED_TEST(CpuLapack, SyevdGivesOrthonormalEigenvectors) {
  using T = TypeParam;
  const int64_t n = 6;
  const HostTensor a = hpd_tensor<T>(kBatch, n, 5);
  const std::string e = Traits<T>::mlir, r = Traits<T>::real;
  for (const bool cuda : {false, true}) {
    const std::string target =
        cuda ? "cusolver_syevd_ffi" : lapack_name(Traits<T>::prefix, "syevd", "heevd");
    const std::string config =
        cuda ? "algorithm = 0 : ui8, lower = true" : "mode = 86 : ui8, uplo = 76 : ui8";
    const std::vector<HostTensor> out =
        run(call_program(target, config, {{{kBatch, n, n}, e}},
                         {{{kBatch, n, n}, e}, {{kBatch, n}, r}, {{kBatch}, "i32"}}),
            {a});
    for (int64_t b = 0; b < kBatch; ++b) {
      EXPECT_EQ(out[2].data_as<int32_t>()[b], 0);
      const Mat v = matrix(out[0], b), w = matrix(out[1], b, true);
      Mat vw = v;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j) vw(i, j) *= w(j, 0);
      for (int64_t j = 1; j < n; ++j) EXPECT_LE(w(j - 1, 0).real(), w(j, 0).real());  // ascending
      EXPECT_LT(max_diff(matmul(matrix(a, b), v), vw), Traits<T>::tol * n * n) << target;
      EXPECT_LT(max_diff(matmul(adjoint(v), v), eye(n)), Traits<T>::tol * n) << target;
    }
  }
}

// U diag(S) V^H = A for a wide and a tall batch, through gesdd, cusolver's gesvd and gesvdj.
TYPED_TEST(CpuLapack, SvdReconstructsA) {
  using T = TypeParam;
  const std::string e = Traits<T>::mlir, r = Traits<T>::real;
  for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{{4, 3}, {3, 5}}) {
    const int64_t k = std::min(m, n);
    const HostTensor a = random_tensor<T>({kBatch, m, n}, 6);
    struct Case {
      std::string target, config;
      bool v_not_vh;
    };
    std::vector<Case> cases = {
        {lapack_name(Traits<T>::prefix, "gesdd", "gesdd"), "mode = 65 : ui8", false},
        {"cusolver_gesvdj_ffi", "compute_uv = true, full_matrices = true", true}};
    if (m >= n)
      cases.push_back({"cusolver_gesvd_ffi",
                       "compute_uv = true, full_matrices = true, transposed = false", false});
    for (const Case& c : cases) {
      const std::vector<HostTensor> out =
          run(call_program(c.target, c.config, {{{kBatch, m, n}, e}},
                           {{{kBatch, m, n}, e},
                            {{kBatch, k}, r},
                            {{kBatch, m, m}, e},
                            {{kBatch, n, n}, e},
                            {{kBatch}, "i32"}}),
              {a});
      for (int64_t b = 0; b < kBatch; ++b) {
        EXPECT_EQ(out[4].data_as<int32_t>()[b], 0);
        const Mat u = matrix(out[2], b), s = matrix(out[1], b, true);
        const Mat vh = c.v_not_vh ? adjoint(matrix(out[3], b)) : matrix(out[3], b);
        Mat us(m, n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < k; ++j) us(i, j) = u(i, j) * s(j, 0);
        EXPECT_LT(max_diff(matmul(us, vh), matrix(a, b)), Traits<T>::tol * m * n) << c.target;
        EXPECT_LT(max_diff(matmul(adjoint(u), u), eye(m)), Traits<T>::tol * m) << c.target;
        for (int64_t j = 1; j < k; ++j) EXPECT_GE(s(j - 1, 0).real(), s(j, 0).real());
      }
    }
  }
}

TYPED_TEST(CpuLapack, GeevGivesRightEigenvectors) {
  using T = TypeParam;
  const int64_t n = 4;
  const HostTensor a = random_tensor<T>({kBatch, n, n}, 7);
  const std::string e = Traits<T>::mlir;
  const std::string ce = kComplex<T> ? e : "complex<" + e + ">";
  std::vector<std::pair<Shape, std::string>> results = {{{kBatch, n}, e}};
  if (!kComplex<T>) results.push_back({{kBatch, n}, e});
  results.push_back({{kBatch, n, n}, ce});
  results.push_back({{kBatch, n, n}, ce});
  results.push_back({{kBatch}, "i32"});
  const std::vector<HostTensor> out =
      run(call_program(lapack_name(Traits<T>::prefix, "geev", "geev"),
                       "compute_left = 86 : ui8, compute_right = 86 : ui8", {{{kBatch, n, n}, e}},
                       results),
          {a});
  const size_t vr = kComplex<T> ? 2 : 3;
  for (int64_t b = 0; b < kBatch; ++b) {
    EXPECT_EQ(out[vr + 1].data_as<int32_t>()[b], 0);
    Mat w = matrix(out[0], b, true);
    if (!kComplex<T>) {
      const Mat wi = matrix(out[1], b, true);
      for (int64_t j = 0; j < n; ++j) w(j, 0) += cd(0, 1) * wi(j, 0);
    }
    const Mat v = matrix(out[vr], b), vl = matrix(out[vr - 1], b);
    Mat vw = v, wvl = adjoint(vl);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        vw(i, j) *= w(j, 0);
        wvl(j, i) *= w(j, 0);
      }
    EXPECT_LT(max_diff(matmul(matrix(a, b), v), vw), Traits<T>::tol * n * 10);
    EXPECT_LT(max_diff(matmul(adjoint(vl), matrix(a, b)), wvl), Traits<T>::tol * n * 10);
  }
}

TYPED_TEST(CpuLapack, TrsmSolvesTriangularSystems) {
  using T = TypeParam;
  const int64_t n = 4, nrhs = 3;
  HostTensor a = random_tensor<T>({kBatch, n, n}, 8);
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t i = 0; i < n; ++i) {
      a.data_as<T>()[b * n * n + i * n + i] += T(4);  // well conditioned
      for (int64_t j = i + 1; j < n; ++j) a.data_as<T>()[b * n * n + i * n + j] = T(0);
    }
  const HostTensor rhs = random_tensor<T>({kBatch, n, nrhs}, 9);
  const std::string e = Traits<T>::mlir;
  const std::string prog =
      call_program(lapack_name(Traits<T>::prefix, "trsm", "trsm"),
                   "diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8",
                   {{{kBatch, n, n}, e}, {{kBatch, n, nrhs}, e}}, {{{kBatch, n, nrhs}, e}});
  const std::vector<HostTensor> out = run(prog, {a, rhs});
  for (int64_t b = 0; b < kBatch; ++b)
    EXPECT_LT(max_diff(matmul(matrix(a, b), matrix(out[0], b)), matrix(rhs, b)),
              Traits<T>::tol * n);
}

TYPED_TEST(CpuLapack, StablehloCholeskyZeroesTheOtherTriangle) {
  using T = TypeParam;
  const int64_t n = 4;
  const HostTensor a = hpd_tensor<T>(kBatch, n, 10);
  const std::string t = tensor_type({kBatch, n, n}, Traits<T>::mlir);
  for (const bool lower : {true, false}) {
    const std::string prog =
        "func.func @main(%a: " + t + ") -> " + t +
        " {\n  %0 = stablehlo.cholesky %a, lower = " + (lower ? "true" : "false") + " : " + t +
        "\n  return %0 : " + t + "\n}\n";
    const std::vector<HostTensor> out = run(prog, {a});
    for (int64_t b = 0; b < kBatch; ++b) {
      const Mat f = matrix(out[0], b);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < n; ++j)
          if (lower ? j > i : j < i) {
            EXPECT_EQ(f(i, j), cd(0));
          }
      const Mat prod = lower ? matmul(f, adjoint(f)) : matmul(adjoint(f), f);
      EXPECT_LT(max_diff(prod, matrix(a, b)), Traits<T>::tol * n * n);
    }
  }
}

// XLA's CPU result for a matrix that is not positive definite: NaNs, for that batch element.
TEST(CpuLapackCholesky, NotPositiveDefiniteGivesNaNs) {
  HostTensor a = HostTensor::from_vector<double>({4, 2, 2, 3, /*second*/ 1, 2, 2, 1}, {2, 2, 2});
  const std::string t = "tensor<2x2x2xf64>";
  const auto out = run("func.func @main(%a: " + t + ") -> " + t +
                           " {\n  %0 = stablehlo.cholesky %a, lower = true : " + t +
                           "\n  return %0 : " + t + "\n}\n",
                       {a});
  const double* l = out[0].data_as<double>();
  EXPECT_DOUBLE_EQ(l[0], 2.0);
  EXPECT_DOUBLE_EQ(l[2], 1.0);
  EXPECT_DOUBLE_EQ(l[3], std::sqrt(2.0));
  for (int i = 4; i < 8; ++i) EXPECT_TRUE(std::isnan(l[i])) << i;
}

TEST(CpuLapackErrors, NonSquareCholeskyNamesTheShape) {
  const std::string prog = call_program("lapack_spotrf_ffi", "uplo = 76 : ui8", {{{3, 4}, "f32"}},
                                        {{{3, 4}, "f32"}, {{}, "i32"}});
  try {
    run(prog, {HostTensor(DType::F32, {3, 4})});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor<3x4xf32>"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not square"), std::string::npos) << e.what();
  }
}

TEST(CpuLapackErrors, PrefixMustMatchTheOperandType) {
  const std::string prog = call_program("lapack_dpotrf_ffi", "uplo = 76 : ui8", {{{3, 3}, "f32"}},
                                        {{{3, 3}, "f32"}, {{}, "i32"}});
  EXPECT_THROW(run(prog, {HostTensor(DType::F32, {3, 3})}), Error);
}

TEST(CpuCudaHelpers, LuPivotsToPermutationAppliesTheSwapsInOrder) {
  // pivots [2, 2, 3] (0-based) on iota(5): swap(0,2) -> 2 1 0 3 4, swap(1,2) -> 2 0 1 3 4,
  // swap(2,3) -> 2 0 3 1 4.
  const std::string prog =
      "func.func @main(%p: tensor<1x3xi32>) -> tensor<1x5xi32> {\n"
      "  %0 = stablehlo.custom_call @cu_lu_pivots_to_permutation(%p) {mhlo.backend_config = {}} "
      ": (tensor<1x3xi32>) -> tensor<1x5xi32>\n  return %0 : tensor<1x5xi32>\n}\n";
  const std::vector<HostTensor> out =
      run(prog, {HostTensor::from_vector<int32_t>({2, 2, 3}, {1, 3})});
  EXPECT_EQ(out[0].to_vector<int32_t>(), (std::vector<int32_t>{2, 0, 3, 1, 4}));
}

}  // namespace
}  // namespace cujax
