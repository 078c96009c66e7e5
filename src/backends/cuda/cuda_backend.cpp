// The cuda backend's compiler and executable. A function body becomes a list of steps over
// numbered value slots holding DeviceArrays. Each op gets a device step when a kernel covers its
// types and attributes; otherwise a host step that downloads its operands, runs the CPU
// backend's kernel (which also covers regions, calls and check.* assertions) and uploads the
// results. Nothing here has run on a GPU yet: see docs/cuda.md.
#include "backends/cuda/cuda_backend.h"

#include <functional>
#include <map>
#include <unordered_map>

#include "backends/common/copy_plan.h"
#include "backends/cpu/kernels.h"
#include "backends/cuda/codegen/fused.h"
#include "backends/cuda/cublaslt.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/program.h"
#include "backends/cuda/spmd.h"
#include "compiler/fusion.h"

namespace cujax::cuda {

struct Step {
  DeviceKernel device;  // set for a device step
  cpu::Kernel host;     // set for a host step
  std::string where;
  std::vector<int> inputs, outputs, release;
};

struct Program {
  std::vector<Step> steps;
  std::vector<int> arg_slots, result_slots;
  std::vector<ir::Type> arg_types;
  int num_slots = 0;
  int host_steps = 0;
  std::vector<std::shared_ptr<const codegen::FusionKernel>> kernels;  // generated, one per fusion
};

namespace {

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
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
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
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
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
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
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
    if (lt.dtype != rt.dtype || rtype.dtype != rt.dtype || !cublaslt_supports(rt.dtype)) return {};
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
    const int64_t batch = p.batch, m = p.m, n = p.n, k = p.k;
    const DType t = rt.dtype;
    const int64_t lsize = lt.num_elements(), rsize = rtype.num_elements();
    return [d, t, rt, lbox, rbox, lsize, rsize, batch, m, n, k](std::span<const DeviceArray> in) {
      DeviceArray a = in[0], b = in[1];
      if (lbox) {
        a = d->allocate(t, {lsize});
        launch_strided_copy(size_of(t), *lbox, in[0].data.get(), a.data.get(), d->stream());
      }
      if (rbox) {
        b = d->allocate(t, {rsize});
        launch_strided_copy(size_of(t), *rbox, in[1].data.get(), b.data.get(), d->stream());
      }
      DeviceArray out = d->allocate(t, rt.shape);
      if (out.size() > 0) {
        if (k == 0)
          CUJAX_CUDA_CHECK(cudaMemsetAsync(out.data.get(), 0, out.nbytes(), d->stream()));
        else
          cublaslt_matmul(*d, t, a.data.get(), b.data.get(), out.data.get(), batch, m, n, k);
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

std::shared_ptr<const Program> compile_program(const ir::Module& module, const ir::Function& fn,
                                               const std::shared_ptr<Device>& dev,
                                               const SpmdContext* spmd) {
  if (fn.body.blocks.size() != 1)
    throw UnsupportedError("@" + fn.name + ": functions with several blocks are not supported");
  const ir::Block& block = fn.body.front();
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
  auto slot = [&](const ir::Operation& op, const ir::Value* v) {
    auto it = slot_of.find(v);
    if (it == slot_of.end())
      throw UnsupportedError(op.where() + ": uses a value that is not defined in its scope");
    return it->second;
  };
  const ir::Operation* term = block.terminator();
  const bool has_term = term && (term->name == "func.return" || term->name == "stablehlo.return");
  const size_t num_steps = block.ops.size() - (has_term ? 1 : 0);
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
      for (const ir::Value* v : group.inputs) {
        step.inputs.push_back(slot(first, v));
        last_use[step.inputs.back()] = program->steps.size();
      }
      for (const ir::Value* v : group.outputs) step.outputs.push_back(new_slot(v));
      program->kernels.push_back(fused.kernels[item.group]);
      program->steps.push_back(std::move(step));
      continue;
    }
    if (item.group >= 0) i = plan.groups[item.group].ops[0];
    const ir::Operation& op = *block.ops[i];
    Step step;
    step.where = op.where();
    if (spmd) step.device = spmd->device_kernel(op, host_compiler);
    if (!step.device) step.device = device_kernel(op, dev);
    std::vector<const ir::Value*> uses(op.operands.begin(), op.operands.end());
    if (!step.device) {
      if (spmd && has_nested_collective(op))
        cpu::unsupported(op, "collectives inside regions are not supported on cuda devices");
      const cpu::KernelFactory* factory = cpu::kernel_registry().find(op.name);
      if (!factory) cpu::unsupported(op, "op is not supported by the cuda or cpu backend");
      for (const auto& r : op.results)
        if (r->type.is_token) cpu::unsupported(op, "tokens are not supported by the cuda backend");
      if (!op.regions.empty())
        for (const ir::Value* v : cpu::captured_values(op)) uses.push_back(v);
      step.host = (*factory)(op, host_compiler);
      ++program->host_steps;
    }
    for (const ir::Value* v : uses) {
      step.inputs.push_back(slot(op, v));
      last_use[step.inputs.back()] = program->steps.size();
    }
    for (const auto& r : op.results) step.outputs.push_back(new_slot(r.get()));
    program->steps.push_back(std::move(step));
  }
  if (has_term)
    for (const ir::Value* v : term->operands) program->result_slots.push_back(slot(*term, v));
  std::unordered_map<int, bool> is_result;
  for (int s : program->result_slots) is_result[s] = true;
  for (auto [s, i] : last_use)
    if (!is_result.count(s)) program->steps[i].release.push_back(s);
  return program;
}

std::vector<DeviceArray> run_program(const Program& p, Device& dev, std::vector<DeviceArray> args,
                                     const runtime::ExecuteOptions& options) {
  if (args.size() != p.arg_slots.size())
    throw RuntimeError("program expects " + std::to_string(p.arg_slots.size()) +
                       " arguments, got " + std::to_string(args.size()));
  std::vector<DeviceArray> slots(p.num_slots);
  for (size_t i = 0; i < args.size(); ++i) slots[p.arg_slots[i]] = std::move(args[i]);
  std::vector<DeviceArray> inputs;
  cpu::ExecContext ctx{&options};
  for (const Step& step : p.steps) {
    inputs.clear();
    for (int s : step.inputs) inputs.push_back(slots[s]);
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
    if (outputs.size() != step.outputs.size())
      throw RuntimeError(step.where + ": produced " + std::to_string(outputs.size()) +
                         " results, expected " + std::to_string(step.outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) slots[step.outputs[i]] = std::move(outputs[i]);
    for (int s : step.release) slots[s] = DeviceArray();
  }
  std::vector<DeviceArray> results;
  for (int s : p.result_slots) results.push_back(slots[s]);
  return results;
}

int host_steps(const Program& program) {
  return program.host_steps;
}

const std::vector<std::shared_ptr<const codegen::FusionKernel>>& fusion_kernels(
    const Program& program) {
  return program.kernels;
}

void check_arguments(const Program& program, std::span<const HostTensor> args) {
  if (args.size() != program.arg_types.size())
    throw RuntimeError("program expects " + std::to_string(program.arg_types.size()) +
                       " arguments, got " + std::to_string(args.size()));
  for (size_t i = 0; i < args.size(); ++i) {
    const ir::Type& want = program.arg_types[i];
    if (want.is_token || args[i].dtype() != want.dtype || args[i].shape() != want.shape)
      throw RuntimeError("argument #" + std::to_string(i) + " is " + args[i].type_string() +
                         ", expected " + want.str());
  }
}

namespace {

class CudaExecutable final : public runtime::Executable {
 public:
  CudaExecutable(std::shared_ptr<const Program> p, std::shared_ptr<Device> dev)
      : program_(std::move(p)), dev_(std::move(dev)) {}
  std::vector<HostTensor> execute(std::span<const HostTensor> args,
                                  const runtime::ExecuteOptions& options) override {
    check_arguments(*program_, args);
    std::lock_guard<std::mutex> lock(dev_->mutex());
    dev_->activate();
    std::vector<DeviceArray> results = run_program(*program_, *dev_, dev_->upload(args), options);
    return dev_->download(results);
  }

 private:
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
  std::unique_ptr<runtime::Executable> compile(const ir::Module& module,
                                               std::string_view entry) const override {
    const ir::Function* fn = module.lookup(entry);
    if (!fn) throw Error("module has no function @" + std::string(entry));
    // Programs run on device 0; several devices run SPMD programs (compile_spmd).
    return std::make_unique<CudaExecutable>(compile_program(module, *fn, devices_.front()),
                                            devices_.front());
  }
  std::unique_ptr<runtime::SpmdExecutable> compile_spmd(const ir::Module& module,
                                                        std::vector<int> device_ids,
                                                        std::string_view entry) const override {
    return compile_cuda_spmd(devices_, module, std::move(device_ids), entry);
  }

 private:
  std::vector<DeviceInfo> info_;
  std::vector<std::shared_ptr<Device>> devices_;
};

}  // namespace

std::unique_ptr<runtime::Backend> make_cuda_backend(const Driver& driver) {
  return std::make_unique<CudaBackend>(driver);
}

}  // namespace cujax::cuda
