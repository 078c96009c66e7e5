#include "cujax/nnx/training.h"

#include "cujax/jit.h"
#include "cujax/numpy.h"

namespace cujax::nnx {

Optimizer::Optimizer(Module& model, const State& params, optax::GradientTransformation tx,
                     Filter wrt)
    : step(VariableKind::OptState, numpy::zeros({}, DType::U32)),
      model_(&model),
      wrt_(wrt),
      opt_state_(tx.init(params)) {
  JitOptions options;
  options.name = "nnx_optimizer_update";
  step_fn_ = cujax::jit(
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
  step.value = numpy::add(step.value, numpy::ones({}, DType::U32));
}

void Optimizer::update(Module& model, const State& grads) {
  if (&model != model_)
    throw Error("nnx.Optimizer.update: the model is not the one this optimizer was made for");
  update(grads);
}

State state(Optimizer& optimizer) {
  State out;
  out.set("step", optimizer.step.value);
  for (const auto& [path, value] : optimizer.opt_state_) out.set("opt_state." + path, value);
  return out;
}

void update(Optimizer& optimizer, const State& state) {
  const State current = nnx::state(optimizer);
  for (const auto& [path, value] : current) {
    if (!state.contains(path))
      throw Error("nnx.update(optimizer): the state has no '" + path + "'");
    const Array& v = state.at(path);
    if (v.shape() != value.shape() || v.dtype() != value.dtype())
      throw Error("nnx.update(optimizer): '" + path + "' is " + v.aval().str() +
                  ", the optimizer's is " + value.aval().str());
  }
  if (state.size() != current.size())
    for (const auto& [path, v] : state)
      if (!current.contains(path))
        throw Error("nnx.update(optimizer): '" + path + "' is not in the optimizer's state");
  optimizer.step.value = state.at("step");
  for (auto& [path, value] : optimizer.opt_state_) value = state.at("opt_state." + path);
}

}  // namespace cujax::nnx
