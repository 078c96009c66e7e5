#include "backends/cpu/parallel.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace cujax::cpu {

namespace {

thread_local bool in_parallel_region = false;

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
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  int size() const { return static_cast<int>(workers_.size()); }

 private:
  void work() {
    in_parallel_region = true;
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (stopping_ && tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
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

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t chunks = std::min<int64_t>(num_threads(), (n + grain - 1) / grain);
  if (chunks <= 1 || in_parallel_region) {
    body(0, n);
    return;
  }
  const int64_t per = (n + chunks - 1) / chunks;
  std::mutex mu;
  std::condition_variable done;
  int64_t remaining = chunks - 1;
  std::exception_ptr error;
  for (int64_t c = 1; c < chunks; ++c) {
    const int64_t b = c * per, e = std::min(n, b + per);
    pool().submit([&, b, e] {
      try {
        if (b < e) body(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mu);
      if (--remaining == 0) done.notify_one();
    });
  }
  in_parallel_region = true;
  try {
    body(0, std::min(n, per));
  } catch (...) {
    std::lock_guard<std::mutex> lock(mu);
    if (!error) error = std::current_exception();
  }
  in_parallel_region = false;
  std::unique_lock<std::mutex> lock(mu);
  done.wait(lock, [&] { return remaining == 0; });
  if (error) std::rethrow_exception(error);
}

}  // namespace cujax::cpu
