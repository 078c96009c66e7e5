// bind(): records an op into the active trace, or runs it eagerly as a one-op program that is
// compiled once per signature and device and executed on that device's queue.
#include <mutex>
#include <unordered_map>

#include "cujax/devices.h"
#include "cujax/ir/printer.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/buffer.h"
#include "cujax/trace/trace.h"
#include "profiler/hooks.h"

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

std::shared_ptr<runtime::Executable> eager_executable(const ir::Module& module,
                                                      const Placement& where) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<runtime::Executable>> cache;
  const std::string key =
      where.platform + ":" + std::to_string(where.device) + "\n" + ir::print_module(module);
  std::lock_guard<std::mutex> lock(mu);
  auto& exe = cache[key];
  if (!exe) exe = runtime::get_backend(where.platform).compile(module, "main", where.device);
  return exe;
}

// An eager op touching at most this many bytes (and no matrix product) costs less than the
// hand-off to the device's worker thread.
constexpr int64_t kCheapBytes = int64_t{1} << 20;

std::string device_name(const std::string& platform, int device) {
  return platform + ":" + std::to_string(device);
}

std::vector<Array> run_eagerly(const OpSpec& spec, const std::vector<Array>& operands) {
  // Uncommitted operands run where the first operand is, which is the default device unless it
  // was moved there explicitly; an op without operands (iota, a creation function's constant)
  // runs on the default device.
  Placement fallback{default_backend(), 0, false};
  if (!operands.empty()) {
    fallback.platform = operands[0].impl()->platform;
    fallback.device = operands[0].impl()->device_id;
  }
  const Placement where = placement_of(operands, fallback, spec.name);
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
  std::vector<Array> placed;
  placed.reserve(operands.size());
  for (const auto& a : operands) placed.push_back(on_device(a, where.platform, where.device));
  int64_t bytes = 0;
  for (const auto& a : operands) bytes += a.size() * static_cast<int64_t>(size_of(a.dtype()));
  for (const auto& t : spec.result_types)
    bytes += t.num_elements() * static_cast<int64_t>(size_of(t.dtype));
  const bool cheap = bytes <= kCheapBytes && spec.name != "stablehlo.dot_general" &&
                     spec.name != "stablehlo.convolution";
  return dispatch(eager_executable(*module, where), placed, out_avals, spec.name, {},
                  where.committed, cheap);
}

// Runs the executable on the buffers once they have values; fills the outputs or their error.
void run(runtime::Executable& exe, const std::vector<runtime::BufferRef>& in_buffers,
         const std::vector<bool>& donated, const std::vector<runtime::BufferRef>& outputs,
         const std::string& what) {
  try {
    std::vector<runtime::DeviceBuffer> args;
    args.reserve(in_buffers.size());
    for (size_t i = 0; i < in_buffers.size(); ++i) {
      // A donated buffer that nothing else refers to is handed over, so that the executable
      // holds its only reference and may write into it; a shared one is only read.
      if (i < donated.size() && donated[i] && in_buffers[i].use_count() == 1)
        args.push_back(in_buffers[i]->take(
            "Array has been deleted: its buffer was donated to a jitted call (donate_argnums)"));
      else
        args.push_back(in_buffers[i]->wait());
    }
    std::vector<runtime::DeviceBuffer> values = exe.execute(std::move(args));
    for (size_t i = 0; i < outputs.size(); ++i) outputs[i]->set_value(std::move(values.at(i)));
  } catch (...) {
    for (const auto& o : outputs) o->set_error(std::current_exception(), what);
  }
}

}  // namespace

Placement placement_of(const std::vector<Array>& inputs, const Placement& fallback,
                       const std::string& what) {
  Placement where = fallback;
  const ArrayImpl* first = nullptr;
  for (const auto& a : inputs) {
    const ArrayImpl& impl = *a.impl();
    if (!impl.committed || impl.sharding) continue;
    if (!first) {
      first = &impl;
      where = {impl.platform, impl.device_id, true};
    } else if (impl.platform != first->platform || impl.device_id != first->device_id) {
      throw Error(what + ": received incompatible devices: an argument " + first->aval.str() +
                  " is committed to " + device_name(first->platform, first->device_id) +
                  " and another " + impl.aval.str() + " to " +
                  device_name(impl.platform, impl.device_id) +
                  "; device_put one of them to the other's device");
    }
  }
  return where;
}

Array on_device(const Array& x, const std::string& platform, int device) {
  const ArrayImpl& src = *x.impl();
  if (src.platform == platform && src.device_id == device) return x;
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = src.aval;
  impl->platform = platform;
  impl->device_id = device;
  impl->committed = src.committed;
  const runtime::BufferRef from = x.buffer();
  const std::string what = src.aval.str();
  if (from->has_value()) {
    impl->buffer = std::make_shared<runtime::Buffer>(
        runtime::transfer_between(from->wait(), platform, device, false, what));
  } else {
    impl->buffer = std::make_shared<runtime::Buffer>();
    runtime::device_queue(src.platform, src.device_id)
        .enqueue([from, to = impl->buffer, platform, device, what] {
          try {
            to->set_value(runtime::transfer_between(from->wait(), platform, device, false, what));
          } catch (...) {
            to->set_error(std::current_exception(), "copy to " + device_name(platform, device));
          }
        });
  }
  return Array(impl);
}

std::vector<Array> dispatch(std::shared_ptr<runtime::Executable> exe,
                            const std::vector<Array>& inputs,
                            const std::vector<ShapeDtype>& out_avals, const std::string& what,
                            const std::vector<bool>& donated, bool committed, bool cheap) {
  const std::string platform(exe->backend().platform());
  const int device = exe->device();
  const profiler::Span span = profiler::dispatch_span(what, platform, device);
  std::vector<runtime::BufferRef> in_buffers;
  in_buffers.reserve(inputs.size());
  bool inputs_have_values = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in_buffers.push_back(inputs[i].buffer());
    inputs_have_values = inputs_have_values && in_buffers.back()->has_value();
    if (i < donated.size() && donated[i]) {
      // The array is deleted now; its buffer lives on in this call alone (unless shared).
      inputs[i].impl()->buffer.reset();
      inputs[i].impl()->donated = true;
    }
  }
  std::vector<Array> results;
  std::vector<runtime::BufferRef> outputs;
  results.reserve(out_avals.size());
  outputs.reserve(out_avals.size());
  for (const auto& aval : out_avals) {
    auto impl = std::make_shared<ArrayImpl>();
    impl->aval = aval;
    impl->platform = platform;
    impl->device_id = device;
    impl->committed = committed;
    impl->buffer = std::make_shared<runtime::Buffer>();
    outputs.push_back(impl->buffer);
    results.push_back(Array(std::move(impl)));
  }
  runtime::DeviceQueue& queue = runtime::device_queue(platform, device);
  // With its inputs computed and nothing queued ahead, the call runs on this thread: the
  // launches of a cuda program (which return before the GPU finishes), or a cheap cpu program
  // (a hand-off to the worker and back costs more than it does). Otherwise the device's worker
  // runs it after what is queued.
  if (inputs_have_values && (cheap || platform != "cpu") &&
      queue.try_run_inline([&] { run(*exe, in_buffers, donated, outputs, what); }))
    return results;
  queue.enqueue([exe = std::move(exe), in_buffers = std::move(in_buffers), donated, outputs,
                 what]() mutable { run(*exe, in_buffers, donated, outputs, what); });
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
