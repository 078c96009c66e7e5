// Ops that structure a program rather than compute: constants, calls, loops, branches, the
// and the conformance checks.
#include <cstring>
#include <iostream>
#include <sstream>

#include "backends/cpu/kernels.h"
#include "backends/cpu/linalg_kernels.h"
#include "compiler/sdpa_call.h"
#include "cujax/runtime/checks.h"

namespace cujax::cpu {

// The reference kernels of cuDNN attention's custom calls (attention_kernels.cpp).
Kernel sdpa_kernel(const ir::Operation& op, Compiler& cc);

namespace {

Kernel constant_kernel(const ir::Operation& op, Compiler&) {
  const ir::Attribute* value = op.attr("value");
  if (!value || value->kind != ir::Attribute::Kind::DenseElements)
    unsupported(op, "needs a dense `value` attribute");
  HostTensor t = value->tensor;
  return [t](std::span<const HostTensor>, ExecContext&) { return std::vector<HostTensor>{t}; };
}

Kernel call_kernel(const ir::Operation& op, Compiler& cc) {
  const ir::Attribute* callee = op.attr("callee");
  if (!callee || callee->kind != ir::Attribute::Kind::Symbol) unsupported(op, "needs a callee");
  const ir::Function* fn = cc.module().lookup(callee->text);
  if (!fn) unsupported(op, "calls undefined function @" + callee->text);
  auto program = cc.compile_function(*fn);
  return
      [program](std::span<const HostTensor> in, ExecContext& ctx) { return program->run(in, ctx); };
}

Kernel while_kernel(const ir::Operation& op, Compiler& cc) {
  if (op.regions.size() != 2) unsupported(op, "needs cond and body regions");
  const auto captures = captured_values(op);
  auto cond = cc.compile_region(*op.regions[0], captures);
  auto body = cc.compile_region(*op.regions[1], captures);
  const size_t n = op.operands.size();
  return [cond, body, n](std::span<const HostTensor> in, ExecContext& ctx) {
    std::vector<HostTensor> state(in.begin(), in.begin() + n);
    const auto caps = in.subspan(n);
    for (;;) {
      const std::vector<HostTensor> p = cond->run(state, ctx, caps);
      if (!*p.at(0).data_as<bool>()) break;
      state = body->run(std::move(state), ctx, caps);  // loop-carried values stay unique
    }
    return state;
  };
}

// Out-of-range indices pick the last branch, as the spec says.
Kernel case_kernel(const ir::Operation& op, Compiler& cc) {
  const auto captures = captured_values(op);
  std::vector<std::shared_ptr<const Program>> branches;
  for (const auto& r : op.regions) branches.push_back(cc.compile_region(*r, captures));
  if (branches.empty()) unsupported(op, "needs at least one branch");
  const size_t n = op.operands.size();
  return [branches, n](std::span<const HostTensor> in, ExecContext& ctx) {
    const int64_t index = *in[0].data_as<int32_t>();
    const size_t b =
        (index < 0 || index >= static_cast<int64_t>(branches.size())) ? branches.size() - 1 : index;
    return branches[b]->run(std::vector<HostTensor>{}, ctx, in.subspan(n));
  };
}

// Hands a check's outcome to ExecuteOptions::on_check, or throws when nobody listens.
void report_check(runtime::CheckResult result, const std::string& where, ExecContext& ctx) {
  if (ctx.options && ctx.options->on_check) {
    ctx.options->on_check(result);
  } else if (!result.passed) {
    throw RuntimeError(where + ": " + result.name + " failed: " + result.message);
  }
}

// The interpreter suite's check ops: check.expect_eq/almost_eq/close between two operands, and
// check.expect_eq_const/almost_eq_const against their `value` literal.
Kernel check_op_kernel(const ir::Operation& op, Compiler&) {
  const auto kind = runtime::check_kind_from_name(op.name);
  if (!kind) unsupported(op, "is not a known check");
  const ir::Attribute* value = op.attr("value");
  const bool is_const = op.name.ends_with("_const");
  if (is_const && (!value || value->kind != ir::Attribute::Kind::DenseElements))
    unsupported(op, "needs a dense expected value");
  if (op.operands.size() != (is_const ? 1u : 2u))
    unsupported(op, "takes " + std::string(is_const ? "one operand" : "two operands"));
  const ir::Attribute* tol = op.attr("tolerance");
  const double tolerance = tol ? tol->floating : 1e-4;
  const std::optional<HostTensor> expected =
      is_const ? std::optional<HostTensor>(value->tensor) : std::nullopt;
  return [kind = *kind, name = op.name, where = op.where(), expected, tolerance](
             std::span<const HostTensor> in, ExecContext& ctx) {
    runtime::CheckResult result{name, true, ""};
    if (auto why = runtime::check_values(kind, in[0], expected ? *expected : in[1], tolerance)) {
      result.passed = false;
      result.message = *why;
    }
    report_check(std::move(result), where, ctx);
    return std::vector<HostTensor>{};
  };
}

// interpreter.probe passes its operand through and keeps a copy under its probe_id;
// check.expect_serialized_eq compares a value with the copy the probe kept at iteration `iter`.
Kernel probe_kernel(const ir::Operation& op, Compiler&) {
  const ir::Attribute* id = op.attr("probe_id");
  if (!id || id->kind != ir::Attribute::Kind::String) unsupported(op, "needs a probe_id");
  return [id = id->text](std::span<const HostTensor> in, ExecContext& ctx) {
    ctx.probes[id].push_back(in[0]);
    return std::vector<HostTensor>{in[0]};
  };
}

Kernel serialized_eq_kernel(const ir::Operation& op, Compiler&) {
  const ir::Attribute* id = op.attr("probe_id");
  if (!id || id->kind != ir::Attribute::Kind::String) unsupported(op, "needs a probe_id");
  const ir::Attribute* iter = op.attr("iter");
  const int64_t n = iter ? iter->integer : 0;
  return [id = id->text, n, name = op.name, where = op.where()](std::span<const HostTensor> in,
                                                                ExecContext& ctx) {
    runtime::CheckResult result{name, true, ""};
    const auto it = ctx.probes.find(id);
    if (it == ctx.probes.end() || n < 0 || n >= static_cast<int64_t>(it->second.size())) {
      result.passed = false;
      result.message = "probe \"" + id + "\" recorded no value at iteration " + std::to_string(n);
    } else if (auto why = runtime::check_values(runtime::CheckKind::ExpectEq, in[0],
                                                it->second[static_cast<size_t>(n)])) {
      result.passed = false;
      result.message = *why;
    }
    report_check(std::move(result), where, ctx);
    return std::vector<HostTensor>{};
  };
}

Kernel custom_call_kernel(const ir::Operation& op, Compiler& cc) {
  if (!compiler::sdpa_target(op).empty()) return sdpa_kernel(op, cc);
  const ir::Attribute* target = op.attr("call_target_name");
  const std::string name = target ? target->text : "";
  if (auto linalg = linalg_custom_call_kernel(op)) return *linalg;
  const auto kind = runtime::check_kind_from_name(name);
  if (!kind) unsupported(op, "custom call target '" + name + "' is not known to the cpu backend");
  if (op.operands.size() != 2) unsupported(op, name + " takes two operands");
  const std::string where = op.where();
  return [kind = *kind, name, where](std::span<const HostTensor> in, ExecContext& ctx) {
    runtime::CheckResult result{name, true, ""};
    if (auto why = runtime::check_values(kind, in[0], in[1])) {
      result.passed = false;
      result.message = *why;
    }
    report_check(std::move(result), where, ctx);
    return std::vector<HostTensor>{};
  };
}

Kernel identity_kernel(const ir::Operation& op, Compiler&) {
  const size_t n = op.operands.size();
  return [n](std::span<const HostTensor> in, ExecContext&) {
    return std::vector<HostTensor>(in.begin(), in.begin() + n);
  };
}

// stablehlo.if: the true branch when the predicate holds, else the false branch.
Kernel if_kernel(const ir::Operation& op, Compiler& cc) {
  if (op.regions.size() != 2) unsupported(op, "needs a true and a false branch");
  const auto captures = captured_values(op);
  auto on_true = cc.compile_region(*op.regions[0], captures);
  auto on_false = cc.compile_region(*op.regions[1], captures);
  return [on_true, on_false](std::span<const HostTensor> in, ExecContext& ctx) {
    const auto& branch = *in[0].data_as<bool>() ? on_true : on_false;
    return branch->run(std::vector<HostTensor>{}, ctx, in.subspan(1));
  };
}

// stablehlo.map: the computation applied to the operands' elements at each index (the spec
// allows only dimensions = [0, ..., rank-1], the identity).
Kernel map_kernel(const ir::Operation& op, Compiler& cc) {
  if (op.regions.size() != 1 || op.num_results() != 1) unsupported(op, "needs one computation");
  const ir::Type& rt = op.result()->type;
  if (rt.is_token) unsupported(op, "its result must be a tensor");
  const std::vector<int64_t> dims = op.ints("dimensions");
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != static_cast<int64_t>(i) || dims.size() != rt.shape.size())
      unsupported(op, "dimensions must be [0, ..., rank - 1]");
  const auto captures = captured_values(op);
  auto body = cc.compile_region(*op.regions[0], captures);
  const size_t n = op.operands.size();
  const DType dtype = rt.dtype;
  const Shape shape = rt.shape;
  return [body, n, dtype, shape](std::span<const HostTensor> in, ExecContext& ctx) {
    HostTensor out = HostTensor::uninitialized(dtype, shape);
    const size_t out_bytes = size_of(dtype);
    for (int64_t e = 0; e < out.size(); ++e) {
      std::vector<HostTensor> scalars;
      for (size_t k = 0; k < n; ++k) {
        const size_t b = size_of(in[k].dtype());
        const auto* src = static_cast<const std::byte*>(in[k].data()) + e * b;
        scalars.push_back(HostTensor::from_bytes(in[k].dtype(), {}, {src, b}));
      }
      const std::vector<HostTensor> r = body->run(scalars, ctx, in.subspan(n));
      std::memcpy(static_cast<std::byte*>(out.data()) + e * out_bytes, r.at(0).data(), out_bytes);
    }
    return std::vector<HostTensor>{out};
  };
}

// A token: stablehlo.after_all's result, which orders side effects and holds no data. It is
// represented as a rank-0 f32 tensor, as Type::token() is.
Kernel after_all_kernel(const ir::Operation&, Compiler&) {
  return [](std::span<const HostTensor>, ExecContext&) {
    return std::vector<HostTensor>{HostTensor(DType::F32, {})};
  };
}

// "[[1, 2], [3, 4]]" of a tensor's elements, nested by its shape.
void print_elements(std::ostream& os, const HostTensor& t, size_t dim, int64_t& next) {
  if (dim == t.shape().size()) {
    visit_dtype(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T v = t.data_as<T>()[next++];
      if constexpr (std::is_same_v<T, bool>)
        os << (v ? "true" : "false");
      else if constexpr (std::is_integral_v<T>)
        os << +v;
      else if constexpr (requires { static_cast<double>(v); })
        os << static_cast<double>(v);
      else
        os << "?";
    });
    return;
  }
  os << '[';
  for (int64_t i = 0; i < t.shape()[dim]; ++i) {
    if (i) os << ", ";
    print_elements(os, t, dim + 1, next);
  }
  os << ']';
}

