// Automatic differentiation: grad, value_and_grad, vjp, jvp, stop_gradient, custom_vjp and
// custom_jvp, under JAX's names.
//
//   auto loss = [](const Params& p, const Array& x) { return jnp::sum(jnp::tanh(x * p.w)); };
//   Params g = cujax::grad(loss)(params, x);                   // d loss / d params
//   auto [gp, gx] = cujax::grad(loss, cujax::argnums<0, 1>)(params, x);
//   auto [[value, aux], g] = value_and_grad(f, argnums<0>, has_aux)(x);
//
// How it works (see docs/autodiff.md). Autodiff is a transformation of the traced program:
// grad(f)(x) makes sure a trace is active (with none, the whole gradient computation is
// jitted: traced once per signature, compiled and cached, as jit(grad(f)) would be), records
// f's ops into the current block, then walks them backwards calling each op's VJP rule (keyed
// by the StableHLO op name, written with the public lax ops). The gradient ops are ordinary
// recorded ops, so gradients compose with jit and can be differentiated again.
//
// argnums are template arguments (C++ types are static): argnums<1>, argnums<0, 2>. With one
// argnum the gradient has that argument's tree structure; with several it is a std::tuple.
// Gradients with respect to integer or bool leaves are zeros of their dtype (JAX's float0).
#pragma once

#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cujax/array.h"
#include "cujax/jit.h"
#include "cujax/trace/trace.h"
#include "cujax/tree.h"

