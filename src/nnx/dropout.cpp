#include "cujax/nnx/dropout.h"

#include "cujax/lax.h"
#include "cujax/numpy.h"
#include "cujax/random.h"

namespace cujax::nnx {

Dropout::Dropout(double r, bool det, Rngs* rngs) : rate(r), deterministic(det), rngs_(rngs) {
  if (r < 0 || r > 1) throw Error("nnx.Dropout: rate must be in [0, 1], got " + std::to_string(r));
  attribute("rate", rate);
  attribute("deterministic", deterministic);
}

Array Dropout::operator()(const Array& x, std::optional<bool> det, Rngs* rngs) const {
  if (det.value_or(deterministic) || rate == 0) return x;
  if (rate == 1) return numpy::zeros_like(x);
  Rngs* source = rngs ? rngs : rngs_;
  if (!source)
    throw Error(
        "nnx.Dropout: not deterministic and no Rngs given (pass rngs to the "
        "constructor or the call)");
  const double keep = 1.0 - rate;
  const Array mask = random::bernoulli(source->dropout(), keep, x.shape());
  return lax::select(mask, numpy::divide(x, keep), numpy::zeros_like(x));
}

}  // namespace cujax::nnx
