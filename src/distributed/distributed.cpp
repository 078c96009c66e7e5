// The process group of a multi-process run. Processes find each other through MPI (mpirun
// starts them and tells each its rank) or, given a coordinator address, over TCP.
#include "cujax/distributed.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include "cujax/core/error.h"
#include "cujax/runtime/spmd.h"
#include "distributed/mpi_transport.h"
#include "distributed/tcp_transport.h"
#include "runtime/process_group.h"

namespace cujax {
namespace distributed {

namespace {

struct State {
  bool initialized = false;
  int count = 1;
  int index = 0;
  std::unique_ptr<runtime::Transport> transport;
};

std::mutex mu;
State& state() {
  static State s;
  return s;
}

int env_int(std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) return std::atoi(v);
  return -1;
}

// `given` when positive, else the environment variable `env` when it holds a positive number
// of seconds, else `fallback`.
double seconds_option(double given, const char* env, double fallback) {
  if (given > 0) return given;
  if (const char* v = std::getenv(env); v && *v) {
    char* end = nullptr;
    const double s = std::strtod(v, &end);
    if (*end != '\0' || !(s > 0))
      throw Error(std::string("distributed::initialize: ") + env + "='" + v +
                  "' is not a positive number of seconds");
    return s;
  }
  return fallback;
}

}  // namespace

bool built_with_mpi() {
#ifdef CUJAX_HAVE_MPI
  return true;
#else
  return false;
#endif
}

void initialize(const InitializeOptions& options) {
  std::lock_guard<std::mutex> lock(mu);
  State& s = state();
  if (s.initialized) throw Error("distributed::initialize: already initialized");
  if (!options.coordinator_address.empty()) {
    if (options.num_processes < 1 || options.process_id < 0 ||
        options.process_id >= options.num_processes)
      throw Error("distributed::initialize: with coordinator_address '" +
                  options.coordinator_address +
                  "', num_processes and process_id are needed (got process_id " +
                  std::to_string(options.process_id) + " of " +
                  std::to_string(options.num_processes) + ")");
    TcpTimeouts timeouts;
    timeouts.initialization =
        seconds_option(options.initialization_timeout, "CUJAX_INIT_TIMEOUT", 60);
    timeouts.heartbeat =
        seconds_option(options.heartbeat_timeout_seconds, "CUJAX_HEARTBEAT_TIMEOUT", 20);
    timeouts.finish = runtime::collective_timeout_seconds();
    s.transport = make_tcp_transport(options.coordinator_address, options.num_processes,
                                     options.process_id, timeouts);
    s.count = options.num_processes;
    s.index = options.process_id;
    s.initialized = true;
    runtime::set_process_group({s.index, s.count, s.transport.get()});
    return;
  }
  const int env_size = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"});
  const int want = options.num_processes > 0 ? options.num_processes : std::max(env_size, 1);
  if (want > 1 || env_size > 0) {
    if (!built_with_mpi())
      throw Error("distributed::initialize: " + std::to_string(want) +
                  " processes asked for, but cujax was built without MPI (install "
                  "libopenmpi-dev and reconfigure)");
    int count = 1, index = 0;
    s.transport = make_mpi_transport(
        &count, &index,
        seconds_option(options.heartbeat_timeout_seconds, "CUJAX_HEARTBEAT_TIMEOUT", 20));
    if ((options.num_processes > 0 && options.num_processes != count) ||
        (options.process_id >= 0 && options.process_id != index)) {
      s.transport.reset();
      throw Error("distributed::initialize: asked for process " +
                  std::to_string(options.process_id) + " of " +
                  std::to_string(options.num_processes) + ", but MPI says " +
                  std::to_string(index) + " of " + std::to_string(count));
    }
    s.count = count;
    s.index = index;
  } else if (options.process_id > 0) {
    throw Error("distributed::initialize: process_id " + std::to_string(options.process_id) +
                " of 1 process");
  }
  s.initialized = true;
  runtime::set_process_group({s.index, s.count, s.transport.get()});
}

void shutdown() {
  std::lock_guard<std::mutex> lock(mu);
  State& s = state();
  runtime::set_process_group({});
  if (s.transport) s.transport->finish();
  s.transport.reset();
  s.initialized = false;
  s.count = 1;
  s.index = 0;
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(mu);
  return state().initialized;
}

int process_count() {
  std::lock_guard<std::mutex> lock(mu);
  return state().count;
}

int process_index() {
  std::lock_guard<std::mutex> lock(mu);
  return state().index;
}

int local_device_count() {
  return runtime::num_cpu_devices();
}

std::vector<int> global_device_ids() {
  return runtime::global_cpu_device_ids();
}

int process_of_device(int id) {
  return runtime::process_of_cpu_device(id);
}

}  // namespace distributed

}  // namespace cujax
