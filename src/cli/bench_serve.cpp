// `cujax bench serve`: the HTTP server in-process on loopback, driven by closed-loop
// httplib::Client threads for a fixed time against a server with --max-batch slots and one with a
// single slot, taking turns: streamed /v1/completions (time to first text and per output token)
// or /v1/generate.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "cli/bench.h"
#include "cli/model_dir.h"
#include "cli/serve_http.h"
#include "cujax/core/json.h"
#include "cujax/jit.h"

namespace cujax::cli {

namespace {

using clock = std::chrono::steady_clock;

struct Figures {
  double requests_per_s = 0, tokens_per_s = 0, p50_ms = 0, p99_ms = 0;
  double ttft_p50_ms = 0, tpot_p50_ms = 0;  // streamed completions only
  double mean_batch = 0;                    // active slots per decode step
  int64_t requests = 0, errors_5xx = 0, other_errors = 0;
};

// One request, timed: its status, latency, time to its first text and output tokens.
struct Sample {
  int status = -1;
  double ms = 0, ttft_ms = 0;
  int64_t tokens = 0;
};

Sample post_generate(httplib::Client& client, int64_t max_tokens, int64_t seed) {
  const std::string body =
      "{\"prompt\": \"The model\", \"max_tokens\": " + std::to_string(max_tokens) +
      ", \"temperature\": 0.8, \"seed\": " + std::to_string(seed) + "}";
  Sample s;
  const auto t0 = clock::now();
  const auto res = client.Post("/v1/generate", body, "application/json");
  s.ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  s.status = res ? res->status : -1;
  if (s.status == 200) s.tokens = json::parse(res->body, "reply").at("generated_tokens").as_int();
  return s;
}

// A streamed /v1/completions as an OpenAI client sends it; the tokens are the usage chunk's.
Sample post_completion(httplib::Client& client, int64_t max_tokens, int64_t seed) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = "{\"model\": \"cujax\", \"prompt\": \"The model\", \"max_tokens\": " +
             std::to_string(max_tokens) +
             ", \"temperature\": 0.8, \"seed\": " + std::to_string(seed) +
             ", \"stream\": true, \"stream_options\": {\"include_usage\": true}}";
  Sample s;
  std::string body;
  const auto t0 = clock::now();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (body.empty())
      s.ttft_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    body.append(data, n);
    return true;
  };
  const auto res = client.send(req);
  s.ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  s.status = res ? res->status : -1;
  if (s.status != 200) return s;
  // The usage chunk is the last before [DONE].
  const size_t done = body.rfind("data: [DONE]");
  const size_t at = body.rfind("data: {", done);
  if (done == std::string::npos || at == std::string::npos) {
    s.status = -1;
    return s;
  }
  s.tokens = json::parse(body.substr(at + 6, done - at - 8), "usage chunk")
                 .at("usage")
                 .at("completion_tokens")
                 .as_int();
  return s;
}

int get_status(httplib::Client& client, const std::string& path) {
  const auto res = client.Get(path);
  return res ? res->status : -1;
}

// An engine with max_batch slots behind the HTTP server on loopback, started (compiled).
struct Served {
  Served(models::TransformerLM& model, const State& params, int64_t max_batch, int64_t clients)
      : engine(model, params, max_batch, /*max_queue=*/clients), server(engine, HttpOptions{}) {
    port = server.listen("127.0.0.1", 0);
    httplib::Client probe("127.0.0.1", port);
    // The order is ours here, so this is a check, not a race: 503 until start() returns.
    if (get_status(probe, "/healthz") != 503)
      throw Error("bench serve: /healthz not 503 at start-up");
    engine.start();
    if (get_status(probe, "/healthz") != 200)
      throw Error("bench serve: /healthz not 200 when ready");
  }
  ~Served() {
    server.begin_shutdown();
    engine.drain();
    server.stop();
  }
  serve::Engine engine;
  HttpServer server;
  int port = 0;
};

// Every request's sample of one server's turns, and the time they took.
struct Samples {
  std::vector<double> latencies, ttfts, tpots;
  int64_t tokens = 0, errors_5xx = 0, other_errors = 0;
  double seconds = 0;
};

