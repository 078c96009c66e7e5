// The performance doctor: a trace's spans nest per thread, so each instant of a step belongs to
// its innermost span, whose category says what the host was doing; cache misses, transfers and
// their arguments are the evidence for the pitfalls.
#include "cujax/profiler_doctor.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cujax/core/error.h"

namespace cujax::profiler {

namespace {

namespace fs = std::filesystem;

struct Ev {
  char ph = 'X';
  std::string cat, name;
  int64_t tid = 0;
  double ts = 0, dur = 0, self = 0;
  const json::Value* args = nullptr;
  double end() const { return ts + dur; }
  std::string arg(const char* key) const {
    const json::Value* v = args && args->is_object() ? args->get(key) : nullptr;
    return v && v->is_string() ? v->as_string() : "";
  }
  int64_t int_arg(const char* key) const {
    const json::Value* v = args && args->is_object() ? args->get(key) : nullptr;
    return v && v->is_number() ? v->as_int() : 0;
  }
  double num_arg(const char* key) const {
    const json::Value* v = args && args->is_object() ? args->get(key) : nullptr;
    return v && v->is_number() ? v->as_double() : 0;
  }
};

constexpr double kEps = 1e-3;  // a nanosecond, the trace's resolution

std::vector<Ev> read_events(const json::Value& trace) {
  const json::Value* list = trace.is_object() ? trace.get("traceEvents") : nullptr;
  if (!list || !list->is_array()) throw Error("doctor: the trace has no \"traceEvents\" list");
  std::vector<Ev> out;
  for (const json::Value& e : list->as_array()) {
    const json::Value* ph = e.get("ph");
    if (!ph || !ph->is_string() || (ph->as_string() != "X" && ph->as_string() != "i")) continue;
    Ev ev;
    ev.ph = ph->as_string()[0];
    if (const json::Value* c = e.get("cat"); c && c->is_string()) ev.cat = c->as_string();
    ev.name = e.at("name").as_string();
    ev.tid = e.at("tid").as_int();
    ev.ts = e.at("ts").as_double();
    if (ev.ph == 'X') ev.dur = e.at("dur").as_double();
    ev.self = ev.dur;
    ev.args = e.get("args");
    out.push_back(std::move(ev));
  }
  // Per thread by start, parents (the longer) first.
  std::stable_sort(out.begin(), out.end(), [](const Ev& a, const Ev& b) {
    if (a.tid != b.tid) return a.tid < b.tid;
    return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
  });
  return out;
}

// Subtracts each complete event's time from its parent's self time.
void compute_self_times(std::vector<Ev>& events) {
  std::vector<size_t> stack;
  for (size_t i = 0; i < events.size(); ++i) {
    Ev& e = events[i];
    if (e.ph != 'X') continue;
    if (!stack.empty() && events[stack.back()].tid != e.tid) stack.clear();
    while (!stack.empty() && events[stack.back()].end() <= e.ts + kEps) stack.pop_back();
    if (!stack.empty()) events[stack.back()].self -= e.dur;
    stack.push_back(i);
  }
}

// The length of the union of intervals, each clipped to [lo, hi].
double covered(std::vector<std::pair<double, double>> spans, double lo, double hi) {
  std::sort(spans.begin(), spans.end());
  double total = 0, reach = lo;
  for (auto [a, b] : spans) {
    a = std::max(a, reach);
    b = std::min(b, hi);
    if (b > a) {
      total += b - a;
      reach = b;
    }
  }
  return total;
}

std::string ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", us / 1e3);
  return buf;
}

// "i32[4,8] -> i32[3,8]" pairs of a cache-miss reason whose shapes differ in the leading
// dimension alone, which shrank: a smaller batch.
bool smaller_leading_dimension(const std::string& reason) {
  static const std::regex pair(R"((\w+)\[([0-9,]*)\](\{weak\})? -> (\w+)\[([0-9,]*)\])");
  bool any = false;
  for (std::sregex_iterator it(reason.begin(), reason.end(), pair), end; it != end; ++it) {
    const std::smatch& m = *it;
    if (m[1] != m[4]) return false;
    const std::string was = m[2], now = m[5];
    const size_t a = was.find(','), b = now.find(',');
    const std::string was_rest = a == std::string::npos ? "" : was.substr(a);
    const std::string now_rest = b == std::string::npos ? "" : now.substr(b);
    if (was.empty() || now.empty() || was_rest != now_rest) return false;
    if (std::stoll(now.substr(0, b)) >= std::stoll(was.substr(0, a))) return false;
    any = true;
  }
  return any;
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1 << 20));
  return buf;
}

