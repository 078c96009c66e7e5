// VJP rules of control flow. The rules replay the recorded regions (as JAX differentiates the
// jaxprs of cond and scan) rather than call the user's functions again, whose closures may be
// gone by the time the backward walk runs:
//   case:  a case on the same index whose branch b is the VJP of branch b, giving the
//          cotangents of every captured value (zeros where a branch does not use it);
//   while: only whiles recorded by scan (and so fori_loop with static bounds) have a static
//          trip count. A forward scan stacks the carry entering each step, then a scan in the
//          opposite direction runs the VJP of each step on its stored carry, carrying the carry's
//          cotangent and summing the cotangents of the captured values.
// Both build their results with lax.cond/lax.scan's lowering, so they are differentiable again.
#include "cujax/control_flow.h"
#include "trace/replay.h"
#include "trace/vjp_rules.h"

namespace cujax::trace::vjp {

using lax::detail::FlatFn;
using lax::detail::FlatOut;
using lax::detail::ScanRecord;

namespace {

template <class Record>
const Record* record_of(const ir::Operation& op) {
  const std::any* a = annotation(&op);
  return a ? std::any_cast<Record>(a) : nullptr;
}

std::vector<Array> range(const std::vector<Array>& v, size_t begin, size_t n) {
  return std::vector<Array>(v.begin() + static_cast<long>(begin),
                            v.begin() + static_cast<long>(begin + n));
}

// The float and complex values among operands[first...] whose cotangent is wanted.
std::vector<size_t> wanted(const VjpArgs& a, size_t first) {
  std::vector<size_t> out;
  for (size_t k = first; k < a.operands.size(); ++k)
    if (a.needed[k] && (is_float(a.operands[k].dtype()) || is_complex(a.operands[k].dtype())))
      out.push_back(k);
  return out;
}

}  // namespace

void register_control_rules(Rules& r) {
  // Operands: (index, captured values...).
  r["stablehlo.case"] = [](const VjpArgs& a) -> Cts {
    const std::vector<size_t> caps = wanted(a, 1);
    std::vector<Array> inputs;
    for (size_t k : caps) inputs.push_back(a.operands[k]);
    std::vector<FlatFn> branches;
    for (const auto& region : a.op.regions)
      branches.push_back(
          [block = &region->front(), inputs, cts = a.cts](const std::vector<Array>&) {
            const Mark m = mark();
            ValueEnv env;
            const std::vector<Array> outs = replay(*block, env);
            return FlatOut{backward(ops_since(m), inputs, outs, cts), ""};
          });
    std::vector<std::string> names;
    for (size_t b = 0; b < branches.size(); ++b) names.push_back("branch " + std::to_string(b));
    const std::vector<Array> g = lax::detail::case_flat("cond", names, a.operands[0], branches, {});
    Cts out(a.operands.size());
    for (size_t j = 0; j < caps.size(); ++j) out[caps[j]] = g[j];
    return out;
  };

  // Operands of a scan's while: (i, carry..., xs..., ys..., captured values...).
  r["stablehlo.while"] = [](const VjpArgs& a) -> Cts {
    const ScanRecord* rec = record_of<ScanRecord>(a.op);
    if (!rec)
      throw Error(
          "Reverse-mode differentiation does not work for lax.while_loop or lax.fori_loop with "
          "dynamic start/stop values. Try using lax.scan, or using fori_loop with static "
          "start/stop.");
    const size_t nc = rec->num_carry, nx = rec->num_xs, ny = rec->num_ys;
    const std::vector<size_t> caps = wanted(a, 1 + nc + nx + ny);
    std::vector<Array> cap_values;
    for (size_t k : caps) cap_values.push_back(a.operands[k]);
    const std::vector<Array> init = range(a.operands, 1, nc);
    const std::vector<Array> xs = range(a.operands, 1 + nc, nx);

    // f replayed from the body: (carry..., x...) -> (carry..., y...).
    const FlatFn f = [rec = *rec,
                      body = &a.op.regions.at(1)->front()](const std::vector<Array>& v) {
      ValueEnv env;
      for (size_t k = 0; k < v.size(); ++k) env[rec.f_in.at(k)] = v[k];
      replay(*body, env);
      FlatOut o;
      for (const ir::Value* y : rec.f_out) o.leaves.push_back(replayed(env, y));
      return o;
    };
    // The carry entering each step, stacked.
    const FlatFn stack_step = [f, nc](const std::vector<Array>& v) {
      FlatOut o = f(v);
      std::vector<Array> out = range(o.leaves, 0, nc);
      out.insert(out.end(), v.begin(), v.begin() + static_cast<long>(nc));
      return FlatOut{out, ""};
    };
    const std::vector<Array> stacked =
        lax::detail::scan_flat(stack_step, nc, init, xs, rec->length, rec->reverse);
    const std::vector<Array> carries = range(stacked, nc, nc);

    // Backwards: carry (ct of the carry..., summed cts of the captures...), xs (stored carry...,
    // x..., ct of y...), y: the ct of x.
    const size_t np = caps.size();
    const FlatFn back_step = [f, nc, nx, ny, np, cap_values](const std::vector<Array>& v) {
      const std::vector<Array> ct_c = range(v, 0, nc);
      const std::vector<Array> acc = range(v, nc, np);
      std::vector<Array> inputs, f_in;
      for (size_t k = 0; k < nc + nx; ++k) {
        f_in.push_back(fresh(v[nc + np + k]));
        inputs.push_back(f_in.back());
      }
      inputs.insert(inputs.end(), cap_values.begin(), cap_values.end());
      const Mark m = mark();
      const FlatOut o = f(f_in);
      std::vector<Array> cts = ct_c;
      for (size_t k = 0; k < ny; ++k) cts.push_back(v[nc + np + nc + nx + k]);
      const std::vector<Array> g = backward(ops_since(m), inputs, o.leaves, cts);
      std::vector<Array> out = range(g, 0, nc);
      for (size_t k = 0; k < np; ++k) out.push_back(lax::add(acc[k], g[nc + nx + k]));
      for (size_t k = 0; k < nx; ++k) out.push_back(g[nc + k]);
      return FlatOut{out, ""};
    };
    std::vector<Array> back_init = range(a.cts, 1, nc);
    for (const auto& c : cap_values) back_init.push_back(zeros_like(c));
    std::vector<Array> back_xs = carries;
    back_xs.insert(back_xs.end(), xs.begin(), xs.end());
    for (size_t k = 0; k < ny; ++k) back_xs.push_back(a.cts[1 + nc + nx + k]);
    const std::vector<Array> g =
        lax::detail::scan_flat(back_step, nc + np, back_init, back_xs, rec->length, !rec->reverse);

    Cts out(a.operands.size());
    for (size_t k = 0; k < nc; ++k) out[1 + k] = g[k];
    for (size_t k = 0; k < nx; ++k) out[1 + nc + k] = lax::add(g[nc + np + k], a.cts[1 + nc + k]);
    for (size_t j = 0; j < np; ++j) out[caps[j]] = g[nc + j];
    return out;
  };
}

}  // namespace cujax::trace::vjp
