// How many virtual CPU devices the cpu backend has: fixed once, from the first setter or the
// environment, since executables and shardings made for one count are wrong for another.
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "cujax/core/error.h"
#include "cujax/runtime/spmd.h"

namespace cujax::runtime {

namespace {

std::mutex mu;
std::optional<int> chosen;

int parse_count(const std::string& text, const std::string& where) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < 1)
    throw Error(where + " = '" + text + "' is not a positive device count");
  return n;
}

std::optional<int> from_environment() {
  if (const char* v = std::getenv("CUJAX_NUM_CPU_DEVICES"); v && *v)
    return parse_count(v, "CUJAX_NUM_CPU_DEVICES");
  if (const char* flags = std::getenv("XLA_FLAGS")) {
    const std::string f = flags;
    const std::string key = "--xla_force_host_platform_device_count=";
    if (size_t at = f.find(key); at != std::string::npos) {
      const size_t begin = at + key.size();
      const size_t end = f.find_first_of(" \t", begin);
      return parse_count(f.substr(begin, end == std::string::npos ? end : end - begin),
                         "XLA_FLAGS' --xla_force_host_platform_device_count");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> cpu_devices_from_environment() {
  return from_environment();
}

void set_num_cpu_devices(int n) {
  if (n < 1) throw Error("set_num_cpu_devices(" + std::to_string(n) + "): needs at least 1");
  std::lock_guard<std::mutex> lock(mu);
  if (chosen && *chosen != n)
    throw Error("set_num_cpu_devices(" + std::to_string(n) + "): the cpu backend already has " +
                std::to_string(*chosen) +
                " devices (set the count once, before the devices are first used)");
  chosen = n;
}

int num_cpu_devices() {
  std::lock_guard<std::mutex> lock(mu);
  if (!chosen) chosen = from_environment().value_or(1);
  return *chosen;
}

}  // namespace cujax::runtime