MemoryProfile memory_profile_from_json(const json::Value& v) {
  MemoryProfile m;
  auto str = [&](const json::Value& o, const char* k) {
    const json::Value* x = o.get(k);
    return x && x->is_string() ? x->as_string() : std::string();
  };
  auto num = [&](const json::Value& o, const char* k) {
    const json::Value* x = o.get(k);
    return x && x->is_number() ? x->as_int() : int64_t{0};
  };
  m.program = str(v, "program");
  m.platform = str(v, "platform");
  m.peak_bytes = num(v, "peak_bytes");
  m.argument_bytes = num(v, "argument_bytes");
  m.output_bytes = num(v, "output_bytes");
  m.alias_bytes = num(v, "alias_bytes");
  m.temp_bytes = num(v, "temp_bytes");
  m.peak_op = str(v, "peak_op");
  if (const json::Value* live = v.get("live_at_peak"); live && live->is_array())
    for (const json::Value& b : live->as_array())
      m.live_at_peak.push_back(
          {num(b, "bytes"), str(b, "type"), str(b, "kind"), str(b, "op"), str(b, "source")});
  return m;
}

bool is_collective(const std::string& name) {
  static const std::set<std::string> kOps = {
      "stablehlo.all_reduce", "stablehlo.all_gather",         "stablehlo.reduce_scatter",
      "stablehlo.all_to_all", "stablehlo.collective_permute", "stablehlo.collective_broadcast"};
  return kOps.count(name) > 0;
}

