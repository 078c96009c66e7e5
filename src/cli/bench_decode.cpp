// `cujax bench decode`: the KV-cache decode step of a transformer config (random init, f32),
// jitted with the cache donated, greedy, each step's tokens fed to the next on the device; ms
// per step (= per output token of each sequence) at each batch size. bench/jax/bench.py decode
// runs the same step in JAX, and scripts/gpu-check.sh puts the two side by side. Prints
// `RESULT` lines for that table. With --step serve it times the serving engine's decode step
// instead (serve::jit_steps: every slot busy at its own position, each step waited for as the
// engine waits), whose cost at batch B against batch 1 is the batching's price.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/bench.h"
#include "cujax/jit.h"
#include "cujax/models/transformer.h"
#include "cujax/numpy.h"
#include "cujax/serve/steps.h"

namespace cujax::cli {

namespace jnp = cujax::numpy;

namespace {

using clock = std::chrono::steady_clock;

// The serving engine's decode step with all `batch` slots active, slot b at position
// start + b * stride (mod max_seq - 1), as requests that joined at different times are; the
// tokens it samples (greedy, or drawn at `temperature`) are fed back. Returns the step times in ms
// (the first, which compiles, left out).
std::vector<double> serve_step_times(models::TransformerLM& model, const State& params,
                                     int64_t batch, int64_t max_seq, int64_t steps,
                                     float temperature) {
  serve::ServeSteps s = serve::jit_steps(model, params, batch, max_seq);
  State cache = std::move(s.cache);
  const auto ints = [batch](int32_t v) { return std::vector<int32_t>(batch, v); };
  const Array seeds = jnp::array(ints(0), Shape{batch});
  const Array temps = jnp::array(std::vector<float>(batch, temperature), Shape{batch});
  const Array top_k = jnp::array(ints(0), Shape{batch});
  const Array top_p = jnp::array(std::vector<float>(batch, 1.0f), Shape{batch});
  std::vector<int32_t> tokens = ints(0);
  std::vector<double> ms;
  for (int64_t i = 0; i <= steps; ++i) {
    std::vector<int32_t> positions(batch);
    for (int64_t b = 0; b < batch; ++b)
      positions[b] = static_cast<int32_t>((i + b * 7) % (max_seq - 1));
    const auto t0 = clock::now();
    auto [next, new_cache] =
        s.decode(cache, jnp::array(tokens, Shape{batch, 1}), jnp::array(positions, Shape{batch}),
                 seeds, temps, top_k, top_p);
    cache = std::move(new_cache);
    tokens = next.to_vector<int32_t>();
    if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
  }
  return ms;
}

}  // namespace

int bench_decode(const std::vector<std::string>& argv) {
  const Args args(
      {"bench decode",
       "the KV-cache decode step: milliseconds per step at each batch size",
       {{"config", "NAME", "model config: tiny, small or gpt2 (default: small)"},
        {"batch", "B,B...", "batch sizes (default: 1,8)"},
        {"step", "model|serve", "the model's decode_step (default), or the serving engine's step"},
        {"max-seq", "T", "--step serve: the cache's length (default: max_len)"},
        {"temperature", "T", "--step serve: every slot's temperature; 0 is greedy (default: 0)"},
        platform_option(),
        profile_option()}},
      argv);
  const std::string platform = use_platform(args);
  const ProfileOption profile(args);
  models::TransformerConfig config;
  try {
    config = models::config_by_name(args.string("config", "small"));
  } catch (const Error& e) {
    throw UsageError(std::string("--config: ") + e.what());
  }
  std::vector<int64_t> batches;
  std::stringstream list(args.string("batch", "1,8"));
  for (std::string item; std::getline(list, item, ',');) {
    if (item.empty() || item.size() > 4 ||
        item.find_first_not_of("0123456789") != std::string::npos || std::stoll(item) < 1)
      throw UsageError("--batch takes sizes from 1 to 9999 separated by commas, not '" + item +
                       "'");
    batches.push_back(std::stoll(item));
  }
  const std::string which = args.string("step", "model");
  if (which != "model" && which != "serve")
    throw UsageError("--step " + which + ": model (the model's decode_step) or serve");
  if (which == "model" && (args.has("max-seq") || args.has("temperature")))
    throw UsageError("--max-seq and --temperature are options of --step serve");
  const int64_t tokens = std::min<int64_t>(64, config.max_len - 1);
  if (which == "serve") {
    const int64_t max_seq = args.integer("max-seq", config.max_len, 2);
    const double temperature = args.number("temperature", 0, 0);
    if (max_seq > config.max_len)
      throw UsageError("--max-seq " + std::to_string(max_seq) + ": at most the config's max_len " +
                       std::to_string(config.max_len));
    std::printf(
        "cujax bench decode --step serve (%s backend): config %s, max_seq %lld, f32, temperature "
        "%g, every slot busy, %lld steps after the first (which compiles), each waited for\n",
        platform.c_str(), config.name.c_str(), static_cast<long long>(max_seq), temperature,
        static_cast<long long>(tokens));
    nnx::Rngs rngs(0);
    models::TransformerLM model(config, rngs);
    const State params = nnx::state(model, nnx::VariableKind::Param);
    double first_median = 0;
    for (const int64_t batch : batches) {
      std::vector<double> ms =
          serve_step_times(model, params, batch, max_seq, tokens, static_cast<float>(temperature));
      std::sort(ms.begin(), ms.end());
      const double median = median_of(ms);
      if (first_median == 0) first_median = median;
      std::printf(
          "batch %-4lld %8.3f ms per step (median; p10 %.3f), %8.3f ms per token, %.2fx "
          "the first batch's step\n",
          static_cast<long long>(batch), median, ms[ms.size() / 10],
          median / static_cast<double>(batch), median / first_median);
      std::printf("RESULT cujax.serve_decode.%s.b%lld=%.4g unit=ms/step\n", config.name.c_str(),
                  static_cast<long long>(batch), median);
    }
    return 0;
  }
  for (const int64_t batch : batches) {
    nnx::Rngs rngs(0);
    models::TransformerLM model(config, rngs);
    const State params = nnx::state(model, nnx::VariableKind::Param);
    model.init_cache(batch);
    State cache = nnx::state(model, nnx::VariableKind::Cache);
    JitOptions options;
    options.name = "decode_step";
    options.platform = platform;
    options.donate_argnums = {1};
    auto step = jit(
        [&model](const State& params, const State& cache, const Array& token,
                 const Array& position) {
          State both = params;
          for (const auto& [path, value] : cache) both.set(path, value);
          auto [logits, new_cache] =
              nnx::functional_call(model, both, nnx::VariableKind::Cache,
                                   [&] { return model.decode_step(token, position); });
          const Array next = jnp::astype(jnp::argmax(logits, -1), DType::I32);
          return std::pair{jnp::reshape(next, {token.shape()[0], 1}), new_cache};
        },
        options);
    std::vector<Array> positions;
    for (int64_t p = 0; p <= tokens; ++p)
      positions.push_back(jnp::array(std::vector<int32_t>{static_cast<int32_t>(p)}, Shape{}));
    Array token = jnp::zeros({batch, 1}, DType::I32);
    const auto t0 = clock::now();
    std::tie(token, cache) = step(params, cache, token, positions[0]);
    token.block_until_ready();
    const double compile_s = std::chrono::duration<double>(clock::now() - t0).count();
    const auto t1 = clock::now();
    for (int64_t p = 1; p <= tokens; ++p)
      std::tie(token, cache) = step(params, cache, token, positions[p]);
    token.block_until_ready();
    const double ms = std::chrono::duration<double, std::milli>(clock::now() - t1).count() / tokens;
    std::printf("batch %-4lld %8.3f ms per step (first call %.2f s)\n",
                static_cast<long long>(batch), ms, compile_s);
    std::printf("RESULT cujax.decode.%s.b%lld=%.4g unit=ms/token\n", config.name.c_str(),
                static_cast<long long>(batch), ms);
  }
  return 0;
}

}  // namespace cujax::cli
