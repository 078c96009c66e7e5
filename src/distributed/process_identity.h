// How the processes of a distributed job name each other in their errors: host:pid.
#pragma once

#include <unistd.h>

#include <string>

namespace cujax::distributed {

inline std::string process_identity() {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  host[sizeof host - 1] = '\0';
  return std::string(host) + ":" + std::to_string(::getpid());
}

}  // namespace cujax::distributed
