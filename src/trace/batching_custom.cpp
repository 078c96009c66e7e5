// vmap of a custom_jvp or custom_vjp function recorded under grad: the batching walk meets its
// output markers and records the function again on the batched inputs, with its functions
// vmapped (JAX batches custom_jvp_call and custom_vjp_call the same way), so the rule still
// defines the derivative, per example.
#include "cujax/numpy.h"
#include "cujax/vmap.h"
#include "trace/autodiff_markers.h"
#include "trace/batching_rules.h"

namespace cujax::trace {

std::vector<Batched> batch_custom(const ir::Operation& marker,
                                  const std::function<Batched(ir::Value*)>& get, int64_t size) {
  TraceContext& tc = *current_trace();
  const CustomParts parts = *custom_parts(&marker);
  if (!parts.fun)
    throw Error(
        "vmap of a rematted function under grad is not supported yet; apply remat "
        "inside the vmapped function's callers, or vmap outside grad");
  for (const ir::Value* v : parts.closed_over)
    if (get(const_cast<ir::Value*>(v)).bdim)
      throw Error("vmap of a " + parts.what + " function that closes over a mapped " +
                  v->type.str() + " value: pass that value as an argument");
  // The inputs with their batch dimension in front (or unmapped).
  std::vector<Array> xs;
  std::vector<Axis> axes;
  std::vector<ShapeDtype> avals;  // per example
  for (const Array& in : parts.inputs) {
    const Batched b = get(tc.value_of(in));
    xs.push_back(b.bdim ? batching::batch_at(b.value, b.bdim, size, 0) : b.value);
    axes.push_back(b.bdim ? Axis(0) : not_mapped);
    avals.push_back(ShapeDtype{in.shape(), in.dtype()});
  }
  const MapAxes in_axes{leaf_axes(axes)};
  std::vector<Array> outs;
  if (parts.recall) {
    // remat: rematted again, of the vmapped function.
    const FlatFn f = parts.fun;
    outs =
        parts.recall([f, in_axes](const std::vector<Array>& a) { return vmap(f, in_axes)(a); }, xs);
  } else if (parts.jvp) {
    const FlatFn f = parts.fun;
    const FlatPairFn rule = parts.jvp;
    FlatFn vf = [f, in_axes](const std::vector<Array>& a) { return vmap(f, in_axes)(a); };
    FlatPairFn vrule = [rule, axes](const std::vector<Array>& p, const std::vector<Array>& t) {
      return vmap([rule](const std::vector<Array>& pp,
                         const std::vector<Array>& tt) { return rule(pp, tt); },
                  {leaf_axes(axes), leaf_axes(axes)})(p, t);
    };
    outs = custom_jvp_call(vf, vrule, xs);
  } else {
    const FlatFn f = parts.fun;
    const FlatFwd fwd = parts.fwd;
    const FlatBwd bwd = parts.bwd;
    FlatFn vf = [f, in_axes](const std::vector<Array>& a) { return vmap(f, in_axes)(a); };
    FlatFwd vfwd = [fwd, in_axes](const std::vector<Array>& a) { return vmap(fwd, in_axes)(a); };
    // Residuals and cotangents come batched in front; an unmapped input's cotangent is the sum
    // of the per-example ones.
    FlatBwd vbwd = [bwd, axes, avals](const std::vector<Array>& res,
                                      const std::vector<Array>& cts) {
      auto per_example = [bwd, avals](const std::vector<Array>& r, const std::vector<Array>& c) {
        std::vector<Array> g = bwd(r, c);
        for (size_t i = 0; i < g.size() && i < avals.size(); ++i)
          if (!g[i].valid()) g[i] = numpy::zeros(avals[i].shape, avals[i].dtype);
        return g;
      };
      std::vector<Array> g = vmap(per_example)(res, cts);
      for (size_t i = 0; i < g.size() && i < axes.size(); ++i)
        if (!axes[i]) g[i] = numpy::sum(g[i], 0);
      return g;
    };
    outs = custom_vjp_call(vf, vfwd, vbwd, xs);
  }
  std::vector<Batched> out;
  for (const Array& y : outs) out.push_back(Batched{y, 0});
  return out;
}

}  // namespace cujax::trace
