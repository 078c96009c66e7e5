// `cujax bench scaling`: the tiny transformer's training step, data-parallel over 1, 2, 4 and 8
// virtual CPU devices with the same global batch, and the share of each step spent in
// collectives (the gradients' all_reduces). On cuda (--platform cuda, the default on a GPU
// machine) also the step on cuda:0 and NCCL's all_reduce of its gradients over every GPU.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/bench.h"
#include "cujax/ir/parser.h"
#include "cujax/models/lm.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/spmd.h"
#include "cujax/sharding.h"

namespace cujax::cli {

namespace {

constexpr int kMaxDevices = 8;

// On GPUs: the step on cuda:0, and the gradients' all_reduce (an f32 buffer of the parameter
// count) through NCCL over every GPU, one rank each, timed on the GPUs' streams.
void bench_cuda(const models::TransformerConfig& config, int64_t batch, int64_t seq,
                int64_t steps) {
  const int gpus = static_cast<int>(runtime::get_backend("cuda").devices().size());
  StepTiming step;
  try {
    step = time_train_step(config, batch, seq, steps, nullptr, "cuda");
  } catch (const Error& e) {
    std::printf("cuda: the training step failed: %s\n", e.what());
    return;
  }
  const std::string n = std::to_string(gpus), p = std::to_string(step.parameters);
  std::string group;
  for (int d = 0; d < gpus; ++d) group += (d ? ", " : "") + std::to_string(d);
  const std::string type = "tensor<" + p + "xf32>";
  const auto module = ir::parse_module(
      "module @gradients attributes {mhlo.num_partitions = " + n +
      " : i32, mhlo.num_replicas = 1 : i32} {\n"
      "func.func public @main(%g: " +
      type + ") -> " + type +
      " {\n"
      "  %0 = \"stablehlo.all_reduce\"(%g) <{channel_handle = #stablehlo.channel_handle<handle "
      "= 1, type = 1>, replica_groups = dense<[[" +
      group + "]]> : tensor<1x" + n +
      "xi64>, use_global_device_ids}> ({\n  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n"
      "    %s = stablehlo.add %x, %y : tensor<f32>\n    stablehlo.return %s : tensor<f32>\n"
      "  }) : (" +
      type + ") -> " + type + "\n  return %0 : " + type + "\n}\n}\n");
  std::vector<int> ids(gpus);
  for (int d = 0; d < gpus; ++d) ids[d] = d;
  const auto exe = runtime::compile_spmd(runtime::get_backend("cuda"), *module, ids);
  // The gradients stay on their GPUs between calls, as a training step's do.
  std::vector<std::vector<runtime::DeviceBuffer>> args(gpus);
  for (int d = 0; d < gpus; ++d)
    args[d].push_back(
        runtime::get_backend("cuda").to_device(HostTensor(DType::F32, Shape{step.parameters}), d));
  std::vector<double> ms;
  for (int64_t i = 0; i < steps + 2; ++i) {
    exe->execute(args);
    if (i >= 2) ms.push_back(exe->last_stats().collective_seconds * 1e3);
  }
  const double nccl_ms = median_of(ms);
  std::printf(
      "cuda: %d GPU(s), %s; the step on cuda:0: %.1f ms/step, %.0f tokens/s; NCCL all_reduce "
      "of the %lld gradients over %d rank(s): %.3f ms (%.2f%% of the step)\n",
      gpus, runtime::get_backend("cuda").devices()[0].kind.c_str(), step.ms,
      static_cast<double>(batch * seq) / step.ms * 1e3, static_cast<long long>(step.parameters),
      gpus, nccl_ms, 100 * nccl_ms / step.ms);
}

}  // namespace

int bench_scaling(const std::vector<std::string>& argv) {
  const Args args({"bench scaling",
                   "the tiny training step data-parallel on 1, 2, 4 and 8 cpu devices (on cuda "
                   "also on cuda:0 and NCCL over every GPU)",
                   {{"batch", "B", "global batch, a multiple of 8 (default: 16)"},
                    {"steps", "N", "timed steps per mesh (default: 5)"},
                    platform_option(),
                    profile_option()}},
                  argv);
  const int64_t batch = args.integer("batch", 16, 1), steps = args.integer("steps", 5, 1);
  if (batch % kMaxDevices != 0)
    throw UsageError("--batch " + std::to_string(batch) + " must divide by " +
                     std::to_string(kMaxDevices) + ", the most devices measured");
  const std::string platform = use_platform(args);
  const ProfileOption profile(args);
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
                        n > 1 ? std::function<data::Batch(data::Batch)>(shard) : nullptr, "cpu");
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
  if (platform == "cuda") bench_cuda(config, batch, seq, steps);
  return 0;
}

}  // namespace cujax::cli
