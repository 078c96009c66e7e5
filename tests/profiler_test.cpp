// The profiler: a traced jitted training step gives a valid trace-event JSON file with compile,
// dispatch, transfer, per-op and step spans nested per thread; source locations of parsed
// modules; nothing recorded without a trace.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "cujax/core/json.h"
#include "cujax/ir/parser.h"
#include "cujax/models/lm.h"
#include "cujax/numpy.h"
#include "cujax/profiler.h"
#include "cujax/profiler_doctor.h"
#include "cujax/runtime/backend.h"
#include "profiler/hooks.h"
#include "profiler/source_location.h"
#include "test_models.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
namespace jnp = cujax::numpy;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("cujax_profiler_test_" + std::to_string(::getpid()) + "_" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

json::Value read_json(const std::string& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str(), file);
}

// One event of the trace, as a reader sees it.
struct Ev {
  std::string ph, cat, name;
  int64_t pid = 0, tid = 0;
  double ts = 0, dur = 0;
  const json::Value* args = nullptr;
  double end() const { return ts + dur; }
  std::string arg(const char* key) const {
    const json::Value* v = args ? args->get(key) : nullptr;
    return v && v->is_string() ? v->as_string() : "";
  }
  int64_t int_arg(const char* key) const {
    const json::Value* v = args ? args->get(key) : nullptr;
    return v && v->is_number() ? v->as_int() : -1;
  }
};

// Checks the fields Perfetto's JSON importer needs and returns the events.
std::vector<Ev> events_of(const json::Value& trace) {
  std::vector<Ev> out;
  for (const json::Value& e : trace.at("traceEvents").as_array()) {
    Ev ev;
    ev.ph = e.at("ph").as_string();
    ev.name = e.at("name").as_string();
    ev.pid = e.at("pid").as_int();
    ev.tid = e.at("tid").as_int();
    ev.args = e.get("args");
    if (ev.ph == "M") {
      EXPECT_TRUE(ev.args && ev.args->get("name")) << ev.name;
      continue;
    }
    EXPECT_TRUE(ev.ph == "X" || ev.ph == "i") << ev.ph;
    ev.cat = e.at("cat").as_string();
    ev.ts = e.at("ts").as_double();
    if (ev.ph == "X") ev.dur = e.at("dur").as_double();
    EXPECT_GE(ev.ts, 0) << ev.name;
    EXPECT_GE(ev.dur, 0) << ev.name;
    out.push_back(ev);
  }
  return out;
}

// Per thread, every complete event lies within each event that is open when it starts (no
// partial overlaps); returns, per event index, its parent's index (-1 for none).
std::vector<int> check_nesting(const std::vector<Ev>& events) {
  constexpr double kEps = 1e-3;  // the trace's resolution: a nanosecond
  std::vector<int> order;
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].ph == "X") order.push_back(static_cast<int>(i));
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const Ev &x = events[a], &y = events[b];
    if (x.pid != y.pid || x.tid != y.tid) return std::pair(x.pid, x.tid) < std::pair(y.pid, y.tid);
    return x.ts != y.ts ? x.ts < y.ts : x.dur > y.dur;
  });
  std::vector<int> parent(events.size(), -1);
  std::vector<int> stack;
  for (size_t k = 0; k < order.size(); ++k) {
    const Ev& e = events[order[k]];
    if (k > 0 && (events[order[k - 1]].tid != e.tid || events[order[k - 1]].pid != e.pid))
      stack.clear();
    while (!stack.empty() && events[stack.back()].end() <= e.ts + kEps) stack.pop_back();
    if (!stack.empty()) {
      const Ev& p = events[stack.back()];
      EXPECT_LE(e.end(), p.end() + kEps)
          << e.name << " [" << e.ts << ", " << e.end() << "] overlaps " << p.name << " [" << p.ts
          << ", " << p.end() << "] on thread " << e.tid;
      parent[order[k]] = stack.back();
    }
    stack.push_back(order[k]);
  }
  return parent;
}

