// nnx.Rngs: named streams of PRNG keys (cujax::random, threefry as JAX). Each call of a stream
// returns fold_in(key, count) and increments count, as Flax NNX's RngStream does; key and count
// are RngState variables, so a stream used under jit is passed in and out like any state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cujax/nnx/module.h"

namespace cujax::nnx {

class RngStream : public Module {
 public:
  explicit RngStream(const Array& key);
  Array operator()();
  Variable* key;
  Variable* count;  // u32 scalar
};

class Rngs : public Module {
 public:
  // nnx.Rngs(seed): one "default" stream, used for every stream name.
  explicit Rngs(int64_t seed);
  // nnx.Rngs(params=0, dropout=1): Rngs({{"params", 0}, {"dropout", 1}}).
  explicit Rngs(const std::vector<std::pair<std::string, int64_t>>& seeds);
  // The next key of `name`'s stream, or of "default" when there is no such stream.
  Array operator()(const std::string& name);
  Array params() { return (*this)("params"); }
  Array dropout() { return (*this)("dropout"); }

 private:
  void add(const std::string& name, int64_t seed);
  std::vector<std::pair<std::string, std::unique_ptr<RngStream>>> streams_;
};

}  // namespace cujax::nnx
