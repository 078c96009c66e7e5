#include "cujax/runtime/buffer.h"

#include <map>

#include "cujax/core/error.h"

namespace cujax::runtime {

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
  std::lock_guard<std::mutex> lock(mu_);
  return ready_;
}

const HostTensor& Buffer::wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return ready_; });
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
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
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
