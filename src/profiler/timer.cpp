#include <chrono>

#include "profiler/hooks.h"

namespace cujax::profiler {

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Timer::Timer(std::string_view name)
    : name_(name),
      start_ns_(steady_ns()),
      dispatches_(detail::dispatch_count()),
      span_("timing", name) {}

double Timer::stop() {
  const double seconds = static_cast<double>(steady_ns() - start_ns_) * 1e-9;
  // Work dispatched inside the timing and not waited for after the last dispatch was still
  // running (or queued) when the clock stopped.
  const int64_t dispatched = detail::dispatch_count() - dispatches_;
  span_.arg("dispatches", dispatched);
  span_.arg("waited",
            dispatched == 0 || detail::dispatches_at_last_wait() == detail::dispatch_count());
  span_ = Span();
  return seconds;
}

}  // namespace cujax::profiler
