#include "cujax/serve/steps.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "cujax/control_flow.h"
#include "cujax/core/json.h"
#include "cujax/core/npy.h"
#include "cujax/core/sha256.h"
#include "cujax/export.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/metrics_log.h"
#include "cujax/models/lm.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "cujax/trace/trace.h"
#include "cujax/vmap.h"

namespace cujax::serve {

namespace jnp = cujax::numpy;

namespace {

std::string key_path(size_t layer) {
  return "blocks." + std::to_string(layer) + ".key";
}
std::string value_path(size_t layer) {
  return "blocks." + std::to_string(layer) + ".value";
}

// Whether each value of x (B, V) is among the k (B, 1) largest of its row: x >= the row's k-th
// largest value, as models::generate keeps them (ties kept; k < 1 or k >= V: all). The k-th
// value is found by bisecting the values' order-preserving u32 codes, 32 rounds of a count
// over the row, rather than by sorting each row, which took most of a 4-slot decode step.
Array in_top_k(const Array& x, const Array& k) {
  const Array bits = lax::bitcast_convert_type(x, DType::I32);
  // Non-negative floats order as their bits, negative ones in reverse; -0 and +0 share a code.
  const Array ordered =
      jnp::where(jnp::less(bits, 0), jnp::bitwise_xor(bits, 0x7fffffff) + 1, bits);
  const Array code = lax::bitcast_convert_type(
      jnp::bitwise_xor(ordered, std::numeric_limits<int32_t>::min()), DType::U32);
  // [lo, hi] holds the k-th largest code (at least k codes are >= lo); each round halves it, and
  // after 32 rounds lo is that code.
  using Bounds = std::pair<Array, Array>;
  const Shape rows{x.shape()[0], 1};
  const Bounds init{jnp::zeros(rows, DType::U32),
                    jnp::full(rows, std::numeric_limits<uint32_t>::max(), DType::U32)};
  const Array one = jnp::ones(rows, DType::U32);
  const Array kth = lax::fori_loop(
                        0, 32,
                        [&](const Array&, const Bounds& b) {
                          const auto& [lo, hi] = b;
                          const Array mid = lo + lax::shift_right_logical(hi - lo, one) + one;
                          const Array count = jnp::sum(
                              jnp::astype(jnp::greater_equal(code, mid), DType::I32), {1}, true);
                          const Array ok = jnp::greater_equal(count, k);
                          return Bounds{jnp::where(ok, mid, lo), jnp::where(ok, hi, mid - one)};
                        },
                        init)
                        .first;
  return jnp::logical_or(jnp::less(k, 1), jnp::greater_equal(code, kth));
}

// jax.random's Threefry-2x32 hash of counts (x0, x1) under keys (k0, k1), all u32 of one shape,
// as one op: the custom call JAX lowers it to on GPUs, which the cpu backend also runs as one
// loop over the elements. random's unrolled rounds are ~200 element-wise ops per hash, each a
// kernel of its own on the cpu backend (it fuses float ops only), and were most of a step.
std::pair<Array, Array> threefry2x32(const Array& k0, const Array& k1, const Array& x0,
                                     const Array& x1) {
  trace::OpSpec spec;
  spec.name = "stablehlo.custom_call";
  spec.attributes.push_back(
      {"call_target_name", ir::Attribute::string_attr("cu_threefry2x32_ffi")});
  const ir::Type bits = ir::Type::tensor(x0.shape(), DType::U32);
  spec.result_types = {bits, bits};
  const std::vector<Array> out = trace::bind(spec, {k0, k1, x0, x1});
  return {out[0], out[1]};
}

Array u32(const Array& x) {
  return lax::convert_element_type(x, DType::U32);
}

Array full_u32(const Shape& shape, double v) {
  return lax::full(shape, v, DType::U32);
}

}  // namespace

Array gumbel_noise(const Array& seeds, const Array& positions, int64_t vocab) {
  const int64_t batch = seeds.shape()[0];
  const Shape slots{batch};
  // fold_in(PRNGKey(seed), position + 1): the hash of the counts (0, position + 1) under the key
  // (0, seed).
  const auto [key0, key1] =
      threefry2x32(full_u32(slots, 0), u32(seeds), full_u32(slots, 0), u32(positions + 1));
  // random_bits(key, 32, (vocab,)) in the counter layout random uses now.
  const bool partitionable = random::threefry_partitionable();
  const int64_t width = partitionable ? vocab : (vocab + 1) / 2;
  const Shape wide{batch, width};
  const auto at_slot = [&](const Array& k) { return lax::broadcast_in_dim(k, wide, {0}); };
  const Array count = lax::broadcasted_iota(DType::U32, wide, 1);
  Array bits;
  if (partitionable) {
    // Counts (0, i) for element i; the bits are the two words xor-ed.
    const auto [b0, b1] = threefry2x32(at_slot(key0), at_slot(key1), full_u32(wide, 0), count);
    bits = lax::bitwise_xor(b0, b1);
  } else {
    // Counts (i, i + width) give elements i and i + width (the count past an odd vocab is 0).
    const Array upper = lax::add(count, full_u32(wide, static_cast<double>(width)));
    const Array past = lax::ge(upper, full_u32(wide, static_cast<double>(vocab)));
    const auto [b0, b1] = threefry2x32(at_slot(key0), at_slot(key1), count,
                                       lax::select(past, full_u32(wide, 0), upper));
    bits = lax::slice(lax::concatenate({b0, b1}, 1), {0, 0}, {batch, vocab});
  }
  // uniform(key, (vocab,), f32, tiny, 1) and gumbel's -log(-log(u)), op for op as random's.
  const Shape shape{batch, vocab};
  const Array floats = lax::sub(
      lax::bitcast_convert_type(lax::bitwise_or(lax::shift_right_logical(bits, full_u32(shape, 9)),
                                                full_u32(shape, 0x3F800000)),
                                DType::F32),
      lax::full(shape, 1.0, DType::F32));
  const Array lo = lax::full(shape, std::ldexp(1.0, -126), DType::F32);
  const Array hi = lax::full(shape, 1.0, DType::F32);
  const Array u = lax::max(lo, lax::add(lax::mul(floats, lax::sub(hi, lo)), lo));
  return lax::neg(lax::log(lax::neg(lax::log(u))));
}

// Each row's argmax of x (B, V) as i32 (B,), exactly as lax::argmax gives it: the first of equal
// maxima, or the row's first NaN where it holds one (the max is then NaN and equals nothing).
// A max and a min over the rows, which the backend fuses with the compares around them, where
// argmax's variadic reduce ran its comparator region per element (most of a 4-slot step's growth
// over a 1-slot one). Indices are exact in f32 up to 2^24; longer rows take lax::argmax.
Array row_argmax(const Array& x) {
  const int64_t vocab = x.shape()[1];
  if (vocab > (int64_t{1} << 24)) return jnp::astype(jnp::argmax(x, 1), DType::I32);
  const Array index = lax::broadcasted_iota(DType::F32, x.shape(), 1);
  const Array top = jnp::max(x, {1}, true);
  const Array hit = jnp::logical_or(jnp::equal(x, top), jnp::not_equal(x, x));
  return jnp::astype(jnp::min(jnp::where(hit, index, static_cast<float>(vocab)), {1}), DType::I32);
}

namespace {

// logits (B, V) of the tokens at `positions` (B,) -> the tokens at positions + 1, drawn as
// models::generate's sample() draws them, with the seed, temperature, k and p as values per
// slot.
Array sample(const Array& logits, const Array& positions, const Array& seeds,
             const Array& temperatures, const Array& top_k, const Array& top_p) {
  const int64_t batch = logits.shape()[0];
  const Array sampled = jnp::less(0.0f, temperatures);
  const Array none = jnp::zeros(Shape{batch}, DType::I32);
  // Each side runs only when a slot needs it: the greedy argmax when a slot has temperature 0,
  // the draws when one has more.
  const Array greedy = lax::cond(
      jnp::all(sampled), [&](const Array&) { return none; },
      [](const Array& x) { return row_argmax(x); }, logits);
  const Array temp = jnp::reshape(temperatures, Shape{batch, 1});
  const Array scaled = logits / jnp::where(jnp::less(0.0f, temp), temp, 1.0f);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // The k-th value's 32 rounds only run when a slot asks for 0 < k < V: otherwise every value
  // is kept (a few tenths of a ms per step, more with every slot).
  const int64_t vocab = logits.shape()[1];
  const Array drawn = lax::cond(
      jnp::any(sampled),
      [&](const Array& x, const Array& k, const Array& p) {
        const Array top = lax::cond(
            jnp::all(jnp::logical_or(jnp::less(k, 1), jnp::greater_equal(k, vocab))),
            [](const Array& y, const Array&) { return y; },
            [&](const Array& y, const Array& kk) {
              return jnp::where(in_top_k(y, jnp::reshape(kk, Shape{batch, 1})), y, -kInf);
            },
            x, k);
        // The nucleus's 32 rounds only run when a slot asks for one (a few tenths of a ms per
        // step).
        const Array masked = lax::cond(
            jnp::all(jnp::greater_equal(p, 1.0f)), [](const Array& y, const Array&) { return y; },
            [&](const Array& y, const Array& pp) {
              return jnp::where(models::top_p_mask(y, jnp::reshape(pp, Shape{batch, 1})), y, -kInf);
            },
            top, p);
        // random::categorical's draw: the argmax of the logits plus Gumbel noise.
        return row_argmax(lax::add(gumbel_noise(seeds, positions, vocab), masked));
      },
      [&](const Array&, const Array&, const Array&) { return none; }, scaled, top_k, top_p);
  return jnp::where(sampled, drawn, greedy);
}

// Each slot's new key or value (B, 1, heads, head_dim) written into its rows of the cache
// (B, heads, max_seq, head_dim) at its own position: a dynamic_update_slice per slot, mapped
// over the slots, which vmap turns into one scatter of B windows, done in place on the donated
// cache. Only the B new rows are written, where a `where` over a one-hot position mask rewrote
// the whole cache every step.
Array write_at(const Array& cache, const Array& kv, const Array& positions) {
  const int64_t batch = kv.shape()[0], heads = kv.shape()[2], head_dim = kv.shape()[3];
  // (B, 1, N, H) and (B, N, 1, H) hold their elements in the same order.
  const Array rows = jnp::reshape(kv, Shape{batch, heads, 1, head_dim});
  const auto write = vmap([](const Array& slot, const Array& row, const Array& position) {
    const Array zero = jnp::zeros({}, DType::I32);
    return lax::dynamic_update_slice(slot, row, {zero, position, zero});
  });
  return write(cache, rows, positions);
}

// One query per slot q (B, 1, N, H) against the slot's cached keys and values (B, N, S, H),
// positions not `visible` (B, 1, S) masked: dot_product_attention's xla form (f32 logits,
// scaled, masked with -0.7 * max float, softmax), with each (slot, head)'s S keys and values
// read in place as one contiguous (S, H) matrix. The model's attention takes (B, S, N, H) and
// copied every slot's whole cache into a transposed layout per layer and step.
Array decode_attention(const Array& q, const Array& k, const Array& v, const Array& visible) {
  const int64_t batch = k.shape()[0], heads = k.shape()[1], head_dim = k.shape()[3];
  const Array query = jnp::reshape(q, Shape{batch, heads, head_dim});
  lax::DotDimensionNumbers qk;
  qk.lhs_batch_dimensions = {0, 1};
  qk.rhs_batch_dimensions = {0, 1};
  qk.lhs_contracting_dimensions = {2};
  qk.rhs_contracting_dimensions = {3};
  const Array logits = lax::dot_general(query, k, qk, DType::F32);  // (B, N, S)
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const Array masked =
      jnp::where(visible, logits * scale, -0.7f * std::numeric_limits<float>::max());
  const Array probs = nn::softmax(masked, -1);
  lax::DotDimensionNumbers pv;
  pv.lhs_batch_dimensions = {0, 1};
  pv.rhs_batch_dimensions = {0, 1};
  pv.lhs_contracting_dimensions = {2};
  pv.rhs_contracting_dimensions = {2};
  return jnp::reshape(lax::dot_general(probs, v, pv), Shape{batch, 1, heads, head_dim});
}

// One decode step of every slot: tokens (B, 1) at positions (B,) -> the next tokens (B,) and
// the cache with each slot's key and value written at its own position. The blocks' arithmetic
// is Block::operator()'s with decode_attention for the cache's layout: every matrix product
// of the weights is one product for all B slots (M = B rows), so the weights are read once per
// step; only the cache write, attention and the mask are per slot.
std::pair<Array, State> decode_fn(models::TransformerLM& model, const State& params,
                                  const State& cache, const Array& tokens, const Array& positions,
                                  const Array& seeds, const Array& temperatures, const Array& top_k,
                                  const Array& top_p) {
  const int64_t batch = tokens.shape()[0], d_model = model.config.d_model;
  const int64_t max_seq = cache.at(key_path(0)).shape()[2];
  State new_cache;
  const Array logits = nnx::functional_call(model, params, [&] {
    const Array slots = jnp::arange(max_seq, DType::I32);
    // visible (B, 1, S): key_pos <= position.
    const Array visible = jnp::reshape(
        jnp::less_equal(slots, jnp::reshape(positions, Shape{batch, 1})), Shape{batch, 1, max_seq});
    Array x =
        model.embed(tokens) + jnp::reshape(model.pos_embed(positions), Shape{batch, 1, d_model});
    for (size_t i = 0; i < model.blocks.size(); ++i) {
      models::Block& block = *model.blocks[i];
      nnx::MultiHeadAttention& attn = block.attn;
      const Array h = block.ln1(x);
      const Array k = write_at(cache.at(key_path(i)), attn.key(h), positions);
      const Array v = write_at(cache.at(value_path(i)), attn.value(h), positions);
      new_cache.set(key_path(i), k);
      new_cache.set(value_path(i), v);
      x = x + attn.out(decode_attention(attn.query(h), k, v, visible));
      x = x + block.mlp(block.ln2(x));
    }
    return jnp::reshape(model.embed.attend(model.ln_f(x)), Shape{batch, model.config.vocab_size});
  });
  return {sample(logits, positions, seeds, temperatures, top_k, top_p), std::move(new_cache)};
}

// Prefill of one slot: tokens (1, L) (a prompt of `length` tokens, padded to the bucket L) ->
// the token after the prompt (1,) and the cache with the slot's rows [0, L) written. The
// forward pass is causal, so the padding never reaches the prompt's positions; the keys and
// values it leaves past the prompt are masked and then overwritten by decoding.
std::pair<Array, State> prefill_fn(models::TransformerLM& model, const State& params,
                                   const State& cache, const Array& tokens, const Array& slot,
                                   const Array& length, const Array& seeds,
                                   const Array& temperatures, const Array& top_k,
                                   const Array& top_p) {
  const int64_t seq = tokens.shape()[1], vocab = model.config.vocab_size;
  const int64_t d_model = model.config.d_model;
  const Array zero = jnp::zeros({}, DType::I32);
  State new_cache;
  const Array logits = nnx::functional_call(model, params, [&] {
    Array x = model.embed(tokens) + model.pos_embed(jnp::arange(seq, DType::I32));
    for (size_t i = 0; i < model.blocks.size(); ++i) {
      models::Block& block = *model.blocks[i];
      nnx::MultiHeadAttention& attn = block.attn;
      const Array h = block.ln1(x);
      const Array k = attn.key(h), v = attn.value(h);
      // The cache is (B, N, S, H): the slot's (1, L, N, H) goes in as (1, N, L, H).
      const std::vector<Array> at = {slot, zero, zero, zero};
      const auto rows = [](const Array& a) {
        return jnp::transpose(a, std::vector<int64_t>{0, 2, 1, 3});
      };
      new_cache.set(key_path(i), lax::dynamic_update_slice(cache.at(key_path(i)), rows(k), at));
      new_cache.set(value_path(i), lax::dynamic_update_slice(cache.at(value_path(i)), rows(v), at));
      // Query and key lengths are equal: the model's attention_fn is causal.
      x = x + attn.out(attn.attention_fn(attn.query(h), k, v, std::nullopt, std::nullopt,
                                         std::nullopt, false, std::nullopt));
      x = x + block.mlp(block.ln2(x));
    }
    // Only the prompt's last position is sampled: the head runs on it alone (layer norm is per
    // position), not on all L.
    const Array last = lax::dynamic_slice(x, {zero, length - 1, zero}, {1, 1, d_model});
    return jnp::reshape(model.embed.attend(model.ln_f(last)), Shape{1, vocab});
  });
  return {sample(logits, jnp::reshape(length - 1, Shape{1}), seeds, temperatures, top_k, top_p),
          std::move(new_cache)};
}

// The jitted functions take the parameters first, so that the exported ones do too and the
// bundle stores them once rather than as constants of every module.
auto jit_decode(models::TransformerLM& model) {
  JitOptions o;
  o.name = "serve_decode_step";
  o.donate_argnums = {1};
  o.arg_names = {"params", "cache",        "tokens", "positions",
                 "seeds",  "temperatures", "top_k",  "top_p"};
  return jit(
      [&model](const State& params, const State& cache, const Array& tokens, const Array& positions,
               const Array& seeds, const Array& temperatures, const Array& top_k,
               const Array& top_p) {
        return decode_fn(model, params, cache, tokens, positions, seeds, temperatures, top_k,
                         top_p);
      },
      o);
}

auto jit_prefill(models::TransformerLM& model) {
  JitOptions o;
  o.name = "serve_prefill";
  o.donate_argnums = {1};
  o.arg_names = {"params", "cache",        "tokens", "slot", "length",
                 "seeds",  "temperatures", "top_k",  "top_p"};
  return jit(
      [&model](const State& params, const State& cache, const Array& tokens, const Array& slot,
               const Array& length, const Array& seeds, const Array& temperatures,
               const Array& top_k, const Array& top_p) {
        return prefill_fn(model, params, cache, tokens, slot, length, seeds, temperatures, top_k,
                          top_p);
      },
      o);
}

int64_t checked_max_seq(const models::TransformerLM& model, std::optional<int64_t> max_seq,
                        int64_t max_batch) {
  if (max_batch < 1) throw Error("serve: max_batch must be >= 1, got " + std::to_string(max_batch));
  const int64_t n = max_seq.value_or(model.config.max_len);
  if (n < 2 || n > model.config.max_len)
    throw Error("serve: max_seq must be in [2, " + std::to_string(model.config.max_len) +
                "] (the model's max_len), got " + std::to_string(n));
  return n;
}

State zero_cache(const models::TransformerLM& model, int64_t max_batch, int64_t max_seq) {
  const Shape shape{max_batch, model.config.num_heads, max_seq, model.config.head_dim()};
  State cache;
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    cache.set(key_path(i), jnp::zeros(shape));
    cache.set(value_path(i), jnp::zeros(shape));
  }
  return cache;
}

constexpr std::string_view kMagic = "cujax-serve-bundle ";
const std::string kParams = "params.";

// An exported step's output tree (next tokens, cache) as the pair the steps return.
std::pair<Array, State> unflatten(const DynamicTree& out) {
  return {out[0].array(), out[1].state()};
}

}  // namespace

