// `cujax bench scaling`: the tiny transformer's training step, data-parallel over 1, 2, 4 and 8
// virtual CPU devices with the same global batch, and the share of each step spent in
// collectives (the gradients' all_reduces).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/bench.h"
#include "cujax/lax.h"
#include "cujax/models/lm.h"
#include "cujax/random.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/spmd.h"
#include "cujax/sharding.h"

namespace cujax::cli {

namespace {

using clock = std::chrono::steady_clock;
constexpr int kMaxDevices = 8;

struct Row {
  int devices = 1;
  double ms = 0;             // median wall time per step
  double collective_ms = 0;  // median per device time in collectives (waiting included)
  double compile_s = 0;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Row measure(int devices, const models::TransformerConfig& config, int64_t batch, int64_t seq,
            int64_t steps) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(config, rngs);
  models::OptimizerOptions o;
  o.total_steps = 1000;
  const auto tx = models::make_optimizer(o);
  State params = nnx::state(model, nnx::VariableKind::Param);
  State opt_state = tx.init(params);
  auto step = models::make_train_step(model, tx);
  const Array window = random::randint(random::PRNGKey(0), {batch, seq + 1}, 0, config.vocab_size);
  data::Batch b{lax::slice_in_dim(window, 0, seq, 1, 1),
                lax::slice_in_dim(window, 1, seq + 1, 1, 1)};
  // One device runs the unpartitioned program; unsharded parameters count as replicated.
  if (devices > 1) {
    const Sharding rows = NamedSharding(make_mesh({devices}, {"data"}), P("data", std::nullopt));
    b = {device_put(b.inputs, rows), device_put(b.targets, rows)};
  }
  Row row;
  row.devices = devices;
  std::vector<double> ms, collective_ms;
  for (int64_t i = 0; i < steps + 2; ++i) {
    const auto t0 = clock::now();
    auto [p, s, metrics] = step(params, opt_state, b);
    metrics.at("loss").block_until_ready();
    params = std::move(p);
    opt_state = std::move(s);
    const double elapsed = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (i == 0) row.compile_s = elapsed / 1e3;
    if (i < 2) continue;  // compilation and warm-up
    ms.push_back(elapsed);
    const auto stats = step.last_spmd_stats();
    collective_ms.push_back(stats ? stats->collective_seconds * 1e3 : 0);
  }
  row.ms = median_of(ms);
  row.collective_ms = median_of(collective_ms);
  return row;
}

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
    const Row r = measure(n, config, batch, seq, steps);
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