// The index of the nearest enclosing event of category `cat`, or -1.
int ancestor(const std::vector<Ev>& events, const std::vector<int>& parent, int i,
             const std::string& cat) {
  for (int p = parent[i]; p >= 0; p = parent[p])
    if (events[p].cat == cat) return p;
  return -1;
}

data::Batch host_batch(int64_t b, int64_t t, int64_t vocab) {
  std::vector<int32_t> ids(b * (t + 1));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + 3) % vocab);
  std::vector<int32_t> in, target;
  for (int64_t r = 0; r < b; ++r)
    for (int64_t c = 0; c < t; ++c) {
      in.push_back(ids[r * (t + 1) + c]);
      target.push_back(ids[r * (t + 1) + c + 1]);
    }
  return {jnp::array(in, Shape{b, t}), jnp::array(target, Shape{b, t})};
}

TEST(Profiler, TracedTrainingStepHasNestedCompileDispatchTransferOpAndStepSpans) {
  TempDir dir;
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(32, 8, 16), rngs);
  models::OptimizerOptions o;
  o.total_steps = 10;
  auto tx = models::make_optimizer(o);
  State params = nnx::state(model, nnx::VariableKind::Param);
  State opt_state = tx.init(params);
  auto step = models::make_train_step(model, tx, "cpu");

  profiler::start_trace(dir.path.string());
  EXPECT_TRUE(profiler::active());
  EXPECT_THROW(profiler::start_trace(dir.path.string()), Error);
  float loss = 0;
  for (int i = 0; i < 3; ++i) {
    profiler::StepTraceAnnotation annotation("train", i);
    const data::Batch batch = host_batch(4, 8, 32);  // host-to-device transfers
    auto [p, s, metrics] = step(params, opt_state, batch);
    params = p;
    opt_state = s;
    loss = metrics.at("loss").item<float>();  // a device-to-host transfer each step
  }
  {
    profiler::TraceAnnotation annotation("after", json::Value::object({{"loss", double(loss)}}));
    params.begin()->second.block_until_ready();
  }
  const std::string file = profiler::stop_trace();
  EXPECT_FALSE(profiler::active());
  EXPECT_THROW(profiler::stop_trace(), Error);

  EXPECT_EQ(fs::path(file).filename(), "perfetto_trace.json");
  EXPECT_EQ(fs::path(file).parent_path().parent_path(), dir.path / "plugins" / "profile");
  const json::Value trace = read_json(file);
  EXPECT_EQ(trace.at("otherData").at("dropped_events").as_int(), 0);
  const std::vector<Ev> events = events_of(trace);
  const std::vector<int> parent = check_nesting(events);

  std::map<std::string, int> count;
  std::vector<int> steps;
  std::map<int64_t, int64_t> h2d_bytes, d2h_bytes;  // per step_num
  int ops_in_execute = 0;
  std::map<int64_t, int> compiles;  // per step_num
  for (size_t k = 0; k < events.size(); ++k) {
    const Ev& e = events[k];
    const int i = static_cast<int>(k);
    ++count[e.cat];
    const int step_of = ancestor(events, parent, i, "step");
    const int64_t step_num = step_of < 0 ? -1 : events[step_of].int_arg("step_num");
    if (e.cat == "step") {
      EXPECT_EQ(e.name, "train");
      EXPECT_EQ(e.int_arg("step_num"), static_cast<int64_t>(steps.size()));
      steps.push_back(i);
    }
    if (e.cat == "transfer") {
      (e.arg("direction") == "host_to_device" ? h2d_bytes : d2h_bytes)[step_num] +=
          e.int_arg("bytes");
      EXPECT_EQ(e.arg("device"), "cpu:0");
    }
    if (e.cat == "op") {
      EXPECT_FALSE(e.arg("long_name").empty()) << e.name;
      ops_in_execute += ancestor(events, parent, i, "device") >= 0;
    }
    if (e.cat == "compile" && e.name.rfind("compile jit_", 0) == 0) {
      EXPECT_EQ(e.arg("platform"), "cpu");
      ++compiles[step_num];
    }
  }
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_GE(count["compile"], 3);  // trace, compile, cpu compile, the cache miss
  EXPECT_GE(count["dispatch"], 3);
  EXPECT_GE(count["device"], 3);
  EXPECT_GT(count["op"], 50);
  EXPECT_EQ(count["annotation"], 1);
  EXPECT_EQ(ops_in_execute, count["op"]);  // every op span inside its program's execute span
  // After the first step (whose tracing moves scalar constants around): the batch's two
  // i32[4,8] arrays in, the f32[] loss out.
  for (int64_t s : {1, 2}) {
    EXPECT_EQ(h2d_bytes[s], 2 * 4 * 8 * 4) << s;
    EXPECT_EQ(d2h_bytes[s], 4) << s;
  }
  EXPECT_GE(h2d_bytes[0], 2 * 4 * 8 * 4);
  EXPECT_GE(compiles[0], 1);  // the step's program, with the eager ops' own
  EXPECT_EQ(compiles[1] + compiles[2], 0);
  auto named = [&](const std::string& prefix) {
    return std::count_if(events.begin(), events.end(),
                         [&](const Ev& e) { return e.name.rfind(prefix, 0) == 0; });
  };
  EXPECT_EQ(named("trace fn"), 0);
  EXPECT_GE(named("trace "), 1);
  EXPECT_GE(named("cpu compile jit_"), 1);
  EXPECT_GE(named("execute jit_"), 3);
  EXPECT_GE(named("stablehlo.dot_general"), 1);
  // The one jit compile of the step: its cache miss carries the reason.
  bool first_miss = false;
  for (const Ev& e : events)
    if (e.name.rfind("cache miss", 0) == 0 && e.arg("reason").rfind("never seen function", 0) == 0)
      first_miss = true;
  EXPECT_TRUE(first_miss);
  EXPECT_EQ(step.compile_count(), 1);
}