// Findings that need no steps: timings that did not wait, materialized attention logits and
// arrays left unsharded on a mesh.
void trace_findings(const std::vector<Ev>& events,
                    const std::vector<std::pair<double, double>>& device,
                    const DoctorOptions& options, Report& report) {
  // Timer spans that stopped with work still in flight.
  std::vector<const Ev*> timings;
  for (const Ev& e : events)
    if (e.ph == 'X' && e.cat == "timing") timings.push_back(&e);
  std::sort(timings.begin(), timings.end(), [](const Ev* a, const Ev* b) { return a->ts < b->ts; });
  int64_t unwaited = 0;
  const Ev* example = nullptr;
  double after_us = 0;
  for (size_t i = 0; i < timings.size(); ++i) {
    const Ev& t = *timings[i];
    const json::Value* waited = t.args && t.args->is_object() ? t.args->get("waited") : nullptr;
    if (!waited || waited->as_bool()) continue;
    ++unwaited;
    if (!example) {
      example = &t;
      // The device's busy time from the timing's start to the next timing (or a second on).
      const double until = i + 1 < timings.size() ? timings[i + 1]->ts : t.end() + 1e6;
      after_us = covered(device, t.ts, until);
    }
  }
  if (example) {
    char evidence[256];
    std::snprintf(
        evidence, sizeof evidence,
        "timing \"%s\" measured %.3f ms after dispatching %lld program(s) and stopped "
        "without waiting for them; the devices were busy %.3f ms from its start to the next "
        "timing",
        example->name.c_str(), example->dur / 1e3,
        static_cast<long long>(example->int_arg("dispatches")), after_us / 1e3);
    report.findings.push_back(
        {"timing-without-wait",
         std::to_string(unwaited) + " of " + std::to_string(timings.size()) +
             " timing(s) stopped before the work they timed was done (only the dispatch was "
             "measured)",
         evidence,
         "stop the timer with the results, Timer::stop(result) (block_until_ready first), or "
         "call block_until_ready() on the result before reading the clock"});
  }

  // Attention that materialized its (B, N, T, S) logits.
  const Ev* largest = nullptr;
  int64_t large = 0;
  for (const Ev& e : events)
    if (e.ph == 'i' && e.cat == "attention" &&
        e.int_arg("bytes") >= options.attention_logits_bytes) {
      ++large;
      if (!largest || e.int_arg("bytes") > largest->int_arg("bytes")) largest = &e;
    }
  if (largest) {
    const std::string fused = largest->arg("fused_applies");
    report.findings.push_back(
        {"attention-logits",
         "attention materialized its logits " + std::to_string(large) + " time(s) above " +
             mib(static_cast<double>(options.attention_logits_bytes)) +
             "; their memory grows with T * S",
         largest->arg("type") + " logits (" + mib(static_cast<double>(largest->int_arg("bytes"))) +
             "), head dim " + std::to_string(largest->int_arg("head_dim")) + ", inputs " +
             largest->arg("dtype") + "; fused attention would apply: " + fused,
         fused.rfind("yes", 0) == 0
             ? "pass implementation=\"cudnn\" to dot_product_attention (the fused kernel never "
               "materializes the logits)"
             : "on a GPU of compute capability >= 8.0, use bfloat16 inputs with a head dim that "
               "is a multiple of 8 and implementation=\"cudnn\"; otherwise shorten the sequence "
               "or chunk the queries"});
  }

  // Sharded programs whose inputs were all replicated, or whose largest input was replicated
  // while an input of the same leading dimension was split (a batch left whole).
  for (const Ev& e : events) {
    if (e.ph != 'i' || e.cat != "sharding" || !e.args) continue;
    const int64_t n = e.int_arg("devices");
    const json::Value* inputs = e.args->get("inputs");
    if (n < 2 || !inputs || !inputs->is_array() || inputs->as_array().empty()) continue;
    const auto& list = inputs->as_array();
    bool all_replicated = true;
    const json::Value* biggest = nullptr;
    for (const json::Value& in : list) {
      all_replicated = all_replicated && in.at("replicated").as_bool();
      if (!biggest || in.at("bytes").as_int() > biggest->at("bytes").as_int()) biggest = &in;
    }
    std::string evidence;
    if (all_replicated) {
      const int64_t ran_on = e.int_arg("ran_on");
      evidence = e.arg("program") + " got every input replicated on a mesh of " +
                 std::to_string(n) + " devices (" + biggest->at("name").as_string() + ": " +
                 biggest->at("type").as_string() + ", " + biggest->at("sharding").as_string() +
                 "), so it ran on " + std::to_string(ran_on) + " device(s)" +
                 (ran_on > 1 ? ", each computing the whole step" : "");
    } else if (biggest->at("replicated").as_bool()) {
      for (const json::Value& in : list)
        if (!in.at("replicated").as_bool() && in.at("split_leading").as_bool() &&
            in.at("leading").as_int() == biggest->at("leading").as_int()) {
          evidence = e.arg("program") + ": " + biggest->at("name").as_string() + " (" +
                     biggest->at("type").as_string() + ") is replicated on " + std::to_string(n) +
                     " devices while " + in.at("name").as_string() + " (" +
                     in.at("type").as_string() + ", " + in.at("sharding").as_string() +
                     ") is split along the same leading dimension";
          break;
        }
    }
    if (evidence.empty()) continue;
    report.findings.push_back(
        {"unsharded-on-mesh", "an array that should be split across the mesh was left whole",
         evidence,
         "device_put the batch with NamedSharding(mesh, P(\"data\")) (or pass in_shardings to "
         "jit) so that each device gets its rows; keep only the parameters replicated"});
    break;
  }
}

