// The HTTP layer of `cujax serve` in-process: /healthz is 503 while the engine compiles and 200
// once it is ready, --max-seq's bound gives 400s; the OpenAI endpoints as the openai client
// calls them give models::generate's tokens, plain and streamed, with OpenAI's shapes and
// errors; and clients that send half a request and wait neither stall a ready request nor stay
// forever.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "cli/serve_http.h"
#include "cli/serve_openai.h"
#include "cujax/core/json.h"
#include "cujax/jit.h"
#include "cujax/models/lm.h"
#include "test_models.h"

using namespace cujax;

namespace {

int status_of(const httplib::Result& res) {
  return res ? res->status : -1;
}

// What the openai Python client sends besides the body.
httplib::Headers openai_headers(const std::string& key) {
  return {{"Authorization", "Bearer " + key},
          {"Accept", "application/json"},
          {"User-Agent", "OpenAI/Python 1.54.0"},
          {"X-Stainless-Lang", "python"}};
}

// The JSON objects of a server-sent event stream, which must end with "data: [DONE]".
std::vector<json::Value> events(const std::string& body) {
  std::vector<json::Value> out;
  size_t at = 0;
  bool done = false;
  while (at < body.size()) {
    const size_t end = body.find("\n\n", at);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line: " << body.substr(at);
    if (end == std::string::npos) break;
    const std::string event = body.substr(at, end - at);
    at = end + 2;
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    EXPECT_FALSE(done) << "an event after [DONE]";
    if (event == "data: [DONE]")
      done = true;
    else
      out.push_back(json::parse(event.substr(6), "event"));
  }
  EXPECT_TRUE(done) << "no data: [DONE]";
  return out;
}

std::vector<int32_t> generate(models::TransformerLM& model, const State& params,
                              const std::string& prompt, int64_t max_tokens, double temperature,
                              int64_t top_k, int64_t seed, double top_p = 1.0) {
  models::SampleOptions o;
  o.max_tokens = max_tokens;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  o.seed = static_cast<uint64_t>(seed);
  return models::generate(model, params, std::vector<int32_t>(prompt.begin(), prompt.end()), o);
}

std::string text_of(const std::vector<int32_t>& tokens) {
  return cli::openai::to_text(std::string(tokens.begin(), tokens.end()));
}

// A socket that connected and sent `bytes`, then waits.
int half_request(int port, const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  if (!bytes.empty()) {
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), 0), ssize_t(bytes.size()));
  }
  return fd;
}

