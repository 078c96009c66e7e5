// Sharding: how an array is split over devices, as jax.sharding. A Mesh names the axes of an
// n-d grid of devices; a PartitionSpec maps each array dimension to mesh axes (or none); a
// NamedSharding(mesh, spec) is the pair. HloSharding is the tile form (mhlo.sharding) that the
// partitioner works with: tiles per dimension and which partition holds which tile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "cujax/array.h"
#include "cujax/core/shape.h"
#include "cujax/devices.h"

namespace cujax {

class Mesh {
 public:
  Mesh() = default;
  // `devices` row-major over `shape`; their position is the partition id.
  Mesh(std::vector<int> devices, Shape shape, std::vector<std::string> axis_names);
  const std::vector<int>& devices() const { return devices_; }
  const Shape& shape() const { return shape_; }
  const std::vector<std::string>& axis_names() const { return axis_names_; }
  int64_t size() const { return static_cast<int64_t>(devices_.size()); }
  int axis_index(const std::string& name) const;  // throws naming the known axes
  int64_t axis_size(const std::string& name) const { return shape_[axis_index(name)]; }
  // "Mesh('data': 4, 'model': 2)"
  std::string str() const;
  bool operator==(const Mesh& o) const = default;

 private:
  std::vector<int> devices_;
  Shape shape_;
  std::vector<std::string> axis_names_;
};

// A mesh over the first prod(shape) global devices (distributed::global_device_ids(): this
// process's cpu devices, or every process's after distributed::initialize).
Mesh make_mesh(const Shape& shape, const std::vector<std::string>& axis_names);

// One dimension of a PartitionSpec: no axes (None), one axis, or several (major first). JAX's
// None is std::nullopt, none or nullptr: P("data", nullptr) is P('data', None).
struct PartitionEntry {
  std::vector<std::string> axes;
  PartitionEntry() = default;
  PartitionEntry(std::nullopt_t) {}
  PartitionEntry(std::nullptr_t) {}
  PartitionEntry(const char* axis) {
    if (axis) axes.emplace_back(axis);
  }
  PartitionEntry(std::string axis) : axes{std::move(axis)} {}
  PartitionEntry(std::optional<std::string> axis) {
    if (axis) axes.push_back(std::move(*axis));
  }
  PartitionEntry(std::vector<std::string> a) : axes(std::move(a)) {}
  bool operator==(const PartitionEntry& o) const = default;
};

// JAX's P('data', None): trailing dimensions not named are replicated.
struct PartitionSpec {
  std::vector<PartitionEntry> dims;
  PartitionSpec() = default;
  template <class... E>
  requires(sizeof...(E) > 0 && (std::is_constructible_v<PartitionEntry, E> && ...))
      PartitionSpec(E&&... e)
      : dims{PartitionEntry(std::forward<E>(e))...} {}
  explicit PartitionSpec(std::vector<PartitionEntry> d) : dims(std::move(d)) {}
  // "PartitionSpec('data', None)"
  std::string str() const;
  bool operator==(const PartitionSpec& o) const = default;
};
using P = PartitionSpec;

// Tile form of a sharding of a rank-r array over `num_partitions` partitions.
struct HloSharding {
  std::vector<int64_t> tiles;         // tiles per dimension
  int64_t replicas = 1;               // copies of each tile (last_tile_dim_replicate)
  std::vector<int64_t> tile_devices;  // partitions in row-major order of [tiles..., replicas]

