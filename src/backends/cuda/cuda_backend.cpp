// The cuda backend's compiler and executable. A function body becomes a list of steps over
// numbered value slots holding DeviceArrays. Each op gets a device step when a kernel covers its
// types and attributes; otherwise a host step that downloads its operands, runs the CPU
// backend's kernel (which also covers regions, calls and check.* assertions) and uploads the
// results. Nothing here has run on a GPU yet: see docs/cuda.md.
#include "backends/cuda/cuda_backend.h"

#include <functional>
#include <map>
#include <unordered_map>

#include "backends/cpu/kernels.h"
#include "backends/cuda/cublaslt.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/program.h"

namespace cujax::cuda {

using DeviceKernel = std::function<std::vector<DeviceArray>(std::span<const DeviceArray>)>;

struct Step {
  DeviceKernel device;  // set for a device step
  cpu::Kernel host;     // set for a host step
  std::string where;
  std::vector<int> inputs, outputs, release;
};

struct Program {
  std::vector<Step> steps;
  std::vector<int> arg_slots, result_slots;
  int num_slots = 0;
  int host_steps = 0;
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

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size());
  if (!s.empty()) index::row_major_strides(s.data(), static_cast<int>(s.size()), st.data());
  return st;
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
  const std::vector<int64_t> out_strides = strides_of(rt.shape);
  if (name == "stablehlo.transpose") {
    if (op.operands.size() != 1) return {};
    const std::vector<int64_t> perm = op.ints("permutation");
    const std::vector<int64_t> in_strides = strides_of(shape_of(op.operands[0]));
    if (perm.size() != rt.shape.size()) return {};
    index::StridedCopy box;
    for (size_t i = 0; i < perm.size(); ++i)
      box.push(rt.shape[i], in_strides.at(perm[i]), out_strides[i]);
    return box_kernel(box);
  }
  if (name == "stablehlo.broadcast_in_dim") {
    if (op.operands.size() != 1) return {};
    const std::vector<int64_t> dims = op.ints("broadcast_dimensions");
    const Shape& in_shape = shape_of(op.operands[0]);
    const std::vector<int64_t> in_strides = strides_of(in_shape);
    if (dims.size() != in_shape.size()) return {};
    std::vector<int64_t> src(rt.shape.size(), 0);  // broadcast dimensions read stride 0
    for (size_t i = 0; i < dims.size(); ++i)
      if (in_shape[i] != 1) src.at(dims[i]) = in_strides[i];
    index::StridedCopy box;
    for (size_t i = 0; i < rt.shape.size(); ++i) box.push(rt.shape[i], src[i], out_strides[i]);
    return box_kernel(box);
  }
  if (name == "stablehlo.slice") {
    if (op.operands.size() != 1) return {};
    const std::vector<int64_t> start = op.ints("start_indices");
    const std::vector<int64_t> step = op.ints("strides");
    const std::vector<int64_t> in_strides = strides_of(shape_of(op.operands[0]));
    if (start.size() != rt.shape.size() || step.size() != rt.shape.size()) return {};
    index::StridedCopy box;
    for (size_t i = 0; i < rt.shape.size(); ++i) {
      box.push(rt.shape[i], step[i] * in_strides[i], out_strides[i]);
      box.src_offset += start[i] * in_strides[i];
    }
    return box_kernel(box);
  }
  if (name == "stablehlo.concatenate") {
    const int64_t dim = op.int_attr("dimension");
    std::vector<index::StridedCopy> boxes;
    int64_t at = 0;
    for (const ir::Value* v : op.operands) {
      const Shape& s = shape_of(v);
      if (v->type.dtype != rt.dtype || s.size() != rt.shape.size()) return {};
      const std::vector<int64_t> in_strides = strides_of(s);
      index::StridedCopy box;
      for (size_t i = 0; i < s.size(); ++i) box.push(s[i], in_strides[i], out_strides[i]);
      box.dst_offset = at * out_strides.at(dim);
      at += s.at(dim);
      boxes.push_back(box);
    }
    return [d, rt, boxes](std::span<const DeviceArray> in) {
      DeviceArray out = d->allocate(rt.dtype, rt.shape);
      for (size_t i = 0; i < boxes.size(); ++i)
        launch_strided_copy(size_of(rt.dtype), boxes[i], in[i].data.get(), out.data.get(),
                            d->stream());
      return one(std::move(out));
    };
  }
  if (name == "stablehlo.pad") {
    if (op.operands.size() != 2) return {};
    const std::vector<int64_t> lo = op.ints("edge_padding_low");
    const std::vector<int64_t> interior = op.ints("interior_padding");
    const Shape& s = shape_of(op.operands[0]);
    const std::vector<int64_t> in_strides = strides_of(s);
    if (lo.size() != s.size() || interior.size() != s.size()) return {};
    index::StridedCopy box;
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t first = 0, count = 0;
      index::pad_source_range(s[i], rt.shape[i], lo[i], interior[i], &first, &count);
      box.push(count, in_strides[i], (interior[i] + 1) * out_strides[i]);
      box.src_offset += first * in_strides[i];
      box.dst_offset += (lo[i] + first * (interior[i] + 1)) * out_strides[i];
    }
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
    // Transposes each operand to [batch..., free..., contracting...] / [batch..., contracting...,
    // free...] (a no-op copy is skipped), then runs one strided-batched product.
    auto order = [](const Shape& s, const std::vector<int64_t>& batch,
                    const std::vector<int64_t>& contract, bool contract_last) {
      std::vector<int64_t> free;
      for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
        bool used = false;
        for (int64_t b : batch) used |= b == i;
        for (int64_t c : contract) used |= c == i;
        if (!used) free.push_back(i);
      }
      std::vector<int64_t> perm = batch;
      const auto& first = contract_last ? free : contract;
      const auto& second = contract_last ? contract : free;
      perm.insert(perm.end(), first.begin(), first.end());
      perm.insert(perm.end(), second.begin(), second.end());
      return std::make_pair(perm, free);
    };
    auto [lperm, lfree] = order(lt.shape, lb, lc, true);
    auto [rperm, rfree] = order(rtype.shape, rb, rc, false);
    auto product = [](const Shape& s, const std::vector<int64_t>& dims) {
      int64_t p = 1;
      for (int64_t i : dims) p *= s.at(i);
      return p;
    };
    const int64_t batch = product(lt.shape, lb), m = product(lt.shape, lfree),
                  k = product(lt.shape, lc), n = product(rtype.shape, rfree);
    if (k != product(rtype.shape, rc) || batch * m * n != rt.num_elements()) return {};
    auto transpose_box = [](const Shape& s, const std::vector<int64_t>& perm) {
      std::optional<index::StridedCopy> box;
      bool identity = true;
      for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
      if (identity) return box;
      const std::vector<int64_t> in = strides_of(s);
      Shape ps;
      for (int64_t p : perm) ps.push_back(s[p]);
      const std::vector<int64_t> out = strides_of(ps);
      box.emplace();
      for (size_t i = 0; i < perm.size(); ++i) box->push(ps[i], in[perm[i]], out[i]);
      return box;
    };
    const auto lbox = transpose_box(lt.shape, lperm), rbox = transpose_box(rtype.shape, rperm);
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

