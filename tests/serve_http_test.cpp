// The HTTP layer of `cujax serve` in-process: /healthz is 503 while the engine compiles and 200
// once it is ready, and --max-seq's bound gives 400s while the bounded server keeps serving.
#include <gtest/gtest.h>
#include <httplib.h>

#include "cli/serve_http.h"
#include "cujax/core/json.h"
#include "cujax/jit.h"
#include "test_models.h"

using namespace cujax;

namespace {

int status_of(const httplib::Result& res) {
  return res ? res->status : -1;
}

}  // namespace

TEST(ServeHttp, HealthzIs503UntilTheEngineIsReadyAndMaxSeqIsEnforced) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(256, 24, 32), rngs);  // byte vocabulary
  serve::Engine engine(model, nnx::state(model, nnx::VariableKind::Param), 2, 4, /*max_seq=*/12);
  cli::HttpServer server(engine, cli::HttpOptions{});
  const int port = server.listen("127.0.0.1", 0);
  httplib::Client client("127.0.0.1", port);
  // The server answers before start(): this is the window a load balancer sees while the
  // engine compiles, held open here rather than raced.
  EXPECT_EQ(status_of(client.Get("/healthz")), 503);
  engine.start();
  EXPECT_EQ(status_of(client.Get("/healthz")), 200);
  const int64_t compiles = global_compile_count();

  const auto post = [&](const std::string& body) {
    return client.Post("/v1/generate", body, "application/json");
  };
  EXPECT_EQ(status_of(post(R"({"prompt": "abcdefghijkl"})")), 400);  // 12 bytes: no room left
  EXPECT_EQ(status_of(post(R"({"prompt": "a", "max_tokens": 13})")), 400);
  const auto res = post(R"({"prompt": "abcdefghijk", "max_tokens": 12})");
  ASSERT_EQ(status_of(res), 200);
  // 11 prompt bytes leave one position: generation stops at max_seq tokens in all.
  EXPECT_EQ(json::parse(res->body, "reply").at("generated_tokens").as_int(), 1);
  EXPECT_EQ(global_compile_count(), compiles);

  server.begin_shutdown();
  EXPECT_EQ(status_of(client.Get("/healthz")), 503);
  EXPECT_EQ(status_of(post(R"({"prompt": "a"})")), 503);
  engine.drain();
  server.stop();
}