// Collectives' share of the device time of the steps after the first. A device inside a
// collective is mostly waiting for the others to arrive (virtual cpu devices start their
// programs whenever their threads get a core); the communication itself is the time every
// participating device is inside one at once, which is what is compared with the time the
// programs holding collectives ran.
void collectives_finding(const std::vector<Ev>& events, const std::vector<const Ev*>& steps,
                         const DoctorOptions& options, Report& report) {
  if (steps.size() < 2) return;
  const double from = steps[1]->ts, to = steps.back()->end();
  std::vector<std::pair<double, int>> edges;  // (time, +1 entering / -1 leaving)
  std::set<std::string> devices, programs;
  std::map<std::string, int64_t> counts;
  const Ev* execute = nullptr;  // events are per thread by start: the latest execute span
  for (const Ev& e : events) {
    if (e.ph != 'X' || e.ts < from || e.end() > to + kEps) continue;
    if (e.cat == "device") execute = &e;
    if (e.cat != "op" || !is_collective(e.name)) continue;
    if (!execute || execute->tid != e.tid || execute->end() + kEps < e.end()) continue;
    edges.emplace_back(e.ts, 1);
    edges.emplace_back(e.end(), -1);
    devices.insert(execute->arg("device"));
    programs.insert(execute->name);
    ++counts[e.name];
  }
  if (edges.empty()) return;
  std::sort(edges.begin(), edges.end());
  const int all = static_cast<int>(devices.size());
  double coll_us = 0, since = 0;
  int depth = 0;
  for (const auto& [t, d] : edges) {
    if (depth == all && d < 0) coll_us += t - since;
    depth += d;
    if (depth == all) since = t;
  }
  std::vector<std::pair<double, double>> running;
  for (const Ev& e : events)
    if (e.ph == 'X' && e.cat == "device" && e.ts >= from && e.end() <= to + kEps &&
        programs.count(e.name))
      running.emplace_back(e.ts, e.end());
  const double device_us = covered(running, from, to);
  if (device_us <= 0 || coll_us < options.collectives_share * device_us) return;
  std::string ops;
  for (const auto& [name, c] : counts)
    ops += (ops.empty() ? "" : ", ") + name + " x " + std::to_string(c);
  char summary[192];
  std::snprintf(summary, sizeof summary,
                "collectives took %.0f%% of the device time of the steps after the first "
                "(threshold %.0f%%)",
                100 * coll_us / device_us, 100 * options.collectives_share);
  report.findings.push_back(
      {"collectives-share", summary,
       ms(coll_us) + " with all " + std::to_string(all) + " devices inside collectives, of " +
           ms(device_us) + " running the programs that hold them (" + ops + ")",
       "communicate less often or less: larger per-device batches (more compute per all-reduce), "
       "gradient accumulation before the all-reduce, or a mesh axis that keeps the large "
       "contractions local"});
}

struct Miss {
  int64_t step_num;
  std::string function, reason;
};

}  // namespace

const Finding* Report::find(const std::string& id) const {
  for (const Finding& f : findings)
    if (f.id == id) return &f;
  return nullptr;
}

bool Report::has(const std::string& id) const {
  return std::any_of(findings.begin(), findings.end(),
                     [&](const Finding& f) { return f.id == id; });
}

