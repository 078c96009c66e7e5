#include "cujax/models/lm.h"

#include <algorithm>
#include <limits>

#include "cujax/control_flow.h"
#include "cujax/core/error.h"
#include "cujax/grad.h"
#include "cujax/lax.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/random.h"

namespace cujax::models {

namespace jnp = cujax::numpy;

Array lm_loss(TransformerLM& model, const State& params, const data::Batch& batch) {
  return nnx::functional_call(model, params, [&] {
    const Array logits = model(batch.inputs);
    return jnp::mean(optax::softmax_cross_entropy_with_integer_labels(logits, batch.targets));
  });
}

namespace {

// The warmup must leave at least one step of decay.
int64_t warmup_steps(const OptimizerOptions& o) {
  return std::clamp<int64_t>(o.warmup_steps, 0, std::max<int64_t>(o.total_steps - 1, 0));
}

optax::Schedule schedule(const OptimizerOptions& o) {
  if (o.total_steps <= 0)
    throw Error("optimizer: total_steps must be positive, got " + std::to_string(o.total_steps));
  return optax::warmup_cosine_decay_schedule(0.0, o.learning_rate, warmup_steps(o),
                                             std::max<int64_t>(o.total_steps, 1),
                                             o.learning_rate * o.end_fraction);
}

}  // namespace

optax::GradientTransformation make_optimizer(const OptimizerOptions& o) {
  // Biases, norms' scales and other vectors are not decayed (GPT-2's practice).
  optax::Mask decayed = [](const std::string&, const Array& p) { return p.ndim() >= 2; };
  return optax::chain(optax::clip_by_global_norm(o.clip_norm),
                      optax::adamw(schedule(o), o.b1, o.b2, 1e-8, o.weight_decay, decayed));
}

double learning_rate_at(const OptimizerOptions& o, int64_t step) {
  return schedule(o)(jnp::array(std::vector<int32_t>{static_cast<int32_t>(step)}, Shape{}))
      .item<float>();
}

std::tuple<State, State, State> TrainStepFn::operator()(const State& params, const State& opt_state,
                                                        const data::Batch& batch) const {
  auto [loss, grads] =
      value_and_grad([&](const State& p) { return lm_loss(*model, p, batch); })(params);
  auto [updates, new_opt_state] = tx.update(grads, opt_state, params);
  State metrics;
  metrics.set("loss", loss);
  metrics.set("grad_norm", optax::global_norm(grads));
  return {optax::apply_updates(params, updates), std::move(new_opt_state), std::move(metrics)};
}

TrainStep make_train_step(TransformerLM& model, optax::GradientTransformation tx,
                          std::string platform) {
  JitOptions options;
  options.name = "train_step";
  options.platform = std::move(platform);
  options.donate_argnums = {0, 1};
  options.arg_names = {"params", "opt_state", "batch"};
  return jit(TrainStepFn{&model, std::move(tx)}, options);
}

Array EvalStepFn::operator()(const State& params, const data::Batch& batch) const {
  return lm_loss(*model, params, batch);
}

EvalStep make_eval_step(TransformerLM& model, std::string platform) {
  JitOptions options;
  options.name = "eval_step";
  options.platform = std::move(platform);
  options.arg_names = {"params", "batch"};
  return jit(EvalStepFn{&model}, options);
}

namespace {

// logits (B, V) -> the next tokens (B,) i32.
Array sample(const Array& logits, const Array& key, const SampleOptions& o) {
  if (o.temperature == 0) return jnp::astype(jnp::argmax(logits, -1), DType::I32);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  Array scaled = logits / o.temperature;
  if (o.top_k > 0 && o.top_k < logits.shape().back()) {
    // Keep the k largest: everything below the k-th value is impossible.
    const Array kth =
        lax::slice_in_dim(lax::top_k(scaled, o.top_k).first, o.top_k - 1, o.top_k, 1, -1);
    scaled = jnp::where(jnp::less(scaled, kth), -kInf, scaled);
  }
  if (o.top_p < 1) {
    const Array p = jnp::full(Shape{logits.shape()[0], 1}, o.top_p, DType::F32);
    scaled = jnp::where(top_p_mask(scaled, p), scaled, -kInf);
  }
  return random::categorical(key, scaled, -1);
}

}  // namespace

Array top_p_mask(const Array& logits, const Array& top_p) {
  const Array probs = nn::softmax(logits, -1);
  // Non-negative floats order as their bits. [lo, hi] holds the largest code whose tokens (the
  // ones with at least its probability) carry at least top_p of the mass; each round halves it.
  const Array code = lax::bitcast_convert_type(probs, DType::U32);
  using Bounds = std::pair<Array, Array>;
  const Shape rows{logits.shape()[0], 1};
  const Bounds init{jnp::zeros(rows, DType::U32),
                    jnp::full(rows, std::numeric_limits<uint32_t>::max(), DType::U32)};
  const Array one = jnp::ones(rows, DType::U32);
  const Array threshold =
      lax::fori_loop(
          0, 32,
          [&](const Array&, const Bounds& b) {
            const auto& [lo, hi] = b;
            const Array mid = lo + lax::shift_right_logical(hi - lo, one) + one;
            const Array mass =
                jnp::sum(jnp::where(jnp::greater_equal(code, mid), probs, 0.0f), {1}, true);
            const Array ok = jnp::greater_equal(mass, top_p);
            return Bounds{jnp::where(ok, mid, lo), jnp::where(ok, hi, mid - one)};
          },
          init)
          .first;
  return jnp::logical_or(jnp::greater_equal(top_p, 1.0f), jnp::greater_equal(code, threshold));
}

std::vector<int32_t> generate(TransformerLM& model, const State& params,
                              const std::vector<int32_t>& prompt, const SampleOptions& o,
                              const std::function<void(int32_t)>& on_token) {
  if (prompt.empty()) throw Error("generate: the prompt needs at least one token");
  if (o.temperature < 0)
    throw Error("generate: temperature must be >= 0, got " + std::to_string(o.temperature));
  if (o.top_k < 0) throw Error("generate: top_k must be >= 0, got " + std::to_string(o.top_k));
  if (!(o.top_p > 0 && o.top_p <= 1))
    throw Error("generate: top_p must be in (0, 1], got " + std::to_string(o.top_p));
  const int64_t max_len = model.config.max_len;
  if (static_cast<int64_t>(prompt.size()) > max_len)
    throw Error("generate: the prompt has " + std::to_string(prompt.size()) +
                " tokens, more than the model's max_len " + std::to_string(max_len));
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= model.config.vocab_size)
      throw Error("generate: prompt token " + std::to_string(i) + " is " +
                  std::to_string(prompt[i]) + ", outside the vocabulary of " +
                  std::to_string(model.config.vocab_size));