// One turn: `clients` closed-loop clients against the server for `seconds`; returns its tok/s.
double turn(const Served& served, int64_t clients, double seconds, int64_t max_tokens,
            bool completions, Samples& all) {
  std::vector<Samples> per(clients);
  const auto t0 = clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", served.port);
      client.set_read_timeout(600, 0);
      Samples& mine = per[c];
      while (clock::now() < end) {
        const Sample s = completions ? post_completion(client, max_tokens, c)
                                     : post_generate(client, max_tokens, c);
        if (s.status == 200) {
          mine.latencies.push_back(s.ms);
          mine.tokens += s.tokens;
          if (completions) {
            mine.ttfts.push_back(s.ttft_ms);
            if (s.tokens > 1) mine.tpots.push_back((s.ms - s.ttft_ms) / double(s.tokens - 1));
          }
        } else if (s.status >= 500) {
          ++mine.errors_5xx;
        } else {
          ++mine.other_errors;
        }
      }
    });
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(clock::now() - t0).count();
  int64_t tokens = 0;
  for (const Samples& m : per) {
    all.latencies.insert(all.latencies.end(), m.latencies.begin(), m.latencies.end());
    all.ttfts.insert(all.ttfts.end(), m.ttfts.begin(), m.ttfts.end());
    all.tpots.insert(all.tpots.end(), m.tpots.begin(), m.tpots.end());
    tokens += m.tokens;
    all.errors_5xx += m.errors_5xx;
    all.other_errors += m.other_errors;
  }
  all.tokens += tokens;
  all.seconds += elapsed;
  return static_cast<double>(tokens) / elapsed;
}

Figures figures(Samples s, const serve::EngineStats& stats) {
  Figures f;
  int64_t slot_steps = 0;
  for (size_t b = 0; b < stats.batch_sizes.size(); ++b)
    slot_steps += static_cast<int64_t>(b) * stats.batch_sizes[b];
  if (stats.steps > 0) f.mean_batch = static_cast<double>(slot_steps) / stats.steps;
  f.errors_5xx = s.errors_5xx;
  f.other_errors = s.other_errors;
  std::sort(s.latencies.begin(), s.latencies.end());
  f.requests = static_cast<int64_t>(s.latencies.size());
  if (s.seconds > 0) {
    f.requests_per_s = static_cast<double>(f.requests) / s.seconds;
    f.tokens_per_s = static_cast<double>(s.tokens) / s.seconds;
  }
  if (!s.latencies.empty()) {
    f.p50_ms = s.latencies[s.latencies.size() / 2];
    f.p99_ms = s.latencies[std::min(s.latencies.size() - 1,
                                    static_cast<size_t>(0.99 * s.latencies.size()))];
  }
  if (!s.ttfts.empty()) f.ttft_p50_ms = median_of(s.ttfts);
  if (!s.tpots.empty()) f.tpot_p50_ms = median_of(s.tpots);
  return f;
}

}  // namespace

