// The KV-cache serving engine against models::generate: the same tokens for greedy and seeded
// sampling (top-k and top-p too) whether requests run alone or batched, no compilation after
// start() for any prompt length, and a first request as fast as later ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <limits>
#include <set>
#include <thread>

#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/models/lm.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "cujax/serve/engine.h"
#include "test_models.h"

using namespace cujax;
namespace jnp = cujax::numpy;

namespace {

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
  models::TransformerLM model(testutil::small_transformer(64, 24, 32), rngs);
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
                                   {{4, 4}, 10, 0.7, 5, 11},
                                   {{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3}, 12, 1.3, 3, 5},
                                   {{60, 61, 62, 63}, 9, 0.5, 64, 2147483647},
                                   {{33}, 4, 2.0, 1, 17}};
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
  // All at once: three share the batch, the others join as slots free, prefilling their prompts
  // while the others decode.
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
  models::TransformerLM model(testutil::small_transformer(64, 24, 32), rngs);
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

namespace {

std::vector<int32_t> run_alone(serve::Engine& engine, std::vector<int32_t> prompt,
                               int64_t max_tokens) {
  Result r;
  EXPECT_TRUE(engine.submit(request(std::move(prompt), max_tokens, 0.8, 4, 1, r)));
  r.done.get_future().wait();
  return r.tokens;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST(ServeEngine, MaxSeqBoundsPromptAndOutputAndEveryLengthRunsCompiledStep) {
  models::TransformerConfig config = testutil::small_transformer(64, 24, 32);
  config.max_len = 40;
  nnx::Rngs rngs(0);
  models::TransformerLM model(config, rngs);
  const State params = nnx::state(model, nnx::VariableKind::Param);
  EXPECT_THROW(serve::Engine(model, params, 2, 4, 1), Error);
  EXPECT_THROW(serve::Engine(model, params, 2, 4, 41), Error);  // over max_len
  const int64_t max_seq = 36;
  serve::Engine engine(model, params, /*max_batch=*/2, /*max_queue=*/64, max_seq);
  EXPECT_EQ(engine.max_seq(), max_seq);
  EXPECT_EQ(engine.prefill_buckets(), (std::vector<int64_t>{16, 32, 36}));
  engine.start();
  const int64_t compiles = global_compile_count();
  Result r;
  EXPECT_THROW(engine.submit(request(std::vector<int32_t>(max_seq, 1), 1, 0, 0, 0, r)), Error);
  // Every allowed prompt length (so every bucket, full and padded), several at once, joining
  // while others decode; each stops at max_seq tokens in all, with
  // models::generate's tokens (it stops at max_len, so its output is cut to the same length).
  const auto prompt_of = [](int64_t n) {
    std::vector<int32_t> prompt(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) prompt[i] = static_cast<int32_t>((7 * i + n) % 64);
    return prompt;
  };
  std::vector<Result> results(static_cast<size_t>(max_seq - 1));
  for (int64_t n = 1; n < max_seq; ++n)
    ASSERT_TRUE(engine.submit(request(prompt_of(n), max_seq, 0.9, 0, n, results[n - 1])));
  for (Result& res : results) res.done.get_future().wait();
  EXPECT_EQ(global_compile_count(), compiles);
  for (int64_t n = 1; n < max_seq; ++n) {
    models::SampleOptions o;
    o.max_tokens = max_seq - n;
    o.temperature = 0.9;
    o.seed = static_cast<uint64_t>(n);
    EXPECT_EQ(results[n - 1].tokens, models::generate(model, params, prompt_of(n), o))
        << "length " << n;
  }
}

TEST(ServeEngine, FirstRequestAfterStartIsNotSlowerThanLaterOnes) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(64, 24, 32), rngs);
  const State params = nnx::state(model, nnx::VariableKind::Param);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  using clock = std::chrono::steady_clock;
  const auto time_one = [&](serve::Engine& engine) {
    // The same pause before each request: one sent right after another finds the engine's
    // threads still spinning and takes about half as long on this loaded machine, a head start
    // the first request after start() never has.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const auto t0 = clock::now();
    run_alone(engine, prompt, 8);
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  // A single timing on a loaded 2-core machine can stall for a scheduler tick or two, so the
  // first requests of five fresh engines are compared as a group: the fastest of them against
  // the median of the later requests, with 1.5x and 5 ms of slack. A step compiled on the first
  // request instead of in start() slows every first request by far more than that (tens of ms
  // even for this model), while a stall slows some: the median of the five first requests
  // failed once in a local `.ci/run` with builds running beside it (20.7 ms against 9.2 ms).
  std::vector<double> first, later;
  for (int e = 0; e < 5; ++e) {
    serve::Engine engine(model, params, /*max_batch=*/2, /*max_queue=*/4);
    engine.start();
    first.push_back(time_one(engine));
    for (int i = 0; i < 5; ++i) later.push_back(time_one(engine));
  }
  const double fastest_first = *std::min_element(first.begin(), first.end());
  EXPECT_LE(fastest_first, 1.5 * median(later) + 5.0)
      << "fastest first " << fastest_first << " ms, later " << median(later) << " ms";
}

TEST(ServeEngine, TopKKeepsTiedValuesAsGenerateDoes) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(64, 24, 32), rngs);
  State params = nnx::state(model, nnx::VariableKind::Param);
  // The output layer is the embedding (tied), so tokens with equal embedding rows get equal
  // logits: in groups of four, every top_k below 64 but a multiple of 4 cuts through a group,
  // whose tied values are all kept.
  const Array embedding = params.at("embed.embedding");
  std::vector<float> rows = embedding.to_vector<float>();
  const size_t width = static_cast<size_t>(testutil::small_transformer(64, 24, 32).d_model);
  for (size_t v = 0; v < rows.size() / width; ++v)
    std::copy_n(rows.begin() + (v / 4 * 4) * width, width, rows.begin() + v * width);
  params.set("embed.embedding", jnp::array(rows, embedding.shape()));
  serve::Engine engine(model, params, /*max_batch=*/3, /*max_queue=*/16);
  engine.start();
  const std::vector<int64_t> ks = {1, 2, 3, 6, 9, 63};
  std::vector<Result> results(ks.size());
  for (size_t i = 0; i < ks.size(); ++i)
    ASSERT_TRUE(
        engine.submit(request({1, 2, 3}, 16, 1.5, ks[i], static_cast<int64_t>(i), results[i])));
  for (Result& r : results) r.done.get_future().wait();
  engine.drain();
  for (size_t i = 0; i < ks.size(); ++i) {
    models::SampleOptions o;
    o.max_tokens = 16;
    o.temperature = 1.5;
    o.top_k = ks[i];
    o.seed = i;
    const std::vector<int32_t> expected = models::generate(model, params, {1, 2, 3}, o);
    EXPECT_EQ(results[i].tokens, expected) << "top_k " << ks[i];
    // With k = 1 only the top group is kept: a draw other than a group's first token shows that
    // the ties of the k-th value were in play.
    if (ks[i] == 1) {
      EXPECT_TRUE(std::any_of(expected.begin(), expected.end(), [](int32_t t) { return t % 4; }));
    }
  }
}