  model.init_cache(1);
  State cache = nnx::state(model, nnx::VariableKind::Cache);
  const Array base_key = random::PRNGKey(static_cast<int64_t>(o.seed));
  JitOptions jo;
  jo.name = "decode_step";
  jo.donate_argnums = {1};
  auto step = jit(
      [&model, o, base_key](const State& params, const State& cache, const Array& token,
                            const Array& position) {
        State both = params;
        for (const auto& [path, value] : cache) both.set(path, value);
        auto [logits, new_cache] = nnx::functional_call(model, both, nnx::VariableKind::Cache, [&] {
          return model.decode_step(token, position);
        });
        // Position p + 1 is drawn with fold_in(key, p + 1).
        const Array key = random::fold_in(base_key, position + 1);
        return std::pair{sample(logits, key, o), new_cache};
      },
      jo);

  std::vector<int32_t> tokens = prompt, out;
  const int64_t total =
      std::min<int64_t>(static_cast<int64_t>(prompt.size()) + o.max_tokens, max_len);
  for (int64_t p = 0; p + 1 < total; ++p) {
    auto [sampled, new_cache] =
        step(params, cache, jnp::array(std::vector<int32_t>{tokens[p]}, Shape{1, 1}),
             jnp::array(std::vector<int32_t>{static_cast<int32_t>(p)}, Shape{}));
    cache = new_cache;
    // Inside the prompt the sample is never read (so never waited for).
    if (p + 1 < static_cast<int64_t>(prompt.size())) continue;
    const int32_t t = sampled.to_vector<int32_t>()[0];
    tokens.push_back(t);
    out.push_back(t);
    if (on_token) on_token(t);
  }
  return out;
}

}  // namespace cujax::models
