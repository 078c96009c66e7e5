// Traces of what cujax does, as jax.profiler records them: start_trace(log_dir) ... stop_trace()
// (or a Trace scope) writes a Chrome / Perfetto trace-event JSON file that ui.perfetto.dev and
// chrome://tracing open. Host spans cover tracing, compiling, dispatch, transfers (bytes and
// direction) and waits; device spans cover each executed op or fusion (per-op timing on the cpu
// backend) with its source location when the IR has one; TraceAnnotation and
// StepTraceAnnotation add the caller's own spans and step boundaries.
//
//   profiler::start_trace("/tmp/trace");
//   for (int i = 0; i < steps; ++i) {
//     profiler::StepTraceAnnotation step("train", i);
//     std::tie(params, opt_state, metrics) = train_step(params, opt_state, batch);
//   }
//   std::string file = profiler::stop_trace();  // /tmp/trace/plugins/profile/<run>/...json
//
// With no trace active every hook costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cujax/core/json.h"

namespace cujax::profiler {

namespace detail {
extern std::atomic<bool> tracing;
struct OpenSpan;
// Records the span and frees it.
void close(OpenSpan* span) noexcept;
}  // namespace detail

// Whether a trace is being recorded.
inline bool active() {
  return detail::tracing.load(std::memory_order_relaxed);
}

// jax.profiler.start_trace: starts recording; the trace goes under `log_dir` when it stops.
// Throws Error when a trace is already being recorded.
void start_trace(const std::string& log_dir);
// jax.profiler.stop_trace: stops recording and writes
// log_dir/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/perfetto_trace.json; returns that path.
// Throws Error when no trace is being recorded or the file cannot be written.
std::string stop_trace();

// jax.profiler.trace(log_dir) as a scope: records from construction to destruction.
class Trace {
 public:
  explicit Trace(const std::string& log_dir);
  ~Trace();
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;
  // Stops now and returns the file (the destructor then does nothing).
  std::string stop();

 private:
  bool stopped_ = false;
};

// A span on the calling thread's timeline, recorded when it ends. Empty (and free) when no trace
// was active at its start. Spans of one thread nest: each lies within the spans still open when
// it started.
class Span {
 public:
  Span() = default;
  // `category` is a static string ("host", "compile", "transfer", ...); `args` a JSON object
  // shown with the span (Perfetto's "Arguments").
  Span(const char* category, std::string_view name, json::Value args = {});
  Span(Span&& other) noexcept : open_(std::exchange(other.open_, nullptr)) {}
  Span& operator=(Span&& other) noexcept {
    if (this != &other) {
      if (open_) detail::close(open_);
      open_ = std::exchange(other.open_, nullptr);
    }
    return *this;
  }
  ~Span() {
    if (open_) detail::close(open_);
  }
  // Adds an argument shown with the span (ignored when the span is empty).
  void arg(const std::string& key, json::Value value);

 private:
  detail::OpenSpan* open_ = nullptr;  // null when no trace was active at the start
};

// jax.profiler.TraceAnnotation(name, **kwargs): a span of the caller's own code.
class TraceAnnotation {
 public:
  explicit TraceAnnotation(std::string_view name, json::Value args = {});

 private:
  Span span_;
};

// jax.profiler.StepTraceAnnotation(name, step_num=n): one step of a loop. Perfetto shows it as a
// span "name" with args.step_num; `cujax doctor --trace` splits the trace into steps by it.
class StepTraceAnnotation {
 public:
  StepTraceAnnotation(std::string_view name, int64_t step_num);

 private:
  Span span_;
};

// A point event ("ph": "i") on the calling thread, recorded when a trace is active.
void instant(const char* category, std::string_view name, json::Value args = {});

// cujax's own hook in jit: tracing a function to StableHLO ("trace f" on a jit cache miss,
// "lower f" for f.lower(...)); empty when no trace is active.
namespace detail {
Span stage_span(std::string_view stage, std::string_view function);
}
inline Span stage_span(std::string_view stage, std::string_view function) {
  return active() ? detail::stage_span(stage, function) : Span();
}

// One buffer live at a program's memory peak: what holds it and the op that produced it.
struct LiveBuffer {
  int64_t bytes = 0;
  std::string type;    // "f32[8,16]"; for the remainder entry, "N smaller buffers"
  std::string kind;    // "argument", "output", "temporary" or "rest"
  std::string op;      // "stablehlo.dot_general (op 12 of @main)", "argument 0"
  std::string source;  // the op's source location, when the IR has one
};

// The buffer plan of one compiled program (its memory_analysis) and the buffers live at its
// peak, largest first: at most kMaxLiveBuffers entries, the rest summed into one "rest" entry,
// so the entries always sum to peak_bytes.
struct MemoryProfile {
  static constexpr size_t kMaxLiveBuffers = 32;
  std::string program;   // "jit_f"
  std::string platform;  // "cpu"
  int64_t peak_bytes = 0;
  int64_t argument_bytes = 0, output_bytes = 0, alias_bytes = 0, temp_bytes = 0;
  std::string peak_op;  // the op whose results reached the peak ("" when the arguments did)
  std::vector<LiveBuffer> live_at_peak;
  json::Value to_json() const;
};

// jax.profiler.device_memory_profile: the memory profiles of the compiled programs alive now, as
// a JSON document (pprof needs protobuf code generation; this format is documented in
// docs/profiling.md): {"format": "cujax.device_memory_profile.v1", "programs": [MemoryProfile
// as to_json writes it, ...]}. stop_trace writes it beside the trace as memory_profile.json.
std::string device_memory_profile();

// A stopwatch for the caller's own timings that knows about asynchronous dispatch: while a
// trace is active it records a "timing" span with whether the work dispatched inside it was
// waited for, so `cujax doctor` reports timings that measured only the enqueue.
//
//   profiler::Timer t("step");
//   Array loss = step(x);
//   double seconds = t.stop(loss);  // waits for loss first (block_until_ready)
class Timer {
 public:
  explicit Timer(std::string_view name);
  // Stops and returns the seconds since construction, without waiting: right only when the
  // timed code waited for its results itself.
  double stop();
  // Waits for `results` (anything with block_until_ready()), then stops.
  template <class... Results>
  double stop(const Results&... results) {
    (results.block_until_ready(), ...);
    return stop();
  }

 private:
  std::string name_;
  int64_t start_ns_ = 0;
  int64_t dispatches_ = 0;  // this thread's dispatch count at the start, while tracing
  Span span_;
};

// Events recorded since the process started, in every trace (those a trace drops past its
// limit of events excluded).
int64_t events_recorded();

}  // namespace cujax::profiler
