// cuSOLVER and cuSPARSE on a GPU against the cpu backend (label `gpu`, compiled into cuda_test):
// each cuda-lowered lax.linalg function (JAX's cusolver_*_ffi, cusparse_gtsv2_ffi and
// cu_lu_pivots_to_permutation targets), stablehlo.cholesky and JAX's cu_threefry2x32_ffi export,
// over f32, f64, complex64 and complex128 with a batch. Results that are unique only up to
// phases (eigenvectors, singular vectors, Householder signs) are compared through what is unique:
// reconstructions, values, magnitudes. Without a usable device each test still compiles its
// program for cuda, then SKIPs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "backends/cuda/program.h"
#include "cujax/ir/parser.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/linalg.h"
#include "cujax/linalg_platform.h"
#include "cujax/numpy.h"
#include "cujax/runtime/backend.h"
#include "host_compare.h"
#include "lowered_steps.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
namespace ll = cujax::lax::linalg;

// Compiles `module` for cuda with no host path allowed, then (on a GPU) runs it on both
// backends with the same random arguments.
void check_linalg_program(const ir::Module& module, const std::string& what, double rtol) {
  const ir::Function& fn = *module.lookup("main");
  runtime::CompileOptions strict;
  strict.host_fallback = runtime::HostFallback::Error;
  ASSERT_NO_THROW(cuda::compile_program(module, fn, nullptr, nullptr, strict)) << what;
  const std::string why = runtime::unavailable_reason("cuda");
  if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
  const auto args = testutil::random_arguments(fn, 7);
  const auto cpu = runtime::get_backend("cpu").compile(module)->execute_on_host(args);
  const auto gpu = runtime::get_backend("cuda").compile(module)->execute_on_host(args);
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i)
    expect_same(gpu[i], cpu[i], rtol, rtol, what + " result " + std::to_string(i));
}

// Real parts then imaginary parts (complex values compare as floats).
Array realify(const Array& x) {
  if (!is_complex(x.dtype())) return x;
  return jnp::concatenate({jnp::real(x), jnp::imag(x)}, -1);
}
Array adj(const Array& x) {
  return jnp::conj(jnp::swapaxes(x, -1, -2));
}
// A matrix of type t from real a: a itself, or a + i sin(3 a).
Array typed(const Array& a, DType t) {
  if (!is_complex(t)) return a;
  return lax::complex(a, jnp::sin(jnp::multiply(a, 3.0)));
}
Array hpd(const Array& x) {
  const int64_t n = x.shape().back();
  return jnp::add(jnp::matmul(x, adj(x)),
                  jnp::astype(jnp::multiply(jnp::eye(n), double(n)), x.dtype()));
}

using Fn = std::function<std::vector<Array>(const Array&)>;

void check_each_type(const std::string& what, const Shape& shape, const Fn& f) {
  for (DType t : {DType::F32, DType::F64, DType::C64, DType::C128}) {
    const DType real = complex_component(t);
    std::string text;
    {
      ll::LoweringPlatform cuda("cuda");
      text = jit([&](const Array& a) {
               std::vector<Array> out;
               for (const Array& r : f(typed(a, t))) out.push_back(realify(r));
               return out;
             })
                 .lower(ShapeDtype{shape, real})
                 .as_text();
    }
    check_linalg_program(*ir::parse_module(text), what + " " + std::string(numpy_name(t)),
                         real == DType::F32 ? 2e-3 : 1e-9);
  }
}

TEST(CudaLinalg, CholeskyMatchesTheCpuBackend) {
  check_each_type("cholesky", {2, 5, 5},
                  [](const Array& x) { return std::vector<Array>{ll::cholesky(hpd(x))}; });
}

TEST(CudaLinalg, LuMatchesTheCpuBackend) {
  for (const Shape& s : {Shape{2, 5, 5}, Shape{2, 3, 6}, Shape{2, 6, 3}})
    check_each_type("lu", s, [](const Array& x) {
      auto [lu, pivots, perm] = ll::lu(x);
      return std::vector<Array>{lu, jnp::astype(pivots, DType::F32), jnp::astype(perm, DType::F32)};
    });
}

TEST(CudaLinalg, QrMatchesTheCpuBackend) {
  for (const Shape& s : {Shape{2, 5, 5}, Shape{2, 3, 6}, Shape{2, 6, 3}})
    for (bool full : {true, false})
      check_each_type("qr", s, [full](const Array& x) {
        auto [q, r] = ll::qr(x, full);
        return std::vector<Array>{jnp::matmul(q, r), jnp::abs(r), jnp::matmul(adj(q), q)};
      });
}

TEST(CudaLinalg, EighMatchesTheCpuBackend) {
  for (bool lower : {true, false})
    check_each_type("eigh", {2, 6, 6}, [lower](const Array& x) {
      auto [v, w] = ll::eigh(hpd(x), lower, false);
      const Array vw = jnp::multiply(v, jnp::astype(jnp::expand_dims(w, -2), v.dtype()));
      return std::vector<Array>{w, jnp::matmul(vw, adj(v))};
    });
}

