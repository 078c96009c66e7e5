// Optimizers as chains of transformations, as in Optax's alias.py.
#include "cujax/optax.h"

namespace cujax::optax {

GradientTransformation sgd(ScalarOrSchedule learning_rate, double momentum, bool nesterov) {
  return chain(momentum != 0.0 ? trace(momentum, nesterov) : identity(),
               scale_by_learning_rate(std::move(learning_rate)));
}

GradientTransformation adam(ScalarOrSchedule learning_rate, double b1, double b2, double eps,
                            double eps_root) {
  return chain(scale_by_adam(b1, b2, eps, eps_root),
               scale_by_learning_rate(std::move(learning_rate)));
}

GradientTransformation adamw(ScalarOrSchedule learning_rate, double b1, double b2, double eps,
                             double weight_decay, Mask mask, double eps_root) {
  return chain(scale_by_adam(b1, b2, eps, eps_root),
               add_decayed_weights(weight_decay, std::move(mask)),
               scale_by_learning_rate(std::move(learning_rate)));
}

}  // namespace cujax::optax
