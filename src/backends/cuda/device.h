// One CUDA device as the cuda backend uses it: a stream that orders all its work, a
// stream-ordered caching allocator (a CUDA memory pool that keeps freed blocks), a pinned
// staging buffer for host transfers, and events.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <mutex>

#include "cujax/core/host_tensor.h"

namespace cujax::cuda {

class Device;

// A dense row-major array in device memory. Copies share the allocation, which goes back to
// the pool (stream-ordered) when the last copy is gone.
struct DeviceArray {
  DType dtype = DType::F32;
  Shape shape;
  std::shared_ptr<void> data;
  int64_t size() const { return num_elements(shape); }
  size_t nbytes() const { return static_cast<size_t>(size()) * size_of(dtype); }
};

class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t s);
  void synchronize() const;
  // Milliseconds between two recorded timing events.
  float elapsed_ms_since(const Event& start) const;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

class Device : public std::enable_shared_from_this<Device> {
 public:
  explicit Device(int ordinal);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }
  // Makes this device current on the calling thread.
  void activate() const;

  // `bytes` from the pool, ordered on the stream; freed on the stream when released.
  std::shared_ptr<void> allocate(size_t bytes);
  DeviceArray allocate(DType dtype, Shape shape);
  // Scratch memory of at least `bytes` for library calls (cuBLASLt's workspace), kept for the
  // device's lifetime: one per device, which is safe because all its work is on one stream.
  void* workspace(size_t bytes);

  // Asynchronous copies through the pinned staging buffer: upload returns once the host data
  // is staged; download waits for the stream.
  std::vector<DeviceArray> upload(std::span<const HostTensor> tensors);
  std::vector<HostTensor> download(std::span<const DeviceArray> arrays);
  void synchronize() const;

  // Serialises executions on this device (the staging buffer is shared).
  std::mutex& mutex() { return mu_; }

 private:
  void* staging(size_t bytes);  // waits until the previous transfer released it
  int ordinal_;
  cudaStream_t stream_ = nullptr;
  cudaMemPool_t pool_ = nullptr;
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::unique_ptr<Event> staging_free_;  // created once the device is current: events belong
                                         // to the device current at their creation
  std::mutex mu_;
};

}  // namespace cujax::cuda
