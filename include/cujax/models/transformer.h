// A causal decoder-only transformer language model (GPT-2's architecture) built from nnx
// modules, so its parameters have Flax NNX paths and shapes:
//
//   embed.embedding                 (vocab_size, d_model)   token embedding, also the output head
//   pos_embed.embedding             (max_len, d_model)      learned positions
//   blocks.<i>.ln1.{scale,bias}     (d_model,)              pre-norm of the attention
//   blocks.<i>.attn.{query,key,value}.kernel (d_model, num_heads, head_dim), .bias (num_heads,
//   head_dim) blocks.<i>.attn.out.kernel      (num_heads, head_dim, d_model), .bias (d_model,)
//   blocks.<i>.ln2.{scale,bias}     (d_model,)              pre-norm of the MLP
//   blocks.<i>.mlp.fc.{kernel,bias} (d_model, d_ff), (d_ff,)
//   blocks.<i>.mlp.proj.{kernel,bias} (d_ff, d_model), (d_model,)
//   ln_f.{scale,bias}               (d_model,)              final norm
//
// A block is x + attn(ln1(x)), then x + proj(gelu(fc(ln2(x)))); logits are
// ln_f(x) @ embed.embedding^T (tied, as GPT-2). Attention is causal: MultiHeadAttention's
// attention_fn is nn::dot_product_attention with is_causal whenever the query and key lengths
// are equal (a whole sequence); in decode mode each call is one position and the KV cache's
// mask already limits it to the positions written so far.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cujax/core/json.h"
#include "cujax/nnx.h"

namespace cujax::models {

struct TransformerConfig {
  std::string name = "custom";
  int64_t vocab_size = 256;
  int64_t max_len = 128;  // the longest sequence: rows of pos_embed
  int64_t d_model = 128;
  int64_t num_layers = 4;
  int64_t num_heads = 4;
  int64_t d_ff = 512;
  std::optional<std::string> attention_implementation;  // for dot_product_attention

  int64_t head_dim() const { return d_model / num_heads; }
  // Throws naming the field when a size is not positive or d_model % num_heads != 0.
  void validate() const;
  json::Value to_json() const;
  // Reads what to_json writes; throws naming a missing or mistyped field.
  static TransformerConfig from_json(const json::Value& value);
};

// Presets: "tiny" (0.8M parameters, trains in minutes on 2 CPU cores), "small" (10.8M), "gpt2"
// (124,439,808 parameters: GPT-2 small's shapes, vocabulary 50257, for a GPU).
TransformerConfig tiny_config();
TransformerConfig small_config();
TransformerConfig gpt2_config();
// A preset by name; throws listing the names for an unknown one.
TransformerConfig config_by_name(const std::string& name);
std::vector<std::string> config_names();

class Mlp : public nnx::Module {
 public:
  Mlp(int64_t d_model, int64_t d_ff, nnx::Rngs& rngs);
  Array operator()(const Array& x) const;
  nnx::Linear fc, proj;
};

class Block : public nnx::Module {
 public:
  Block(const TransformerConfig& config, nnx::Rngs& rngs);
  // decode: one position against the attention's KV cache.
  Array operator()(const Array& x, bool decode = false);
  nnx::LayerNorm ln1;
  nnx::MultiHeadAttention attn;
  nnx::LayerNorm ln2;
  Mlp mlp;
};

class TransformerLM : public nnx::Module {
 public:
  TransformerLM(const TransformerConfig& config, nnx::Rngs& rngs);

  // tokens int (B, T) with T <= max_len -> logits f32 (B, T, vocab_size).
  Array operator()(const Array& tokens);
  // Decoding: allocates each attention layer's KV cache (Cache variables) for `batch`
  // sequences of up to max_len tokens; decode_step then takes one token per sequence.
  void init_cache(int64_t batch);
  // tokens (B, 1) at `position` (an i32 scalar, the number of tokens already decoded) ->
  // logits (B, vocab_size); updates the caches.
  Array decode_step(const Array& tokens, const Array& position);

  TransformerConfig config;
  nnx::Embed embed, pos_embed;
  std::vector<std::unique_ptr<Block>> blocks;
  nnx::LayerNorm ln_f;

 private:
  Array head(const Array& x) const;
};

// The parameters of `config` without computing them: (path, shape and dtype) in state order.
std::vector<std::pair<std::string, ShapeDtype>> parameter_shapes(const TransformerConfig& config);

}  // namespace cujax::models