std::vector<int64_t> prefill_buckets(int64_t max_seq) {
  std::vector<int64_t> buckets;
  for (int64_t b = 16; b < max_seq; b *= 2) buckets.push_back(b);
  buckets.push_back(max_seq);
  return buckets;
}

ServeSteps jit_steps(models::TransformerLM& model, State params, int64_t max_batch,
                     std::optional<int64_t> max_seq) {
  ServeSteps s;
  s.max_batch = max_batch;
  s.max_seq = checked_max_seq(model, max_seq, max_batch);
  s.vocab_size = model.config.vocab_size;
  s.buckets = prefill_buckets(s.max_seq);
  s.cache = zero_cache(model, max_batch, s.max_seq);
  auto p = std::make_shared<const State>(std::move(params));
  // The decode step runs every few hundred microseconds with the same shapes: compiled ahead of
  // time at its first call, a call skips the jit cache's key (a string per leaf of the
  // parameters and the cache), which took a good part of the scheduler thread's time per step.
  using Compiled =
      decltype(jit_decode(model)
                   .lower(*p, s.cache, Array(), Array(), Array(), Array(), Array(), Array())
                   .compile());
  auto compiled = std::make_shared<std::optional<Compiled>>();
  s.decode = [p, compiled, f = jit_decode(model)](const State& c, const Array& t, const Array& pos,
                                                  const Array& seed, const Array& temp,
                                                  const Array& k, const Array& top_p) {
    if (!*compiled) compiled->emplace(f.lower(*p, c, t, pos, seed, temp, k, top_p).compile());
    return (**compiled)(*p, c, t, pos, seed, temp, k, top_p);
  };
  s.prefill = [p, f = jit_prefill(model)](const State& c, const Array& t, const Array& slot,
                                          const Array& n, const Array& seed, const Array& temp,
                                          const Array& k, const Array& top_p) {
    return f(*p, c, t, slot, n, seed, temp, k, top_p);
  };
  return s;
}

