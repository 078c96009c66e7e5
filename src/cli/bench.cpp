#include "cli/bench.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cujax/jit.h"
#include "cujax/numpy.h"

namespace cujax::cli {

namespace {

namespace jnp = cujax::numpy;
using clock = std::chrono::steady_clock;

// PyTorch's eager call overhead on the same machine, when Debian's python3-torch is present.
double torch_overhead_us() {
  const std::string script = peer_python() +
                             " -c \"import time,torch;x=torch.ones(1);[x+1 for _ in range(1000)];"
                             "t=time.perf_counter();n=20000;[x+1 for _ in range(n)];"
                             "print((time.perf_counter()-t)/n*1e6)\" 2>/dev/null";
  FILE* p = popen(script.c_str(), "r");
  if (!p) return -1;
  double us = -1;
  if (std::fscanf(p, "%lf", &us) != 1) us = -1;
  pclose(p);
  return us;
}

}  // namespace

// Debian's python3-torch lives under the system interpreter, which may not be the first
// python3 on PATH (pyenv, venvs).
std::string peer_python() {
  if (const char* p = std::getenv("CUJAX_PEER_PYTHON")) return p;
  if (std::filesystem::exists("/usr/bin/python3")) return "/usr/bin/python3";
  return "python3";
}

int bench_dispatch(const std::vector<std::string>& argv) {
  const Args args({"bench dispatch",
                   "time a jitted call: the first (trace and compile) and the steady state",
                   {platform_option(), profile_option()}},
                  argv);
  const std::string platform = use_platform(args);  // before JitOptions reads the default
  const ProfileOption profile(args);
  JitOptions options;
  options.name = "tiny";
  options.platform = platform;
  auto tiny = jit([](const Array& x) { return x + 1.0; }, options);
  Array x = jnp::ones({1});
  const auto t0 = clock::now();
  tiny(x).block_until_ready();
  const double first_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count();

  // Steady state: each call waits for its result, so this is the full round trip.
  std::vector<double> samples;
  for (int rep = 0; rep < 7; ++rep) {
    const int n = 2000;
    const auto s = clock::now();
    for (int i = 0; i < n; ++i) tiny(x).block_until_ready();
    samples.push_back(std::chrono::duration<double, std::micro>(clock::now() - s).count() / n);
  }
  const double steady_us = median_of(samples);
  // Dispatch alone: calls are queued and only the last one is waited for.
  std::vector<double> dispatch;
  for (int rep = 0; rep < 7; ++rep) {
    const int n = 2000;
    Array y;
    const auto s = clock::now();
    for (int i = 0; i < n; ++i) y = tiny(x);
    dispatch.push_back(std::chrono::duration<double, std::micro>(clock::now() - s).count() / n);
    y.block_until_ready();
  }
  const double dispatch_us = median_of(dispatch);
  const double torch_us = torch_overhead_us();

  std::printf("cujax bench dispatch (%s backend, f32[1] x + 1)\n", options.platform.c_str());
  std::printf("%-44s %12s\n", "measurement", "time");
  std::printf("%-44s %9.1f us\n", "first call (trace + compile + run)", first_us);
  std::printf("%-44s %9.2f us\n", "steady-state call with block_until_ready", steady_us);
  std::printf("%-44s %9.2f us\n", "steady-state dispatch (no wait)", dispatch_us);
  if (torch_us > 0) {
    std::printf("%-44s %9.2f us\n", "peer: PyTorch CPU eager x + 1 (same run)", torch_us);
    std::printf("%-44s %9.2fx\n", "ratio cujax steady / PyTorch eager", steady_us / torch_us);
  } else {
    std::printf("%-44s %12s\n", "peer: PyTorch CPU eager", "not installed");
  }
  std::printf("%-44s %9.1f us\n", "reference: JAX jitted call on CPU (REFERENCE)", 7.0);
  const bool below_peer = torch_us <= 0 || steady_us < torch_us;
  std::printf("target: steady-state call under 3 us%s: %s\n",
              torch_us > 0 ? " and below PyTorch's eager op" : "",
              steady_us < 3.0 && below_peer ? "met" : "not met");
  return 0;
}

}  // namespace cujax::cli
