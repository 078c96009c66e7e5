#include <algorithm>
#include <chrono>

#include "cli/bench.h"
#include "cujax/lax.h"
#include "cujax/models/lm.h"
#include "cujax/profiler.h"
#include "cujax/random.h"

namespace cujax::cli {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

StepTiming time_train_step(const models::TransformerConfig& config, int64_t batch, int64_t seq,
                           int64_t steps, const std::function<data::Batch(data::Batch)>& place,
                           const std::string& platform) {
  using clock = std::chrono::steady_clock;
  nnx::Rngs rngs(0);
  models::TransformerLM model(config, rngs);
  models::OptimizerOptions o;
  o.total_steps = 1000;
  const auto tx = models::make_optimizer(o);
  State params = nnx::state(model, nnx::VariableKind::Param);
  State opt_state = tx.init(params);
  auto step = models::make_train_step(model, tx, platform);
  const Array window = random::randint(random::PRNGKey(0), {batch, seq + 1}, 0, config.vocab_size);
  data::Batch b{lax::slice_in_dim(window, 0, seq, 1, 1),
                lax::slice_in_dim(window, 1, seq + 1, 1, 1)};
  if (place) b = place(std::move(b));

  StepTiming t;
  t.parameters = nnx::count(model);
  std::vector<double> ms, collective_ms;
  for (int64_t i = 0; i < steps + 2; ++i) {
    const profiler::StepTraceAnnotation annotation("train", i);
    const auto t0 = clock::now();
    auto [p, s, metrics] = step(params, opt_state, b);
    metrics.at("loss").block_until_ready();
    params = std::move(p);
    opt_state = std::move(s);
    const double elapsed = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (i == 0) t.compile_s = elapsed / 1e3;
    if (i < 2) continue;
    ms.push_back(elapsed);
    const auto stats = step.last_spmd_stats();
    collective_ms.push_back(stats ? stats->collective_seconds * 1e3 : 0);
  }
  t.ms = median_of(ms);
  t.collective_ms = median_of(collective_ms);
  return t;
}

}  // namespace cujax::cli