// The bundle: "cujax-serve-bundle 1\nsha256 <hex of the rest>\n<header JSON>\n<members>", the
// header listing max_batch, max_seq, vocab_size, buckets and each member's name and size in
// order: "decode", "prefill.<L>" per bucket (Exported::serialize bytes), then
// "params.<path>" per parameter (.npy bytes).
std::vector<std::pair<std::string, Exported>> export_step_programs(models::TransformerLM& model,
                                                                   const State& params,
                                                                   int64_t max_batch,
                                                                   int64_t max_seq) {
  const int64_t seq = checked_max_seq(model, max_seq, max_batch);
  const State cache = zero_cache(model, max_batch, seq);
  const auto i32 = [](Shape s) { return ShapeDtype{std::move(s), DType::I32}; };
  const auto f32 = [](Shape s) { return ShapeDtype{std::move(s), DType::F32}; };
  const int64_t B = max_batch;
  std::vector<std::pair<std::string, Exported>> programs;
  programs.emplace_back("decode", export_(jit_decode(model), params, cache, i32({B, 1}), i32({B}),
                                          i32({B}), f32({B}), i32({B}), f32({B})));
  for (int64_t L : prefill_buckets(seq))
    programs.emplace_back("prefill." + std::to_string(L),
                          export_(jit_prefill(model), params, cache, i32({1, L}), i32({}), i32({}),
                                  i32({1}), f32({1}), i32({1}), f32({1})));
  return programs;
}

