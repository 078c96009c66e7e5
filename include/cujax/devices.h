// Devices as JAX has them: jax.devices(), jax.local_devices(), jax.device_count(),
// jax.default_backend(), and the platforms a process may use (JAX_PLATFORMS).
//
// The default backend is `cuda` when this build has CUDA and a GPU can be used, else `cpu`.
// CUJAX_PLATFORMS (or set_platforms) overrides it: one platform ("cpu", "cuda") or a priority
// list ("cuda,cpu"), whose first platform that starts becomes the default. A listed platform
// that cannot start is an error that says why, as `cujax doctor` does. A platform left out of
// the list is not started, as with JAX_PLATFORMS, except `cpu`, which is always there: cujax
// folds constants and runs host-side work on it.
#pragma once

#include <compare>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace cujax {

// One device (jax.Device). Two values name the same device when platform and id agree.
struct Device {
  std::string platform;       // "cpu", "cuda"
  int id = 0;                 // unique among the platform's devices of every process
  std::string device_kind;    // "cpu", "NVIDIA H200"
  int process_index = 0;      // the process that runs it (distributed::process_index())
  int local_hardware_id = 0;  // its index in that process (the CUDA ordinal)

  // "cpu:0", "cuda:1"
  std::string str() const;
  // As JAX's repr: "CpuDevice(id=0)", "CudaDevice(id=1)".
  std::string repr() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.platform == b.platform && a.id == b.id;
  }
  // By platform, then id (the order devices() lists them in).
  friend std::strong_ordering operator<=>(const Device& a, const Device& b) {
    if (auto c = a.platform <=> b.platform; c != 0) return c;
    return a.id <=> b.id;
  }
};
std::ostream& operator<<(std::ostream& os, const Device& d);  // repr()

// The platform jit, the command line and devices() use when none is named: fixed on first use.
// Throws Error when the platforms CUJAX_PLATFORMS or set_platforms lists name an unknown
// platform (listing the known ones) or none of them can start (giving each one's reason).
std::string default_backend();

// Chooses the platforms as CUJAX_PLATFORMS does ("cpu", "cuda", "cuda,cpu"), overriding the
// environment, as jax.config.update("jax_platforms", ...) does. Only before the platforms are
// first used (default_backend(), a jit, starting a backend): afterwards it throws Error, unless
// it names the same list. Throws Error for an unknown name.
void set_platforms(std::string_view platforms);

// Every process's devices of the default backend (or of `platform`), ordered by id. Throws
// Error naming the reason when the platform cannot start. With several processes
// (distributed::initialize) device ids span them: process p holds ids p*n..p*n+n-1, where n is
// the number of devices in each process.
std::vector<Device> devices();
std::vector<Device> devices(std::string_view platform);
// This process's devices of the default backend (or of `platform`).
std::vector<Device> local_devices();
std::vector<Device> local_devices(std::string_view platform);
int device_count();
int device_count(std::string_view platform);
int local_device_count();
int local_device_count(std::string_view platform);

}  // namespace cujax