TEST(Profiler, NoEventsAreRecordedWithoutATrace) {
  ASSERT_FALSE(profiler::active());
  const int64_t before = profiler::events_recorded();
  Array x = jnp::array(std::vector<float>{1, 2, 3, 4}, Shape{4});
  auto f = jit([](const Array& a) { return a * 2.0f + 1.0f; });
  // The hooks' cost with no trace: one relaxed load each. Timed for the log, not asserted.
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) x = f(x);
  x.block_until_ready();
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  std::printf("1000 jitted calls with no trace: %.2f us per call\n", us / 1000);
  { profiler::StepTraceAnnotation step("train", 0); }
  { profiler::TraceAnnotation annotation("noop"); }
  profiler::instant("test", "noop");
  EXPECT_EQ(profiler::events_recorded(), before);
}

TEST(Profiler, OpSpansCarryTheSourceLocationsOfParsedModules) {
  const std::string text = R"(module @jit_f {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.sine %arg0 : tensor<4xf32> loc(#loc2)
    %1 = stablehlo.dot_general %0, %0, contracting_dims = [0] x [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32> loc(#loc3)
    %2 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f32>) -> tensor<4xf32>
    return %2 : tensor<4xf32>
  }
}
#loc1 = loc("model.py":3:4)
#loc2 = loc("jit(f)/sin"(#loc1))
#loc3 = loc("model.py":7:2)
)";
  auto module = ir::parse_module(text);
  auto exe = runtime::get_backend("cpu").compile(*module, "main");
  TempDir dir;
  std::string file;
  {
    profiler::Trace trace(dir.path.string());
    exe->execute_on_host(
        std::vector<HostTensor>{HostTensor::from_vector<float>({1, 2, 3, 4}, Shape{4})});
    file = trace.stop();
  }
  std::map<std::string, std::string> source;
  const json::Value trace = read_json(file);
  for (const Ev& e : events_of(trace))
    if (e.cat == "op") source[e.name] = e.arg("source");
  ASSERT_EQ(source.count("stablehlo.dot_general"), 1u);
  EXPECT_EQ(source["stablehlo.dot_general"], "model.py:7:2");
  EXPECT_EQ(source["stablehlo.broadcast_in_dim"], "");
  // The sine may run fused with what follows it; its span names the op or the fusion.
  const std::string sine = source.count("stablehlo.sine") ? "stablehlo.sine" : "fusion";
  EXPECT_EQ(source[sine], "jit(f)/sin @ model.py:3:4");
}

