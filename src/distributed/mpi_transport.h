// Collective payloads between processes over MPI.
#pragma once

#include <memory>

#include "runtime/collectives.h"

namespace cujax::distributed {

// Initializes MPI (unless the program already did) and returns the transport; sets this
// process's count and index. A process that sends no heartbeat for `heartbeat_seconds` fails
// every collective. Only in builds with MPI (CUJAX_HAVE_MPI); others throw Error.
std::unique_ptr<runtime::Transport> make_mpi_transport(int* count, int* index,
                                                       double heartbeat_seconds);

}  // namespace cujax::distributed
