// The HTTP API of docs/serving.md over a serve::Engine.
#include "cli/serve_http.h"

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <map>
#include <mutex>
#include <sstream>

#include "cli/serve_openai.h"
#include "cujax/core/json.h"
#include "cujax/jit.h"

namespace cujax::cli {

// Fixed-bucket histogram in Prometheus form (outside the anonymous namespace: HttpServer::Metrics
// holds two).
struct PrometheusHistogram {
  std::vector<double> bounds;
  std::vector<int64_t> counts;
  double sum = 0;
  int64_t count = 0;
  explicit PrometheusHistogram(std::vector<double> b)
      : bounds(std::move(b)), counts(bounds.size(), 0) {}
  void observe(double v) {
    for (size_t i = 0; i < bounds.size(); ++i)
      if (v <= bounds[i]) ++counts[i];
    sum += v;
    ++count;
  }
  void write(std::ostringstream& o, const std::string& name, const std::string& help) const {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    for (size_t i = 0; i < bounds.size(); ++i)
      o << name << "_bucket{le=\"" << bounds[i] << "\"} " << counts[i] << "\n";
    o << name << "_bucket{le=\"+Inf\"} " << count << "\n"
      << name << "_sum " << sum << "\n"
      << name << "_count " << count << "\n";
  }
};

namespace {

using Clock = std::chrono::steady_clock;

struct BadRequest {
  int status;
  std::string message;
};

// /v1/generate's body: cujax's own field names.
struct GenerateRequest {
  std::vector<int32_t> prompt;
  serve::Request sampling;  // max_tokens 16, greedy
  bool stream = false;
};

GenerateRequest parse_generate(const std::string& body, int64_t max_seq, int64_t vocab_size) {
  json::Value v;
  try {
    v = json::parse(body, "request body");
  } catch (const std::exception& e) {
    throw BadRequest{400, std::string("malformed JSON: ") + e.what()};
  }
  if (!v.is_object()) throw BadRequest{400, "the body must be a JSON object"};
  GenerateRequest r;
  bool have_prompt = false;
  const auto integer = [](const json::Value& x, const std::string& name) {
    if (x.kind() != json::Value::Kind::Int)
      throw BadRequest{400, "'" + name + "' must be an integer"};
    return x.as_int();
  };
  for (const auto& [key, x] : v.as_object()) {
    if (key == "prompt") {
      if (!x.is_string()) throw BadRequest{400, "'prompt' must be a string"};
      const std::string& p = x.as_string();
      if (p.empty()) throw BadRequest{400, "'prompt' must not be empty"};
      if (!openai::valid_utf8(p)) throw BadRequest{400, "'prompt' is not valid UTF-8"};
      if (static_cast<int64_t>(p.size()) >= max_seq)
        throw BadRequest{400, "'prompt' has " + std::to_string(p.size()) +
                                  " bytes; the context (--max-seq) is " + std::to_string(max_seq)};
      for (unsigned char c : p) {  // ByteTokenizer: the bytes 0..255
        if (c >= vocab_size)
          throw BadRequest{400, "'prompt' holds the byte " + std::to_string(c) +
                                    ", outside the model's " + std::to_string(vocab_size) +
                                    "-token vocabulary"};
        r.prompt.push_back(c);
      }
      have_prompt = true;
    } else if (key == "max_tokens") {
      r.sampling.max_tokens = integer(x, key);
      if (r.sampling.max_tokens < 1 || r.sampling.max_tokens > max_seq)
        throw BadRequest{400, "'max_tokens' must be in [1, " + std::to_string(max_seq) + "]"};
    } else if (key == "temperature") {
      if (!x.is_number()) throw BadRequest{400, "'temperature' must be a number"};
      r.sampling.temperature = x.as_double();
      if (!(r.sampling.temperature >= 0) || r.sampling.temperature > 100)
        throw BadRequest{400, "'temperature' must be in [0, 100]"};
    } else if (key == "top_k") {
      r.sampling.top_k = integer(x, key);
      if (r.sampling.top_k < 0) throw BadRequest{400, "'top_k' must be >= 0"};
    } else if (key == "top_p") {
      if (!x.is_number() || !(x.as_double() > 0 && x.as_double() <= 1))
        throw BadRequest{400, "'top_p' must be a number in (0, 1]"};
      r.sampling.top_p = x.as_double();
    } else if (key == "seed") {
      r.sampling.seed = integer(x, key);
      if (r.sampling.seed < 0 || r.sampling.seed > 0x7fffffff)
        throw BadRequest{400, "'seed' must be in [0, 2147483647]"};
    } else if (key == "stream") {
      if (x.kind() != json::Value::Kind::Bool) throw BadRequest{400, "'stream' must be a boolean"};
      r.stream = x.as_bool();
    } else {
      throw BadRequest{400, "unknown field '" + key + "'"};
    }
  }
  if (!have_prompt) throw BadRequest{400, "'prompt' is required"};
  return r;
}

void reply(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

// /v1/generate's errors are {"error": "..."}; every other path's are OpenAI's error object.
bool openai_path(const std::string& path) {
  return path != "/v1/generate";
}

std::string error_json(int status, const std::string& path, const std::string& message) {
  if (!openai_path(path)) return "{\"error\": " + json::quote(message) + "}";
  openai::ApiError e{status, message, "", ""};
  if (status == 401) e.code = "invalid_api_key";
  if (status == 404) e.code = "not_found";
  if (status == 429) {
    e.type = "requests";
    e.code = "rate_limit_exceeded";
  }
  if (status >= 500) e.type = "server_error";
  return openai::error_body(e);
}

void fail(httplib::Response& res, const std::string& path, int status, const std::string& message) {
  reply(res, status, error_json(status, path, message));
}

void write_event(httplib::DataSink& sink, const std::string& data, bool& ok) {
  const std::string event = "data: " + data + "\n\n";
  ok = ok && sink.write(event.data(), event.size());
}

}  // namespace

// The requests of one HTTP request (a choice per prompt), shared by the scheduler thread (which
// calls on_token and on_done) and the HTTP worker (which waits for them).
struct HttpServer::Job {
  struct Choice {
    explicit Choice(std::vector<std::string> stop) : text(std::move(stop)) {}
    openai::TextStream text;
    std::vector<int32_t> tokens;
    std::string finish_reason;  // "stop" or "length" once done
    bool done = false;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Choice> choices;
  int64_t version = 0;            // bumped at every token and end
  std::atomic<bool> gone{false};  // the client went away, or the job could not be queued
  bool all_done() const {
    for (const Choice& c : choices)
      if (!c.done) return false;
    return true;
  }
};

struct HttpServer::Metrics {
  std::mutex mutex;
  std::map<std::pair<std::string, int>, int64_t> requests;  // by path and HTTP status
  PrometheusHistogram ttft{{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}};
  PrometheusHistogram per_token{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}};
};

HttpServer::HttpServer(serve::Engine& engine, HttpOptions options)
    : engine_(engine),
      options_(std::move(options)),
      metrics_(std::make_unique<Metrics>()),
      server_start_(static_cast<int64_t>(std::time(nullptr))),
      server_(
          [&] {
            ListenerLimits l = options_.limits;
            l.workers = std::max<int>(
                l.workers, static_cast<int>(engine.max_batch() + engine.max_queue() + 4));
            return l;
          }(),
          error_json) {
  server_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.auth_token.empty() || req.path == "/healthz")
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options_.auth_token)
      return httplib::Server::HandlerResponse::Unhandled;
    fail(res, req.path, 401, "missing or wrong 'Authorization: Bearer' token (the API key)");
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own errors (an unknown path, a malformed request line) get a JSON body too.
  server_.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req,
                                                                    httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    fail(res, req.path, res.status,
         res.status == 404 ? "no route " + req.method + " " + req.path +
                                 " (GET /v1/models, POST /v1/completions, POST "
                                 "/v1/chat/completions, POST /v1/generate)"
                           : "the request was refused with status " + std::to_string(res.status));
    return httplib::Server::HandlerResponse::Handled;
  }));
  server_.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    if (req.path != "/v1/generate" && req.path != "/v1/completions" &&
        req.path != "/v1/chat/completions")
      return;
    std::lock_guard lock(metrics_->mutex);
    ++metrics_->requests[{req.path, res.status}];
  });
  server_.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr e) {
        std::string what = "internal error";
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          what = x.what();
        } catch (...) {
        }
        fail(res, req.path, 500, what);
      });
  server_.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    const bool ok = engine_.ready() && !shutting_down_;
    reply(res, ok ? 200 : 503, ok ? "{\"status\": \"ok\"}" : "{\"status\": \"starting\"}");
  });
  server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const serve::EngineStats s = engine_.stats();
    const ListenerStats l = server_.stats();
    std::ostringstream o;
    std::lock_guard lock(metrics_->mutex);
    o << "# HELP cujax_requests_total Generation requests by path and HTTP status.\n"
         "# TYPE cujax_requests_total counter\n";
    for (const auto& [key, n] : metrics_->requests)
      o << "cujax_requests_total{path=\"" << key.first << "\",status=\"" << key.second << "\"} "
        << n << "\n";
    o << "# TYPE cujax_generated_tokens_total counter\ncujax_generated_tokens_total "
      << s.generated_tokens << "\n# TYPE cujax_queue_depth gauge\ncujax_queue_depth "
      << s.queue_depth << "\n# TYPE cujax_active_slots gauge\ncujax_active_slots " << s.active
      << "\n# HELP cujax_compile_total Compilations since start-up (constant once ready).\n"
         "# TYPE cujax_compile_total counter\ncujax_compile_total "
      << global_compile_count() << "\n";
    o << "# TYPE cujax_open_connections gauge\ncujax_open_connections " << l.open
      << "\n# HELP cujax_rejected_connections_total Connections refused with 503 over a cap.\n"
         "# TYPE cujax_rejected_connections_total counter\ncujax_rejected_connections_total "
      << l.rejected
      << "\n# HELP cujax_request_timeouts_total Requests not whole within the deadline (408).\n"
         "# TYPE cujax_request_timeouts_total counter\ncujax_request_timeouts_total "
      << l.timed_out << "\n";
    o << "# HELP cujax_batch_size Active slots per decode step.\n# TYPE cujax_batch_size "
         "histogram\n";
    int64_t cumulative = 0, sum = 0;
    for (size_t b = 1; b < s.batch_sizes.size(); ++b) {
      cumulative += s.batch_sizes[b];
      sum += static_cast<int64_t>(b) * s.batch_sizes[b];
      o << "cujax_batch_size_bucket{le=\"" << b << "\"} " << cumulative << "\n";
    }
    o << "cujax_batch_size_bucket{le=\"+Inf\"} " << cumulative << "\ncujax_batch_size_sum " << sum
      << "\ncujax_batch_size_count " << cumulative << "\n";
    metrics_->ttft.write(o, "cujax_time_to_first_token_seconds", "Request arrival to first token.");
    metrics_->per_token.write(o, "cujax_time_per_token_seconds", "Time between tokens.");
    res.set_content(o.str(), "text/plain; version=0.0.4");
  });
  server_.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    reply(res, 200,
          openai::models_list({options_.model_id, engine_.max_seq(), engine_.vocab_size()},
                              server_start_));
  });
  server_.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id != options_.model_id)
      return reply(
          res, 404,
          openai::error_body({404,
                              "the model '" + id + "' does not exist; this server serves '" +
                                  options_.model_id + "'",
                              "model", "model_not_found"}));
    const json::Value list = json::parse(openai::models_list(
        {options_.model_id, engine_.max_seq(), engine_.vocab_size()}, server_start_));
    reply(res, 200, json::dump(list.at("data").as_array()[0]));
  });
  server_.Post("/v1/generate",
               [this](const httplib::Request& req, httplib::Response& res) { generate(req, res); });
  server_.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions(req, res, false);
  });
  server_.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completions(req, res, true);
  });
}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::listen(const std::string& host, int port) {
  return server_.start(host, port);
}