namespace cujax {

template <int... I>
struct Argnums {};
template <int... I>
inline constexpr Argnums<I...> argnums{};
// value_and_grad(f, argnums<0>, has_aux): f returns std::pair<Array, Aux>.
struct HasAux {};
inline constexpr HasAux has_aux{};
// grad(f, argnums<...>, holomorphic): f'(z) of a holomorphic f of complex arguments with a
// complex scalar output (jax.grad's holomorphic=True). Without it, grad needs a real output
// and gives df/dx - i df/dy for each complex z = x + iy (JAX's convention, docs/complex.md).
struct Holomorphic {};
inline constexpr Holomorphic holomorphic{};
// custom_jvp / custom_vjp(f, nondiff_argnums<0>): arguments that are not differentiated.
template <int... N>
struct NondiffArgnums {};
template <int... N>
inline constexpr NondiffArgnums<N...> nondiff_argnums{};

// The identity, except that gradients do not flow through it (jax.lax.stop_gradient). Under a
// differentiated trace it records an identity op (a same-shape stablehlo.reshape) that the
// backward walk treats as a cut; elsewhere it returns x.
Array stop_gradient(const Array& x);

namespace trace {

// What a VJP rule sees: the op (for its attributes and regions), tracers of its operands and
// results, and the cotangents of its results (zeros where a result has none). For a case or
// while, `operands` continues with the values its regions capture from outside it (in order
// of first use), which are differentiated like operands.
struct VjpArgs {
  TraceContext& tc;
  const ir::Operation& op;
  std::vector<Array> operands;
  std::vector<Array> results;
  std::vector<Array> cts;
  std::vector<bool> needed;  // per operand: whether its cotangent is used
};
// Returns one optional cotangent per operand (missing entries and nullopt: no cotangent, as for
// integer operands, indices and predicates). Must be written with the public ops.
using VjpRule = std::function<std::vector<std::optional<Array>>(const VjpArgs&)>;
// Adds or replaces the rule of a StableHLO op ("stablehlo.add").
void register_vjp_rule(const std::string& op_name, VjpRule rule);
bool has_vjp_rule(const std::string& op_name);

// Data a VJP rule needs beyond the IR (the functions of a scan or cond, to trace them again),
// attached to a recorded op; forgotten with the markers when the outermost window closes.
void annotate(const ir::Operation* op, std::any data);
const std::any* annotation(const ir::Operation* op);

// While alive, ops recorded on this thread may be differentiated: stop_gradient and custom_vjp
// record their markers. The markers are forgotten when the outermost window closes.
class AutodiffWindow {
 public:
  AutodiffWindow();
  ~AutodiffWindow();
  AutodiffWindow(const AutodiffWindow&) = delete;
  AutodiffWindow& operator=(const AutodiffWindow&) = delete;
  static bool active();
};

// A position in the current block of the active trace; ops_since gives the ops recorded
// after it (in program order).
struct Mark {
  ir::Block* block = nullptr;
  ir::Operation* last = nullptr;
  size_t size = 0;
};
Mark mark();
std::vector<ir::Operation*> ops_since(const Mark& m);

// A new value equal to x (an identity op) in the active trace, keeping x's weak type: the
// differentiated inputs are fresh values so that each argument gets only its own uses.
Array fresh(const Array& x);

// Walks `ops` backwards from the cotangents of `outputs` and returns the cotangent of each of
// `inputs` (zeros where none flows). Values used several times get the sum of their
// cotangents.
std::vector<Array> backward(const std::vector<ir::Operation*>& ops,
                            const std::vector<Array>& inputs, const std::vector<Array>& outputs,
                            const std::vector<Array>& out_cts);

// Throws "grad requires real scalar outputs" unless y is a rank-0 float.
void check_scalar_output(const Array& y);
// grad(..., holomorphic): y must be a complex scalar, the differentiated inputs complex.
void check_holomorphic(const Array& y, const std::vector<Array>& inputs);
Array ones_like_scalar(const Array& y);
Array zeros_like(const Array& x);
// Checks that a cotangent tree's leaves match the outputs' shapes and dtypes.
void check_cotangents(const std::vector<Array>& outputs, const std::vector<Array>& cts,
                      const std::string& what);

// Custom functions on flat lists of leaves: f (the primal function), and its JVP rule
// (primals, tangents) -> (outputs, tangent outputs), or its forward args -> (outputs,
// residuals) and backward (residuals, output cotangents) -> argument cotangents (an invalid
// Array: zero). vmap re-records a custom function on batched inputs from these, vmapped.
using FlatFn = std::function<std::vector<Array>(const std::vector<Array>&)>;
using FlatPairFn = std::function<std::pair<std::vector<Array>, std::vector<Array>>(
    const std::vector<Array>&, const std::vector<Array>&)>;
using FlatFwd =
    std::function<std::pair<std::vector<Array>, std::vector<Array>>(const std::vector<Array>&)>;
using FlatBwd = std::function<std::vector<Array>(const std::vector<Array>& residuals,
                                                 const std::vector<Array>& cotangents)>;
// Under a differentiated trace, runs jvp at `args` with fresh zero tangents and records the
// custom_jvp boundary: the outputs' cotangents are the transpose of the rule's tangent
// computation (linear in the tangents) applied to them. The rule's ops stay differentiable, so
// derivatives of higher order differentiate the rule, as JAX does. Elsewhere f(args).
std::vector<Array> custom_jvp_call(const FlatFn& f, const FlatPairFn& jvp,
                                   const std::vector<Array>& args);
// Under a differentiated trace, records fwd(args) as the custom_vjp boundary (its ops skipped by
// the backward walk, which calls bwd instead); elsewhere f(args).
std::vector<Array> custom_vjp_call(const FlatFn& f, const FlatFwd& fwd, const FlatBwd& bwd,
                                   const std::vector<Array>& args);

// Runs `fn` inline when a trace is active, else as a jitted program cached in `jitted`.
template <class Impl>
class Transformed {
 public:
  Transformed(Impl impl, const std::string& name)
      : impl_(impl), jitted_(std::make_shared<Jitted<Impl>>(impl, options(name))) {}
  template <class... Args>
  auto operator()(const Args&... args) const {
    if (current_trace()) return impl_(args...);
    return (*jitted_)(args...);
  }
  size_t cache_size() const { return jitted_->cache_size(); }
  int64_t compile_count() const { return jitted_->compile_count(); }

