// The small transformer the tests build: two layers of two heads, d_ff = 2 * d_model, and the
// vocabulary, context and width each test needs.
#pragma once

#include <cstdint>

#include "cujax/models/transformer.h"

namespace cujax::testutil {

inline models::TransformerConfig small_transformer(int64_t vocab_size, int64_t max_len,
                                                   int64_t d_model) {
  models::TransformerConfig c;
  c.name = "test";
  c.vocab_size = vocab_size;
  c.max_len = max_len;
  c.d_model = d_model;
  c.num_layers = 2;
  c.num_heads = 2;
  c.d_ff = 2 * d_model;
  return c;
}

}  // namespace cujax::testutil
