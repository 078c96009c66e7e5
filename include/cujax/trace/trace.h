// Tracing: recording array ops as StableHLO. A TraceContext owns the module being built; while
// one is active (TraceScope), every op on arrays appends to its current block and returns
// tracers. With none active, an op is traced alone into a one-op module, compiled once per
// signature and dispatched to the device's queue: that is eager execution.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cujax/array.h"
#include "cujax/ir/ir.h"

namespace cujax {

namespace runtime {
class Buffer;
class Executable;
}  // namespace runtime

struct ArrayImpl {
  ShapeDtype aval;
  // Concrete arrays: the buffer and the device it is on. A committed array was placed there on
  // purpose (device_put to a device, or computed from committed arrays): ops run where it is,
  // and two committed operands on different devices are an error. Uncommitted arrays (array(),
  // creation functions) move to wherever the op runs.
  std::shared_ptr<runtime::Buffer> buffer;
  std::string platform = "cpu";
  int device_id = 0;
  bool committed = false;
  // The value of a small array made from host data (a scalar such as the 2.0 of x * 2.0): a
  // trace that closes over it takes it from here instead of reading it back from the device.
  std::shared_ptr<const HostTensor> host_value;
  // Tracers:
  trace::TraceContext* trace = nullptr;
  ir::Value* value = nullptr;
  bool donated = false;  // consumed by a jitted call with donate_argnums
  // Sharded arrays: one buffer per partition of `sharding`; `buffer` is the assembled global
  // value, made on first use (eager ops and to_host use it).
  std::shared_ptr<const Sharding> sharding;
  std::vector<std::shared_ptr<runtime::Buffer>> shards;
};

namespace trace {

class TraceContext {
 public:
  explicit TraceContext(std::string module_name);
  TraceContext(const TraceContext&) = delete;
  TraceContext& operator=(const TraceContext&) = delete;

  ir::Module& module() { return *module_; }
  ir::Function& function() { return *function_; }
  ir::Block& current_block() { return *blocks_.back(); }

  // A new argument of the traced function, as a tracer.
  Array add_argument(const ShapeDtype& aval, const std::string& loc = "");
  Array tracer(ir::Value* value, bool weak_type);
  // The IR value for `a`: its own value when it is a tracer of this trace; a constant for a
  // concrete array (waits for it; one constant per array).
  ir::Value* value_of(const Array& a);
  // Appends an op to the current block.
  ir::Operation* emit(std::unique_ptr<ir::Operation> op);

  // Traces body(args) into `block` (a region of an op being built): args become the block's
  // arguments, the results its stablehlo.return.
  void trace_region(ir::Block& block, const std::vector<ShapeDtype>& arg_avals,
                    const std::function<std::vector<Array>(const std::vector<Array>&)>& body);

  // Ends the trace with `outputs` as the function's results; returns the module.
  std::unique_ptr<ir::Module> finish(const std::vector<Array>& outputs);

 private:
  std::unique_ptr<ir::Module> module_;
  ir::Function* function_;
  std::vector<ir::Block*> blocks_;
  std::unordered_map<const ArrayImpl*, ir::Value*> constants_;
  std::vector<std::shared_ptr<ArrayImpl>> kept_alive_;  // arrays turned into constants
};

// The innermost active trace, or nullptr when executing eagerly.
TraceContext* current_trace();

class TraceScope {
 public:
  explicit TraceScope(TraceContext* ctx);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;
};

// Describes one op to record: its name, attributes, result types and region bodies.
struct OpSpec {
  std::string name;
  std::vector<ir::NamedAttribute> attributes;
  std::vector<ir::Type> result_types;
  // Region builders, called with the op's new region block to fill (via trace_region).
  std::vector<std::function<void(TraceContext&, ir::Block&)>> regions;
};

// Records (under a trace) or runs (eagerly) one op on `operands`. Results are strongly typed;
// the array API sets weak types where JAX's promotion rules keep them.
std::vector<Array> bind(const OpSpec& spec, const std::vector<Array>& operands);
Array bind1(const OpSpec& spec, const std::vector<Array>& operands);

// Runs `exe` on its device's queue with the inputs' buffers once they are ready, and returns
// arrays of `out_avals` at once (committed when `committed`). Inputs must be on the executable's
// device (on_device). `cheap`: a cpu program small enough to run on the calling thread when the
// device is idle (cuda programs always may: they only enqueue). A donated input's buffer is handed
// to the executable, which may write its results there; the input array is deleted. An error while
// running surfaces, prefixed with `what`, when a result is waited on.
std::vector<Array> dispatch(std::shared_ptr<runtime::Executable> exe,
                            const std::vector<Array>& inputs,
                            const std::vector<ShapeDtype>& out_avals, const std::string& what,
                            const std::vector<bool>& donated = {}, bool committed = false,
                            bool cheap = false);

// Where an op on `inputs` runs, as JAX decides it: on the device of its committed inputs (two
// committed inputs on different devices are an error naming both), else on `fallback`.
struct Placement {
  std::string platform;
  int device = 0;
  bool committed = false;
};
Placement placement_of(const std::vector<Array>& inputs, const Placement& fallback,
                       const std::string& what);
// `x` on `platform:device`: itself when it is there, else a copy (a device-to-device transfer,
// counted); the copy keeps x's committed flag.
Array on_device(const Array& x, const std::string& platform, int device);

// An Array with the same value and a different weak-type flag.
Array with_weak_type(const Array& a, bool weak);

ir::Type ir_type(const ShapeDtype& aval);

}  // namespace trace
}  // namespace cujax
