// cujax::optax: gradient transformations, optimizers, schedules and losses under Optax's names
// and with Optax's semantics. Everything is pure: an optimizer is a GradientTransformation, a
// pair of functions
//
//   init(params) -> opt_state
//   update(grads, opt_state, params) -> (updates, new_opt_state)
//
// and the optimizer state is itself a tree (a State of dotted paths), so a whole training step
// (params, opt_state, batch) -> (params, opt_state, metrics) can be jitted, and the state
// checkpointed, like any other tree:
//
//   auto tx = optax::adamw(optax::warmup_cosine_decay_schedule(0, 3e-4, 100, 5000), 0.9, 0.95);
//   State opt_state = tx.init(params);
//   auto step = jit([tx](const State& params, const State& opt_state, const Array& x, const Array&
//   y) {
//     auto [loss, grads] = value_and_grad(loss_fn)(params, x, y);
//     auto [updates, new_state] = tx.update(grads, opt_state, params);
//     return std::tuple{optax::apply_updates(params, updates), new_state, loss};
//   });
//
// The state's paths follow Optax's structure as Orbax names it: chain(a, b) prefixes the states
// of its members with their index ("0.", "1."), scale_by_adam holds "count", "mu.<param path>"
// and "nu.<param path>", trace holds "trace.<param path>", scale_by_schedule "count". So adam's
// state is {0.count, 0.mu.<p>..., 0.nu.<p>...} (and 1.count with a scheduled learning rate).
//
// Params, grads and updates are States; any other tree of Arrays works through the template
// overloads of init and update, which name its leaves by their key paths (tree_to_state).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cujax/array.h"
#include "cujax/tree.h"

namespace cujax::optax {

using OptState = State;

// The leaves of any tree as a State keyed by their key paths, in traversal order: dict, State
// and struct keys, list/tuple indices ("layers.0.w"); a bare Array is the path "".
template <class T>
State tree_to_state(const T& tree);
// `structure` with its leaves taken from `state` in order (the inverse of tree_to_state).
template <class T>
T state_to_tree(const T& structure, const State& state);

class GradientTransformation {
 public:
  using InitFn = std::function<OptState(const State& params)>;
  // `params` is null when the caller has none (Optax's params=None).
  using UpdateFn = std::function<std::pair<State, OptState>(
      const State& updates, const OptState& state, const State* params)>;

  GradientTransformation(InitFn init, UpdateFn update)
      : init_(std::move(init)), update_(std::move(update)) {}

  OptState init(const State& params) const { return init_(params); }
  std::pair<State, OptState> update(const State& updates, const OptState& state) const {
    return update_(updates, state, nullptr);
  }
  std::pair<State, OptState> update(const State& updates, const OptState& state,
                                    const State& params) const {
    return update_(updates, state, &params);
  }

  // Any tree of Arrays (a registered struct, a map, a vector...): the state's paths are the
  // tree's key paths.
  template <class T>
  OptState init(const T& params) const {
    return init_(tree_to_state(params));
  }
  template <class T>
  std::pair<T, OptState> update(const T& updates, const OptState& state) const {
    auto [u, s] = update_(tree_to_state(updates), state, nullptr);
    return {state_to_tree(updates, u), std::move(s)};
  }
  template <class T>
  std::pair<T, OptState> update(const T& updates, const OptState& state, const T& params) const {
    const State p = tree_to_state(params);
    auto [u, s] = update_(tree_to_state(updates), state, &p);
    return {state_to_tree(updates, u), std::move(s)};
  }

