// TransformerLM: Flax paths and shapes, causality, KV-cache decoding against the full forward
// pass, training on a fixed batch, and one training step against PyTorch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "cujax/core/npy.h"
#include "cujax/grad.h"
#include "cujax/lax.h"
#include "cujax/models/lm.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "test_models.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
namespace fs = std::filesystem;
using models::TransformerConfig;
using models::TransformerLM;

Array random_tokens(uint32_t seed, Shape shape, int64_t vocab) {
  return random::randint(random::PRNGKey(seed), shape, 0, vocab);
}

data::Batch random_batch(uint32_t seed, int64_t b, int64_t t, int64_t vocab) {
  Array window = random_tokens(seed, {b, t + 1}, vocab);
  return {lax::slice_in_dim(window, 0, t, 1, 1), lax::slice_in_dim(window, 1, t + 1, 1, 1)};
}

TEST(Transformer, ParameterPathsAndShapesFollowFlax) {
  const TransformerConfig c = models::tiny_config();
  std::map<std::string, Shape> shapes;
  for (const auto& [path, aval] : models::parameter_shapes(c)) shapes[path] = aval.shape;
  EXPECT_EQ(shapes.at("embed.embedding"), (Shape{256, 128}));
  EXPECT_EQ(shapes.at("pos_embed.embedding"), (Shape{128, 128}));
  EXPECT_EQ(shapes.at("blocks.0.attn.query.kernel"), (Shape{128, 4, 32}));
  EXPECT_EQ(shapes.at("blocks.3.attn.value.bias"), (Shape{4, 32}));
  EXPECT_EQ(shapes.at("blocks.1.attn.out.kernel"), (Shape{4, 32, 128}));
  EXPECT_EQ(shapes.at("blocks.2.mlp.fc.kernel"), (Shape{128, 512}));
  EXPECT_EQ(shapes.at("blocks.2.mlp.proj.bias"), (Shape{128}));
  EXPECT_EQ(shapes.at("ln_f.scale"), (Shape{128}));
  EXPECT_EQ(shapes.count("blocks.4.ln1.scale"), 0u);
  // 12 d^2 + 13 d per block (attention 4 d^2 + 4 d, MLP 8 d^2 + 5 d, norms 4 d), embeddings,
  // final norm.
  const int64_t d = 128, per_block = 12 * d * d + 13 * d;
  int64_t total = 0;
  for (const auto& [path, shape] : shapes) total += num_elements(shape);
  EXPECT_EQ(total, 4 * per_block + 256 * d + 128 * d + 2 * d);
}

TEST(Transformer, Gpt2PresetHasGpt2SmallParameterCount) {
  int64_t total = 0;
  for (const auto& [path, aval] : models::parameter_shapes(models::gpt2_config()))
    total += num_elements(aval.shape);
  EXPECT_EQ(total, 124439808);  // GPT-2 small (tied embeddings), as Hugging Face counts it
}

TEST(Transformer, ConfigErrorsAndJsonRoundTrip) {
  EXPECT_THROW(models::config_by_name("huge"), Error);
  TransformerConfig c = models::small_config();
  c.attention_implementation = "xla";
  const TransformerConfig r = TransformerConfig::from_json(json::parse(json::dump(c.to_json())));
  EXPECT_EQ(r.d_model, c.d_model);
  EXPECT_EQ(r.max_len, c.max_len);
  EXPECT_EQ(r.attention_implementation, c.attention_implementation);
  c.num_heads = 5;
  EXPECT_THROW(c.validate(), Error);
}

TEST(Transformer, LaterTokensDoNotChangeEarlierLogits) {
  nnx::Rngs rngs(0);
  TransformerLM model(testutil::small_transformer(32, 8, 16), rngs);
  Array tokens = random_tokens(1, {2, 8}, 32);
  std::vector<int32_t> changed = tokens.to_vector<int32_t>();
  changed[5] = (changed[5] + 1) % 32;  // row 0, position 5
  const auto a = model(tokens).to_vector<float>();
  const auto b = model(jnp::array(changed, Shape{2, 8})).to_vector<float>();
  const int64_t v = 32;
  for (int64_t t = 0; t < 8; ++t)
    for (int64_t j = 0; j < v; ++j) {
      const size_t i = t * v + j;
      if (t < 5) {
        EXPECT_EQ(a[i], b[i]) << "position " << t;
      } else if (t == 5 && j == 0) {
        EXPECT_NE(a[i], b[i]);
      }
    }
}

