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

std::mutex cpu_devices_mutex;
std::optional<int> chosen;
std::string chosen_by;  // "CUJAX_NUM_CPU_DEVICES=8", "set_num_cpu_devices(8)", "the default"

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

// The count the environment sets and the setting that says so. Both variables set to different
// counts is an error that names both, as JAX refuses two device-count settings that disagree.
struct Setting {
  int count;
  std::string source;
};

std::optional<Setting> setting_from_environment() {
  std::optional<Setting> own, xla;
  if (const char* v = std::getenv("CUJAX_NUM_CPU_DEVICES"); v && *v)
    own =
        Setting{parse_count(v, "CUJAX_NUM_CPU_DEVICES"), std::string("CUJAX_NUM_CPU_DEVICES=") + v};
  if (const char* flags = std::getenv("XLA_FLAGS")) {
    const std::string f = flags;
    const std::string key = "--xla_force_host_platform_device_count=";
    if (size_t at = f.find(key); at != std::string::npos) {
      const size_t begin = at + key.size();
      const size_t end = f.find_first_of(" \t", begin);
      const std::string value = f.substr(begin, end == std::string::npos ? end : end - begin);
      xla = Setting{parse_count(value, "XLA_FLAGS' --xla_force_host_platform_device_count"),
                    "XLA_FLAGS=" + key + value};
    }
  }
  if (own && xla && own->count != xla->count)
    throw Error("the cpu device count is set twice, to different values: " + own->source + " and " +
                xla->source + "; keep one of them");
  return own ? own : xla;
}

}  // namespace

std::optional<int> cpu_devices_from_environment() {
  if (auto env = setting_from_environment()) return env->count;
  return std::nullopt;
}

void set_num_cpu_devices(int n) {
  const std::string call = "set_num_cpu_devices(" + std::to_string(n) + ")";
  if (n < 1) throw Error(call + ": needs at least 1");
  std::lock_guard<std::mutex> lock(cpu_devices_mutex);
  if (chosen && *chosen != n)
    throw Error(call + ": the cpu backend already has " + std::to_string(*chosen) +
                " devices, from " + chosen_by +
                " (set the count once, before the devices are first used)");
  if (chosen) return;
  if (const auto env = setting_from_environment(); env && env->count != n)
    throw Error(call + " conflicts with " + env->source +
                " in the environment: set the cpu device count in one place");
  chosen = n;
  chosen_by = call;
}

int num_cpu_devices() {
  std::lock_guard<std::mutex> lock(cpu_devices_mutex);
  if (!chosen) {
    if (const auto env = setting_from_environment()) {
      chosen = env->count;
      chosen_by = env->source;
    } else {
      chosen = 1;
      chosen_by = "the default";
    }
  }
  return *chosen;
}

}  // namespace cujax::runtime
