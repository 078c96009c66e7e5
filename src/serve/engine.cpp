#include "cujax/serve/engine.h"

#include <algorithm>
#include <limits>

#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/numpy.h"
#include "cujax/random.h"

namespace cujax::serve {

namespace jnp = cujax::numpy;

namespace {

Array row(const Array& x, int64_t i) {
  Shape s(x.shape().begin() + 1, x.shape().end());
  return jnp::reshape(lax::slice_in_dim(x, i, i + 1, 1, 0), s);
}

std::string key_path(size_t layer) {
  return "blocks." + std::to_string(layer) + ".key";
}
std::string value_path(size_t layer) {
  return "blocks." + std::to_string(layer) + ".value";
}

// logits (B, V) of the tokens at `positions` (B,) -> the tokens at positions + 1, drawn as
// models::generate's sample() draws them, with the seed, temperature and k as values per slot.
Array sample(const Array& logits, const Array& positions, const Array& seeds,
             const Array& temperatures, const Array& top_k) {
  const int64_t batch = logits.shape()[0], vocab = logits.shape()[1];
  const Array greedy = jnp::astype(jnp::argmax(logits, -1), DType::I32);
  const Array temp = jnp::reshape(temperatures, Shape{batch, 1});
  const Array scaled = logits / jnp::where(jnp::less(0.0f, temp), temp, 1.0f);
  const Array sorted = lax::top_k(scaled, vocab).first;  // descending
  const Array k = jnp::reshape(top_k, Shape{batch, 1});
  const Array kth = jnp::take_along_axis(sorted, jnp::maximum(k - 1, 0), 1);
  const Array keep = jnp::logical_or(jnp::less(k, 1), jnp::logical_not(jnp::less(scaled, kth)));
  const Array masked = jnp::where(keep, scaled, -std::numeric_limits<float>::infinity());
  std::vector<Array> sampled;
  for (int64_t b = 0; b < batch; ++b) {
    const Array key = random::fold_in(random::PRNGKey(row(seeds, b)), row(positions, b) + 1);
    sampled.push_back(jnp::astype(random::categorical(key, row(masked, b), -1), DType::I32));
  }
  return jnp::where(jnp::less(0.0f, temperatures), jnp::stack(sampled), greedy);
}

// One decode step of every slot: tokens (B, 1) at positions (B,) -> the next tokens (B,) and
// the cache with each slot's key and value written at its own position. The blocks' arithmetic
// is Block::operator()'s; only the cache write and the mask are per row.
std::pair<Array, State> decode_fn(models::TransformerLM& model, const State& params,
                                  const State& cache, const Array& tokens, const Array& positions,
                                  const Array& seeds, const Array& temperatures,
                                  const Array& top_k) {
  const int64_t batch = tokens.shape()[0], d_model = model.config.d_model;
  const int64_t max_seq = cache.at(key_path(0)).shape()[1];
  State new_cache;
  const Array logits = nnx::functional_call(model, params, [&] {
    const Array slots = jnp::arange(max_seq, DType::I32);
    const Array pos = jnp::reshape(positions, Shape{batch, 1});
    // write (B, S, 1, 1): the row's own position; visible (B, 1, 1, S): key_pos <= position.
    const Array write = jnp::reshape(jnp::equal(slots, pos), Shape{batch, max_seq, 1, 1});
    const Array visible = jnp::reshape(jnp::less_equal(slots, pos), Shape{batch, 1, 1, max_seq});
    Array x =
        model.embed(tokens) + jnp::reshape(model.pos_embed(positions), Shape{batch, 1, d_model});
    for (size_t i = 0; i < model.blocks.size(); ++i) {
      models::Block& block = *model.blocks[i];
      nnx::MultiHeadAttention& attn = block.attn;
      const Array h = block.ln1(x);
      const Array k = jnp::where(write, attn.key(h), cache.at(key_path(i)));
      const Array v = jnp::where(write, attn.value(h), cache.at(value_path(i)));
      new_cache.set(key_path(i), k);
      new_cache.set(value_path(i), v);
      x = x + attn.out(attn.attention_fn(attn.query(h), k, v, std::nullopt, visible, std::nullopt,
                                         false, std::nullopt));
      x = x + block.mlp(block.ln2(x));
    }
    return jnp::reshape(model.embed.attend(model.ln_f(x)), Shape{batch, model.config.vocab_size});
  });
  return {sample(logits, positions, seeds, temperatures, top_k), std::move(new_cache)};
}

// Prefill of one slot: tokens (1, L) (a prompt of `length` tokens, padded to the bucket L) ->
// the token after the prompt (1,) and the cache with the slot's rows [0, L) written. The
// forward pass is causal, so the padding never reaches the prompt's positions; the keys and
// values it leaves past the prompt are masked and then overwritten by decoding.
std::pair<Array, State> prefill_fn(models::TransformerLM& model, const State& params,
                                   const State& cache, const Array& tokens, const Array& slot,
                                   const Array& length, const Array& seeds,
                                   const Array& temperatures, const Array& top_k) {
  const int64_t seq = tokens.shape()[1], vocab = model.config.vocab_size;
  const Array zero = jnp::zeros({}, DType::I32);
  State new_cache;
  const Array logits = nnx::functional_call(model, params, [&] {
    Array x = model.embed(tokens) + model.pos_embed(jnp::arange(seq, DType::I32));
    for (size_t i = 0; i < model.blocks.size(); ++i) {
      models::Block& block = *model.blocks[i];
      nnx::MultiHeadAttention& attn = block.attn;
      const Array h = block.ln1(x);
      const Array k = attn.key(h), v = attn.value(h);
      const std::vector<Array> at = {slot, zero, zero, zero};
      new_cache.set(key_path(i), lax::dynamic_update_slice(cache.at(key_path(i)), k, at));
      new_cache.set(value_path(i), lax::dynamic_update_slice(cache.at(value_path(i)), v, at));
      // Query and key lengths are equal: the model's attention_fn is causal.
      x = x + attn.out(attn.attention_fn(attn.query(h), k, v, std::nullopt, std::nullopt,
                                         std::nullopt, false, std::nullopt));
      x = x + block.mlp(block.ln2(x));
    }
    const Array all = model.embed.attend(model.ln_f(x));  // (1, L, vocab)
    return jnp::reshape(lax::dynamic_slice(all, {zero, length - 1, zero}, {1, 1, vocab}),
                        Shape{1, vocab});
  });
  return {sample(logits, jnp::reshape(length - 1, Shape{1}), seeds, temperatures, top_k),
          std::move(new_cache)};
}

}  // namespace

Engine::Engine(models::TransformerLM& model, State params, int64_t max_batch, int64_t max_queue,
               std::optional<int64_t> max_seq)
    : model_(model),
      params_(std::move(params)),
      max_batch_(max_batch),
      max_queue_(max_queue),
      max_seq_(max_seq.value_or(model.config.max_len)),
      slots_(static_cast<size_t>(max_batch)) {
  if (max_batch < 1) throw Error("serve: max_batch must be >= 1, got " + std::to_string(max_batch));
  if (max_queue < 0) throw Error("serve: max_queue must be >= 0, got " + std::to_string(max_queue));
  if (max_seq_ < 2 || max_seq_ > model.config.max_len)
    throw Error("serve: max_seq must be in [2, " + std::to_string(model.config.max_len) +
                "] (the model's max_len), got " + std::to_string(max_seq_));
  stats_.batch_sizes.assign(static_cast<size_t>(max_batch + 1), 0);
  const Shape shape{max_batch, max_seq_, model.config.num_heads, model.config.head_dim()};
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    cache_.set(key_path(i), jnp::zeros(shape));
    cache_.set(value_path(i), jnp::zeros(shape));
  }
  JitOptions jo;
  jo.name = "serve_decode_step";
  jo.donate_argnums = {1};
  auto jitted = jit(
      [&model](const State& params, const State& cache, const Array& tokens, const Array& positions,
               const Array& seeds, const Array& temperatures, const Array& top_k) {
        return decode_fn(model, params, cache, tokens, positions, seeds, temperatures, top_k);
      },
      jo);
  step_ = [jitted](const State& p, const State& c, const Array& t, const Array& pos, const Array& s,
                   const Array& temp,
                   const Array& k) mutable { return jitted(p, c, t, pos, s, temp, k); };
  for (int64_t b = 16; b < max_seq_; b *= 2) buckets_.push_back(b);
  buckets_.push_back(max_seq_);
  JitOptions po;
  po.name = "serve_prefill";
  po.donate_argnums = {1};
  auto prefill = jit(
      [&model](const State& params, const State& cache, const Array& tokens, const Array& slot,
               const Array& length, const Array& seeds, const Array& temperatures,
               const Array& top_k) {
        return prefill_fn(model, params, cache, tokens, slot, length, seeds, temperatures, top_k);
      },
      po);
  prefill_ = [prefill](const State& p, const State& c, const Array& t, const Array& slot,
                       const Array& n, const Array& s, const Array& temp,
                       const Array& k) mutable { return prefill(p, c, t, slot, n, s, temp, k); };
}

