// nnx.Sequential: layers applied in order; modules appear under "layers.<i>", plain functions
// (activations) take an index but hold no variables.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cujax/nnx/module.h"

namespace cujax::nnx {

class Sequential : public Module {
 public:
  using Fn = std::function<Array(const Array&)>;
  Sequential() = default;
  template <class M>
  Sequential& add(std::unique_ptr<M> layer) {
    M* p = layer.get();
    child("layers." + std::to_string(fns_.size()), *p);
    fns_.push_back([p](const Array& x) { return (*p)(x); });
    owned_.push_back(std::move(layer));
    return *this;
  }
  Sequential& add(Fn fn) {
    fns_.push_back(std::move(fn));
    return *this;
  }
  Array operator()(const Array& x) const;
  size_t size() const { return fns_.size(); }

 private:
  std::vector<Fn> fns_;
  std::vector<std::unique_ptr<Module>> owned_;
};

}  // namespace cujax::nnx
