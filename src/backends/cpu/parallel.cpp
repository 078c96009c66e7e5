#include "backends/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace cujax::cpu {

namespace {

thread_local bool in_parallel_region = false;

// Spins for up to `budget` waiting for done() before the caller falls back to sleeping: the
// backend runs kernels back to back, so the next task or the last chunk usually arrives within
// microseconds, far sooner than a futex wake-up (10-50 us on this kind of VM).
template <class Done>
bool spin_until(const Done& done, std::chrono::microseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int i = 0;; ++i) {
    if (done()) return true;
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      // On a busy machine the thread we wait for may need this core.
      std::this_thread::yield();
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

constexpr std::chrono::microseconds kSpin{100};

class ThreadPool {
 public:
  explicit ThreadPool(int n) {
    for (int i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  void submit(std::function<void()> task) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
      queued_.store(tasks_.size(), std::memory_order_release);
      wake = sleepers_ > 0;
    }
    if (wake) cv_.notify_one();
  }
  int size() const { return static_cast<int>(workers_.size()); }
  bool any_spinning() const { return spinning_.load(std::memory_order_relaxed) > 0; }

 private:
  void work() {
    in_parallel_region = true;
    for (;;) {
      spinning_.fetch_add(1, std::memory_order_relaxed);
      spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; }, kSpin);
      spinning_.fetch_sub(1, std::memory_order_relaxed);
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ++sleepers_;
        cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        --sleepers_;
        if (stopping_ && tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        queued_.store(tasks_.size(), std::memory_order_release);
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::atomic<size_t> queued_{0};  // tasks_.size(), for spinning without the lock
  int sleepers_ = 0;               // workers waiting on cv_
  std::atomic<int> spinning_{0};   // workers polling queued_, which take a task within microseconds
  std::vector<std::thread> workers_;
  bool stopping_ = false;
};

// Never destroyed: device queues drain their pending work at exit, and that work may still
// need the pool after a static pool would be gone (they are created in either order).
ThreadPool& pool() {
  static ThreadPool* p = new ThreadPool(std::max(1u, std::thread::hardware_concurrency()) - 1);
  return *p;
}

}  // namespace

int num_threads() {
  return pool().size() + 1;
}

bool worker_awake() {
  return pool().any_spinning();
}

namespace {

// One parallel_for's chunks, which every thread takes from `next` until none is left, so a
// thread that starts late (being woken, or preempted by another process) simply takes fewer.
// Helpers hold it by shared_ptr: one that starts after the caller has returned finds no chunk
// and never touches the caller's body.
struct Job {
  const std::function<void(int64_t, int64_t)>* body = nullptr;
  int64_t n = 0, per = 0, num_chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> finished{0};
  std::mutex mu;
  std::condition_variable done;
  std::exception_ptr error;

  bool complete() const { return finished.load() == num_chunks; }
  void run() {
    for (;;) {
      const int64_t c = next.fetch_add(1);
      if (c >= num_chunks) return;
      try {
        (*body)(c * per, std::min(n, (c + 1) * per));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      if (finished.fetch_add(1) + 1 == num_chunks) {
        std::lock_guard<std::mutex> lock(mu);
        done.notify_all();
      }
    }
  }
};

}  // namespace

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = num_threads();
  const int64_t max_chunks = (n + grain - 1) / grain;
  if (max_chunks <= 1 || threads <= 1 || in_parallel_region) {
    body(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->body = &body;
  job->n = n;
  job->per = (n + std::min<int64_t>(max_chunks, 4 * threads) - 1) /
             std::min<int64_t>(max_chunks, 4 * threads);
  job->num_chunks = (n + job->per - 1) / job->per;
  const int64_t helpers = std::min<int64_t>(threads, job->num_chunks) - 1;
  for (int64_t t = 0; t < helpers; ++t) pool().submit([job] { job->run(); });
  in_parallel_region = true;
  job->run();
  in_parallel_region = false;
  spin_until([&] { return job->complete(); }, kSpin);
  std::unique_lock<std::mutex> lock(job->mu);
  job->done.wait(lock, [&] { return job->complete(); });
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace cujax::cpu
