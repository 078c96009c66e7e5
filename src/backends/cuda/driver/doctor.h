// What `cujax doctor` finds out: the build, the driver, the device nodes, the CUDA libraries and
// each device's features, with every problem and its fix. Probing goes through an Environment
// so that tests can simulate a machine with or without a driver.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/driver/driver.h"

namespace cujax::cuda {

struct Environment {
  Loader loader;
  std::vector<std::string> device_nodes;            // /dev/nvidia*
  std::optional<std::string> cuda_visible_devices;  // unset: nullopt
  int toolkit_version = 0;                          // of this build; 0: CPU-only build
  std::vector<std::string> library_dirs;            // tried after the plain soname
  std::optional<std::string> cudnn_dir;             // CUJAX_CUDNN_DIR: tried first for cuDNN
};
Environment system_environment();

// The oldest compute capability this build has kernels for (sm_80 SASS; sm_90 SASS and PTX).
inline constexpr int kMinComputeCapability = 80;
// bf16 arithmetic and cuDNN's fused attention need Ampere (8.0) or newer.
inline constexpr int kBf16ComputeCapability = 80;
inline constexpr int kFusedAttentionComputeCapability = 80;

struct LibraryStatus {
  std::string name;    // "cuBLASLt"
  std::string soname;  // the file that loaded (its path when the loader says), or the ones tried
  bool loaded = false;
  std::string version;   // "13.0.0"; empty when unknown
  std::string searched;  // the places tried, in order, in words
};
// 91001 from "9.10.1"; 0 when `version` is not three numbers.
long version_code(const std::string& version);

struct Problem {
  std::string what;
  std::string fix;
};

struct Diagnosis {
  std::string build;  // "CPU-only" or "CUDA 13.0 (sm_80, sm_90 + PTX)"
  bool cuda_build = false;
  int toolkit_version = 0;
  std::shared_ptr<const Driver> driver;
  std::vector<std::string> device_nodes;
  std::optional<std::string> cuda_visible_devices;
  std::vector<LibraryStatus> libraries;
  std::vector<Problem> problems;
  bool gpu_used = false;  // the cuda backend will run programs
  std::string verdict;    // one line: "GPU used: ..." or "GPU not used: ..."
};

Diagnosis diagnose(const Environment& env);
// The report `cujax doctor` prints.
std::string format_diagnosis(const Diagnosis& d);
// The oldest cuDNN whose graph API cujax's fused attention uses (nn::kMinCudnnAttentionVersion).
inline constexpr long kMinCudnnVersion = 90000;
// "yes", or "no (why)": cuDNN's fused attention needs cuDNN loaded (`cudnn`, nullptr when not
// probed), at least kMinCudnnVersion, and compute capability >= 8.0.
std::string fused_attention(int compute_capability, const LibraryStatus* cudnn);
// "compute capability 8.0, 108 SMs, bf16 yes, fused attention yes, kernels sm_80" for one
// device, with fused attention as fused_attention() says.
std::string device_features(const DeviceInfo& device, const LibraryStatus* cudnn = nullptr);

}  // namespace cujax::cuda
