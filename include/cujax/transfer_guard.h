// Implicit device-to-host transfers (item(), to_vector(), operator bool on a device array) are
// counted and, as with jax.transfer_guard, can be logged or forbidden.
#pragma once

#include <cstdint>
#include <string>

namespace cujax {

enum class TransferGuard { Allow, Log, Disallow };

void set_transfer_guard(TransferGuard level);
TransferGuard transfer_guard();
// Parses "allow", "log", "disallow"; CUJAX_TRANSFER_GUARD sets the initial level.
TransferGuard transfer_guard_from_string(const std::string& s);

// Implicit device-to-host transfers since start-up.
int64_t implicit_transfer_count();

// Sets the level for the lifetime of the object, then restores the previous one.
class TransferGuardScope {
 public:
  explicit TransferGuardScope(TransferGuard level);
  ~TransferGuardScope();
  TransferGuardScope(const TransferGuardScope&) = delete;
  TransferGuardScope& operator=(const TransferGuardScope&) = delete;

 private:
  TransferGuard previous_;
};

namespace detail {
// Called by every implicit transfer; throws or logs per the level. `what` names the array.
void note_implicit_transfer(const std::string& what);
}  // namespace detail

}  // namespace cujax
