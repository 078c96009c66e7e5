// bind(): records an op into the active trace, or runs it eagerly as a one-op program that is
// compiled once per signature and executed on the device's queue.
#include <mutex>
#include <unordered_map>

#include "cujax/ir/printer.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/buffer.h"
#include "cujax/trace/trace.h"

namespace cujax::trace {

namespace {

std::vector<Array> record(TraceContext& tc, const OpSpec& spec,
                          const std::vector<Array>& operands) {
  std::vector<ir::Value*> values;
  values.reserve(operands.size());
  for (const auto& a : operands) values.push_back(tc.value_of(a));
  auto op = ir::make_op(spec.name, values, spec.result_types);
  op->attributes = spec.attributes;
  ir::Operation* raw = op.get();
  for (const auto& build : spec.regions) {
    ir::Region& region = raw->add_region();
    build(tc, region.add_block());
  }
  tc.emit(std::move(op));
  std::vector<Array> results;
  for (const auto& r : raw->results) results.push_back(tc.tracer(r.get(), false));
  return results;
}

std::shared_ptr<runtime::Executable> eager_executable(const ir::Module& module) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<runtime::Executable>> cache;
  const std::string key = ir::print_module(module);
  std::lock_guard<std::mutex> lock(mu);
  auto& exe = cache[key];
  if (!exe) exe = runtime::get_backend("cpu").compile(module, "main");
  return exe;
}

std::vector<Array> run_eagerly(const OpSpec& spec, const std::vector<Array>& operands) {
  TraceContext tc("jit_" + spec.name.substr(spec.name.find('.') + 1));
  std::unique_ptr<ir::Module> module;
  {
    TraceScope scope(&tc);
    std::vector<Array> args;
    for (const auto& a : operands) args.push_back(tc.add_argument(a.aval()));
    module = tc.finish(record(tc, spec, args));
  }
  std::vector<ShapeDtype> out_avals;
  for (const auto& t : spec.result_types) out_avals.push_back(ShapeDtype{t.shape, t.dtype, false});
  return dispatch(eager_executable(*module), operands, out_avals, spec.name);
}

}  // namespace

std::vector<Array> dispatch(std::shared_ptr<runtime::Executable> exe,
                            const std::vector<Array>& inputs,
                            const std::vector<ShapeDtype>& out_avals, const std::string& what) {
  std::vector<std::shared_ptr<runtime::Buffer>> in_buffers;
  in_buffers.reserve(inputs.size());
  for (const auto& a : inputs) in_buffers.push_back(a.buffer());
  std::vector<Array> results;
  std::vector<std::shared_ptr<runtime::Buffer>> outputs;
  results.reserve(out_avals.size());
  outputs.reserve(out_avals.size());
  for (const auto& aval : out_avals) {
    auto impl = std::make_shared<ArrayImpl>();
    impl->aval = aval;
    impl->buffer = std::make_shared<runtime::Buffer>();
    outputs.push_back(impl->buffer);
    results.push_back(Array(std::move(impl)));
  }
  runtime::device_queue("cpu", 0).enqueue(
      [exe = std::move(exe), in_buffers = std::move(in_buffers), outputs, what] {
        try {
          std::vector<HostTensor> args;
          args.reserve(in_buffers.size());
          for (const auto& b : in_buffers) args.push_back(b->wait());
          std::vector<HostTensor> values = exe->execute(args);
          for (size_t i = 0; i < outputs.size(); ++i)
            outputs[i]->set_value(std::move(values.at(i)));
        } catch (...) {
          for (const auto& o : outputs) o->set_error(std::current_exception(), what);
        }
      });
  return results;
}

std::vector<Array> bind(const OpSpec& spec, const std::vector<Array>& operands) {
  if (TraceContext* tc = current_trace()) return record(*tc, spec, operands);
  for (const auto& a : operands)
    if (a.is_tracer())
      throw Error(spec.name +
                  ": a tracer was used outside of its trace (it escaped a jit or grad, for "
                  "example through a global); return it from the traced function instead");
  return run_eagerly(spec, operands);
}

Array bind1(const OpSpec& spec, const std::vector<Array>& operands) {
  auto r = bind(spec, operands);
  if (r.size() != 1)
    throw Error(spec.name + ": expected one result, got " + std::to_string(r.size()));
  return r[0];
}

}  // namespace cujax::trace
