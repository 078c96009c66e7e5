#include "backends/cuda/driver/doctor.h"

#include <cstdio>
#include <cstdlib>

#include "backends/cuda/driver/library_search.h"
#include "compiler/sdpa_graph.h"

namespace cujax::cuda {

Environment system_environment() {
  Environment env;
  env.loader = system_loader();
  env.device_nodes = nvidia_device_nodes();
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) env.cuda_visible_devices = v;
  env.toolkit_version = built_toolkit_version();
  env.library_dirs = toolkit_library_dirs();
  env.cudnn_dir = setting_folder(kCudnnDirSetting);
  return env;
}

namespace {

std::string cc_string(int cc) {
  return std::to_string(cc / 10) + "." + std::to_string(cc % 10);
}

// "9.19.0" from 91900 (cuDNN, NCCL and cuBLASLt encode major * 10000 + minor * 100 + patch;
// NCCL 2.x uses major * 10000 too since 2.9).
std::string decimal_version(long v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

// Opens the first soname that loads, from `setting`'s folder (when set), the loader's path or
// one of env.library_dirs, and reads its version through `read_version`.
template <class ReadVersion>
LibraryStatus probe_library(const Environment& env, const std::string& name,
                            const std::vector<std::string>& sonames, ReadVersion read_version,
                            const char* setting = nullptr,
                            const std::optional<std::string>& folder = std::nullopt) {
  LibraryStatus s;
  s.name = name;
  for (const auto& soname : sonames) {
    const LibrarySearch search = library_search(soname, setting, folder, env.library_dirs);
    s.searched += (s.searched.empty() ? "" : "; ") + search.places;
    for (const auto& path : search.candidates) {
      void* h = env.loader.open(path);
      if (!h) continue;
      s.loaded = true;
      const std::string file = env.loader.path ? env.loader.path(h) : "";
      s.soname = file.empty() ? path : file;
      s.version = read_version(h);
      return s;
    }
  }
  for (const auto& soname : sonames) s.soname += (s.soname.empty() ? "" : " or ") + soname;
  return s;
}

std::vector<LibraryStatus> probe_libraries(const Environment& env) {
  const Loader& l = env.loader;
  // The toolkit's major version names cuBLAS's soname; a CPU-only build looks for 13 and 12.
  std::vector<std::string> majors;
  if (env.toolkit_version > 0)
    majors.push_back(std::to_string(env.toolkit_version / 1000));
  else
    majors = {"13", "12"};
  auto names = [&](const std::string& base) {
    std::vector<std::string> v;
    for (const auto& m : majors) v.push_back(base + "." + m);
    return v;
  };
  std::vector<LibraryStatus> libs;
  libs.push_back(probe_library(env, "cuBLASLt", names("libcublasLt.so"), [&](void* h) {
    using Fn = size_t (*)();
    auto fn = reinterpret_cast<Fn>(l.symbol(h, "cublasLtGetVersion"));
    return fn ? decimal_version(static_cast<long>(fn())) : std::string();
  }));
  libs.push_back(probe_library(env, "cuBLAS", names("libcublas.so"), [&](void* h) {
    using Fn = int (*)(int type, int* value);  // cublasGetProperty(libraryPropertyType, int*)
    auto fn = reinterpret_cast<Fn>(l.symbol(h, "cublasGetProperty"));
    int major = 0, minor = 0, patch = 0;
    if (!fn || fn(0, &major) != 0 || fn(1, &minor) != 0 || fn(2, &patch) != 0) return std::string();
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  }));
  libs.push_back(probe_library(
      env, "cuDNN", {"libcudnn.so.9"},
      [&](void* h) {
        using Fn = size_t (*)();
        auto fn = reinterpret_cast<Fn>(l.symbol(h, "cudnnGetVersion"));
        return fn ? decimal_version(static_cast<long>(fn())) : std::string();
      },
      kCudnnDirSetting, env.cudnn_dir));
  libs.push_back(probe_library(env, "NCCL", {"libnccl.so.2"}, [&](void* h) {
    using Fn = int (*)(int*);
    auto fn = reinterpret_cast<Fn>(l.symbol(h, "ncclGetVersion"));
    int v = 0;
    return fn && fn(&v) == 0 ? decimal_version(v) : std::string();
  }));
  return libs;
}

bool hides_all_devices(const std::optional<std::string>& visible) {
  if (!visible) return false;
  const std::string& v = *visible;
  return v.empty() || v == "-1" || v == "none" || v == "NoDevFiles";
}

}  // namespace

long version_code(const std::string& version) {
  long v = 0;
  int parts = 0;
  size_t at = 0;
  while (parts < 3 && at <= version.size()) {
    const size_t dot = version.find('.', at);
    const std::string p = version.substr(at, dot == std::string::npos ? dot : dot - at);
    if (p.empty() || p.size() > 4 || p.find_first_not_of("0123456789") != std::string::npos)
      return 0;
    v = v * 100 + std::stol(p);
    ++parts;
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  return parts == 3 ? v : 0;
}

std::string fused_attention(int cc, const LibraryStatus* cudnn) {
  if (cc < kFusedAttentionComputeCapability) return "no";
  if (!cudnn || !cudnn->loaded) return "no (cuDNN not found)";
  const long v = version_code(cudnn->version);
  if (v == 0) return "no (cuDNN version unknown)";
  if (v < kMinCudnnVersion)
    return "no (cuDNN " + cudnn->version + " is older than " + decimal_version(kMinCudnnVersion) +
           ")";
  if (!compiler::sdpa_graph::known_bad_backward(v).empty()) return "forward only (see problems)";
  return "yes";
}

std::string device_features(const DeviceInfo& dev, const LibraryStatus* cudnn) {
  const int cc = dev.compute_capability();
  auto yes = [](bool b) { return b ? "yes" : "no"; };
  // sm_80 code runs on 8.x, sm_90 on 9.x; newer devices JIT-compile the compute_90 PTX.
  const char* kernels = cc < kMinComputeCapability ? "none"
                        : cc < 90                  ? "sm_80"
                        : cc < 100                 ? "sm_90"
                                                   : "compute_90 PTX (JIT)";
  return "compute capability " + cc_string(cc) + ", " + std::to_string(dev.sm_count) +
         " SMs, bf16 " + yes(cc >= kBf16ComputeCapability) + ", fused attention " +
         fused_attention(cc, cudnn) + ", kernels " + kernels;
}

Diagnosis diagnose(const Environment& env) {
  Diagnosis d;
  d.cuda_build = env.toolkit_version > 0;
  d.toolkit_version = env.toolkit_version;
  d.build = d.cuda_build ? "CUDA " + version_string(env.toolkit_version) + " (sm_80, sm_90 + PTX)"
                         : "CPU-only";
  d.device_nodes = env.device_nodes;
  d.cuda_visible_devices = env.cuda_visible_devices;
  d.driver =
      Driver::load(env.loader, required_driver_version(env.toolkit_version), env.device_nodes);
  d.libraries = probe_libraries(env);
  const Driver& drv = *d.driver;

  if (!drv.loaded()) {
    if (env.device_nodes.empty())
      d.problems.push_back({drv.reason(),
                            "install the NVIDIA driver; in a container, start it with GPU access "
                            "(docker run --gpus all, with the NVIDIA Container Toolkit)"});
    else
      d.problems.push_back({drv.reason() + ", although " + env.device_nodes.front() + " exists",
                            "install the driver's user-space libraries (libcuda.so.1) matching "
                            "the kernel module, or mount them into the container"});
  } else if (!drv.usable()) {
    std::string fix = "check `nvidia-smi`";
    if (hides_all_devices(env.cuda_visible_devices))
      fix = "CUDA_VISIBLE_DEVICES='" + *env.cuda_visible_devices +
            "' hides every GPU: unset it or list device ids";
    else if (env.device_nodes.empty())
      fix = "start the container with GPU access (docker run --gpus all ...)";
    else if (d.cuda_build && drv.version() < required_driver_version(env.toolkit_version))
      fix = "install an NVIDIA driver that supports CUDA " +
            version_string(required_driver_version(env.toolkit_version)) + " or newer";
    d.problems.push_back({drv.reason(), fix});
  }
  int runnable = 0;
  for (const DeviceInfo& dev : drv.devices()) {
    if (dev.compute_capability() >= kMinComputeCapability) {
      ++runnable;
      continue;
    }
    d.problems.push_back({"device " + std::to_string(dev.ordinal) + " (" + dev.name +
                              ") has compute capability " + cc_string(dev.compute_capability()) +
                              "; cujax has kernels for 8.0 and newer only (no bf16, no fused "
                              "attention below 8.0)",
                          "use an Ampere (A100, RTX 30xx) or newer GPU"});
  }
  if (d.cuda_build && drv.usable())
    for (const LibraryStatus& lib : d.libraries)
      if (!lib.loaded && (lib.name == "cuBLASLt" || lib.name == "cuBLAS"))
        d.problems.push_back({lib.name + " does not load (" + lib.soname + "): no matrix products",
                              "install the CUDA toolkit's math libraries or add their folder to "
                              "LD_LIBRARY_PATH"});
  for (const LibraryStatus& lib : d.libraries)
    if (lib.name == "cuDNN" && lib.loaded) {
      const std::string why = compiler::sdpa_graph::known_bad_backward(version_code(lib.version));
      if (!why.empty())
        d.problems.push_back({"cuDNN " + lib.version + " (" + lib.soname +
                                  "): fused attention's backward is refused",
                              why});
    }
  if (!d.cuda_build && runnable > 0)
    d.problems.push_back(
        {"this build is CPU-only, but " + std::to_string(runnable) + " usable GPU(s) are present",
         "build with the CUDA toolkit: cmake --preset default && cmake --build "
         "build"});

  d.gpu_used = d.cuda_build && drv.usable() && runnable > 0;
  if (d.gpu_used)
    d.verdict = "GPU used: the cuda backend runs on " + std::to_string(runnable) + " device(s)";
  else if (!d.cuda_build)
    d.verdict = "GPU not used: this is a CPU-only build" +
                (drv.usable() ? std::string() : std::string(" and ") + drv.reason());
  else if (!drv.usable())
    d.verdict = "GPU not used: " + drv.reason();
  else
    d.verdict = "GPU not used: no device has compute capability 8.0 or newer";
  return d;
}

std::string format_diagnosis(const Diagnosis& d) {
  std::string out;
  auto line = [&](const std::string& key, const std::string& value) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%-22s", key.c_str());
    out += buf + value + "\n";
  };
  line("build", d.build);
  const Driver& drv = *d.driver;
  line("driver", drv.loaded() ? "libcuda.so.1, CUDA " + version_string(drv.version())
                              : "not loaded: " + drv.reason());
  if (d.cuda_build && drv.loaded() && drv.version() > 0) {
    const int need = required_driver_version(d.toolkit_version);
    line("compatibility", "runtime needs a CUDA " + version_string(need) +
                              "+ driver: " + (drv.version() >= need ? "ok" : "driver too old"));
  }
  std::string nodes;
  for (const auto& n : d.device_nodes) nodes += (nodes.empty() ? "" : " ") + n;
  line("device nodes", nodes.empty() ? "none (/dev/nvidia* missing)" : nodes);
  line("CUDA_VISIBLE_DEVICES",
       d.cuda_visible_devices ? "'" + *d.cuda_visible_devices + "'" : "(unset: all devices)");
  for (const LibraryStatus& lib : d.libraries) {
    line(lib.name, lib.loaded ? lib.soname + (lib.version.empty() ? "" : ", version " + lib.version)
                              : "not found (" + lib.soname + ")");
    // cuDNN is often installed outside the loader's path (pip's nvidia-cudnn wheel).
    if (!lib.loaded || lib.name == "cuDNN") line(lib.name + " searched", lib.searched);
  }
  const LibraryStatus* cudnn = nullptr;
  for (const LibraryStatus& lib : d.libraries)
    if (lib.name == "cuDNN") cudnn = &lib;
  for (const DeviceInfo& dev : drv.devices()) {
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(dev.memory_bytes) / (1 << 30));
    line("gpu " + std::to_string(dev.ordinal),
         dev.name + ", " + mem + ", " + device_features(dev, cudnn));
  }
  if (d.problems.empty()) {
    out += "no problems found\n";
  } else {
    out += "problems:\n";
    for (const Problem& p : d.problems) out += "  - " + p.what + "\n    fix: " + p.fix + "\n";
  }
  out += d.verdict + "\n";
  return out;
}

}  // namespace cujax::cuda
