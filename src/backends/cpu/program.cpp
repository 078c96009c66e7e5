#include <algorithm>
#include <unordered_map>

#include "backends/common/slots.h"
#include "backends/cpu/fusion.h"
#include "backends/cpu/kernels.h"
#include "compiler/op_cost.h"
#include "profiler/hooks.h"

namespace cujax::cpu {

void unsupported(const ir::Operation& op, const std::string& message) {
  throw UnsupportedError(op.where() + ": " + message);
}

std::vector<HostTensor> Program::run(std::span<const HostTensor> args, ExecContext& ctx,
                                     std::span<const HostTensor> captures) const {
  return run(std::vector<HostTensor>(args.begin(), args.end()), ctx, captures);
}

std::vector<HostTensor> Program::run(std::vector<HostTensor>&& args, ExecContext& ctx,
                                     std::span<const HostTensor> captures) const {
  if (args.size() != arg_slots_.size() || captures.size() != capture_slots_.size())
    throw RuntimeError("program expects " + std::to_string(arg_slots_.size()) + " arguments and " +
                       std::to_string(capture_slots_.size()) + " captures, got " +
                       std::to_string(args.size()) + " and " + std::to_string(captures.size()));
  std::vector<HostTensor> slots(num_slots_);
  for (size_t i = 0; i < args.size(); ++i) slots[arg_slots_[i]] = std::move(args[i]);
  args.clear();
  for (size_t i = 0; i < captures.size(); ++i) slots[capture_slots_[i]] = captures[i];
  std::vector<HostTensor> inputs;
  const bool profiling = profiler::active();
  for (const Step& step : steps_) {
    const profiler::Span span =
        profiler::op_span(profiling, step.name, step.where, step.loc, step.flops, step.bytes);
    inputs.clear();
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      HostTensor& slot = slots[step.inputs[i]];
      inputs.push_back(step.move[i] ? std::move(slot) : slot);
    }
    std::vector<HostTensor> outputs;
    try {
      outputs = step.kernel(inputs, ctx);
    } catch (const UnsupportedError&) {
      throw;
    } catch (const Error& e) {
      const std::string what = e.what();
      if (what.rfind(step.where, 0) == 0) throw;
      throw RuntimeError(step.where + ": " + what);
    }
    inputs.clear();  // before the release: the last owner of a dead value frees it here
    if (outputs.size() != step.outputs.size())
      throw RuntimeError(step.where + ": kernel produced " + std::to_string(outputs.size()) +
                         " results, expected " + std::to_string(step.outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) slots[step.outputs[i]] = std::move(outputs[i]);
    for (int s : step.release) slots[s] = HostTensor();
  }
  std::vector<HostTensor> results;
  results.reserve(result_slots_.size());
  for (int s : result_slots_) results.push_back(slots[s]);
  return results;
}

namespace {
void collect_free_values(const ir::Region& region,
                         std::unordered_map<const ir::Value*, bool>& defined,
                         std::vector<const ir::Value*>& out,
                         std::unordered_map<const ir::Value*, bool>& seen) {
  for (const auto& block : region.blocks) {
    for (const auto& a : block->arguments) defined[a.get()] = true;
    for (const auto& op : block->ops) {
      for (const ir::Value* v : op->operands)
        if (!defined.count(v) && !seen.count(v)) {
          seen[v] = true;
          out.push_back(v);
        }
      for (const auto& r : op->regions) collect_free_values(*r, defined, out, seen);
      for (const auto& r : op->results) defined[r.get()] = true;
    }
  }
}
}  // namespace

std::vector<const ir::Value*> captured_values(const ir::Operation& op) {
  std::unordered_map<const ir::Value*, bool> defined, seen;
  std::vector<const ir::Value*> out;
  for (const auto& r : op.regions) collect_free_values(*r, defined, out, seen);
  return out;
}

Compiler::Compiler(const ir::Module& module) : module_(module), locations_(module.aliases) {
  num_replicas_ = static_cast<int>(module_int_attr(module, "mhlo.num_replicas").value_or(1));
  num_partitions_ = static_cast<int>(module_int_attr(module, "mhlo.num_partitions").value_or(1));
}

std::shared_ptr<const Program> Compiler::compile_block(const ir::Block& block,
                                                       std::span<const ir::Value* const> captures) {
  auto program = std::make_shared<Program>();
  std::unordered_map<const ir::Value*, int> slot_of;
  auto new_slot = [&](const ir::Value* v) {
    slot_of[v] = program->num_slots_;
    return program->num_slots_++;
  };
  for (const auto& a : block.arguments) program->arg_slots_.push_back(new_slot(a.get()));
  for (const ir::Value* v : captures) program->capture_slots_.push_back(new_slot(v));
  auto slot = [&](const ir::Operation& op, const ir::Value* v) {
    auto it = slot_of.find(v);
    if (it == slot_of.end())
      throw UnsupportedError(op.where() + ": uses a value that is not defined in its scope");
    return it->second;
  };
  const ir::Operation* terminator = block.terminator();
  const bool has_terminator =
      terminator && (terminator->name == "func.return" || terminator->name == "stablehlo.return");
  const size_t num_ops = block.ops.size() - (has_terminator ? 1 : 0);
  const FusionPlan fusion = fusion_enabled() ? plan_fusion(block, num_ops) : FusionPlan{};
  std::unordered_map<int, size_t> last_use;  // slot -> index of the last step reading it
  auto add_step = [&](Program::Step step, const ir::Operation& op,
                      std::span<const ir::Value* const> uses,
                      std::span<const ir::Value* const> results) {
    for (const ir::Value* v : uses) {
      step.inputs.push_back(slot(op, v));
      last_use[step.inputs.back()] = program->steps_.size();
    }
    for (const ir::Value* r : results) step.outputs.push_back(new_slot(r));
    program->steps_.push_back(std::move(step));
  };
  for (size_t i = 0; i < num_ops; ++i) {
    const ir::Operation& op = *block.ops[i];
    if (!fusion.step_at.empty() && fusion.step_at[i] >= 0) {
      const FusedStep& fused = fusion.steps[fusion.step_at[i]];
      Program::Step step;
      step.where = fused.where;
      step.name = "fusion";
      step.loc = source_location(op);
      step.kernel = fused.kernel;
      for (const ir::Operation* member : fused.ops) {
        const compiler::OpCost c = compiler::op_cost(*member);
        step.flops += c.flops + c.transcendentals;
      }
      for (const ir::Value* v : fused.inputs) step.bytes += compiler::value_bytes(*v);
      for (const ir::Value* v : fused.outputs) step.bytes += compiler::value_bytes(*v);
      add_step(std::move(step), op, fused.inputs, fused.outputs);
      continue;
    }
    if (!fusion.absorbed.empty() && fusion.absorbed[i]) continue;
    const KernelFactory* factory = kernel_registry().find(op.name);
    if (!factory) unsupported(op, "op is not supported by the cpu backend");
    Program::Step step;
    step.where = op.where();
    step.name = op.name;
    step.loc = source_location(op);
    const compiler::OpCost cost = compiler::op_cost(op);
    step.flops = cost.flops + cost.transcendentals;
    step.bytes = cost.bytes;
    std::vector<const ir::Value*> uses(op.operands.begin(), op.operands.end());
    if (!op.regions.empty())
      for (const ir::Value* v : captured_values(op)) uses.push_back(v);
    std::vector<const ir::Value*> results;
    for (const auto& r : op.results) results.push_back(r.get());
    step.kernel = (*factory)(op, *this);
    add_step(std::move(step), op, uses, results);
  }
  if (has_terminator)
    for (const ir::Value* v : terminator->operands)
      program->result_slots_.push_back(slot(*terminator, v));
  std::unordered_map<int, bool> is_result;
  for (int s : program->result_slots_) is_result[s] = true;
  for (auto [s, i] : last_use)
    if (!is_result.count(s)) program->steps_[i].release.push_back(s);
  // A value read for the last time, by one operand of its step, moves into that operand.
  for (Program::Step& step : program->steps_)
    step.move = slots::moves_on_last_use(step.inputs, step.release);
  return program;
}

std::shared_ptr<const Program> Compiler::compile_region(
    const ir::Region& region, std::span<const ir::Value* const> captures) {
  if (region.blocks.size() != 1)
    throw UnsupportedError("regions with " + std::to_string(region.blocks.size()) +
                           " blocks are not supported");
  return compile_block(region.front(), captures);
}

std::shared_ptr<const Program> Compiler::compile_function(const ir::Function& fn) {
  auto it = functions_.find(&fn);
  if (it != functions_.end()) return it->second;
  auto program = compile_region(fn.body);
  functions_[&fn] = program;
  return program;
}

HostTensor reuse_or_allocate(std::span<const HostTensor> in,
                             std::initializer_list<size_t> candidates, DType dtype,
                             const Shape& shape, const ExecContext& ctx) {
  auto fits = [&](size_t i) {
    return i < in.size() && in[i].is_unique() && in[i].dtype() == dtype &&
           in[i].size() == num_elements(shape);
  };
  for (size_t i : candidates)
    if (fits(i) && ctx.is_donated(in[i].data())) return in[i].reshaped(shape);
  for (size_t i : candidates)
    if (fits(i)) return in[i].reshaped(shape);
  return HostTensor::uninitialized(dtype, shape);
}

void KernelRegistry::add(std::string op_name, KernelFactory factory) {
  factories_[std::move(op_name)] = std::move(factory);
}

const KernelFactory* KernelRegistry::find(const std::string& op_name) const {
  auto it = factories_.find(op_name);
  return it == factories_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::op_names() const {
  std::vector<std::string> names;
  for (const auto& [name, f] : factories_) names.push_back(name);
  return names;
}

const KernelRegistry& kernel_registry() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_control_kernels(r);
    register_elementwise_kernels(r);
    register_shape_kernels(r);
    register_indexing_kernels(r);
    register_reduction_kernels(r);
    register_window_kernels(r);
    register_sort_kernels(r);
    register_linalg_kernels(r);
    register_random_kernels(r);
    register_collective_kernels(r);
    register_complex_kernels(r);
    register_narrow_kernels(r);
    return r;
  }();
  return registry;
}

std::optional<std::string> simple_binary_region(const ir::Region& region) {
  if (region.blocks.size() != 1) return std::nullopt;
  const ir::Block& b = region.front();
  if (b.arguments.size() != 2 || b.ops.size() != 2) return std::nullopt;
  const ir::Operation& op = *b.ops[0];
  const ir::Operation& ret = *b.ops[1];
  if (op.operands.size() != 2 || op.results.size() != 1 || ret.operands.size() != 1 ||
      ret.operands[0] != op.result(0) || !op.regions.empty() || !op.attributes.empty())
    return std::nullopt;
  const ir::Value* x = b.arguments[0].get();
  const ir::Value* y = b.arguments[1].get();
  const bool straight = op.operands[0] == x && op.operands[1] == y;
  const bool swapped = op.operands[0] == y && op.operands[1] == x;
  static const char* kCommutative[] = {
      "stablehlo.add", "stablehlo.multiply", "stablehlo.maximum", "stablehlo.minimum",
      "stablehlo.and", "stablehlo.or",       "stablehlo.xor"};
  if (straight) return op.name;
  if (swapped)
    for (const char* c : kCommutative)
      if (op.name == c) return op.name;
  return std::nullopt;
}

}  // namespace cujax::cpu