Engine::~Engine() {
  drain();
}

void Engine::start() {
  // Compiles every shape the scheduler uses: each prefill bucket, then the decode step. The
  // warm-up prefill writes slot 0's rows, which the slot's first request overwrites.
  for (int64_t bucket : buckets_) run_prefill(0, std::vector<int32_t>(1, 0), bucket, 0, 0, 0);
  run_step();
  ready_ = true;
  thread_ = std::thread([this] { loop(); });
}

bool Engine::submit(std::shared_ptr<Request> r) {
  if (r->prompt.empty()) throw Error("prompt: needs at least one token");
  if (static_cast<int64_t>(r->prompt.size()) >= max_seq_)
    throw Error("prompt: " + std::to_string(r->prompt.size()) + " tokens; the context is " +
                std::to_string(max_seq_));
  for (int32_t t : r->prompt)
    if (t < 0 || t >= model_.config.vocab_size)
      throw Error("prompt: token " + std::to_string(t) + " is outside the vocabulary");
  if (r->max_tokens < 1) throw Error("max_tokens: must be >= 1");
  if (r->temperature < 0) throw Error("temperature: must be >= 0");
  if (r->top_k < 0) throw Error("top_k: must be >= 0");
  if (r->seed < 0 || r->seed > std::numeric_limits<int32_t>::max())
    throw Error("seed: must be in [0, 2^31)");
  std::lock_guard lock(mutex_);
  if (stopping_) return false;
  if (static_cast<int64_t>(queue_.size()) >= max_queue_) return false;
  queue_.push_back(std::move(r));
  stats_.queue_depth = static_cast<int64_t>(queue_.size());
  wake_.notify_one();
  return true;
}