 private:
  InitFn init_;
  UpdateFn update_;
};

// ---- Schedules: step count (an int32 scalar, traced inside jit) -> value (f32 scalar). ----

using Schedule = std::function<Array(const Array& count)>;

// A learning rate (or other hyperparameter) given as a number or as a schedule.
class ScalarOrSchedule {
 public:
  ScalarOrSchedule(double value) : value_(value) {}  // NOLINT(google-explicit-constructor)
  ScalarOrSchedule(Schedule schedule) : schedule_(std::move(schedule)) {}  // NOLINT
  template <class F>
  requires(std::is_invocable_r_v<Array, F, const Array&> && !std::is_arithmetic_v<F> &&
           !std::is_same_v<std::decay_t<F>, Schedule>) ScalarOrSchedule(F f)
      : schedule_(Schedule(std::move(f))) {}  // NOLINT
  bool is_schedule() const { return static_cast<bool>(schedule_); }
  double value() const { return value_; }
  const Schedule& schedule() const { return schedule_; }

 private:
  double value_ = 0;
  Schedule schedule_;
};

// value at every step.
Schedule constant_schedule(double value);
// polynomial_schedule(init, end, power, steps, begin):
//   c = clip(count - begin, 0, steps); (init - end) * (1 - c / steps)^power + end.
// transition_steps <= 0 gives the constant init_value; a negative transition_begin is 0.
Schedule polynomial_schedule(double init_value, double end_value, double power,
                             int64_t transition_steps, int64_t transition_begin = 0);
// polynomial_schedule with power 1.
Schedule linear_schedule(double init_value, double end_value, int64_t transition_steps,
                         int64_t transition_begin = 0);
// c = min(count, decay_steps); init * ((1 - alpha) * (0.5 (1 + cos(pi c / decay_steps)))^exponent
// + alpha). decay_steps must be positive.
Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha = 0.0,
                               double exponent = 1.0);
// schedules[0] before boundaries[0], then schedules[i + 1](count - boundaries[i]) from
// boundaries[i] on.
Schedule join_schedules(std::vector<Schedule> schedules, std::vector<int64_t> boundaries);
// join_schedules({linear_schedule(init, peak, warmup_steps), cosine_decay_schedule(peak,
// decay_steps - warmup_steps, end / peak, exponent)}, {warmup_steps}); decay_steps includes the
// warmup.
Schedule warmup_cosine_decay_schedule(double init_value, double peak_value, int64_t warmup_steps,
                                      int64_t decay_steps, double end_value = 0.0,
                                      double exponent = 1.0);

// ---- Combinators and transformations ----

// The transformations applied in order; the state of member i is under "i.".
GradientTransformation chain(std::vector<GradientTransformation> transforms);
template <class... Ts>
requires(std::is_convertible_v<Ts, GradientTransformation>&&...) GradientTransformation
    chain(Ts... transforms) {
  return chain(std::vector<GradientTransformation>{std::move(transforms)...});
}
// Updates unchanged; empty state.
GradientTransformation identity();
// updates * step_size.
GradientTransformation scale(double step_size);
// updates * step_size_fn(count), the value cast to each update's dtype; state "count" (int32).
GradientTransformation scale_by_schedule(Schedule step_size_fn);
// scale(-lr) or scale_by_schedule(-lr(count)) (flip_sign=false drops the minus).
GradientTransformation scale_by_learning_rate(ScalarOrSchedule learning_rate,
                                              bool flip_sign = true);
// Adam's rescaling (Kingma & Ba): mu = b1 mu + (1 - b1) g, nu = b2 nu + (1 - b2) g^2,
// count += 1 (saturating), update = mu_hat / (sqrt(nu_hat + eps_root) + eps) with
// mu_hat = mu / (1 - b1^count), nu_hat = nu / (1 - b2^count). nesterov uses
// mu_hat = b1 mu / (1 - b1^(count + 1)) + (1 - b1) g / (1 - b1^count) (NAdam).
GradientTransformation scale_by_adam(double b1 = 0.9, double b2 = 0.999, double eps = 1e-8,
                                     double eps_root = 0.0, bool nesterov = false);
