// The cuda backend's compiler and executable. A function body becomes a list of steps over
// numbered value slots holding DeviceArrays. Each op gets a device step when a kernel covers its
// types and attributes; otherwise a host step that downloads its operands, runs the CPU
// backend's kernel (which also covers regions, calls and check.* assertions) and uploads the
// results. Nothing here has run on a GPU yet: see docs/cuda.md.
#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "backends/common/copy_plan.h"
#include "backends/common/slots.h"
#include "backends/cpu/complex_kernels.h"
#include "backends/cpu/kernels.h"
#include "backends/cuda/codegen/fused.h"
#include "backends/cuda/complex.h"
#include "backends/cuda/cublaslt.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cudnn_attention.h"
#include "backends/cuda/device.h"
#include "backends/cuda/fft.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/op_kernels.h"
#include "backends/cuda/program.h"
#include "backends/cuda/spmd.h"
#include "backends/cuda/timeline.h"
#include "compiler/backend_passes.h"
#include "compiler/fusion.h"
#include "compiler/narrow_types.h"
#include "compiler/op_cost.h"
#include "cujax/profiler.h"
#include "profiler/hooks.h"

namespace cujax::cuda {

struct Step {
  DeviceKernel device;  // set for a device step
  cpu::Kernel host;     // set for a host step
  bool check = false;   // a check.* assertion (a host step that is no fallback)
  std::string op, where;
  // For the trace's device spans: the op ("fusion" for a generated kernel), its source
  // location and cost_analysis's FLOPs and bytes.
  std::string name, loc;
  double flops = 0, bytes = 0;
  std::vector<int> inputs, outputs, release;
  std::vector<bool> move;  // per input: moved out of its slot (its last use, used once)
  std::vector<std::shared_ptr<const Program>> nested;  // what a control-flow kernel runs
};

struct Program {
  std::vector<Step> steps;
  std::vector<int> arg_slots, result_slots;
  std::vector<ir::Type> arg_types;
  std::vector<ir::Type> slot_types;  // of the steps' results (argument slots left default)
  int num_slots = 0;
  std::vector<HostFallbackOp> fallbacks;  // nested programs' included
  // Generated, one per fusion step (nested programs' included).
  std::vector<std::shared_ptr<const codegen::FusionKernel>> kernels;
};

namespace {

// An element-wise result: the memory of operand `i` when this kernel holds its only reference
// and its type is the result's (each element is read before it is written), else new memory.
DeviceArray reuse_or_allocate(Device* d, std::span<const DeviceArray> in,
                              std::initializer_list<size_t> candidates, const ir::Type& rt) {
  for (size_t i : candidates)
    if (i < in.size() && in[i].data.use_count() == 1 && in[i].dtype == rt.dtype &&
        in[i].size() == rt.num_elements())
      return DeviceArray{rt.dtype, rt.shape, in[i].data};
  return d->allocate(rt.dtype, rt.shape);
}

std::vector<DeviceArray> one(DeviceArray a) {
  std::vector<DeviceArray> v;
  v.push_back(std::move(a));
  return v;
}

const Shape& shape_of(const ir::Value* v) {
  return v->type.shape;
}

bool all_tensors(const ir::Operation& op) {
  for (const ir::Value* v : op.operands)
    if (v->type.is_token || v->type.rank() > index::kMaxRank) return false;
  for (const auto& r : op.results)
    if (r->type.is_token || r->type.rank() > index::kMaxRank) return false;
  return true;
}

const std::map<std::string, UnaryOp>& unary_ops() {
  static const std::map<std::string, UnaryOp> m = {
      {"stablehlo.abs", UnaryOp::Abs},
      {"stablehlo.negate", UnaryOp::Negate},
      {"stablehlo.sign", UnaryOp::Sign},
      {"stablehlo.not", UnaryOp::Not},
      {"stablehlo.popcnt", UnaryOp::Popcnt},
      {"stablehlo.count_leading_zeros", UnaryOp::Clz},
      {"stablehlo.ceil", UnaryOp::Ceil},
      {"stablehlo.floor", UnaryOp::Floor},
      {"stablehlo.round_nearest_afz", UnaryOp::RoundAfz},
      {"stablehlo.round_nearest_even", UnaryOp::RoundEven},
      {"stablehlo.sqrt", UnaryOp::Sqrt},
      {"stablehlo.rsqrt", UnaryOp::Rsqrt},
      {"stablehlo.cbrt", UnaryOp::Cbrt},
      {"stablehlo.exponential", UnaryOp::Exp},
      {"stablehlo.exponential_minus_one", UnaryOp::Expm1},
      {"stablehlo.log", UnaryOp::Log},
      {"stablehlo.log_plus_one", UnaryOp::Log1p},
      {"stablehlo.logistic", UnaryOp::Logistic},
      {"stablehlo.sine", UnaryOp::Sin},
      {"stablehlo.cosine", UnaryOp::Cos},
      {"stablehlo.tan", UnaryOp::Tan},
      {"stablehlo.tanh", UnaryOp::Tanh},
  };
  return m;
}

const std::map<std::string, BinaryOp>& binary_ops() {
  static const std::map<std::string, BinaryOp> m = {
      {"stablehlo.add", BinaryOp::Add},
      {"stablehlo.subtract", BinaryOp::Subtract},
      {"stablehlo.multiply", BinaryOp::Multiply},
      {"stablehlo.divide", BinaryOp::Divide},
      {"stablehlo.remainder", BinaryOp::Remainder},
      {"stablehlo.maximum", BinaryOp::Maximum},
      {"stablehlo.minimum", BinaryOp::Minimum},
      {"stablehlo.power", BinaryOp::Power},
      {"stablehlo.atan2", BinaryOp::Atan2},
      {"stablehlo.and", BinaryOp::And},
      {"stablehlo.or", BinaryOp::Or},
      {"stablehlo.xor", BinaryOp::Xor},
      {"stablehlo.shift_left", BinaryOp::ShiftLeft},
      {"stablehlo.shift_right_logical", BinaryOp::ShiftRightLogical},
      {"stablehlo.shift_right_arithmetic", BinaryOp::ShiftRightArithmetic},
  };
  return m;
}

// Ops whose device kernels move elements without reading them (by their size in bytes), so
// that they take complex values as they take any other.
bool moves_elements(const std::string& name) {
  return name == "stablehlo.reshape" || name == "stablehlo.transpose" ||
         name == "stablehlo.broadcast_in_dim" || name == "stablehlo.slice" ||
         name == "stablehlo.concatenate" || name == "stablehlo.pad" || name == "stablehlo.select";
}

// The ops on complex values that op_kernel runs as it runs them on every type: they carry
// values without reading them (constants, calls, control flow), move whole elements of any
// width (reverse, bitcast_convert, gather, dynamic slices), are the complex product of its
// naive dot kernel, or call cuSOLVER/cuSPARSE (cholesky, JAX's linear-algebra custom calls).
bool op_kernel_takes_complex(const std::string& name) {
  static const std::set<std::string> names = {"stablehlo.constant",
                                              "func.call",
                                              "stablehlo.while",
                                              "stablehlo.case",
                                              "stablehlo.optimization_barrier",
                                              "stablehlo.reverse",
                                              "stablehlo.bitcast_convert",
                                              "stablehlo.gather",
                                              "stablehlo.dynamic_slice",
                                              "stablehlo.dynamic_update_slice",
                                              "stablehlo.dot_general",
                                              "stablehlo.cholesky",
                                              "stablehlo.custom_call"};
  return names.count(name) > 0;
}

// A device kernel for `op`, or an empty function when the op runs on the host.
DeviceKernel device_kernel(const ir::Operation& op, const std::shared_ptr<Device>& dev) {
  if (!all_tensors(op) || op.num_results() != 1) return {};
  const ir::Type rt = op.result(0)->type;
  const std::string& name = op.name;
  Device* d = dev.get();

  if (auto it = unary_ops().find(name); it != unary_ops().end()) {
    const UnaryOp u = it->second;
    if (op.operands.size() != 1 || op.operands[0]->type != rt || !supports_unary(u, rt.dtype))
      return {};
    return [d, u, rt](std::span<const DeviceArray> in) {
      DeviceArray out = reuse_or_allocate(d, in, {0}, rt);
      launch_unary(u, rt.dtype, in[0].data.get(), out.data.get(), out.size(), d->stream());
      return one(std::move(out));
    };
  }
  if (auto it = binary_ops().find(name); it != binary_ops().end()) {
    const BinaryOp b = it->second;
    if (op.operands.size() != 2 || op.operands[0]->type != rt || op.operands[1]->type != rt ||
        !supports_binary(b, rt.dtype))
      return {};
    return [d, b, rt](std::span<const DeviceArray> in) {
      DeviceArray out = reuse_or_allocate(d, in, {0, 1}, rt);
      launch_binary(b, rt.dtype, in[0].data.get(), in[1].data.get(), out.data.get(), out.size(),
                    d->stream());
      return one(std::move(out));
    };
  }
  if (name == "stablehlo.compare") {
    if (op.operands.size() != 2 || op.operands[0]->type != op.operands[1]->type ||
        rt.dtype != DType::Bool)
      return {};
    const ir::Attribute* dir = op.attr("comparison_direction");
    if (!dir) return {};
    static const std::map<std::string, CompareOp> dirs = {
        {"EQ", CompareOp::EQ}, {"NE", CompareOp::NE}, {"GE", CompareOp::GE},
        {"GT", CompareOp::GT}, {"LE", CompareOp::LE}, {"LT", CompareOp::LT}};
    auto di = dirs.find(dir->enum_value);
    if (di == dirs.end()) return {};
    const ir::Attribute* ct = op.attr("compare_type");
    const bool total = ct && ct->enum_value == "TOTALORDER";
    const CompareOp c = di->second;
    const DType t = op.operands[0]->type.dtype;
    return [d, c, t, total, rt](std::span<const DeviceArray> in) {
      DeviceArray out = d->allocate(DType::Bool, rt.shape);
      launch_compare(c, t, total, in[0].data.get(), in[1].data.get(),
                     static_cast<bool*>(out.data.get()), out.size(), d->stream());
      return one(std::move(out));
    };
  }
  if (name == "stablehlo.select") {
    if (op.operands.size() != 3 || op.operands[1]->type != rt || op.operands[2]->type != rt)
      return {};
    const bool scalar = op.operands[0]->type.rank() == 0;
    if (!scalar && op.operands[0]->type.shape != rt.shape) return {};
    return [d, scalar, rt](std::span<const DeviceArray> in) {
      DeviceArray out = reuse_or_allocate(d, in, {1, 2}, rt);
      launch_select(size_of(rt.dtype), static_cast<const bool*>(in[0].data.get()), scalar,
                    in[1].data.get(), in[2].data.get(), out.data.get(), out.size(), d->stream());
      return one(std::move(out));
    };
  }
  if (name == "stablehlo.convert") {
    if (op.operands.size() != 1 || shape_of(op.operands[0]) != rt.shape) return {};
    const DType from = op.operands[0]->type.dtype;
    return [d, from, rt](std::span<const DeviceArray> in) {
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      launch_convert(from, rt.dtype, in[0].data.get(), out.data.get(), out.size(), d->stream());
      return one(std::move(out));
    };
  }
  if (name == "stablehlo.reshape") {
    if (op.operands.size() != 1 || op.operands[0]->type.dtype != rt.dtype) return {};
    return [rt](std::span<const DeviceArray> in) {
      DeviceArray out = in[0];  // same bytes, new shape
      out.shape = rt.shape;
      return one(std::move(out));
    };
  }
  // The rest are box copies: describe the copy once, run it per call.
  auto box_kernel = [d, rt](index::StridedCopy box) -> DeviceKernel {
    return [d, rt, box](std::span<const DeviceArray> in) {
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      launch_strided_copy(size_of(rt.dtype), box, in[0].data.get(), out.data.get(), d->stream());
      return one(std::move(out));
    };
  };
  if (name == "stablehlo.transpose") {
    const std::vector<int64_t> perm = op.ints("permutation");
    if (op.operands.size() != 1 || perm.size() != rt.shape.size()) return {};
    return box_kernel(plan::transpose(shape_of(op.operands[0]), perm));
  }
  if (name == "stablehlo.broadcast_in_dim") {
    const std::vector<int64_t> dims = op.ints("broadcast_dimensions");
    if (op.operands.size() != 1 || dims.size() != shape_of(op.operands[0]).size()) return {};
    return box_kernel(plan::broadcast_in_dim(shape_of(op.operands[0]), rt.shape, dims));
  }
  if (name == "stablehlo.slice") {
    const std::vector<int64_t> start = op.ints("start_indices");
    const std::vector<int64_t> step = op.ints("strides");
    if (op.operands.size() != 1 || start.size() != rt.shape.size() ||
        step.size() != rt.shape.size())
      return {};
    return box_kernel(plan::slice(shape_of(op.operands[0]), rt.shape, start, step));
  }
  if (name == "stablehlo.concatenate") {
    std::vector<Shape> shapes;
    for (const ir::Value* v : op.operands) {
      if (v->type.dtype != rt.dtype || v->type.rank() != rt.rank()) return {};
      shapes.push_back(shape_of(v));
    }
    const std::vector<index::StridedCopy> boxes =
        plan::concatenate(shapes, rt.shape, op.int_attr("dimension"));
    return [d, rt, boxes](std::span<const DeviceArray> in) {
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      for (size_t i = 0; i < boxes.size(); ++i)
        launch_strided_copy(size_of(rt.dtype), boxes[i], in[i].data.get(), out.data.get(),
                            d->stream());
      return one(std::move(out));
    };
  }
  if (name == "stablehlo.pad") {
    const std::vector<int64_t> lo = op.ints("edge_padding_low");
    const std::vector<int64_t> interior = op.ints("interior_padding");
    if (op.operands.size() != 2 || lo.size() != rt.shape.size() ||
        interior.size() != rt.shape.size())
      return {};
    const index::StridedCopy box = plan::pad(shape_of(op.operands[0]), rt.shape, lo, interior);
    return [d, rt, box](std::span<const DeviceArray> in) {
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      launch_fill(size_of(rt.dtype), in[1].data.get(), out.data.get(), out.size(), d->stream());
      launch_strided_copy(size_of(rt.dtype), box, in[0].data.get(), out.data.get(), d->stream());
      return one(std::move(out));
    };
  }
  if (name == "stablehlo.iota") {
    const int dim = static_cast<int>(op.int_attr("iota_dimension"));
    if (dim < 0 || dim >= static_cast<int>(rt.shape.size())) return {};
    return [d, rt, dim](std::span<const DeviceArray>) {
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      launch_iota(rt.dtype, out.data.get(), rt.shape.data(), static_cast<int>(rt.shape.size()), dim,
                  d->stream());
      return one(std::move(out));
    };
  }
  if (name == "stablehlo.reduce") {
    if (op.operands.size() != 2 || op.regions.size() != 1) return {};
    const auto body = cpu::simple_binary_region(*op.regions[0]);
    if (!body) return {};
    static const std::map<std::string, ReduceOp> ops = {
        {"stablehlo.add", ReduceOp::Add},         {"stablehlo.multiply", ReduceOp::Multiply},
        {"stablehlo.maximum", ReduceOp::Maximum}, {"stablehlo.minimum", ReduceOp::Minimum},
        {"stablehlo.and", ReduceOp::And},         {"stablehlo.or", ReduceOp::Or},
        {"stablehlo.xor", ReduceOp::Xor}};
    auto it = ops.find(*body);
    const DType t = op.operands[0]->type.dtype;
    if (it == ops.end() || !supports_reduce(it->second, t) || rt.dtype != t) return {};
    const Shape in_shape = shape_of(op.operands[0]);
    std::vector<char> reduced(in_shape.size(), 0);
    for (int64_t dim : op.ints("dimensions")) reduced.at(dim) = 1;
    const ReduceOp r = it->second;
    return [d, r, t, rt, in_shape, reduced](std::span<const DeviceArray> in) {
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      bool flags[index::kMaxRank] = {};
      for (size_t i = 0; i < reduced.size(); ++i) flags[i] = reduced[i] != 0;
      launch_reduce(r, t, in[0].data.get(), in[1].data.get(), out.data.get(), in_shape.data(),
                    flags, static_cast<int>(in_shape.size()), d->stream());
      return one(std::move(out));
    };
  }
  if (name == "stablehlo.dot_general") {
    if (op.operands.size() != 2) return {};
    const ir::Type& lt = op.operands[0]->type;
    const ir::Type& rtype = op.operands[1]->type;
    const DType in_t = lt.dtype;  // f16/bf16 operands may give f32 results
    if (rtype.dtype != in_t || !cublaslt_supports(in_t, rt.dtype)) return {};
    const ir::Attribute* dn = op.attr("dot_dimension_numbers");
    if (!dn) return {};
    auto field = [&](const char* f) -> std::vector<int64_t> {
      const ir::Attribute* a = dn->field(f);
      if (!a) return {};
      if (a->kind == ir::Attribute::Kind::Integer) return {a->integer};
      return ir::as_ints(*a);
    };
    const auto lb = field("lhs_batching_dimensions"), rb = field("rhs_batching_dimensions");
    const auto lc = field("lhs_contracting_dimensions"), rc = field("rhs_contracting_dimensions");
    const plan::DotPlan p = plan::dot_general(lt.shape, rtype.shape, lb, rb, lc, rc);
    int64_t rk = 1;
    for (int64_t dim : rc) rk *= rtype.shape.at(dim);
    if (p.k != rk || p.batch * p.m * p.n != rt.num_elements()) return {};
    std::optional<index::StridedCopy> lbox, rbox;
    if (!p.lhs_perm.empty()) lbox = plan::transpose(lt.shape, p.lhs_perm);
    if (!p.rhs_perm.empty()) rbox = plan::transpose(rtype.shape, p.rhs_perm);
    const MatmulShape shape{in_t,
                            rt.dtype,
                            p.batch,
                            p.m,
                            p.n,
                            p.k,
                            rt.dtype == DType::F32 && in_t == DType::F32 && tf32_allowed(op)};
    const int64_t lsize = lt.num_elements(), rsize = rtype.num_elements();
    return [d, rt, lbox, rbox, lsize, rsize, shape](std::span<const DeviceArray> in) {
      DeviceArray a = in[0], b = in[1];
      if (lbox) {
        a = d->allocate(shape.in, {lsize});
        launch_strided_copy(size_of(shape.in), *lbox, in[0].data.get(), a.data.get(), d->stream());
      }
      if (rbox) {
        b = d->allocate(shape.in, {rsize});
        launch_strided_copy(size_of(shape.in), *rbox, in[1].data.get(), b.data.get(), d->stream());
      }
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      if (out.size() > 0) {
        if (shape.k == 0)
          CUJAX_CUDA_CHECK(cudaMemsetAsync(out.data.get(), 0, out.nbytes(), d->stream()));
        else
          cublaslt_matmul(*d, shape, a.data.get(), b.data.get(), out.data.get());
      }
      return one(std::move(out));
    };
  }
  return {};
}

}  // namespace

// Whether `op`'s regions (a while body, a case branch) hold a collective: those run on the host
// through the cpu kernels, which meet other devices only inside the cpu backend's SPMD runs.
bool has_nested_collective(const ir::Operation& op) {
  for (const auto& region : op.regions)
    for (const auto& block : region->blocks)
      for (const auto& inner : block->ops)
        if (cpu::is_collective(inner->name) || has_nested_collective(*inner)) return true;
  return false;
}

namespace {

std::shared_ptr<const Program> compile_steps(const ir::Module& module, const ir::Block& block,
                                             std::span<const ir::Value* const> captures,
                                             const std::shared_ptr<Device>& dev,
                                             const SpmdContext* spmd,
                                             const runtime::CompileOptions& options) {
  auto program = std::make_shared<Program>();
  cpu::Compiler host_compiler(module);
  if (spmd) host_compiler.set_process_grid(spmd->num_replicas, spmd->num_partitions);
  std::unordered_map<const ir::Value*, int> slot_of;
  auto new_slot = [&](const ir::Value* v) {
    slot_of[v] = program->num_slots;
    return program->num_slots++;
  };
  for (const auto& a : block.arguments) {
    program->arg_slots.push_back(new_slot(a.get()));
    program->arg_types.push_back(a->type);
  }
  for (const ir::Value* v : captures) {
    program->arg_slots.push_back(new_slot(v));
    program->arg_types.push_back(v->type);
  }
  auto slot = [&](const ir::Operation& op, const ir::Value* v) {
    auto it = slot_of.find(v);
    if (it == slot_of.end())
      throw UnsupportedError(op.where() + ": uses a value that is not defined in its scope");
    return it->second;
  };
  const ir::Operation* term = block.terminator();
  const bool has_term = term && (term->name == "func.return" || term->name == "stablehlo.return");
  const size_t num_steps = block.ops.size() - (has_term ? 1 : 0);
  const runtime::HostFallback fallback = runtime::host_fallback(options);
  std::unordered_map<int, size_t> last_use;
  // Fusion groups become one generated kernel each, except a lone op with a kernel of its own.
  const compiler::FusionPlan plan = codegen::fusion_enabled(dev)
                                        ? compiler::plan_fusion(block, num_steps)
                                        : compiler::unfused_plan(num_steps);
  std::vector<bool> generate(plan.groups.size());
  for (size_t g = 0; g < plan.groups.size(); ++g)
    generate[g] =
        plan.groups[g].ops.size() > 1 || !device_kernel(*block.ops[plan.groups[g].ops[0]], dev);
  const codegen::FusedKernels fused = codegen::build_fused_kernels(block, plan, generate, dev);
  for (const compiler::FusionPlan::Item& item : plan.schedule) {
    size_t i = item.op;
    if (item.group >= 0 && generate[item.group]) {
      const compiler::FusionGroup& group = plan.groups[item.group];
      const ir::Operation& first = *block.ops[group.ops[0]];
      Step step;
      step.where = first.where() + " (" + fused.kernels[item.group]->name + ", " +
                   fused.kernels[item.group]->description + ")";
      step.device = fused.launchers[item.group];
      step.name = "fusion";
      step.loc = host_compiler.source_location(first);
      for (size_t member : group.ops) {
        const compiler::OpCost c = compiler::op_cost(*block.ops[member]);
        step.flops += c.flops + c.transcendentals;
      }
      for (const ir::Value* v : group.inputs) step.bytes += compiler::value_bytes(*v);
      for (const ir::Value* v : group.outputs) step.bytes += compiler::value_bytes(*v);
      for (const ir::Value* v : group.inputs) {
        step.inputs.push_back(slot(first, v));
        last_use[step.inputs.back()] = program->steps.size();
      }
      for (const ir::Value* v : group.outputs) {
        step.outputs.push_back(new_slot(v));
        program->slot_types.resize(program->num_slots);
        program->slot_types.back() = v->type;
      }
      program->kernels.push_back(fused.kernels[item.group]);
      program->steps.push_back(std::move(step));
      continue;
    }
    if (item.group >= 0) i = plan.groups[item.group].ops[0];
    const ir::Operation& op = *block.ops[i];
    Step step;
    step.where = op.where();
    step.op = op.name;
    step.name = op.name;
    step.loc = host_compiler.source_location(op);
    const compiler::OpCost cost = compiler::op_cost(op);
    step.flops = cost.flops + cost.transcendentals;
    step.bytes = cost.bytes;
    // Complex values have device kernels for fft (cuFFT), dot_general, the arithmetic of
    // complex.h, the ops that only move elements and complex64 regions; narrow ones (int4,
    // float8_e4m3fn, ...) for their constants and converts. Their other ops take the host path.
    const OpKernelContext context{module, dev, options, spmd, &step.nested};
    if (cpu::touches_complex(op)) {
      if (op.name == "stablehlo.fft")
        step.device = fft_kernel(op, dev.get());
      else if (op_kernel_takes_complex(op.name))
        step.device = op_kernel(op, context);
      else if (moves_elements(op.name))
        step.device = device_kernel(op, dev);
      else
        step.device = complex_kernel(op, dev.get());
      // Other reduce bodies, sort comparators and window bodies on complex64 (JAX's complex
      // max, min and sort): the region interpreter selects, splits and passes them along; a
      // scatter that assigns complex values moves their bytes.
      if (!step.device && (op.name == "stablehlo.reduce" || op.name == "stablehlo.sort" ||
                           op.name == "stablehlo.reduce_window" || op.name == "stablehlo.scatter"))
        step.device = op_kernel(op, context);
    } else if (compiler::touches_narrow(op)) {
      step.device = narrow_kernel(op, context);
    } else {
      if (spmd) step.device = spmd->device_kernel(op, host_compiler);
      if (!step.device) step.device = device_kernel(op, dev);
      if (!step.device) step.device = op_kernel(op, context);
    }
    std::vector<const ir::Value*> uses(op.operands.begin(), op.operands.end());
    if (!step.device) {
      if (spmd && has_nested_collective(op))
        cpu::unsupported(op, "collectives inside regions are not supported on cuda devices");
      const cpu::KernelFactory* factory = cpu::kernel_registry().find(op.name);
      if (!factory) cpu::unsupported(op, "op is not supported by the cuda or cpu backend");
      for (const auto& r : op.results)
        if (r->type.is_token) cpu::unsupported(op, "tokens are not supported by the cuda backend");
      step.check = is_check(op);
      if (!step.check) {
        report_host_fallback(op, fallback);
        program->fallbacks.push_back({op.name, step.where});
      }
      step.host = (*factory)(op, host_compiler);
    }
    // Values the op's regions read from enclosing blocks follow its operands (host kernels
    // and the device control-flow kernels pass them on to the regions).
    if (!op.regions.empty())
      for (const ir::Value* v : cpu::captured_values(op)) uses.push_back(v);
    for (const auto& nested : step.nested) {
      program->fallbacks.insert(program->fallbacks.end(), nested->fallbacks.begin(),
                                nested->fallbacks.end());
      program->kernels.insert(program->kernels.end(), nested->kernels.begin(),
                              nested->kernels.end());
    }
    for (const ir::Value* v : uses) {
      step.inputs.push_back(slot(op, v));
      last_use[step.inputs.back()] = program->steps.size();
    }
    for (const auto& r : op.results) {
      step.outputs.push_back(new_slot(r.get()));
      program->slot_types.resize(program->num_slots);
      program->slot_types.back() = r->type;
    }
    program->steps.push_back(std::move(step));
  }
  program->slot_types.resize(program->num_slots);
  if (has_term)
    for (const ir::Value* v : term->operands) program->result_slots.push_back(slot(*term, v));
  std::unordered_map<int, bool> is_result;
  for (int s : program->result_slots) is_result[s] = true;
  for (auto [s, i] : last_use)
    if (!is_result.count(s)) program->steps[i].release.push_back(s);
  // A value read for the last time, by one operand of its step, moves into that operand: a
  // kernel holding the only reference may write its result there.
  for (Step& step : program->steps) step.move = slots::moves_on_last_use(step.inputs, step.release);
  return program;
}

}  // namespace

std::shared_ptr<const Program> compile_program(const ir::Module& module, const ir::Function& fn,
                                               const std::shared_ptr<Device>& dev,
                                               const SpmdContext* spmd,
                                               const runtime::CompileOptions& options) {
  auto compile = [&](const ir::Module& m, const ir::Function& f) {
    if (f.body.blocks.size() != 1)
      throw UnsupportedError("@" + f.name + ": functions with several blocks are not supported");
    return compile_steps(m, f.body.front(), {}, dev, spmd, options);
  };
  // Quantized types become integers and chlo ops StableHLO first (once: the chlo ops it keeps,
  // on complex operands, take the host path); the program keeps nothing of the lowered module.
  // Narrow types then compute on wide ones (compiler/narrow_types.h), so that only their
  // converts, bitcasts and constants take the host path.
  std::unique_ptr<ir::Module> lowered = compiler::run_backend_passes(module);
  if (lowered) return compile(*lowered, *lowered->lookup(fn.name));
  return compile(module, fn);
}

std::shared_ptr<const Program> compile_block(const ir::Module& module, const ir::Block& block,
                                             std::span<const ir::Value* const> captures,
                                             const std::shared_ptr<Device>& dev,
                                             const runtime::CompileOptions& options) {
  return compile_steps(module, block, captures, dev, nullptr, options);
}

std::vector<DeviceArray> run_program(const Program& p, Device& dev, std::vector<DeviceArray> args,
                                     const runtime::ExecuteOptions& options) {
  if (args.size() != p.arg_slots.size())
    throw RuntimeError("program expects " + std::to_string(p.arg_slots.size()) +
                       " arguments, got " + std::to_string(args.size()));
  std::vector<DeviceArray> slots(p.num_slots);
  for (size_t i = 0; i < args.size(); ++i) slots[p.arg_slots[i]] = std::move(args[i]);
  std::vector<DeviceArray> inputs;
  cpu::ExecContext ctx;
  ctx.options = &options;
  std::optional<RunTimer> timer;  // device spans while a trace is recorded
  if (profiler::active()) timer.emplace(dev, p.steps.size());
  for (const Step& step : p.steps) {
    inputs.clear();
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      DeviceArray& slot = slots[step.inputs[i]];
      inputs.push_back(step.move[i] ? std::move(slot) : slot);
    }
    std::vector<DeviceArray> outputs;
    try {
      if (step.device) {
        outputs = step.device(inputs);
      } else {
        const std::vector<HostTensor> host_in = dev.download(inputs);
        const std::vector<HostTensor> host_out = step.host(host_in, ctx);
        outputs = dev.upload(host_out);
      }
    } catch (const UnsupportedError&) {
      throw;
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind(step.where, 0) == 0) throw;
      throw RuntimeError(step.where + ": " + what);
    }
    inputs.clear();  // before the release: the last owner of a dead value frees it here
    if (outputs.size() != step.outputs.size())
      throw RuntimeError(step.where + ": produced " + std::to_string(outputs.size()) +
                         " results, expected " + std::to_string(step.outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) slots[step.outputs[i]] = std::move(outputs[i]);
    for (int s : step.release) slots[s] = DeviceArray();
    if (timer)
      timer->op_done({step.device ? step.name : step.name + " (on the host)", step.where, step.loc,
                      step.flops, step.bytes});
  }
  if (timer) timer->finish();
  std::vector<DeviceArray> results;
  for (int s : p.result_slots) results.push_back(slots[s]);
  return results;
}

