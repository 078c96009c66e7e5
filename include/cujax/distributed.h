// Several processes as one JAX-style runtime (jax.distributed): each process runs its local
// devices, and collectives whose groups span processes go over MPI, or over TCP through a
// coordinator. Start the processes with `mpirun -np N prog` (or start N processes yourself with
// a coordinator address) and call initialize() before compiling SPMD programs.
#pragma once

#include <string>
#include <vector>

namespace cujax::distributed {

struct InitializeOptions {
  // "host:port" where process 0 listens and the others connect (TCP, no MPI needed); then
  // num_processes and process_id are required. Empty: MPI.
  std::string coordinator_address;
  int num_processes = -1;  // -1: from mpirun's environment
  int process_id = -1;
  // TCP: seconds for every process to connect to the coordinator, after which initialize()
  // throws naming the address. <= 0: CUJAX_INIT_TIMEOUT, else 60.
  double initialization_timeout = -1;
  // Seconds without a heartbeat after which a process counts as failed (TCP and MPI; one
  // that exits or crashes is noticed at once). <= 0: CUJAX_HEARTBEAT_TIMEOUT, else 20.
  double heartbeat_timeout_seconds = -1;
};

// From mpirun's environment (OMPI_COMM_WORLD_SIZE/RANK, PMI_*) when options are empty. Throws
// Error when the build has no MPI and more than one process is asked for without a
// coordinator, when options disagree with what MPI reports, when the coordinator's processes
// do not all connect within the initialization timeout, or when called twice. Afterwards a
// process of the run that exits, crashes or (TCP) stops sending heartbeats makes every
// collective that waits on the run throw an error naming it, in every other process. After
// shutdown() MPI cannot be initialized again in the same process (an MPI rule); TCP can.
void initialize(const InitializeOptions& options = {});
// With TCP, waits (up to CUJAX_COLLECTIVE_TIMEOUT) until every process has called it, since
// process 0 relays the others' collectives.
void shutdown();
bool is_initialized();
int process_count();                   // 1 before initialize
int process_index();                   // 0 before initialize
int local_device_count();              // runtime::num_cpu_devices()
std::vector<int> global_device_ids();  // 0..process_count*local-1; process p owns p*local..

// Added to the contract: the process that runs global device `id`.
int process_of_device(int id);
// Whether this build can run several processes (found MPI at configure time).
bool built_with_mpi();

}  // namespace cujax::distributed