void HttpServer::stop() {
  server_.shutdown();
}

bool HttpServer::submit(const std::shared_ptr<Job>& job,
                        const std::vector<std::vector<int32_t>>& prompts,
                        const serve::Request& sampling) {
  const auto start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = std::make_shared<serve::Request>(sampling);
    r->prompt = prompts[i];
    r->on_token = [this, job, i, start, last = start](int32_t t) mutable {
      const auto now = Clock::now();
      {
        std::lock_guard lock(metrics_->mutex);
        if (last == start)
          metrics_->ttft.observe(std::chrono::duration<double>(now - start).count());
        else
          metrics_->per_token.observe(std::chrono::duration<double>(now - last).count());
      }
      last = now;
      std::lock_guard lock(job->mutex);
      Job::Choice& c = job->choices[i];
      c.tokens.push_back(t);
      const bool more = c.text.push(t);
      if (!more) c.finish_reason = "stop";
      ++job->version;
      job->cv.notify_all();
      return more && !job->gone;
    };
    r->on_done = [job, i] {
      std::lock_guard lock(job->mutex);
      Job::Choice& c = job->choices[i];
      c.done = true;
      if (c.finish_reason.empty()) c.finish_reason = "length";
      ++job->version;
      job->cv.notify_all();
    };
    if (!engine_.submit(r)) {
      job->gone = true;  // the ones already queued end at their first token
      return false;
    }
  }
  return true;
}

