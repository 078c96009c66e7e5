// Cold and warm compile times of a model's training-step kernels (docs/performance.md):
//   codegen_compile_time [--config tiny|gpt2] [--batch B] [--seq T] [--arch sm_90]
// Lowers the step, plans its fusions, generates the kernels, then compiles them through an empty
// kernel cache (cold: NVRTC, one kernel at a time and then all at once) and again after the
// in-memory cache is cleared (warm: a new process reads the disk cache).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "backends/cuda/codegen/fused.h"
#include "backends/cuda/codegen/kernel_cache.h"
#include "backends/cuda/codegen/nvrtc.h"
#include "backends/cuda/program.h"
#include "compiler/fusion.h"
#include "cujax/ir/parser.h"
#include "cujax/lax.h"
#include "cujax/models/lm.h"
#include "cujax/nnx.h"
#include "cujax/random.h"

using namespace cujax;
namespace cg = cuda::codegen;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string config = "tiny", arch = "sm_90";
  int64_t batch = 8, seq = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--config")
      config = argv[i + 1];
    else if (a == "--batch")
      batch = std::atoll(argv[i + 1]);
    else if (a == "--seq")
      seq = std::atoll(argv[i + 1]);
    else if (a == "--arch")
      arch = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--config tiny|gpt2] [--batch B] [--seq T] [--arch sm_90]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    const models::TransformerConfig c = models::config_by_name(config);
    if (seq == 0) seq = c.max_len;
    auto t0 = std::chrono::steady_clock::now();
    nnx::Rngs rngs(0);
    models::TransformerLM model(c, rngs);
    auto tx = models::make_optimizer(models::OptimizerOptions{});
    State params = nnx::state(model, nnx::VariableKind::Param);
    State opt_state = tx.init(params);
    Array window = random::randint(random::PRNGKey(1), {batch, seq + 1}, 0, c.vocab_size);
    data::Batch b{lax::slice_in_dim(window, 0, seq, 1, 1),
                  lax::slice_in_dim(window, 1, seq + 1, 1, 1)};
    auto step = models::make_train_step(model, tx);
    const auto module = ir::parse_module(step.lower(params, opt_state, b).as_text());
    const double lower_s = seconds_since(t0);

    t0 = std::chrono::steady_clock::now();
    const ir::Block& block = module->lookup("main")->entry();
    compiler::plan_fusion(block, block.ops.size() - 1);
    const double plan_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const auto program = cuda::compile_program(*module, *module->lookup("main"), nullptr);
    const double compile_s = seconds_since(t0);
    const auto& steps = cuda::fusion_kernels(*program);
    std::vector<std::shared_ptr<const cg::FusionKernel>> unique;
    std::set<std::string> names;
    for (const auto& k : steps)
      if (names.insert(k->name).second) unique.push_back(k);
    std::printf(
        "%s train step, batch %lld x %lld: %zu ops, %zu fusions, %zu distinct kernels "
        "(lowering %.1f s, planning %.2f s, compile_program without NVRTC %.2f s)\n",
        config.c_str(), static_cast<long long>(batch), static_cast<long long>(seq),
        block.ops.size(), steps.size(), unique.size(), lower_s, plan_s, compile_s);

    cg::KernelCache& cache = cg::KernelCache::process();
    std::string dir =
        (std::filesystem::temp_directory_path() / "cujax-compile-time-XXXXXX").string();
    if (!mkdtemp(dir.data())) throw Error("mkdtemp failed");
    cache.set_directory(dir);
    std::printf("NVRTC %s, %s, %u hardware threads\n", cg::nvrtc_version().c_str(), arch.c_str(),
                std::max(1u, std::thread::hardware_concurrency()));

    // Cold, one kernel at a time: the time per kernel.
    std::vector<double> each;
    double slowest = 0;
    std::string slowest_kernel;
    t0 = std::chrono::steady_clock::now();
    for (const auto& k : unique) {
      const auto t1 = std::chrono::steady_clock::now();
      cg::compile_cubin(k->source, arch);
      each.push_back(seconds_since(t1));
      if (each.back() > slowest) {
        slowest = each.back();
        slowest_kernel = k->name + " (" + k->description.substr(0, 120) + ")";
      }
    }
    const double serial_s = seconds_since(t0);
    std::sort(each.begin(), each.end());
    std::printf(
        "cold, one at a time: %.2f s total; per kernel min %.3f s, median %.3f s, max %.3f s\n",
        serial_s, each.front(), each[each.size() / 2], each.back());
    std::printf("slowest: %s\n", slowest_kernel.c_str());

    // Cold, as compile_program does it: all kernels at once, through the cache.
    t0 = std::chrono::steady_clock::now();
    cg::compile_all(unique, arch);
    std::printf("cold, in parallel (as compile_program): %.2f s, %lld NVRTC compiles\n",
                seconds_since(t0), static_cast<long long>(cache.stats().compiles));

    // Warm: a new process finds every cubin on disk.
    cache.clear_memory();
    const int64_t before = cg::nvrtc_compile_count();
    t0 = std::chrono::steady_clock::now();
    cg::compile_all(unique, arch);
    std::printf("warm (disk cache, new process): %.3f s, %lld NVRTC compiles, %lld disk hits\n",
                seconds_since(t0), static_cast<long long>(cg::nvrtc_compile_count() - before),
                static_cast<long long>(cache.stats().disk_hits));
    std::filesystem::remove_all(dir);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
