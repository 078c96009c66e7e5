// The backend interface: a backend compiles a StableHLO module into an executable for its
// devices and runs it. `cpu` is always present and is the reference.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/buffer.h"

namespace cujax::runtime {

struct DeviceDescription {
  std::string platform;  // "cpu", "cuda"
  int id = 0;
  std::string kind;          // "cpu", "NVIDIA H200"
  int64_t memory_bytes = 0;  // 0 when unknown
  std::string detail;        // one line: cores, compute capability, ...
};

class Backend;

// Outcome of one `check.*` custom call (the conformance suite's assertions).
struct CheckResult {
  std::string name;  // "check.expect_close"
  bool passed = false;
  std::string message;  // first differing index and both values when failed
};

struct ExecuteOptions {
  // Receives every check.* result. Without it a failing check throws RuntimeError.
  std::function<void(const CheckResult&)> on_check;
  // Receives the text `interpreter.print` writes (one whole print per call). Without it the
  // text goes to stdout.
  std::function<void(const std::string&)> on_print;
};

// What an accelerator backend does with an op it has no device kernel for, so that the op would
// run on the host (operands downloaded, CPU kernel, results uploaded): Log (the default) says so
// on stderr once per op name, Error makes compiling fail naming the op and its location, Allow
// is silent (for tools that list such ops themselves, as `cujax compile` does).
enum class HostFallback { Log, Error, Allow };

struct CompileOptions {
  // Unset: CUJAX_HOST_FALLBACK, "log" (default), "error" or "allow".
  std::optional<HostFallback> host_fallback;
};

// CUJAX_HOST_FALLBACK's value; throws Error naming the variable for an unknown value.
HostFallback host_fallback_from_env();
inline HostFallback host_fallback(const CompileOptions& options) {
  return options.host_fallback ? *options.host_fallback : host_fallback_from_env();
}

// A program compiled for one device. It takes and returns buffers on that device: arguments
// are passed by value so that a donated one arrives as its only owner, and the program may then
// write its results into that memory.
class Executable {
 public:
  virtual ~Executable() = default;
  virtual std::vector<DeviceBuffer> execute(std::vector<DeviceBuffer> args,
                                            const ExecuteOptions& options = {}) = 0;
  // Host tensors in and out: copies to the device and back (tests, the conformance runner).
  std::vector<HostTensor> execute_on_host(std::span<const HostTensor> args,
                                          const ExecuteOptions& options = {});
  virtual const Backend& backend() const = 0;
  virtual int device() const = 0;
};

class SpmdExecutable;  // runtime/spmd.h

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view platform() const = 0;
  virtual std::vector<DeviceDescription> devices() const = 0;
  // Throws UnsupportedError naming the first op the backend cannot run. The executable runs
  // on device `device` of this platform.
  virtual std::unique_ptr<Executable> compile(const ir::Module& module,
                                              std::string_view entry = "main", int device = 0,
                                              const CompileOptions& options = {}) const = 0;
  // Copies between the host and device `device`. to_device may return before the copy is done
  // (the buffer's ready event says when); to_host waits. On cpu neither copies: the buffer
  // shares the tensor's storage.
  virtual DeviceBuffer to_device(const HostTensor& value, int device) const = 0;
  virtual HostTensor to_host(const DeviceBuffer& buffer) const = 0;
  // What runtime::compile_spmd does on this backend (spmd.h); throws UnsupportedError where
  // the backend runs no SPMD programs.
  virtual std::unique_ptr<SpmdExecutable> compile_spmd(const ir::Module& module,
                                                       std::vector<int> device_ids,
                                                       std::string_view entry) const;
};

// The only ways data crosses between the host and a device: each is counted and checked by the
// transfer guard (cujax/transfer_guard.h) in its direction, then copied by the device's backend.
// `what` names the array in the guard's messages.
DeviceBuffer transfer_to_device(const HostTensor& value, std::string_view platform, int device,
                                bool is_explicit, const std::string& what);
HostTensor transfer_to_host(const DeviceBuffer& buffer, bool is_explicit, const std::string& what);
// A copy of `buffer` on `platform:device` (the buffer itself when it is there already), counted
// as one device-to-device transfer. Between cpu devices the memory is shared, not copied.
DeviceBuffer transfer_between(const DeviceBuffer& buffer, std::string_view platform, int device,
                              bool is_explicit, const std::string& what);

// The backend for `platform` ("cpu"). Throws Error listing the available ones when unknown.
const Backend& get_backend(std::string_view platform);
std::vector<std::string> available_platforms();
// Why `platform` is not available ("CPU-only build", "no libcuda.so.1: ..."); empty when it is.
std::string unavailable_reason(std::string_view platform);

}  // namespace cujax::runtime