int host_steps(const Program& program) {
  return static_cast<int>(program.fallbacks.size());
}

std::vector<HostFallbackOp> host_fallbacks(const Program& program) {
  return program.fallbacks;
}

namespace {

void describe_into(const Program& p, int depth, std::vector<std::string>& out) {
  for (const Step& s : p.steps) {
    const char* kind = s.device ? "device" : (s.check ? "check" : "host");
    out.push_back(std::string(2 * depth, ' ') + kind + "  " + s.where);
    for (const auto& n : s.nested) describe_into(*n, depth + 1, out);
  }
}

}  // namespace

std::vector<std::string> describe(const Program& program) {
  std::vector<std::string> out;
  describe_into(program, 0, out);
  return out;
}

int64_t peak_buffer_bytes(const Program& p) {
  auto bytes = [](const ir::Type& t) {
    return t.is_token ? int64_t{0} : t.num_elements() * static_cast<int64_t>(size_of(t.dtype));
  };
  int64_t live = 0;
  for (const ir::Type& t : p.arg_types) live += bytes(t);
  int64_t peak = live;
  for (const Step& s : p.steps) {
    for (int o : s.outputs) live += bytes(p.slot_types[o]);
    peak = std::max(peak, live);
    for (int r : s.release)
      live -=
          r < static_cast<int>(p.arg_slots.size()) ? bytes(p.arg_types[r]) : bytes(p.slot_types[r]);
  }
  return peak;
}

