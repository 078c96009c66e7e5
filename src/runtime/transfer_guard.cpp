#include "cujax/transfer_guard.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "cujax/core/error.h"

namespace cujax {

namespace {

constexpr const char* kEnv[3] = {"CUJAX_TRANSFER_GUARD_HOST_TO_DEVICE",
                                 "CUJAX_TRANSFER_GUARD_DEVICE_TO_HOST",
                                 "CUJAX_TRANSFER_GUARD_DEVICE_TO_DEVICE"};
constexpr const char* kName[3] = {"host-to-device", "device-to-host", "device-to-device"};

TransferGuard initial_level(int direction) {
  if (const char* env = std::getenv(kEnv[direction])) return transfer_guard_from_string(env);
  const char* env = std::getenv("CUJAX_TRANSFER_GUARD");
  return env ? transfer_guard_from_string(env) : TransferGuard::Allow;
}

struct Direction {
  std::atomic<TransferGuard> level;
  std::atomic<int64_t> count{0}, implicit_count{0}, bytes{0};
  explicit Direction(int d) : level(initial_level(d)) {}
};

Direction& direction(TransferDirection d) {
  static Direction all[3] = {Direction(0), Direction(1), Direction(2)};
  return all[static_cast<int>(d)];
}

constexpr TransferDirection kAll[3] = {TransferDirection::HostToDevice,
                                       TransferDirection::DeviceToHost,
                                       TransferDirection::DeviceToDevice};

}  // namespace

TransferGuard transfer_guard_from_string(const std::string& s) {
  if (s == "allow") return TransferGuard::Allow;
  if (s == "log") return TransferGuard::Log;
  if (s == "disallow") return TransferGuard::Disallow;
  if (s == "log_explicit") return TransferGuard::LogExplicit;
  if (s == "disallow_explicit") return TransferGuard::DisallowExplicit;
  throw Error(
      "transfer guard level must be allow, log, disallow, log_explicit or "
      "disallow_explicit, got '" +
      s + "'");
}

void set_transfer_guard(TransferGuard level) {
  for (TransferDirection d : kAll) direction(d).level = level;
}
void set_transfer_guard(TransferDirection d, TransferGuard level) {
  direction(d).level = level;
}
TransferGuard transfer_guard(TransferDirection d) {
  return direction(d).level;
}

TransferStats transfer_stats(TransferDirection d) {
  const Direction& s = direction(d);
  return {s.count.load(), s.implicit_count.load(), s.bytes.load()};
}

int64_t implicit_transfer_count() {
  return direction(TransferDirection::DeviceToHost).implicit_count.load();
}

TransferGuardScope::TransferGuardScope(TransferGuard level) {
  for (TransferDirection d : kAll)
    previous_[static_cast<int>(d)] = direction(d).level.exchange(level);
}
TransferGuardScope::TransferGuardScope(TransferDirection d, TransferGuard level) {
  for (TransferDirection e : kAll) previous_[static_cast<int>(e)] = direction(e).level;
  direction(d).level = level;
}
TransferGuardScope::~TransferGuardScope() {
  for (TransferDirection d : kAll) direction(d).level = previous_[static_cast<int>(d)];
}

namespace detail {
void note_transfer(TransferDirection d, bool is_explicit, int64_t bytes, const std::string& what) {
  Direction& s = direction(d);
  const TransferGuard level = s.level.load();
  const char* name = kName[static_cast<int>(d)];
  const bool forbid = level == TransferGuard::DisallowExplicit ||
                      (level == TransferGuard::Disallow && !is_explicit);
  const bool log =
      level == TransferGuard::LogExplicit || (level == TransferGuard::Log && !is_explicit);
  if (forbid)
    throw Error(std::string("Disallowed ") + (is_explicit ? "explicit " : "") + name +
                " transfer: " + what);
  if (log)
    std::fprintf(stderr, "cujax: %s%s transfer: %s\n", is_explicit ? "explicit " : "", name,
                 what.c_str());
  ++s.count;
  if (!is_explicit) ++s.implicit_count;
  s.bytes += bytes;
}
}  // namespace detail

}  // namespace cujax
