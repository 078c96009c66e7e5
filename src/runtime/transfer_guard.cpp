#include "cujax/transfer_guard.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "cujax/core/error.h"

namespace cujax {

namespace {
TransferGuard initial_level() {
  const char* env = std::getenv("CUJAX_TRANSFER_GUARD");
  return env ? transfer_guard_from_string(env) : TransferGuard::Allow;
}
std::atomic<TransferGuard>& level() {
  static std::atomic<TransferGuard> l{initial_level()};
  return l;
}
std::atomic<int64_t> transfers{0};
}  // namespace

TransferGuard transfer_guard_from_string(const std::string& s) {
  if (s == "allow") return TransferGuard::Allow;
  if (s == "log") return TransferGuard::Log;
  if (s == "disallow") return TransferGuard::Disallow;
  throw Error("transfer guard level must be allow, log or disallow, got '" + s + "'");
}

void set_transfer_guard(TransferGuard l) {
  level() = l;
}
TransferGuard transfer_guard() {
  return level();
}
int64_t implicit_transfer_count() {
  return transfers.load();
}

TransferGuardScope::TransferGuardScope(TransferGuard l) : previous_(level().exchange(l)) {}
TransferGuardScope::~TransferGuardScope() {
  level() = previous_;
}

namespace detail {
void note_implicit_transfer(const std::string& what) {
  switch (level().load()) {
    case TransferGuard::Disallow:
      throw Error("Disallowed device-to-host transfer: " + what);
    case TransferGuard::Log:
      std::fprintf(stderr, "cujax: device-to-host transfer: %s\n", what.c_str());
      break;
    case TransferGuard::Allow:
      break;
  }
  ++transfers;
}
}  // namespace detail

}  // namespace cujax
