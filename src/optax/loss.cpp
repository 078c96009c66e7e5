// Classification losses, as in Optax's losses/_classification.py.
#include <algorithm>

#include "cujax/grad.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/optax.h"

namespace cujax::optax {

namespace jnp = cujax::numpy;

Array softmax_cross_entropy_with_integer_labels(const Array& logits, const Array& labels) {
  const char* who = "softmax_cross_entropy_with_integer_labels";
  if (!is_float(logits.dtype()))
    throw Error(std::string(who) + ": logits must be floating point, got " +
                std::string(numpy_name(logits.dtype())));
  if (!is_integer(labels.dtype()))
    throw Error(std::string(who) + ": labels must be integers, got " +
                std::string(numpy_name(labels.dtype())));
  if (logits.ndim() < 1 || labels.ndim() + 1 != logits.ndim() ||
      !std::equal(labels.shape().begin(), labels.shape().end(), logits.shape().begin()))
    throw Error(std::string(who) + ": logits " + shape_to_string(logits.shape()) +
                " must be labels' shape " + shape_to_string(labels.shape()) + " plus a class axis");
  // Only the label's logit has the normalizer subtracted (not every class), as Optax.
  const Array shifted = logits - cujax::stop_gradient(jnp::max(logits, -1, true));
  const Array label_logits =
      jnp::squeeze(jnp::take_along_axis(shifted, jnp::expand_dims(labels, -1), -1), -1);
  const Array log_normalizers = jnp::log(jnp::sum(jnp::exp(shifted), -1));
  return log_normalizers - label_logits;
}

Array softmax_cross_entropy(const Array& logits, const Array& labels) {
  if (logits.shape() != labels.shape())
    throw Error("softmax_cross_entropy: logits " + shape_to_string(logits.shape()) +
                " and labels " + shape_to_string(labels.shape()) + " must have one shape");
  return -jnp::sum(labels * nn::log_softmax(logits, -1), -1);
}

}  // namespace cujax::optax
