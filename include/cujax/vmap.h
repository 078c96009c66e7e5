// Vectorizing map: vmap(f, in_axes, out_axes), as jax.vmap.
//
//   auto mv = cujax::vmap([](const Array& m, const Array& v) { return jnp::dot(m, v); },
//                         {cujax::not_mapped, 0});              // matrix times each row of vs
//   Array ys = mv(m, vs);                                       // ys[i] = m @ vs[i]
//   auto per_example = cujax::vmap(cujax::grad(loss), {cujax::not_mapped, 0, 0});
//
// in_axes says, per argument, which axis is mapped (negative counts from the end) or
// not_mapped; a single int maps every argument along that axis; cujax::leaf_axes({...}) gives
// one entry per leaf of a tree argument. out_axes says where the mapped axis goes in each
// output (one entry for all outputs, or one per element of a std::tuple / std::pair result).
// All mapped axes must have the same size.
//
// How it works (see docs/vmap.md). Like grad, vmap is a transformation of the traced program:
// vmap(f)(xs) makes sure a trace is active (with none, it runs as a jitted program cached per
// signature), records f on unbatched stand-ins of the arguments, then walks the recorded ops
// forward and re-emits each one on batched values with its batching rule (keyed by the
// StableHLO op name, written with the public lax ops). Ops that do not depend on a mapped
// argument are kept as they are. The result is ordinary recorded ops, so vmap composes with
// jit and grad in both orders.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cujax/array.h"
#include "cujax/grad.h"
#include "cujax/trace/trace.h"
#include "cujax/tree.h"

namespace cujax {

// An axis, or std::nullopt for an argument (or output) that is not mapped (JAX's None).
using Axis = std::optional<int>;
inline constexpr std::nullopt_t not_mapped = std::nullopt;

// One in_axes / out_axes entry: an axis for every leaf of one argument, or one axis per leaf.
struct AxisSpec {
  AxisSpec(int axis) : axes{Axis(axis)} {}  // NOLINT: implicit, as in {not_mapped, 0}
  AxisSpec(std::nullopt_t) : axes{Axis()} {}
  AxisSpec(Axis axis) : axes{axis} {}
  static AxisSpec per_leaf(std::vector<Axis> leaf_axes) {
    AxisSpec s(not_mapped);
    s.axes = std::move(leaf_axes);
    s.leafwise = true;
    return s;
  }
  std::vector<Axis> axes;
  bool leafwise = false;
};
// in_axes entry for a tree argument: one axis (or not_mapped) per leaf, in tree_leaves order.
inline AxisSpec leaf_axes(std::vector<Axis> axes) {
  return AxisSpec::per_leaf(std::move(axes));
}

// in_axes / out_axes: a single int applies to every argument (output); a braced list has one
// entry per argument (per output element).
class MapAxes {
 public:
  MapAxes(int axis) : entries_{AxisSpec(axis)}, broadcast_(true) {}  // NOLINT: vmap(f, 1)
  MapAxes(std::initializer_list<AxisSpec> entries) : entries_(entries) {}
  MapAxes(std::vector<AxisSpec> entries) : entries_(std::move(entries)) {}
  // The axis of every leaf, given the leaf count of each part (argument or output element).
  // `what` is "in_axes" or "out_axes" for messages.
  std::vector<Axis> per_leaf(const std::vector<size_t>& part_leaves, const std::string& what) const;