int bench_serve(const std::vector<std::string>& argv) {
  const Args args(
      {"bench serve",
       "requests/s, tokens/s and latency of the HTTP server, batched and one request at a time",
       {{"model", "DIR", "a cujax train --out folder (default: a randomly initialised --config)"},
        {"config", "NAME", "model config when no --model is given (default: tiny)"},
        {"clients", "C", "concurrent clients (default: 4)"},
        {"seconds", "S", "seconds per server (default: 5)"},
        {"rounds", "R", "turns per server, S/R seconds each, the two alternating (default: 5)"},
        {"max-tokens", "N", "tokens per request (default: 32)"},
        {"max-batch", "B", "the batched server's batch, at least 2 (default: 4)"},
        {"endpoint", "completions|generate", "the API measured (default: completions)"},
        platform_option(),
        profile_option()}},
      argv);
  const std::string platform = use_platform(args);
  const ProfileOption profile(args);
  const int64_t clients = args.integer("clients", 4, 1);
  const double seconds = args.number("seconds", 5, 0.1);
  const int64_t rounds = args.integer("rounds", 5, 1);
  const int64_t max_tokens = args.integer("max-tokens", 32, 1);
  const int64_t max_batch = args.integer("max-batch", 4, 2);
  const std::string endpoint = args.string("endpoint", "completions");
  if (endpoint != "completions" && endpoint != "generate")
    throw UsageError("--endpoint " + endpoint +
                     ": completions (streamed /v1/completions) or generate (/v1/generate)");
  const bool completions = endpoint == "completions";
  if (args.has("model") && args.has("config"))
    throw UsageError("--model and --config: give one (a trained model, or a config's random init)");
  LoadedModel m;
  if (args.has("model")) {
    m = load_model_dir(args.string("model", ""));
  } else {
    try {
      m.config = models::config_by_name(args.string("config", "tiny"));
    } catch (const Error& e) {
      throw UsageError(std::string("--config: ") + e.what());
    }
    m.rngs = std::make_unique<nnx::Rngs>(0);
    m.model = std::make_unique<models::TransformerLM>(m.config, *m.rngs);
    m.params = nnx::state(*m.model, nnx::VariableKind::Param);
  }
  std::printf(
      "cujax bench serve: model %s (%s, max_len %lld) on %s, %lld closed-loop clients for %.1f s "
      "each in %lld turns, %s, prompt \"The model\", max_tokens %lld, temperature 0.8\n",
      args.has("model") ? args.string("model", "").c_str() : m.config.name.c_str(),
      args.has("model") ? "trained" : "random init", static_cast<long long>(m.config.max_len),
      platform.c_str(), static_cast<long long>(clients), seconds, static_cast<long long>(rounds),
      completions ? "streamed POST /v1/completions" : "POST /v1/generate",
      static_cast<long long>(max_tokens));
  // Both servers are compiled first, then take turns: on a shared machine whose speed drifts,
  // each round's gain compares two turns a few seconds apart, and their median is robust to a
  // disturbed round.
  Served batched_server(*m.model, m.params, max_batch, clients);
  Served single_server(*m.model, m.params, 1, clients);
  const int64_t compiles = global_compile_count();
  Samples batched_samples, single_samples;
  std::vector<double> gains;
  for (int64_t r = 0; r < rounds; ++r) {
    const double b = turn(batched_server, clients, seconds / static_cast<double>(rounds),
                          max_tokens, completions, batched_samples);
    const double s = turn(single_server, clients, seconds / static_cast<double>(rounds), max_tokens,
                          completions, single_samples);
    if (s > 0) gains.push_back(b / s);
  }
  if (global_compile_count() != compiles) throw Error("bench serve: compiled while serving");
  const Figures batched = figures(batched_samples, batched_server.engine.stats());
  const Figures single = figures(single_samples, single_server.engine.stats());
  std::printf("%-14s %9s %8s %8s %8s %8s %9s %9s %5s %6s\n", "", "requests", "req/s", "tok/s",
              "p50 ms", "p99 ms", "TTFT ms", "TPOT ms", "5xx", "batch");
  const auto line = [completions](const std::string& name, const Figures& f) {
    std::printf("%-14s %9lld %8.2f %8.1f %8.0f %8.0f ", name.c_str(),
                static_cast<long long>(f.requests), f.requests_per_s, f.tokens_per_s, f.p50_ms,
                f.p99_ms);
    if (completions)
      std::printf("%9.1f %9.2f", f.ttft_p50_ms, f.tpot_p50_ms);
    else
      std::printf("%9s %9s", "-", "-");
    std::printf(" %5lld %6.2f\n", static_cast<long long>(f.errors_5xx), f.mean_batch);
  };
  line("max-batch " + std::to_string(max_batch), batched);
  line("max-batch 1", single);
  if (single.tokens_per_s > 0)
    std::printf("batching gain (tok/s, max-batch %lld over 1): %.2fx\n",
                static_cast<long long>(max_batch), batched.tokens_per_s / single.tokens_per_s);
  if (gains.size() > 1)
    std::printf("batching gain per round (median of %zu): %.2fx\n", gains.size(), median_of(gains));
  const int64_t bad =
      batched.errors_5xx + single.errors_5xx + batched.other_errors + single.other_errors;
  if (bad > 0) std::printf("FAILED: %lld requests did not get 200\n", static_cast<long long>(bad));
  return bad > 0 ? 1 : 0;
}

}  // namespace cujax::cli
