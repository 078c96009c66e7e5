// The VJP and batching rules of cuDNN attention's custom calls (compiler/sdpa_call.h). The VJP
// of the forward is the backward call on the forward's stats; vmap folds the mapped dimension
// into the batch B. Of the other custom calls @Sharding (with_sharding_constraint) has a VJP,
// and lax.linalg's lapack_*_ffi calls have theirs and their batching (trace/linalg_rules.cpp).
#include "compiler/sdpa_call.h"
#include "trace/batching_rules.h"
#include "trace/linalg_rules.h"
#include "trace/vjp_rules.h"

namespace cujax::trace {

namespace {

ir::Type type_of(const Array& x) {
  return ir::Type::tensor(x.shape(), x.dtype());
}

// A custom call with `op`'s attributes except its target.
OpSpec call_like(const ir::Operation& op, std::string_view target,
                 std::vector<ir::Type> result_types) {
  OpSpec spec;
  spec.name = "stablehlo.custom_call";
  for (const auto& a : op.attributes)
    if (a.name != "call_target_name") spec.attributes.push_back(a);
  spec.attributes.push_back({"call_target_name", ir::Attribute::string_attr(std::string(target))});
  spec.result_types = std::move(result_types);
  return spec;
}

std::vector<std::optional<Array>> sdpa_vjp(const VjpArgs& a) {
  if (is_linalg_call(a.op)) return linalg_vjp(a);
  // with_sharding_constraint: the cotangent is constrained the same way (as JAX's transpose).
  if (custom_call_target(a.op) == "Sharding" && a.operands.size() == 1)
    return {trace::bind(call_like(a.op, "Sharding", {type_of(a.cts[0])}), {a.cts[0]})[0]};
  if (compiler::sdpa_target(a.op).empty())
    throw Error("grad of stablehlo.custom_call @" + custom_call_target(a.op) +
                " is not supported yet (it has no VJP rule)");
  const compiler::SdpaCall call = compiler::sdpa_call(a.op);
  if (call.backward)
    throw Error(
        "grad of cujax.cudnn_sdpa_bwd (a second derivative of cuDNN attention) is not supported; "
        "use nn.dot_product_attention with implementation='xla'");
  if (call.config.has_bias && a.needed[3])
    throw Error(
        "nn.dot_product_attention(implementation='cudnn'): the gradient with respect to the bias "
        "is not supported; use implementation='xla' or stop_gradient on the bias");
  Array out = a.results[0], stats;
  if (call.with_stats) {
    stats = a.results[1];
  } else {  // recorded outside a differentiated trace: run it again for the stats
    const std::vector<Array> r = trace::bind(
        call_like(
            a.op, compiler::kSdpaForward,
            {type_of(out), ir::Type::tensor({call.dims.B, call.dims.N, call.dims.T}, DType::F32)}),
        a.operands);
    out = r[0], stats = r[1];
  }
  std::vector<Array> in = a.operands;
  in.insert(in.end(), {out, stats, a.cts[0]});
  const std::vector<Array> g = trace::bind(
      call_like(a.op, compiler::kSdpaBackward,
                {type_of(a.operands[0]), type_of(a.operands[1]), type_of(a.operands[2])}),
      in);
  return {g[0], g[1], g[2]};
}

std::vector<Batched> sdpa_batch(const BatchArgs& a) {
  if (is_linalg_call(a.op)) return linalg_batch(a);
  if (compiler::sdpa_target(a.op).empty())
    throw Error("vmap of stablehlo.custom_call @" + custom_call_target(a.op) + " is not supported");
  const compiler::SdpaCall call = compiler::sdpa_call(a.op);
  const int64_t V = a.size, B = call.dims.B;
  std::vector<Array> in;
  for (size_t i = 0; i < a.operands.size(); ++i) {
    const bool is_bias = call.config.has_bias && i == 3;
    if (is_bias && !a.bdims[i] && a.operands[i].shape()[0] == 1) {
      in.push_back(a.operands[i]);  // broadcasts over the folded batch as it did over B
      continue;
    }
    Array x = batching::batch_at(a.operands[i], a.bdims[i], V, 0);
    Shape full = x.shape();
    if (is_bias && full[1] != B) {  // a bias shared by the batch, now one per mapped element
      full[1] = B;
      x = lax::broadcast_in_dim(x, full, {0, 1, 2, 3, 4});
    }
    Shape folded(full.begin() + 1, full.end());
    folded[0] *= V;
    in.push_back(lax::reshape(x, folded));
  }
  std::vector<ir::Type> types;
  for (const auto& r : a.op.results) {
    Shape s = r->type.shape;
    s[0] *= V;
    types.push_back(ir::Type::tensor(s, r->type.dtype));
  }
  std::vector<Batched> out;
  for (const Array& r : batching::rebind(a.op, in, types)) {
    Shape s = r.shape();
    s[0] /= V;
    s.insert(s.begin(), V);
    out.push_back({lax::reshape(r, s), 0});
  }
  return out;
}

}  // namespace

namespace vjp {
void register_custom_call_rules(Rules& r) {
  r["stablehlo.custom_call"] = sdpa_vjp;
}
}  // namespace vjp

namespace batching {
void register_custom_call_rules(Rules& r) {
  r["stablehlo.custom_call"] = sdpa_batch;
}
}  // namespace batching

}  // namespace cujax::trace
