// The serving engine behind `cujax serve`: iteration-level (continuous) batching of generation
// requests over a fixed number of slots.
//
// One scheduler thread runs a single jitted step for all slots together; each slot holds its
// own sequence and position, a new request takes a free slot at the next step and a finished
// one frees it at once. The step has one shape (max_batch, max_len), compiled and run once by
// start() before ready() turns true, so serving never compiles.
//
// The step recomputes the causal forward pass over each slot's padded sequence (no KV cache):
// correct for per-slot positions, costing O(max_len) per token. The next token at position p
// is drawn with fold_in(PRNGKey(seed), p) as models::generate draws it, so a seeded request
// gives the same tokens batched or alone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cujax/models/transformer.h"

namespace cujax::serve {

struct Request {
  std::vector<int32_t> prompt;  // at least one token, fewer than the model's max_len
  int64_t max_tokens = 16;
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // 0: the whole vocabulary
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
  Engine(models::TransformerLM& model, State params, int64_t max_batch, int64_t max_queue);
  ~Engine();
  // Compiles and runs the step once, then starts the scheduler thread.
  void start();
  bool ready() const { return ready_; }
  // Checks the request (throws Error naming the field) and queues it; false when the queue is
  // full.
  bool submit(std::shared_ptr<Request> request);
  // Takes no new requests, finishes the queued and active ones, joins the thread.
  void drain();
  EngineStats stats() const;
  int64_t max_batch() const { return max_batch_; }

 private:
  struct Slot {
    std::shared_ptr<Request> request;
    std::vector<int32_t> tokens;
    int64_t generated = 0;
  };
  void loop();
  std::vector<int32_t> run_step();

  models::TransformerLM& model_;
  State params_;
  int64_t max_batch_, max_queue_, max_len_;
  std::function<Array(const State&, const Array&, const Array&, const Array&, const Array&,
                      const Array&)>
      step_;
  std::vector<Slot> slots_;
  std::deque<std::shared_ptr<Request>> queue_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::atomic<bool> ready_{false};
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace cujax::serve
