// The trace recorder: spans and instants of every thread go into one list while a trace is
// active, and stop_trace writes them in the trace-event JSON format (Chrome's "JSON Object
// Format": a "traceEvents" list of complete "X", instant "i" and metadata "M" events).
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <new>

#include "cujax/core/error.h"
#include "cujax/profiler.h"
#include "profiler/hooks.h"

namespace cujax::profiler {

namespace detail {

std::atomic<bool> tracing{false};

struct OpenSpan {
  const char* category;
  std::string name;
  json::Value args;
  int64_t start_ns;
  uint64_t session;
};

}  // namespace detail

namespace {

// A trace keeps at most this many events (about 200 bytes each); later ones are counted as
// dropped, so that a long loop traced by mistake cannot exhaust memory.
constexpr size_t kMaxEvents = size_t{1} << 21;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t thread_id() {
  thread_local const int64_t tid = static_cast<int64_t>(::syscall(SYS_gettid));
  return tid;
}

struct Event {
  char phase;  // 'X' complete, 'i' instant
  const char* category;
  std::string name;
  int64_t ts_ns;
  int64_t dur_ns;
  int64_t tid;
  json::Value args;
};

// Device timelines get tracks of their own, numbered above any thread id Linux hands out.
constexpr int64_t kFirstDeviceTrack = int64_t{1} << 32;

struct Recorder {
  std::mutex mu;
  std::vector<std::function<void()>> stop_hooks;
  std::map<std::string, int64_t> device_tracks;  // "cuda:0" -> its track's tid
  std::atomic<uint64_t> session{0};  // the active trace's number; spans of another are dropped
  std::string log_dir;
  int64_t origin_ns = 0;
  int64_t main_tid = 0;
  std::vector<Event> events;
  int64_t dropped = 0;
};

Recorder& recorder() {
  static Recorder r;
  return r;
}

std::atomic<int64_t> recorded_total{0};

void record(Event e, uint64_t session) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!detail::tracing.load(std::memory_order_relaxed) ||
      r.session.load(std::memory_order_relaxed) != session)
    return;
  if (r.events.size() >= kMaxEvents) {
    ++r.dropped;
    return;
  }
  r.events.push_back(std::move(e));
  recorded_total.fetch_add(1, std::memory_order_relaxed);
}

// Microseconds with three decimals: exact to the nanosecond, so that nesting survives.
std::string micros(int64_t ns) {
  char buf[32];
  const char* sign = ns < 0 ? "-" : "";
  const int64_t a = ns < 0 ? -ns : ns;
  std::snprintf(buf, sizeof buf, "%s%lld.%03lld", sign, static_cast<long long>(a / 1000),
                static_cast<long long>(a % 1000));
  return buf;
}

// Threads are named after what they ran: the one that started the trace is "main", a device's
// worker after the device of its first "execute" span.
std::map<int64_t, std::string> thread_names(const std::vector<Event>& events, int64_t main_tid,
                                            const std::map<std::string, int64_t>& device_tracks) {
  std::map<int64_t, std::string> names;
  names[main_tid] = "main";
  for (const auto& [device, tid] : device_tracks) names[tid] = device + " stream";
  for (const Event& e : events) {
    if (names.count(e.tid)) continue;
    const json::Value* device = e.args.is_object() ? e.args.get("device") : nullptr;
    if (std::string_view(e.category) == "device" && device && device->is_string())
      names[e.tid] = device->as_string() + " worker";
  }
  for (const Event& e : events)
    if (!names.count(e.tid)) names[e.tid] = "thread " + std::to_string(e.tid);
  return names;
}

std::string to_json(std::vector<Event>& events, int64_t origin_ns, int64_t main_tid,
                    const std::map<std::string, int64_t>& device_tracks, int64_t dropped) {
  // Parents before their children: by start, then the longer first.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.dur_ns > b.dur_ns;
  });
  const std::string pid = std::to_string(::getpid());
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  out += "{\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + std::to_string(main_tid) +
         ",\"name\":\"process_name\",\"args\":{\"name\":\"cujax\"}}";
  for (const auto& [tid, name] : thread_names(events, main_tid, device_tracks))
    out += ",\n{\"ph\":\"M\",\"pid\":" + pid + ",\"tid\":" + std::to_string(tid) +
           ",\"name\":\"thread_name\",\"args\":{\"name\":" + json::quote(name) + "}}";
  for (const Event& e : events) {
    out += ",\n{\"ph\":\"";
    out += e.phase;
    out += "\",\"cat\":" + json::quote(e.category) + ",\"name\":" + json::quote(e.name) +
           ",\"pid\":" + pid + ",\"tid\":" + std::to_string(e.tid) +
           ",\"ts\":" + micros(e.ts_ns - origin_ns);
    if (e.phase == 'X') out += ",\"dur\":" + micros(e.dur_ns);
    if (e.phase == 'i') out += ",\"s\":\"t\"";
    if (e.args.is_object()) out += ",\"args\":" + json::dump(e.args);
    out += "}";
  }
  json::Value other = json::Value::object();
  other.set("producer", std::string("cujax ") + CUJAX_VERSION);
  other.set("dropped_events", dropped);
  other.set("device_peaks", device_peaks());
  out += "\n],\"otherData\":" + json::dump(other) + "}\n";
  return out;
}

std::string run_name() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y_%m_%d_%H_%M_%S", &tm);
  return buf;
}

}  // namespace