// What the server sent on fd until it closed (or `seconds` passed).
std::string read_all(int fd, double seconds) {
  timeval tv{static_cast<time_t>(seconds),
             static_cast<suseconds_t>((seconds - int(seconds)) * 1e6)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, size_t(n));
  return out;
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

class ServeOpenAIHttp : public ::testing::Test {
 protected:
  // An ASCII vocabulary, so that every generated byte is text and stop sequences can be any.
  ServeOpenAIHttp()
      : rngs_(0),
        model_(testutil::small_transformer(128, 96, 32), rngs_),
        params_(nnx::state(model_, nnx::VariableKind::Param)),
        engine_(model_, params_, /*max_batch=*/2, /*max_queue=*/4) {
    cli::HttpOptions o;
    o.auth_token = "sk-test";
    o.model_id = "tiny";
    server_ = std::make_unique<cli::HttpServer>(engine_, o);
    port_ = server_->listen("127.0.0.1", 0);
    engine_.start();
  }
  ~ServeOpenAIHttp() override {
    server_->begin_shutdown();
    engine_.drain();
    server_->stop();
  }
  httplib::Result post(const std::string& path, const std::string& body,
                       const std::string& key = "sk-test") {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c.Post(path.c_str(), openai_headers(key), body, "application/json");
  }

  nnx::Rngs rngs_;
  models::TransformerLM model_;
  State params_;
  serve::Engine engine_;
  std::unique_ptr<cli::HttpServer> server_;
  int port_ = 0;
};

TEST_F(ServeOpenAIHttp, CompletionsGiveGeneratesTokensPlainAndStreamed) {
  struct Case {
    std::string prompt;
    int64_t max_tokens;
    double temperature;
    int64_t top_k;
    int64_t seed;
    double top_p;
  };
  const std::vector<Case> cases = {{"Hello", 12, 0.0, 0, 0, 1.0},
                                   {"The model", 9, 1.0, 0, 7, 1.0},
                                   {"a", 20, 0.8, 5, 123, 1.0},
                                   {"Top p", 16, 1.0, 0, 5, 0.3},
                                   {"both", 16, 1.2, 40, 9, 0.8}};
  std::vector<std::vector<int32_t>> generated;
  for (const Case& c : cases)
    generated.push_back(
        generate(model_, params_, c.prompt, c.max_tokens, c.temperature, c.top_k, c.seed, c.top_p));
  const int64_t compiles = global_compile_count();  // generate() compiles; serving does not
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const std::vector<int32_t>& expected = generated[k];
    ASSERT_EQ(static_cast<int64_t>(expected.size()), c.max_tokens);
    std::string body = R"({"model": "tiny", "prompt": )" + json::quote(c.prompt) +
                       ", \"max_tokens\": " + std::to_string(c.max_tokens) +
                       ", \"temperature\": " + std::to_string(c.temperature) +
                       ", \"top_k\": " + std::to_string(c.top_k) +
                       ", \"top_p\": " + std::to_string(c.top_p) +
                       ", \"seed\": " + std::to_string(c.seed);
    const auto res = post("/v1/completions", body + "}");
    ASSERT_EQ(status_of(res), 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    const json::Value v = json::parse(res->body);
    EXPECT_EQ(v.at("object").as_string(), "text_completion");
    EXPECT_EQ(v.at("id").as_string().rfind("cmpl-", 0), 0u);
    EXPECT_EQ(v.at("model").as_string(), "tiny");
    EXPECT_GT(v.at("created").as_int(), 1700000000);
    ASSERT_EQ(v.at("choices").as_array().size(), 1u);
    const json::Value& choice = v.at("choices").as_array()[0];
    EXPECT_EQ(choice.at("index").as_int(), 0);
    EXPECT_EQ(choice.at("text").as_string(), text_of(expected)) << body;
    EXPECT_EQ(choice.at("finish_reason").as_string(), "length");
    EXPECT_TRUE(choice.at("logprobs").is_null());
    EXPECT_EQ(v.at("usage").at("prompt_tokens").as_int(), int64_t(c.prompt.size()));
    EXPECT_EQ(v.at("usage").at("completion_tokens").as_int(), c.max_tokens);
    EXPECT_EQ(v.at("usage").at("total_tokens").as_int(), int64_t(c.prompt.size()) + c.max_tokens);

    // Streamed: chunks of the same id whose texts add up to the same text, the last with the
    // finish reason, then the usage (stream_options) and [DONE].
    const auto sse = post("/v1/completions",
                          body + R"(, "stream": true, "stream_options": {"include_usage": true}})");
    ASSERT_EQ(status_of(sse), 200);
    EXPECT_EQ(sse->get_header_value("Content-Type"), "text/event-stream");
    const std::vector<json::Value> chunks = events(sse->body);
    ASSERT_GE(chunks.size(), 3u);
    std::string text;
    for (size_t i = 0; i + 1 < chunks.size(); ++i) {
      const json::Value& ch = chunks[i];
      EXPECT_EQ(ch.at("object").as_string(), "text_completion");
      EXPECT_EQ(ch.at("id").as_string(), chunks[0].at("id").as_string());
      ASSERT_EQ(ch.at("choices").as_array().size(), 1u);
      const json::Value& choice = ch.at("choices").as_array()[0];
      text += choice.at("text").as_string();
      const bool last = i + 2 == chunks.size();
      EXPECT_EQ(choice.at("finish_reason").is_null(), !last);
      if (last) {
        EXPECT_EQ(choice.at("finish_reason").as_string(), "length");
      }
    }
    EXPECT_EQ(text, text_of(expected));
    EXPECT_TRUE(chunks.back().at("choices").as_array().empty());
    EXPECT_EQ(chunks.back().at("usage").at("completion_tokens").as_int(), c.max_tokens);
  }
  EXPECT_EQ(global_compile_count(), compiles);
}

TEST_F(ServeOpenAIHttp, ListPromptsStopSequencesEchoAndChat) {
  // A list of prompts: a choice each, in order, batched in the engine.
  const std::vector<std::string> prompts = {"Hi", "Hello there", "x"};
  const auto res = post("/v1/completions",
                        R"({"model": "tiny", "prompt": ["Hi", "Hello there", "x"],
                            "max_tokens": 6, "temperature": 0})");
  ASSERT_EQ(status_of(res), 200) << res->body;
  const json::Value v = json::parse(res->body);
  ASSERT_EQ(v.at("choices").as_array().size(), 3u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json::Value& choice = v.at("choices").as_array()[i];
    EXPECT_EQ(choice.at("index").as_int(), int64_t(i));
    EXPECT_EQ(choice.at("text").as_string(),
              text_of(generate(model_, params_, prompts[i], 6, 0, 0, 0)));
  }
  EXPECT_EQ(v.at("usage").at("prompt_tokens").as_int(), 2 + 11 + 1);
  EXPECT_EQ(v.at("usage").at("completion_tokens").as_int(), 18);

  // Stop: the text ends before the first stop sequence, found in the greedy continuation.
  const std::vector<int32_t> greedy = generate(model_, params_, "Hello", 30, 0, 0, 0);
  const std::string bytes(greedy.begin(), greedy.end());
  const std::string stop = bytes.substr(5, 2);
  const size_t at = bytes.find(stop);
  const std::string request = R"({"model": "tiny", "prompt": "Hello", "max_tokens": 30, )"
                              R"("temperature": 0, "stop": ["\u0000\u0001", )" +
                              json::quote(stop) + "]";
  for (const bool stream : {false, true}) {
    const auto r = post("/v1/completions", request + (stream ? R"(, "stream": true})" : "}"));
    ASSERT_EQ(status_of(r), 200) << r->body;
    std::string text, finish;
    if (stream) {
      for (const json::Value& ch : events(r->body)) {
        text += ch.at("choices").as_array()[0].at("text").as_string();
        const json::Value& f = ch.at("choices").as_array()[0].at("finish_reason");
        if (!f.is_null()) finish = f.as_string();
      }
    } else {
      const json::Value s = json::parse(r->body);
      text = s.at("choices").as_array()[0].at("text").as_string();
      finish = s.at("choices").as_array()[0].at("finish_reason").as_string();
      EXPECT_EQ(s.at("usage").at("completion_tokens").as_int(), int64_t(at + stop.size()));
    }
    EXPECT_EQ(text, bytes.substr(0, at)) << "stream " << stream;
    EXPECT_EQ(finish, "stop");
  }

  // echo puts the prompt before the text; token-array prompts are the same bytes.
  const auto echoed = post("/v1/completions", R"({"model": "tiny", "prompt": [72, 105],
                             "max_tokens": 4, "temperature": 0, "echo": true})");
  ASSERT_EQ(status_of(echoed), 200);
  EXPECT_EQ(json::parse(echoed->body).at("choices").as_array()[0].at("text").as_string(),
            "Hi" + text_of(generate(model_, params_, "Hi", 4, 0, 0, 0)));

  // Chat: the template's prompt, generate's tokens, OpenAI's chat shapes.
  const std::string messages =
      R"([{"role": "system", "content": "K"}, {"role": "user", "content": "Hi"}])";
  const std::string templated =
      "<|im_start|>system\nK<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
      "<|im_start|>assistant\n";
  const std::vector<int32_t> expected = generate(model_, params_, templated, 8, 0.7, 0, 3);
  ASSERT_EQ(expected.size(), 8u);
  const std::string chat = R"({"model": "tiny", "messages": )" + messages +
                           R"(, "max_tokens": 8, "temperature": 0.7, "seed": 3)";
  const auto c = post("/v1/chat/completions", chat + "}");
  ASSERT_EQ(status_of(c), 200) << c->body;
  const json::Value cv = json::parse(c->body);
  EXPECT_EQ(cv.at("object").as_string(), "chat.completion");
  EXPECT_EQ(cv.at("id").as_string().rfind("chatcmpl-", 0), 0u);
  const json::Value& choice = cv.at("choices").as_array()[0];
  EXPECT_EQ(choice.at("message").at("role").as_string(), "assistant");
  EXPECT_EQ(choice.at("message").at("content").as_string(), text_of(expected));
  EXPECT_EQ(choice.at("finish_reason").as_string(), "length");
  EXPECT_EQ(cv.at("usage").at("prompt_tokens").as_int(), int64_t(templated.size()));
  const auto cs = post("/v1/chat/completions", chat + R"(, "stream": true})");
  ASSERT_EQ(status_of(cs), 200);
  const std::vector<json::Value> chunks = events(cs->body);
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].at("choices").as_array()[0].at("delta").at("role").as_string(), "assistant");
  std::string content;
  for (const json::Value& ch : chunks) {
    EXPECT_EQ(ch.at("object").as_string(), "chat.completion.chunk");
    const json::Value* piece = ch.at("choices").as_array()[0].at("delta").get("content");
    if (piece) content += piece->as_string();
  }
  EXPECT_EQ(content, text_of(expected));
  const json::Value& last = chunks.back().at("choices").as_array()[0];
  EXPECT_TRUE(last.at("delta").as_object().empty());
  EXPECT_EQ(last.at("finish_reason").as_string(), "length");

  // /v1/models names the model and its context.
  httplib::Client client("127.0.0.1", port_);
  const auto models = client.Get("/v1/models", openai_headers("sk-test"));
  ASSERT_EQ(status_of(models), 200);
  const json::Value m = json::parse(models->body);
  EXPECT_EQ(m.at("object").as_string(), "list");
  EXPECT_EQ(m.at("data").as_array()[0].at("id").as_string(), "tiny");
  EXPECT_EQ(m.at("data").as_array()[0].at("object").as_string(), "model");
  EXPECT_EQ(m.at("data").as_array()[0].at("max_model_len").as_int(), 96);
  // GET /v1/models/{id}: client.models.retrieve.
  const auto one = client.Get("/v1/models/tiny", openai_headers("sk-test"));
  ASSERT_EQ(status_of(one), 200);
  EXPECT_EQ(json::parse(one->body).at("id").as_string(), "tiny");
  EXPECT_EQ(json::parse(one->body).at("created").as_int(),
            m.at("data").as_array()[0].at("created").as_int());
  const auto other = client.Get("/v1/models/gpt-4o", openai_headers("sk-test"));
  ASSERT_EQ(status_of(other), 404);
  EXPECT_EQ(json::parse(other->body).at("error").at("code").as_string(), "model_not_found");
}

