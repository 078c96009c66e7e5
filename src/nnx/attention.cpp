#include "cujax/nnx/attention.h"

#include "cujax/lax.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"

namespace cujax::nnx {

namespace jnp = cujax::numpy;

namespace {

int64_t checked_head_dim(int64_t num_heads, int64_t qkv_features) {
  if (num_heads <= 0 || qkv_features % num_heads != 0)
    throw Error("nnx.MultiHeadAttention: qkv_features " + std::to_string(qkv_features) +
                " is not divisible by num_heads " + std::to_string(num_heads));
  return qkv_features / num_heads;
}

LinearOptions projection(const MultiHeadAttentionOptions& o) {
  LinearOptions l;
  l.use_bias = o.use_bias;
  l.dtype = o.dtype;
  l.param_dtype = o.param_dtype;
  l.kernel_init = o.kernel_init;
  l.bias_init = o.bias_init;
  return l;
}

Array default_attention(const Array& q, const Array& k, const Array& v,
                        const std::optional<Array>& bias, const std::optional<Array>& mask,
                        std::optional<double> scale, bool causal,
                        const std::optional<std::string>& implementation) {
  return nn::dot_product_attention(q, k, v, bias, mask, scale, causal, implementation);
}

}  // namespace

MultiHeadAttention::MultiHeadAttention(int64_t heads, int64_t in, Rngs& rngs,
                                       const MultiHeadAttentionOptions& o)
    : num_heads(heads),
      in_features(in),
      qkv_features(o.qkv_features.value_or(in)),
      out_features(o.out_features.value_or(in)),
      head_dim(checked_head_dim(heads, qkv_features)),
      decode(o.decode),
      attention_fn(o.attention_fn ? o.attention_fn : AttentionFn(default_attention)),
      query({in}, {heads, head_dim}, rngs, {-1}, projection(o)),
      key({o.in_kv_features.value_or(in)}, {heads, head_dim}, rngs, {-1}, projection(o)),
      value({o.in_kv_features.value_or(in)}, {heads, head_dim}, rngs, {-1}, projection(o)),
      out({heads, head_dim}, {out_features}, rngs, {-2, -1}, projection(o)) {
  child("query", query);
  child("key", key);
  child("value", value);
  child("out", out);
}

void MultiHeadAttention::init_cache(const Shape& input_shape, DType dtype) {
  if (input_shape.size() < 2)
    throw Error("nnx.MultiHeadAttention.init_cache: input shape " + shape_to_string(input_shape) +
                " needs (batch..., max_len, features)");
  Shape cache(input_shape.begin(), input_shape.end() - 1);
  cache.push_back(num_heads);
  cache.push_back(head_dim);
  cached_key = variable("cached_key", VariableKind::Cache, jnp::zeros(cache, dtype));
  cached_value = variable("cached_value", VariableKind::Cache, jnp::zeros(cache, dtype));
  cache_index = variable("cache_index", VariableKind::Cache, jnp::zeros({}, DType::I32));
}

Array MultiHeadAttention::operator()(const Array& inputs_q, const std::optional<Array>& inputs_k,
                                     const std::optional<Array>& inputs_v,
                                     const std::optional<Array>& mask,
                                     std::optional<bool> decode_now) {
  const Array& xk = inputs_k ? *inputs_k : inputs_q;
  const Array& xv = inputs_v ? *inputs_v : xk;
  const Array q = query(inputs_q);
  Array k = key(xk);
  Array v = value(xv);
  std::optional<Array> m = mask;
  if (decode_now.value_or(decode)) {
    if (!cached_key)
      throw Error(
          "nnx.MultiHeadAttention: autoregressive cache not initialized, call "
          "init_cache first");
    const Shape cache = cached_key->value.shape();  // (batch..., max_len, heads, head_dim)
    Shape expected(cache.begin(), cache.end() - 3);
    expected.insert(expected.end(), {1, num_heads, head_dim});
    if (q.shape() != expected)
      throw Error(
          "nnx.MultiHeadAttention: autoregressive cache shape error, expected query "
          "shape " +
          shape_to_string(expected) + " instead got " + shape_to_string(q.shape()));
    const int64_t max_len = cache[cache.size() - 3];
    const Array index = cache_index->value;
    const Array zero = jnp::zeros({}, DType::I32);
    std::vector<Array> starts(cache.size() - 3, zero);
    starts.insert(starts.end(), {index, zero, zero});
    k = lax::dynamic_update_slice(cached_key->value, jnp::astype(k, cached_key->value.dtype()),
                                  starts);
    v = lax::dynamic_update_slice(cached_value->value, jnp::astype(v, cached_value->value.dtype()),
                                  starts);
    cached_key->value = k;
    cached_value->value = v;
    cache_index->value = jnp::add(index, 1);
    // Attend to the positions written so far: arange(max_len) <= index.
    Shape mask_shape(cache.begin(), cache.end() - 3);
    mask_shape.insert(mask_shape.end(), {1, 1, max_len});
    const Array filled =
        jnp::broadcast_to(jnp::less_equal(jnp::arange(max_len), index), mask_shape);
    m = m ? jnp::logical_and(*m, filled) : filled;
    k = jnp::astype(k, q.dtype());
    v = jnp::astype(v, q.dtype());
  }
  const Array x = attention_fn(q, k, v, std::nullopt, m, std::nullopt, false, std::nullopt);
  return out(x);
}

}  // namespace cujax::nnx
