#include "cujax/nnx/rngs.h"

#include "cujax/numpy.h"
#include "cujax/random.h"

namespace cujax::nnx {

RngStream::RngStream(const Array& k)
    : key(variable("key", VariableKind::RngState, k)),
      count(variable("count", VariableKind::RngState, numpy::zeros({}, DType::U32))) {}

Array RngStream::operator()() {
  Array out = random::fold_in(key->value, count->value);
  count->value = numpy::add(count->value, numpy::ones({}, DType::U32));
  return out;
}

Rngs::Rngs(int64_t seed) {
  add("default", seed);
}

Rngs::Rngs(const std::vector<std::pair<std::string, int64_t>>& seeds) {
  if (seeds.empty()) throw Error("nnx.Rngs: needs at least one stream");
  for (const auto& [name, seed] : seeds) add(name, seed);
}

void Rngs::add(const std::string& name, int64_t seed) {
  streams_.emplace_back(name, std::make_unique<RngStream>(random::PRNGKey(seed)));
  child(name, *streams_.back().second);
}

Array Rngs::operator()(const std::string& name) {
  RngStream* fallback = nullptr;
  for (auto& [n, s] : streams_) {
    if (n == name) return (*s)();
    if (n == "default") fallback = s.get();
  }
  if (!fallback) throw Error("nnx.Rngs: no stream '" + name + "' and no 'default' stream");
  return (*fallback)();
}

}  // namespace cujax::nnx
