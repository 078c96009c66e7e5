#include "backends/cuda/timeline.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <deque>
#include <mutex>

#include "backends/cuda/cuda_check.h"
#include "cujax/core/error.h"

namespace cujax::cuda {

struct RunTimer::Pending {
  profiler::DeviceRun run;
  // marks[0] at the run's start, marks[i + 1] after op i.
  std::vector<std::unique_ptr<Event>> marks;
  // The trace clock when the stream reached the run's start; written by the host function.
  std::atomic<int64_t> start_ns{0};
};

namespace {

struct Runs {
  std::mutex mu;
  std::deque<std::unique_ptr<RunTimer::Pending>> in_flight;
};

Runs& runs() {
  static Runs r;
  return r;
}

void CUDART_CB stamp_start(void* pending) {
  static_cast<std::atomic<int64_t>*>(pending)->store(profiler::detail::clock_ns(),
                                                     std::memory_order_release);
}

void record(RunTimer::Pending& p) {
  const Event& start = *p.marks.front();
  p.run.start_ns = p.start_ns.load(std::memory_order_acquire);
  p.run.ms = p.marks.back()->elapsed_ms_since(start);
  for (size_t i = 0; i < p.run.ops.size(); ++i) {
    p.run.ops[i].start_ms = p.marks[i]->elapsed_ms_since(start);
    p.run.ops[i].end_ms = p.marks[i + 1]->elapsed_ms_since(start);
  }
  profiler::detail::device_run(p.run);
}

}  // namespace

void record_finished_runs(bool wait) {
  Runs& r = runs();
  std::lock_guard<std::mutex> lock(r.mu);
  for (auto it = r.in_flight.begin(); it != r.in_flight.end();) {
    RunTimer::Pending& p = **it;
    if (wait) {
      p.marks.back()->synchronize();
    } else {
      const cudaError_t e = cudaEventQuery(p.marks.back()->get());
      if (e == cudaErrorNotReady) {
        ++it;
        continue;
      }
      CUJAX_CUDA_CHECK(e);
    }
    record(p);
    it = r.in_flight.erase(it);
  }
}

RunTimer::RunTimer(Device& device, size_t num_ops)
    : device_(device), run_(std::make_unique<Pending>()) {
  static std::once_flag hooked;
  std::call_once(hooked, [] {
    profiler::detail::add_stop_hook([] {
      try {
        record_finished_runs(/*wait=*/true);
      } catch (const std::exception& e) {  // the trace keeps its host spans
        std::fprintf(stderr, "cujax: the trace lost its device spans: %s\n", e.what());
        std::lock_guard<std::mutex> lock(runs().mu);
        runs().in_flight.clear();
      }
    });
  });
  record_finished_runs(/*wait=*/false);  // keeps the list short in a long traced loop
  run_->run.session = profiler::detail::session();
  run_->run.device = "cuda:" + std::to_string(device.ordinal());
  run_->run.ops.reserve(num_ops);
  run_->marks.reserve(num_ops + 1);
  run_->marks.push_back(std::make_unique<Event>(/*timing=*/true));
  run_->marks.back()->record(device.stream());
  CUJAX_CUDA_CHECK(cudaLaunchHostFunc(device.stream(), stamp_start, &run_->start_ns));
}

RunTimer::~RunTimer() {
  // A run abandoned by an error: its host function, which writes into run_, may still be
  // pending on the stream. (On a broken stream it never runs; the error is the caller's.)
  if (run_) cudaStreamSynchronize(device_.stream());
}

void RunTimer::op_done(profiler::DeviceOp op) {
  run_->marks.push_back(std::make_unique<Event>(/*timing=*/true));
  run_->marks.back()->record(device_.stream());
  run_->run.ops.push_back(std::move(op));
}

void RunTimer::finish() {
  Runs& r = runs();
  std::lock_guard<std::mutex> lock(r.mu);
  r.in_flight.push_back(std::move(run_));
}

}  // namespace cujax::cuda
