// Arrays in device memory, and the per-device queue that computes them. A DeviceBuffer is one
// array's bytes on one device; a Buffer is the slot an asynchronous op fills with one. Eager ops
// and jitted calls return at once with Buffers that their device fills in order.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cujax/core/host_tensor.h"

namespace cujax::runtime {

// A point in a device's stream of work (a recorded CUDA event). The cpu backend's results are
// complete when they are returned, so its buffers carry none.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  virtual bool is_ready() const = 0;
  virtual void wait() const = 0;
};

// One array's bytes in the memory of device `platform:device` (host memory on cpu). Copies share
// the allocation, which is freed when the last one is gone. A producer writes the bytes once;
// a kernel may write into them again only when it holds the only copy (is_unique), which is how
// donated and dead operands' memory is reused.
struct DeviceBuffer {
  DType dtype = DType::F32;
  Shape shape;
  std::shared_ptr<void> data;
  std::string platform = "cpu";
  int device = 0;
  // Set when the bytes are written later by the device (asynchronous kernels); null when final.
  std::shared_ptr<const DeviceEvent> ready;

  int64_t size() const { return num_elements(shape); }
  size_t nbytes() const { return static_cast<size_t>(size()) * size_of(dtype); }
  bool is_unique() const { return data != nullptr && data.use_count() == 1; }
  // "cuda:0"
  std::string device_name() const { return platform + ":" + std::to_string(device); }

  // The cpu backend's buffers are host tensors: these convert without copying.
  static DeviceBuffer on_cpu(HostTensor value, int device = 0);
  HostTensor as_host_tensor() const;  // throws unless platform is "cpu"
};

// The slot an asynchronous op fills: empty until its producer sets a value or an error.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(DeviceBuffer ready_value);

  void set_value(DeviceBuffer value);
  // The error surfaces, prefixed with `what`, at the next wait on this buffer.
  void set_error(std::exception_ptr error, std::string what);
  // Whether the value is set and the device has finished writing it.
  bool is_ready() const;
  // Whether the value is set (its bytes may still be in flight on the device's stream).
  bool has_value() const { return has_value_.load(std::memory_order_acquire); }
  // Blocks until the value is set; rethrows the producer's error. The device may still be
  // writing the bytes: work on the same device is ordered after it, the host must wait for it.
  const DeviceBuffer& wait() const;
  // wait(), then for the device to finish writing.
  const DeviceBuffer& block_until_ready() const;
  // Takes the value out of the buffer (donation): the caller becomes its owner, and a later
  // wait() throws naming `why`.
  DeviceBuffer take(std::string why);

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::atomic<bool> has_value_{false};  // written under mu_; read without it to spin briefly
  DeviceBuffer value_;
  std::exception_ptr error_;
  std::string error_what_;
  std::string taken_;  // why the value was taken, once it was
};

using BufferRef = std::shared_ptr<Buffer>;

// A worker thread that runs a device's work in submission order. A caller may instead run a
// task itself when nothing is queued or running (try_run_inline), which saves the two thread
// hand-offs that dominate a small program's cost.
class DeviceQueue {
 public:
  DeviceQueue();
  ~DeviceQueue();
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  void enqueue(std::function<void()> task);
  // Runs `task` on the calling thread if the queue is idle, holding it busy meanwhile so that
  // later work is ordered after it; returns false (and runs nothing) otherwise.
  template <class Task>
  bool try_run_inline(Task&& task) {
    if (!begin_inline()) return false;
    struct End {
      DeviceQueue* q;
      ~End() { q->end_inline(); }
    } end{this};
    task();
    return true;
  }
  // Waits until every task submitted so far has run.
  void synchronize();

 private:
  bool begin_inline();
  void end_inline();
  void work();
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> tasks_;
  std::atomic<size_t> queued_{0};  // tasks_.size(), readable without mu_ for the worker's spin
  bool running_task_ = false;      // the worker or an inline caller is running a task
  bool stopping_ = false;
  std::thread worker_;
};

// The queue of device `id` on `platform`.
DeviceQueue& device_queue(const std::string& platform, int id);

}  // namespace cujax::runtime
