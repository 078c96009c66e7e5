// The serving bundle (serve/steps.h): an engine running the steps loaded from a bundle, with no
// model at hand, gives models::generate's tokens, compiles exactly its decode step and one
// prefill per bucket in start() and nothing after; a damaged bundle is refused, naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <future>

#include "cujax/core/sha256.h"
#include "cujax/jit.h"
#include "cujax/models/lm.h"
#include "cujax/serve/engine.h"
#include "test_models.h"

using namespace cujax;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("cujax_serve_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

struct Result {
  std::vector<int32_t> tokens;
  std::promise<void> done;
};

}  // namespace

TEST(ServeBundle, EngineFromABundleMatchesGenerateAndCompilesOnlyInStart) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(64, 40, 32), rngs);
  const State params = nnx::state(model, nnx::VariableKind::Param);
  const fs::path dir = fresh_dir("roundtrip");
  const std::string path = (dir / "small.serve").string();
  const int64_t max_seq = 36;
  serve::export_steps(model, params, /*max_batch=*/3, max_seq, path);

  const int64_t before_load = global_compile_count();
  serve::ServeSteps steps = serve::load_steps(path);
  EXPECT_EQ(steps.max_batch, 3);
  EXPECT_EQ(steps.max_seq, max_seq);
  EXPECT_EQ(steps.vocab_size, 64);
  EXPECT_EQ(steps.buckets, (std::vector<int64_t>{16, 32, 36}));
  ASSERT_EQ(steps.cache.size(), 4u);  // a key and a value buffer per layer
  EXPECT_EQ(steps.cache.at("blocks.1.value").shape(), (Shape{3, 2, max_seq, 16}));
  serve::Engine engine(std::move(steps), /*max_queue=*/64);
  EXPECT_EQ(global_compile_count(), before_load);  // loading parses, it does not compile
  engine.start();
  EXPECT_EQ(global_compile_count(), before_load + 4);  // the decode step and three prefills
  const int64_t compiles = global_compile_count();

  // Prompts in every bucket, greedy and sampled, all at once so that they share decode steps.
  struct Case {
    int64_t length, max_tokens;
    double temperature;
    int64_t top_k, seed;
  };
  const std::vector<Case> cases = {
      {1, 8, 0.0, 0, 0},  {5, 40, 0.0, 0, 0}, {16, 6, 1.0, 0, 3},          {17, 10, 0.7, 5, 11},
      {33, 3, 1.3, 3, 5}, {35, 4, 0.0, 0, 0}, {12, 9, 0.5, 64, 2147483647}};
  std::vector<Result> results(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    auto r = std::make_shared<serve::Request>();
    for (int64_t j = 0; j < c.length; ++j)
      r->prompt.push_back(static_cast<int32_t>((5 * j + i) % 64));
    r->max_tokens = c.max_tokens;
    r->temperature = c.temperature;
    r->top_k = c.top_k;
    r->seed = c.seed;
    r->on_token = [&out = results[i]](int32_t t) {
      out.tokens.push_back(t);
      return true;
    };
    r->on_done = [&out = results[i]] { out.done.set_value(); };
    ASSERT_TRUE(engine.submit(r));
  }
  for (Result& r : results) r.done.get_future().wait();
  EXPECT_EQ(global_compile_count(), compiles);
  EXPECT_GT(engine.stats().batch_sizes[3], 0);
  engine.drain();
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    std::vector<int32_t> prompt;
    for (int64_t j = 0; j < c.length; ++j) prompt.push_back(static_cast<int32_t>((5 * j + i) % 64));
    models::SampleOptions o;
    o.max_tokens = std::min(c.max_tokens, max_seq - c.length);  // the engine stops at max_seq
    o.temperature = c.temperature;
    o.top_k = c.top_k;
    o.seed = static_cast<uint64_t>(c.seed);
    EXPECT_EQ(results[i].tokens, models::generate(model, params, prompt, o)) << "case " << i;
  }
  fs::remove_all(dir);
}

TEST(ServeBundle, RefusesADamagedBundleNamingTheFile) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(testutil::small_transformer(64, 40, 32), rngs);
  const fs::path dir = fresh_dir("damaged");
  const std::string path = (dir / "small.serve").string();
  serve::export_steps(model, nnx::state(model, nnx::VariableKind::Param), 1, 16, path);
  const std::string good = read_file(path);
  EXPECT_EQ(serve::load_steps(path).buckets, std::vector<int64_t>{16});

  const auto error_of = [&](const std::string& bytes) -> std::string {
    write_file(path, bytes);
    try {
      serve::load_steps(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  const auto expect_refused = [&](const std::string& bytes, const std::string& why) {
    const std::string e = error_of(bytes);
    EXPECT_NE(e.find(path + ": not a valid serving bundle: "), std::string::npos) << e;
    EXPECT_NE(e.find(why), std::string::npos) << e;
  };
  expect_refused(good.substr(0, good.size() / 2), "checksum mismatch");
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x20;
  expect_refused(flipped, "checksum mismatch");
  const std::string magic = "cujax-serve-bundle ";
  std::string v4 = good;
  v4.replace(magic.size(), 1, "4");
  expect_refused(v4, "format version 4; this cujax reads version 3");
  // Version 1's steps did not take top_p; version 2's cache was (max_batch, max_seq, ...).
  for (const char* old : {"1", "2"}) {
    std::string v = good;
    v.replace(magic.size(), 1, old);
    expect_refused(v, std::string("format version ") + old + "; this cujax reads version 3");
  }
  expect_refused("", "does not start with 'cujax-serve-bundle <version>'");
  expect_refused("cujax-exported 1\n", "does not start with 'cujax-serve-bundle <version>'");

  // Bodies that pass the checksum but disagree with themselves (a writer's bug, not damage).
  const size_t body_at = good.find('\n', good.find('\n') + 1) + 1;
  const std::string body = good.substr(body_at);
  const auto forge = [&](std::string b) { return magic + "3\nsha256 " + sha256_hex(b) + "\n" + b; };
  expect_refused(forge(body + "x"), "its members do not add up to the file's size");
  std::string seq = body;
  seq.replace(seq.find("\"max_seq\": 16"), 13, "\"max_seq\": 17");
  expect_refused(forge(seq), "max_seq and buckets are inconsistent");
  std::string renamed = body;
  renamed.replace(renamed.find("\"prefill.16\""), 12, "\"prefill.99\"");
  expect_refused(forge(renamed), "it has no member prefill.16");

  fs::remove_all(dir);
  try {
    serve::load_steps(path);
    FAIL() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": cannot read"), std::string::npos) << e.what();
  }
}