TEST(Transformer, DecodingWithTheCacheMatchesTheFullForwardPass) {
  nnx::Rngs rngs(3);
  TransformerLM model(testutil::small_transformer(32, 8, 16), rngs);
  Array tokens = random_tokens(4, {1, 8}, 32);
  const auto full = model(tokens).to_vector<float>();
  model.init_cache(1);
  const auto ids = tokens.to_vector<int32_t>();
  for (int32_t p = 0; p < 8; ++p) {
    const auto step = model
                          .decode_step(jnp::array(std::vector<int32_t>{ids[p]}, Shape{1, 1}),
                                       jnp::array(std::vector<int32_t>{p}, Shape{}))
                          .to_vector<float>();
    for (int64_t j = 0; j < 32; ++j) EXPECT_NEAR(step[j], full[p * 32 + j], 1e-5) << p;
  }
}

TEST(Transformer, LossOnAFixedBatchFallsOver50Steps) {
  nnx::Rngs rngs(0);
  TransformerLM model(testutil::small_transformer(32, 8, 16), rngs);
  models::OptimizerOptions o;
  o.learning_rate = 1e-2;
  o.warmup_steps = 5;
  o.total_steps = 50;
  auto tx = models::make_optimizer(o);
  State params = nnx::state(model, nnx::VariableKind::Param);
  State opt_state = tx.init(params);
  auto step = models::make_train_step(model, tx);
  const data::Batch batch = random_batch(7, 4, 8, 32);
  float first = 0, last = 0;
  for (int i = 0; i < 50; ++i) {
    auto [p, s, metrics] = step(params, opt_state, batch);
    params = p;
    opt_state = s;
    if (i == 0) first = metrics.at("loss").item<float>();
    last = metrics.at("loss").item<float>();
  }
  // A fresh model is near uniform (logits of unit variance add about 1/2 nat).
  EXPECT_NEAR(first, std::log(32.0) + 0.5, 0.5);
  EXPECT_LT(last, 0.5 * first);  // memorizing 32 targets
  EXPECT_EQ(step.compile_count(), 1);
}

TEST(Transformer, GenerateIsDeterministicPerSeedAndGreedyFollowsArgmax) {
  nnx::Rngs rngs(0);
  TransformerLM model(testutil::small_transformer(32, 8, 16), rngs);
  const State params = nnx::state(model, nnx::VariableKind::Param);
  models::SampleOptions o;
  o.max_tokens = 5;
  o.temperature = 0.8;
  o.top_k = 4;
  o.seed = 11;
  const auto a = models::generate(model, params, {1, 2, 3}, o);
  EXPECT_EQ(a, models::generate(model, params, {1, 2, 3}, o));
  EXPECT_EQ(a.size(), 5u);
  // Stops at max_len: 3 prompt tokens + at most 5 new ones.
  o.max_tokens = 100;
  EXPECT_EQ(models::generate(model, params, {1, 2, 3}, o).size(), 5u);

  o.temperature = 0;
  o.max_tokens = 3;
  std::vector<int32_t> seq = {4, 5};
  const auto greedy = models::generate(model, params, seq, o);
  for (int32_t t : greedy) {
    const auto logits =
        model(jnp::array(seq, Shape{1, static_cast<int64_t>(seq.size())})).to_vector<float>();
    const auto last = logits.begin() + (seq.size() - 1) * 32;
    EXPECT_EQ(t, std::max_element(last, last + 32) - last);
    seq.push_back(t);
  }
  EXPECT_THROW(models::generate(model, params, {}, o), Error);
  EXPECT_THROW(models::generate(model, params, {40}, o), Error);
}