void export_steps(models::TransformerLM& model, const State& params, int64_t max_batch,
                  int64_t max_seq, const std::string& path) {
  const int64_t seq = checked_max_seq(model, max_seq, max_batch);
  const int64_t B = max_batch;
  std::vector<std::pair<std::string, std::string>> members;
  json::Value buckets = json::Value::Array{};
  for (int64_t L : prefill_buckets(seq)) buckets.push_back(L);
  for (const auto& [name, program] : export_step_programs(model, params, max_batch, seq))
    members.emplace_back(name, program.serialize());
  for (const auto& [name, value] : params)
    members.emplace_back(kParams + name, serialize_npy(value.to_host()));
  json::Value list = json::Value::Array{};
  std::string payload;
  for (const auto& [name, bytes] : members) {
    json::Value m = json::Value::object();
    m.set("name", name);
    m.set("bytes", static_cast<int64_t>(bytes.size()));
    list.push_back(std::move(m));
    payload += bytes;
  }
  json::Value header = json::Value::object();
  header.set("max_batch", B);
  header.set("max_seq", seq);
  header.set("vocab_size", model.config.vocab_size);
  header.set("buckets", std::move(buckets));
  header.set("members", std::move(list));
  const std::string body = json::dump(header) + "\n" + payload;
  metrics_log::write_file_atomic(path, std::string(kMagic) + std::to_string(kServeBundleVersion) +
                                           "\nsha256 " + sha256_hex(body) + "\n" + body);
}

