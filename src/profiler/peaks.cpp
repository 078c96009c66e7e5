// The peak FLOP/s and bytes/s the doctor's roofline lines compare ops against. The cpu's is
// estimated once per process: FLOP/s from the core count, the clock and the widest FMA the CPU
// has (an upper bound: every core issuing two f32 FMAs per cycle), bytes/s measured by copying
// 64 MiB four times. A GPU backend registers its device's figures.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "profiler/hooks.h"

namespace cujax::profiler {

namespace {

struct Peaks {
  std::mutex mu;
  std::map<std::string, DevicePeak> by_platform;
};

Peaks& peaks() {
  static Peaks p;
  return p;
}

DevicePeak estimate_cpu() {
  DevicePeak p;
  double mhz = 0;
  bool avx512 = false, avx2 = false, fma = false;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (mhz == 0 && line.rfind("cpu MHz", 0) == 0)
      mhz = std::atof(line.c_str() + line.find(':') + 1);
    if (line.rfind("flags", 0) == 0) {
      avx512 = avx512 || line.find(" avx512f") != std::string::npos;
      avx2 = avx2 || line.find(" avx2") != std::string::npos;
      fma = fma || line.find(" fma") != std::string::npos;
    }
  }
  if (mhz <= 0) mhz = 2000;  // no clock in /proc/cpuinfo: a typical server clock
  // f32 FLOPs per cycle and core: two FMA units of 16 (AVX-512) or 8 (AVX2) lanes, 2 FLOPs each.
  const int per_cycle = avx512 ? 64 : avx2 && fma ? 32 : 8;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  p.flops_per_s = cores * mhz * 1e6 * per_cycle;
  // Bytes/s: a copy reads and writes each byte; the best of four 64 MiB copies.
  const size_t n = size_t{64} << 20;
  std::vector<char> a(n, 1), b(n, 0);
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), n);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  p.bytes_per_s = 2.0 * static_cast<double>(n) / best;
  char how[256];
  std::snprintf(how, sizeof how,
                "estimated: %u cores x %.0f MHz x %d f32 FLOP/cycle (%s); bytes/s measured by a "
                "64 MiB memcpy",
                cores, mhz, per_cycle,
                avx512        ? "AVX-512 FMA"
                : avx2 && fma ? "AVX2 FMA"
                              : "SSE");
  p.how = how;
  return p;
}

// Dense bf16 FLOPs per SM and cycle on the tensor cores: 1024 FMAs on A100 (8.0), half that on
// the GA10x/AD10x parts (8.6, 8.9), 2048 on Hopper (9.0), 4096 on Blackwell (10.x); CUDA cores
// alone before Ampere.
int bf16_flops_per_sm_cycle(int cc_major, int cc_minor) {
  if (cc_major >= 10) return 8192;
  if (cc_major == 9) return 4096;
  if (cc_major == 8) return cc_minor == 0 ? 2048 : 1024;
  return 256;
}

}  // namespace

DevicePeak gpu_peak(const GpuSpec& spec) {
  DevicePeak p;
  const int per_cycle = bf16_flops_per_sm_cycle(spec.cc_major, spec.cc_minor);
  p.flops_per_s = spec.sm_count * spec.clock_khz * 1e3 * per_cycle;
  p.bytes_per_s = 2 * spec.memory_clock_khz * 1e3 * spec.memory_bus_bits / 8;
  char how[256];
  std::snprintf(how, sizeof how,
                "%s (cc %d.%d): %d SMs x %.0f MHz x %d bf16 FLOP/cycle; %d-bit bus x 2 x %.0f "
                "MHz memory clock",
                spec.name.c_str(), spec.cc_major, spec.cc_minor, spec.sm_count,
                spec.clock_khz / 1e3, per_cycle, spec.memory_bus_bits, spec.memory_clock_khz / 1e3);
  p.how = how;
  return p;
}

namespace detail {

void set_device_peak(const std::string& platform, DevicePeak peak) {
  Peaks& p = peaks();
  std::lock_guard<std::mutex> lock(p.mu);
  p.by_platform[platform] = std::move(peak);
}

}  // namespace detail

json::Value device_peaks() {
  Peaks& p = peaks();
  std::lock_guard<std::mutex> lock(p.mu);
  if (!p.by_platform.count("cpu")) p.by_platform["cpu"] = estimate_cpu();
  json::Value out = json::Value::object();
  for (const auto& [platform, peak] : p.by_platform)
    out.set(platform, json::Value::object({{"flops_per_s", peak.flops_per_s},
                                           {"bytes_per_s", peak.bytes_per_s},
                                           {"how", peak.how}}));
  return out;
}

}  // namespace cujax::profiler
