#include "cujax/core/host_tensor.h"

#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "cujax/core/error.h"

namespace cujax {

namespace {

// Freed blocks of at least kMinCached bytes, kept by size for the next tensor of that size: a
// jitted step allocates the same sizes every call, and fresh pages from the OS cost a page fault
// and a zero fill each. At most kMaxCached bytes are kept.
class BlockCache {
 public:
  static constexpr size_t kMinCached = size_t{1} << 16;
  static constexpr size_t kMaxCached = size_t{512} << 20;

  std::byte* take(size_t nbytes) {
    if (nbytes >= kMinCached) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(nbytes);
      if (it != free_.end()) {
        std::byte* p = it->second;
        free_.erase(it);
        cached_ -= nbytes;
        return p;
      }
    }
    return static_cast<std::byte*>(::operator new[](nbytes, std::align_val_t{64}));
  }
  void give(std::byte* p, size_t nbytes) {
    if (nbytes >= kMinCached) {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + nbytes <= kMaxCached) {
        free_.emplace(nbytes, p);
        cached_ += nbytes;
        return;
      }
    }
    ::operator delete[](p, std::align_val_t{64});
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, std::byte*> free_;
  size_t cached_ = 0;
};

// Never destroyed: tensors owned by other statics may be freed after it would be.
BlockCache& block_cache() {
  static BlockCache* cache = new BlockCache;
  return *cache;
}

// 64-byte alignment keeps vector loads and BLAS happy.
std::shared_ptr<std::byte[]> allocate(size_t nbytes, bool zero = true) {
  const size_t padded = nbytes == 0 ? 64 : ((nbytes + 63) / 64) * 64;
  std::byte* p = block_cache().take(padded);
  if (zero) std::memset(p, 0, padded);
  return std::shared_ptr<std::byte[]>(p, [padded](std::byte* q) { block_cache().give(q, padded); });
}

}  // namespace

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), size_(num_elements(shape_)) {
  for (int64_t d : shape_)
    if (d < 0) throw Error("HostTensor: negative dimension in shape " + shape_to_string(shape_));
  storage_ = allocate(nbytes());
}

HostTensor HostTensor::uninitialized(DType dtype, Shape shape) {
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.size_ = num_elements(t.shape_);
  for (int64_t d : t.shape_)
    if (d < 0) throw Error("HostTensor: negative dimension in shape " + shape_to_string(t.shape_));
  t.storage_ = allocate(t.nbytes(), false);
  return t;
}

void HostTensor::throw_size_mismatch(size_t given, const HostTensor& t) {
  throw Error("HostTensor: " + std::to_string(given) + " values given for " + t.type_string() +
              ", which has " + std::to_string(t.size()) + " elements");
}

HostTensor HostTensor::from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes) {
  HostTensor t(dtype, std::move(shape));
  if (bytes.size() != t.nbytes())
    throw Error("HostTensor::from_bytes: " + t.type_string() + " needs " +
                std::to_string(t.nbytes()) + " bytes, got " + std::to_string(bytes.size()));
  if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

HostTensor HostTensor::from_storage(DType dtype, Shape shape, std::shared_ptr<void> storage) {
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.size_ = num_elements(t.shape_);
  if (!storage && t.size_ > 0)
    throw Error("HostTensor::from_storage: no storage for " + t.type_string());
  t.storage_ = std::shared_ptr<std::byte[]>(storage, static_cast<std::byte*>(storage.get()));
  return t;
}

HostTensor HostTensor::reshaped(Shape shape) const {
  if (num_elements(shape) != size_)
    throw Error("reshape: cannot view " + type_string() + " as shape " + shape_to_string(shape));
  HostTensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

HostTensor HostTensor::bitcast(DType dtype) const {
  if (size_of(dtype) != size_of(dtype_))
    throw Error("bitcast: " + type_string() + " to " + std::string(mlir_name(dtype)) +
                " changes the element width");
  HostTensor t = *this;
  t.dtype_ = dtype;
  return t;
}

HostTensor HostTensor::clone() const {
  HostTensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.data(), data(), nbytes());
  return t;
}

std::string HostTensor::type_string() const {
  return std::string(mlir_name(dtype_)) + shape_to_string(shape_);
}

}  // namespace cujax