Report diagnose(const json::Value& trace, const GpuStatus* gpu, const DoctorOptions& options) {
  std::vector<Ev> events = read_events(trace);
  compute_self_times(events);
  Report report;

  // Device time: programs' execute spans, on whichever thread ran them.
  std::vector<std::pair<double, double>> device;
  std::set<std::string> devices;
  for (const Ev& e : events)
    if (e.ph == 'X' && e.cat == "device") {
      device.emplace_back(e.ts, e.end());
      devices.insert(e.arg("device"));
    }
  report.device_us = covered(device, -1e300, 1e300);
  report.devices.assign(devices.begin(), devices.end());
  const bool cpu_only =
      !devices.empty() && std::all_of(devices.begin(), devices.end(),
                                      [](const std::string& d) { return d.rfind("cpu:", 0) == 0; });
  if (gpu && cpu_only && (gpu->usable || gpu->installed)) {
    std::string list;
    for (const std::string& d : devices) list += (list.empty() ? "" : ", ") + d;
    report.findings.push_back(
        {"gpu-not-used", "every program ran on the cpu although this machine has a GPU setup",
         "programs ran on " + list + "; " + gpu->verdict,
         gpu->usable ? "run on cuda: drop --platform cpu, or unset CUJAX_PLATFORMS (or put cuda "
                       "first), or jit with JitOptions::platform = \"cuda\""
                     : gpu->fix});
  }

  // Ops by self time.
  std::map<std::pair<std::string, std::string>, OpSummary> ops;
  for (const Ev& e : events) {
    if (e.ph != 'X' || e.cat != "op") continue;
    OpSummary& o = ops[{e.name, e.arg("source")}];
    o.name = e.name;
    o.source = e.arg("source");
    ++o.count;
    o.total_us += e.self;
    o.flops += e.num_arg("flops");
    o.bytes += e.num_arg("bytes");
  }
  for (auto& [key, o] : ops) report.top_ops.push_back(o);
  std::sort(report.top_ops.begin(), report.top_ops.end(),
            [](const OpSummary& a, const OpSummary& b) { return a.total_us > b.total_us; });
  if (report.top_ops.size() > 10) report.top_ops.resize(10);

  // Memory profiles of the programs compiled during the trace (the last of each name).
  for (const Ev& e : events) {
    if (e.ph != 'i' || e.cat != "memory" || !e.args) continue;
    MemoryProfile m = memory_profile_from_json(*e.args);
    auto same = std::find_if(report.memory.begin(), report.memory.end(),
                             [&](const MemoryProfile& o) { return o.program == m.program; });
    if (same != report.memory.end())
      *same = std::move(m);
    else
      report.memory.push_back(std::move(m));
  }
  // The roofline's ceilings: those of the platform that ran the programs.
  if (const json::Value* other = trace.get("otherData"); other && other->is_object())
    if (const json::Value* peaks = other->get("device_peaks"); peaks && peaks->is_object()) {
      const std::string platform =
          report.devices.empty()
              ? "cpu"
              : report.devices.front().substr(0, report.devices.front().find(':'));
      if (const json::Value* p = peaks->get(platform); p && p->is_object()) {
        report.peak_flops_per_s = p->at("flops_per_s").as_double();
        report.peak_bytes_per_s = p->at("bytes_per_s").as_double();
        report.peak_how = p->at("how").as_string();
      }
    }

  // Steps, in time order, each with the events of its thread inside it.
  std::vector<const Ev*> steps;
  for (const Ev& e : events)
    if (e.ph == 'X' && e.cat == "step") steps.push_back(&e);
  std::sort(steps.begin(), steps.end(), [](const Ev* a, const Ev* b) { return a->ts < b->ts; });
  std::vector<Miss> misses;
  std::map<int64_t, std::set<std::string>> fetched;  // per step: the arrays copied to the host
  bool cache_dir = false;
  int64_t cache_hits_in_first = 0;
  for (const Ev* step : steps) {
    StepSummary s;
    s.step_num = step->int_arg("step_num");
    s.name = step->name;
    s.wall_us = step->dur;
    s.device_us = covered(device, step->ts, step->end());
    auto first = std::lower_bound(
        events.begin(), events.end(), *step,
        [](const Ev& a, const Ev& b) { return a.tid != b.tid ? a.tid < b.tid : a.ts < b.ts; });
    for (auto it = first; it != events.end() && it->tid == step->tid && it->ts < step->end();
         ++it) {
      const Ev& e = *it;
      if (&e == step) {
        s.other_us += e.self;
        continue;
      }
      if (e.end() > step->end() + kEps) continue;  // not inside this step
      if (e.ph == 'i') {
        if (e.cat == "compile" && e.name.rfind("cache miss", 0) == 0) {
          ++s.compiles;
          misses.push_back({s.step_num, e.arg("function"), e.arg("reason")});
        }
        if (step == steps.front() && e.name.rfind("persistent cache hit", 0) == 0)
          ++cache_hits_in_first;
        continue;
      }
      if (e.cat == "compile") {
        s.compile_us += e.self;
        if (step == steps.front() && !e.arg("persistent_cache_dir").empty()) cache_dir = true;
      } else if (e.cat == "dispatch" || e.cat == "device" || e.cat == "op") {
        s.dispatch_us += e.self;  // on cpu, small programs run inline in their dispatch
      } else if (e.cat == "transfer") {
        s.transfer_us += e.self;
        const std::string array = e.arg("array");
        if (e.arg("direction") == "device_to_host" &&
            array.find("closed over by a trace") == std::string::npos) {
          ++s.device_to_host;
          s.device_to_host_bytes += e.int_arg("bytes");
          fetched[s.step_num].insert(array);
        }
      } else if (e.cat == "wait") {
        s.wait_us += e.self;
      } else {
        s.other_us += e.self;
      }
    }
    report.steps.push_back(s);
  }
  trace_findings(events, device, options, report);
  if (report.steps.empty()) return report;

  // The first step compiles: expected once, but it must not be timed with the others. It
  // dominates when it is most of the step, or longer than two typical later steps.
  const StepSummary& first = report.steps.front();
  std::vector<double> later_walls;
  for (size_t i = 1; i < report.steps.size(); ++i) later_walls.push_back(report.steps[i].wall_us);
  std::sort(later_walls.begin(), later_walls.end());
  // The lower median: one slow later step (a wait, an evaluation) must not hide the compile.
  const double typical = later_walls.empty() ? 0 : later_walls[(later_walls.size() - 1) / 2];
  if (first.compile_us > 0 && (first.compile_us >= 0.5 * first.wall_us ||
                               (typical > 0 && first.compile_us > 2 * typical))) {
    Finding f;
    f.id = "first-step-compilation";
    char share[96];
    std::snprintf(share, sizeof share, "%.0f%% of it", 100 * first.compile_us / first.wall_us);
    if (typical > 0)
      std::snprintf(share + std::strlen(share), sizeof share - std::strlen(share),
                    ", as long as %.0f later steps", first.compile_us / typical);
    f.summary = "the first step (" + first.name + " " + std::to_string(first.step_num) +
                ") is dominated by tracing and compilation (" + share + ")";
    f.evidence =
        "step " + std::to_string(first.step_num) + " took " + ms(first.wall_us) + ", of which " +
        ms(first.compile_us) + " tracing and compiling (" + std::to_string(first.compiles) +
        " jit cache miss(es)); persistent compile cache " +
        (cache_hits_in_first > 0 ? "warm (" + std::to_string(cache_hits_in_first) + " hits)"
         : cache_dir             ? "cold (set, but no hits)"
                                 : "off");
    f.fix =
        "leave the first step out of timings (run it once before timing), and set "
        "CUJAX_COMPILATION_CACHE_DIR (set_compilation_cache_dir) so that restarts skip "
        "compilation";
    report.findings.push_back(f);
  }

  // Compilations after the first step: the last step's smaller batch, or changing shapes. A
  // function's first compilation (an evaluation step's, say) is not one.
  const int64_t last_step = report.steps.back().step_num;
  std::vector<const Miss*> recompiles, final_batch;
  for (const Miss& m : misses) {
    if (m.step_num == first.step_num || m.reason.rfind("never seen function", 0) == 0) continue;
    (m.step_num == last_step && report.steps.size() > 1 && smaller_leading_dimension(m.reason)
         ? final_batch
         : recompiles)
        .push_back(&m);
  }
  if (!final_batch.empty()) {
    const Miss& m = *final_batch.front();
    report.findings.push_back(
        {"incomplete-final-batch",
         "the last step's smaller batch compiled " + m.function + " again",
         "step " + std::to_string(m.step_num) + ": jit cache miss of " + m.function + ": " +
             m.reason,
         "drop the incomplete final batch (drop_remainder) or pad it to the full batch size and "
         "mask the padding out of the loss"});
  }
  if (!recompiles.empty()) {
    const Miss& m = *recompiles.front();
    std::string steps_list;
    std::set<int64_t> where;
    for (const Miss* r : recompiles) where.insert(r->step_num);
    for (int64_t s : where) steps_list += (steps_list.empty() ? "" : ", ") + std::to_string(s);
    report.findings.push_back(
        {"recompilation",
         std::to_string(recompiles.size()) + " compilation(s) after the first step, in step(s) " +
             steps_list,
         "step " + std::to_string(m.step_num) + ": jit cache miss of " + m.function + ": " +
             m.reason,
         "keep the shapes, dtypes and static arguments of a jitted function's arguments fixed "
         "across steps: pad inputs to a few bucket sizes, and pass changing Python-side values as "
         "arrays rather than static arguments"});
  }

  // Device-to-host copies inside most steps: each waits for the step's results.
  int64_t later = 0, syncing = 0, copies = 0;
  std::set<std::string> arrays;
  for (const StepSummary& s : report.steps) {
    if (s.step_num == first.step_num) continue;
    ++later;
    if (s.device_to_host == 0) continue;
    ++syncing;
    copies += s.device_to_host;
    arrays.insert(fetched[s.step_num].begin(), fetched[s.step_num].end());
  }
  if (later >= 2 && 2 * syncing >= later) {
    std::string list;
    for (const std::string& a : arrays) list += (list.empty() ? "" : ", ") + a;
    char per_step[32];
    std::snprintf(per_step, sizeof per_step, "%.1f", static_cast<double>(copies) / syncing);
    report.findings.push_back(
        {"host-sync-every-step",
         "the host copies results to itself in " + std::to_string(syncing) + " of " +
             std::to_string(later) + " steps, waiting for each step to finish",
         std::string(per_step) + " device-to-host transfer(s) per step (" + list + ")",
         "keep metrics on the device (accumulate the loss as an array) and fetch them every N "
         "steps or at the end; item() and float(loss) in the loop stop the host from running "
         "ahead of the device"});
  }
  collectives_finding(events, steps, options, report);
  return report;
}

