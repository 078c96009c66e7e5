// Device buffers that become ready later, and the per-device queue that fills them. Eager ops
// and jitted calls return at once with buffers their device's worker computes in order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cujax/core/host_tensor.h"

namespace cujax::runtime {

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(HostTensor ready_value);

  void set_value(HostTensor value);
  // The error surfaces, prefixed with `what`, at the next wait on this buffer.
  void set_error(std::exception_ptr error, std::string what);
  bool is_ready() const;
  // Blocks until ready; rethrows the producer's error.
  const HostTensor& wait() const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> ready_{false};  // written under mu_; read without it to spin briefly
  HostTensor value_;
  std::exception_ptr error_;
  std::string error_what_;
};

using BufferRef = std::shared_ptr<Buffer>;

// A worker thread that runs a device's work in submission order.
class DeviceQueue {
 public:
  DeviceQueue();
  ~DeviceQueue();
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  void enqueue(std::function<void()> task);
  // Waits until every task submitted so far has run.
  void synchronize();

 private:
  void work();
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> tasks_;
  std::atomic<size_t> queued_{0};  // tasks_.size(), readable without mu_ for the worker's spin
  bool running_task_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

// The queue of device `id` on `platform`.
DeviceQueue& device_queue(const std::string& platform, int id);

}  // namespace cujax::runtime
