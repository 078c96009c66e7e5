// jax.jacfwd, jax.jacrev, jax.jacobian and jax.hessian. The Jacobian of one Array output with
// respect to one Array input has shape f(x).shape + x.shape (JAX's layout).
//
//   auto J = cujax::jacrev(f)(x);      // one VJP per output element, batched by vmap
//   auto J2 = cujax::jacfwd(f)(x);     // one JVP per input element, batched by vmap
//   auto H = cujax::hessian(loss)(x);  // jacfwd(jacrev(loss)): shape x.shape + x.shape
//
// Pytrees, as JAX nests them: for x a tree (std::vector, std::tuple, a registered struct...) and
// f(x) a tree, the result has f(x)'s structure with each leaf replaced by a tree of x's
// structure whose leaf j is d out_k / d x_j (out_k.shape + x_j.shape). f(x) may be an Array or
// a std::vector/std::array/std::tuple/std::pair/std::map/std::optional of them (a registered
// struct output cannot hold trees in its Array fields; a compile-time error says so).
//
// With argnums the function takes several pytrees: jacrev(f, argnums<0, 1>)(x, y) gives, per
// output leaf, the tuple (df/dx, df/dy) of x's and y's structures (JAX's nesting: output, then
// argnums, then argument); one argnum gives that argument's structure; has_aux (f returns
// (y, aux)) gives (J, aux).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cujax/array.h"
#include "cujax/grad.h"
#include "cujax/numpy.h"
#include "cujax/vmap.h"