// PyTorch from Debian (python3-torch) under the system interpreter.
bool torch_available() {
  return std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

TEST(Transformer, OneTrainingStepMatchesPyTorch) {
  if (!torch_available()) GTEST_SKIP() << "no /usr/bin/python3 with torch (python3-torch)";
  const TransformerConfig config = testutil::small_transformer(32, 8, 16);
  nnx::Rngs rngs(5);
  TransformerLM model(config, rngs);
  models::OptimizerOptions o;
  o.learning_rate = 1e-2;
  o.warmup_steps = 0;
  o.total_steps = 10;
  o.clip_norm = 0.5;  // small enough to clip
  const State params = nnx::state(model, nnx::VariableKind::Param);
  const data::Batch batch = random_batch(9, 3, 8, 32);

  const fs::path dir = fs::temp_directory_path() / ("cujax_torch_step_" + std::to_string(getpid()));
  fs::create_directories(dir / "params");
  for (const auto& [path, value] : params)
    save_npy(dir / "params" / (path + ".npy"), value.to_host());
  save_npy(dir / "inputs.npy", batch.inputs.to_host());
  save_npy(dir / "targets.npy", batch.targets.to_host());
  json::Value cfg = config.to_json();
  json::Value opt = json::Value::object();
  opt.set("learning_rate", o.learning_rate);
  opt.set("b1", o.b1);
  opt.set("b2", o.b2);
  opt.set("weight_decay", o.weight_decay);
  opt.set("clip_norm", o.clip_norm);
  cfg.set("optimizer", opt);
  std::ofstream(dir / "config.json") << json::dump(cfg);
  const std::string cmd =
      "/usr/bin/python3 " CUJAX_SOURCE_DIR "/tools/torch_reference.py step " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  auto [loss, grads] =
      value_and_grad([&](const State& p) { return models::lm_loss(model, p, batch); })(params);
  EXPECT_NEAR(loss.item<float>(), load_npy(dir / "loss.npy").to_vector<double>()[0], 1e-5);
  auto relative_error = [](const std::vector<float>& a, const std::vector<double>& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      num += (a[i] - b[i]) * (a[i] - b[i]);
      den += b[i] * b[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
  };
  // The key biases' gradient is exactly zero (a softmax ignores a constant added to a row of
  // logits): both sides give rounding noise there, which Adam then scales up to a full step.
  // Those parameters are compared against the scale of the whole gradient, and not stepped.
  double total_norm = 0;
  for (const auto& [path, g] : grads)
    for (double x : load_npy(dir / "grads" / (path + ".npy")).to_vector<double>())
      total_norm += x * x;
  total_norm = std::sqrt(total_norm);
  std::set<std::string> vanishing;
  for (const auto& [path, g] : grads) {
    const auto expected = load_npy(dir / "grads" / (path + ".npy")).to_vector<double>();
    double norm = 0;
    for (double x : expected) norm += x * x;
    norm = std::sqrt(norm);
    if (norm < 1e-6 * total_norm) {
      vanishing.insert(path);
      EXPECT_LT(relative_error(g.to_vector<float>(), expected) * norm, 1e-5 * total_norm) << path;
    } else {
      EXPECT_LT(relative_error(g.to_vector<float>(), expected), 1e-4) << path;
    }
  }
  EXPECT_EQ(vanishing.size(), 2u);  // blocks.{0,1}.attn.key.bias

  auto tx = models::make_optimizer(o);
  auto step = models::make_train_step(model, tx);
  State opt_state = tx.init(params);
  State copy;  // the step donates its arguments
  for (const auto& [path, value] : params) copy.set(path, value * 1.0);
  auto [stepped, new_state, metrics] = step(copy, opt_state, batch);
  for (const auto& [path, value] : stepped) {
    if (vanishing.count(path)) continue;
    const auto expected = load_npy(dir / "stepped" / (path + ".npy")).to_vector<double>();
    const auto got = value.to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], expected[i], 1e-3 * o.learning_rate + 1e-6) << path << "[" << i << "]";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cujax
