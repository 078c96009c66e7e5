#include "cujax/serve/engine.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "cujax/numpy.h"

namespace cujax::serve {

namespace jnp = cujax::numpy;

namespace {

// The request each slot holds, by its serial (0: a free slot).
template <class Slots>
std::vector<uint64_t> held_requests(const Slots& slots) {
  std::vector<uint64_t> serials(slots.size(), 0);
  for (size_t b = 0; b < slots.size(); ++b)
    if (slots[b].request) serials[b] = slots[b].serial;
  return serials;
}

}  // namespace

Engine::Engine(ServeSteps steps, int64_t max_queue)
    : steps_(std::move(steps)),
      max_batch_(steps_.max_batch),
      max_queue_(max_queue),
      max_seq_(steps_.max_seq),
      cache_(std::move(steps_.cache)),
      buckets_(steps_.buckets),
      slots_(static_cast<size_t>(max_batch_)) {
  if (max_queue < 0) throw Error("serve: max_queue must be >= 0, got " + std::to_string(max_queue));
  if (max_batch_ < 1 || buckets_.empty() || buckets_.back() != max_seq_)
    throw Error("serve: steps for max_batch " + std::to_string(max_batch_) +
                " with prefill buckets that do not end at max_seq " + std::to_string(max_seq_));
  stats_.batch_sizes.assign(static_cast<size_t>(max_batch_ + 1), 0);
}

Engine::Engine(models::TransformerLM& model, State params, int64_t max_batch, int64_t max_queue,
               std::optional<int64_t> max_seq)
    : Engine(jit_steps(model, std::move(params), max_batch, max_seq), max_queue) {}

Engine::~Engine() {
  drain();
}

void Engine::start() {
  // Compiles every shape the scheduler uses: each prefill bucket, then the decode step. The
  // warm-up prefill writes slot 0's rows, which the slot's first request overwrites.
  for (int64_t bucket : buckets_)
    dispatch_prefill(0, std::vector<int32_t>(1, 0), bucket, Request{}).block_until_ready();
  dispatch_step_from_host().block_until_ready();
  ready_ = true;
  thread_ = std::thread([this] { loop(); });
}

bool Engine::submit(std::shared_ptr<Request> r) {
  if (r->prompt.empty()) throw Error("prompt: needs at least one token");
  if (static_cast<int64_t>(r->prompt.size()) >= max_seq_)
    throw Error("prompt: " + std::to_string(r->prompt.size()) + " tokens; the context is " +
                std::to_string(max_seq_));
  for (int32_t t : r->prompt)
    if (t < 0 || t >= steps_.vocab_size)
      throw Error("prompt: token " + std::to_string(t) + " is outside the vocabulary");
  if (r->max_tokens < 1) throw Error("max_tokens: must be >= 1");
  if (r->temperature < 0) throw Error("temperature: must be >= 0");
  if (r->top_k < 0) throw Error("top_k: must be >= 0");
  if (!(r->top_p > 0 && r->top_p <= 1)) throw Error("top_p: must be in (0, 1]");
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

Array Engine::dispatch_prefill(int64_t slot, const std::vector<int32_t>& prompt, int64_t bucket,
                               const Request& r) {
  std::vector<int32_t> tokens(static_cast<size_t>(bucket), 0);
  std::copy(prompt.begin(), prompt.end(), tokens.begin());
  const auto scalar = [](int64_t v) {
    return jnp::array(std::vector<int32_t>{static_cast<int32_t>(v)}, Shape{});
  };
  auto [next, cache] =
      steps_.prefill(cache_, jnp::array(tokens, Shape{1, bucket}), scalar(slot),
                     scalar(static_cast<int64_t>(prompt.size())),
                     jnp::array(std::vector<int32_t>{static_cast<int32_t>(r.seed)}, Shape{1}),
                     jnp::array(std::vector<float>{static_cast<float>(r.temperature)}, Shape{1}),
                     jnp::array(std::vector<int32_t>{static_cast<int32_t>(r.top_k)}, Shape{1}),
                     jnp::array(std::vector<float>{static_cast<float>(r.top_p)}, Shape{1}));
  cache_ = std::move(cache);
  return next;
}

Array Engine::dispatch_step(const Array& tokens, const std::vector<int32_t>& positions) {
  const int64_t B = max_batch_;
  // Each slot's seed, temperature, top_k and top_p change only when a request takes or leaves
  // it: the arrays are made again only then.
  const std::vector<uint64_t> serials = held_requests(slots_);
  if (serials != sampling_.serials || !sampling_.seeds.valid()) {
    std::vector<int32_t> seeds(B, 0), top_k(B, 0);
    std::vector<float> temps(B, 0.0f), top_p(B, 1.0f);
    for (int64_t b = 0; b < B; ++b) {
      const Slot& s = slots_[b];
      if (!s.request) continue;
      seeds[b] = static_cast<int32_t>(s.request->seed);
      temps[b] = static_cast<float>(s.request->temperature);
      top_k[b] = static_cast<int32_t>(s.request->top_k);
      top_p[b] = static_cast<float>(s.request->top_p);
    }
    sampling_ = {serials, jnp::array(seeds, Shape{B}), jnp::array(temps, Shape{B}),
                 jnp::array(top_k, Shape{B}), jnp::array(top_p, Shape{B})};
  }
  auto [next, cache] =
      steps_.decode(cache_, tokens, jnp::array(positions, Shape{B}), sampling_.seeds,
                    sampling_.temperatures, sampling_.top_k, sampling_.top_p);
  cache_ = std::move(cache);
  return next;
}

Array Engine::dispatch_step_from_host() {
  const int64_t B = max_batch_;
  // A free slot decodes token 0 at position 0 of its own rows: harmless, since a request that
  // takes the slot rewrites its rows from position 0 and masks every position past its own.
  std::vector<int32_t> tokens(B, 0), positions(B, 0);
  for (int64_t b = 0; b < B; ++b) {
    const Slot& s = slots_[b];
    if (!s.request) continue;
    // The last token is the only one not yet in the cache.
    tokens[b] = s.tokens.back();
    positions[b] = static_cast<int32_t>(s.tokens.size()) - 1;
  }
  return dispatch_step(jnp::array(tokens, Shape{B, 1}), positions);
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
  const size_t B = slots_.size();
  // A dispatched decode step whose tokens are not handed out yet, and the request (by its slot's
  // serial) each slot held when it was dispatched: a slot freed or taken since ignores its token.
  std::optional<Array> pending;
  std::vector<uint64_t> stepped(B, 0);
  for (;;) {
    std::vector<size_t> joined;
    {
      std::unique_lock lock(mutex_);
      auto busy = [&] {
        for (const Slot& s : slots_)
          if (s.request) return true;
        return false;
      };
      if (!busy()) pending.reset();  // every slot it stepped has ended
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || busy(); });
      // New requests take free slots now and are prefilled before the next decode step.
      for (size_t b = 0; b < B; ++b) {
        Slot& s = slots_[b];
        if (s.request || queue_.empty()) continue;
        s.request = queue_.front();
        queue_.pop_front();
        s.tokens = s.request->prompt;
        s.generated = 0;
        s.serial = ++serials_;
        joined.push_back(b);
      }
      stats_.queue_depth = static_cast<int64_t>(queue_.size());
      if (!busy() && stopping_) return;
    }
    // A joining request's prompt is prefilled behind the step in flight, and the next step is
    // dispatched right behind the prefill with its first token taken on the device, so the
    // device goes from one to the next while this thread hands the tokens out.
    std::vector<std::pair<size_t, Array>> firsts;
    for (size_t b : joined) {
      const Slot& s = slots_[b];
      const int64_t n = static_cast<int64_t>(s.tokens.size());
      const int64_t bucket = *std::lower_bound(buckets_.begin(), buckets_.end(), n);
      firsts.emplace_back(b,
                          dispatch_prefill(static_cast<int64_t>(b), s.tokens, bucket, *s.request));
    }
    if (!firsts.empty()) {
      if (pending) {
        const std::vector<int32_t> tokens = pending->to_vector<int32_t>();
        pending.reset();
        deliver_step(tokens, stepped);
      }
      std::vector<int32_t> tokens(B, 0), positions(B, 0);
      for (size_t b = 0; b < B; ++b) {
        const Slot& s = slots_[b];
        if (!s.request) continue;
        // A joined slot's last token is its prompt's; its first new one comes from the prefill.
        const bool joined_now = std::find(joined.begin(), joined.end(), b) != joined.end();
        tokens[b] = joined_now ? 0 : s.tokens.back();
        positions[b] = static_cast<int32_t>(s.tokens.size()) - (joined_now ? 0 : 1);
      }
      const int64_t rows = static_cast<int64_t>(B);
      Array input = jnp::array(tokens, Shape{rows, 1});
      for (const auto& [b, first] : firsts) {
        std::vector<int32_t> at(B, 0);
        at[b] = 1;
        input =
            jnp::where(jnp::not_equal(jnp::array(at, Shape{rows, 1}), 0),
                       jnp::broadcast_to(jnp::reshape(first, Shape{1, 1}), Shape{rows, 1}), input);
      }
      pending = dispatch_step(input, positions);
      stepped = held_requests(slots_);
      std::vector<int32_t> first_tokens;
      for (const auto& [b, first] : firsts) first_tokens.push_back(first.to_vector<int32_t>()[0]);
      std::lock_guard lock(mutex_);
      for (size_t i = 0; i < firsts.size(); ++i) deliver(slots_[firsts[i].first], first_tokens[i]);
      stats_.active = 0;
      for (const Slot& s : slots_) stats_.active += s.request ? 1 : 0;
      continue;
    }
    int64_t active = 0;
    {
      std::lock_guard lock(mutex_);
      for (const Slot& s : slots_) active += s.request ? 1 : 0;
      stats_.active = active;
    }
    if (active == 0) continue;
    if (!pending) {
      pending = dispatch_step_from_host();
      stepped = held_requests(slots_);
    }
    const Array next = std::move(*pending);
    pending.reset();
    const std::vector<uint64_t> took = stepped;
    // When every active slot took part in `next`'s step (none joined since), the following step
    // is dispatched now with `next` as its tokens, left on the device, so that it runs while this
    // thread hands `next`'s tokens out. A slot that ends at this token wastes its row of it.
    // Not when every slot is known to end at this token (its max_tokens or max_seq).
    bool all_took_part = true, one_goes_on = false;
    for (size_t b = 0; b < B; ++b) {
      const Slot& s = slots_[b];
      if (!s.request) continue;
      all_took_part = all_took_part && took[b] == s.serial;
      one_goes_on = one_goes_on || (s.generated + 1 < s.request->max_tokens &&
                                    static_cast<int64_t>(s.tokens.size()) + 1 < max_seq_);
    }
    if (all_took_part && one_goes_on) {
      std::vector<int32_t> positions(B, 0);
      for (size_t b = 0; b < B; ++b)
        if (slots_[b].request) positions[b] = static_cast<int32_t>(slots_[b].tokens.size());
      pending = dispatch_step(jnp::reshape(next, Shape{static_cast<int64_t>(B), 1}), positions);
      stepped = took;
    }
    deliver_step(next.to_vector<int32_t>(), took);
  }
}

void Engine::deliver_step(const std::vector<int32_t>& tokens, const std::vector<uint64_t>& took) {
  std::lock_guard lock(mutex_);
  int64_t stepping = 0;
  for (uint64_t serial : took) stepping += serial != 0 ? 1 : 0;
  ++stats_.steps;
  ++stats_.batch_sizes[stepping];
  for (size_t b = 0; b < slots_.size(); ++b) {
    Slot& s = slots_[b];
    if (s.request && took[b] == s.serial && !deliver(s, tokens[b])) --stats_.active;
  }
}

}  // namespace cujax::serve