// interpreter.print: writes "%name = type {", the elements and "}" as the reference interpreter
// does (to ExecuteOptions::on_print, else stdout), and returns nothing.
Kernel print_kernel(const ir::Operation& op, Compiler&) {
  if (op.operands.size() != 1) unsupported(op, "takes one operand");
  const ir::Value* v = op.operands[0];
  const std::string head =
      (v->name_hint.empty() ? "" : "%" + v->name_hint + " = ") + v->type.str() + " {\n  ";
  return [head](std::span<const HostTensor> in, ExecContext& ctx) {
    std::ostringstream os;
    os << head;
    int64_t next = 0;
    print_elements(os, in[0], 0, next);
    os << "\n}\n";
    if (ctx.options && ctx.options->on_print) {
      ctx.options->on_print(os.str());
    } else {
      std::cout << os.str() << std::flush;
    }
    return std::vector<HostTensor>{};
  };
}

}  // namespace

void register_control_kernels(KernelRegistry& r) {
  r.add("stablehlo.constant", constant_kernel);
  r.add("func.call", call_kernel);
  r.add("stablehlo.while", while_kernel);
  r.add("stablehlo.case", case_kernel);
  r.add("stablehlo.if", if_kernel);
  r.add("stablehlo.map", map_kernel);
  r.add("stablehlo.after_all", after_all_kernel);
  r.add("interpreter.print", print_kernel);
  r.add("stablehlo.custom_call", custom_call_kernel);
  r.add("stablehlo.optimization_barrier", identity_kernel);
  for (const char* check : {"check.expect_eq", "check.expect_almost_eq", "check.expect_close",
                            "check.expect_eq_const", "check.expect_almost_eq_const"})
    r.add(check, check_op_kernel);
  r.add("interpreter.probe", probe_kernel);
  r.add("check.expect_serialized_eq", serialized_eq_kernel);
}

}  // namespace cujax::cpu
