// The HTTP API of docs/serving.md over a serve::Engine, shared by `cujax serve` and `cujax bench
// serve`: the OpenAI-compatible /v1/completions, /v1/chat/completions and /v1/models
// (serve_openai.h), cujax's own /v1/generate, /healthz and /metrics, on the connection layer of
// serve_listener.h.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "cli/serve_listener.h"
#include "cujax/serve/engine.h"

namespace cujax::cli {

struct HttpOptions {
  // When not empty, every path but /healthz needs "Authorization: Bearer <token>".
  std::string auth_token;
  // What GET /v1/models lists and the OpenAI requests' "model" must name.
  std::string model_id = "cujax";
  // workers is raised to max_batch + max_queue + 4: every request the engine can hold waits on
  // a worker, and a few more answer /healthz, /metrics and the rejections meanwhile.
  ListenerLimits limits;
};

class HttpServer {
 public:
  HttpServer(serve::Engine& engine, HttpOptions options);
  ~HttpServer();
  // Binds host:port (0: a free port) and answers from now on; /healthz is 503 until the engine
  // is ready. Returns the port; throws when it cannot bind.
  int listen(const std::string& host, int port);
  // From here /healthz and new requests get 503; requests already submitted finish.
  void begin_shutdown() { shutting_down_ = true; }
  void stop();
  // One request's bytes in, the response's bytes out, with no socket (Listener::answer).
  std::string answer(const std::string& request) { return server_.answer(request); }

 private:
  struct Metrics;
  struct Job;
  void generate(const httplib::Request& req, httplib::Response& res);
  void completions(const httplib::Request& req, httplib::Response& res, bool chat);
  // Queues one engine request per prompt of the job, with the max_tokens and sampling options of
  // `sampling`; false (and the job cancelled) when the queue cannot take them all.
  bool submit(const std::shared_ptr<Job>& job, const std::vector<std::vector<int32_t>>& prompts,
              const serve::Request& sampling);

  serve::Engine& engine_;
  HttpOptions options_;
  std::unique_ptr<Metrics> metrics_;
  std::atomic<bool> shutting_down_{false};
  const int64_t server_start_;  // unix seconds: the model's "created"
  Listener server_;
};

}  // namespace cujax::cli
