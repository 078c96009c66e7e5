// Device-side spans of a trace (profiler::start_trace): each op of a program's run is timed on
// the GPU by CUDA events around it, without waiting for the GPU. A host function enqueued at
// the run's start reads the trace clock when the stream reaches it, which places the run on
// the trace's timeline; the timings are read once the run's last event has completed (at a
// later run, or when the trace stops).
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/device.h"
#include "profiler/hooks.h"

namespace cujax::cuda {

class RunTimer {
 public:
  // Records the run's start on the device's stream.
  RunTimer(Device& device, size_t num_ops);
  RunTimer(const RunTimer&) = delete;
  RunTimer& operator=(const RunTimer&) = delete;
  ~RunTimer();
  // After the op is enqueued: records its end (start_ms and end_ms of `op` are filled later).
  void op_done(profiler::DeviceOp op);
  // Hands the run over to be recorded when the device has finished it.
  void finish();

  struct Pending;  // a run's ops and events, until they are recorded

 private:
  Device& device_;
  std::unique_ptr<Pending> run_;
};

// Records the runs whose events have completed; with `wait`, waits for all of them first.
void record_finished_runs(bool wait);

}  // namespace cujax::cuda
