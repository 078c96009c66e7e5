// The CPU backend's kernel interface. Compiling a module turns every block into a Program: a
// list of steps, each a Kernel chosen (and specialised) once from its op's name and attributes,
// reading and writing numbered value slots. Ops with regions compile those regions into
// Programs of their own and call them.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"
#include "profiler/source_location.h"

namespace cujax::cpu {}  // namespace cujax::cpu
namespace cujax::runtime {
class Communicator;
}
namespace cujax::cpu {

// One device of an SPMD run (compile_spmd): where its collectives meet the other devices.
struct SpmdDevice {
  runtime::Communicator* comm = nullptr;
  int device = 0;  // logical id: replica_id * num_partitions + partition_id
  double collective_seconds = 0;
  std::unordered_map<int64_t, int64_t> executions;  // per collective op: how many ran so far
};

// The host side of interpreter.run_parallel's processes: the infeed queue its `infeed`
// functions fill, what outfeed wrote, and the values sent on each channel (send/recv).
struct InterpreterHost {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<HostTensor> infeed;
  std::vector<HostTensor> outfeed;
  std::map<int64_t, std::deque<std::vector<HostTensor>>> channels;
  std::string aborted;  // why a recv should stop waiting: another process failed
};

struct ExecContext {
  const runtime::ExecuteOptions* options = nullptr;
  SpmdDevice* spmd = nullptr;       // nullptr outside compile_spmd: one device
  InterpreterHost* host = nullptr;  // nullptr outside interpreter.run_parallel
  // The memory of the arguments the executable received as their only owner (donated ones).
  // A result that could go into several operands' memory takes one of these first, so that a
  // donated buffer becomes the result that replaces it.
  std::vector<const void*> donated;
  // interpreter.probe's values by probe_id, one per time the probe ran, for
  // check.expect_serialized_eq.
  std::map<std::string, std::vector<HostTensor>> probes;
  bool is_donated(const void* p) const {
    return std::find(donated.begin(), donated.end(), p) != donated.end();
  }
};

// Inputs in operand order; returns one tensor per result. A factory copies what it needs from
// the op: the module may be gone by the time the kernel runs.
using Kernel = std::function<std::vector<HostTensor>(std::span<const HostTensor>, ExecContext&)>;

class Program {
 public:
  // Runs the block with `args` bound to its arguments and `captures` to the values it uses
  // from enclosing blocks (in the order the Compiler was given); returns the terminator's
  // operands.
  std::vector<HostTensor> run(std::span<const HostTensor> args, ExecContext& ctx,
                              std::span<const HostTensor> captures = {}) const;
  // The same with arguments it owns: an argument nobody else holds (a donated one) reaches the
  // kernel that uses it last as its only owner, which may then write its result there.
  std::vector<HostTensor> run(std::vector<HostTensor>&& args, ExecContext& ctx,
                              std::span<const HostTensor> captures = {}) const;

 private:
  friend class Compiler;
  struct Step {
    Kernel kernel;
    std::string where;  // the op, for messages
    std::string name;   // the op's name, or "fusion" (a trace's op span)
    std::string loc;    // the op's resolved source location, when the IR has one
    double flops = 0;   // cost_analysis's FLOPs (transcendentals included) and bytes, for
    double bytes = 0;   // the roofline of a trace's op spans
    std::vector<int> inputs;
    std::vector<int> outputs;
    std::vector<int> release;  // slots whose last use is this step
    std::vector<bool> move;    // per input: moved out of its slot (its last use, used once)
  };
  std::vector<Step> steps_;
  std::vector<int> arg_slots_;
  std::vector<int> capture_slots_;
  std::vector<int> result_slots_;
  int num_slots_ = 0;
};

class Compiler;
using KernelFactory = std::function<Kernel(const ir::Operation&, Compiler&)>;

class Compiler {
 public:
  explicit Compiler(const ir::Module& module);
  const ir::Module& module() const { return module_; }
  // The process grid collectives address: "mhlo.num_replicas" x "mhlo.num_partitions" (1 x 1
  // when the module does not say); compile_spmd may set it.
  int num_replicas() const { return num_replicas_; }
  int num_partitions() const { return num_partitions_; }
  void set_process_grid(int num_replicas, int num_partitions) {
    num_replicas_ = num_replicas;
    num_partitions_ = num_partitions;
  }
  // Numbers the collective ops of the module, so devices match up the same op's instances.
  int64_t next_collective_id() { return next_collective_id_++; }
  // "name @ file:line:col" of an op's loc (LocationTable::resolve).
  std::string source_location(const ir::Operation& op) const { return locations_.resolve(op.loc); }
  // `captures`: values of enclosing blocks that the block may use, bound at run time.
  std::shared_ptr<const Program> compile_block(const ir::Block& block,
                                               std::span<const ir::Value* const> captures = {});
  std::shared_ptr<const Program> compile_region(const ir::Region& region,
                                                std::span<const ir::Value* const> captures = {});
  // Compiled once per function, so repeated calls share the program.
  std::shared_ptr<const Program> compile_function(const ir::Function& fn);