void Engine::drain() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

int32_t Engine::run_prefill(int64_t slot, const std::vector<int32_t>& prompt, int64_t bucket,
                            int64_t seed, double temperature, int64_t top_k) {
  std::vector<int32_t> tokens(static_cast<size_t>(bucket), 0);
  std::copy(prompt.begin(), prompt.end(), tokens.begin());
  const auto scalar = [](int64_t v) {
    return jnp::array(std::vector<int32_t>{static_cast<int32_t>(v)}, Shape{});
  };
  auto [next, cache] =
      prefill_(params_, cache_, jnp::array(tokens, Shape{1, bucket}), scalar(slot),
               scalar(static_cast<int64_t>(prompt.size())),
               jnp::array(std::vector<int32_t>{static_cast<int32_t>(seed)}, Shape{1}),
               jnp::array(std::vector<float>{static_cast<float>(temperature)}, Shape{1}),
               jnp::array(std::vector<int32_t>{static_cast<int32_t>(top_k)}, Shape{1}));
  cache_ = std::move(cache);
  return next.to_vector<int32_t>()[0];
}

std::vector<int32_t> Engine::run_step() {
  const int64_t B = max_batch_;
  // A free slot decodes token 0 at position 0 of its own rows: harmless, since a request that
  // takes the slot rewrites its rows from position 0 and masks every position past its own.
  std::vector<int32_t> tokens(B, 0), positions(B, 0), seeds(B, 0), top_k(B, 0);
  std::vector<float> temps(B, 0.0f);
  for (int64_t b = 0; b < B; ++b) {
    const Slot& s = slots_[b];
    if (!s.request) continue;
    // The last token is the only one not yet in the cache.
    tokens[b] = s.tokens.back();
    positions[b] = static_cast<int32_t>(s.tokens.size()) - 1;
    seeds[b] = static_cast<int32_t>(s.request->seed);
    temps[b] = static_cast<float>(s.request->temperature);
    top_k[b] = static_cast<int32_t>(s.request->top_k);
  }
  auto [next, cache] =
      step_(params_, cache_, jnp::array(tokens, Shape{B, 1}), jnp::array(positions, Shape{B}),
            jnp::array(seeds, Shape{B}), jnp::array(temps, Shape{B}), jnp::array(top_k, Shape{B}));
  cache_ = std::move(cache);
  return next.to_vector<int32_t>();
}

