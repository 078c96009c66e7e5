// NVRTC, loaded with dlopen on first use like cuBLASLt and NCCL, compiling generated kernels to
// cubins for one GPU architecture. NVRTC has no standard library: the headers a kernel includes
// (the prelude, the shared functors and index helpers, and small <bit>/<cmath>/<cstdint>/
// <type_traits> stand-ins) are embedded in the library at build time (cmake/embed_headers.cmake).
#pragma once

#include <cstdint>
#include <string>

namespace cujax::cuda::codegen {

struct RtcHeader {
  const char* name;  // as the kernels #include it
  const char* text;
};
extern const RtcHeader kRtcHeaders[];
extern const int kNumRtcHeaders;

// "sm_90" for compute capability 9.0.
std::string arch_name(int major, int minor);
// "13.0": the NVRTC library in use (loads it).
std::string nvrtc_version();
// Why NVRTC cannot be loaded, or "" when it can.
std::string nvrtc_unavailable_reason();
// A digest of everything besides the source and the architecture that decides a cubin: the
// embedded headers and the compile options.
const std::string& build_digest();

// Compiles `source` for `arch` ("sm_80", "sm_90") into a cubin. Throws CudaError with NVRTC's
// log when the source does not compile or NVRTC cannot be loaded.
std::string compile_cubin(const std::string& source, const std::string& arch);
// How many times compile_cubin ran NVRTC in this process.
int64_t nvrtc_compile_count();

}  // namespace cujax::cuda::codegen
