// The cuda backend's linear algebra without a GPU (label `cuda-nogpu`; CUDA builds only): the
// run-time loader finds cuSOLVER and cuSPARSE in the toolkit and resolves every entry point it
// uses (dlopen/dlsym, no device), and JAX's cuda exports and cujax's cuda-lowered programs
// compile for cuda with each linear-algebra call on the device, where the host path stays for
// the calls the device does not cover (LAPACK's targets).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/cusolver.h"
#include "backends/cuda/linalg_calls.h"
#include "backends/cuda/program.h"
#include "cujax/ir/parser.h"
#include "cujax/jit.h"
#include "cujax/linalg.h"
#include "cujax/linalg_platform.h"
#include "cujax/numpy.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
namespace ll = cujax::lax::linalg;

std::string shared_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  return env && *env ? env : CUJAX_DEFAULT_SHARED_DIR;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The ops of `text` that would run on the host when compiled for cuda (no device needed).
std::vector<cuda::HostFallbackOp> fallbacks_of(const std::string& text) {
  const auto module = ir::parse_module(text);
  runtime::CompileOptions options;
  options.host_fallback = runtime::HostFallback::Allow;
  const auto program =
      cuda::compile_program(*module, *module->lookup("main"), nullptr, nullptr, options);
  return cuda::host_fallbacks(*program);
}

std::string on_host(const std::vector<cuda::HostFallbackOp>& f, const std::string& op) {
  std::string out;
  for (const auto& x : f)
    if (x.op == op) out += x.where + "; ";
  return out;
}

TEST(CudaLinalgNoGpu, LoaderResolvesEveryEntryPoint) {
  const cuda::SolverApi* solver = nullptr;
  const cuda::SparseApi* sparse = nullptr;
  ASSERT_NO_THROW(solver = &cuda::solver_api());
  ASSERT_NO_THROW(sparse = &cuda::sparse_api());
  EXPECT_NE(solver->path.find("libcusolver.so"), std::string::npos) << solver->path;
  EXPECT_NE(sparse->path.find("libcusparse.so"), std::string::npos) << sparse->path;
  // check_resolved() would have thrown for a missing one; spot-check each element type.
  EXPECT_NE(solver->s.potrf, nullptr);
  EXPECT_NE(solver->d.gesvdj, nullptr);
  EXPECT_NE(solver->c.syevd, nullptr);  // cheevd
  EXPECT_NE(solver->z.sytrd, nullptr);  // zhetrd
  EXPECT_NE(solver->z.orgqr, nullptr);  // zungqr
  EXPECT_NE(sparse->c.solve, nullptr);
  EXPECT_NE(solver->create_gesvdj_info, nullptr);
}

TEST(CudaLinalgNoGpu, JaxCudaExportsRunTheirCallsOnTheDevice) {
  const fs::path cases = fs::path(shared_dir()) / "interop/jax-backcompat/cases";
  if (!fs::is_directory(cases)) GTEST_SKIP() << cases << " not found (set CUJAX_SHARED_DIR)";
  int compiled = 0;
  for (const auto& e : fs::directory_iterator(cases)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("cuda_", 0) != 0 || !fs::exists(e.path() / "module.mlir")) continue;
    SCOPED_TRACE(name);
    std::vector<cuda::HostFallbackOp> f;
    ASSERT_NO_THROW(f = fallbacks_of(read_file(e.path() / "module.mlir")));
    EXPECT_EQ(on_host(f, "stablehlo.custom_call"), "");
    ++compiled;
  }
  EXPECT_EQ(compiled, 17) << "the cuda_* cases of " << cases;
}

TEST(CudaLinalgNoGpu, CudaLoweredProgramsRunTheirCallsOnTheDevice) {
  ll::LoweringPlatform cuda("cuda");
  for (DType t : {DType::F32, DType::C128}) {
    SCOPED_TRACE(numpy_name(t));
    const ShapeDtype sq{{2, 4, 4}, t}, wide{{2, 3, 5}, t}, big{{1030, 3}, t};
    const auto check = [](const std::string& what, const std::string& text) {
      std::vector<cuda::HostFallbackOp> f;
      ASSERT_NO_THROW(f = fallbacks_of(text)) << what;
      EXPECT_EQ(on_host(f, "stablehlo.custom_call"), "") << what << "\n" << text;
      EXPECT_NE(text.find("stablehlo.custom_call @cu"), std::string::npos) << what;
    };
    check("cholesky", jit([](const Array& x) { return ll::cholesky(x); }).lower(sq).as_text());
    check("lu", jit([](const Array& x) { return std::get<2>(ll::lu(x)); }).lower(wide).as_text());
    check("qr", jit([](const Array& x) { return ll::qr(x, false).first; }).lower(wide).as_text());
    check("eigh", jit([](const Array& x) { return ll::eigh(x).first; }).lower(sq).as_text());
    check("svd", jit([](const Array& x) { return ll::svd(x).vh; }).lower(wide).as_text());
    check("svd gesvd",
          jit([](const Array& x) { return ll::svd(x, false).u; }).lower(big).as_text());
    check("tridiagonal",
          jit([](const Array& x) { return ll::tridiagonal(x).e; }).lower(sq).as_text());
    const ShapeDtype diag{{2, 4}, t}, rhs{{2, 4, 2}, t};
    check("tridiagonal_solve",
          jit([](const Array& dl, const Array& d, const Array& du, const Array& b) {
            return ll::tridiagonal_solve(dl, d, du, b);
          })
              .lower(diag, diag, diag, rhs)
              .as_text());
  }
}

TEST(CudaLinalgNoGpu, RealTriangularSolvesRunOnTheDevice) {
  for (const char* platform : {"cpu", "cuda"}) {
    ll::LoweringPlatform scope(platform);
    for (bool left : {true, false}) {
      const std::string text =
          jit([left](const Array& a, const Array& b) {
            return ll::triangular_solve(a, b, left, true, true);
          })
              .lower(ShapeDtype{{2, 4, 4}, DType::F64}, ShapeDtype{{2, 4, 4}, DType::F64})
              .as_text();
      EXPECT_NE(text.find("@lapack_dtrsm_ffi"), std::string::npos) << text;
      EXPECT_EQ(on_host(fallbacks_of(text), "stablehlo.custom_call"), "") << text;
    }
  }
}

TEST(CudaLinalgNoGpu, StablehloCholeskyRunsOnTheDevice) {
  for (const char* type : {"f32", "f64", "complex<f32>", "complex<f64>"}) {
    const std::string t = std::string("tensor<3x4x4x") + type + ">";
    const std::string text = "func.func @main(%a: " + t + ") -> " + t +
                             " {\n  %0 = stablehlo.cholesky %a, lower = true : " + t +
                             "\n  return %0 : " + t + "\n}\n";
    std::vector<cuda::HostFallbackOp> f;
    ASSERT_NO_THROW(f = fallbacks_of(text)) << text;
    EXPECT_EQ(on_host(f, "stablehlo.cholesky"), "") << text;
  }
}

TEST(CudaLinalgNoGpu, LapackTargetsTakeTheHostPath) {
  ll::LoweringPlatform cpu("cpu");
  const std::string text = jit([](const Array& x) { return ll::cholesky(x); })
                               .lower(ShapeDtype{{4, 4}, DType::F32})
                               .as_text();
  EXPECT_NE(on_host(fallbacks_of(text), "stablehlo.custom_call"), "") << text;
  EXPECT_EQ(cuda::device_linalg_targets().size(), 14u);
}

}  // namespace
}  // namespace cujax
