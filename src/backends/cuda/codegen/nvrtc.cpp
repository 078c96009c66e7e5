#include "backends/cuda/codegen/nvrtc.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <atomic>
#include <vector>

#include "backends/cuda/driver/driver.h"
#include "backends/cuda/library.h"
#include "cujax/core/error.h"
#include "cujax/core/sha256.h"

namespace cujax::cuda::codegen {

namespace {

// IEEE arithmetic as the CPU backend does it: no contraction into FMAs, no fast math. The
// shared headers' unannotated constexpr helpers are device functions too.
const char* const kOptions[] = {"-std=c++20", "--fmad=false", "-default-device", "-w", "-DNDEBUG"};

struct Nvrtc {
  decltype(&nvrtcVersion) version = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
};

const Nvrtc& nvrtc() {
  static const Nvrtc api = [] {
    Library lib("libnvrtc.so." + std::to_string(CUDART_VERSION / 1000),
                "NVRTC, needed to compile fused kernels",
                "add the CUDA toolkit's lib64 to LD_LIBRARY_PATH, or set CUJAX_CUDA_FUSION=0");
    Nvrtc a;
    lib.resolve(a.version, "nvrtcVersion");
    lib.resolve(a.error_string, "nvrtcGetErrorString");
    lib.resolve(a.create, "nvrtcCreateProgram");
    lib.resolve(a.destroy, "nvrtcDestroyProgram");
    lib.resolve(a.compile, "nvrtcCompileProgram");
    lib.resolve(a.log_size, "nvrtcGetProgramLogSize");
    lib.resolve(a.log, "nvrtcGetProgramLog");
    lib.resolve(a.cubin_size, "nvrtcGetCUBINSize");
    lib.resolve(a.cubin, "nvrtcGetCUBIN");
    lib.check_resolved();
    return a;
  }();
  return api;
}

void check(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS)
    throw CudaError(std::string(call) + " failed: " + nvrtc().error_string(r));
}

std::atomic<int64_t> compiles{0};

}  // namespace

std::string arch_name(int major, int minor) {
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

std::string nvrtc_unavailable_reason() {
  try {
    nvrtc();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtc().version(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

const std::string& build_digest() {
  static const std::string digest = [] {
    std::string all;
    for (const char* o : kOptions) all += std::string(o) + '\n';
    for (int i = 0; i < kNumRtcHeaders; ++i)
      all += std::string(kRtcHeaders[i].name) + '\0' + kRtcHeaders[i].text + '\0';
    return sha256_hex(all);
  }();
  return digest;
}

std::string compile_cubin(const std::string& source, const std::string& arch) {
  const Nvrtc& api = nvrtc();
  std::vector<const char*> names, texts;
  for (int i = 0; i < kNumRtcHeaders; ++i) {
    names.push_back(kRtcHeaders[i].name);
    texts.push_back(kRtcHeaders[i].text);
  }
  nvrtcProgram prog = nullptr;
  check(api.create(&prog, source.c_str(), "fusion.cu", kNumRtcHeaders, texts.data(), names.data()),
        "nvrtcCreateProgram");
  struct Destroy {
    const Nvrtc& api;
    nvrtcProgram* p;
    ~Destroy() { api.destroy(p); }
  } destroy{api, &prog};
  const std::string arch_option = "--gpu-architecture=" + arch;
  std::vector<const char*> options(std::begin(kOptions), std::end(kOptions));
  options.push_back(arch_option.c_str());
  ++compiles;
  const nvrtcResult r = api.compile(prog, static_cast<int>(options.size()), options.data());
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    api.log_size(prog, &n);
    std::string log(n, '\0');
    if (n) api.log(prog, log.data());
    const size_t first_line = source.find('\n', source.find('\n') + 1);
    throw CudaError("NVRTC cannot compile a generated kernel for " + arch + " (" +
                    source.substr(0, first_line) + "...): " + log);
  }
  size_t size = 0;
  check(api.cubin_size(prog, &size), "nvrtcGetCUBINSize");
  std::string cubin(size, '\0');
  check(api.cubin(prog, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

int64_t nvrtc_compile_count() {
  return compiles.load();
}

}  // namespace cujax::cuda::codegen
