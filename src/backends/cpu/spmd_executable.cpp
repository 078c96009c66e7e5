// compile_spmd for the cpu backend: one compiled program shared by every device, run on one
// thread per local device, whose collectives meet in a Communicator made for each execute.
#include <algorithm>
#include <chrono>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/kernels.h"
#include "compiler/backend_passes.h"
#include "cujax/runtime/spmd.h"
#include "profiler/hooks.h"
#include "runtime/collectives.h"
#include "runtime/process_group.h"

namespace cujax::runtime {

namespace {

class CpuSpmdExecutable final : public SpmdExecutable {
 public:
  CpuSpmdExecutable(std::shared_ptr<const cpu::Program> program, std::vector<int> device_ids,
                    std::vector<int> device_process, std::vector<int> local, std::string name)
      : program_(std::move(program)),
        device_ids_(std::move(device_ids)),
        device_process_(std::move(device_process)),
        local_(std::move(local)),
        name_(std::move(name)) {}

  std::vector<std::vector<DeviceBuffer>> execute(
      std::vector<std::vector<DeviceBuffer>> per_device_args) override {
    if (per_device_args.size() != local_.size())
      throw RuntimeError("SPMD execute: got arguments for " +
                         std::to_string(per_device_args.size()) + " devices, this process runs " +
                         std::to_string(local_.size()));
    // One execute at a time: the devices' collectives of two executes must not meet.
    std::lock_guard<std::mutex> lock(mu_);
    const auto start = std::chrono::steady_clock::now();
    const ProcessGroup group = process_group();
    Communicator comm(device_process_, group.index, group.transport, executions_++);
    const size_t n = local_.size();
    std::vector<std::vector<DeviceBuffer>> results(n);
    std::vector<cpu::SpmdDevice> devices(n);
    std::vector<std::exception_ptr> errors(n);
    std::vector<std::chrono::steady_clock::time_point> failed_at(n);
    ExecuteOptions options;
    auto run = [&](size_t i) {
      const profiler::Span span = profiler::execute_span(name_, "cpu", device_ids_[local_[i]]);
      devices[i].comm = &comm;
      devices[i].device = local_[i];
      cpu::ExecContext ctx;
      ctx.options = &options;
      ctx.spmd = &devices[i];
      try {
        std::vector<HostTensor> args;
        for (DeviceBuffer& a : per_device_args[i]) {
          args.push_back(a.as_host_tensor());
          a.data.reset();
        }
        for (HostTensor& r : program_->run(std::move(args), ctx))
          results[i].push_back(DeviceBuffer::on_cpu(std::move(r), device_ids_[local_[i]]));
      } catch (const std::exception& e) {
        failed_at[i] = std::chrono::steady_clock::now();
        errors[i] = std::make_exception_ptr(
            RuntimeError("device cpu:" + std::to_string(device_ids_[local_[i]]) + ": " + e.what()));
        comm.abort("stopped because device cpu:" + std::to_string(device_ids_[local_[i]]) +
                   " failed: " + e.what());
      }
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < n; ++i) threads.emplace_back(run, i);
    if (n) run(0);
    for (auto& t : threads) t.join();
    // The first failure is the cause; the others are members it left waiting.
    int first = -1;
    for (size_t i = 0; i < n; ++i)
      if (errors[i] && (first < 0 || failed_at[i] < failed_at[first])) first = static_cast<int>(i);
    stats_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats_.collective_seconds = 0;
    for (const auto& d : devices) stats_.collective_seconds += d.collective_seconds / n;
    if (first >= 0) std::rethrow_exception(errors[first]);
    return results;
  }

  SpmdStats last_stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  std::vector<int> local_devices() const override { return local_; }
  std::string_view platform() const override { return "cpu"; }
  std::vector<int> local_device_indices() const override {
    std::vector<int> out;
    for (int i : local_) out.push_back(device_ids_[i]);
    return out;
  }

 private:
  std::shared_ptr<const cpu::Program> program_;
  std::vector<int> device_ids_;      // logical device -> global id
  std::vector<int> device_process_;  // logical device -> process
  std::vector<int> local_;           // logical devices run here
  std::string name_;                 // the module's, for traces
  mutable std::mutex mu_;
  int64_t executions_ = 0;
  SpmdStats stats_;
};

}  // namespace

std::unique_ptr<SpmdExecutable> compile_spmd(const Backend& backend, const ir::Module& module,
                                             std::vector<int> device_ids, std::string_view entry) {
  return backend.compile_spmd(module, std::move(device_ids), entry);
}

std::unique_ptr<SpmdExecutable> Backend::compile_spmd(const ir::Module&, std::vector<int>,
                                                      std::string_view) const {
  throw UnsupportedError("compile_spmd: the " + std::string(platform()) +
                         " backend does not run SPMD programs");
}

}  // namespace cujax::runtime

namespace cujax::cpu {

using runtime::SpmdExecutable;

std::pair<int, int> spmd_process_grid(const ir::Module& module, int64_t num_devices) {
  const int64_t replicas = module_int_attr(module, "mhlo.num_replicas").value_or(1);
  const int64_t partitions = module_int_attr(module, "mhlo.num_partitions")
                                 .value_or(num_devices / std::max<int64_t>(replicas, 1));
  if (replicas < 1 || partitions < 1 || replicas * partitions != num_devices)
    throw Error("compile_spmd: the module is partitioned for mhlo.num_replicas = " +
                std::to_string(replicas) +
                " x mhlo.num_partitions = " + std::to_string(partitions) + " devices, but " +
                std::to_string(num_devices) + " device ids were given");
  return {static_cast<int>(replicas), static_cast<int>(partitions)};
}

std::unique_ptr<SpmdExecutable> CpuBackend::compile_spmd(const ir::Module& original,
                                                         std::vector<int> device_ids,
                                                         std::string_view entry) const {
  std::unique_ptr<ir::Module> lowered = compiler::run_backend_passes(original);
  const ir::Module& module = lowered ? *lowered : original;
  const ir::Function* fn = module.lookup(entry);
  if (!fn) throw Error("compile_spmd: module has no function @" + std::string(entry));
  if (device_ids.empty()) throw Error("compile_spmd: no devices given");
  const int64_t n = static_cast<int64_t>(device_ids.size());
  const auto [replicas, partitions] = spmd_process_grid(module, n);
  const std::vector<int> global = runtime::global_cpu_device_ids();
  const int me = runtime::process_group().index;
  std::set<int> seen;
  std::vector<int> device_process, local;
  for (int64_t i = 0; i < n; ++i) {
    const int id = device_ids[i];
    if (id < 0 || id >= static_cast<int>(global.size()))
      throw Error("compile_spmd: device cpu:" + std::to_string(id) + " does not exist (" +
                  std::to_string(global.size()) +
                  " cpu devices; set CUJAX_NUM_CPU_DEVICES or runtime::set_num_cpu_devices)");
    if (!seen.insert(id).second)
      throw Error("compile_spmd: device cpu:" + std::to_string(id) + " is listed twice");
    device_process.push_back(runtime::process_of_cpu_device(id));
    if (device_process.back() == me) local.push_back(static_cast<int>(i));
  }
  Compiler compiler(module);
  compiler.set_process_grid(replicas, partitions);
  return std::make_unique<runtime::CpuSpmdExecutable>(
      compiler.compile_function(*fn), std::move(device_ids), std::move(device_process),
      std::move(local), module.name.empty() ? "main" : module.name);
}

}  // namespace cujax::cpu
