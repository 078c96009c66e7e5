// Transfers between the host and devices are counted per direction and, as with JAX's
// jax.transfer_guard, can be logged or forbidden. Explicit transfers are the ones a caller asks
// for by name (device_put, device_get, array() of host data); implicit ones happen on the way
// (item(), to_vector(), operator bool, printing, an array closed over by a trace).
#pragma once

#include <cstdint>
#include <string>

namespace cujax {

enum class TransferGuard {
  Allow,             // every transfer
  Log,               // log implicit transfers
  Disallow,          // forbid implicit transfers
  LogExplicit,       // log every transfer
  DisallowExplicit,  // forbid every transfer
};

enum class TransferDirection { HostToDevice, DeviceToHost, DeviceToDevice };

// Every direction at once, as jax.transfer_guard(level).
void set_transfer_guard(TransferGuard level);
// One direction, as jax.transfer_guard_host_to_device(level) and its siblings.
void set_transfer_guard(TransferDirection direction, TransferGuard level);
TransferGuard transfer_guard(TransferDirection direction = TransferDirection::DeviceToHost);
// Parses JAX's names: "allow", "log", "disallow", "log_explicit", "disallow_explicit".
// CUJAX_TRANSFER_GUARD sets the initial level of every direction, and
// CUJAX_TRANSFER_GUARD_HOST_TO_DEVICE, _DEVICE_TO_HOST and _DEVICE_TO_DEVICE one direction's.
TransferGuard transfer_guard_from_string(const std::string& s);

// Transfers in one direction since start-up, whether the guard allowed them or not.
struct TransferStats {
  int64_t count = 0;
  int64_t implicit_count = 0;
  int64_t bytes = 0;
};
TransferStats transfer_stats(TransferDirection direction);
// Implicit device-to-host transfers since start-up.
int64_t implicit_transfer_count();

// Sets the level of every direction (or of one) for the lifetime of the object, then restores
// the previous levels.
class TransferGuardScope {
 public:
  explicit TransferGuardScope(TransferGuard level);
  TransferGuardScope(TransferDirection direction, TransferGuard level);
  ~TransferGuardScope();
  TransferGuardScope(const TransferGuardScope&) = delete;
  TransferGuardScope& operator=(const TransferGuardScope&) = delete;

 private:
  TransferGuard previous_[3];
};

namespace detail {
// Called by every transfer before it happens; throws or logs per the direction's level, then
// counts it. `what` names the array ("f32[8,128]").
void note_transfer(TransferDirection direction, bool is_explicit, int64_t bytes,
                   const std::string& what);
}  // namespace detail

}  // namespace cujax