TEST(CudaLinalg, SvdMatchesTheCpuBackend) {
  // gesvdj up to 1024 x 1024, gesvd beyond (the 1100 x 3 matrices).
  for (const Shape& s : {Shape{2, 5, 5}, Shape{2, 3, 6}, Shape{2, 6, 3}, Shape{1100, 3}})
    for (bool full : {true, false})
      check_each_type("svd", s, [full](const Array& x) {
        const ll::SvdResult r = ll::svd(x, full);
        const int64_t k = r.s.shape().back();
        const Array u = jnp::take(r.u, jnp::arange(k), -1);
        const Array vh = jnp::take(r.vh, jnp::arange(k), -2);
        const Array us = jnp::multiply(u, jnp::astype(jnp::expand_dims(r.s, -2), u.dtype()));
        return std::vector<Array>{r.s, jnp::matmul(us, vh), ll::svd(x, false, false).s};
      });
}

TEST(CudaLinalg, TridiagonalMatchesTheCpuBackend) {
  check_each_type("tridiagonal", {2, 6, 6}, [](const Array& x) {
    const ll::TridiagonalResult r = ll::tridiagonal(hpd(x));
    return std::vector<Array>{r.d, jnp::abs(r.e)};
  });
}

TEST(CudaLinalg, TridiagonalSolveMatchesTheCpuBackend) {
  check_each_type("tridiagonal_solve", {2, 6, 4}, [](const Array& x) {
    const Array dl = jnp::take(x, jnp::array(std::vector<int32_t>{0}), -1);
    const Array du = jnp::take(x, jnp::array(std::vector<int32_t>{1}), -1);
    const Array d = jnp::add(jnp::take(x, jnp::array(std::vector<int32_t>{2}), -1),
                             jnp::astype(jnp::full({2, 6, 1}, 5.0), x.dtype()));
    const auto sq = [](const Array& v) { return jnp::squeeze(v, -1); };
    return std::vector<Array>{ll::tridiagonal_solve(sq(dl), sq(d), sq(du), x)};
  });
}

TEST(CudaLinalg, RealTriangularSolveMatchesTheCpuBackend) {
  for (DType t : {DType::F32, DType::F64})
    for (bool left : {true, false})
      for (bool lower : {true, false})
        for (bool transpose : {true, false}) {
          std::string text;
          {
            ll::LoweringPlatform cuda("cuda");
            text = jit([&](const Array& a, const Array& b) {
                     const Array well =
                         jnp::add(a, jnp::astype(jnp::multiply(jnp::eye(5), 8.0), t));
                     return ll::triangular_solve(well, b, left, lower, transpose);
                   })
                       .lower(ShapeDtype{{2, 5, 5}, t}, ShapeDtype{{2, 5, 5}, t})
                       .as_text();
          }
          check_linalg_program(*ir::parse_module(text), "lapack trsm",
                               t == DType::F32 ? 2e-4 : 1e-10);
        }
}

TEST(CudaLinalg, StablehloCholeskyMatchesTheCpuBackend) {
  for (const char* type : {"f32", "f64"}) {
    const std::string t = std::string("tensor<3x5x5x") + type + ">";
    // a a^T + 5 I: positive definite and well conditioned.
    const std::string i = std::string("tensor<3x5x5xi32>"), b = "tensor<3x5x5xi1>";
    const std::string text =
        "func.func @main(%a: " + t + ") -> " + t + " {\n" +
        "  %t = stablehlo.transpose %a, dims = [0, 2, 1] : (" + t + ") -> " + t + "\n" +
        "  %p = stablehlo.dot_general %a, %t, batching_dims = [0] x [0], contracting_dims = [2] x "
        "[1] : (" +
        t + ", " + t + ") -> " + t + "\n" + "  %r = stablehlo.iota dim = 1 : " + i +
        "\n  %c = stablehlo.iota dim = 2 : " + i + "\n" +
        "  %d = stablehlo.compare EQ, %r, %c, SIGNED : (" + i + ", " + i + ") -> " + b + "\n" +
        "  %five = stablehlo.constant dense<5.0> : " + t + "\n" +
        "  %zero = stablehlo.constant dense<0.0> : " + t + "\n" +
        "  %e = stablehlo.select %d, %five, %zero : " + b + ", " + t + "\n" +
        "  %s = stablehlo.add %p, %e : " + t + "\n" +
        "  %0 = stablehlo.cholesky %s, lower = true : " + t + "\n" +
        "  %1 = stablehlo.cholesky %s, lower = false : " + t + "\n" +
        "  %2 = stablehlo.add %0, %1 : " + t + "\n  return %2 : " + t + "\n}\n";
    check_linalg_program(*ir::parse_module(text), std::string("stablehlo.cholesky ") + type,
                         type[1] == '3' ? 2e-3 : 1e-9);
  }
}

TEST(CudaLinalg, JaxThreefryExportMatchesTheCpuBackend) {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const std::filesystem::path p =
      std::filesystem::path(env && *env ? env : CUJAX_DEFAULT_SHARED_DIR) /
      "interop/jax-backcompat/cases/cuda_threefry2x32__data_2024_07_30__default/module.mlir";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << p << " not found";
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  check_linalg_program(*ir::parse_module(ss.str()), "cu_threefry2x32_ffi", 0);
}

}  // namespace
}  // namespace cujax
