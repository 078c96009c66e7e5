// The spans cujax's runtime, compiler and backends record. Each hook is one line at its site
// and returns an empty Span after one relaxed atomic load when no trace is active; names and
// arguments are built only while tracing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cujax/profiler.h"
#include "cujax/transfer_guard.h"

namespace cujax::profiler {

// A device's peak rates for the doctor's roofline lines, and how they were found.
struct DevicePeak {
  double flops_per_s = 0;
  double bytes_per_s = 0;
  std::string how;
};
// What a GPU's peak is computed from: its properties as the CUDA runtime reports them.
struct GpuSpec {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  double clock_khz = 0;         // peak SM clock
  double memory_clock_khz = 0;  // peak memory clock
  int memory_bus_bits = 0;
};
// Dense bf16 tensor-core FLOP/s (SMs x clock x FLOPs per SM and cycle of the architecture) and
// DRAM bytes/s (two transfers per memory clock over the bus).
DevicePeak gpu_peak(const GpuSpec& spec);

// {"cpu": {"flops_per_s", "bytes_per_s", "how"}, ...}: the cpu's (estimated once) and those
// backends registered; stop_trace writes it as the trace's otherData.device_peaks.
json::Value device_peaks();

// One op as a device ran it, timed on the device's own clock (CUDA events): milliseconds from
// the start of its program's run.
struct DeviceOp {
  std::string name;   // "stablehlo.dot_general", "fusion"
  std::string where;  // the op and its location, as error messages name it
  std::string loc;    // source location, "" when the IR has none
  double flops = 0, bytes = 0;
  double start_ms = 0, end_ms = 0;
};

// A program's run on a device, timed there: recorded on the device's own track ("cuda:0
// stream") as a "device" span from `start_ns` (the trace clock when the device began the run)
// lasting `ms`, with its ops as "op" spans inside it.
struct DeviceRun {
  uint64_t session = 0;  // the trace that was active when the run was enqueued
  std::string device;    // "cuda:0"
  int64_t start_ns = 0;
  double ms = 0;
  std::vector<DeviceOp> ops;
};

namespace detail {
// The active trace's number (DeviceRun::session) and the trace's clock (steady, nanoseconds).
uint64_t session();
int64_t clock_ns();
// Records a run whose timings became known after it was enqueued; dropped when its trace has
// stopped. Ops outside [0, run.ms] are clamped into it.
void device_run(const DeviceRun& run);
// Called by stop_trace before it writes, while the trace is still active: a backend records
// the runs it still has in flight (waiting for them). Registered once per backend.
void add_stop_hook(std::function<void()> hook);
void set_device_peak(const std::string& platform, DevicePeak peak);
Span compile_span(std::string_view module, std::string_view platform, const std::string& cache_dir);
Span backend_compile_span(std::string_view platform, std::string_view module);
Span dispatch_span(std::string_view what, std::string_view platform, int device);
Span execute_span(std::string_view program, std::string_view platform, int device);
Span op_span(std::string_view name, std::string_view where, std::string_view loc, double flops,
             double bytes);
Span transfer_span(TransferDirection direction, int64_t bytes, bool is_explicit,
                   std::string_view what, std::string_view platform, int device);
Span wait_span(std::string_view name);
void cache_miss(std::string_view function, const std::string& reason);
void persistent_cache_hit(std::string_view module);
// Keeps the profile for device_memory_profile while it lives, and records it in the trace.
void memory_profile(std::shared_ptr<const MemoryProfile> profile);
// This thread's dispatches while tracing, and that count when it last waited for a result
// (block_until_ready, a blocking wait, a copy to the host): Timer's evidence.
int64_t dispatch_count();
int64_t dispatches_at_last_wait();
}  // namespace detail

// compile_module: passes and backend compilation of one module ("compile jit_f").
inline Span compile_span(std::string_view module, std::string_view platform,
                         const std::string& cache_dir) {
  return active() ? detail::compile_span(module, platform, cache_dir) : Span();
}
// A backend turning the optimized module into its executable ("cpu compile jit_f").
inline Span backend_compile_span(std::string_view platform, std::string_view module) {
  return active() ? detail::backend_compile_span(platform, module) : Span();
}
// The host handing a program to its device's queue (or running it inline).
inline Span dispatch_span(std::string_view what, std::string_view platform, int device) {
  return active() ? detail::dispatch_span(what, platform, device) : Span();
}
// A device running a whole program: the parent of its op spans.
inline Span execute_span(std::string_view program, std::string_view platform, int device) {
  return active() ? detail::execute_span(program, platform, device) : Span();
}
// One executed op or fusion with its cost (cost_analysis's FLOPs and bytes, 0 when unknown);
// `on` is active() read once per program run.
inline Span op_span(bool on, std::string_view name, std::string_view where, std::string_view loc,
                    double flops = 0, double bytes = 0) {
  return on ? detail::op_span(name, where, loc, flops, bytes) : Span();
}
// A copy between the host and a device, or between devices.
inline Span transfer_span(TransferDirection direction, int64_t bytes, bool is_explicit,
                          std::string_view what, std::string_view platform, int device) {
  return active() ? detail::transfer_span(direction, bytes, is_explicit, what, platform, device)
                  : Span();
}
// The host waiting for a device: recorded when `blocks` (a wait for a value not yet computed).
inline Span wait_span(bool blocks, std::string_view name = "wait") {
  return blocks && active() ? detail::wait_span(name) : Span();
}
// A jit cache miss and its reason (jax_explain_cache_misses), as an instant event.
template <class Reason>
void cache_miss(std::string_view function, Reason&& reason) {
  if (active()) detail::cache_miss(function, reason());
}
inline void persistent_cache_hit(std::string_view module) {
  if (active()) detail::persistent_cache_hit(module);
}

}  // namespace cujax::profiler