std::string Report::str() const {
  std::ostringstream out;
  char line[256];
  if (steps.empty()) {
    out << "no steps in the trace (mark them with profiler::StepTraceAnnotation)\n";
  } else {
    out << steps.size()
        << " step(s); host time per step by what the host did (ms), and the "
           "devices' busy time:\n";
    std::snprintf(line, sizeof line, "%8s %9s %9s %9s %9s %9s %9s %9s %5s\n", "step", "wall",
                  "compile", "dispatch", "transfer", "wait", "other", "device", "d2h");
    out << line;
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps.size() > 20 && i == 10) {
        out << "     ...\n";
        i = steps.size() - 10;
      }
      const StepSummary& s = steps[i];
      std::snprintf(line, sizeof line, "%8lld %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %5lld\n",
                    static_cast<long long>(s.step_num), s.wall_us / 1e3, s.compile_us / 1e3,
                    s.dispatch_us / 1e3, s.transfer_us / 1e3, s.wait_us / 1e3, s.other_us / 1e3,
                    s.device_us / 1e3, static_cast<long long>(s.device_to_host));
      out << line;
    }
  }
  if (!top_ops.empty()) {
    out << "top ops by time (" << ms(device_us) << " of device time in the trace)";
    if (peak_flops_per_s > 0)
      std::snprintf(line, sizeof line,
                    "; achieved rates against the peak of %.1f GFLOP/s and %.1f GB/s (%s)",
                    peak_flops_per_s / 1e9, peak_bytes_per_s / 1e9, peak_how.c_str());
    out << (peak_flops_per_s > 0 ? line : "") << ":\n";
    for (const OpSummary& o : top_ops) {
      std::snprintf(line, sizeof line, "  %10.3f ms %7lld x  %s", o.total_us / 1e3,
                    static_cast<long long>(o.count), o.name.c_str());
      out << line << (o.source.empty() ? "" : "  (" + o.source + ")");
      if (o.total_us > 0 && (o.flops > 0 || o.bytes > 0)) {
        // The roofline: the op's arithmetic intensity against the ridge point says which
        // ceiling bounds it.
        const double fs = o.flops / (o.total_us * 1e-6), bs = o.bytes / (o.total_us * 1e-6);
        std::snprintf(line, sizeof line, "  %.2f GFLOP/s", fs / 1e9);
        out << line;
        if (peak_flops_per_s > 0) {
          std::snprintf(line, sizeof line, " (%.1f%%)", 100 * fs / peak_flops_per_s);
          out << line;
        }
        std::snprintf(line, sizeof line, ", %.2f GB/s", bs / 1e9);
        out << line;
        if (peak_bytes_per_s > 0) {
          std::snprintf(line, sizeof line, " (%.1f%%)", 100 * bs / peak_bytes_per_s);
          out << line;
        }
        if (peak_flops_per_s > 0 && peak_bytes_per_s > 0 && o.bytes > 0) {
          const double intensity = o.flops / o.bytes, ridge = peak_flops_per_s / peak_bytes_per_s;
          std::snprintf(line, sizeof line, ", %.2f FLOP/B: %s-bound", intensity,
                        intensity < ridge ? "memory" : "compute");
          out << line;
        }
      }
      out << "\n";
    }
  }
  if (!memory.empty()) {
    out << "memory: the buffer plan of each program compiled in the trace\n";
    for (const MemoryProfile& m : memory) {
      out << "  " << m.program << " (" << m.platform << "): peak " << mib(m.peak_bytes)
          << " (arguments " << mib(m.argument_bytes) << ", outputs " << mib(m.output_bytes)
          << ", temporaries " << mib(m.temp_bytes) << ", aliased " << mib(m.alias_bytes) << ")"
          << (m.peak_op.empty() ? "" : " after " + m.peak_op) << "\n";
      for (size_t i = 0; i < m.live_at_peak.size() && i < 5; ++i) {
        const LiveBuffer& b = m.live_at_peak[i];
        out << "      " << mib(b.bytes) << "  " << b.type << "  "
            << (b.kind == "argument" || b.op.empty() ? b.op.empty() ? b.kind : b.op
                                                     : b.kind + " from " + b.op)
            << (b.source.empty() ? "" : "  (" + b.source + ")") << "\n";
      }
      if (m.live_at_peak.size() > 5)
        out << "      ... " << m.live_at_peak.size() - 5 << " more live buffer entries\n";
    }
  }
  if (findings.empty()) {
    out << "no pitfalls found\n";
  } else {
    out << findings.size() << " pitfall(s):\n";
    for (const Finding& f : findings)
      out << "  [" << f.id << "] " << f.summary << "\n      evidence: " << f.evidence
          << "\n      fix: " << f.fix << "\n";
  }
  return out.str();
}

std::string find_trace_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path;
  if (!fs::is_directory(path, ec))
    throw Error("doctor: " + path + " is neither a trace file nor a directory");
  if (fs::is_regular_file(fs::path(path) / "perfetto_trace.json", ec))
    return (fs::path(path) / "perfetto_trace.json").string();
  // A log directory: its latest run (run names sort by time).
  std::string latest;
  const fs::path runs = fs::path(path) / "plugins" / "profile";
  if (fs::is_directory(runs, ec))
    for (const auto& run : fs::directory_iterator(runs, ec)) {
      const fs::path file = run.path() / "perfetto_trace.json";
      if (fs::is_regular_file(file, ec) && file.string() > latest) latest = file.string();
    }
  if (latest.empty())
    throw Error("doctor: no trace in " + path +
                " (expected plugins/profile/<run>/perfetto_trace.json under it, as --profile "
                "writes)");
  return latest;
}

Report diagnose_trace(const std::string& path, const GpuStatus* gpu) {
  const std::string file = find_trace_file(path);
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) throw Error("doctor: cannot read " + file);
  return diagnose(json::parse(text.str(), file), gpu);
}

}  // namespace cujax::profiler
