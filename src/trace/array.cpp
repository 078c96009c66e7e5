#include "cujax/array.h"

#include <set>

#include "cujax/core/dynamic_shape.h"
#include "cujax/devices.h"
#include "cujax/distributed.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/buffer.h"
#include "cujax/sharding.h"
#include "cujax/trace/trace.h"
#include "cujax/transfer_guard.h"

namespace cujax {

std::string ShapeDtype::str() const {
  return std::string(mlir_name(dtype)) + shape_pattern_to_string(shape) +
         (weak_type ? "{weak}" : "");
}

namespace {
constexpr size_t kHostValueBytes = 64;

const ShapeDtype& invalid_aval() {
  throw Error("use of an uninitialized Array");
}

// As JAX says it, naming the array and what this process holds.
std::string not_addressable_message(const ArrayImpl& impl) {
  std::string held;
  const auto devices = impl.sharding->device_ids();
  for (size_t p = 0; p < impl.shards.size(); ++p)
    if (impl.shards[p]) held += (held.empty() ? "cpu:" : ", cpu:") + std::to_string(devices[p]);
  return "Fetching the value of an Array " + impl.aval.str() + " with " + impl.sharding->str() +
         " that spans non-addressable (non process local) devices is not possible: process " +
         std::to_string(distributed::process_index()) + " of " +
         std::to_string(distributed::process_count()) + " holds the shards on " +
         (held.empty() ? "no devices" : held) +
         ". Use process_allgather(x) to fetch the global value in every process, or "
         "addressable_shards(x) for this process's shards.";
}

std::string tracer_origin(const ArrayImpl& impl) {
  if (impl.value && impl.value->defining_op)
    return "the result of " + impl.value->defining_op->name;
  return "an argument of the traced function";
}
}  // namespace

const ShapeDtype& Array::aval() const {
  return impl_ ? impl_->aval : invalid_aval();
}
bool Array::is_tracer() const {
  return impl_ && impl_->trace != nullptr;
}
ir::Value* Array::tracer_value() const {
  return impl_ ? impl_->value : nullptr;
}
trace::TraceContext* Array::trace_context() const {
  return impl_ ? impl_->trace : nullptr;
}

std::shared_ptr<runtime::Buffer> Array::buffer() const {
  if (!impl_) throw Error("use of an uninitialized Array");
  if (is_tracer())
    throw ConcretizationError("a traced array (" + aval().str() + ", " + tracer_origin(*impl_) +
                              ") has no concrete value");
  if (impl_->donated)
    throw Error("Array " + aval().str() +
                " has been deleted: it was donated to a jitted call (donate_argnums)");
  if (!impl_->buffer && !impl_->shards.empty()) {
    // This process's shards, when they cover every tile (all of them, or a replicated value
    // across processes).
    const HloSharding h = impl_->sharding->hlo(shape());
    HostTensor global(dtype(), shape());
    std::set<std::vector<int64_t>> tiles;
    for (size_t p = 0; p < impl_->shards.size(); ++p)
      if (impl_->shards[p] && tiles.insert(h.coords(static_cast<int64_t>(p))).second) {
        const runtime::DeviceBuffer& shard = impl_->shards[p]->wait();
        host_place(global,
                   shard.platform == "cpu"
                       ? shard.as_host_tensor()
                       : runtime::transfer_to_host(shard, false, "a shard of " + aval().str()),
                   impl_->sharding->shard_index(shape(), p));
      }
    if (static_cast<int64_t>(tiles.size()) * h.replicas != h.num_partitions())
      throw Error(not_addressable_message(*impl_));
    impl_->buffer = std::make_shared<runtime::Buffer>(
        runtime::DeviceBuffer::on_cpu(std::move(global), impl_->device_id));
  }
  if (!impl_->buffer)
    throw Error("an abstract " + aval().str() +
                " (a ShapeDtype argument of lower()) has no value; pass a concrete Array");
  return impl_->buffer;
}

const Array& Array::block_until_ready() const {
  if (is_tracer()) return *this;
  if (impl_->sharding && !impl_->donated) {
    for (const auto& b : impl_->shards)
      if (b) b->block_until_ready();
  } else {
    buffer()->block_until_ready();
  }
  return *this;
}

bool Array::is_ready() const {
  if (is_tracer()) return false;
  if (impl_->sharding && !impl_->donated) {
    for (const auto& b : impl_->shards)
      if (b && !b->is_ready()) return false;
    return true;
  }
  return buffer()->is_ready();
}

HostTensor Array::to_host() const {
  if (is_tracer())
    throw ConcretizationError(
        "Abstract tracer value encountered where a concrete value is expected: " + aval().str() +
        ", " + tracer_origin(*impl_) +
        ". Inside jit, arrays are traced with their shape and dtype only; a host copy needs "
        "the value. Return the array from the jitted function, or make the argument static.");
  return runtime::transfer_to_host(buffer()->wait(), false, aval().str());
}

HostTensor device_get(const Array& x) {
  if (x.is_tracer()) return x.to_host();  // the ConcretizationError
  return runtime::transfer_to_host(x.buffer()->wait(), true, x.aval().str());
}

uintptr_t Array::unsafe_buffer_pointer() const {
  return reinterpret_cast<uintptr_t>(buffer()->wait().data.get());
}

bool Array::is_deleted() const {
  return impl_ && !is_tracer() && impl_->donated;
}

bool Array::committed() const {
  if (is_tracer()) throw ConcretizationError("a traced array is not placed on a device");
  return impl_->committed;
}

void Array::check_host_type(DType requested, const char* what) const {
  if (requested != dtype())
    throw Error(std::string(what) + "<" + std::string(mlir_name(requested)) +
                ">() on an array of dtype " + std::string(mlir_name(dtype())) +
                "; use astype() first");
}

Array::operator bool() const {
  if (is_tracer())
    throw ConcretizationError(
        "Attempted boolean conversion of traced array with shape " + aval().str() + " (" +
        tracer_origin(*impl_) +
        "). The condition depends on a traced value, so it is unknown while jit traces. Use "
        "numpy::where(cond, x, y) for an element-wise choice, lax::cond for a branch, "
        "lax::while_loop for a loop, or pass the value as a static argument.");
  if (size() != 1)
    throw Error("the truth value of an array with " + std::to_string(size()) +
                " elements is ambiguous; reduce it with any() or all()");
  HostTensor h = to_host();
  bool truth = false;
  visit_dtype(h.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    truth = static_cast<double>(h.data_as<T>()[0]) != 0.0;
  });
  return truth;
}

