// `cujax bench train`: one training step of the tiny transformer on the default backend (or
// --platform), against the same model and step written in PyTorch on the CPU, measured in the
// same run.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/bench.h"
#include "cujax/models/lm.h"

namespace cujax::cli {

namespace {

// The peer's median ms/step, or a negative value when PyTorch is not installed.
double torch_ms_per_step(const models::TransformerConfig& c, int64_t batch, int64_t seq,
                         int64_t steps, unsigned threads) {
  // One OpenBLAS thread per call: otherwise OpenBLAS's threads and PyTorch's intra-op threads
  // oversubscribe the cores and PyTorch runs about 2x slower than its best on a small machine.
  const std::string cmd = "OPENBLAS_NUM_THREADS=1 " + peer_python() + " " +
                          CUJAX_SOURCE_DIR "/tools/torch_reference.py bench '" +
                          json::dump(c.to_json()) + "' " + std::to_string(batch) + " " +
                          std::to_string(seq) + " " + std::to_string(steps) + " " +
                          std::to_string(threads) + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  double ms = -1;
  if (std::fscanf(p, "%lf", &ms) != 1) ms = -1;
  pclose(p);
  return ms;
}

}  // namespace

int bench_train(const std::vector<std::string>& argv) {
  const Args args({"bench train",
                   "milliseconds per step and tokens/s of the tiny config against PyTorch CPU",
                   {platform_option(), profile_option()}},
                  argv);
  const std::string platform = use_platform(args);
  const ProfileOption profile(args);
  const models::TransformerConfig config = models::tiny_config();
  const int64_t batch = 16, seq = config.max_len, steps = 10;
  const StepTiming t = time_train_step(config, batch, seq, steps, nullptr, platform);
  const double cujax_ms = t.ms;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const double torch_ms = torch_ms_per_step(config, batch, seq, steps, threads);
  const double tokens = static_cast<double>(batch * seq);

  std::printf(
      "cujax bench train: config tiny (%lld parameters), batch %lld x seq %lld, %u threads, median "
      "of %lld steps\n",
      static_cast<long long>(t.parameters), static_cast<long long>(batch),
      static_cast<long long>(seq), threads, static_cast<long long>(steps));
  std::printf("%-40s %10s %12s\n", "", "ms/step", "tokens/s");
  std::printf("%-40s %10.1f %12.0f\n", ("cujax (" + platform + " backend, jitted step)").c_str(),
              cujax_ms, tokens / cujax_ms * 1e3);
  if (torch_ms > 0) {
    std::printf("%-40s %10.1f %12.0f\n", "PyTorch CPU eager (same model and step)", torch_ms,
                tokens / torch_ms * 1e3);
    std::printf("speed-up of cujax over PyTorch: %.2fx (target: above 1)\n", torch_ms / cujax_ms);
  } else {
    std::printf("%-40s %10s\n", "PyTorch CPU", "not installed (Debian python3-torch)");
  }
  std::printf("first step (trace + compile + run): %.2f s\n", t.compile_s);
  return 0;
}

}  // namespace cujax::cli
