// The CUDA driver API, loaded at run time with dlopen so that a CUDA build starts (and says why
// it cannot use a GPU) on a machine without an NVIDIA driver. No toolkit header is needed: the
// few driver types and entry points used are declared here, so this folder is also built in
// CPU-only builds, where `cujax doctor` still reports what the machine has.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cujax/core/error.h"

namespace cujax::cuda {

// Driver API types (cuda.h): CUresult is an enum, CUdevice an int.
using CUresult = int;
using CUdevice = int;
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_INSUFFICIENT_DRIVER = 35;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
inline constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;

// A failed CUDA call: "cuInit failed: CUDA_ERROR_NO_DEVICE (...) at driver.cpp:42".
class CudaError : public Error {
 public:
  using Error::Error;
};

// How the library finds shared objects and their symbols; tests substitute a fake driver.
struct Loader {
  std::function<void*(const std::string& soname)> open;  // nullptr when not found
  std::function<void*(void* handle, const char* symbol)> symbol;
  std::function<std::string()> last_error;        // dlerror() after a failed open
  std::function<std::string(void* handle)> path;  // the file it came from; may be unset
};
Loader system_loader();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int64_t memory_bytes = 0;
  int sm_count = 0;
  int compute_capability() const { return cc_major * 10 + cc_minor; }  // 90 for 9.0
};

// The driver entry points cujax uses, resolved from libcuda.so.1.
struct DriverApi {
  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;
  CUresult (*cuDeviceGetCount)(int* count) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetName)(char* name, int len, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDeviceTotalMem)(size_t* bytes, CUdevice device) = nullptr;  // cuDeviceTotalMem_v2
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
};

// The outcome of loading the driver. Never throws: when the driver cannot be used, `reason`
// says why and what to do.
class Driver {
 public:
  // `required_version`: the oldest driver API version that the toolkit cujax was built with
  // needs (13000 for CUDA 13.x, whose minor versions run on any 13.0 driver); 0 skips the check.
  static std::shared_ptr<const Driver> load(const Loader& loader, int required_version,
                                            const std::vector<std::string>& device_nodes);
  // The machine's driver, loaded once, with this build's requirement.
  static const Driver& system();

  bool loaded() const { return loaded_; }  // libcuda.so.1 opened and its symbols resolved
  bool usable() const { return usable_; }  // cuInit succeeded, the version fits, >= 1 device
  const std::string& reason() const { return reason_; }  // why not usable; empty if usable
  int version() const { return version_; }               // 13000 for 13.0; 0 when unknown
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  const DriverApi& api() const { return api_; }

  // "CUDA_ERROR_NO_DEVICE", or the number when the driver cannot name it.
  std::string error_name(CUresult r) const;
  // Throws CudaError naming the call, its error and the source location unless r is success.
  void check(CUresult r, const char* call, const char* file, int line) const;

 private:
  bool loaded_ = false;
  bool usable_ = false;
  std::string reason_;
  int version_ = 0;
  std::vector<DeviceInfo> devices_;
  DriverApi api_;
};

#define CUJAX_CU_CHECK(driver, call) (driver).check((call), #call, __FILE__, __LINE__)

// "13.0" for 13000.
std::string version_string(int cuda_version);
// The /dev/nvidia* device nodes present ("/dev/nvidia0", "/dev/nvidiactl", ...), sorted.
std::vector<std::string> nvidia_device_nodes();
// The toolkit version this build targets (CUDA_VERSION), 0 in a CPU-only build.
int built_toolkit_version();
// The oldest driver version the toolkit needs: the same major version (minor version
// compatibility). 0 in a CPU-only build.
int required_driver_version(int toolkit_version);

}  // namespace cujax::cuda
