// Training, evaluation and sampling of TransformerLM, as pure jitted functions of the
// parameters:
//
//   models::TrainStep step = models::make_train_step(model, tx);
//   auto [params2, opt_state2, metrics] = step(params, opt_state, batch);  // donates both states
//
// The loss is the mean next-token cross-entropy (nats) over the batch's B x T positions.
// Metrics stay on the device ({"loss", "grad_norm"} f32 scalars): fetch them every N steps,
// not every step, or each fetch waits for the step to finish.
#pragma once

#include <cstdint>
#include <functional>
#include <tuple>
#include <vector>

#include "cujax/data.h"
#include "cujax/jit.h"
#include "cujax/models/transformer.h"
#include "cujax/optax.h"

namespace cujax::models {

// Mean cross-entropy of the model with `params` swapped in, on a batch.
Array lm_loss(TransformerLM& model, const State& params, const data::Batch& batch);

struct OptimizerOptions {
  double learning_rate = 3e-3;  // peak, after the linear warmup
  int64_t warmup_steps = 100;
  int64_t total_steps = 1000;  // the cosine decays to end_fraction * peak here
  double end_fraction = 0.1;
  double b1 = 0.9, b2 = 0.95;
  double weight_decay = 0.1;  // only on kernels and embeddings (parameters of rank >= 2)
  double clip_norm = 1.0;
};
// clip_by_global_norm(clip_norm) then adamw with warmup_cosine_decay_schedule (GPT-2's recipe).
optax::GradientTransformation make_optimizer(const OptimizerOptions& options);
// The learning rate the schedule gives at `step`.
double learning_rate_at(const OptimizerOptions& options, int64_t step);

// (params, opt_state, batch) -> (params, opt_state, metrics).
struct TrainStepFn {
  TransformerLM* model;
  optax::GradientTransformation tx;
  std::tuple<State, State, State> operator()(const State& params, const State& opt_state,
                                             const data::Batch& batch) const;
};
using TrainStep = Jitted<TrainStepFn>;
// Jitted with params and opt_state donated: their buffers are reused for the results, so the
// caller must not use the arguments after the call. `platform` is the backend it compiles for.
TrainStep make_train_step(TransformerLM& model, optax::GradientTransformation tx,
                          std::string platform = default_backend());

// (params, batch) -> loss.
struct EvalStepFn {
  TransformerLM* model;
  Array operator()(const State& params, const data::Batch& batch) const;
};
using EvalStep = Jitted<EvalStepFn>;
EvalStep make_eval_step(TransformerLM& model, std::string platform = default_backend());

struct SampleOptions {
  int64_t max_tokens = 100;
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // 0: the whole vocabulary
  double top_p = 1.0;        // in (0, 1]; 1: the whole vocabulary (after top_k)
  uint64_t seed = 0;
};

// Whether each of logits (B, V) is in its row's nucleus (top-p sampling): the fewest most
// probable tokens whose probabilities (the row's softmax) add up to at least top_p (B, 1),
// ties kept; top_p >= 1 keeps every token. The threshold is found by bisecting the
// probabilities' bits, 32 rounds of a masked sum over the row, rather than by sorting, so that
// generate() and the batched serving step (serve/steps.h) keep the same tokens.
Array top_p_mask(const Array& logits, const Array& top_p);

// Continues `prompt` (at least one token) with up to max_tokens tokens by decoding one token at
// a time with the KV cache; stops early at the model's max_len. The next token at position p
// is drawn with the key fold_in(PRNGKey(seed), p), so a seed gives the same text every time.
// `on_token` sees each new token as soon as it is known. Returns the new tokens.
std::vector<int32_t> generate(TransformerLM& model, const State& params,
                              const std::vector<int32_t>& prompt, const SampleOptions& options,
                              const std::function<void(int32_t)>& on_token = {});

}  // namespace cujax::models