TEST(Profiler, LocationTableResolvesAliasesNamesAndCallsites) {
  const profiler::LocationTable t(
      {"#loc1 = loc(\"a.py\":1:2)", "#loc2 = loc(\"f\"(#loc1))", "#loc = loc(unknown)"});
  EXPECT_EQ(t.resolve("loc(#loc1)"), "a.py:1:2");
  EXPECT_EQ(t.resolve("loc(#loc2)"), "f @ a.py:1:2");
  EXPECT_EQ(t.resolve("loc(#loc)"), "");
  EXPECT_EQ(t.resolve(""), "");
  EXPECT_EQ(t.resolve("loc(\"x\")"), "");  // a bare name is a value's name, not a place
  EXPECT_EQ(t.resolve("loc(callsite(\"g\"(\"b.py\":5:1) at #loc1))"), "g @ b.py:5:1");
}

// Device timelines (the cuda backend's CUDA-event timings, recorded after the fact): a run and
// its ops on the device's own track, placed from the run's start, ops clamped into the run; a
// run of an earlier trace dropped; a stop hook's run recorded before the trace is written; the
// doctor counts the run as device time and ranks the ops by their device time.
TEST(Profiler, DeviceRunsGoOnTheDevicesOwnTrack) {
  TempDir dir;
  profiler::start_trace(dir.path.string());
  const uint64_t session = profiler::detail::session();
  const int64_t t0 = profiler::detail::clock_ns();
  profiler::DeviceRun run;
  run.session = session;
  run.device = "cuda:0";
  run.start_ns = t0 + 1'000'000;
  run.ms = 2.0;
  run.ops = {{"fusion", "stablehlo.add at 1:2 (fusion_0)", "f.py:3:0", 100, 200, 0.0, 0.5},
             {"stablehlo.dot_general", "stablehlo.dot_general at 2:2", "", 4e6, 800, 0.5, 1.75},
             {"stablehlo.tanh", "stablehlo.tanh at 3:2", "", 0, 0, 1.9, 5.0}};
  profiler::detail::device_run(run);
  profiler::DeviceRun stale = run;
  stale.session = session - 1;
  profiler::detail::device_run(stale);
  static std::optional<profiler::DeviceRun> in_flight;  // what a backend still had running
  in_flight = run;
  in_flight->device = "cuda:1";
  in_flight->start_ns = t0 + 3'000'000;
  static bool hooked = false;
  if (!hooked) {
    profiler::detail::add_stop_hook([] {
      if (in_flight) profiler::detail::device_run(*in_flight);
      in_flight.reset();
    });
    hooked = true;
  }
  const std::string file = profiler::stop_trace();
  EXPECT_FALSE(in_flight.has_value());

  const json::Value trace = read_json(file);
  std::map<int64_t, std::string> track_names;
  for (const json::Value& e : trace.at("traceEvents").as_array())
    if (e.at("ph").as_string() == "M" && e.at("name").as_string() == "thread_name")
      track_names[e.at("tid").as_int()] = e.at("args").at("name").as_string();
  const std::vector<Ev> events = events_of(trace);
  check_nesting(events);
  std::map<std::string, std::vector<Ev>> by_track;
  for (const Ev& e : events) by_track[track_names[e.tid]].push_back(e);
  ASSERT_EQ(by_track["cuda:0 stream"].size(), 4u) << "a run and its 3 ops; the stale run dropped";
  ASSERT_EQ(by_track["cuda:1 stream"].size(), 4u) << "the stop hook's run";
  const std::vector<Ev>& ev = by_track["cuda:0 stream"];
  const Ev& r = ev[0];
  EXPECT_EQ(r.cat, "device");
  EXPECT_EQ(r.name, "run on cuda:0");
  EXPECT_EQ(r.arg("device"), "cuda:0");
  EXPECT_NEAR(r.dur, 2000, 1e-3);
  const double want[3][2] = {{0, 500}, {500, 1250}, {1900, 100}};  // start - run start, dur (us)
  for (int i = 0; i < 3; ++i) {
    const Ev& op = ev[i + 1];
    EXPECT_EQ(op.cat, "op");
    EXPECT_EQ(op.name, run.ops[i].name);
    EXPECT_EQ(op.arg("long_name"), run.ops[i].where);
    EXPECT_NEAR(op.ts - r.ts, want[i][0], 1e-3) << op.name;
    EXPECT_NEAR(op.dur, want[i][1], 1e-3) << op.name;
  }
  EXPECT_EQ(ev[1].arg("source"), "f.py:3:0");
  EXPECT_NEAR(by_track["cuda:1 stream"][0].ts - r.ts, 2000, 1e-3);

  const profiler::Report report = profiler::diagnose_trace(dir.path.string());
  EXPECT_NEAR(report.device_us, 4000, 1e-2) << report.str();
  ASSERT_FALSE(report.top_ops.empty());
  EXPECT_EQ(report.top_ops[0].name, "stablehlo.dot_general");
  EXPECT_NEAR(report.top_ops[0].total_us, 2 * 1250, 1e-2);
  EXPECT_EQ(report.devices, (std::vector<std::string>{"cuda:0", "cuda:1"}));
}