const std::vector<std::shared_ptr<const codegen::FusionKernel>>& fusion_kernels(
    const Program& program) {
  return program.kernels;
}

void check_arguments(const Program& program, std::span<const runtime::DeviceBuffer> args,
                     int device) {
  if (args.size() != program.arg_types.size())
    throw RuntimeError("program expects " + std::to_string(program.arg_types.size()) +
                       " arguments, got " + std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const ir::Type& want = program.arg_types[i];
    const runtime::DeviceBuffer& a = args[i];
    if (want.is_token || a.dtype != want.dtype || a.shape != want.shape)
      throw RuntimeError("argument #" + std::to_string(i) + " is " +
                         std::string(mlir_name(a.dtype)) + shape_to_string(a.shape) +
                         ", expected " + want.str());
    if (a.platform != "cuda" || a.device != device)
      throw RuntimeError("argument #" + std::to_string(i) + " is on " + a.device_name() +
                         ", but the program runs on cuda:" + std::to_string(device));
  }
}

DeviceArray as_device_array(runtime::DeviceBuffer b) {
  return DeviceArray{b.dtype, std::move(b.shape), std::move(b.data)};
}

namespace {

// A point on a device's stream: the buffers a program or copy writes are ready when it is.
class StreamEvent final : public runtime::DeviceEvent {
 public:
  explicit StreamEvent(Device& dev) { event_.record(dev.stream()); }
  bool is_ready() const override {
    const cudaError_t e = cudaEventQuery(event_.get());
    if (e == cudaErrorNotReady) return false;
    CUJAX_CUDA_CHECK(e);
    return true;
  }
  void wait() const override { event_.synchronize(); }

