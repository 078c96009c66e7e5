#include "cujax/models/transformer.h"

#include "cujax/core/error.h"
#include "cujax/lax.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"

namespace cujax::models {

namespace jnp = cujax::numpy;

void TransformerConfig::validate() const {
  const std::pair<const char*, int64_t> sizes[] = {
      {"vocab_size", vocab_size}, {"max_len", max_len},     {"d_model", d_model},
      {"num_layers", num_layers}, {"num_heads", num_heads}, {"d_ff", d_ff}};
  for (const auto& [field, value] : sizes)
    if (value <= 0)
      throw Error("transformer config '" + name + "': " + field + " must be positive, got " +
                  std::to_string(value));
  if (d_model % num_heads != 0)
    throw Error("transformer config '" + name + "': d_model " + std::to_string(d_model) +
                " is not divisible by num_heads " + std::to_string(num_heads));
}

json::Value TransformerConfig::to_json() const {
  json::Value v = json::Value::object();
  v.set("name", name);
  v.set("vocab_size", vocab_size);
  v.set("max_len", max_len);
  v.set("d_model", d_model);
  v.set("num_layers", num_layers);
  v.set("num_heads", num_heads);
  v.set("d_ff", d_ff);
  if (attention_implementation) v.set("attention_implementation", *attention_implementation);
  return v;
}

TransformerConfig TransformerConfig::from_json(const json::Value& v) {
  TransformerConfig c;
  c.name = v.at("name").as_string();
  c.vocab_size = v.at("vocab_size").as_int();
  c.max_len = v.at("max_len").as_int();
  c.d_model = v.at("d_model").as_int();
  c.num_layers = v.at("num_layers").as_int();
  c.num_heads = v.at("num_heads").as_int();
  c.d_ff = v.at("d_ff").as_int();
  if (const json::Value* impl = v.get("attention_implementation"))
    c.attention_implementation = impl->as_string();
  c.validate();
  return c;
}

TransformerConfig tiny_config() {
  TransformerConfig c;
  c.name = "tiny";
  return c;
}

TransformerConfig small_config() {
  TransformerConfig c;
  c.name = "small";
  c.max_len = 256;
  c.d_model = 384;
  c.num_layers = 6;
  c.num_heads = 6;
  c.d_ff = 1536;
  return c;
}

TransformerConfig gpt2_config() {
  TransformerConfig c;
  c.name = "gpt2";
  c.vocab_size = 50257;
  c.max_len = 1024;
  c.d_model = 768;
  c.num_layers = 12;
  c.num_heads = 12;
  c.d_ff = 3072;
  return c;
}

std::vector<std::string> config_names() {
  return {"tiny", "small", "gpt2"};
}

TransformerConfig config_by_name(const std::string& name) {
  if (name == "tiny") return tiny_config();
  if (name == "small") return small_config();
  if (name == "gpt2") return gpt2_config();
  throw Error("unknown config '" + name + "' (known: tiny, small, gpt2)");
}

Mlp::Mlp(int64_t d_model, int64_t d_ff, nnx::Rngs& rngs)
    : fc(d_model, d_ff, rngs), proj(d_ff, d_model, rngs) {
  child("fc", fc);
  child("proj", proj);
}

Array Mlp::operator()(const Array& x) const {
  return proj(nn::gelu(fc(x)));
}

namespace {

nnx::MultiHeadAttentionOptions attention_options(const TransformerConfig& config) {
  nnx::MultiHeadAttentionOptions o;
  const std::optional<std::string> implementation = config.attention_implementation;
  o.attention_fn = [implementation](const Array& q, const Array& k, const Array& v,
                                    const std::optional<Array>& bias,
                                    const std::optional<Array>& mask, std::optional<double> scale,
                                    bool, const std::optional<std::string>&) {
    // (B, T, N, H) against (B, S, N, H): a whole sequence when T == S.
    const bool causal = q.shape()[1] == k.shape()[1];
    return nn::dot_product_attention(q, k, v, bias, mask, scale, causal, implementation);
  };
  return o;
}

}  // namespace

Block::Block(const TransformerConfig& config, nnx::Rngs& rngs)
    : ln1(config.d_model, rngs),
      attn(config.num_heads, config.d_model, rngs, attention_options(config)),
      ln2(config.d_model, rngs),
      mlp(config.d_model, config.d_ff, rngs) {
  child("ln1", ln1);
  child("attn", attn);
  child("ln2", ln2);
  child("mlp", mlp);
}

Array Block::operator()(const Array& x, bool decode) {
  const Array h = x + attn(ln1(x), std::nullopt, std::nullopt, std::nullopt, decode);
  return h + mlp(ln2(h));
}

namespace {

const TransformerConfig& validated(const TransformerConfig& config) {
  config.validate();
  return config;
}

}  // namespace

TransformerLM::TransformerLM(const TransformerConfig& c, nnx::Rngs& rngs)
    : config(validated(c)),
      embed(c.vocab_size, c.d_model, rngs),
      pos_embed(c.max_len, c.d_model, rngs),
      ln_f(c.d_model, rngs) {
  child("embed", embed);
  child("pos_embed", pos_embed);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    blocks.push_back(std::make_unique<Block>(c, rngs));
    child("blocks." + std::to_string(i), *blocks.back());
  }
  child("ln_f", ln_f);
}

Array TransformerLM::head(const Array& x) const {
  return embed.attend(ln_f(x));
}

Array TransformerLM::operator()(const Array& tokens) {
  if (tokens.ndim() != 2)
    throw Error("TransformerLM: tokens must be (batch, seq_len), got " +
                shape_to_string(tokens.shape()));
  const int64_t seq_len = tokens.shape()[1];
  if (seq_len > config.max_len)
    throw Error("TransformerLM: sequence length " + std::to_string(seq_len) +
                " exceeds the model's max_len " + std::to_string(config.max_len));
  Array x = embed(tokens) + pos_embed(jnp::arange(seq_len));
  for (auto& block : blocks) x = (*block)(x);
  return head(x);
}

void TransformerLM::init_cache(int64_t batch) {
  for (auto& block : blocks) block->attn.init_cache({batch, config.max_len, config.d_model});
}

Array TransformerLM::decode_step(const Array& tokens, const Array& position) {
  if (tokens.ndim() != 2 || tokens.shape()[1] != 1)
    throw Error("TransformerLM.decode_step: tokens must be (batch, 1), got " +
                shape_to_string(tokens.shape()));
  Array x = embed(tokens) + pos_embed(jnp::reshape(position, {1}));
  for (auto& block : blocks) x = (*block)(x, true);
  return jnp::squeeze(head(x), std::vector<int64_t>{1});
}

std::vector<std::pair<std::string, ShapeDtype>> parameter_shapes(const TransformerConfig& config) {
  return nnx::eval_shape(
      [&] {
        nnx::Rngs rngs(0);
        return std::unique_ptr<nnx::Module>(new TransformerLM(config, rngs));
      },
      nnx::VariableKind::Param);
}

}  // namespace cujax::models
