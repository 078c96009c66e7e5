#include "backends/cuda/device.h"

#include <cstdint>
#include <cstring>
#include <filesystem>

#include "backends/cuda/cuda_check.h"

namespace cujax::cuda {

void throw_cuda_error(const std::string& call, const std::string& error, const char* file,
                      int line) {
  throw CudaError(call + " failed: " + error + " at " +
                  std::filesystem::path(file).filename().string() + ":" + std::to_string(line));
}

Event::Event(bool timing) {
  CUJAX_CUDA_CHECK(
      cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
}
Event::~Event() {
  if (e_) cudaEventDestroy(e_);
}
void Event::record(cudaStream_t s) {
  CUJAX_CUDA_CHECK(cudaEventRecord(e_, s));
}
void Event::synchronize() const {
  CUJAX_CUDA_CHECK(cudaEventSynchronize(e_));
}
float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0;
  CUJAX_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
  return ms;
}

Device::Device(int ordinal) : ordinal_(ordinal) {
  activate();
  CUJAX_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUJAX_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, ordinal_));
  // Keep freed blocks in the pool instead of returning them to the driver at each sync: this
  // is what makes the pool a caching allocator.
  uint64_t threshold = UINT64_MAX;
  CUJAX_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &threshold));
  staging_free_ = std::make_unique<Event>();
  staging_free_->record(stream_);
}

Device::~Device() {
  // Destructors must not throw: errors here have nowhere to go.
  cudaSetDevice(ordinal_);
  if (workspace_) cudaFreeAsync(workspace_, stream_);
  if (stream_) cudaStreamSynchronize(stream_);
  if (pinned_) cudaFreeHost(pinned_);
  if (stream_) cudaStreamDestroy(stream_);
}

void Device::activate() const {
  CUJAX_CUDA_CHECK(cudaSetDevice(ordinal_));
}

std::shared_ptr<void> Device::allocate(size_t bytes) {
  void* p = nullptr;
  // Whole 8-byte words, so that kernels may update a 1- or 2-byte element through the aligned
  // 4-byte word holding it (scatter's atomicCAS loops).
  bytes = (bytes + 7) & ~size_t{7};
  if (bytes > 0) CUJAX_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, pool_, stream_));
  std::shared_ptr<Device> self = shared_from_this();
  return std::shared_ptr<void>(p, [self](void* q) {
    if (q) cudaFreeAsync(q, self->stream_);  // no throw from a deleter
  });
}

void* Device::workspace(size_t bytes) {
  if (bytes > workspace_bytes_) {
    if (workspace_) CUJAX_CUDA_CHECK(cudaFreeAsync(workspace_, stream_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
    CUJAX_CUDA_CHECK(cudaMallocFromPoolAsync(&workspace_, bytes, pool_, stream_));
    workspace_bytes_ = bytes;
  }
  return workspace_;
}

DeviceArray Device::allocate(DType dtype, Shape shape) {
  DeviceArray a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.data = allocate(a.nbytes());
  return a;
}

void* Device::staging(size_t bytes) {
  staging_free_->synchronize();
  if (bytes > pinned_bytes_) {
    if (pinned_) CUJAX_CUDA_CHECK(cudaFreeHost(pinned_));
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    CUJAX_CUDA_CHECK(cudaHostAlloc(&pinned_, bytes, cudaHostAllocDefault));
    pinned_bytes_ = bytes;
  }
  return pinned_;
}

namespace {
size_t aligned(size_t n) {
  return (n + 255) & ~size_t{255};
}
}  // namespace

std::vector<DeviceArray> Device::upload(std::span<const HostTensor> tensors) {
  size_t total = 0;
  for (const HostTensor& t : tensors) total += aligned(t.nbytes());
  auto* host = static_cast<std::byte*>(staging(total));
  std::vector<DeviceArray> out;
  size_t offset = 0;
  for (const HostTensor& t : tensors) {
    DeviceArray a = allocate(t.dtype(), t.shape());
    if (t.nbytes() > 0) {
      std::memcpy(host + offset, t.data(), t.nbytes());
      CUJAX_CUDA_CHECK(cudaMemcpyAsync(a.data.get(), host + offset, t.nbytes(),
                                       cudaMemcpyHostToDevice, stream_));
    }
    offset += aligned(t.nbytes());
    out.push_back(std::move(a));
  }
  staging_free_->record(stream_);
  return out;
}

std::vector<HostTensor> Device::download(std::span<const DeviceArray> arrays) {
  size_t total = 0;
  for (const DeviceArray& a : arrays) total += aligned(a.nbytes());
  auto* host = static_cast<std::byte*>(staging(total));
  size_t offset = 0;
  for (const DeviceArray& a : arrays) {
    if (a.nbytes() > 0)
      CUJAX_CUDA_CHECK(cudaMemcpyAsync(host + offset, a.data.get(), a.nbytes(),
                                       cudaMemcpyDeviceToHost, stream_));
    offset += aligned(a.nbytes());
  }
  staging_free_->record(stream_);
  staging_free_->synchronize();
  std::vector<HostTensor> out;
  offset = 0;
  for (const DeviceArray& a : arrays) {
    HostTensor t(a.dtype, a.shape);
    if (a.nbytes() > 0) std::memcpy(t.data(), host + offset, a.nbytes());
    offset += aligned(a.nbytes());
    out.push_back(std::move(t));
  }
  return out;
}

void Device::synchronize() const {
  CUJAX_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

}  // namespace cujax::cuda
