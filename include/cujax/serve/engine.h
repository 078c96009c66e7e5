// The serving engine behind `cujax serve`: iteration-level (continuous) batching of generation
// requests over a fixed number of slots, with a KV cache per slot.
//
// The engine runs the two functions of ServeSteps (serve/steps.h), jitted from a model or loaded
// from a serving bundle. One scheduler thread runs a single decode step for all slots together:
// each slot feeds one token at its own position, the step writes that token's key and value into
// the slot's rows of the cache (max_batch, heads, max_seq, head_dim) per layer, returned as the
// new cache, and attends with the slot's own mask key_pos <= position. A decode step
// therefore costs one new position per slot, plus attention over max_seq cached keys. While no
// request joins, the thread dispatches the next step with the last step's tokens as its input on
// the device before handing those tokens out, so that both overlap.
//
// A new request is first prefilled alone: its prompt, padded to the smallest prefill bucket
// that holds it (16, 32, 64, ... below max_seq, then max_seq), runs one causal forward pass
// that writes the slot's cache rows and gives the first token; then the slot joins the batched
// decode step. start() compiles and runs every bucket and the decode step (max_batch, 1) before
// ready() turns true, so serving never compiles. The next token at position p is drawn with
// fold_in(PRNGKey(seed), p) as models::generate draws it, so a seeded request gives the same
// tokens batched or alone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "cujax/serve/steps.h"

namespace cujax::serve {

struct Request {
  std::vector<int32_t> prompt;  // at least one token, fewer than max_seq
  int64_t max_tokens = 16;
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // 0: the whole vocabulary
  double top_p = 1.0;        // in (0, 1]; 1: the whole vocabulary (after top_k)
  int64_t seed = 0;
  // Sees each new token from the scheduler thread; returning false (the client went away)
  // ends the request and frees its slot.
  std::function<bool(int32_t)> on_token;
  // Called once, from the scheduler thread, when the request ends for any reason.
  std::function<void()> on_done;
};

struct EngineStats {
  int64_t generated_tokens = 0;
  int64_t steps = 0;
  int64_t queue_depth = 0;
  int64_t active = 0;
  std::vector<int64_t> batch_sizes;  // batch_sizes[b]: steps that ran with b active slots
};

class Engine {
 public:
  Engine(ServeSteps steps, int64_t max_queue);
  // jit_steps(model, params, max_batch, max_seq): max_seq bounds prompt + generated tokens (the
  // cache's length); default the model's max_len, and it must be in [2, max_len].
  Engine(models::TransformerLM& model, State params, int64_t max_batch, int64_t max_queue,
         std::optional<int64_t> max_seq = std::nullopt);
  ~Engine();
  // Compiles and runs every prefill bucket and the decode step once, then starts the scheduler
  // thread.
  void start();
  bool ready() const { return ready_; }
  // Checks the request (throws Error naming the field) and queues it; false when the queue is
  // full.
  bool submit(std::shared_ptr<Request> request);
  // Takes no new requests, finishes the queued and active ones, joins the thread.
  void drain();
  EngineStats stats() const;
  int64_t max_batch() const { return max_batch_; }
  int64_t max_seq() const { return max_seq_; }
  int64_t max_queue() const { return max_queue_; }
  int64_t vocab_size() const { return steps_.vocab_size; }
  const std::vector<int64_t>& prefill_buckets() const { return buckets_; }

 private:
  struct Slot {
    std::shared_ptr<Request> request;
    std::vector<int32_t> tokens;  // the prompt, then the generated tokens; all but the last cached
    int64_t generated = 0;
    uint64_t serial = 0;  // which request: a new one per request that takes the slot
  };
  void loop();
  // Dispatches the prefill of `slot` with the prompt padded to `bucket`; returns the token after
  // the prompt (1,) without waiting for it.
  Array dispatch_prefill(int64_t slot, const std::vector<int32_t>& prompt, int64_t bucket,
                         const Request& sampling);
  // Hands each slot its token of a decode step whose slots held the requests `took` (serials).
  void deliver_step(const std::vector<int32_t>& tokens, const std::vector<uint64_t>& took);
  // Dispatches one decode step of every slot with `tokens` (B, 1) at `positions` and returns its
  // next tokens (B,) without waiting for them.
  Array dispatch_step(const Array& tokens, const std::vector<int32_t>& positions);
  // The same with each active slot's last token at its position (free slots: token 0 at 0).
  Array dispatch_step_from_host();
  // Hands the slot its next token; ends the request (false) when it is done or its client left.
  bool deliver(Slot& slot, int32_t token);

  ServeSteps steps_;
  int64_t max_batch_, max_queue_, max_seq_;
  State cache_;  // blocks.<i>.key and blocks.<i>.value, (max_batch, heads, max_seq, head_dim)
  std::vector<int64_t> buckets_;  // prefill lengths: 16, 32, ... below max_seq, then max_seq
  std::vector<Slot> slots_;
  uint64_t serials_ = 0;
  // The decode step's per-slot sampling arrays, for the requests (serials; 0: free) they hold.
  struct Sampling {
    std::vector<uint64_t> serials;
    Array seeds, temperatures, top_k, top_p;
  } sampling_;
  std::deque<std::shared_ptr<Request>> queue_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<bool> ready_{false};
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace cujax::serve
