#include "cujax/runtime/buffer.h"

#include <chrono>
#include <map>
#include <thread>

#include "cujax/core/error.h"
#include "profiler/hooks.h"

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

DeviceBuffer DeviceBuffer::on_cpu(HostTensor value, int device) {
  DeviceBuffer b;
  b.dtype = value.dtype();
  b.shape = value.shape();
  b.data = value.storage();
  b.platform = "cpu";
  b.device = device;
  return b;
}

HostTensor DeviceBuffer::as_host_tensor() const {
  if (platform != "cpu")
    throw Error("a " + std::string(mlir_name(dtype)) + shape_to_string(shape) + " buffer on " +
                device_name() + " is not in host memory; copy it to the host first");
  return HostTensor::from_storage(dtype, shape, data);
}

Buffer::Buffer(DeviceBuffer ready_value) : has_value_(true), value_(std::move(ready_value)) {}

void Buffer::set_value(DeviceBuffer value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    value_ = std::move(value);
    has_value_ = true;
  }
  cv_.notify_all();
}

void Buffer::set_error(std::exception_ptr error, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    error_what_ = std::move(what);
    has_value_ = true;
  }
  cv_.notify_all();
}

bool Buffer::is_ready() const {
  if (!has_value()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return error_ || !value_.ready || value_.ready->is_ready();
}

const DeviceBuffer& Buffer::wait() const {
  const profiler::Span span = profiler::wait_span(!has_value_.load(std::memory_order_acquire));
  spin_until([this] { return has_value_.load(std::memory_order_acquire); }, kWaiterSpin);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return has_value_.load(std::memory_order_relaxed); });
  if (error_) {
    try {
      std::rethrow_exception(error_);
    } catch (const std::exception& e) {
      throw RuntimeError(error_what_ + ": " + e.what());
    }
  }
  if (!taken_.empty()) throw Error(taken_);
  return value_;
}

const DeviceBuffer& Buffer::block_until_ready() const {
  const profiler::Span span = profiler::wait_span(true, "block_until_ready");
  const DeviceBuffer& v = wait();
  if (v.ready) v.ready->wait();
  return v;
}

DeviceBuffer Buffer::take(std::string why) {
  wait();
  std::lock_guard<std::mutex> lock(mu_);
  taken_ = std::move(why);
  return std::move(value_);
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

bool DeviceQueue::begin_inline() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_task_ || !tasks_.empty()) return false;
  running_task_ = true;
  return true;
}

void DeviceQueue::end_inline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_task_ = false;
  }
  cv_.notify_one();  // tasks enqueued meanwhile waited for this one
  idle_cv_.notify_all();
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
      cv_.wait(lock, [this] { return stopping_ || (!tasks_.empty() && !running_task_); });
      if (tasks_.empty()) return;   // stopping, and nothing left to run
      if (running_task_) continue;  // stopping while a caller runs a task inline
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