namespace cujax {
namespace detail {
inline Shape concat_shapes(const Shape& a, const Shape& b) {
  Shape s = a;
  s.insert(s.end(), b.begin(), b.end());
  return s;
}
// The standard basis of `shape`'s space, stacked: (size, *shape).
inline Array basis_of(const Shape& shape, DType dtype) {
  const int64_t n = num_elements(shape);
  return numpy::reshape(numpy::eye(n, std::nullopt, 0, dtype), concat_shapes({n}, shape));
}
}  // namespace detail

namespace detail {
// Out's type with every Array leaf replaced by L (JAX's nesting of a Jacobian's trees).
template <class T, class L>
struct ReplaceLeaves {
  static_assert(std::is_same_v<T, Array>,
                "jacfwd/jacrev: the function's output must be an Array or a std::vector, "
                "std::array, std::tuple, std::pair, std::map or std::optional of them");
  using type = L;
};
template <class T, class L>
using replace_leaves_t = typename ReplaceLeaves<T, L>::type;
template <class T, class L>
struct ReplaceLeaves<std::vector<T>, L> {
  using type = std::vector<replace_leaves_t<T, L>>;
};
template <class T, size_t N, class L>
struct ReplaceLeaves<std::array<T, N>, L> {
  using type = std::array<replace_leaves_t<T, L>, N>;
};
template <class... Ts, class L>
struct ReplaceLeaves<std::tuple<Ts...>, L> {
  using type = std::tuple<replace_leaves_t<Ts, L>...>;
};
template <class A, class B, class L>
struct ReplaceLeaves<std::pair<A, B>, L> {
  using type = std::pair<replace_leaves_t<A, L>, replace_leaves_t<B, L>>;
};
template <class T, class L>
struct ReplaceLeaves<std::map<std::string, T>, L> {
  using type = std::map<std::string, replace_leaves_t<T, L>>;
};
template <class T, class L>
struct ReplaceLeaves<std::optional<T>, L> {
  using type = std::optional<replace_leaves_t<T, L>>;
};

// Builds replace_leaves_t<Out, L> from `out`'s structure and one L per leaf (in leaf order).
template <class L>
L nest(const Array&, const std::vector<L>& items, size_t& pos);
template <class T, class L>
replace_leaves_t<std::vector<T>, L> nest(const std::vector<T>& v, const std::vector<L>& items,
                                         size_t& pos);
template <class T, size_t N, class L>
replace_leaves_t<std::array<T, N>, L> nest(const std::array<T, N>& v, const std::vector<L>& items,
                                           size_t& pos);
template <class... Ts, class L>
replace_leaves_t<std::tuple<Ts...>, L> nest(const std::tuple<Ts...>& t, const std::vector<L>& items,
                                            size_t& pos);
template <class A, class B, class L>
replace_leaves_t<std::pair<A, B>, L> nest(const std::pair<A, B>& p, const std::vector<L>& items,
                                          size_t& pos);
template <class T, class L>
replace_leaves_t<std::map<std::string, T>, L> nest(const std::map<std::string, T>& m,
                                                   const std::vector<L>& items, size_t& pos);
template <class T, class L>
replace_leaves_t<std::optional<T>, L> nest(const std::optional<T>& o, const std::vector<L>& items,
                                           size_t& pos);

template <class L>
L nest(const Array&, const std::vector<L>& items, size_t& pos) {
  return items.at(pos++);
}
template <class T, class L>
replace_leaves_t<std::vector<T>, L> nest(const std::vector<T>& v, const std::vector<L>& items,
                                         size_t& pos) {
  replace_leaves_t<std::vector<T>, L> out;
  for (const T& e : v) out.push_back(nest(e, items, pos));
  return out;
}
template <class T, size_t N, class L>
replace_leaves_t<std::array<T, N>, L> nest(const std::array<T, N>& v, const std::vector<L>& items,
                                           size_t& pos) {
  replace_leaves_t<std::array<T, N>, L> out;
  for (size_t i = 0; i < N; ++i) out[i] = nest(v[i], items, pos);
  return out;
}
template <class... Ts, class L>
replace_leaves_t<std::tuple<Ts...>, L> nest(const std::tuple<Ts...>& t, const std::vector<L>& items,
                                            size_t& pos) {
  // Braced initialisation evaluates left to right, so leaves are taken in order.
  return std::apply(
      [&](const auto&... e) {
        return replace_leaves_t<std::tuple<Ts...>, L>{nest(e, items, pos)...};
      },
      t);
}
template <class A, class B, class L>
replace_leaves_t<std::pair<A, B>, L> nest(const std::pair<A, B>& p, const std::vector<L>& items,
                                          size_t& pos) {
  return replace_leaves_t<std::pair<A, B>, L>{nest(p.first, items, pos),
                                              nest(p.second, items, pos)};
}
template <class T, class L>
replace_leaves_t<std::map<std::string, T>, L> nest(const std::map<std::string, T>& m,
                                                   const std::vector<L>& items, size_t& pos) {
  replace_leaves_t<std::map<std::string, T>, L> out;
  for (const auto& [k, v] : m) out.emplace(k, nest(v, items, pos));
  return out;
}
template <class T, class L>
replace_leaves_t<std::optional<T>, L> nest(const std::optional<T>& o, const std::vector<L>& items,
                                           size_t& pos) {
  if (!o) return std::nullopt;
  return nest(*o, items, pos);
}

// The Jacobian trees from blocks[k][j] = d out_k / d x_j: one x-structured tree per output leaf,
// nested in the output's structure (just that tree for an Array output).
template <class Out, class In>
auto assemble(const Out& out, const In& x, const std::vector<std::vector<Array>>& blocks) {
  std::vector<In> per_output;
  for (const auto& row : blocks) per_output.push_back(tree_unflatten(x, row));
  size_t pos = 0;
  return nest(out, per_output, pos);
}
}  // namespace detail

// Reverse mode: the rows of each output leaf's Jacobian are the VJPs of its basis vectors (the
// other output leaves' cotangents zero).
template <class F>
auto jacrev(F f) {
  return [f](const auto& x) {
    const auto r = vjp(f, x);
    const auto& y = r.first;
    const auto& vjp_fn = r.second;
    const std::vector<Array> ys = tree_leaves(y), xs = tree_leaves(x);
    std::vector<std::vector<Array>> blocks;
    for (size_t k = 0; k < ys.size(); ++k) {
      const std::vector<Array> rows = vmap([vjp_fn, y, ys, k](const Array& ct) {
        std::vector<Array> cts;
        for (size_t i = 0; i < ys.size(); ++i)
          cts.push_back(i == k ? ct : numpy::zeros_like(ys[i]));
        return tree_leaves(std::get<0>(vjp_fn(tree_unflatten(y, cts))));
      })(detail::basis_of(ys[k].shape(), ys[k].dtype()));
      std::vector<Array> row;
      for (size_t j = 0; j < xs.size(); ++j)
        row.push_back(numpy::reshape(rows[j], detail::concat_shapes(ys[k].shape(), xs[j].shape())));
      blocks.push_back(std::move(row));
    }
    return detail::assemble(y, x, blocks);
  };
}

// Forward mode: the columns for each input leaf are the JVPs of its basis vectors (the other
// input leaves' tangents zero).
template <class F>
auto jacfwd(F f) {
  return [f](const auto& x) {
    using In = std::decay_t<decltype(x)>;
    const std::vector<Array> xs = tree_leaves(x);
    std::vector<std::vector<Array>> by_input;  // [j][k]
    std::optional<std::decay_t<decltype(f(x))>> structure;
    for (size_t j = 0; j < xs.size(); ++j) {
      const auto cols = vmap([f, x, xs, j](const Array& t) {
        std::vector<Array> ts;
        for (size_t i = 0; i < xs.size(); ++i) ts.push_back(i == j ? t : numpy::zeros_like(xs[i]));
        return jvp(f, std::tuple<In>(x), std::tuple<In>(tree_unflatten(x, ts))).second;
      })(detail::basis_of(xs[j].shape(), xs[j].dtype()));
      std::vector<Array> col;
      for (const Array& c : tree_leaves(cols)) {
        const Shape y_shape(c.shape().begin() + 1, c.shape().end());
        const Array mat =
            numpy::transpose(numpy::reshape(c, {xs[j].size(), num_elements(y_shape)}));
        col.push_back(numpy::reshape(mat, detail::concat_shapes(y_shape, xs[j].shape())));
      }
      by_input.push_back(std::move(col));
      if (!structure) structure = cols;
    }
    if (!structure) throw Error("jacfwd: the argument has no Array leaves");
    std::vector<std::vector<Array>> blocks(by_input[0].size());
    for (auto& col : by_input)
      for (size_t k = 0; k < col.size(); ++k) blocks[k].push_back(col[k]);
    return detail::assemble(*structure, x, blocks);
  };
}

// jax.jacobian is jacrev.
template <class F>
auto jacobian(F f) {
  return jacrev(std::move(f));
}

// The Hessian of a scalar function: forward over reverse, as JAX.
template <class F>
auto hessian(F f) {
  return jacfwd(jacrev(std::move(f)));
}

namespace detail {
// f as a function of its arguments I alone (the one, or a std::tuple of them), the others fixed
// at their values in `all`.
template <int... I, class F, class Tuple>
auto with_selected(F f, Tuple all) {
  return [f, all](const auto& sel) {
    Tuple a = all;
    if constexpr (sizeof...(I) == 1)
      ((std::get<I>(a) = sel), ...);
    else
      [&]<size_t... P>(std::index_sequence<P...>) {
        ((std::get<I>(a) = std::get<P>(sel)), ...);
      }
    (std::make_index_sequence<sizeof...(I)>{});
    return std::apply(f, a);
  };
}
template <int... I, class Tuple>
auto selected(const Tuple& all) {
  if constexpr (sizeof...(I) == 1)
    return std::get<I...>(all);
  else
    return std::make_tuple(std::get<I>(all)...);
}
}  // namespace detail

// jacrev(f, argnums<I...>)(args...): the Jacobian with respect to the arguments I, each a
// pytree. As JAX nests it: f's output structure, each leaf replaced by the argument's structure
// (one argnum) or a std::tuple of the arguments' structures (several), whose leaves are
// out_k.shape + x_j.shape.
template <class F, int... I>
auto jacrev(F f, Argnums<I...>) {
  static_assert(sizeof...(I) > 0 && ((I >= 0) && ...), "jacrev: argnums must be >= 0");
  return [f](const auto&... args) {
    const auto all = std::make_tuple(args...);
    return jacrev(detail::with_selected<I...>(f, all))(detail::selected<I...>(all));
  };
}

// jacfwd(f, argnums<I...>)(args...): the same from one JVP per element of each argument I (the
// other arguments' tangents zero).
template <class F, int... I>
auto jacfwd(F f, Argnums<I...>) {
  static_assert(sizeof...(I) > 0 && ((I >= 0) && ...), "jacfwd: argnums must be >= 0");
  return [f](const auto&... args) {
    const auto all = std::make_tuple(args...);
    return jacfwd(detail::with_selected<I...>(f, all))(detail::selected<I...>(all));
  };
}

// has_aux: f returns (y, aux), y a pytree; the result is (Jacobian(s), aux). f runs once more
// for aux.
template <class F, int... I>
auto jacrev(F f, Argnums<I...> a, HasAux) {
  return [f, a](const auto&... args) {
    auto value = [f](const auto&... xs) { return f(xs...).first; };
    return std::make_pair(jacrev(value, a)(args...), f(args...).second);
  };
}
template <class F, int... I>
auto jacfwd(F f, Argnums<I...> a, HasAux) {
  return [f, a](const auto&... args) {
    auto value = [f](const auto&... xs) { return f(xs...).first; };
    return std::make_pair(jacfwd(value, a)(args...), f(args...).second);
  };
}
template <class F, int... I>
auto jacobian(F f, Argnums<I...> a) {
  return jacrev(std::move(f), a);
}
template <class F, int... I>
auto jacobian(F f, Argnums<I...> a, HasAux h) {
  return jacrev(std::move(f), a, h);
}

// The Hessian of a scalar function with respect to the arguments I: for one argument the
// argument's structure of its structures; for several, JAX's tuple of tuples (H[i][j] =
// d2f / dx_i dx_j).
template <class F, int... I>
auto hessian(F f, Argnums<I...> a) {
  return jacfwd(jacrev(std::move(f), a), a);
}

}  // namespace cujax
