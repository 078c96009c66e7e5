// The serving engine against models::generate: the same tokens for greedy and seeded sampling
// whether requests run alone or batched, and no compilation after start().
#include <gtest/gtest.h>

#include <future>

#include "cujax/jit.h"
#include "cujax/models/lm.h"
#include "cujax/serve/engine.h"

using namespace cujax;

namespace {

models::TransformerConfig small() {
  models::TransformerConfig c;
  c.vocab_size = 64;
  c.max_len = 24;
  c.d_model = 32;
  c.num_layers = 2;
  c.num_heads = 2;
  c.d_ff = 64;
  return c;
}

struct Result {
  std::vector<int32_t> tokens;
  std::promise<void> done;
};

std::shared_ptr<serve::Request> request(std::vector<int32_t> prompt, int64_t max_tokens,
                                        double temperature, int64_t top_k, int64_t seed,
                                        Result& out) {
  auto r = std::make_shared<serve::Request>();
  r->prompt = std::move(prompt);
  r->max_tokens = max_tokens;
  r->temperature = temperature;
  r->top_k = top_k;
  r->seed = seed;
  r->on_token = [&out](int32_t t) {
    out.tokens.push_back(t);
    return true;
  };
  r->on_done = [&out] { out.done.set_value(); };
  return r;
}

}  // namespace

TEST(ServeEngine, MatchesGenerateBatchedAndNeverCompilesAfterStart) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(small(), rngs);
  const State params = nnx::state(model, nnx::VariableKind::Param);
  struct Case {
    std::vector<int32_t> prompt;
    int64_t max_tokens;
    double temperature;
    int64_t top_k;
    int64_t seed;
  };
  const std::vector<Case> cases = {{{1, 2, 3}, 8, 0.0, 0, 0},
                                   {{5}, 30, 0.0, 0, 0},  // stops at max_len
                                   {{7, 8, 9, 10, 11}, 6, 1.0, 0, 3},
                                   {{4, 4}, 10, 0.7, 5, 11}};
  std::vector<std::vector<int32_t>> expected;
  for (const Case& c : cases) {
    models::SampleOptions o;
    o.max_tokens = c.max_tokens;
    o.temperature = c.temperature;
    o.top_k = c.top_k;
    o.seed = static_cast<uint64_t>(c.seed);
    expected.push_back(models::generate(model, params, c.prompt, o));
  }

  serve::Engine engine(model, params, /*max_batch=*/3, /*max_queue=*/8);
  EXPECT_FALSE(engine.ready());
  engine.start();
  EXPECT_TRUE(engine.ready());
  const int64_t compiles = global_compile_count();
  // All at once: three share the batch, the fourth joins when a slot frees.
  std::vector<Result> results(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    ASSERT_TRUE(
        engine.submit(request(c.prompt, c.max_tokens, c.temperature, c.top_k, c.seed, results[i])));
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    results[i].done.get_future().wait();
    EXPECT_EQ(results[i].tokens, expected[i]) << "case " << i;
  }
  EXPECT_EQ(global_compile_count(), compiles);
  const serve::EngineStats s = engine.stats();
  EXPECT_GT(s.batch_sizes[3], 0);  // batching happened
  int64_t total = 0;
  for (const auto& e : expected) total += static_cast<int64_t>(e.size());
  EXPECT_EQ(s.generated_tokens, total);
  EXPECT_EQ(s.active, 0);
  engine.drain();
}

TEST(ServeEngine, RejectsBadRequestsAndAFullQueue) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(small(), rngs);
  serve::Engine engine(model, nnx::state(model, nnx::VariableKind::Param), 1, 0);
  Result r;
  EXPECT_THROW(engine.submit(request({}, 4, 0, 0, 0, r)), Error);
  EXPECT_THROW(engine.submit(request(std::vector<int32_t>(24, 1), 4, 0, 0, 0, r)), Error);
  EXPECT_THROW(engine.submit(request({64}, 4, 0, 0, 0, r)), Error);
  EXPECT_THROW(engine.submit(request({1}, 0, 0, 0, 0, r)), Error);
  EXPECT_THROW(engine.submit(request({1}, 4, -1, 0, 0, r)), Error);
  EXPECT_THROW(engine.submit(request({1}, 4, 0, -1, 0, r)), Error);
  EXPECT_FALSE(engine.submit(request({1}, 4, 0, 0, 0, r)));  // max_queue 0: always full
}
