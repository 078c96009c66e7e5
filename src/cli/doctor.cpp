#include "cli/doctor.h"

#include <cblas.h>

#include <cstdio>
#include <cstdlib>

#include "backends/cuda/driver/doctor.h"
#include "cli/args.h"
#include "cujax/core/error.h"
#include "cujax/devices.h"
#include "cujax/profiler_doctor.h"
#include "cujax/runtime/backend.h"

namespace cujax::cli {

namespace {

// The OpenBLAS kernels the cpu backend's larger products run on: OpenBLAS picks them from the
// CPU when it loads, unless OPENBLAS_CORETYPE names them.
std::string blas_kernels_line() {
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  return std::string("cpu matrix products: ") + openblas_get_config() + "; " +
         openblas_get_corename() + " kernels" +
         (forced ? std::string(" (OPENBLAS_CORETYPE=") + forced + ")" : " (OpenBLAS's choice)");
}

}  // namespace

int doctor_command(const std::vector<std::string>& argv) {
  const Args args({"doctor",
                   "explain why a GPU is or is not used, and what to do",
                   {{"trace", "DIR",
                     "instead: the performance report of a --profile trace, per step, its top "
                     "ops and its pitfalls (exit 1 when it finds any)"}}},
                  argv);
  const cuda::Diagnosis d = cuda::diagnose(cuda::system_environment());
  if (const auto trace = args.optional_string("trace")) {
    profiler::GpuStatus gpu;
    gpu.usable = d.gpu_used;
    // A GPU is there when its device nodes are or its driver loads; a CUDA build on a machine
    // without one has nothing to fix.
    gpu.installed = !d.device_nodes.empty() || (d.driver && d.driver->loaded());
    gpu.verdict = d.verdict;
    gpu.fix = d.problems.empty() ? "see `cujax doctor`" : d.problems.front().fix;
    std::string file;
    try {
      file = profiler::find_trace_file(*trace);
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    const profiler::Report report = profiler::diagnose_trace(file, &gpu);
    std::printf("cujax doctor: %s\n%s", file.c_str(), report.str().c_str());
    return report.findings.empty() ? 0 : 1;
  }
  std::fputs(cuda::format_diagnosis(d).c_str(), stdout);
  // CUJAX_PLATFORMS may keep a usable GPU out.
  bool ok = false;
  std::printf("%s\n", default_backend_line(ok).c_str());
  std::printf("%s\n", blas_kernels_line().c_str());
  return 0;
}

std::string default_backend_line(bool& ok) {
  std::string chosen;
  try {
    chosen = default_backend();
  } catch (const Error& e) {
    ok = false;
    return std::string("default backend: none (") + e.what() + ")";
  }
  ok = true;
  const std::string why = runtime::unavailable_reason("cuda");
  if (chosen == "cpu" && !why.empty())
    return "default backend: cpu (cuda unavailable: " + why + "; see `cujax doctor`)";
  if (chosen == "cpu") return "default backend: cpu (CUJAX_PLATFORMS puts it before cuda)";
  return "default backend: " + chosen;
}

}  // namespace cujax::cli
