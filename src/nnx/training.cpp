#include "cujax/nnx/training.h"

#include "cujax/jit.h"

namespace cujax::nnx {

Optimizer::Optimizer(Module& model, const State& params, optax::GradientTransformation tx,
                     Filter wrt)
    : model_(&model), wrt_(wrt), opt_state_(tx.init(params)) {
  JitOptions options;
  options.name = "nnx_optimizer_update";
  step_fn_ = jit(
      [tx](const State& p, const optax::OptState& s, const State& grads) {
        auto [updates, new_state] = tx.update(grads, s, p);
        return std::make_pair(optax::apply_updates(p, updates), new_state);
      },
      options);
}

void Optimizer::update(const State& grads) {
  const State params = state(*model_, wrt_);
  if (grads.size() != params.size())
    throw Error("nnx.Optimizer.update: grads has " + std::to_string(grads.size()) +
                " entries, the model's optimized variables are " + std::to_string(params.size()));
  for (const auto& [path, g] : grads)
    if (!params.contains(path))
      throw Error("nnx.Optimizer.update: grads has '" + path +
                  "', which is not an optimized variable of the model");
  auto [new_params, new_state] = step_fn_(params, opt_state_, grads);
  nnx::update(*model_, new_params);
  opt_state_ = std::move(new_state);
  ++step_;
}

void Optimizer::update(Module& model, const State& grads) {
  if (&model != model_)
    throw Error("nnx.Optimizer.update: the model is not the one this optimizer was made for");
  update(grads);
}

}  // namespace cujax::nnx