 private:
  std::vector<AxisSpec> entries_;
  bool broadcast_ = false;
};

namespace trace {

using Bdim = std::optional<int64_t>;  // where a value's batch dimension is, if it has one

// A value of the batched program and the position of its batch dimension.
struct Batched {
  Array value;
  Bdim bdim;
};

// What a batching rule sees: the op (for its attributes and regions), the batched operands
// (tracers; an operand without a batch dimension has its unbatched type) and the batch size.
struct BatchArgs {
  TraceContext& tc;
  const ir::Operation& op;
  std::vector<Array> operands;
  std::vector<Bdim> bdims;
  int64_t size;
  // The batched form of any value visible at the op: for the values its regions capture.
  std::function<Batched(ir::Value*)> lookup;
};
// Returns one Batched per result: the result with the batch dimension where bdim says (the
// rule's choice), or unbatched. At least one operand is batched. Must use the public ops.
using BatchRule = std::function<std::vector<Batched>(const BatchArgs&)>;
// Adds or replaces the batching rule of a StableHLO op ("stablehlo.add").
void register_batch_rule(const std::string& op_name, BatchRule rule);
bool has_batch_rule(const std::string& op_name);

// Walks `ops` forward: a value of `stand_ins` stands for the batched value in `inputs` at the
// same position; every op that uses a batched value is re-emitted with its rule. Returns the
// batched form of each of `outputs`.
std::vector<Batched> batch(const std::vector<ir::Operation*>& ops,
                           const std::vector<Array>& stand_ins, const std::vector<Batched>& inputs,
                           const std::vector<Array>& outputs, int64_t size);

// The mapped size of the leaves (names in messages are "arg<k>"), checking ranks and sizes.
int64_t mapped_size(const std::vector<Array>& leaves, const std::vector<Axis>& axes,
                    const std::vector<std::string>& names);
// An unbatched value of x's shape without `axis` (its canonical form), for tracing f on.
Array stand_in(const Array& x, int axis);
// Puts an output's batch dimension at `out_axis` (broadcasting an unbatched output there);
// with out_axis not_mapped the output must be unbatched.
Array place_output(const Batched& y, Axis out_axis, int64_t size, const Array& traced);

template <class T>
size_t leaf_count(const T& tree) {
  return tree_leaves(tree).size();
}

template <class T>
struct IsTupleLike : std::false_type {};
template <class... Ts>
struct IsTupleLike<std::tuple<Ts...>> : std::true_type {};
template <class A, class B>
struct IsTupleLike<std::pair<A, B>> : std::true_type {};

// Leaf counts of the parts out_axes entries refer to: the elements of a tuple or pair result,
// or the whole result.
template <class T>
std::vector<size_t> output_parts(const T& out) {
  if constexpr (IsTupleLike<T>::value)
    return std::apply([](const auto&... e) { return std::vector<size_t>{leaf_count(e)...}; }, out);
  else
    return {leaf_count(out)};
}

template <class F>
struct VmapImpl {
  F f;
  MapAxes in_axes;
  MapAxes out_axes;
  template <class... Args>
  auto operator()(const Args&... args) const {
    const std::tuple<Args...> primals(args...);
    const std::vector<size_t> parts{leaf_count(args)...};
    const std::vector<Axis> axes = in_axes.per_leaf(parts, "in_axes");
    std::vector<Array> leaves;
    std::vector<std::string> names;
    size_t k = 0;
    (
        [&](const auto& a) {
          for (const Array& l : tree_leaves(a)) {
            leaves.push_back(l);
            names.push_back("arg" + std::to_string(k));
          }
          ++k;
        }(args),
        ...);
    const int64_t size = mapped_size(leaves, axes, names);
    std::vector<Array> subst_leaves, stand_ins;
    std::vector<Batched> inputs;
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!axes[i]) {
        subst_leaves.push_back(leaves[i]);
        continue;
      }
      const int axis = *axes[i] < 0 ? *axes[i] + static_cast<int>(leaves[i].ndim()) : *axes[i];
      stand_ins.push_back(stand_in(leaves[i], axis));
      subst_leaves.push_back(stand_ins.back());
      inputs.push_back(Batched{leaves[i], axis});
    }
    size_t pos = 0;
    const std::tuple<Args...> subst = std::apply(
        [&](const auto&... p) {
          return std::tuple<Args...>{unflatten_from(p, subst_leaves, pos)...};
        },
        primals);
    const Mark m = mark();
    auto out = std::apply(f, subst);
    const std::vector<Array> outs = tree_leaves(out);
    const std::vector<Batched> ys = batch(ops_since(m), stand_ins, inputs, outs, size);
    const std::vector<Axis> oaxes = out_axes.per_leaf(output_parts(out), "out_axes");
    std::vector<Array> results;
    for (size_t i = 0; i < ys.size(); ++i)
      results.push_back(place_output(ys[i], oaxes[i], size, outs[i]));
    return tree_unflatten(out, results);
  }
};

}  // namespace trace

// vmap(f, in_axes = 0, out_axes = 0): f mapped over the in_axes of its arguments. Eagerly the
// batched program is jitted (compiled once per signature); under a trace it is inlined.
template <class F>
auto vmap(F f, MapAxes in_axes = 0, MapAxes out_axes = 0) {
  return trace::Transformed(
      trace::VmapImpl<F>{std::move(f), std::move(in_axes), std::move(out_axes)}, "vmap");
}

}  // namespace cujax
