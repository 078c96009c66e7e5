// nnx.Embed: embedding (num_embeddings, features), looked up by integer ids; attend() is the
// tied output head (query @ embedding^T).
#pragma once

#include <cstdint>
#include <optional>

#include "cujax/nn/initializers.h"
#include "cujax/nnx/module.h"
#include "cujax/nnx/rngs.h"

namespace cujax::nnx {

struct EmbedOptions {
  std::optional<DType> dtype;
  DType param_dtype = DType::F32;
  // Flax's default_embed_init: variance_scaling(1, "fan_in", "normal", out_axis=0).
  nn::initializers::Initializer embedding_init =
      nn::initializers::variance_scaling(1.0, "fan_in", "normal", {-2}, {0});
};

class Embed : public Module {
 public:
  Embed(int64_t num_embeddings, int64_t features, Rngs& rngs, const EmbedOptions& options = {});
  // embedding[ids] for integer ids of any shape: ids.shape + (features,).
  Array operator()(const Array& ids) const;
  // query (..., features) -> (..., num_embeddings).
  Array attend(const Array& query) const;
  int64_t num_embeddings, features;
  Variable* embedding;

 private:
  std::optional<DType> dtype_;
};

}  // namespace cujax::nnx
