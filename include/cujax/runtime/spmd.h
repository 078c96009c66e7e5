// Running one program on many devices (SPMD): virtual CPU devices and executables of modules
// that a partitioner split for N devices, whose collectives meet across the devices (threads in
// this process, MPI across processes).
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax::runtime {

// Devices the cpu backend exposes (virtual devices, like XLA's
// --xla_force_host_platform_device_count): CUJAX_NUM_CPU_DEVICES, else XLA_FLAGS'
// --xla_force_host_platform_device_count=N, else 1. set_num_cpu_devices(n) before the first use
// of the cpu backend's devices; a later different value, or one that differs from the
// environment's, throws naming both settings (as do the two variables set to different counts).
void set_num_cpu_devices(int n);
int num_cpu_devices();  // get_backend("cpu").devices() lists cpu:0..cpu:N-1
// Added to the contract: the count CUJAX_NUM_CPU_DEVICES or XLA_FLAGS gives, nullopt when
// neither names one (a caller that needs a count checks it against the user's setting).
std::optional<int> cpu_devices_from_environment();

struct SpmdStats {                // of the last execute()
  double seconds = 0;             // wall time of the whole execute
  double collective_seconds = 0;  // mean per device time inside collectives (incl. waiting)
};

// A module partitioned for N devices ("mhlo.num_partitions" = N, "mhlo.num_replicas" = 1 module
// attributes; collectives (all_reduce, all_gather, reduce_scatter, all_to_all,
// collective_permute, collective_broadcast) carry replica_groups of partition ids, a
// channel_handle and use_global_device_ids where XLA's SPMD partitioner sets them;
// stablehlo.partition_id gives the device's index) compiled for devices `device_ids`
// (global ids; with several processes, only this process's devices run here and collectives
// cross processes).
class SpmdExecutable {
 public:
  virtual ~SpmdExecutable() = default;
  // per_device_args[i] are the arguments of the i-th LOCAL device of device_ids; returns each
  // local device's results in the same order. Throws RuntimeError naming the op and device.
  // Arguments are passed by value so that donated ones arrive with their only owner.
  virtual std::vector<std::vector<DeviceBuffer>> execute(
      std::vector<std::vector<DeviceBuffer>> per_device_args) = 0;
  // Host tensors in and out, copied through the transfer guard (tests, benchmarks).
  std::vector<std::vector<HostTensor>> execute_on_host(
      const std::vector<std::vector<HostTensor>>& per_device_args);
  virtual std::string_view platform() const = 0;
  // The backend's index of each local device (what DeviceBuffer::device says), in the order of
  // local_devices().
  virtual std::vector<int> local_device_indices() const = 0;
  virtual SpmdStats last_stats() const = 0;
  // Added to the contract: the positions in device_ids of the devices that run here (all of
  // them in one process; this process's with several).
  virtual std::vector<int> local_devices() const = 0;
};

// Only the cpu backend runs SPMD programs for now; others throw UnsupportedError. Modules
// without the num_partitions/num_replicas attributes run as num_partitions = device_ids.size().
// Every collective waits at most collective_timeout_seconds() for its group (deadlock guard).
std::unique_ptr<SpmdExecutable> compile_spmd(const Backend& backend, const ir::Module& module,
                                             std::vector<int> device_ids,
                                             std::string_view entry = "main");

// Added to the contract: the deadlock guard's limit, CUJAX_COLLECTIVE_TIMEOUT (seconds) or 300.
double collective_timeout_seconds();
void set_collective_timeout_seconds(double seconds);

}  // namespace cujax::runtime
