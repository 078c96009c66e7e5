// The generated fusion kernels on a GPU against the CPU backend on random inputs (label `gpu`,
// compiled into cuda_test). Without a usable device each test still compiles its program for
// cuda (planning and generating kernels), then SKIPs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backends/common/elementwise.h"
#include "backends/cuda/codegen/emitter.h"
#include "backends/cuda/codegen/kernel_cache.h"
#include "backends/cuda/codegen/nvrtc.h"
#include "backends/cuda/program.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/backend.h"
#include "fusion_programs.h"
#include "host_compare.h"
#include "lowered_steps.h"
#include "test_models.h"

namespace cujax {
namespace {

// Integers and booleans exactly; floats within a tolerance that covers reordered sums and the
// GPU's libm (a few ULPs), NaN matching NaN.
void expect_near(const HostTensor& gpu, const HostTensor& cpu, double tol,
                 const std::string& what) {
  ASSERT_EQ(gpu.type_string(), cpu.type_string()) << what;
  int bad = 0;
  for (int64_t i = 0; i < cpu.size() && bad < 5; ++i) {
    const double a = as_double(gpu, i), b = as_double(cpu, i);
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;
    if (is_float(cpu.dtype()) && std::fabs(a - b) <= tol * (1 + std::fabs(b))) continue;
    ADD_FAILURE() << what << ": element " << i << " is " << a << " on the GPU, " << b
                  << " on the CPU";
    ++bad;
  }
}

double tolerance(DType t) {
  return t == DType::F64 ? 1e-10 : t == DType::F32 ? 1e-4 : t == DType::F16 ? 1e-2 : 4e-2;
}

// On a GPU machine without NVRTC the fused kernels are off and nothing here would test them.
void require_nvrtc() {
  const std::string why = cuda::codegen::nvrtc_unavailable_reason();
  if (!why.empty())
    FAIL() << "fused kernels cannot be tested: " << why
           << " (pip install nvidia-cuda-nvrtc, or use a CUDA toolkit)";
}

void check_program(const ir::Module& module, const std::string& what, double scale = 1) {
  const ir::Function& fn = *module.lookup("main");
  const auto program = cuda::compile_program(module, fn, nullptr);
  EXPECT_FALSE(cuda::fusion_kernels(*program).empty()) << what;
  const std::string why = runtime::unavailable_reason("cuda");
  if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
  require_nvrtc();
  if (::testing::Test::HasFatalFailure()) return;
  const auto args = testutil::random_arguments(fn, 11);
  const auto cpu = runtime::get_backend("cpu").compile(module)->execute_on_host(args);
  const auto gpu = runtime::get_backend("cuda").compile(module)->execute_on_host(args);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i)
    expect_near(gpu[i], cpu[i], scale * tolerance(cpu[i].dtype()),
                what + " result " + std::to_string(i));
}

TEST(CudaFusion, EveryFusionKindMatchesTheCpuBackend) {
  const auto programs = testutil::fusion_programs();
  for (size_t i = 0; i < programs.size(); ++i)
    check_program(*ir::parse_module(programs[i]), "program " + std::to_string(i));
}

TEST(CudaFusion, TransformerStepsMatchTheCpuBackend) {
  const auto steps = testutil::lower_steps(testutil::small_transformer(32, 8, 16), 2, 8);
  for (size_t i = 0; i < steps.modules.size(); ++i)
    check_program(*steps.modules[i], steps.names[i] + " step", 10);
}

// The cuda backend compiles a program's kernels once: a second compile after the in-memory
// cache is gone (a new process) reads every cubin from disk.
TEST(CudaFusion, ASecondCompileReadsTheDiskCache) {
  const auto m = ir::parse_module(testutil::kSoftmaxAndNorm);
  const std::string why = runtime::unavailable_reason("cuda");
  if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
  require_nvrtc();
  if (::testing::Test::HasFatalFailure()) return;
  cuda::codegen::KernelCache& cache = cuda::codegen::KernelCache::process();
  const std::string saved = cache.directory();
  std::string dir = (std::filesystem::temp_directory_path() / "cujax-gpu-kernels-XXXXXX").string();
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  cache.set_directory(dir);
  cache.clear_memory();
  const int64_t before = cuda::codegen::nvrtc_compile_count();
  runtime::get_backend("cuda").compile(*m);
  const int64_t compiled = cuda::codegen::nvrtc_compile_count() - before;
  EXPECT_GT(compiled, 0);
  cache.clear_memory();
  runtime::get_backend("cuda").compile(*m);
  EXPECT_EQ(cuda::codegen::nvrtc_compile_count() - before, compiled);
  cache.set_directory(saved);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cujax
