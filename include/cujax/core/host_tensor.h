// A dense, row-major array in host memory: constants in the IR, values in the CPU backend, and
// the contents of .npy files. Copies share storage; a producer writes it once and then treats it
// as immutable, so use clone() before writing into a tensor that another owner may see.
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cujax/core/dtype.h"
#include "cujax/core/shape.h"

namespace cujax {

class HostTensor {
 public:
  HostTensor() = default;
  // Zero-filled storage for `shape` elements of `dtype`.
  HostTensor(DType dtype, Shape shape);
  // Storage left as it is, for a result that writes every element (kernels: skipping the
  // zero fill saves a pass over memory per op).
  static HostTensor uninitialized(DType dtype, Shape shape);

  template <class T>
  static HostTensor from_vector(const std::vector<T>& values, Shape shape) {
    HostTensor t(dtype_of<T>(), std::move(shape));
    if (static_cast<int64_t>(values.size()) != t.size()) throw_size_mismatch(values.size(), t);
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> is packed
      for (size_t i = 0; i < values.size(); ++i) t.data_as<bool>()[i] = values[i];
    } else if (t.nbytes() > 0) {  // an empty vector's data() may be null
      std::memcpy(t.data(), values.data(), t.nbytes());
    }
    return t;
  }
  // Reads `nbytes()` bytes for the given type from `bytes` (little-endian, row-major).
  static HostTensor from_bytes(DType dtype, Shape shape, std::span<const std::byte> bytes);
  // A tensor over existing storage (a cpu device buffer's bytes), sharing its ownership.
  static HostTensor from_storage(DType dtype, Shape shape, std::shared_ptr<void> storage);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size() const { return size_; }
  size_t nbytes() const { return static_cast<size_t>(size_) * size_of(dtype_); }
  bool valid() const { return storage_ != nullptr || size_ == 0; }

  void* data() { return storage_.get(); }
  const void* data() const { return storage_.get(); }
  template <class T>
  T* data_as() {
    return static_cast<T*>(data());
  }
  template <class T>
  const T* data_as() const {
    return static_cast<const T*>(data());
  }
  template <class T>
  std::vector<T> to_vector() const {
    const T* p = data_as<T>();
    return std::vector<T>(p, p + size_);
  }

  // Same bytes, new shape with the same element count (no copy).
  HostTensor reshaped(Shape shape) const;
  // Same bytes reinterpreted as another dtype of the same width (no copy).
  HostTensor bitcast(DType dtype) const;
  HostTensor clone() const;
  // The storage, shared (a cpu device buffer holds its tensor's bytes this way).
  std::shared_ptr<void> storage() const { return storage_; }
  // Whether this tensor is the storage's only owner: then nobody else can see a write into it,
  // and a kernel may put its result there (a donated or dead operand's memory, reused).
  bool is_unique() const { return storage_ != nullptr && storage_.use_count() == 1; }
  // How many tensors (and buffers) share this storage: views from reshaped() and bitcast() too.
  long storage_owners() const { return storage_.use_count(); }

  // "f32[2,3]"
  std::string type_string() const;

 private:
  [[noreturn]] static void throw_size_mismatch(size_t given, const HostTensor& t);
  DType dtype_ = DType::F32;
  Shape shape_;
  int64_t size_ = 0;
  std::shared_ptr<std::byte[]> storage_;
};

}  // namespace cujax
