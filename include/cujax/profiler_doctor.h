// The performance doctor: reads a trace (profiler::start_trace / --profile) and reports, per
// step (StepTraceAnnotation), where the time went, the ops that took it, and the pitfalls the
// trace shows, each with its evidence and its fix:
//
//   profiler::Report r = profiler::diagnose_trace("/tmp/trace");  // a log dir or the .json
//   std::fputs(r.str().c_str(), stdout);
//   for (const auto& f : r.findings) ... f.id == "recompilation" ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cujax/core/json.h"
#include "cujax/profiler.h"

namespace cujax::profiler {

// Where one step's time went, in microseconds. The host columns split the time of the thread
// that ran the step (each instant to its innermost span); `device_us` is the time devices spent
// running programs during the step, on any thread.
struct StepSummary {
  int64_t step_num = 0;
  std::string name;
  double wall_us = 0;
  double compile_us = 0;   // tracing and compiling
  double dispatch_us = 0;  // handing programs to devices
  double transfer_us = 0;  // host <-> device copies
  double wait_us = 0;      // the host blocked on results (block_until_ready, item, ...)
  double other_us = 0;     // the rest: the caller's own code
  double device_us = 0;
  int64_t compiles = 0;              // jit cache misses
  int64_t device_to_host = 0;        // transfers to the host
  int64_t device_to_host_bytes = 0;  // and their bytes
};

// An op or fusion by its total time over the trace.
struct OpSummary {
  std::string name;
  std::string source;  // "name @ file:line:col" when the IR had one
  int64_t count = 0;
  double total_us = 0;
  double flops = 0;  // cost_analysis's FLOPs (transcendentals included) over all its runs
  double bytes = 0;  // and bytes read and written; 0 when the backend did not say
};

// One pitfall: `id` is one of "gpu-not-used", "first-step-compilation", "recompilation",
// "incomplete-final-batch", "host-sync-every-step", "timing-without-wait", "attention-logits",
// "unsharded-on-mesh", "collectives-share".
struct Finding {
  std::string id;
  std::string summary;
  std::string evidence;
  std::string fix;
};

struct Report {
  std::vector<StepSummary> steps;
  std::vector<OpSummary> top_ops;  // the most expensive first, at most 10
  std::vector<Finding> findings;
  std::vector<MemoryProfile> memory;  // each program compiled during the trace, by name
  // The roofline's ceilings for the devices that ran the ops (the trace's device_peaks).
  double peak_flops_per_s = 0, peak_bytes_per_s = 0;
  std::string peak_how;
  double device_us = 0;              // all device time in the trace
  std::vector<std::string> devices;  // the devices that ran programs ("cpu:0")
  // The printed report: a table of steps, the top ops and the findings.
  std::string str() const;
  bool has(const std::string& id) const;
  const Finding* find(const std::string& id) const;
};

// The doctor's thresholds.
struct DoctorOptions {
  int64_t attention_logits_bytes = int64_t{4} << 20;  // materialized logits worth reporting
  // Of the device time of the steps after the first: all devices inside collectives at once.
  double collectives_share = 0.25;
};

// What the machine offers beyond the cpu (`cujax doctor`'s verdict on cuda), for the
// "gpu-not-used" finding.
struct GpuStatus {
  bool usable = false;     // the cuda backend can run programs here
  bool installed = false;  // a GPU is there (device nodes, a driver), usable or not
  std::string verdict;     // "GPU not used: ..."
  std::string fix;         // what to do, when not usable
};

// Diagnoses a parsed trace-event JSON document as profiler::stop_trace writes it; with `gpu`,
// also whether programs ran on the cpu although a GPU is (or was meant to be) there.
Report diagnose(const json::Value& trace, const GpuStatus* gpu = nullptr,
                const DoctorOptions& options = {});
// `path`: a perfetto_trace.json file, or a log directory (its latest run under
// plugins/profile/). Throws Error naming the path when it holds no trace.
Report diagnose_trace(const std::string& path, const GpuStatus* gpu = nullptr);
// The trace file `path` stands for (as diagnose_trace resolves it).
std::string find_trace_file(const std::string& path);

}  // namespace cujax::profiler
