// `cujax bench decode`: the KV-cache decode step of a transformer config (random init, f32),
// jitted with the cache donated, greedy, each step's tokens fed to the next on the device; ms
// per step (= per output token of each sequence) at each batch size. bench/jax/bench.py decode
// runs the same step in JAX, and scripts/gpu-check.sh puts the two side by side. Prints
// `RESULT` lines for that table.
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

namespace cujax::cli {

namespace jnp = cujax::numpy;

int bench_decode(const std::vector<std::string>& argv) {
  const Args args({"bench decode",
                   "the KV-cache decode step: milliseconds per step at each batch size",
                   {{"config", "NAME", "model config: tiny, small or gpt2 (default: small)"},
                    {"batch", "B,B...", "batch sizes (default: 1,8)"},
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
  const int64_t tokens = std::min<int64_t>(64, config.max_len - 1);
  std::printf(
      "cujax bench decode (%s backend): config %s, f32, greedy, %lld steps after the "
      "first (which compiles)\n",
      platform.c_str(), config.name.c_str(), static_cast<long long>(tokens));
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
    using clock = std::chrono::steady_clock;
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
