// Collective payloads between processes over TCP, for runs started without mpirun: the
// coordinator (process 0) listens at the coordinator address, every other process connects to
// it, and process 0 relays messages between the others (a star).
#pragma once

#include <memory>
#include <string>

#include "runtime/collectives.h"

namespace cujax::distributed {

// Blocks until all `count` processes are connected (or `timeout_seconds` pass, then throws
// naming who is missing). `address` is "host:port".
std::unique_ptr<runtime::Transport> make_tcp_transport(const std::string& address, int count,
                                                       int index, double timeout_seconds);

}  // namespace cujax::distributed