void HttpServer::generate(const httplib::Request& req, httplib::Response& res) {
  if (shutting_down_) return fail(res, req.path, 503, "the server is shutting down");
  GenerateRequest g;
  try {
    g = parse_generate(req.body, engine_.max_seq(), engine_.vocab_size());
  } catch (const BadRequest& e) {
    return fail(res, req.path, e.status, e.message);
  }
  auto job = std::make_shared<Job>();
  job->choices.emplace_back(std::vector<std::string>{});
  const int64_t prompt_tokens = static_cast<int64_t>(g.prompt.size());
  if (!submit(job, {g.prompt}, g.sampling)) {
    res.set_header("Retry-After", "1");
    return fail(res, req.path, 429, "the queue is full; retry later");
  }
  if (!g.stream) {
    std::unique_lock lock(job->mutex);
    job->cv.wait(lock, [&] { return job->all_done(); });
    const std::vector<int32_t>& tokens = job->choices[0].tokens;
    json::Value out = json::Value::object();
    json::Value::Array list;
    for (int32_t t : tokens) list.emplace_back(static_cast<int64_t>(t));
    out.set("text", openai::to_text(std::string(tokens.begin(), tokens.end())));
    out.set("tokens", json::Value(std::move(list)));
    out.set("prompt_tokens", prompt_tokens);
    out.set("generated_tokens", static_cast<int64_t>(tokens.size()));
    return reply(res, 200, json::dump(out));
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream", [job, sent = size_t{0}](size_t, httplib::DataSink& sink) mutable {
        std::vector<int32_t> fresh;
        bool done;
        {
          std::unique_lock lock(job->mutex);
          const Job::Choice& c = job->choices[0];
          job->cv.wait_for(lock, std::chrono::milliseconds(100),
                           [&] { return c.done || c.tokens.size() > sent; });
          fresh.assign(c.tokens.begin() + static_cast<std::ptrdiff_t>(sent), c.tokens.end());
          done = c.done;
        }
        if (!sink.is_writable()) {
          job->gone = true;  // the scheduler frees the slot at the next token
          return false;
        }
        bool ok = true;
        for (int32_t t : fresh)
          write_event(sink,
                      "{\"token\": " + std::to_string(t) +
                          ", \"text\": " + json::quote(openai::to_text(std::string(1, t))) + "}",
                      ok);
        sent += fresh.size();
        if (ok && done) {
          write_event(sink, "[DONE]", ok);
          sink.done();
        }
        if (!ok) job->gone = true;
        return ok;
      });
}

