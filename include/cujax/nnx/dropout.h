// nnx.Dropout: zeroes inputs with probability `rate` and scales the rest by 1 / (1 - rate);
// the identity when deterministic. Keys come from an Rngs' "dropout" stream.
#pragma once

#include <optional>

#include "cujax/nnx/module.h"
#include "cujax/nnx/rngs.h"

namespace cujax::nnx {

class Dropout : public Module {
 public:
  // `rngs` (not owned) is the default source of keys; it may be given per call instead.
  explicit Dropout(double rate, bool deterministic = false, Rngs* rngs = nullptr);
  Array operator()(const Array& x, std::optional<bool> deterministic = std::nullopt,
                   Rngs* rngs = nullptr) const;
  double rate;
  bool deterministic;

 private:
  Rngs* rngs_;
};

}  // namespace cujax::nnx
