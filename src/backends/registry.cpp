#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/driver/driver.h"
#include "cujax/core/error.h"
#include "runtime/platforms.h"
#ifdef CUJAX_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif

namespace cujax::runtime {

namespace {

#ifdef CUJAX_HAVE_CUDA
// The cuda backend, created on first use when the driver has a device and the chosen platforms
// (CUJAX_PLATFORMS) include it; otherwise the reason.
struct CudaSlot {
  std::unique_ptr<Backend> backend;
  std::string reason;
};
const CudaSlot& cuda_slot() {
  static const CudaSlot slot = [] {
    CudaSlot s;
    s.reason = excluded_reason("cuda");
    if (!s.reason.empty()) return s;
    const cuda::Driver& driver = cuda::Driver::system();
    if (!driver.usable()) {
      s.reason = driver.reason();
      return s;
    }
    try {
      s.backend = cuda::make_cuda_backend(driver);
    } catch (const Error& e) {
      s.reason = e.what();
    }
    return s;
  }();
  return slot;
}
#endif

}  // namespace

const Backend& get_backend(std::string_view platform) {
  static const cpu::CpuBackend cpu_backend;
  if (platform == "cpu") return cpu_backend;
  if (platform == "cuda") {
#ifdef CUJAX_HAVE_CUDA
    if (cuda_slot().backend) return *cuda_slot().backend;
#endif
    throw Error("platform 'cuda' is unavailable: " + unavailable_reason("cuda") +
                " (run `cujax doctor`)");
  }
  std::string known;
  for (const auto& p : available_platforms()) known += (known.empty() ? "" : ", ") + p;
  throw Error("unknown platform '" + std::string(platform) + "' (available: " + known + ")");
}

std::vector<std::string> available_platforms() {
  std::vector<std::string> p{"cpu"};
  if (unavailable_reason("cuda").empty()) p.push_back("cuda");
  return p;
}

std::string unavailable_reason(std::string_view platform) {
  if (platform == "cpu") return "";
  if (platform != "cuda") return "unknown platform '" + std::string(platform) + "'";
#ifdef CUJAX_HAVE_CUDA
  return cuda_slot().reason;
#else
  return "this is a CPU-only build (configure with `cmake --preset default` and a CUDA toolkit)";
#endif
}

}  // namespace cujax::runtime
