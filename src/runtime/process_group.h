// The processes of a multi-process run as the runtime and backends see them: this process's
// index, how many there are, and the transport that carries collectives between them.
// distributed::initialize and shutdown set it (src/distributed, above the backends); backends
// read it, so nothing in a backend reaches up into the distributed layer.
#pragma once

#include <vector>

namespace cujax::runtime {

class Transport;  // runtime/collectives.h

struct ProcessGroup {
  int index = 0;
  int count = 1;
  Transport* transport = nullptr;  // owned by the distributed layer; null with one process
};

ProcessGroup process_group();
void set_process_group(const ProcessGroup& group);

// The cpu devices of every process (process p runs ids p*n..p*n+n-1, n = num_cpu_devices()),
// and the process that runs one.
std::vector<int> global_cpu_device_ids();
int process_of_cpu_device(int id);

}  // namespace cujax::runtime
