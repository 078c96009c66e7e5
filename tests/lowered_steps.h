// Lowered programs that the fusion and code generator tests plan and compile: the training and
// eval steps of a transformer config, and random arguments for any function.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/ir/parser.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/models/lm.h"
#include "cujax/nnx.h"
#include "cujax/random.h"

namespace cujax::testutil {

struct LoweredSteps {
  std::vector<std::string> names;  // "train", "eval"
  std::vector<std::shared_ptr<ir::Module>> modules;
};

// The training step (adamw with clipping, as `cujax train` uses) and the eval step of `config`
// on a batch x seq_len batch, lowered for the cpu platform (the IR is the same for every one).
inline LoweredSteps lower_steps(const models::TransformerConfig& config, int64_t batch,
                                int64_t seq_len) {
  nnx::Rngs rngs(0);
  models::TransformerLM model(config, rngs);
  auto tx = models::make_optimizer(models::OptimizerOptions{});
  State params = nnx::state(model, nnx::VariableKind::Param);
  State opt_state = tx.init(params);
  Array window = random::randint(random::PRNGKey(1), {batch, seq_len + 1}, 0, config.vocab_size);
  data::Batch b{lax::slice_in_dim(window, 0, seq_len, 1, 1),
                lax::slice_in_dim(window, 1, seq_len + 1, 1, 1)};
  LoweredSteps out;
  auto step = models::make_train_step(model, tx);
  auto train = step.lower(params, opt_state, b);
  out.names.push_back("train");
  out.modules.push_back(ir::parse_module(train.as_text()));
  auto eval = models::make_eval_step(model);
  auto lowered_eval = eval.lower(params, b);
  out.names.push_back("eval");
  out.modules.push_back(ir::parse_module(lowered_eval.as_text()));
  return out;
}

// Random arguments for `fn`: floats in [-2, 2], integers in [0, 8), booleans.
inline std::vector<HostTensor> random_arguments(const ir::Function& fn, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<HostTensor> args;
  for (const ir::Type& t : fn.arg_types()) {
    HostTensor h(t.dtype, t.shape);
    visit_dtype(t.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* p = h.data_as<T>();
      for (int64_t i = 0; i < h.size(); ++i) {
        if constexpr (std::is_same_v<T, bool>)
          p[i] = (rng() & 1) != 0;
        else if constexpr (std::is_integral_v<T>)
          p[i] = static_cast<T>(rng() % 8);
        else
          p[i] = T(std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng));
      }
    });
    args.push_back(std::move(h));
  }
  return args;
}

}  // namespace cujax::testutil
