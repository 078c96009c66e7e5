// Gradient transformations: scale, scale_by_schedule, scale_by_learning_rate, scale_by_adam,
// trace, add_decayed_weights, clip_by_global_norm. Formulas as in Optax's transform.py and
// clipping.py.
#include "cujax/lax.h"
#include "cujax/numpy.h"
#include "optax/internal.h"

namespace cujax::optax {

namespace jnp = cujax::numpy;
using detail::entry;

namespace {

State empty_init(const State&) {
  return State();
}

// m / (1 - decay^count), the bias correction of an exponential moving average.
Array bias_correction(const Array& m, double decay, const Array& count) {
  const Array correction = 1.0 - jnp::power(decay, count);
  return m / jnp::astype(correction, m.dtype());
}

}  // namespace

GradientTransformation scale(double step_size) {
  return GradientTransformation(empty_init,
                                [step_size](const State& updates, const OptState&, const State*) {
                                  State out;
                                  for (const auto& [path, g] : updates)
                                    out.set(path, g * step_size);
                                  return std::pair<State, OptState>(std::move(out), State());
                                });
}

GradientTransformation scale_by_schedule(Schedule step_size_fn) {
  auto init = [](const State&) {
    State s;
    s.set("count", detail::zero_count());
    return s;
  };
  auto update = [step_size_fn](const State& updates, const OptState& state, const State*) {
    const Array& count = entry(state, "count", "scale_by_schedule");
    const Array step_size = step_size_fn(count);
    State out;
    for (const auto& [path, g] : updates) out.set(path, jnp::astype(step_size, g.dtype()) * g);
    State s;
    s.set("count", detail::safe_increment(count));
    return std::pair<State, OptState>(std::move(out), std::move(s));
  };
  return GradientTransformation(init, update);
}

GradientTransformation scale_by_learning_rate(ScalarOrSchedule learning_rate, bool flip_sign) {
  const double m = flip_sign ? -1.0 : 1.0;
  if (!learning_rate.is_schedule()) return scale(m * learning_rate.value());
  Schedule lr = learning_rate.schedule();
  return scale_by_schedule([lr, m](const Array& count) { return m * lr(count); });
}

GradientTransformation scale_by_adam(double b1, double b2, double eps, double eps_root,
                                     bool nesterov) {
  auto init = [](const State& params) {
    State s;
    s.set("count", detail::zero_count());
    detail::add_prefixed(s, "mu", detail::zeros_like(params));
    detail::add_prefixed(s, "nu", detail::zeros_like(params));
    return s;
  };
  auto update = [=](const State& updates, const OptState& state, const State*) {
    const char* who = "scale_by_adam";
    const Array count_inc = detail::safe_increment(entry(state, "count", who));
    State out, mu, nu;
    for (const auto& [path, g] : updates) {
      const Array m = (1.0 - b1) * g + b1 * entry(state, detail::join_path("mu", path), who);
      const Array v =
          (1.0 - b2) * jnp::square(g) + b2 * entry(state, detail::join_path("nu", path), who);
      // NAdam: the momentum of the next step plus the corrected current gradient.
      const Array m_hat = nesterov
                              ? b1 * bias_correction(m, b1, detail::safe_increment(count_inc)) +
                                    (1.0 - b1) * bias_correction(g, b1, count_inc)
                              : bias_correction(m, b1, count_inc);
      const Array v_hat = bias_correction(v, b2, count_inc);
      out.set(path, m_hat / (jnp::sqrt(v_hat + eps_root) + eps));
      mu.set(path, m);
      nu.set(path, v);
    }
    State s;
    s.set("count", count_inc);
    detail::add_prefixed(s, "mu", mu);
    detail::add_prefixed(s, "nu", nu);
    return std::pair<State, OptState>(std::move(out), std::move(s));
  };
  return GradientTransformation(init, update);
}

GradientTransformation trace(double decay, bool nesterov) {
  auto init = [](const State& params) {
    State s;
    detail::add_prefixed(s, "trace", detail::zeros_like(params));
    return s;
  };
  auto update = [=](const State& updates, const OptState& state, const State*) {
    State out, t;
    for (const auto& [path, g] : updates) {
      const Array new_t = g + decay * entry(state, detail::join_path("trace", path), "trace");
      out.set(path, nesterov ? g + decay * new_t : new_t);
      t.set(path, new_t);
    }
    State s;
    detail::add_prefixed(s, "trace", t);
    return std::pair<State, OptState>(std::move(out), std::move(s));
  };
  return GradientTransformation(init, update);
}

GradientTransformation add_decayed_weights(double weight_decay, Mask mask) {
  auto update = [weight_decay, mask](const State& updates, const OptState&, const State* params) {
    if (!params)
      throw Error(
          "add_decayed_weights: this transformation needs the params; call "
          "update(grads, state, params)");
    State out;
    for (const auto& [path, g] : updates) {
      if (!params->contains(path))
        throw Error("add_decayed_weights: no param '" + path + "' for this update");
      const Array& p = params->at(path);
      out.set(path, !mask || mask(path, p) ? g + weight_decay * p : g);
    }
    return std::pair<State, OptState>(std::move(out), State());
  };
  return GradientTransformation(empty_init, update);
}

GradientTransformation clip_by_global_norm(double max_norm) {
  auto update = [max_norm](const State& updates, const OptState&, const State*) {
    const Array g_norm = global_norm(updates);
    const Array trigger = g_norm < max_norm;
    State out;
    for (const auto& [path, t] : updates) {
      const Array clipped = (t / jnp::astype(g_norm, t.dtype())) * max_norm;
      out.set(path, lax::select(trigger, t, clipped));
    }
    return std::pair<State, OptState>(std::move(out), State());
  };
  return GradientTransformation(empty_init, update);
}

}  // namespace cujax::optax
