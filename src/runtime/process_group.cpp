#include "runtime/process_group.h"

#include <mutex>

#include "cujax/runtime/spmd.h"

namespace cujax::runtime {

namespace {
std::mutex group_mutex;
ProcessGroup& current_group() {
  static ProcessGroup g;
  return g;
}
}  // namespace

ProcessGroup process_group() {
  std::lock_guard<std::mutex> lock(group_mutex);
  return current_group();
}

void set_process_group(const ProcessGroup& group) {
  std::lock_guard<std::mutex> lock(group_mutex);
  current_group() = group;
}

std::vector<int> global_cpu_device_ids() {
  std::vector<int> ids(static_cast<size_t>(process_group().count * num_cpu_devices()));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
  return ids;
}

int process_of_cpu_device(int id) {
  return id / num_cpu_devices();
}

}  // namespace cujax::runtime
