// The HTTP JSON API of docs/serving.md (/v1/generate, /healthz, /metrics) over a serve::Engine,
// shared by `cujax serve` and `cujax bench serve`.
#pragma once

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "cujax/serve/engine.h"

namespace cujax::cli {

class HttpServer {
 public:
  // auth_token: when not empty, every path but /healthz needs "Authorization: Bearer <token>".
  HttpServer(serve::Engine& engine, std::string auth_token);
  ~HttpServer();
  // Binds host:port (0: a free port) and answers on a thread from now on; /healthz is 503 until
  // the engine is ready. Returns the port; throws when it cannot bind.
  int listen(const std::string& host, int port);
  // From here /healthz and new requests get 503; requests already submitted finish.
  void begin_shutdown() { shutting_down_ = true; }
  void stop();

 private:
  struct Metrics;
  serve::Engine& engine_;
  std::string token_;
  std::unique_ptr<Metrics> metrics_;
  std::atomic<bool> shutting_down_{false};
  httplib::Server server_;
  std::thread listener_;
};

}  // namespace cujax::cli
