// Trees ("pytrees"): nested structures whose leaves are Arrays. jit and the transformations
// take and return them. Supported nodes: Array, std::vector, std::array, std::tuple,
// std::pair, std::map<std::string, T>, std::optional, State (ordered path -> Array), and user
// structs registered with CUJAX_REGISTER_TREE(Type, field, ...). Any other value (numbers,
// strings, enums, ...) is a static leaf: it is part of the structure, and jit keys its cache
// on the value.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cujax/array.h"

namespace cujax {

// An ordered mapping from dotted paths ("blocks.0.attn.query.kernel") to arrays, as Flax NNX's
// State is. Iteration is in insertion order.
class State {
 public:
  void set(const std::string& path, Array value);
  const Array& at(const std::string& path) const;
  Array& at(const std::string& path);
  bool contains(const std::string& path) const { return index_.count(path) > 0; }
  size_t size() const { return entries_.size(); }
  auto begin() { return entries_.begin(); }
  auto end() { return entries_.end(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  std::vector<std::pair<std::string, Array>> entries_;
  std::map<std::string, size_t> index_;
};

// What a traversal sees: containers open and close, array leaves, static leaves.
class TreeVisitor {
 public:
  virtual ~TreeVisitor() = default;
  virtual void open(const std::string& kind) = 0;  // "list", "tuple", "dict", "struct Foo"...
  virtual void key(const std::string& k) = 0;      // the next child's key (dicts, structs)
  virtual void close() = 0;
  virtual void leaf(Array& a) = 0;
  virtual void static_leaf(const std::string& repr) = 0;
};

template <class T, class Enable = void>
struct TreeTraits {
  // Static leaf: anything printable with operator<<.
  static void visit(T& v, TreeVisitor& vis) {
    std::ostringstream s;
    if constexpr (requires(std::ostream & o) { o << v; }) {
      s << v;
    } else {
      s << "<" << typeid(T).name() << ">";
    }
    vis.static_leaf(s.str());
  }
};

template <class T>
void tree_visit(T& value, TreeVisitor& vis) {
  TreeTraits<std::remove_cv_t<T>>::visit(value, vis);
}

template <>
struct TreeTraits<Array> {
  static void visit(Array& a, TreeVisitor& vis) { vis.leaf(a); }
};

template <class T>
struct TreeTraits<std::vector<T>> {
  static void visit(std::vector<T>& v, TreeVisitor& vis) {
    vis.open("list" + std::to_string(v.size()));
    for (auto& x : v) tree_visit(x, vis);
    vis.close();
  }
};

template <class T, size_t N>
struct TreeTraits<std::array<T, N>> {
  static void visit(std::array<T, N>& v, TreeVisitor& vis) {
    vis.open("array" + std::to_string(N));
    for (auto& x : v) tree_visit(x, vis);
    vis.close();
  }
};

template <class... Ts>
struct TreeTraits<std::tuple<Ts...>> {
  static void visit(std::tuple<Ts...>& v, TreeVisitor& vis) {
    vis.open("tuple" + std::to_string(sizeof...(Ts)));
    std::apply([&](auto&... x) { (tree_visit(x, vis), ...); }, v);
    vis.close();
  }
};

template <class A, class B>
struct TreeTraits<std::pair<A, B>> {
  static void visit(std::pair<A, B>& v, TreeVisitor& vis) {
    vis.open("pair");
    tree_visit(v.first, vis);
    tree_visit(v.second, vis);
    vis.close();
  }
};

template <class T>
struct TreeTraits<std::map<std::string, T>> {
  static void visit(std::map<std::string, T>& m, TreeVisitor& vis) {
    vis.open("dict" + std::to_string(m.size()));
    for (auto& [k, x] : m) {
      vis.key(k);
      tree_visit(x, vis);
    }
    vis.close();
  }
};

template <class T>
struct TreeTraits<std::optional<T>> {
  static void visit(std::optional<T>& v, TreeVisitor& vis) {
    vis.open(v ? "some" : "none");
    if (v) tree_visit(*v, vis);
    vis.close();
  }
};

template <>
struct TreeTraits<State> {
  static void visit(State& s, TreeVisitor& vis) {
    vis.open("state" + std::to_string(s.size()));
    for (auto& [k, x] : s) {
      vis.key(k);
      vis.leaf(x);
    }
    vis.close();
  }
};

// The leaves of `tree` in traversal order.
template <class T>
std::vector<Array> tree_leaves(const T& tree) {
  struct Collect final : TreeVisitor {
    std::vector<Array> leaves;
    void open(const std::string&) override {}
    void key(const std::string&) override {}
    void close() override {}
    void leaf(Array& a) override { leaves.push_back(a); }
    void static_leaf(const std::string&) override {}
  } c;
  T copy = tree;
  tree_visit(copy, c);
  return std::move(c.leaves);
}

// The structure of `tree` with static leaves' values, for cache keys and error messages:
// "tuple2(*,list2(*,*),s:3)".
template <class T>
std::string tree_structure(const T& tree) {
  struct Describe final : TreeVisitor {
    std::string out;
    std::vector<bool> first{true};
    void sep() {
      if (!first.back()) out += ",";
      first.back() = false;
    }
    void open(const std::string& kind) override {
      sep();
      out += kind + "(";
      first.push_back(true);
    }
    void key(const std::string& k) override {
      sep();
      out += k + "=";
      first.back() = true;
    }
    void close() override {
      out += ")";
      first.pop_back();
    }
    void leaf(Array&) override {
      sep();
      out += "*";
    }
    void static_leaf(const std::string& repr) override {
      sep();
      out += "s:" + repr;
    }
  } d;
  T copy = tree;
  tree_visit(copy, d);
  return d.out;
}

namespace tree_detail {
template <class>
inline constexpr bool always_false = false;

template <class T, class F>
T map_leaves(const T& tree, F& fn) {
  struct Map final : TreeVisitor {
    F& f;
    explicit Map(F& fn_) : f(fn_) {}
    void open(const std::string&) override {}
    void key(const std::string&) override {}
    void close() override {}
    void leaf(Array& a) override { a = f(a); }
    void static_leaf(const std::string&) override {}
  } m(fn);
  T copy = tree;
  tree_visit(copy, m);
  return copy;
}

template <class>
using leaf_of = const Array&;
}  // namespace tree_detail

// jax.tree_util.tree_map(f, tree, *rest): a copy of `tree` with every Array leaf replaced by
// f(leaf, the leaves at the same place in `rest`...), in traversal order. The trees in `rest`
// must have tree's structure.
template <class F, class T, class... Rest>
T tree_map(F&& fn, const T& tree, const Rest&... rest) {
  if constexpr (!std::is_invocable_v<F&, Array&, tree_detail::leaf_of<Rest>...> &&
                std::is_invocable_v<T&, Array&>) {
    static_assert(tree_detail::always_false<F>,
                  "tree_map(f, tree): put the function first, as jax.tree_util.tree_map(f, tree) "
                  "takes it (this call passes the tree first)");
    return tree;
  } else if constexpr (sizeof...(Rest) == 0) {
    return tree_detail::map_leaves(tree, fn);
  } else {
    const std::string structure = tree_structure(tree);
    size_t position = 0;
    const std::vector<std::vector<Array>> others = {[&](const auto& other) {
      ++position;
      const std::string s = tree_structure(other);
      if (s != structure)
        throw Error("tree_map: tree " + std::to_string(position) + " has structure " + s +
                    ", but the first tree has " + structure);
      return tree_leaves(other);
    }(rest)...};
    size_t i = 0;
    auto apply = [&](Array& leaf) {
      Array out = [&]<size_t... K>(std::index_sequence<K...>) {
        return Array(fn(leaf, others[K][i]...));
      }
      (std::index_sequence_for<Rest...>{});
      ++i;
      return out;
    };
    return tree_detail::map_leaves(tree, apply);
  }
}

// A copy of `tree` whose Array leaves are taken from `leaves` in order.
template <class T>
T tree_unflatten(const T& structure, const std::vector<Array>& leaves) {
  size_t i = 0;
  T out = tree_map(
      [&](const Array&) {
        if (i >= leaves.size()) throw Error("tree_unflatten: too few leaves");
        return leaves[i++];
      },
      structure);
  if (i != leaves.size())
    throw Error("tree_unflatten: " + std::to_string(leaves.size()) + " leaves for a tree of " +
                std::to_string(i));
  return out;
}

}  // namespace cujax

// Registers a struct as a tree node whose children are the listed fields:
//   struct Params { Array w, b; int layers; };
//   CUJAX_REGISTER_TREE(Params, w, b, layers)
#define CUJAX_TREE_FIELD_(field) \
  vis.key(#field);               \
  ::cujax::tree_visit(v.field, vis);
#define CUJAX_TREE_EXPAND_(x) x
#define CUJAX_TREE_F1_(a) CUJAX_TREE_FIELD_(a)
#define CUJAX_TREE_F2_(a, ...) CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F1_(__VA_ARGS__))
#define CUJAX_TREE_F3_(a, ...) CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F2_(__VA_ARGS__))
#define CUJAX_TREE_F4_(a, ...) CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F3_(__VA_ARGS__))
#define CUJAX_TREE_F5_(a, ...) CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F4_(__VA_ARGS__))
#define CUJAX_TREE_F6_(a, ...) CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F5_(__VA_ARGS__))
#define CUJAX_TREE_F7_(a, ...) CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F6_(__VA_ARGS__))
#define CUJAX_TREE_F8_(a, ...) CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F7_(__VA_ARGS__))
#define CUJAX_TREE_F9_(a, ...) CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F8_(__VA_ARGS__))
#define CUJAX_TREE_F10_(a, ...) CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F9_(__VA_ARGS__))
#define CUJAX_TREE_F11_(a, ...) \
  CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F10_(__VA_ARGS__))
#define CUJAX_TREE_F12_(a, ...) \
  CUJAX_TREE_FIELD_(a) CUJAX_TREE_EXPAND_(CUJAX_TREE_F11_(__VA_ARGS__))
#define CUJAX_TREE_PICK_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, NAME, ...) NAME
#define CUJAX_TREE_FIELDS_(...)                                                       \
  CUJAX_TREE_EXPAND_(CUJAX_TREE_PICK_(                                                \
      __VA_ARGS__, CUJAX_TREE_F12_, CUJAX_TREE_F11_, CUJAX_TREE_F10_, CUJAX_TREE_F9_, \
      CUJAX_TREE_F8_, CUJAX_TREE_F7_, CUJAX_TREE_F6_, CUJAX_TREE_F5_, CUJAX_TREE_F4_, \
      CUJAX_TREE_F3_, CUJAX_TREE_F2_, CUJAX_TREE_F1_)(__VA_ARGS__))
#define CUJAX_REGISTER_TREE(Type, ...)                      \
  template <>                                               \
  struct cujax::TreeTraits<Type> {                          \
    static void visit(Type& v, ::cujax::TreeVisitor& vis) { \
      vis.open("struct " #Type);                            \
      CUJAX_TREE_FIELDS_(__VA_ARGS__)                       \
      vis.close();                                          \
    }                                                       \
  }