TEST_F(ServeOpenAIHttp, ErrorsAreOpenAIErrorObjectsWithTheirStatus) {
  struct Case {
    std::string path, body, key;
    int status;
    std::string param, code;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", R"({"model": "tiny", "prompt": "Hi")", "sk-test", 400, "", ""},
      {"/v1/completions", R"({"model": "gpt-4", "prompt": "Hi"})", "sk-test", 404, "model",
       "model_not_found"},
      {"/v1/completions", R"({"model": "tiny", "prompt": "Hi", "n": 3})", "sk-test", 400, "n", ""},
      {"/v1/completions", R"({"model": "tiny", "prompt": "Hi", "max_tokens": 95})", "sk-test", 400,
       "max_tokens", "context_length_exceeded"},
      {"/v1/chat/completions", R"({"model": "tiny", "messages": [{"role": "user"}]})", "sk-test",
       400, "messages[0].content", ""},
      {"/v1/completions", R"({"model": "tiny", "prompt": "Hi"})", "sk-wrong", 401, "",
       "invalid_api_key"},
      {"/v1/nothing", R"({})", "sk-test", 404, "", "not_found"},
  };
  for (const Case& c : cases) {
    const auto res = post(c.path, c.body, c.key);
    ASSERT_EQ(status_of(res), c.status) << c.body << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    const json::Value v = json::parse(res->body);
    const json::Value& e = v.at("error");
    EXPECT_FALSE(e.at("message").as_string().empty());
    EXPECT_EQ(e.at("type").as_string(), "invalid_request_error");
    EXPECT_EQ(e.at("param").is_null() ? "" : e.at("param").as_string(), c.param) << c.body;
    EXPECT_EQ(e.at("code").is_null() ? "" : e.at("code").as_string(), c.code) << c.body;
  }
  // Over the body limit: 413 before the body is read.
  const auto big = post("/v1/completions", std::string(70000, 'x'));
  EXPECT_EQ(status_of(big), 413);
  // A stream the client leaves frees its slot.
  {
    int seen = 0;
    httplib::Client quitter("127.0.0.1", port_);
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.headers = openai_headers("sk-test");
    req.body = R"({"model": "tiny", "prompt": "Hi", "max_tokens": 90, "stream": true})";
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++seen < 2; };
    quitter.send(req);
    EXPECT_GE(seen, 2);
    for (int i = 0; i < 50 && engine_.stats().active > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(engine_.stats().active, 0);
  }
}

TEST(ServeSlowClients, HalfSentRequestsNeitherStallReadyOnesNorStayForever) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(256, 32, 32), rngs);
  serve::Engine engine(model, nnx::state(model, nnx::VariableKind::Param), 2, 4);
  cli::HttpOptions o;
  o.limits.request_timeout_s = 3;
  cli::HttpServer server(engine, o);
  const int port = server.listen("127.0.0.1", 0);
  engine.start();

  // 64 connections, more than the workers (max_batch + max_queue + 4 = 10) and than
  // cpp-httplib's own pool, each with half a request: the head, or the head and part of a body.
  std::vector<int> stalled;
  for (int i = 0; i < 64; ++i) {
    const std::string half =
        i % 2 ? "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le"
              : "POST /v1/generate HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{\"prom";
    stalled.push_back(half_request(port, half));
    ASSERT_GE(stalled.back(), 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  const auto res =
      client.Post("/v1/completions", R"({"model": "cujax", "prompt": "Hi", "max_tokens": 4})",
                  "application/json");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(status_of(res), 200) << (res ? res->body : "no reply");
  EXPECT_LT(seconds, 2.0) << "a ready request waited behind 64 half-sent ones";
  EXPECT_EQ(status_of(client.Get("/healthz")), 200);

  // The deadline: each stalled request is answered 408 and closed.
  for (int fd : stalled) {
    const std::string reply = read_all(fd, 6);
    EXPECT_EQ(reply.rfind("HTTP/1.1 408 ", 0), 0u) << reply;
    ::close(fd);
  }
  engine.drain();
  server.stop();
}

TEST(ServeSlowClients, ConnectionCapsAnswer503) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(256, 32, 32), rngs);
  serve::Engine engine(model, nnx::state(model, nnx::VariableKind::Param), 1, 1);
  cli::HttpOptions o;
  o.limits.max_connections = 16;
  o.limits.max_connections_per_client = 4;
  cli::HttpServer server(engine, o);
  const int port = server.listen("127.0.0.1", 0);
  engine.start();
  // A second server on the same port is refused rather than sharing it.
  {
    cli::HttpServer second(engine, cli::HttpOptions{});
    EXPECT_THROW(second.listen("127.0.0.1", port), Error);
  }
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(half_request(port, ""));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // The fifth connection from this address is refused, with a reply it can read.
  const int fifth = half_request(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string reply = read_all(fifth, 3);
  EXPECT_EQ(reply.rfind("HTTP/1.1 503 ", 0), 0u) << reply;
  EXPECT_NE(reply.find("Retry-After: 1"), std::string::npos);
  EXPECT_NE(reply.find("\"error\""), std::string::npos);
  ::close(fifth);
  for (int fd : idle) ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  httplib::Client client("127.0.0.1", port);
  EXPECT_EQ(status_of(client.Get("/healthz")), 200);
  engine.drain();
  server.stop();
}