  static HloSharding replicated(int64_t rank, int64_t num_partitions);
  int64_t num_partitions() const { return static_cast<int64_t>(tile_devices.size()); }
  bool is_replicated() const;
  // Tile coordinate of partition p, one per dimension.
  std::vector<int64_t> coords(int64_t p) const;
  // The mhlo.sharding string as JAX prints it: "{devices=[8,1]<=[8]}", "{replicated}".
  std::string str() const;
  // Reads str()'s forms (iota `<=[..]T(..)` or an explicit device list).
  static HloSharding parse(const std::string& text, int64_t rank, int64_t num_partitions);
  bool operator==(const HloSharding& o) const;
};

class Sharding {
 public:
  enum class Kind { SingleDevice, Named, Hlo };
  Sharding() = default;
  Kind kind() const { return kind_; }
  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }
  // The devices holding shards, in partition order.
  std::vector<int> device_ids() const;
  int64_t num_devices() const { return static_cast<int64_t>(device_ids().size()); }
  // The partitions (positions in device_ids()) whose device this process runs.
  std::vector<int64_t> addressable_partitions() const;
  // Whether this process runs all of device_ids() (always, with one process).
  bool is_fully_addressable() const;
  // "NamedSharding(mesh=Mesh('data': 8), spec=PartitionSpec('data', None))"
  std::string str() const;
  // Tile form for an array of `shape`; throws (naming the shape, dimension and axis) when a
  // dimension does not divide, an axis is unknown or used twice.
  HloSharding hlo(const Shape& shape) const;
  // [start, stop) per dimension of the slice partition p holds.
  std::vector<std::pair<int64_t, int64_t>> shard_index(const Shape& shape, int64_t p) const;

  friend Sharding NamedSharding(Mesh mesh, PartitionSpec spec);
  friend Sharding SingleDeviceSharding(int device);
  friend Sharding GSPMDSharding(std::vector<int> devices, HloSharding hlo);

 private:
  Kind kind_ = Kind::SingleDevice;
  Mesh mesh_;
  PartitionSpec spec_;
  std::vector<int> devices_{0};
  std::optional<HloSharding> hlo_;
};

Sharding NamedSharding(Mesh mesh, PartitionSpec spec);
Sharding SingleDeviceSharding(int device);
// A sharding given by its tile form over `devices` (what propagation found for an output
// that no PartitionSpec of the input mesh describes).
Sharding GSPMDSharding(std::vector<int> devices, HloSharding hlo);

// The NamedSharding on `mesh` whose tile form is `hlo` for `shape`, else GSPMDSharding.
Sharding sharding_from_hlo(const Mesh& mesh, const Shape& shape, const HloSharding& hlo);

// Places x's shards on the sharding's devices (one buffer per device). With several processes,
// `x` is the global value (every process passes the same, as a data loader with the same seed
// gives) and only this process's shards are kept.
Array device_put(const Array& x, const Sharding& sharding);
// Places x on one device (jax.device_put(x, device)), committed there: ops on it run on that
// device. A copy when x is elsewhere (a device-to-device transfer), else the same buffer.
Array device_put(const Array& x, const Device& device);
Array device_put(const Array& x, const std::string& platform, int device);

struct Shard {
  int device = 0;
  std::vector<std::pair<int64_t, int64_t>> index;  // [start, stop) per dimension
  Array data;
};
// The pieces of `x` on this process's devices (one shard for an unsharded array).
std::vector<Shard> addressable_shards(const Array& x);
// Whether this process holds every shard of `x`. When it does not, to_host() works only if
// the shards it holds cover the array (a replicated value); else it throws, naming `x`.
bool is_fully_addressable(const Array& x);
// The global value of `x` in every process (multihost_utils.process_allgather): an all_gather
// across the processes when `x` is not fully addressable. Every process must call it.
Array process_allgather(const Array& x);
// A barrier across every process (multihost_utils.sync_global_devices): returns once all have
// called it with the same name; throws naming the processes that reached another one. A
// collective: a process that never calls it leaves the others waiting until the collective
// timeout (CUJAX_COLLECTIVE_TIMEOUT).
void sync_global_devices(const std::string& name);
// The sharding of a concrete array (SingleDeviceSharding(0) when unsharded).
Sharding sharding_of(const Array& x);

// Inside jit: constrains x to `sharding` (a custom_call @Sharding, as JAX lowers it); outside
// a trace it is device_put.
Array with_sharding_constraint(const Array& x, const Sharding& sharding);

// Slicing and assembling host values by shards (used by device_put, to_host and jit).
HostTensor host_slice(const HostTensor& x, const std::vector<std::pair<int64_t, int64_t>>& index);
void host_place(HostTensor& dst, const HostTensor& piece,
                const std::vector<std::pair<int64_t, int64_t>>& index);

}  // namespace cujax