 private:
  Event event_;
};

}  // namespace

std::shared_ptr<const runtime::DeviceEvent> stream_event(Device& device) {
  return std::make_shared<StreamEvent>(device);
}

runtime::DeviceBuffer as_buffer(DeviceArray a, int device,
                                std::shared_ptr<const runtime::DeviceEvent> ready) {
  runtime::DeviceBuffer b;
  b.dtype = a.dtype;
  b.shape = std::move(a.shape);
  b.data = std::move(a.data);
  b.platform = "cuda";
  b.device = device;
  b.ready = std::move(ready);
  return b;
}

namespace {

class CudaExecutable final : public runtime::Executable {
 public:
  CudaExecutable(const runtime::Backend& backend, std::shared_ptr<const Program> p,
                 std::shared_ptr<Device> dev)
      : backend_(backend), program_(std::move(p)), dev_(std::move(dev)) {}
  std::vector<runtime::DeviceBuffer> execute(std::vector<runtime::DeviceBuffer> args,
                                             const runtime::ExecuteOptions& options) override {
    check_arguments(*program_, args, dev_->ordinal());
    std::vector<DeviceArray> in;
    in.reserve(args.size());
    for (runtime::DeviceBuffer& a : args) in.push_back(as_device_array(std::move(a)));
    std::lock_guard<std::mutex> lock(dev_->mutex());
    dev_->activate();
    std::vector<DeviceArray> results = run_program(*program_, *dev_, std::move(in), options);
    auto ready = stream_event(*dev_);
    std::vector<runtime::DeviceBuffer> out;
    for (DeviceArray& r : results) out.push_back(as_buffer(std::move(r), dev_->ordinal(), ready));
    return out;
  }
  const runtime::Backend& backend() const override { return backend_; }
  int device() const override { return dev_->ordinal(); }

