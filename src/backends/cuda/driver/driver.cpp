#include "backends/cuda/driver/driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>

#include "backends/cuda/driver/library_search.h"

namespace cujax::cuda {

Loader system_loader() {
  Loader l;
  l.open = [](const std::string& soname) -> void* {
    return ::dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  };
  l.symbol = [](void* handle, const char* symbol) -> void* { return ::dlsym(handle, symbol); };
  l.last_error = []() -> std::string {
    const char* e = ::dlerror();
    return e ? e : "";
  };
  l.path = [](void* handle) { return loaded_path(handle); };
  return l;
}

std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::vector<std::string> nvidia_device_nodes() {
  std::vector<std::string> nodes;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("nvidia", 0) == 0) nodes.push_back(e.path().string());
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

int built_toolkit_version() {
#ifdef CUJAX_CUDA_TOOLKIT_VERSION
  return CUJAX_CUDA_TOOLKIT_VERSION;
#else
  return 0;
#endif
}

int required_driver_version(int toolkit_version) {
  return toolkit_version > 0 ? toolkit_version / 1000 * 1000 : 0;
}

std::string Driver::error_name(CUresult r) const {
  const char* name = nullptr;
  if (api_.cuGetErrorName && api_.cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(r);
}

void Driver::check(CUresult r, const char* call, const char* file, int line) const {
  if (r == CUDA_SUCCESS) return;
  const std::string base = std::filesystem::path(file).filename().string();
  throw CudaError(std::string(call) + " failed: " + error_name(r) + " at " + base + ":" +
                  std::to_string(line));
}

namespace {

template <class Fn>
bool resolve(const Loader& loader, void* handle, const char* symbol, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(loader.symbol(handle, symbol));
  if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  return fn != nullptr;
}

}  // namespace

std::shared_ptr<const Driver> Driver::load(const Loader& loader, int required_version,
                                           const std::vector<std::string>& device_nodes) {
  auto d = std::make_shared<Driver>();
  void* handle = loader.open("libcuda.so.1");
  if (!handle) {
    const std::string why = loader.last_error ? loader.last_error() : "";
    d->reason_ = "no libcuda.so.1: no NVIDIA driver installed" +
                 (why.empty() ? std::string() : " (" + why + ")");
    return d;
  }
  std::string missing;
  DriverApi& a = d->api_;
  resolve(loader, handle, "cuInit", a.cuInit, missing);
  resolve(loader, handle, "cuDriverGetVersion", a.cuDriverGetVersion, missing);
  resolve(loader, handle, "cuDeviceGetCount", a.cuDeviceGetCount, missing);
  resolve(loader, handle, "cuDeviceGet", a.cuDeviceGet, missing);
  resolve(loader, handle, "cuDeviceGetName", a.cuDeviceGetName, missing);
  resolve(loader, handle, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, missing);
  resolve(loader, handle, "cuDeviceTotalMem_v2", a.cuDeviceTotalMem, missing);
  resolve(loader, handle, "cuGetErrorName", a.cuGetErrorName, missing);
  if (!missing.empty()) {
    d->reason_ = "libcuda.so.1 lacks " + missing + ": the driver is broken or very old";
    return d;
  }
  d->loaded_ = true;
  if (a.cuDriverGetVersion(&d->version_) != CUDA_SUCCESS) d->version_ = 0;

  const CUresult init = a.cuInit(0);
  if (init != CUDA_SUCCESS) {
    d->reason_ = "cuInit failed: " + d->error_name(init);
    if (init == CUDA_ERROR_NO_DEVICE && device_nodes.empty())
      d->reason_ += " (no /dev/nvidia* device nodes: a container started without GPU access?)";
    else if (init == CUDA_ERROR_NO_DEVICE)
      d->reason_ += " (CUDA_VISIBLE_DEVICES may hide every device)";
    else if (init == CUDA_ERROR_INSUFFICIENT_DRIVER)
      d->reason_ += " (the kernel module and libcuda.so.1 do not match: reboot or reinstall)";
    return d;
  }
  if (required_version > 0 && d->version_ < required_version) {
    d->reason_ = "driver supports CUDA " + version_string(d->version_) +
                 ", this build needs CUDA " + version_string(required_version) +
                 ": update the NVIDIA driver";
    return d;
  }
  try {
    int count = 0;
    CUJAX_CU_CHECK(*d, a.cuDeviceGetCount(&count));
    for (int i = 0; i < count; ++i) {
      CUdevice dev = 0;
      CUJAX_CU_CHECK(*d, a.cuDeviceGet(&dev, i));
      DeviceInfo info;
      info.ordinal = i;
      char name[256] = {};
      CUJAX_CU_CHECK(*d, a.cuDeviceGetName(name, sizeof name - 1, dev));
      info.name = name;
      CUJAX_CU_CHECK(*d, a.cuDeviceGetAttribute(&info.cc_major,
                                                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
      CUJAX_CU_CHECK(*d, a.cuDeviceGetAttribute(&info.cc_minor,
                                                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
      CUJAX_CU_CHECK(*d, a.cuDeviceGetAttribute(&info.sm_count,
                                                CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
      size_t bytes = 0;
      CUJAX_CU_CHECK(*d, a.cuDeviceTotalMem(&bytes, dev));
      info.memory_bytes = static_cast<int64_t>(bytes);
      d->devices_.push_back(std::move(info));
    }
  } catch (const CudaError& e) {
    d->devices_.clear();
    d->reason_ = e.what();
    return d;
  }
  if (d->devices_.empty()) {
    d->reason_ = "the driver reports no CUDA devices";
    return d;
  }
  d->usable_ = true;
  return d;
}

const Driver& Driver::system() {
  static const std::shared_ptr<const Driver> driver = load(
      system_loader(), required_driver_version(built_toolkit_version()), nvidia_device_nodes());
  return *driver;
}

}  // namespace cujax::cuda
