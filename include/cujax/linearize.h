// jax.linearize: the value of f at the primals and its JVP there as a function of the tangents.
//
//   auto [y, f_jvp] = cujax::linearize(f, x, w);
//   Array dy = f_jvp(tx, tw);   // J_x tx + J_w tw at (x, w)
//
// f_jvp retraces f at the captured primals on each new tangent signature (jitted and cached when
// called eagerly, as vjp's function), so the forward computation is repeated rather than stored;
// the result is exact, as jvp's.
#pragma once

#include <tuple>
#include <utility>

#include "cujax/grad.h"

namespace cujax {

template <class F, class... Args>
class LinearizedFunction {
 public:
  LinearizedFunction(F f, std::tuple<Args...> primals)
      : primals_(std::move(primals)), fn_(trace::JvpImpl<F, Args...>{std::move(f)}, "linearize") {}
  // The JVP at the primals: one tangent per primal, each of its primal's structure.
  auto operator()(const Args&... tangents) const {
    return fn_(primals_, std::tuple<Args...>(tangents...)).second;
  }

 private:
  std::tuple<Args...> primals_;
  trace::Transformed<trace::JvpImpl<F, Args...>> fn_;
};

// linearize(f, primals...) -> (f(primals...), f_jvp).
template <class F, class... Args>
auto linearize(F f, const Args&... primals) {
  auto out = f(primals...);
  return std::make_pair(
      out, LinearizedFunction<F, Args...>(std::move(f), std::tuple<Args...>(primals...)));
}

}  // namespace cujax