// Momentum: t = g + decay * t; update = t, or g + decay * t with nesterov. State "trace.<p>".
GradientTransformation trace(double decay, bool nesterov = false);
// Whether a parameter (by path and value) takes part: Optax's mask, as a predicate.
using Mask = std::function<bool(const std::string& path, const Array& param)>;
// updates + weight_decay * params (requires params); with a mask, only where mask is true.
GradientTransformation add_decayed_weights(double weight_decay = 0.0, Mask mask = nullptr);
// If global_norm(updates) >= max_norm, every update is scaled by max_norm / global_norm;
// otherwise unchanged (a select on the traced norm, as Optax).
GradientTransformation clip_by_global_norm(double max_norm);

// ---- Optimizers ----

// chain(trace(momentum, nesterov), scale_by_learning_rate(lr)); momentum 0 uses identity()
// in place of trace (Optax's momentum=None).
GradientTransformation sgd(ScalarOrSchedule learning_rate, double momentum = 0.0,
                           bool nesterov = false);
// chain(scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(lr)).
GradientTransformation adam(ScalarOrSchedule learning_rate, double b1 = 0.9, double b2 = 0.999,
                            double eps = 1e-8, double eps_root = 0.0);
// chain(scale_by_adam, add_decayed_weights(weight_decay, mask), scale_by_learning_rate(lr)):
// the update is -lr * (adam_update + weight_decay * param), decoupled from the gradient.
GradientTransformation adamw(ScalarOrSchedule learning_rate, double b1 = 0.9, double b2 = 0.999,
                             double eps = 1e-8, double weight_decay = 1e-4, Mask mask = nullptr,
                             double eps_root = 0.0);

// ---- Utilities ----

// params + updates, cast back to each param's dtype; the paths must match.
State apply_updates(const State& params, const State& updates);
template <class T>
T apply_updates(const T& params, const T& updates) {
  return state_to_tree(params, apply_updates(tree_to_state(params), tree_to_state(updates)));
}
// sqrt(sum over leaves of sum(x^2)), a scalar.
Array global_norm(const State& updates);
template <class T>
Array global_norm(const T& updates) {
  return global_norm(tree_to_state(updates));
}

// ---- Losses ----

// logsumexp(logits) - logits[label] along the last axis, per example: logits (..., C) float,
// labels (...) integer; result (...). Stable for large logits (the max is subtracted under
// stop_gradient); its gradient is softmax(logits) - one_hot(labels).
Array softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& labels);
// -sum(labels * log_softmax(logits), axis=-1), labels a distribution of logits' shape.
Array softmax_cross_entropy(const Array& logits, const Array& labels);

// ---- tree_to_state / state_to_tree ----

namespace detail {
std::string join_path(const std::string& prefix, const std::string& path);
}  // namespace detail

template <class T>
State tree_to_state(const T& tree) {
  struct Paths final : TreeVisitor {
    State out;
    struct Level {
      std::string path;
      int64_t index = 0;
      std::optional<std::string> key;
      bool transparent = false;  // std::optional's "some": no path component of its own
    };
    std::vector<Level> levels{Level{}};
    std::string child_path() {
      Level& l = levels.back();
      if (l.transparent) return l.path;
      std::string name = l.key ? *l.key : std::to_string(l.index);
      l.key.reset();
      ++l.index;
      return detail::join_path(l.path, name);
    }
    void open(const std::string& kind) override {
      // The root container's children are named from "".
      const std::string p = levels.size() == 1 ? std::string() : child_path();
      levels.push_back(Level{p, 0, std::nullopt, kind == "some"});
    }
    void key(const std::string& k) override { levels.back().key = k; }
    void close() override { levels.pop_back(); }
    void leaf(Array& a) override {
      const bool root = levels.size() == 1;
      out.set(root ? std::string() : child_path(), a);
    }
    void static_leaf(const std::string&) override {
      if (levels.size() > 1) child_path();
    }
  } v;
  T copy = tree;
  tree_visit(copy, v);
  return std::move(v.out);
}

template <class T>
T state_to_tree(const T& structure, const State& state) {
  std::vector<Array> leaves;
  leaves.reserve(state.size());
  for (const auto& [path, a] : state) leaves.push_back(a);
  return tree_unflatten(structure, leaves);
}

}  // namespace cujax::optax
