#include "cujax/nnx/sequential.h"

namespace cujax::nnx {

Array Sequential::operator()(const Array& x) const {
  if (fns_.empty()) throw Error("nnx.Sequential: no layers");
  Array y = x;
  for (const auto& f : fns_) y = f(y);
  return y;
}

}  // namespace cujax::nnx