bool Engine::deliver(Slot& s, int32_t token) {
  s.tokens.push_back(token);
  ++s.generated;
  ++stats_.generated_tokens;
  const bool more = s.request->on_token ? s.request->on_token(token) : true;
  if (more && s.generated < s.request->max_tokens &&
      static_cast<int64_t>(s.tokens.size()) < max_seq_)
    return true;
  if (s.request->on_done) s.request->on_done();
  s.request.reset();
  return false;
}

void Engine::loop() {
  for (;;) {
    std::vector<size_t> joined;
    {
      std::unique_lock lock(mutex_);
      auto busy = [&] {
        for (const Slot& s : slots_)
          if (s.request) return true;
        return false;
      };
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || busy(); });
      // New requests take free slots now and are prefilled before the next decode step.
      for (size_t b = 0; b < slots_.size(); ++b) {
        Slot& s = slots_[b];
        if (s.request || queue_.empty()) continue;
        s.request = queue_.front();
        queue_.pop_front();
        s.tokens = s.request->prompt;
        s.generated = 0;
        joined.push_back(b);
      }
      stats_.queue_depth = static_cast<int64_t>(queue_.size());
      if (!busy() && stopping_) return;
    }
    for (size_t b : joined) {
      Slot& s = slots_[b];
      const int64_t n = static_cast<int64_t>(s.tokens.size());
      const int64_t bucket = *std::lower_bound(buckets_.begin(), buckets_.end(), n);
      const int32_t first = run_prefill(static_cast<int64_t>(b), s.tokens, bucket, s.request->seed,
                                        s.request->temperature, s.request->top_k);
      std::lock_guard lock(mutex_);
      deliver(s, first);
    }
    int64_t active = 0;
    {
      std::lock_guard lock(mutex_);
      for (const Slot& s : slots_) active += s.request ? 1 : 0;
      stats_.active = active;
    }
    if (active == 0) continue;
    const std::vector<int32_t> next = run_step();
    std::lock_guard lock(mutex_);
    ++stats_.steps;
    ++stats_.batch_sizes[active];
    for (size_t b = 0; b < slots_.size(); ++b)
      if (slots_[b].request && !deliver(slots_[b], next[b])) --stats_.active;
  }
}

}  // namespace cujax::serve
