#include "cli/serve.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/args.h"
#include "cli/model_dir.h"
#include "cli/serve_http.h"
#include "cujax/jit.h"
#include "cujax/serve/engine.h"

namespace cujax::cli {

namespace {

std::atomic<bool> g_terminate{false};

}  // namespace

int serve_command(const std::vector<std::string>& argv) {
  const Args args(
      {"serve",
       "HTTP JSON API (/v1/completions, /v1/chat/completions, /v1/generate) with continuous "
       "batching",
       {{"model", "DIR|FILE",
         "a cujax train --out folder, or a cujax export --fn serve bundle, which fixes "
         "--max-batch and --max-seq (required)"},
        {"host", "H", "the address listened on (default: 127.0.0.1)"},
        {"port", "P", "the port, 0 for any free one (default: 8080)"},
        {"max-batch", "B", "requests decoded at once (default: 4)"},
        {"max-queue", "Q", "requests waiting before 503 (default: 4 x max-batch)"},
        {"max-seq", "T", "the longest prompt plus completion (default: the model's)"},
        {"auth-token-file", "F", "require `Authorization: Bearer` with the file's first line"},
        {"max-connections", "N", "open connections in all, at most 512 (default: 512)"},
        {"max-connections-per-client", "N", "open connections from one address (default: 128)"},
        platform_option(),
        profile_option()}},
      argv);
  use_platform(args);
  const ProfileOption profile(args);  // until the server stops (SIGINT, SIGTERM)
  if (!args.has("model"))
    throw UsageError(
        "--model is required: a cujax train --out folder or a cujax export --fn serve "
        "bundle");
  const std::string host = args.string("host", "127.0.0.1");
  const int64_t port = args.integer("port", 8080, 0);
  HttpOptions http;
  http.limits.max_connections =
      static_cast<int>(args.integer("max-connections", http.limits.max_connections, 1));
  if (http.limits.max_connections > 512)
    throw UsageError("--max-connections " + std::to_string(http.limits.max_connections) +
                     ": at most 512 (cpp-httplib refuses sockets past FD_SETSIZE)");
  http.limits.max_connections_per_client = static_cast<int>(args.integer(
      "max-connections-per-client",
      std::min(http.limits.max_connections_per_client, http.limits.max_connections), 1));
  std::string& token = http.auth_token;
  if (args.has("auth-token-file")) {
    const std::string path = args.string("auth-token-file", "");
    std::ifstream f(path);
    if (!f) throw UsageError("--auth-token-file " + path + ": cannot be read");
    std::getline(f, token);
    if (token.empty()) throw UsageError("--auth-token-file " + path + ": the first line is empty");
  }

  const std::string model = args.string("model", "");
  // The id /v1/models lists: the folder's name, or the bundle's without its extension.
  std::filesystem::path name = std::filesystem::absolute(model).lexically_normal();
  if (!name.has_filename()) name = name.parent_path();
  http.model_id =
      (std::filesystem::is_regular_file(model) ? name.stem() : name.filename()).string();
  LoadedModel m;  // a model folder's model, which its engine's steps run
  serve::ServeSteps steps;
  if (std::filesystem::is_regular_file(model)) {
    try {
      steps = serve::load_steps(model);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    // The bundle's steps were compiled for its shapes; a flag that asks for others is a mistake.
    for (const auto& [flag, value] :
         {std::pair{"max-batch", steps.max_batch}, std::pair{"max-seq", steps.max_seq}})
      if (args.has(flag) && args.integer(flag, value, 1) != value)
        throw UsageError("--" + std::string(flag) + " " + args.string(flag, "") + ": " + model +
                         " was exported for --" + flag + " " + std::to_string(value) +
                         " (leave the flag out, or export again)");
  } else {
    m = load_model_dir(model);
    const int64_t max_batch = args.integer("max-batch", 4, 1);
    const int64_t max_seq = args.integer("max-seq", m.config.max_len, 2);
    if (max_seq > m.config.max_len)
      throw UsageError("--max-seq " + std::to_string(max_seq) + " exceeds the model's max_len " +
                       std::to_string(m.config.max_len));
    steps = serve::jit_steps(*m.model, m.params, max_batch, max_seq);
  }
  const int64_t max_queue = args.integer("max-queue", 4 * steps.max_batch, 0);
  serve::Engine engine(std::move(steps), max_queue);
  HttpServer server(engine, std::move(http));
  int bound_port = 0;
  try {
    bound_port = server.listen(host, static_cast<int>(port));
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  // Before the compiles, so that a caller who asked for --port 0 learns the port at once.
  std::fprintf(stderr, "cujax serve: listening on http://%s:%d\n", host.c_str(), bound_port);
  engine.start();  // /healthz answers 503 until this returns
  std::fprintf(stderr,
               "cujax serve: ready on http://%s:%d (max-batch %lld, max-seq %lld, compiles "
               "%lld)\n",
               host.c_str(), bound_port, static_cast<long long>(engine.max_batch()),
               static_cast<long long>(engine.max_seq()),
               static_cast<long long>(global_compile_count()));
  std::signal(SIGTERM, [](int) { g_terminate = true; });
  std::signal(SIGINT, [](int) { g_terminate = true; });
  while (!g_terminate) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // New requests get 503 from here; the queued and active ones finish.
  server.begin_shutdown();
  engine.drain();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // streams send their last events
  server.stop();
  std::fprintf(stderr, "cujax serve: drained, exiting\n");
  return 0;
}

}  // namespace cujax::cli
