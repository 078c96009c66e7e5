// Every process's devices (cujax/devices.h). It lives beside the process group because ids span
// the processes: each process has the same devices as this one, process p owning ids
// p*n..p*n+n-1, as distributed::process_of_device assumes for collectives.
#include <string>

#include "cujax/devices.h"
#include "cujax/distributed.h"
#include "cujax/runtime/backend.h"

namespace cujax {

std::string Device::str() const {
  return platform + ":" + std::to_string(id);
}

std::string Device::repr() const {
  const std::string name = platform == "cpu" ? "Cpu" : platform == "cuda" ? "Cuda" : platform;
  return name + "Device(id=" + std::to_string(id) + ")";
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << d.repr();
}

std::vector<Device> devices(std::string_view platform) {
  const auto local = runtime::get_backend(platform).devices();
  const int n = static_cast<int>(local.size());
  std::vector<Device> out;
  for (int p = 0; p < distributed::process_count(); ++p)
    for (const auto& d : local)
      out.push_back(Device{std::string(platform), p * n + d.id, d.kind, p, d.id});
  return out;
}

std::vector<Device> local_devices(std::string_view platform) {
  std::vector<Device> out;
  for (Device& d : devices(platform))
    if (d.process_index == distributed::process_index()) out.push_back(std::move(d));
  return out;
}

std::vector<Device> devices() {
  return devices(default_backend());
}
std::vector<Device> local_devices() {
  return local_devices(default_backend());
}
int device_count(std::string_view platform) {
  return static_cast<int>(devices(platform).size());
}
int device_count() {
  return device_count(default_backend());
}
int local_device_count(std::string_view platform) {
  return static_cast<int>(local_devices(platform).size());
}
int local_device_count() {
  return local_device_count(default_backend());
}

}  // namespace cujax
