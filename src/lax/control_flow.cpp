// Control flow: cond/switch as stablehlo.case, while_loop and scan as stablehlo.while. The
// functions are traced into the op's regions with the active trace, so arrays they close over
// are captured values of the regions; eagerly, the op is traced alone into a program that is
// compiled and run (results then match jit's).
#include "cujax/control_flow.h"

#include "cujax/grad.h"
#include "cujax/jit.h"
#include "lax/util.h"

namespace cujax::lax::detail {

namespace {

using Staged = std::function<std::vector<Array>(const std::vector<Array>&)>;

// Runs fn(inputs) under the active trace; with none, traces it into a program and runs that.
std::vector<Array> staged(const std::string& name, const std::vector<Array>& inputs,
                          const Staged& fn) {
  if (trace::current_trace()) return fn(inputs);
  trace::TraceContext tc("jit_" + name);
  std::unique_ptr<ir::Module> module;
  {
    trace::TraceScope scope(&tc);
    std::vector<Array> args;
    for (const auto& a : inputs) args.push_back(tc.add_argument(a.aval()));
    module = tc.finish(fn(args));
  }
  auto program =
      trace::compile_module(std::move(module), "cpu", std::vector<bool>(inputs.size(), false));
  return trace::execute(*program, inputs);
}

bool same_type(const Array& a, const Array& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype();
}

std::string types_str(const std::vector<Array>& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + type_str(v[i]);
  return s + ")";
}

std::vector<ir::Value*> values_of(trace::TraceContext& tc, const std::vector<Array>& v) {
  std::vector<ir::Value*> out;
  for (const auto& a : v) out.push_back(tc.value_of(a));
  return out;
}

std::vector<ShapeDtype> avals_of(const std::vector<Array>& v) {
  std::vector<ShapeDtype> out;
  for (const auto& a : v) out.push_back(a.aval());
  return out;
}

std::vector<Array> slice(const std::vector<Array>& v, size_t begin, size_t end) {
  return std::vector<Array>(v.begin() + static_cast<long>(begin),
                            v.begin() + static_cast<long>(end));
}

// Appends results of `types` to op, emits it and returns its results as tracers.
std::vector<Array> emit(trace::TraceContext& tc, std::unique_ptr<ir::Operation> op,
                        const std::vector<ShapeDtype>& types) {
  for (const auto& t : types) op->add_result(trace::ir_type(t));
  ir::Operation* raw = tc.emit(std::move(op));
  std::vector<Array> out;
  for (const auto& r : raw->results) out.push_back(tc.tracer(r.get(), false));
  return out;
}

}  // namespace

Array cond_index(const Array& pred) {
  check_valid("cond", pred);
  if (pred.ndim() != 0 || !dtype_in(pred.dtype(), Kinds::Any))
    fail("cond", "pred must be a scalar boolean or number, got " + type_str(pred));
  return convert_element_type(convert_element_type(pred, DType::Bool), DType::I32);
}

Array switch_index(const Array& index, int64_t num_branches) {
  check_valid("switch", index);
  if (index.ndim() != 0 || !dtype_in(index.dtype(), Kinds::Int))
    fail("switch", "index must be a scalar integer, got " + type_str(index));
  const Array i = convert_element_type(index, DType::I32);
  return clamp(constant(0, DType::I32), i,
               constant(static_cast<double>(num_branches - 1), DType::I32));
}

std::vector<Array> case_flat(const std::string& what, const std::vector<std::string>& branch_names,
                             const Array& index, const std::vector<FlatFn>& branches,
                             const std::vector<Array>& operands) {
  std::vector<Array> inputs{index};
  inputs.insert(inputs.end(), operands.begin(), operands.end());
  return staged(what, inputs, [&](const std::vector<Array>& in) {
    trace::TraceContext& tc = *trace::current_trace();
    const std::vector<Array> ops = slice(in, 1, in.size());
    auto op = ir::make_op("stablehlo.case", {tc.value_of(in[0])}, {});
    std::vector<FlatOut> outs(branches.size());
    for (size_t b = 0; b < branches.size(); ++b) {
      ir::Block& block = op->add_region().add_block();
      tc.trace_region(block, {}, [&](const std::vector<Array>&) {
        outs[b] = branches[b](ops);
        for (const auto& a : outs[b].leaves) check_valid(what, a);
        return outs[b].leaves;
      });
    }
    for (size_t b = 1; b < branches.size(); ++b) {
      if (outs[b].structure != outs[0].structure)
        fail(what, branch_names[0] + " and " + branch_names[b] +
                       " must return the same tree structure, got " + outs[0].structure + " and " +
                       outs[b].structure);
      bool same = outs[b].leaves.size() == outs[0].leaves.size();
      for (size_t i = 0; same && i < outs[0].leaves.size(); ++i)
        same = same_type(outs[b].leaves[i], outs[0].leaves[i]);
      if (!same)
        fail(what, branch_names[0] + " and " + branch_names[b] +
                       " must return the same shapes and dtypes, got " + types_str(outs[0].leaves) +
                       " and " + types_str(outs[b].leaves));
    }
    std::vector<ShapeDtype> types;
    for (const auto& a : outs[0].leaves) types.push_back(ShapeDtype{a.shape(), a.dtype(), false});
    return emit(tc, std::move(op), types);
  });
}

std::vector<Array> while_flat(const FlatFn& cond, const FlatFn& body,
                              const std::vector<Array>& init, const std::string& structure) {
  for (const auto& a : init) check_valid("while_loop", a);
  return staged("while_loop", init, [&](const std::vector<Array>& in) {
    trace::TraceContext& tc = *trace::current_trace();
    auto op = ir::make_op("stablehlo.while", values_of(tc, in), {});
    const std::vector<ShapeDtype> avals = avals_of(in);
    tc.trace_region(op->add_region().add_block(), avals, [&](const std::vector<Array>& args) {
      FlatOut p = cond(args);
      const Array& r = p.leaves.at(0);
      if (!r.valid() || r.ndim() != 0 || r.dtype() != DType::Bool)
        fail("while_loop", "cond_fun must return a scalar bool, got " +
                               (r.valid() ? type_str(r) : std::string("an invalid Array")));
      return p.leaves;
    });
    tc.trace_region(op->add_region().add_block(), avals, [&](const std::vector<Array>& args) {
      FlatOut o = body(args);
      if (o.structure != structure)
        fail("while_loop", "body_fun must return the structure of init_val, " + structure +
                               ", got " + o.structure);
      bool same = o.leaves.size() == args.size();
      for (size_t i = 0; same && i < args.size(); ++i) same = same_type(o.leaves[i], args[i]);
      if (!same)
        fail("while_loop", "body_fun output and input must have identical types, got " +
                               types_str(o.leaves) + " and " + types_str(args));
      return o.leaves;
    });
    std::vector<ShapeDtype> types;
    for (const auto& a : avals) types.push_back(ShapeDtype{a.shape, a.dtype, false});
    return emit(tc, std::move(op), types);
  });
}

// Carried values: (i, carry..., xs..., ys...). xs ride along unchanged (explicit rather than
// captured, so that the VJP rule tells them from the values f closes over); ys start as
// zeros and step i writes row i (length - 1 - i in reverse).
std::vector<Array> scan_flat(const FlatFn& f, size_t num_carry, const std::vector<Array>& init,
                             const std::vector<Array>& xs, int64_t length, bool reverse) {
  for (const auto& a : init) check_valid("scan", a);
  std::vector<Array> inputs = init;
  inputs.insert(inputs.end(), xs.begin(), xs.end());
  return staged("scan", inputs, [&](const std::vector<Array>& in) {
    trace::TraceContext& tc = *trace::current_trace();
    const std::vector<Array> carry0 = slice(in, 0, num_carry);
    const std::vector<Array> xs0 = slice(in, num_carry, in.size());
    auto op = ir::make_op("stablehlo.while", {}, {});
    ir::Block& cond_block = op->add_region().add_block();
    ir::Block& body_block = op->add_region().add_block();
    std::vector<ShapeDtype> avals{ShapeDtype{{}, DType::I32, false}};
    for (const auto& a : in) avals.push_back(a.aval());
    std::vector<ShapeDtype> y_avals;
    ScanRecord rec{num_carry, xs0.size(), 0, length, reverse, {}, {}};
    tc.trace_region(body_block, avals, [&](const std::vector<Array>& args) {
      const Array& i = args[0];
      const Array t = reverse ? sub(constant(static_cast<double>(length - 1), DType::I32), i) : i;
      std::vector<Array> f_in = slice(args, 1, 1 + num_carry);
      for (size_t k = 0; k < xs0.size(); ++k) {
        const Array& x = args[1 + num_carry + k];
        Shape row(x.shape().begin() + 1, x.shape().end());
        f_in.push_back(reshape(dynamic_slice_in_dim(x, t, 1, 0), row));
      }
      FlatOut o = f(f_in);
      for (const auto& a : o.leaves) check_valid("scan", a);
      for (const auto& a : f_in) rec.f_in.push_back(tc.value_of(a));
      for (const auto& a : o.leaves) rec.f_out.push_back(tc.value_of(a));
      if (o.leaves.size() < num_carry)
        fail("scan", "f returned " + std::to_string(o.leaves.size()) + " leaves for a carry of " +
                         std::to_string(num_carry));
      const std::vector<Array> carry = slice(o.leaves, 0, num_carry);
      bool same = true;
      for (size_t k = 0; same && k < num_carry; ++k) same = same_type(carry[k], carry0[k]);
      if (!same)
        fail("scan", "the carry output of f must have the shapes and dtypes of the carry input, " +
                         types_str(carry0) + ", got " + types_str(carry));
      std::vector<Array> out{add(i, constant(1, DType::I32))};
      out.insert(out.end(), carry.begin(), carry.end());
      for (size_t k = 0; k < xs0.size(); ++k) out.push_back(args[1 + num_carry + k]);
      for (size_t k = num_carry; k < o.leaves.size(); ++k) {
        const Array& y = o.leaves[k];
        Shape stacked{length};
        stacked.insert(stacked.end(), y.shape().begin(), y.shape().end());
        y_avals.push_back(ShapeDtype{stacked, y.dtype(), false});
        const Array acc = tc.tracer(body_block.add_argument(trace::ir_type(y_avals.back())), false);
        Shape one{1};
        one.insert(one.end(), y.shape().begin(), y.shape().end());
        out.push_back(dynamic_update_slice_in_dim(acc, reshape(y, one), t, 0));
      }
      return out;
    });
    avals.insert(avals.end(), y_avals.begin(), y_avals.end());
    tc.trace_region(cond_block, avals, [&](const std::vector<Array>& args) {
      return std::vector<Array>{lt(args[0], constant(static_cast<double>(length), DType::I32))};
    });
    std::vector<Array> operands{constant(0, DType::I32)};
    operands.insert(operands.end(), in.begin(), in.end());
    for (const auto& y : y_avals) operands.push_back(full(y.shape, 0, y.dtype));
    op->operands = values_of(tc, operands);
    std::vector<ShapeDtype> types;
    for (const auto& a : avals) types.push_back(ShapeDtype{a.shape, a.dtype, false});
    ir::Operation* raw = op.get();
    const std::vector<Array> r = emit(tc, std::move(op), types);
    rec.num_ys = y_avals.size();
    trace::annotate(raw, rec);
    std::vector<Array> out = slice(r, 1, 1 + num_carry);
    for (size_t k = r.size() - y_avals.size(); k < r.size(); ++k) out.push_back(r[k]);
    return out;
  });
}

}  // namespace cujax::lax::detail