ServeSteps load_steps(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the serving bundle");
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  const auto fail = [&](const std::string& why) -> Error {
    return Error(path + ": not a valid serving bundle: " + why);
  };
  const size_t l1 = bytes.find('\n');
  if (bytes.compare(0, kMagic.size(), kMagic) != 0 || l1 == std::string::npos)
    throw fail("it does not start with '" + std::string(kMagic) +
               "<version>' (cujax export --fn serve writes bundles)");
  const std::string version = bytes.substr(kMagic.size(), l1 - kMagic.size());
  if (version != std::to_string(kServeBundleVersion))
    throw fail("format version " + version + "; this cujax reads version " +
               std::to_string(kServeBundleVersion));
  const size_t l2 = bytes.find('\n', l1 + 1);
  if (l2 == std::string::npos || bytes.compare(l1 + 1, 7, "sha256 ") != 0)
    throw fail("the second line is not 'sha256 <hex>'");
  const std::string recorded = bytes.substr(l1 + 8, l2 - l1 - 8);
  const std::string_view body = std::string_view(bytes).substr(l2 + 1);
  if (sha256_hex(body) != recorded)
    throw fail("checksum mismatch (the file is truncated, corrupt or was edited)");
  const size_t l3 = body.find('\n');
  if (l3 == std::string::npos) throw fail("no header line");

  ServeSteps s;
  std::map<std::string, std::string_view> members;
  size_t offset = l3 + 1;
  try {
    const json::Value header = json::parse(body.substr(0, l3), "the header");
    s.max_batch = header.at("max_batch").as_int();
    s.max_seq = header.at("max_seq").as_int();
    s.vocab_size = header.at("vocab_size").as_int();
    for (const auto& b : header.at("buckets").as_array()) s.buckets.push_back(b.as_int());
    for (const auto& m : header.at("members").as_array()) {
      const auto size = static_cast<size_t>(m.at("bytes").as_int());
      if (offset + size > body.size()) {
        offset = std::string::npos;
        break;
      }
      members[m.at("name").as_string()] = body.substr(offset, size);
      offset += size;
    }
  } catch (const Error& e) {
    throw fail(e.what());
  }
  if (offset != body.size()) throw fail("its members do not add up to the file's size");
  if (s.max_batch < 1 || s.max_seq < 2 || s.buckets.empty() || s.buckets.back() != s.max_seq ||
      !std::is_sorted(s.buckets.begin(), s.buckets.end()))
    throw fail("the header's max_batch, max_seq and buckets are inconsistent");
  const auto member = [&](const std::string& name) {
    auto it = members.find(name);
    if (it == members.end()) throw fail("it has no member " + name);
    return it->second;
  };

  struct Loaded {
    State params;
    Exported decode;
    std::map<int64_t, Exported> prefill;
  };
  const auto decode = Exported::deserialize(member("decode"), path + " member decode");
  auto loaded = std::make_shared<Loaded>(Loaded{{}, decode, {}});
  for (int64_t L : s.buckets) {
    const std::string name = "prefill." + std::to_string(L);
    const Exported& e =
        loaded->prefill.emplace(L, Exported::deserialize(member(name), path + " member " + name))
            .first->second;
    for (const ExportedLeaf& leaf : e.in_leaves())
      if (leaf.path == "tokens" && leaf.aval.shape != Shape{1, L})
        throw fail("member " + name + " takes tokens " + leaf.aval.str());
  }
  for (const ExportedLeaf& leaf : decode.in_leaves()) {
    const std::string_view where = leaf.path;
    if (where.starts_with(kParams)) {
      const HostTensor t = parse_npy(std::string(member(leaf.path)), path + " member " + leaf.path);
      if (t.shape() != leaf.aval.shape || t.dtype() != leaf.aval.dtype)
        throw fail("member " + leaf.path + " is " + ShapeDtype{t.shape(), t.dtype()}.str() +
                   ", the decode step takes " + leaf.aval.str());
      loaded->params.set(leaf.path.substr(kParams.size()), jnp::array(t));
    } else if (where.starts_with("cache.")) {
      const Shape& shape = leaf.aval.shape;
      if (shape.size() != 4 || shape[0] != s.max_batch || shape[2] != s.max_seq)
        throw fail("the decode step's " + leaf.path + " is " + leaf.aval.str() +
                   ", not (max_batch, heads, max_seq, head_dim)");
      s.cache.set(leaf.path.substr(6), jnp::zeros(leaf.aval.shape, leaf.aval.dtype));
    } else if (leaf.path == "tokens" && leaf.aval.shape != Shape{s.max_batch, 1}) {
      throw fail("the decode step takes tokens " + leaf.aval.str() + ", but max_batch is " +
                 std::to_string(s.max_batch));
    }
  }
  s.decode = [loaded](const State& c, const Array& t, const Array& pos, const Array& seed,
                      const Array& temp, const Array& k, const Array& top_p) {
    return unflatten(loaded->decode.call(loaded->params, c, t, pos, seed, temp, k, top_p));
  };
  s.prefill = [loaded, path](const State& c, const Array& t, const Array& slot, const Array& n,
                             const Array& seed, const Array& temp, const Array& k,
                             const Array& top_p) {
    const auto it = loaded->prefill.find(t.shape()[1]);
    if (it == loaded->prefill.end())
      throw Error(path + ": no prefill for a prompt padded to " + std::to_string(t.shape()[1]) +
                  " tokens");
    return unflatten(it->second.call(loaded->params, c, t, slot, n, seed, temp, k, top_p));
  };
  return s;
}

}  // namespace cujax::serve