 private:
  static JitOptions options(const std::string& name) {
    JitOptions o;
    o.name = name;
    return o;
  }
  Impl impl_;
  std::shared_ptr<Jitted<Impl>> jitted_;
};

template <class T>
T fresh_tree(const T& tree, std::vector<Array>& inputs) {
  return tree_map(
      [&](const Array& a) {
        Array t = fresh(a);
        inputs.push_back(t);
        return t;
      },
      tree);
}

template <class T>
T unflatten_from(const T& structure, const std::vector<Array>& leaves, size_t& pos) {
  const size_t n = tree_leaves(structure).size();
  std::vector<Array> part(leaves.begin() + pos, leaves.begin() + pos + n);
  pos += n;
  return tree_unflatten(structure, part);
}

template <bool WithValue, bool Aux, bool Holo, class F, int... I>
struct GradImpl {
  F f;
  template <class... Args>
  auto operator()(const Args&... args) const {
    static_assert(sizeof...(I) > 0, "grad needs at least one argnum");
    AutodiffWindow window;
    const std::tuple<Args...> primals(args...);
    std::tuple<Args...> subst = primals;
    std::vector<Array> inputs;
    ((std::get<I>(subst) = fresh_tree(std::get<I>(primals), inputs)), ...);
    const Mark m = mark();
    auto out = std::apply(f, subst);
    Array value;
    if constexpr (Aux)
      value = out.first;
    else
      value = out;
    if constexpr (Holo)
      check_holomorphic(value, inputs);
    else
      check_scalar_output(value);
    const std::vector<Array> cts =
        backward(ops_since(m), inputs, {value}, {ones_like_scalar(value)});
    size_t pos = 0;
    auto grads = std::tuple{unflatten_from(std::get<I>(primals), cts, pos)...};
    auto g = [&] {
      if constexpr (sizeof...(I) == 1)
        return std::get<0>(grads);
      else
        return grads;
    }();
    if constexpr (WithValue)
      return std::make_pair(out, g);
    else if constexpr (Aux)
      return std::make_pair(g, out.second);
    else
      return g;
  }
};

// vjp_fn's body: retraces f at the primals and pulls `ct` back to every primal.
template <class F, class... Args>
struct VjpImpl {
  F f;
  template <class Ct>
  std::tuple<Args...> operator()(const std::tuple<Args...>& primals, const Ct& ct) const {
    AutodiffWindow window;
    std::vector<Array> inputs;
    std::tuple<Args...> subst = std::apply(
        [&](const auto&... p) { return std::tuple<Args...>{fresh_tree(p, inputs)...}; }, primals);
    const Mark m = mark();
    auto out = std::apply(f, subst);
    const std::vector<Array> outs = tree_leaves(out);
    const std::vector<Array> cts_in = tree_leaves(ct);
    check_cotangents(outs, cts_in, "vjp");
    const std::vector<Array> cts = backward(ops_since(m), inputs, outs, cts_in);
    size_t pos = 0;
    return std::apply(
        [&](const auto&... p) { return std::tuple<Args...>{unflatten_from(p, cts, pos)...}; },
        primals);
  }
};

// jvp by transposing the VJP: the VJP u -> J^T u is linear in u, and its own VJP at t is J t.
template <class F, class... Args>
struct JvpImpl {
  F f;
  auto operator()(const std::tuple<Args...>& primals, const std::tuple<Args...>& tangents) const {
    AutodiffWindow window;
    std::vector<Array> inputs;
    std::tuple<Args...> subst = std::apply(
        [&](const auto&... p) { return std::tuple<Args...>{fresh_tree(p, inputs)...}; }, primals);
    const Mark m1 = mark();
    auto out = std::apply(f, subst);
    const std::vector<Array> outs = tree_leaves(out);
    const auto ops1 = ops_since(m1);
    std::vector<Array> us;
    for (const auto& o : outs) us.push_back(fresh(zeros_like(o)));
    const Mark m2 = mark();
    const std::vector<Array> xs = backward(ops1, inputs, outs, us);
    const std::vector<Array> ts = tree_leaves(tangents);
    check_cotangents(inputs, ts, "jvp tangents");
    const std::vector<Array> touts = backward(ops_since(m2), us, xs, ts);
    using Out = decltype(out);
    return std::pair<Out, Out>(out, tree_unflatten(out, touts));
  }
};

// Whether argument K is one of the nondiff_argnums N.
template <size_t K, int... N>
inline constexpr bool is_nondiff = ((static_cast<int>(K) == N) || ... || false);
// The arguments that are (Nondiff) or are not (!Nondiff) nondiff_argnums, as a std::tuple.
template <bool Nondiff, int... N, class Tuple, size_t... K>
auto pick_args(const Tuple& t, std::index_sequence<K...>) {
  return std::tuple_cat([&]() {
    if constexpr (is_nondiff<K, N...> == Nondiff)
      return std::tuple<std::tuple_element_t<K, Tuple>>(std::get<K>(t));
    else
      return std::tuple<>();
  }()...);
}
// f(args...) from the nondiff and the other arguments, in their original order.
template <int... N, class F, class ND, class D, size_t... K>
auto call_merged(const F& f, const ND& nd, const D& d, std::index_sequence<K...>) {
  auto arg = [&]<size_t J>() -> decltype(auto) {
    constexpr size_t before = ((static_cast<size_t>(N) < J ? 1 : 0) + ... + 0);
    if constexpr (is_nondiff<J, N...>)
      return std::get<before>(nd);
    else
      return std::get<J - before>(d);
  };
  return f(arg.template operator()<K>()...);
}

template <class T>
struct IsArrayVector : std::false_type {};
template <>
struct IsArrayVector<std::vector<Array>> : std::true_type {};

template <class F, class Fwd, class Bwd, int... N>
struct CustomVjp {
  F f;
  Fwd fwd;
  Bwd bwd;
  template <class... Args>
  auto operator()(const Args&... args) const {
    if (!current_trace() || !AutodiffWindow::active()) return f(args...);
    using Out = std::decay_t<decltype(f(args...))>;
    using Res = std::decay_t<decltype(fwd(args...).second)>;
    const std::tuple<Args...> all(args...);
    constexpr auto K = std::index_sequence_for<Args...>{};
    const auto nd = pick_args<true, N...>(all, K);
    const auto d = pick_args<false, N...>(all, K);
    using D = std::decay_t<decltype(d)>;
    auto out_structure = std::make_shared<std::optional<Out>>();
    auto res_structure = std::make_shared<std::optional<Res>>();
    FlatFn fun = [f = f, nd, d](const std::vector<Array>& leaves) {
      return tree_leaves(
          call_merged<N...>(f, nd, tree_unflatten(d, leaves), std::index_sequence_for<Args...>{}));
    };
    FlatFwd flat_fwd = [fwd = fwd, nd, d, out_structure,
                        res_structure](const std::vector<Array>& leaves) {
      auto r = call_merged<N...>(fwd, nd, D(tree_unflatten(d, leaves)),
                                 std::index_sequence_for<Args...>{});
      *out_structure = r.first;
      *res_structure = r.second;
      return std::make_pair(tree_leaves(r.first), tree_leaves(r.second));
    };
    FlatBwd flat_bwd = [bwd = bwd, nd, out_structure, res_structure](
                           const std::vector<Array>& res, const std::vector<Array>& cts) {
      const Res r = tree_unflatten(**res_structure, res);
      const Out g = tree_unflatten(**out_structure, cts);
      auto gs = std::apply([&](const auto&... n) { return bwd(n..., r, g); }, nd);
      if constexpr (IsArrayVector<std::decay_t<decltype(gs)>>::value)
        return gs;
      else
        return tree_leaves(gs);
    };
    const std::vector<Array> outs = custom_vjp_call(fun, flat_fwd, flat_bwd, tree_leaves(d));
    return Out(tree_unflatten(**out_structure, outs));
  }
};

template <class F, class Jvp, int... N>
struct CustomJvp {
  F f;
  Jvp jvp;
  template <class... Args>
  auto operator()(const Args&... args) const {
    if (!current_trace() || !AutodiffWindow::active()) return f(args...);
    using Out = std::decay_t<decltype(f(args...))>;
    const std::tuple<Args...> all(args...);
    constexpr auto K = std::index_sequence_for<Args...>{};
    const auto nd = pick_args<true, N...>(all, K);
    const auto d = pick_args<false, N...>(all, K);
    using D = std::decay_t<decltype(d)>;
    FlatFn fun = [f = f, nd, d](const std::vector<Array>& leaves) {
      return tree_leaves(call_merged<N...>(f, nd, D(tree_unflatten(d, leaves)),
                                           std::index_sequence_for<Args...>{}));
    };
    auto structure = std::make_shared<std::optional<Out>>();
    FlatPairFn rule;
    constexpr bool vector_rule =
        sizeof...(N) == 0 && (std::is_same_v<Args, Array> && ...) &&
        std::is_invocable_v<const Jvp&, const std::vector<Array>&, const std::vector<Array>&>;
    if constexpr (vector_rule) {
      // The rule of Array arguments as std::vector<Array> primals and tangents.
      rule = [jvp = jvp, structure](const std::vector<Array>& p, const std::vector<Array>& t) {
        auto r = jvp(p, t);
        *structure = Out(r.first);
        return std::make_pair(tree_leaves(Out(r.first)), tree_leaves(Out(r.second)));
      };
    } else {
      // JAX's form: jvp(nondiff..., primals, tangents) with primals and tangents std::tuples
      // of the other arguments.
      rule = [jvp = jvp, nd, d, structure](const std::vector<Array>& p,
                                           const std::vector<Array>& t) {
        const D primals = tree_unflatten(d, p), tangents = tree_unflatten(d, t);
        auto r = std::apply([&](const auto&... n) { return jvp(n..., primals, tangents); }, nd);
        *structure = Out(r.first);
        return std::make_pair(tree_leaves(Out(r.first)), tree_leaves(Out(r.second)));
      };
    }
    const std::vector<Array> outs = custom_jvp_call(fun, rule, tree_leaves(d));
    return Out(tree_unflatten(**structure, outs));
  }
};

// custom_jvp(f) before its rule is given: only defjvp may be called.
template <class F, int... N>
struct CustomJvpDeclared {
  F f;
  template <class Jvp>
  CustomJvp<F, Jvp, N...> defjvp(Jvp jvp) const {
    return {f, std::move(jvp)};
  }
};

// custom_vjp(f) before its rules are given: only defvjp may be called.
template <class F, int... N>
struct CustomVjpDeclared {
  F f;
  template <class Fwd, class Bwd>
  CustomVjp<F, Fwd, Bwd, N...> defvjp(Fwd fwd, Bwd bwd) const {
    return {f, std::move(fwd), std::move(bwd)};
  }
};

}  // namespace trace

// grad(f): the gradient of scalar-valued f with respect to its first argument.
template <class F>
auto grad(F f) {
  return trace::Transformed(trace::GradImpl<false, false, false, F, 0>{std::move(f)}, "grad");
}
template <class F, int... I>
auto grad(F f, Argnums<I...>) {
  return trace::Transformed(trace::GradImpl<false, false, false, F, I...>{std::move(f)}, "grad");
}
// grad(f, argnums<...>, has_aux): f returns (value, aux); the result is (grads, aux).
template <class F, int... I>
auto grad(F f, Argnums<I...>, HasAux) {
  return trace::Transformed(trace::GradImpl<false, true, false, F, I...>{std::move(f)}, "grad");
}
template <class F, int... I>
auto grad(F f, Argnums<I...>, Holomorphic) {
  return trace::Transformed(trace::GradImpl<false, false, true, F, I...>{std::move(f)}, "grad");
}
// value_and_grad(f): (value, grads); with has_aux ((value, aux), grads).
template <class F>
auto value_and_grad(F f) {
  return trace::Transformed(trace::GradImpl<true, false, false, F, 0>{std::move(f)},
                            "value_and_grad");
}
template <class F, int... I>
auto value_and_grad(F f, Argnums<I...>) {
  return trace::Transformed(trace::GradImpl<true, false, false, F, I...>{std::move(f)},
                            "value_and_grad");
}
template <class F, int... I>
auto value_and_grad(F f, Argnums<I...>, Holomorphic) {
  return trace::Transformed(trace::GradImpl<true, false, true, F, I...>{std::move(f)},
                            "value_and_grad");
}
template <class F, int... I>
auto value_and_grad(F f, Argnums<I...>, HasAux) {
  return trace::Transformed(trace::GradImpl<true, true, false, F, I...>{std::move(f)},
                            "value_and_grad");
}

// vjp(f, primals...) -> (outputs, vjp_fn); vjp_fn(cotangents) gives a std::tuple with the
// cotangent of every primal. vjp_fn may be called later, eagerly or under a trace: it retraces
// f at the captured primals (jitted once per cotangent signature when called eagerly), so the
// forward computation is repeated rather than stored.
template <class F, class... Args>
class VjpFunction {
 public:
  VjpFunction(F f, std::tuple<Args...> primals)
      : primals_(std::move(primals)), fn_(trace::VjpImpl<F, Args...>{std::move(f)}, "vjp") {}
  template <class Ct>
  std::tuple<Args...> operator()(const Ct& cotangents) const {
    return fn_(primals_, cotangents);
  }