// The roofline ceilings of GPUs from their properties, against their datasheets' dense bf16
// tensor FLOP/s and memory bandwidth (the datasheets' clocks are a little below the peak
// clocks the runtime reports, so FLOP/s may come out up to 10% above).
TEST(ProfilerRoofline, GpuPeaksFromPropertiesMatchDatasheets) {
  struct Known {
    profiler::GpuSpec spec;
    double tflops, tbytes;
  };
  const Known gpus[] = {
      {{"NVIDIA A100-SXM4-40GB", 8, 0, 108, 1410e3, 1215e3, 5120}, 312, 1.555},
      {{"NVIDIA H100 80GB HBM3", 9, 0, 132, 1980e3, 2619e3, 5120}, 989, 3.35},
      {{"NVIDIA H200", 9, 0, 132, 1980e3, 3201e3, 6144}, 989, 4.8},
  };
  for (const Known& g : gpus) {
    const profiler::DevicePeak p = profiler::gpu_peak(g.spec);
    EXPECT_GE(p.flops_per_s / 1e12, g.tflops * 0.99) << g.spec.name;
    EXPECT_LE(p.flops_per_s / 1e12, g.tflops * 1.10) << g.spec.name;
    EXPECT_NEAR(p.bytes_per_s / 1e12, g.tbytes, g.tbytes * 0.03) << g.spec.name;
    EXPECT_NE(p.how.find(g.spec.name), std::string::npos) << p.how;
  }
}

TEST(Profiler, StartTraceNeedsADirectory) {
  EXPECT_THROW(profiler::start_trace(""), Error);
  EXPECT_FALSE(profiler::active());
}

// The doctor, on small loops with and without each pitfall.

