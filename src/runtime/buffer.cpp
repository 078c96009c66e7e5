#include "cujax/runtime/buffer.h"

#include <chrono>
#include <map>
#include <thread>

#include "cujax/core/error.h"

namespace cujax::runtime {

namespace {

// Waking a sleeping thread costs a few microseconds, more than a small program takes, so both
// sides of a hand-off first spin for a short while: the worker for the next task, a waiter for
// its buffer. Past the limit they sleep on their condition variables.
constexpr auto kWorkerSpin = std::chrono::microseconds(50);
constexpr auto kWaiterSpin = std::chrono::microseconds(20);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until done() or the limit passes; returns done().
template <class Done>
bool spin_until(Done done, std::chrono::microseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0) {
      if (std::chrono::steady_clock::now() > deadline) return done();
      std::this_thread::yield();  // let the other side run when cores are oversubscribed
    }
  }
}

}  // namespace

Buffer::Buffer(HostTensor ready_value) : ready_(true), value_(std::move(ready_value)) {}

void Buffer::set_value(HostTensor value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    value_ = std::move(value);
    ready_ = true;
  }
  cv_.notify_all();
}

void Buffer::set_error(std::exception_ptr error, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    error_what_ = std::move(what);
    ready_ = true;
  }
  cv_.notify_all();
}

bool Buffer::is_ready() const {
  return ready_.load(std::memory_order_acquire);
}

const HostTensor& Buffer::wait() const {
  spin_until([this] { return ready_.load(std::memory_order_acquire); }, kWaiterSpin);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return ready_.load(std::memory_order_relaxed); });
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      throw RuntimeError(error_what_ + ": " + e.what());
    }
  }
  return value_;
}

DeviceQueue::DeviceQueue() : worker_([this] { work(); }) {}

DeviceQueue::~DeviceQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void DeviceQueue::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    queued_.store(tasks_.size(), std::memory_order_release);
  }
  cv_.notify_one();
}

void DeviceQueue::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return tasks_.empty() && !running_task_; });
}

void DeviceQueue::work() {
  for (;;) {
    std::function<void()> task;
    spin_until([this] { return queued_.load(std::memory_order_acquire) > 0; }, kWorkerSpin);
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
      queued_.store(tasks_.size(), std::memory_order_relaxed);
      running_task_ = true;
    }
    task();  // tasks catch their own errors into their output buffers
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_task_ = false;
    }
    idle_cv_.notify_all();
  }
}

DeviceQueue& device_queue(const std::string& platform, int id) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, std::unique_ptr<DeviceQueue>> queues;
  std::lock_guard<std::mutex> lock(mu);
  auto& q = queues[{platform, id}];
  if (!q) q = std::make_unique<DeviceQueue>();
  return *q;
}

}  // namespace cujax::runtime
