// Dispatch is asynchronous: a jitted call returns before its result is computed. Timing
// without block_until_ready() measures only the dispatch.
#include <chrono>
#include <cstdio>

#include "cujax/jit.h"
#include "cujax/numpy.h"

namespace jnp = cujax::numpy;
using cujax::Array;

int main() {
  auto step = cujax::jit([](const Array& x) { return jnp::tanh(jnp::matmul(x, x)) * 0.5; });
  Array x = jnp::ones({512, 512}) * 0.01;
  step(x).block_until_ready();  // compile first, outside the timing
  using clock = std::chrono::steady_clock;
  const int n = 10;

  auto t0 = clock::now();
  Array y = x;
  for (int i = 0; i < n; ++i) y = step(y);
  const double dispatch_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  y.block_until_ready();
  const double total_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();

  std::printf("%d chained 512x512 steps\n", n);
  std::printf("  without block_until_ready: %8.3f ms  (only the dispatch: wrong)\n", dispatch_ms);
  std::printf("  with block_until_ready:    %8.3f ms  (the real time)\n", total_ms);
  return total_ms >= dispatch_ms ? 0 : 1;
}