std::vector<std::string> Array::devices() const {
  if (is_tracer()) throw ConcretizationError("a traced array has no devices");
  if (!impl_->sharding) return {impl_->platform + ":" + std::to_string(impl_->device_id)};
  std::vector<std::string> names;
  for (int d : impl_->sharding->device_ids()) names.push_back("cpu:" + std::to_string(d));
  return names;
}

std::string Array::sharding() const {
  if (is_tracer()) throw ConcretizationError("a traced array has no sharding");
  if (impl_->sharding) return impl_->sharding->str();
  return "SingleDeviceSharding(" + impl_->platform + ":" + std::to_string(impl_->device_id) + ")";
}

Array array(const HostTensor& value, bool weak_type) {
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = ShapeDtype{value.shape(), value.dtype(), weak_type};
  impl->platform = default_backend();  // uncommitted, on the default device as in JAX
  impl->buffer = std::make_shared<runtime::Buffer>(
      runtime::transfer_to_device(value, impl->platform, impl->device_id, true, impl->aval.str()));
  // Kept only for small values: a kept copy shares a cpu buffer's memory, and a large array
  // that something else holds could not be donated in place.
  if (value.nbytes() <= kHostValueBytes) impl->host_value = std::make_shared<HostTensor>(value);
  return Array(impl);
}

Array scalar(double value) {
  return array(HostTensor::from_vector<float>({static_cast<float>(value)}, {}), true);
}
Array scalar(int value) {
  return array(HostTensor::from_vector<int32_t>({value}, {}), true);
}
Array scalar(int64_t value) {
  return array(HostTensor::from_vector<int32_t>({static_cast<int32_t>(value)}, {}), true);
}
Array scalar(bool value) {
  return array(HostTensor::from_vector<bool>({value}, {}), true);
}

Array scalar(double value, DType dtype) {
  HostTensor t(dtype, {});
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    t.data_as<T>()[0] = static_cast<T>(value);
  });
  return array(t);
}

}  // namespace cujax
