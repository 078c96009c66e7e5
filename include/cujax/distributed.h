// Several processes as one JAX-style runtime (jax.distributed): each process runs its local
// devices, and collectives whose groups span processes go over MPI. Start the processes with
// `mpirun -np N prog` and call initialize() before compiling SPMD programs.
#pragma once

#include <string>
#include <vector>

namespace cujax::distributed {

struct InitializeOptions {
  std::string coordinator_address;  // not supported yet: throws (processes meet through MPI)
  int num_processes = -1;           // -1: from mpirun's environment
  int process_id = -1;
};

// From mpirun's environment (OMPI_COMM_WORLD_SIZE/RANK, PMI_*) when options are empty. Throws
// Error when the build has no MPI and more than one process is asked for, when options
// disagree with what MPI reports, or when called twice.
void initialize(const InitializeOptions& options = {});
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