void HttpServer::completions(const httplib::Request& req, httplib::Response& res, bool chat) {
  if (shutting_down_) return fail(res, req.path, 503, "the server is shutting down");
  openai::Completion c;
  try {
    c = openai::parse_completion(req.body, chat,
                                 {options_.model_id, engine_.max_seq(), engine_.vocab_size(),
                                  engine_.max_batch() + engine_.max_queue()});
  } catch (const openai::ApiError& e) {
    return reply(res, e.status, openai::error_body(e));
  }
  auto job = std::make_shared<Job>();
  int64_t prompt_tokens = 0;
  for (const auto& p : c.prompts) {
    job->choices.emplace_back(c.stop);
    prompt_tokens += static_cast<int64_t>(p.size());
  }
  serve::Request sampling;
  sampling.max_tokens = c.max_tokens;
  sampling.temperature = c.temperature;
  sampling.top_k = c.top_k;
  sampling.top_p = c.top_p;
  sampling.seed = c.seed;
  if (!submit(job, c.prompts, sampling)) {
    res.set_header("Retry-After", "1");
    return fail(res, req.path, 429, "the queue is full; retry later");
  }
  auto reply_ids = std::make_shared<openai::Reply>(chat, options_.model_id);
  std::vector<std::string> echo(c.prompts.size());
  if (c.echo)
    for (size_t i = 0; i < c.prompts.size(); ++i)
      echo[i] = openai::to_text(std::string(c.prompts[i].begin(), c.prompts[i].end()));

  if (!c.stream) {
    std::vector<openai::Reply::Choice> choices;
    int64_t completion_tokens = 0;
    std::unique_lock lock(job->mutex);
    job->cv.wait(lock, [&] { return job->all_done(); });
    for (size_t i = 0; i < job->choices.size(); ++i) {
      Job::Choice& ch = job->choices[i];
      choices.push_back({echo[i] + ch.text.take(true), ch.finish_reason});
      completion_tokens += static_cast<int64_t>(ch.tokens.size());
    }
    return reply(res, 200, reply_ids->full(choices, prompt_tokens, completion_tokens));
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job, reply_ids, echo, prompt_tokens, include_usage = c.include_usage, seen = int64_t{-1},
       finished = std::vector<bool>(c.prompts.size(), false)](size_t,
                                                              httplib::DataSink& sink) mutable {
        std::vector<std::string> events;
        bool all = false;
        int64_t completion_tokens = 0;
        {
          std::unique_lock lock(job->mutex);
          job->cv.wait_for(lock, std::chrono::milliseconds(100),
                           [&] { return job->version != seen; });
          const bool first = seen < 0;
          seen = job->version;
          for (size_t i = 0; i < job->choices.size(); ++i) {
            Job::Choice& ch = job->choices[i];
            const auto index = static_cast<int64_t>(i);
            if (finished[i]) continue;
            std::string text = (first ? echo[i] : "") + ch.text.take(ch.done);
            if (!text.empty() || (first && reply_ids->chat))
              events.push_back(reply_ids->chunk(index, text, "", first));
            if (ch.done) {
              events.push_back(reply_ids->chunk(index, "", ch.finish_reason, false));
              finished[i] = true;
            }
          }
          all = job->all_done();
          for (const Job::Choice& ch : job->choices)
            completion_tokens += static_cast<int64_t>(ch.tokens.size());
        }
        if (!sink.is_writable()) {
          job->gone = true;
          return false;
        }
        bool ok = true;
        for (const std::string& e : events) write_event(sink, e, ok);
        if (ok && all) {
          if (include_usage)
            write_event(sink, reply_ids->usage_chunk(prompt_tokens, completion_tokens), ok);
          write_event(sink, "[DONE]", ok);
          sink.done();
        }
        if (!ok) job->gone = true;
        return ok;
      });
}

}  // namespace cujax::cli