 private:
  const runtime::Backend& backend_;
  std::shared_ptr<const Program> program_;
  std::shared_ptr<Device> dev_;
};

class CudaBackend final : public runtime::Backend {
 public:
  explicit CudaBackend(const Driver& driver) : info_(driver.devices()) {
    int count = 0;
    CUJAX_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (count == 0) throw CudaError("the CUDA runtime sees no device");
    for (int i = 0; i < count; ++i) {
      devices_.push_back(std::make_shared<Device>(i));
      check_kernel_image(i);  // after Device made it current
    }
    // The doctor's roofline ceilings: device 0's (a machine's GPUs are alike, as a mesh's are).
    profiler::GpuSpec spec;
    spec.name = info_.at(0).name;
    spec.cc_major = info_.at(0).cc_major;
    spec.cc_minor = info_.at(0).cc_minor;
    spec.sm_count = info_.at(0).sm_count;
    int clock_khz = 0, memory_clock_khz = 0;
    CUJAX_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    CUJAX_CUDA_CHECK(cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, 0));
    CUJAX_CUDA_CHECK(
        cudaDeviceGetAttribute(&spec.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
    spec.clock_khz = clock_khz;
    spec.memory_clock_khz = memory_clock_khz;
    profiler::detail::set_device_peak("cuda", profiler::gpu_peak(spec));
    // nn.dot_product_attention checks cuDNN attention's requirements against these devices.
    runtime::register_fused_attention_probe("cuda", [info = info_](int device) {
      const DeviceInfo& i = info.at(static_cast<size_t>(device));
      return cudnn_attention_support(i.cc_major * 10 + i.cc_minor);
    });
  }
  std::string_view platform() const override { return "cuda"; }
  std::vector<runtime::DeviceDescription> devices() const override {
    std::vector<runtime::DeviceDescription> out;
    for (const DeviceInfo& i : info_) {
      runtime::DeviceDescription d;
      d.platform = "cuda";
      d.id = i.ordinal;
      d.kind = i.name;
      d.memory_bytes = i.memory_bytes;
      d.detail = "compute capability " + std::to_string(i.cc_major) + "." +
                 std::to_string(i.cc_minor) + ", " + std::to_string(i.sm_count) + " SMs";
      out.push_back(d);
    }
    return out;
  }
  std::unique_ptr<runtime::Executable> compile(
      const ir::Module& module, std::string_view entry, int device,
      const runtime::CompileOptions& options) const override {
    const ir::Function* fn = module.lookup(entry);
    if (!fn) throw Error("module has no function @" + std::string(entry));
    const std::shared_ptr<Device>& dev = device_at(device);
    return std::make_unique<CudaExecutable>(
        *this, compile_program(module, *fn, dev, nullptr, options), dev);
  }
  runtime::DeviceBuffer to_device(const HostTensor& value, int device) const override {
    Device& dev = *device_at(device);
    std::lock_guard<std::mutex> lock(dev.mutex());
    dev.activate();
    DeviceArray a = std::move(dev.upload(std::span<const HostTensor>(&value, 1)).front());
    return as_buffer(std::move(a), device, stream_event(dev));
  }
  HostTensor to_host(const runtime::DeviceBuffer& buffer) const override {
    Device& dev = *device_at(buffer.device);
    std::lock_guard<std::mutex> lock(dev.mutex());
    dev.activate();
    const DeviceArray a{buffer.dtype, buffer.shape, buffer.data};
    return std::move(dev.download(std::span<const DeviceArray>(&a, 1)).front());
  }
  std::unique_ptr<runtime::SpmdExecutable> compile_spmd(const ir::Module& module,
                                                        std::vector<int> device_ids,
                                                        std::string_view entry) const override {
    return compile_cuda_spmd(devices_, module, std::move(device_ids), entry);
  }

 private:
  const std::shared_ptr<Device>& device_at(int device) const {
    if (device < 0 || device >= static_cast<int>(devices_.size()))
      throw Error("device cuda:" + std::to_string(device) + " does not exist (" +
                  std::to_string(devices_.size()) + " cuda devices)");
    return devices_[device];
  }
  std::vector<DeviceInfo> info_;
  std::vector<std::shared_ptr<Device>> devices_;
};

}  // namespace

std::unique_ptr<runtime::Backend> make_cuda_backend(const Driver& driver) {
  return std::make_unique<CudaBackend>(driver);
}

}  // namespace cujax::cuda