TEST(ServeEngine, TopPMaskIsTheSmallestNucleusFoundBySorting) {
  // Logits with ties; the reference sorts the probabilities on the host and keeps the fewest
  // largest whose sum reaches p, plus every token tied with the last one kept.
  const std::vector<float> logits = {2.0f, 1.0f, 1.0f, 0.5f, -1.0f, 3.0f, 1.0f, -0.5f,
                                     0.0f, 0.0f, 0.0f, 0.0f, 0.0f,  0.0f, 0.0f, 5.0f};
  const int64_t V = 8;
  const std::vector<float> ps = {0.05f, 0.5f, 0.8f, 0.95f, 1.0f};
  for (float p : ps) {
    const Array mask = models::top_p_mask(jnp::array(logits, Shape{2, V}),
                                          jnp::array(std::vector<float>{p, p}, Shape{2, 1}));
    const std::vector<bool> got = mask.to_vector<bool>();
    for (int64_t row = 0; row < 2; ++row) {
      std::vector<double> prob(V);
      double total = 0;
      for (int64_t v = 0; v < V; ++v) total += prob[v] = std::exp(double(logits[row * V + v]));
      for (double& x : prob) x /= total;
      std::vector<double> sorted = prob;
      std::sort(sorted.rbegin(), sorted.rend());
      double mass = 0, threshold = sorted.back();
      for (double x : sorted) {
        mass += x;
        if (mass >= p - 1e-6) {
          threshold = x;
          break;
        }
      }
      for (int64_t v = 0; v < V; ++v)
        EXPECT_EQ(got[row * V + v], p >= 1 || prob[v] >= threshold - 1e-7)
            << "p " << p << " row " << row << " token " << v;
    }
  }
}