Array features(int64_t rows, float scale) {
  std::vector<float> v(rows * 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(i % 13) / 13.0f;
  return jnp::array(v, Shape{rows, 16});
}

struct Loop {
  bool warm_up = false;  // call once before the first step
  int steps = 6;
  int64_t changed_rows = 0;  // step 2's batch rows, when set
  int64_t last_rows = 0;     // the final step's batch rows, when set
  bool fetch_every_step = false;
};

profiler::Report run_traced(const Loop& loop, const profiler::GpuStatus* gpu = nullptr) {
  JitOptions options;
  options.name = "loss";
  options.arg_names = {"w", "x"};
  options.platform = "cpu";
  auto loss =
      jit([](const Array& w, const Array& x) { return jnp::sum(jnp::tanh(jnp::matmul(x, w))); },
          options);
  const Array w = features(16, 0.1f);
  if (loop.warm_up) loss(w, features(8, 1)).block_until_ready();
  TempDir dir;
  profiler::start_trace(dir.path.string());
  Array total;
  for (int i = 0; i < loop.steps; ++i) {
    profiler::StepTraceAnnotation step("train", i);
    int64_t rows = 8;
    if (i == 2 && loop.changed_rows) rows = loop.changed_rows;
    if (i == loop.steps - 1 && loop.last_rows) rows = loop.last_rows;
    const Array l = loss(w, features(rows, 1));
    total = total.valid() ? total + l : l;
    if (loop.fetch_every_step) {
      EXPECT_TRUE(std::isfinite(l.item<float>()));
    }
  }
  EXPECT_TRUE(std::isfinite(total.item<float>()));
  profiler::stop_trace();
  return profiler::diagnose_trace(dir.path.string(), gpu);
}

std::string ids(const profiler::Report& r) {
  std::string s;
  for (const auto& f : r.findings) s += f.id + " ";
  return s + "\n" + r.str();
}

const profiler::Finding& finding(const profiler::Report& r, const std::string& id) {
  for (const auto& f : r.findings)
    if (f.id == id) return f;
  throw Error("no finding " + id);
}

TEST(ProfilerDoctor, CleanLoopHasNoFindings) {
  Loop clean;
  clean.warm_up = true;
  const profiler::Report r = run_traced(clean);
  EXPECT_TRUE(r.findings.empty()) << ids(r);
  ASSERT_EQ(r.steps.size(), 6u);
  for (size_t i = 0; i < r.steps.size(); ++i) {
    EXPECT_EQ(r.steps[i].step_num, static_cast<int64_t>(i));
    EXPECT_EQ(r.steps[i].compiles, 0);
    EXPECT_EQ(r.steps[i].device_to_host, 0);
    EXPECT_GT(r.steps[i].wall_us, 0);
  }
  EXPECT_EQ(r.devices, std::vector<std::string>{"cpu:0"});
  EXPECT_FALSE(r.top_ops.empty());
  EXPECT_NE(r.str().find("no pitfalls found"), std::string::npos);
}

TEST(ProfilerDoctor, FirstStepCompilation) {
  const profiler::Report r = run_traced(Loop{});
  ASSERT_TRUE(r.has("first-step-compilation")) << ids(r);
  EXPECT_EQ(r.findings.size(), 1u) << ids(r);
  EXPECT_EQ(r.steps.at(0).compiles, 1);
  EXPECT_GT(r.steps.at(0).compile_us, 0);
  EXPECT_NE(finding(r, "first-step-compilation").evidence.find("1 jit cache miss"),
            std::string::npos);
  EXPECT_NE(finding(r, "first-step-compilation").evidence.find("persistent compile cache off"),
            std::string::npos);
}

TEST(ProfilerDoctor, RecompilationNamesTheArgumentThatChanged) {
  Loop loop;
  loop.warm_up = true;
  loop.changed_rows = 6;
  const profiler::Report r = run_traced(loop);
  ASSERT_TRUE(r.has("recompilation")) << ids(r);
  EXPECT_FALSE(r.has("incomplete-final-batch")) << ids(r);
  const profiler::Finding& f = finding(r, "recompilation");
  EXPECT_NE(f.evidence.find("step 2"), std::string::npos) << f.evidence;
  EXPECT_NE(f.evidence.find("argument x: f32[8,16] -> f32[6,16]"), std::string::npos) << f.evidence;
  EXPECT_EQ(r.steps.at(2).compiles, 1);
}

TEST(ProfilerDoctor, IncompleteFinalBatch) {
  Loop loop;
  loop.warm_up = true;
  loop.last_rows = 5;
  const profiler::Report r = run_traced(loop);
  ASSERT_TRUE(r.has("incomplete-final-batch")) << ids(r);
  EXPECT_FALSE(r.has("recompilation")) << ids(r);
  EXPECT_NE(finding(r, "incomplete-final-batch").evidence.find("f32[8,16] -> f32[5,16]"),
            std::string::npos);
}

TEST(ProfilerDoctor, HostSyncEveryStep) {
  Loop loop;
  loop.warm_up = true;
  loop.fetch_every_step = true;
  const profiler::Report r = run_traced(loop);
  ASSERT_TRUE(r.has("host-sync-every-step")) << ids(r);
  EXPECT_EQ(r.findings.size(), 1u) << ids(r);
  EXPECT_NE(finding(r, "host-sync-every-step")
                .evidence.find("1.0 device-to-host transfer(s) per step (f32[])"),
            std::string::npos)
      << finding(r, "host-sync-every-step").evidence;
  for (const auto& s : r.steps) EXPECT_EQ(s.device_to_host, 1);
}

TEST(ProfilerDoctor, GpuNotUsedWhenOneIsThere) {
  Loop clean;
  clean.warm_up = true;
  profiler::GpuStatus usable;
  usable.usable = usable.installed = true;
  usable.verdict = "GPU used: cuda:0";
  const profiler::Report r = run_traced(clean, &usable);
  ASSERT_TRUE(r.has("gpu-not-used")) << ids(r);
  EXPECT_NE(finding(r, "gpu-not-used").evidence.find("cpu:0"), std::string::npos);
  profiler::GpuStatus none;  // no GPU on the machine: the cpu is all there is
  EXPECT_FALSE(run_traced(clean, &none).has("gpu-not-used"));
}

// The memory profile of a program compiled inside a trace: its peak is the plan's
// (Compiled::memory_analysis), the buffers live at the peak sum to it, and
// device_memory_profile / memory_profile.json list it.
TEST(ProfilerMemory, PeakIsThePlansAndLiveBuffersSumToIt) {
  JitOptions options;
  options.name = "many";
  options.platform = "cpu";
  // 40 outputs, all live at the end: more entries than a profile keeps, so a "rest" entry.
  auto many = jit(
      [](const Array& x, const Array& w) {
        std::vector<Array> outs;
        const Array h = jnp::tanh(jnp::matmul(x, w));
        for (int k = 1; k <= 40; ++k) outs.push_back(h * static_cast<float>(k));
        return outs;
      },
      options);
  const Array x = features(8, 1), w = features(16, 0.1f);
  const auto compiled = many.lower(x, w).compile();
  const int64_t plan_peak = compiled.memory_analysis().peak_memory_in_bytes;
  // Independently: the two arguments and the 40 f32[8,16] outputs are live at the end.
  EXPECT_GE(plan_peak, (8 * 16 + 16 * 16 + 40 * 8 * 16) * 4);
  TempDir dir;
  profiler::start_trace(dir.path.string());
  const auto outs = many(x, w);
  outs.back().block_until_ready();
  const std::string file = profiler::stop_trace();
  const profiler::Report r = profiler::diagnose_trace(file);
  ASSERT_EQ(r.memory.size(), 1u) << r.str();
  const profiler::MemoryProfile& m = r.memory.front();
  EXPECT_EQ(m.program, "jit_many");
  EXPECT_EQ(m.peak_bytes, plan_peak);
  EXPECT_EQ(m.argument_bytes, compiled.memory_analysis().argument_size_in_bytes);
  int64_t sum = 0;
  bool rest = false, output_from_multiply = false;
  for (const profiler::LiveBuffer& b : m.live_at_peak) {
    sum += b.bytes;
    rest = rest || b.kind == "rest";
    output_from_multiply = output_from_multiply || (b.kind == "output" && b.type == "f32[8,16]" &&
                                                    b.op.find("multiply") != std::string::npos);
  }
  EXPECT_EQ(sum, m.peak_bytes);
  EXPECT_TRUE(rest);
  EXPECT_TRUE(output_from_multiply) << r.str();
  EXPECT_LE(m.live_at_peak.size(), profiler::MemoryProfile::kMaxLiveBuffers);
  EXPECT_NE(r.str().find("memory: "), std::string::npos);
  // The file beside the trace, and device_memory_profile while the program lives.
  const json::Value profile =
      read_json((fs::path(file).parent_path() / "memory_profile.json").string());
  EXPECT_EQ(profile.at("format").as_string(), "cujax.device_memory_profile.v1");
  bool listed = false;
  for (const json::Value& p : profile.at("programs").as_array())
    listed = listed || (p.at("program").as_string() == "jit_many" &&
                        p.at("peak_bytes").as_int() == plan_peak);
  EXPECT_TRUE(listed);
  EXPECT_NE(profiler::device_memory_profile().find("\"jit_many\""), std::string::npos);
}

// Op spans carry cost_analysis's FLOPs, and the report's roofline lines use them.
TEST(ProfilerRoofline, OpSpansCarryFlopsAndTheReportRatesThem) {
  JitOptions options;
  options.name = "mm";
  options.platform = "cpu";
  auto mm = jit([](const Array& a, const Array& b) { return jnp::matmul(a, b); }, options);
  const Array a = jnp::ones({64, 128}), b = jnp::ones({128, 32});
  mm(a, b).block_until_ready();
  TempDir dir;
  profiler::start_trace(dir.path.string());
  for (int i = 0; i < 3; ++i) mm(a, b).block_until_ready();
  const std::string file = profiler::stop_trace();
  const json::Value trace = read_json(file);
  const json::Value* peaks = trace.at("otherData").get("device_peaks");
  ASSERT_TRUE(peaks && peaks->get("cpu"));
  EXPECT_GT(peaks->at("cpu").at("flops_per_s").as_double(), 0);
  EXPECT_GT(peaks->at("cpu").at("bytes_per_s").as_double(), 0);
  const profiler::Report r = profiler::diagnose(trace);
  const auto dot = std::find_if(r.top_ops.begin(), r.top_ops.end(),
                                [](const auto& o) { return o.name == "stablehlo.dot_general"; });
  ASSERT_NE(dot, r.top_ops.end()) << r.str();
  EXPECT_EQ(dot->count, 3);
  EXPECT_DOUBLE_EQ(dot->flops, 3 * 2.0 * 64 * 32 * 128);
  EXPECT_DOUBLE_EQ(dot->bytes, 3 * 4.0 * (64 * 128 + 128 * 32 + 64 * 32));
  EXPECT_NE(r.str().find("GFLOP/s"), std::string::npos) << r.str();
}

// profiler::Timer records whether the work it timed was waited for.
TEST(ProfilerTimer, ReportsTimingsThatDidNotWait) {
  JitOptions options;
  options.name = "f";
  options.platform = "cpu";
  auto f = jit([](const Array& x) { return jnp::tanh(jnp::matmul(x, x)); }, options);
  const Array x = jnp::ones({64, 64}) * 0.01f;
  f(x).block_until_ready();
  for (bool wait : {false, true}) {
    TempDir dir;
    profiler::start_trace(dir.path.string());
    for (int i = 0; i < 3; ++i) {
      profiler::Timer t("f");
      const Array y = f(x);
      EXPECT_GE(wait ? t.stop(y) : t.stop(), 0);
      y.block_until_ready();
    }
    const profiler::Report r = profiler::diagnose_trace(profiler::stop_trace());
    EXPECT_EQ(r.has("timing-without-wait"), !wait) << r.str();
    if (!wait) {
      EXPECT_NE(finding(r, "timing-without-wait").evidence.find("dispatching 1 program"),
                std::string::npos);
    }
  }
}

TEST(ProfilerDoctor, TraceFileErrors) {
  TempDir dir;
  EXPECT_THROW(profiler::diagnose_trace(dir.path.string()), Error);
  EXPECT_THROW(profiler::diagnose_trace((dir.path / "missing").string()), Error);
  std::ofstream(dir.path / "perfetto_trace.json") << "{\"traceEvents\": 3}";
  EXPECT_THROW(profiler::diagnose_trace(dir.path.string()), Error);
}

}  // namespace
}  // namespace cujax
