// What compiling a module for a platform gives, without running it or needing the platform's
// devices: `cujax compile` prints it, and the tests check that nothing falls back to the host.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cujax/ir/ir.h"

namespace cujax::runtime {

struct CompileReport {
  std::string platform;
  // One line per step (nested programs indented): where it runs, the op and its location.
  // Empty for cpu, where every op runs on the host by definition.
  std::vector<std::string> steps;
  struct HostFallback {
    std::string op, where;
  };
  std::vector<HostFallback> host_fallbacks;  // ops an accelerator backend runs on the host
  int64_t peak_buffer_bytes = 0;             // 0 when the backend does not say
  // The distinct kernels generated for the program's fusions (the same kernel serves every
  // fusion of the same structure), and how many fusion steps launch them.
  struct Kernel {
    std::string name, description;
  };
  std::vector<Kernel> kernels;
  int fusion_steps = 0;
  // With an architecture: the kernels compiled by NVRTC (through the kernel cache) in seconds.
  double kernel_compile_seconds = 0;
};

// Compiles `entry` for "cpu" or "cuda" (a CUDA build is needed for cuda, a GPU is not: no
// kernel runs). Host fallbacks are collected, neither logged nor errors. Throws Error for an
// unknown platform or a build without it, UnsupportedError for an op no backend runs.
// With `arch` ("sm_90"), the generated kernels are also compiled for it with NVRTC.
CompileReport compile_report(std::string_view platform, const ir::Module& module,
                             std::string_view entry = "main", std::string_view arch = "");

}  // namespace cujax::runtime