TEST(ServeEngine, TopPMatchesGenerateBatched) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(64, 24, 32), rngs);
  const State params = nnx::state(model, nnx::VariableKind::Param);
  struct Case {
    double top_p;
    int64_t top_k;
  };
  const std::vector<Case> cases = {{0.1, 0}, {0.5, 0}, {0.9, 0}, {0.7, 8}, {1.0, 0}};
  serve::Engine engine(model, params, /*max_batch=*/3, /*max_queue=*/8);
  engine.start();
  std::vector<Result> results(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    auto r = request({5, 6, 7}, 12, 1.3, cases[i].top_k, static_cast<int64_t>(i) + 1, results[i]);
    r->top_p = cases[i].top_p;
    ASSERT_TRUE(engine.submit(r));
  }
  for (Result& r : results) r.done.get_future().wait();
  engine.drain();
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < cases.size(); ++i) {
    models::SampleOptions o;
    o.max_tokens = 12;
    o.temperature = 1.3;
    o.top_k = cases[i].top_k;
    o.top_p = cases[i].top_p;
    o.seed = i + 1;
    EXPECT_EQ(results[i].tokens, models::generate(model, params, {5, 6, 7}, o))
        << "top_p " << cases[i].top_p;
    distinct.insert(results[i].tokens);
  }
  EXPECT_EQ(distinct.size(), cases.size());
  Result bad;
  auto r = request({1}, 4, 1.0, 0, 0, bad);
  r->top_p = 0;
  serve::Engine other(model, params, 1, 1);
  EXPECT_THROW(other.submit(r), Error);
}

// The batched decode step (one product of the weights for all slots, each slot's attention over
// its own rows of the (B, heads, max_seq, head_dim) cache) gives each sequence the tokens it gets
// decoded alone: greedy, so every token is the argmax of that slot's logits and a slot that read
// another's rows, a stale position or a wrong cache layout would diverge. Prompts of 1 to 40
// tokens (buckets 16, 32 and 64) with outputs of 3 to 30 tokens join four slots as others
// leave; the reference is each sequence decoded alone, by the engine with one slot and by
// models::generate (the model's own decode_step and attention).
TEST(ServeEngine, BatchedGreedyDecodingMatchesEachSequenceAlone) {
  nnx::Rngs rngs(1);
  models::TransformerLM model(testutil::small_transformer(96, 64, 32), rngs);
  const State params = nnx::state(model, nnx::VariableKind::Param);
  struct Case {
    int64_t prompt_len, max_tokens;
  };
  const std::vector<Case> cases = {{1, 30}, {17, 5}, {40, 20}, {3, 12},  {33, 3},
                                   {9, 25}, {16, 8}, {2, 4},   {25, 30}, {12, 17}};
  const auto prompt_of = [](const Case& c) {
    std::vector<int32_t> p(static_cast<size_t>(c.prompt_len));
    for (int64_t i = 0; i < c.prompt_len; ++i)
      p[i] = static_cast<int32_t>((11 * i + 5 * c.prompt_len + 3) % 96);
    return p;
  };
  const auto serve_all = [&](int64_t max_batch) {
    serve::Engine engine(model, params, max_batch, /*max_queue=*/16);
    engine.start();
    std::vector<Result> results(cases.size());
    for (size_t i = 0; i < cases.size(); ++i)
      EXPECT_TRUE(
          engine.submit(request(prompt_of(cases[i]), cases[i].max_tokens, 0.0, 0, 0, results[i])));
    std::vector<std::vector<int32_t>> tokens;
    for (Result& r : results) {
      r.done.get_future().wait();
      tokens.push_back(r.tokens);
    }
    const serve::EngineStats s = engine.stats();
    engine.drain();
    return std::pair{tokens, s};
  };
  const auto [batched, stats] = serve_all(4);
  EXPECT_GT(stats.batch_sizes[4], 0);  // four slots decoded together
  const auto [alone, stats1] = serve_all(1);
  EXPECT_EQ(stats1.batch_sizes[1], stats1.steps);
  for (size_t i = 0; i < cases.size(); ++i) {
    models::SampleOptions o;
    o.max_tokens = cases[i].max_tokens;
    o.temperature = 0;
    const std::vector<int32_t> expected = models::generate(model, params, prompt_of(cases[i]), o);
    ASSERT_EQ(expected.size(), static_cast<size_t>(cases[i].max_tokens));
    EXPECT_EQ(batched[i], expected) << "case " << i << ", batched";
    EXPECT_EQ(alone[i], expected) << "case " << i << ", alone";
  }
}

