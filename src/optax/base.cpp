// GradientTransformation plumbing: paths, chain, identity, apply_updates, global_norm.
#include <limits>

#include "cujax/numpy.h"
#include "optax/internal.h"

namespace cujax::optax {

namespace jnp = cujax::numpy;

namespace detail {

std::string join_path(const std::string& prefix, const std::string& path) {
  if (prefix.empty()) return path;
  if (path.empty()) return prefix;
  return prefix + "." + path;
}

State sub_state(const State& state, const std::string& prefix) {
  State out;
  for (const auto& [path, a] : state) {
    if (path == prefix)
      out.set("", a);
    else if (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
             path[prefix.size()] == '.')
      out.set(path.substr(prefix.size() + 1), a);
  }
  return out;
}

void add_prefixed(State& out, const std::string& prefix, const State& inner) {
  for (const auto& [path, a] : inner) out.set(join_path(prefix, path), a);
}

const Array& entry(const State& state, const std::string& path, const char* who) {
  if (!state.contains(path))
    throw Error(std::string(who) + ": the optimizer state has no entry '" + path +
                "' (was it initialized with these params?)");
  return state.at(path);
}

State zeros_like(const State& params) {
  State out;
  for (const auto& [path, p] : params) out.set(path, jnp::zeros_like(p));
  return out;
}

Array zero_count() {
  return jnp::zeros({}, DType::I32);
}

Array safe_increment(const Array& count) {
  const int32_t max = std::numeric_limits<int32_t>::max();
  return jnp::where(count < max, count + 1, jnp::full({}, max, DType::I32));
}

}  // namespace detail

GradientTransformation chain(std::vector<GradientTransformation> transforms) {
  auto init = [transforms](const State& params) {
    State state;
    for (size_t i = 0; i < transforms.size(); ++i)
      detail::add_prefixed(state, std::to_string(i), transforms[i].init(params));
    return state;
  };
  auto update = [transforms](const State& updates, const OptState& state, const State* params) {
    State u = updates;
    State new_state;
    for (size_t i = 0; i < transforms.size(); ++i) {
      const std::string key = std::to_string(i);
      const State inner = detail::sub_state(state, key);
      auto [next, s] =
          params ? transforms[i].update(u, inner, *params) : transforms[i].update(u, inner);
      u = std::move(next);
      detail::add_prefixed(new_state, key, s);
    }
    return std::pair<State, OptState>(std::move(u), std::move(new_state));
  };
  return GradientTransformation(init, update);
}

GradientTransformation identity() {
  return GradientTransformation([](const State&) { return State(); },
                                [](const State& updates, const OptState&, const State*) {
                                  return std::pair<State, OptState>(updates, State());
                                });
}

State apply_updates(const State& params, const State& updates) {
  if (params.size() != updates.size())
    throw Error("apply_updates: " + std::to_string(params.size()) + " params but " +
                std::to_string(updates.size()) + " updates");
  State out;
  for (const auto& [path, p] : params) {
    if (!updates.contains(path)) throw Error("apply_updates: no update for param '" + path + "'");
    const Array& u = updates.at(path);
    if (u.shape() != p.shape())
      throw Error("apply_updates: param '" + path + "' has shape " + shape_to_string(p.shape()) +
                  " but its update " + shape_to_string(u.shape()));
    out.set(path, jnp::astype(p + u, p.dtype()));
  }
  return out;
}

Array global_norm(const State& updates) {
  Array total = jnp::zeros({}, DType::F32);
  bool first = true;
  for (const auto& [path, u] : updates) {
    Array s = jnp::sum(jnp::square(u));
    total = first ? s : total + s;
    first = false;
  }
  return jnp::sqrt(total);
}

}  // namespace cujax::optax
