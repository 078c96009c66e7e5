// Collective payloads between processes over TCP, for runs started without mpirun: the
// coordinator (process 0) listens at the coordinator address, every other process connects to
// it, and process 0 relays messages between the others (a star).
#pragma once

#include <memory>
#include <string>

#include "runtime/collectives.h"

namespace cujax::distributed {

struct TcpTimeouts {
  double initialization = 60;  // for every process to connect
  double heartbeat = 20;       // silence after which a connected process counts as failed
  double finish = 300;         // for the others to finish, at shutdown
};

// Blocks until all `count` processes are connected (or `timeouts.initialization` passes, then
// throws naming the address and who is missing). `address` is "host:port". A process that
// exits, crashes or stops sending heartbeats makes every collective waiting on the run throw
// an error naming it (index and host:pid).
std::unique_ptr<runtime::Transport> make_tcp_transport(const std::string& address, int count,
                                                       int index, const TcpTimeouts& timeouts);

}  // namespace cujax::distributed