 private:
  std::tuple<Args...> primals_;
  trace::Transformed<trace::VjpImpl<F, Args...>> fn_;
};

template <class F, class... Args>
auto vjp(F f, const Args&... primals) {
  auto out = f(primals...);
  return std::make_pair(out,
                        VjpFunction<F, Args...>(std::move(f), std::tuple<Args...>(primals...)));
}

// jvp(f, primals, tangents) -> (outputs, tangents_out), primals and tangents as std::tuples
// of f's arguments (a single Array may be passed for a one-argument f). Computed as the VJP of
// the VJP, so it is exact and differentiable, at about twice the cost of a VJP.
template <class F, class... Args>
auto jvp(F f, const std::tuple<Args...>& primals, const std::tuple<Args...>& tangents) {
  trace::Transformed<trace::JvpImpl<F, Args...>> fn(trace::JvpImpl<F, Args...>{std::move(f)},
                                                    "jvp");
  return fn(primals, tangents);
}
template <class F>
auto jvp(F f, const Array& primal, const Array& tangent) {
  return jvp(std::move(f), std::tuple<Array>(primal), std::tuple<Array>(tangent));
}

// custom_vjp(f, fwd, bwd), or custom_vjp(f).defvjp(fwd, bwd): f with a user-defined VJP, as
// jax.custom_vjp. f takes pytrees of Arrays and returns a pytree; fwd takes f's arguments and
// returns {output, residuals} (residuals any pytree); bwd(residuals, g), g of the output's
// structure, returns the arguments' cotangents: a std::tuple with one pytree per argument, or a
// std::vector<Array> with one Array per argument (an invalid Array() means zero). Outside a
// differentiated trace f runs as is; under grad, fwd is recorded and the backward walk calls bwd
// instead of walking fwd's ops.
//
// nondiff_argnums<N...> as JAX's: those arguments (any type, e.g. a threshold) get no
// cotangent; fwd still takes every argument, bwd takes them first: bwd(nondiff..., residuals,
// g) returns cotangents for the other arguments only.
template <class F, class Fwd, class Bwd>
auto custom_vjp(F f, Fwd fwd, Bwd bwd) {
  return trace::CustomVjp<F, Fwd, Bwd>{std::move(f), std::move(fwd), std::move(bwd)};
}
template <class F>
auto custom_vjp(F f) {
  return trace::CustomVjpDeclared<F>{std::move(f)};
}
template <class F, int... N>
auto custom_vjp(F f, NondiffArgnums<N...>) {
  return trace::CustomVjpDeclared<F, N...>{std::move(f)};
}

// custom_jvp(f, jvp) or custom_jvp(f).defjvp(jvp): f with a user-defined JVP, as jax.custom_jvp.
// f takes pytrees of Arrays and returns a pytree. The rule is JAX's jvp(primals, tangents), with
// primals and tangents std::tuples of f's arguments, returning {f(primals...), tangent_out}
// (tangent_out of the output's structure, linear in the tangents); for Array arguments it may
// also take them as std::vector<Array>. Outside a differentiated trace f runs as is. Under grad,
// vjp, jvp, linearize and the Jacobians the rule is recorded in f's place and its tangent
// computation is transposed for the reverse pass (jvp is the transpose of that again), so the
// rule alone defines the derivative. Under vmap the function and its rule are vmapped.
//
// nondiff_argnums<N...> as JAX's: custom_jvp(f, nondiff_argnums<0>).defjvp(rule) passes those
// arguments (any type) first, jvp(nondiff..., primals, tangents), primals and tangents holding
// the other arguments only.
template <class F, class Jvp>
auto custom_jvp(F f, Jvp jvp) {
  return trace::CustomJvp<F, Jvp>{std::move(f), std::move(jvp)};
}
template <class F>
auto custom_jvp(F f) {
  return trace::CustomJvpDeclared<F>{std::move(f)};
}
template <class F, int... N>
auto custom_jvp(F f, NondiffArgnums<N...>) {
  return trace::CustomJvpDeclared<F, N...>{std::move(f)};
}

}  // namespace cujax