std::shared_ptr<const Program> compile_program(const ir::Module& module, const ir::Function& fn,
                                               const std::shared_ptr<Device>& dev) {
  if (fn.body.blocks.size() != 1)
    throw UnsupportedError("@" + fn.name + ": functions with several blocks are not supported");
  const ir::Block& block = fn.body.front();
  auto program = std::make_shared<Program>();
  cpu::Compiler host_compiler(module);
  std::unordered_map<const ir::Value*, int> slot_of;
  auto new_slot = [&](const ir::Value* v) {
    slot_of[v] = program->num_slots;
    return program->num_slots++;
  };
  for (const auto& a : block.arguments) program->arg_slots.push_back(new_slot(a.get()));
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
  for (size_t i = 0; i < num_steps; ++i) {
    const ir::Operation& op = *block.ops[i];
    Step step;
    step.where = op.where();
    step.device = device_kernel(op, dev);
    std::vector<const ir::Value*> uses(op.operands.begin(), op.operands.end());
    if (!step.device) {
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
      last_use[step.inputs.back()] = i;
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

namespace {

class CudaExecutable final : public runtime::Executable {
 public:
  CudaExecutable(std::shared_ptr<const Program> p, std::shared_ptr<Device> dev)
      : program_(std::move(p)), dev_(std::move(dev)) {}
  std::vector<HostTensor> execute(std::span<const HostTensor> args,
                                  const runtime::ExecuteOptions& options) override {
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
    for (int i = 0; i < count; ++i) devices_.push_back(std::make_shared<Device>(i));
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
    // Programs run on device 0; sharding across devices is the partitioner's job.
    return std::make_unique<CudaExecutable>(compile_program(module, *fn, devices_.front()),
                                            devices_.front());
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
