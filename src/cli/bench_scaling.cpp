// `cujax bench scaling`: the tiny transformer's training step, data-parallel over 1, 2, 4 and 8
// virtual CPU devices with the same global batch, and the share of each step spent in
// collectives (the gradients' all_reduces).
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/bench.h"
#include "cujax/models/lm.h"
#include "cujax/runtime/backend.h"
#include "cujax/sharding.h"

namespace cujax::cli {

namespace {

constexpr int kMaxDevices = 8;

}  // namespace

int bench_scaling(const std::vector<std::string>& argv) {
  const Args args(argv, {"batch", "steps"});
  if (!args.positional().empty())
    throw UsageError("unexpected argument '" + args.positional()[0] + "'");
  const int64_t batch = args.integer("batch", 16, 1), steps = args.integer("steps", 5, 1);
  if (batch % kMaxDevices != 0)
    throw UsageError("--batch " + std::to_string(batch) + " must divide by " +
                     std::to_string(kMaxDevices) + ", the most devices measured");
  // The environment's count, where it names one, bounds the devices measured.
  const std::optional<int> env = runtime::cpu_devices_from_environment();
  if (!env) runtime::set_num_cpu_devices(kMaxDevices);
  const int available = runtime::num_cpu_devices();

  const models::TransformerConfig config = models::tiny_config();
  const int64_t seq = config.max_len;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf(
      "cujax bench scaling: config tiny, data-parallel, the same global batch %lld x seq %lld "
      "split over the devices, median of %lld steps, %u cores\n",
      static_cast<long long>(batch), static_cast<long long>(seq), static_cast<long long>(steps),
      cores);
  std::printf("%8s %12s %10s %12s %10s %15s %14s\n", "devices", "batch/device", "ms/step",
              "tokens/s", "vs 1 dev", "collectives ms", "share of step");
  double one_ms = 0;
  for (int n = 1; n <= std::min(available, kMaxDevices); n *= 2) {
    // One device runs the unpartitioned program; unsharded parameters count as replicated.
    const auto shard = [n](data::Batch b) {
      const Sharding rows = NamedSharding(make_mesh({n}, {"data"}), P("data", std::nullopt));
      return data::Batch{device_put(b.inputs, rows), device_put(b.targets, rows)};
    };
    const StepTiming r =
        time_train_step(config, batch, seq, steps,
                        n > 1 ? std::function<data::Batch(data::Batch)>(shard) : nullptr);
    if (n == 1) one_ms = r.ms;
    std::printf("%8d %12lld %10.1f %12.0f %9.2fx %15.1f %13.1f%%\n", n,
                static_cast<long long>(batch / n), r.ms,
                static_cast<double>(batch * seq) / r.ms * 1e3, one_ms / r.ms, r.collective_ms,
                100 * r.collective_ms / r.ms);
    std::fflush(stdout);
  }
  if (available < kMaxDevices)
    std::printf(
        "(the environment gives %d cpu devices; unset CUJAX_NUM_CPU_DEVICES and XLA_FLAGS "
        "to measure up to %d)\n",
        available, kMaxDevices);
  std::printf(
      "The virtual devices share the host's %u cores and memory: this measures the cost of "
      "partitioning and collectives, not a speed-up. Collective time is the mean per device, "
      "waiting for the slowest device included.\n",
      cores);
  const auto platforms = runtime::available_platforms();
  if (std::find(platforms.begin(), platforms.end(), "cuda") != platforms.end())
    std::printf("cuda: multi-GPU data parallelism (NCCL) is not implemented; not measured\n");
  return 0;
}

}  // namespace cujax::cli