// The sampler's noise is random::gumbel's for each slot's key fold_in(PRNGKey(seed), position +
// 1), bit for bit, in both counter layouts and for an odd vocabulary (the unrolled hash, run
// eagerly per slot, is the reference).
TEST(ServeSampler, GumbelNoiseIsRandomsGumbelOfEachSlotsKey) {
  const std::vector<int32_t> seeds = {0, 7, 2147483647, 12345};
  const std::vector<int32_t> positions = {0, 5, 126, 3};
  for (const bool partitionable : {true, false}) {
    random::ThreefryPartitionableScope layout(partitionable);
    for (const int64_t vocab : {256, 7}) {
      auto noise =
          jit([vocab](const Array& s, const Array& p) { return serve::gumbel_noise(s, p, vocab); });
      const Array got = noise(jnp::array(seeds, Shape{4}), jnp::array(positions, Shape{4}));
      ASSERT_EQ(got.shape(), (Shape{4, vocab}));
      const std::vector<uint32_t> bits =
          lax::bitcast_convert_type(got, DType::U32).to_vector<uint32_t>();
      for (size_t b = 0; b < seeds.size(); ++b) {
        const auto scalar = [](int32_t v) { return jnp::array(std::vector<int32_t>{v}, Shape{}); };
        const Array key =
            random::fold_in(random::PRNGKey(scalar(seeds[b])), scalar(positions[b] + 1));
        const std::vector<uint32_t> want =
            lax::bitcast_convert_type(random::gumbel(key, Shape{vocab}, DType::F32), DType::U32)
                .to_vector<uint32_t>();
        const std::vector<uint32_t> row(bits.begin() + b * vocab, bits.begin() + (b + 1) * vocab);
        EXPECT_EQ(row, want) << "slot " << b << ", vocab " << vocab << ", partitionable "
                             << partitionable;
      }
    }
  }
}

// row_argmax is lax::argmax's index: the first of tied maxima or infinities, or a row's first NaN.
TEST(ServeSampler, RowArgmaxIsLaxArgmaxWithTiesAndNaN) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const std::vector<float> x = {1,     3,    3,    2,    0,     // tie: the first 3
                                -inf,  -inf, -inf, -inf, -inf,  // all -inf: index 0
                                -0.0f, 0.0f, -1,   -2,   -3,    // -0 and +0 equal: index 0
                                1,     nan,  5,    nan,  2,     // NaN: the last one
                                2,     1,    inf,  4,    inf,   // +inf twice: the first
                                nan,   1,    2,    3,    4};
  const Array a = jnp::array(x, Shape{6, 5});
  const std::vector<int32_t> got =
      jit([](const Array& v) { return serve::row_argmax(v); })(a).to_vector<int32_t>();
  const std::vector<int32_t> want = jnp::argmax(a, 1).to_vector<int32_t>();
  EXPECT_EQ(got, want);
  EXPECT_EQ(got, (std::vector<int32_t>{1, 0, 0, 1, 2, 0}));
}
