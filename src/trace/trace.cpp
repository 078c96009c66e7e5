#include "cujax/trace/trace.h"

#include "cujax/runtime/backend.h"

#include "cujax/runtime/buffer.h"

namespace cujax::trace {

namespace {
thread_local std::vector<TraceContext*> trace_stack;
}

ir::Type ir_type(const ShapeDtype& aval) {
  return ir::Type::tensor(aval.shape, aval.dtype);
}

TraceContext::TraceContext(std::string module_name) : module_(std::make_unique<ir::Module>()) {
  module_->name = std::move(module_name);
  module_->attributes.push_back(
      {"mhlo.num_partitions", ir::Attribute::integer_attr(1, DType::I32)});
  module_->attributes.push_back({"mhlo.num_replicas", ir::Attribute::integer_attr(1, DType::I32)});
  function_ = &module_->add_function("main");
  function_->visibility = "public";
  blocks_.push_back(&function_->entry());
}

Array TraceContext::add_argument(const ShapeDtype& aval, const std::string& loc) {
  ir::Value* v = function_->entry().add_argument(ir_type(aval));
  if (!loc.empty()) v->loc = "loc(\"" + loc + "\")";  // as JAX names arguments: loc("x")
  function_->arg_attrs.emplace_back();
  return tracer(v, aval.weak_type);
}

Array TraceContext::tracer(ir::Value* value, bool weak_type) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = ShapeDtype{value->type.shape, value->type.dtype, weak_type};
  impl->trace = this;
  impl->value = value;
  return Array(impl);
}

ir::Operation* TraceContext::emit(std::unique_ptr<ir::Operation> op) {
  return current_block().push_back(std::move(op));
}

ir::Value* TraceContext::value_of(const Array& a) {
  if (!a.valid()) throw Error("an uninitialized Array was used in a traced op");
  const ArrayImpl* impl = a.impl().get();
  if (impl->trace == this) return impl->value;
  if (impl->trace != nullptr)
    throw Error(
        "a tracer from another trace was used here: an array traced inside one jit/grad "
        "escaped into another (for example through a global or a captured variable); pass it "
        "as an argument instead");
  auto it = constants_.find(impl);
  if (it != constants_.end()) return it->second;
  // Constants go into the entry block so that they dominate every use, regions included.
  auto op = ir::make_op("stablehlo.constant", {}, {ir_type(impl->aval)});
  // An array closed over by the trace becomes a constant of the program: from its host value
  // when it was made from one, else an implicit device-to-host transfer, once per trace.
  op->set_attr("value", ir::Attribute::dense_elements(
                            impl->host_value ? *impl->host_value
                                             : runtime::transfer_to_host(
                                                   a.buffer()->wait(), false,
                                                   impl->aval.str() + " closed over by a trace")));
  ir::Block& entry = function_->entry();
  op->parent = &entry;
  auto pos = entry.ops.begin();
  while (pos != entry.ops.end() && (*pos)->name == "stablehlo.constant") ++pos;
  ir::Value* v = entry.ops.insert(pos, std::move(op))->get()->result(0);
  constants_[impl] = v;
  kept_alive_.push_back(a.impl());
  return v;
}

void TraceContext::trace_region(
    ir::Block& block, const std::vector<ShapeDtype>& arg_avals,
    const std::function<std::vector<Array>(const std::vector<Array>&)>& body) {
  std::vector<Array> args;
  for (const auto& aval : arg_avals)
    args.push_back(tracer(block.add_argument(ir_type(aval)), aval.weak_type));
  blocks_.push_back(&block);
  std::vector<Array> results;
  try {
    results = body(args);
  } catch (...) {
    blocks_.pop_back();
    throw;
  }
  std::vector<ir::Value*> values;
  for (const auto& r : results) values.push_back(value_of(r));
  blocks_.pop_back();
  block.push_back(ir::make_op("stablehlo.return", values, {}));
}

std::unique_ptr<ir::Module> TraceContext::finish(const std::vector<Array>& outputs) {
  std::vector<ir::Value*> values;
  for (const auto& o : outputs) values.push_back(value_of(o));
  function_->result_types.clear();
  function_->result_attrs.clear();
  for (size_t i = 0; i < values.size(); ++i) {
    function_->result_types.push_back(values[i]->type);
    const std::string info = values.size() == 1 ? "result" : "result[" + std::to_string(i) + "]";
    function_->result_attrs.push_back({{"jax.result_info", ir::Attribute::string_attr(info)}});
  }
  function_->entry().push_back(ir::make_op("func.return", values, {}));
  return std::move(module_);
}

TraceContext* current_trace() {
  return trace_stack.empty() ? nullptr : trace_stack.back();
}

TraceScope::TraceScope(TraceContext* ctx) {
  trace_stack.push_back(ctx);
}
TraceScope::~TraceScope() {
  trace_stack.pop_back();
}

Array with_weak_type(const Array& a, bool weak) {
  if (a.weak_type() == weak) return a;
  auto impl = std::make_shared<ArrayImpl>(*a.impl());
  impl->aval.weak_type = weak;
  return Array(impl);
}

}  // namespace cujax::trace