namespace detail {

uint64_t session() {
  return recorder().session.load(std::memory_order_relaxed);
}

int64_t clock_ns() {
  return now_ns();
}

void device_run(const DeviceRun& run) {
  if (!active()) return;
  Recorder& r = recorder();
  int64_t tid = 0;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto [it, added] = r.device_tracks.try_emplace(
        run.device, kFirstDeviceTrack + static_cast<int64_t>(r.device_tracks.size()));
    tid = it->second;
  }
  const double run_ms = std::max(run.ms, 0.0);
  const auto ns = [](double ms) { return static_cast<int64_t>(ms * 1e6); };
  record({'X', "device", "run on " + run.device, run.start_ns, ns(run_ms), tid,
          json::Value::object({{"device", run.device}, {"ops", int64_t(run.ops.size())}})},
         run.session);
  for (const DeviceOp& op : run.ops) {
    const double start = std::clamp(op.start_ms, 0.0, run_ms);
    const double end = std::clamp(op.end_ms, start, run_ms);
    json::Value args = json::Value::object({{"long_name", op.where}, {"device", run.device}});
    if (!op.loc.empty()) args.set("source", op.loc);
    if (op.flops > 0) args.set("flops", op.flops);
    if (op.bytes > 0) args.set("bytes", op.bytes);
    record(
        {'X', "op", op.name, run.start_ns + ns(start), ns(end) - ns(start), tid, std::move(args)},
        run.session);
  }
}

void add_stop_hook(std::function<void()> hook) {
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  r.stop_hooks.push_back(std::move(hook));
}

void close(OpenSpan* open) noexcept {
  const int64_t end = now_ns();
  const std::unique_ptr<OpenSpan> span(open);
  try {
    record({'X', span->category, std::move(span->name), span->start_ns, end - span->start_ns,
            thread_id(), std::move(span->args)},
           span->session);
  } catch (const std::bad_alloc&) {  // called from destructors: a span lost, not the process
  }
}

}  // namespace detail

void start_trace(const std::string& log_dir) {
  if (log_dir.empty()) throw Error("profiler::start_trace: the log directory is empty");
  Recorder& r = recorder();
  std::lock_guard<std::mutex> lock(r.mu);
  if (detail::tracing.load(std::memory_order_relaxed))
    throw Error("profiler::start_trace(\"" + log_dir + "\"): a trace into \"" + r.log_dir +
                "\" is already being recorded; stop_trace() it first");
  r.log_dir = log_dir;
  r.events.clear();
  r.device_tracks.clear();
  r.dropped = 0;
  r.main_tid = thread_id();
  r.origin_ns = now_ns();
  r.session.fetch_add(1, std::memory_order_relaxed);
  detail::tracing.store(true, std::memory_order_release);
}

std::string stop_trace() {
  Recorder& r = recorder();
  std::vector<Event> events;
  std::map<std::string, int64_t> device_tracks;
  std::string dir;
  int64_t origin = 0, main_tid = 0, dropped = 0;
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (!detail::tracing.load(std::memory_order_relaxed))
      throw Error("profiler::stop_trace: no trace is being recorded (start_trace first)");
    hooks = r.stop_hooks;
  }
  for (const auto& hook : hooks) hook();  // outside the lock: hooks record
  {
    std::lock_guard<std::mutex> lock(r.mu);
    detail::tracing.store(false, std::memory_order_release);
    events.swap(r.events);
    device_tracks.swap(r.device_tracks);
    dir = r.log_dir;
    origin = r.origin_ns;
    main_tid = r.main_tid;
    dropped = r.dropped;
  }
  namespace fs = std::filesystem;
  const fs::path runs = fs::path(dir) / "plugins" / "profile";
  const std::string name = run_name();
  fs::path run = runs / name;
  for (int k = 1; fs::exists(run); ++k) run = runs / (name + "_" + std::to_string(k));
  std::error_code ec;
  fs::create_directories(run, ec);
  if (ec) throw Error("profiler::stop_trace: cannot create " + run.string() + ": " + ec.message());
  const fs::path file = run / "perfetto_trace.json";
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << to_json(events, origin, main_tid, device_tracks, dropped);
  if (!out) throw Error("profiler::stop_trace: cannot write " + file.string());
  const fs::path memory = run / "memory_profile.json";
  std::ofstream(memory, std::ios::binary | std::ios::trunc) << device_memory_profile();
  if (dropped > 0)
    std::fprintf(stderr,
                 "cujax: the trace kept its first %zu events and dropped %lld; trace fewer "
                 "steps\n",
                 kMaxEvents, static_cast<long long>(dropped));
  return file.string();
}

Trace::Trace(const std::string& log_dir) {
  start_trace(log_dir);
}

Trace::~Trace() {
  if (stopped_) return;
  try {
    stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cujax: %s\n", e.what());
  }
}

std::string Trace::stop() {
  stopped_ = true;
  return stop_trace();
}

Span::Span(const char* category, std::string_view name, json::Value args) {
  if (!active()) return;
  open_ = new detail::OpenSpan{category, std::string(name), std::move(args), now_ns(),
                               recorder().session.load(std::memory_order_relaxed)};
}

void Span::arg(const std::string& key, json::Value value) {
  if (!open_) return;
  if (!open_->args.is_object()) open_->args = json::Value::object();
  open_->args.set(key, std::move(value));
}

TraceAnnotation::TraceAnnotation(std::string_view name, json::Value args)
    : span_("annotation", name, std::move(args)) {}

StepTraceAnnotation::StepTraceAnnotation(std::string_view name, int64_t step_num)
    : span_(active() ? Span("step", name, json::Value::object({{"step_num", step_num}})) : Span()) {
}

void instant(const char* category, std::string_view name, json::Value args) {
  if (!active()) return;
  record({'i', category, std::string(name), now_ns(), 0, thread_id(), std::move(args)},
         recorder().session.load(std::memory_order_relaxed));
}

int64_t events_recorded() {
  return recorded_total.load(std::memory_order_relaxed);
}

}  // namespace cujax::profiler