 private:
  const ir::Module& module_;
  std::unordered_map<const ir::Function*, std::shared_ptr<const Program>> functions_;
  int num_replicas_ = 1;
  int num_partitions_ = 1;
  int64_t next_collective_id_ = 0;
  profiler::LocationTable locations_;
};

// Op name -> factory. Each kernel file registers its ops in one function listed in
// kernel_registry() (kernels.cpp).
class KernelRegistry {
 public:
  void add(std::string op_name, KernelFactory factory);
  const KernelFactory* find(const std::string& op_name) const;
  std::vector<std::string> op_names() const;

 private:
  std::unordered_map<std::string, KernelFactory> factories_;
};
const KernelRegistry& kernel_registry();

void register_control_kernels(KernelRegistry& r);      // constant, call, while, case, checks
void register_elementwise_kernels(KernelRegistry& r);  // unary/binary math, compare, select,
                                                       // clamp, convert, bitcast, precision
void register_shape_kernels(KernelRegistry& r);        // reshape, broadcast, transpose, slice, pad,
                                                       // concatenate, reverse, iota, dynamic slices
void register_indexing_kernels(KernelRegistry& r);     // gather, scatter
void register_reduction_kernels(KernelRegistry& r);    // reduce
void register_window_kernels(KernelRegistry& r);       // reduce_window, select_and_scatter
void register_sort_kernels(KernelRegistry& r);         // sort
void register_linalg_kernels(KernelRegistry& r);       // dot_general, convolution,
                                                       // triangular_solve, cholesky
void register_random_kernels(KernelRegistry& r);       // rng_bit_generator
void register_collective_kernels(KernelRegistry& r);   // all_reduce, all_gather, ..., partition_id
// complex64/complex128 kernels (element-wise, dot_general, fft, reduce, reduce_window, sort):
// wraps the factories registered before it, so it runs last.
void register_complex_kernels(KernelRegistry& r);
// convert and bitcast_convert on the narrow types (compiler/narrow_types.h lowers the rest):
// wraps the factories registered before it.
void register_narrow_kernels(KernelRegistry& r);

// The result of an element-wise kernel (each element written after that element of the
// operands is read): the storage of the first operand among `candidates` that has the result's
// dtype and element count and that the kernel holds the only reference to (a donated or dead
// value), else a fresh tensor.
HostTensor reuse_or_allocate(std::span<const HostTensor> in,
                             std::initializer_list<size_t> candidates, DType dtype,
                             const Shape& shape, const ExecContext& ctx);

// Whether the op exchanges data between devices (all_reduce, all_gather, reduce_scatter,
// all_to_all, collective_permute, collective_broadcast).
bool is_collective(std::string_view op_name);

// A collective op's process groups of logical devices (replica_id * num_partitions +
// partition_id), as the spec's cross_replica, cross_partition, cross_replica_and_partition and
// flattened_ids strategies derive them from replica_groups, channel_handle and
// use_global_device_ids; collective_permute's group is its whole scope. Throws UnsupportedError
// for ids outside the program's grid or a device in two groups.
struct ProcessGroups {
  std::vector<std::vector<int>> groups;
  std::vector<int> group_of;  // per logical device: index into groups, -1 when in none
  std::vector<int> rank_of;   // per logical device: position in its group
};
ProcessGroups collective_process_groups(const ir::Operation& op, Compiler& cc);
// collective_permute: for each rank of its group, the rank it receives from (-1: none, zeros).
std::vector<int> permute_sources(const ir::Operation& op, Compiler& cc);

// compile_spmd's (num_replicas, num_partitions) for a module run on `num_devices` devices:
// its attributes, or num_partitions = num_devices; throws Error when they disagree.
std::pair<int, int> spmd_process_grid(const ir::Module& module, int64_t num_devices);

// A module attribute such as "mhlo.num_partitions" as an integer, or nullopt when absent.
std::optional<int64_t> module_int_attr(const ir::Module& module, std::string_view name);

// Values that `op`'s regions use but do not define (a `case` branch reading an outer value),
// in first-use order. The CPU program passes them to the op's kernel after its operands, so a
// kernel finds them at inputs[op.operands.size()...] and compiles its regions with them.
std::vector<const ir::Value*> captured_values(const ir::Operation& op);

// If `region` is `^bb0(%a, %b): %r = <op> %a, %b; return %r` (operands in either order),
// the op's name ("stablehlo.add"); lets reducers and combiners skip running the region.
std::optional<std::string> simple_binary_region(const ir::Region& region);

// "stablehlo.foo at 3:5: message" as an UnsupportedError.
[[noreturn]] void unsupported(const ir::Operation& op, const std::string& message);

}  // namespace cujax::cpu
