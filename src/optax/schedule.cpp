// Schedules: functions of the (traced) int32 step count, with Optax's formulas.
#include <cmath>
#include <numbers>

#include "cujax/numpy.h"
#include "cujax/optax.h"

namespace cujax::optax {

namespace jnp = cujax::numpy;

Schedule constant_schedule(double value) {
  return [value](const Array&) { return jnp::full({}, value, DType::F32); };
}

Schedule polynomial_schedule(double init_value, double end_value, double power,
                             int64_t transition_steps, int64_t transition_begin) {
  if (transition_steps <= 0) return constant_schedule(init_value);
  if (transition_begin < 0) transition_begin = 0;
  return [=](const Array& count) {
    const Array c = jnp::clip(count - transition_begin, Scalar(0), Scalar(transition_steps));
    const Array frac = 1.0 - c / transition_steps;
    return (init_value - end_value) * jnp::power(frac, power) + end_value;
  };
}

Schedule linear_schedule(double init_value, double end_value, int64_t transition_steps,
                         int64_t transition_begin) {
  return polynomial_schedule(init_value, end_value, 1.0, transition_steps, transition_begin);
}

Schedule cosine_decay_schedule(double init_value, int64_t decay_steps, double alpha,
                               double exponent) {
  if (decay_steps <= 0)
    throw Error("cosine_decay_schedule requires positive decay_steps, got " +
                std::to_string(decay_steps));
  const double steps = static_cast<double>(decay_steps);
  return [=](const Array& count) {
    const Array c = jnp::minimum(count, steps);
    const Array cosine_decay = 0.5 * (1.0 + jnp::cos(std::numbers::pi * c / steps));
    const Array decayed = (1.0 - alpha) * jnp::power(cosine_decay, exponent) + alpha;
    return init_value * decayed;
  };
}

Schedule join_schedules(std::vector<Schedule> schedules, std::vector<int64_t> boundaries) {
  if (schedules.empty() || boundaries.size() + 1 != schedules.size())
    throw Error("join_schedules: " + std::to_string(schedules.size()) + " schedules need " +
                std::to_string(schedules.empty() ? 0 : schedules.size() - 1) + " boundaries, got " +
                std::to_string(boundaries.size()));
  return [schedules, boundaries](const Array& step) {
    Array output = schedules[0](step);
    for (size_t i = 0; i < boundaries.size(); ++i)
      output = jnp::where(step < boundaries[i], output, schedules[i + 1](step - boundaries[i]));
    return output;
  };
}

Schedule warmup_cosine_decay_schedule(double init_value, double peak_value, int64_t warmup_steps,
                                      int64_t decay_steps, double end_value, double exponent) {
  const double alpha = peak_value == 0.0 ? 0.0 : end_value / peak_value;
  return join_schedules(
      {linear_schedule(init_value, peak_value, warmup_steps),
       cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)},
      {warmup_steps});
}

}  // namespace cujax::optax
