// Traced control flow under jax.lax's names: cond, switch_ (lax.switch: `switch` is a C++
// keyword), while_loop, fori_loop and scan. The functions are traced once into the regions of
// a stablehlo.case or stablehlo.while; they take and return trees (cujax/tree.h) and may use
// arrays from the enclosing scope (captured values). Called eagerly, the op is traced into a
// program, compiled and run, so eager results are those of jit.
//
//   Array y = lax::cond(x > 0, [](const Array& v) { return v * 2; },
//                       [](const Array& v) { return -v; }, x);
//   auto [carry, ys] = lax::scan([&](const Array& c, const Array& x) {
//     Array c2 = c * w + x;
//     return std::pair{c2, c2};
//   }, init, xs);
//
// Gradients flow through cond, switch_, scan and fori_loop with static (int64_t) bounds; a
// while_loop (or fori_loop with Array bounds) is not reverse-differentiable, as in JAX. See
// docs/control-flow.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cujax/array.h"
#include "cujax/lax.h"
#include "cujax/tree.h"

namespace cujax::lax {

namespace detail {

// A traced function on flattened trees: the leaves it returns and the tree structure they had.
struct FlatOut {
  std::vector<Array> leaves;
  std::string structure;
};
using FlatFn = std::function<FlatOut(const std::vector<Array>&)>;

// stablehlo.case on `index` (a scalar i32; out of range picks the last branch): branch b maps
// `operands` to its outputs. `what` and `branch_names` name the op and branches in errors.
std::vector<Array> case_flat(const std::string& what, const std::vector<std::string>& branch_names,
                             const Array& index, const std::vector<FlatFn>& branches,
                             const std::vector<Array>& operands);
// cond's predicate (a scalar bool or number) as case's i32 index: false -> 0, true -> 1.
Array cond_index(const Array& pred);
// switch's index clamped to [0, num_branches - 1] and converted to i32, as lax.switch does.
Array switch_index(const Array& index, int64_t num_branches);
// stablehlo.while over `init`; cond returns a scalar bool as its only leaf.
std::vector<Array> while_flat(const FlatFn& cond, const FlatFn& body,
                              const std::vector<Array>& init, const std::string& structure);
// scan as a stablehlo.while: f maps (carry leaves..., x leaves...) to (carry leaves..., y
// leaves...); returns (final carry leaves..., stacked y leaves...).
std::vector<Array> scan_flat(const FlatFn& f, size_t num_carry, const std::vector<Array>& init,
                             const std::vector<Array>& xs, int64_t length, bool reverse);

// What the scan VJP rule needs beyond the IR, kept while the autodiff window is open (see
// trace::annotate): the layout of the while's carried values (i, carry..., xs..., ys...) and
// the values in its body that are f's inputs (carry..., x slices...) and outputs (carry...,
// y...), so that the rule can replay f's ops.
struct ScanRecord {
  size_t num_carry = 0, num_xs = 0, num_ys = 0;
  int64_t length = 0;
  bool reverse = false;
  std::vector<const ir::Value*> f_in, f_out;
};

template <class Out, class Fn, class Tuple>
FlatFn flat_branch(Fn fn, const Tuple& operands, std::shared_ptr<std::optional<Out>> out) {
  return [fn, operands, out](const std::vector<Array>& leaves) {
    const Tuple args = tree_unflatten(operands, leaves);
    Out r = std::apply(fn, args);
    FlatOut o{tree_leaves(r), tree_structure(r)};
    *out = std::move(r);
    return o;
  };
}

template <class T>
T slice_structure(const T& xs) {
  return tree_map(
      [](const Array& a) {
        if (a.ndim() == 0)
          throw Error(
              "scan: every leaf of xs must have a leading axis to scan over, got a "
              "scalar " +
              a.aval().str());
        return a;
      },
      xs);
}

}  // namespace detail

// cond(pred, true_fn, false_fn, operands...): true_fn(operands...) if pred else
// false_fn(operands...), both traced (stablehlo.case, branch 0 = false_fn). Both must return
// the same tree structure, shapes and dtypes.
template <class TrueFn, class FalseFn, class... Operands>
auto cond(const Array& pred, TrueFn true_fn, FalseFn false_fn, const Operands&... operands) {
  using Out = std::decay_t<std::invoke_result_t<TrueFn&, const Operands&...>>;
  static_assert(
      std::is_same_v<Out, std::decay_t<std::invoke_result_t<FalseFn&, const Operands&...>>>,
      "lax::cond: true_fn and false_fn must return the same type");
  const std::tuple<Operands...> ops(operands...);
  auto out = std::make_shared<std::optional<Out>>();
  std::vector<detail::FlatFn> branches{detail::flat_branch<Out>(false_fn, ops, out),
                                       detail::flat_branch<Out>(true_fn, ops, out)};
  std::vector<Array> leaves = detail::case_flat(
      "cond", {"false_fn", "true_fn"}, detail::cond_index(pred), branches, tree_leaves(ops));
  return tree_unflatten(**out, leaves);
}

// switch_(index, branches, operands...): branches[clamp(index, 0, n - 1)](operands...), as
// jax.lax.switch (named switch_ because `switch` is a C++ keyword).
template <class F, class... Operands>
auto switch_(const Array& index, const std::vector<F>& branches, const Operands&... operands) {
  using Out = std::decay_t<std::invoke_result_t<const F&, const Operands&...>>;
  if (branches.empty()) throw Error("switch_: needs at least one branch");
  const std::tuple<Operands...> ops(operands...);
  auto out = std::make_shared<std::optional<Out>>();
  std::vector<detail::FlatFn> flat;
  std::vector<std::string> names;
  for (size_t b = 0; b < branches.size(); ++b) {
    flat.push_back(detail::flat_branch<Out>(branches[b], ops, out));
    names.push_back("branches[" + std::to_string(b) + "]");
  }
  const Array i = detail::switch_index(index, static_cast<int64_t>(branches.size()));
  std::vector<Array> leaves = detail::case_flat("switch", names, i, flat, tree_leaves(ops));
  return tree_unflatten(**out, leaves);
}

// while_loop(cond_fun, body_fun, init_val): val = init_val; while cond_fun(val): val =
// body_fun(val). body_fun must keep the tree structure, shapes and dtypes of init_val.
template <class CondFun, class BodyFun, class T>
T while_loop(CondFun cond_fun, BodyFun body_fun, const T& init_val) {
  detail::FlatFn c = [cond_fun, init_val](const std::vector<Array>& leaves) {
    Array p = cond_fun(tree_unflatten(init_val, leaves));
    return detail::FlatOut{{p}, ""};
  };
  detail::FlatFn b = [body_fun, init_val](const std::vector<Array>& leaves) {
    T r = body_fun(tree_unflatten(init_val, leaves));
    return detail::FlatOut{tree_leaves(r), tree_structure(r)};
  };
  return tree_unflatten(init_val,
                        detail::while_flat(c, b, tree_leaves(init_val), tree_structure(init_val)));
}

// scan(f, init, xs, length, reverse): f(carry, x) -> std::pair(carry, y) over the slices x of
// xs (a tree of arrays) along axis 0; returns (final carry, ys stacked along axis 0). With no
// xs pass std::tuple<>{} and a length; f may return std::tuple<>{} as y.
template <class F, class Carry, class Xs>
auto scan(F f, const Carry& init, const Xs& xs, std::optional<int64_t> length = std::nullopt,
          bool reverse = false) {
  using R = std::decay_t<std::invoke_result_t<F&, const Carry&, const Xs&>>;
  using Y = std::decay_t<typename R::second_type>;
  static_assert(std::is_same_v<std::decay_t<typename R::first_type>, Carry>,
                "lax::scan: f must return std::pair<Carry, Y> with the carry's type");
  const Xs x_structure = detail::slice_structure(xs);
  const std::vector<Array> xs_leaves = tree_leaves(xs);
  int64_t n = length.value_or(-1);
  for (const auto& a : xs_leaves) {
    if (n < 0) n = a.shape()[0];
    if (a.shape()[0] != n)
      throw Error("scan: every leaf of xs must have leading axis size " + std::to_string(n) +
                  (length ? " (the length argument)" : "") + ", got " + a.aval().str());
  }
  if (n < 0) throw Error("scan: with no xs, pass a length");
  const size_t num_carry = tree_leaves(init).size();
  const std::string carry_structure = tree_structure(init);
  auto y_out = std::make_shared<std::optional<Y>>();
  detail::FlatFn flat = [f, init, x_structure, num_carry, carry_structure,
                         y_out](const std::vector<Array>& leaves) {
    const Carry c = tree_unflatten(
        init, std::vector<Array>(leaves.begin(), leaves.begin() + static_cast<long>(num_carry)));
    // x: xs's structure with each leaf's slice (the leaves come sliced).
    const Xs x = tree_unflatten(
        x_structure,
        std::vector<Array>(leaves.begin() + static_cast<long>(num_carry), leaves.end()));
    R r = f(c, x);
    if (tree_structure(r.first) != carry_structure)
      throw Error("scan: f's carry output must have the structure of init, " + carry_structure +
                  ", got " + tree_structure(r.first));
    std::vector<Array> out = tree_leaves(r.first);
    for (const auto& y : tree_leaves(r.second)) out.push_back(y);
    *y_out = std::move(r.second);
    return detail::FlatOut{out, ""};
  };
  std::vector<Array> res =
      detail::scan_flat(flat, num_carry, tree_leaves(init), xs_leaves, n, reverse);
  std::vector<Array> carry(res.begin(), res.begin() + static_cast<long>(num_carry));
  std::vector<Array> ys(res.begin() + static_cast<long>(num_carry), res.end());
  return std::pair<Carry, Y>(tree_unflatten(init, carry), tree_unflatten(**y_out, ys));
}

// fori_loop(lower, upper, body_fun, init_val): val = body_fun(i, val) for i in [lower, upper)
// (i an i32 scalar). Static bounds lower to a scan, so it is reverse-differentiable.
template <class BodyFun, class T>
T fori_loop(int64_t lower, int64_t upper, BodyFun body_fun, const T& init_val) {
  using Carry = std::pair<Array, T>;
  auto step = [body_fun](const Carry& c, const std::tuple<>&) {
    Carry next(lax::add(c.first, scalar(1)), body_fun(c.first, c.second));
    return std::pair<Carry, std::tuple<>>(next, {});
  };
  const Carry init(scalar(static_cast<double>(lower), DType::I32), init_val);
  return scan(step, init, std::tuple<>{}, std::max<int64_t>(0, upper - lower)).first.second;
}

// fori_loop with traced (Array) bounds: a while_loop, not reverse-differentiable.
template <class BodyFun, class T>
T fori_loop(const Array& lower, const Array& upper, BodyFun body_fun, const T& init_val) {
  using Carry = std::tuple<Array, Array, T>;
  auto c = [](const Carry& v) { return lax::lt(std::get<0>(v), std::get<1>(v)); };
  auto b = [body_fun](const Carry& v) {
    return Carry(lax::add(std::get<0>(v), scalar(1)), std::get<1>(v),
                 body_fun(std::get<0>(v), std::get<2>(v)));
  };
  const Carry init(convert_element_type(lower, DType::I32), convert_element_type(upper, DType::I32),
                   init_val);
  return std::get<2>(while_loop(c, b, init));
}

}  // namespace cujax::lax
