// jit compiles once per input signature, and says why it compiles again.
#include <cstdio>

#include "cujax/jit.h"
#include "cujax/numpy.h"

namespace jnp = cujax::numpy;
using cujax::Array;

int main() {
  cujax::set_explain_cache_misses(true);  // or CUJAX_EXPLAIN_CACHE_MISSES=1
  cujax::JitOptions options;
  options.name = "normalize";
  options.arg_names = {"x"};
  auto normalize =
      cujax::jit([](const Array& x) { return (x - jnp::mean(x)) / (jnp::std(x) + 1e-6); }, options);
  std::printf("call 1: f32[32,128] (first call: trace + compile)\n");
  normalize(jnp::ones({32, 128})).block_until_ready();
  std::printf("call 2: f32[32,128] again (cache hit)\n");
  normalize(jnp::ones({32, 128})).block_until_ready();
  std::printf("call 3: f32[17,128] (new shape: recompiles)\n");
  normalize(jnp::ones({17, 128})).block_until_ready();
  std::printf("call 4: f64[17,128] (new dtype: recompiles)\n");
  normalize(jnp::ones({17, 128}, cujax::DType::F64)).block_until_ready();
  std::printf("compilations: %lld, cache entries: %zu\n",
              static_cast<long long>(normalize.compile_count()), normalize.cache_size());
  std::printf("fix: keep shapes fixed (pad or drop the last incomplete batch)\n");
  return normalize.compile_count() == 3 ? 0 : 1;
}
