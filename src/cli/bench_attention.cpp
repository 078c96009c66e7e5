// `cujax bench attention`: nn::dot_product_attention, causal, bf16, head dim 128, jitted on the
// default backend (or --platform), in TFLOP/s for each sequence length; the batch keeps 16384
// tokens per call. bench/jax/bench.py attention measures JAX's with the same shapes, and
// scripts/gpu-check.sh puts the two side by side. Prints `RESULT` lines for that table.
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/bench.h"
#include "cujax/jit.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/random.h"

namespace cujax::cli {

int bench_attention(const std::vector<std::string>& argv) {
  const Args args(
      {"bench attention",
       "causal bf16 dot_product_attention, head dim 128, in TFLOP/s against JAX's figures",
       {{"seq", "T,T...", "sequence lengths, 1 to 16384 (default: 1024,4096)"},
        {"heads", "N", "attention heads (default: 16)"},
        {"implementation", "xla|cudnn", "only this implementation (default: both)"},
        platform_option(),
        profile_option()}},
      argv);
  const std::string platform = use_platform(args);
  const ProfileOption profile(args);
  const int64_t heads = args.integer("heads", 16, 1), head_dim = 128, tokens = 16384;
  const std::optional<std::string> implementation = args.optional_string("implementation");
  if (implementation && *implementation != "xla" && *implementation != "cudnn")
    throw UsageError("--implementation must be xla or cudnn, not '" + *implementation + "'");
  std::vector<int64_t> lengths;
  std::stringstream list(args.string("seq", "1024,4096"));
  for (std::string item; std::getline(list, item, ',');) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(item) < 1 || std::stoll(item) > tokens)
      throw UsageError("--seq takes lengths from 1 to 16384 separated by commas, not '" + item +
                       "'");
    lengths.push_back(std::stoll(item));
  }
  const std::string impl = implementation.value_or("default");
  std::printf(
      "cujax bench attention (%s backend, implementation %s): causal, bf16, %lld heads "
      "of %lld, %lld tokens per call\n",
      platform.c_str(), impl.c_str(), static_cast<long long>(heads),
      static_cast<long long>(head_dim), static_cast<long long>(tokens));
  for (const int64_t T : lengths) {
    const int64_t B = std::max<int64_t>(1, tokens / T);
    JitOptions options;
    options.name = "attention";
    options.platform = platform;
    auto attention = jit(
        [implementation](const Array& q, const Array& k, const Array& v) {
          return nn::dot_product_attention(q, k, v, std::nullopt, std::nullopt, std::nullopt, true,
                                           implementation);
        },
        options);
    const Shape shape{B, T, heads, head_dim};
    auto input = [&](uint32_t seed) {
      return numpy::astype(random::normal(random::PRNGKey(seed), shape), DType::BF16);
    };
    const Array q = input(0), k = input(1), v = input(2);
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    attention(q, k, v).block_until_ready();
    const double compile_s = std::chrono::duration<double>(clock::now() - t0).count();
    attention(q, k, v).block_until_ready();
    std::vector<double> ms;
    for (int i = 0; i < 10; ++i) {
      const auto s = clock::now();
      attention(q, k, v).block_until_ready();
      ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - s).count());
    }
    // Causal: half of the 4 B N T^2 H flops of the two products.
    const double flop = 2.0 * static_cast<double>(B * heads * head_dim) * T * T;
    const double tflops = flop / median_of(ms) / 1e9;
    std::printf("T=%-5lld B=%-3lld %8.3f ms %8.1f TFLOP/s (first call %.2f s)\n",
                static_cast<long long>(T), static_cast<long long>(B), median_of(ms), tflops,
                compile_s);
    std::printf("RESULT cujax.attention.%s.T%lld=%.4g unit=TFLOP/s\n", impl.c_str(),
                static_cast<long long>(T), tflops);
  }
  return 0;
}

}  // namespace cujax::cli
