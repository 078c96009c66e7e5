// cujax::Array: the one array type. Concrete arrays hold a buffer on a device that becomes
// ready asynchronously; tracers stand for a value inside a trace (jit, grad) and know only
// their shape and dtype. User code is written once and runs either way.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "cujax/core/dtype.h"
#include "cujax/core/error.h"
#include "cujax/core/host_tensor.h"
#include "cujax/core/shape.h"

namespace cujax {

namespace ir {
struct Value;
}
namespace runtime {
class Buffer;
}
namespace trace {
class TraceContext;
}

// Asking a tracer for a concrete value (bool, item, host copy).
class ConcretizationError : public Error {
 public:
  using Error::Error;
};

// Shape, dtype and weak type: the abstract value JAX calls ShapedArray (ShapeDtypeStruct).
struct ShapeDtype {
  Shape shape;
  DType dtype = DType::F32;
  bool weak_type = false;

  bool operator==(const ShapeDtype& o) const {
    return shape == o.shape && dtype == o.dtype && weak_type == o.weak_type;
  }
  // "f32[32,128]", with "{weak}" for weakly typed values
  std::string str() const;
};

class Sharding;

struct ArrayImpl;
struct IndexItem;

class Array {
 public:
  Array() = default;
  explicit Array(std::shared_ptr<ArrayImpl> impl) : impl_(std::move(impl)) {}

  bool valid() const { return impl_ != nullptr; }
  const ShapeDtype& aval() const;
  const Shape& shape() const { return aval().shape; }
  DType dtype() const { return aval().dtype; }
  bool weak_type() const { return aval().weak_type; }
  int64_t ndim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size() const { return num_elements(shape()); }
  bool is_tracer() const;

  // Waits until the value is computed; rethrows (naming the op) an error raised computing it.
  const Array& block_until_ready() const;
  bool is_ready() const;

  // Host copies wait for the value; on a tracer they throw ConcretizationError.
  HostTensor to_host() const;
  template <class T>
  std::vector<T> to_vector() const {
    check_host_type(dtype_of<T>(), "to_vector");
    return to_host().to_vector<T>();
  }
  template <class T>
  T item() const {
    check_host_type(dtype_of<T>(), "item");
    if (size() != 1)
      throw Error("item(): array of shape " + shape_to_string(shape()) + " has " +
                  std::to_string(size()) + " elements, not 1");
    return to_host().data_as<T>()[0];
  }
  // Truth of a one-element array; throws ConcretizationError on a tracer (use where/cond).
  explicit operator bool() const;

  // x[index] with NumPy's rules (numpy::at): an integer, Slice(start, stop, step), newaxis,
  // Ellipsis or an integer array, or several items in braces: x[1, ::2] is
  // x[{1, Slice(none, none, 2)}]. Integers and slices lower to one slice and a reshape, array
  // indices to a gather.
  Array operator[](const IndexItem& item) const;
  Array operator[](std::initializer_list<IndexItem> index) const;
  Array operator[](const std::vector<IndexItem>& index) const;
  // x.T: the axes reversed. x.mT: the last two axes swapped (jnp.matrix_transpose).
  Array T() const;
  Array mT() const;

  // Devices and placement: "cpu:0".
  std::vector<std::string> devices() const;
  std::string sharding() const;
  // Whether the array was placed on its device on purpose (device_put to a device, or computed
  // from such arrays): JAX's committed arrays.
  bool committed() const;
  // Whether the array was donated to a jitted call (its buffer is gone).
  bool is_deleted() const;
  // The address of the array's memory on its device (waits for the producing call to be
  // enqueued): tests use it to see a donated buffer reused in place.
  uintptr_t unsafe_buffer_pointer() const;

  // Internals used by tracing and dispatch.
  const std::shared_ptr<ArrayImpl>& impl() const { return impl_; }
  ir::Value* tracer_value() const;
  trace::TraceContext* trace_context() const;
  std::shared_ptr<runtime::Buffer> buffer() const;

 private:
  void check_host_type(DType requested, const char* what) const;
  std::shared_ptr<ArrayImpl> impl_;
};

// ----- Index items (x[...]) -----------------------------------------------------------------

// Python's None where an optional bound or axis is meant: Slice(1, none), x[none].
inline constexpr std::nullopt_t none = std::nullopt;

// A Python slice start:stop:step; none is an open bound. Bounds count from the end when
// negative and are clamped to the dimension, as in NumPy.
struct Slice {
  std::optional<int64_t> start, stop, step;
  explicit Slice(std::optional<int64_t> start_ = std::nullopt,
                 std::optional<int64_t> stop_ = std::nullopt,
                 std::optional<int64_t> step_ = std::nullopt)
      : start(start_), stop(stop_), step(step_) {}
};
struct NewAxisT {};
struct EllipsisT {};
// x[newaxis] (x[None] in NumPy) inserts a dimension of size 1; x[Ellipsis] (x[...]) stands for
// every dimension not otherwise indexed.
inline constexpr NewAxisT newaxis{};
inline constexpr NewAxisT NewAxis{};
inline constexpr EllipsisT Ellipsis{};

// One item of an index tuple: an integer, a Slice, newaxis (or none), Ellipsis, or an integer
// (or concrete boolean) Array.
struct IndexItem {
  std::variant<int64_t, Slice, NewAxisT, EllipsisT, Array> v;
  template <std::integral I>
  requires(!std::same_as<I, bool>) IndexItem(I i) : v(static_cast<int64_t>(i)) {}  // NOLINT
  IndexItem(Slice s) : v(s) {}                                                     // NOLINT
  IndexItem(NewAxisT n) : v(n) {}                                                  // NOLINT
  IndexItem(std::nullopt_t) : v(NewAxisT{}) {}                                     // NOLINT
  IndexItem(EllipsisT e) : v(e) {}                                                 // NOLINT
  IndexItem(const Array& a) : v(a) {}                                              // NOLINT
};
using Index = std::vector<IndexItem>;

// The value of `x` on the host: an explicit device-to-host transfer (jax.device_get), where
// to_host() and item() are implicit ones for the transfer guard.
HostTensor device_get(const Array& x);

// Concrete arrays from host data (explicit host-to-device transfers).
Array array(const HostTensor& value, bool weak_type = false);
template <class T>
Array array(const std::vector<T>& values, Shape shape) {
  return array(HostTensor::from_vector(values, std::move(shape)));
}
template <class T>
Array array(const std::vector<T>& values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return array(HostTensor::from_vector(values, Shape{n}));
}
// A weakly typed scalar, as a Python scalar is in JAX: 2.0 is f32{weak}, 3 is i32{weak}.
Array scalar(double value);
Array scalar(int value);
Array scalar(int64_t value);
Array scalar(bool value);
// A strongly typed scalar of `dtype`.
Array scalar(double value, DType dtype);

}  // namespace cujax
