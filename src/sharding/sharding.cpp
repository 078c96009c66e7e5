#include "cujax/sharding.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <sstream>

#include "cujax/distributed.h"
#include "cujax/jit.h"
#include "cujax/runtime/buffer.h"
#include "cujax/runtime/spmd.h"
#include "cujax/trace/trace.h"
#include "sharding/partition.h"

namespace cujax {

namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// iota(prod(dims)).reshape(dims).transpose(perm).flatten()
std::vector<int64_t> iota_devices(const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& perm) {
  const int64_t n = std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
  std::vector<int64_t> stride(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    stride[i] = stride[i + 1] * dims[i + 1];
  std::vector<int64_t> out(n), idx(perm.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t src = 0;
    for (size_t j = 0; j < perm.size(); ++j) src += idx[j] * stride[perm[j]];
    out[k] = src;
    for (int64_t j = static_cast<int64_t>(perm.size()) - 1; j >= 0; --j) {
      if (++idx[j] < dims[perm[j]]) break;
      idx[j] = 0;
    }
  }
  return out;
}

std::vector<int64_t> parse_list(const std::string& s, size_t& pos, const std::string& text) {
  std::vector<int64_t> v;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == ',')) {
    if (s[pos] == ',') {
      ++pos;
      continue;
    }
    size_t used = 0;
    v.push_back(std::stoll(s.substr(pos), &used));
    pos += used;
  }
  if (v.empty()) throw Error("mhlo.sharding: cannot read " + text);
  return v;
}

void expect(const std::string& s, size_t& pos, const std::string& what, const std::string& text) {
  if (s.compare(pos, what.size(), what) != 0)
    throw Error("mhlo.sharding: expected '" + what + "' at " + std::to_string(pos) + " in " + text);
  pos += what.size();
}

}  // namespace

// ---- Mesh and PartitionSpec ----

Mesh::Mesh(std::vector<int> devices, Shape shape, std::vector<std::string> axis_names)
    : devices_(std::move(devices)), shape_(std::move(shape)), axis_names_(std::move(axis_names)) {
  if (shape_.size() != axis_names_.size())
    throw Error("Mesh: shape " + shape_to_string(shape_) + " has " + std::to_string(shape_.size()) +
                " axes but " + std::to_string(axis_names_.size()) + " axis names");
  if (num_elements(shape_) != static_cast<int64_t>(devices_.size()))
    throw Error("Mesh: shape " + shape_to_string(shape_) + " needs " +
                std::to_string(num_elements(shape_)) + " devices, got " +
                std::to_string(devices_.size()));
  for (size_t i = 0; i < axis_names_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (axis_names_[i] == axis_names_[j])
        throw Error("Mesh: axis name '" + axis_names_[i] + "' appears twice");
}

int Mesh::axis_index(const std::string& name) const {
  for (size_t i = 0; i < axis_names_.size(); ++i)
    if (axis_names_[i] == name) return static_cast<int>(i);
  std::string known;
  for (const auto& a : axis_names_) known += (known.empty() ? "'" : ", '") + a + "'";
  throw Error("unknown mesh axis '" + name + "'; the mesh has axes " + known);
}

std::string Mesh::str() const {
  std::string s = "Mesh(";
  for (size_t i = 0; i < shape_.size(); ++i)
    s += (i ? ", '" : "'") + axis_names_[i] + "': " + std::to_string(shape_[i]);
  return s + ")";
}

Mesh make_mesh(const Shape& shape, const std::vector<std::string>& axis_names) {
  const int64_t n = num_elements(shape);
  std::vector<int> devices = distributed::global_device_ids();
  if (n > static_cast<int64_t>(devices.size())) {
    const int processes = distributed::process_count();
    throw Error("make_mesh: mesh " + shape_to_string(shape) + " needs " + std::to_string(n) +
                " devices, but there are " + std::to_string(devices.size()) +
                (processes > 1 ? " (" + std::to_string(processes) + " processes x " +
                                     std::to_string(distributed::local_device_count()) + ")"
                               : "") +
                " (set CUJAX_NUM_CPU_DEVICES or runtime::set_num_cpu_devices)");
  }
  devices.resize(n);
  return Mesh(std::move(devices), shape, axis_names);
}

std::string PartitionSpec::str() const {
  std::string s = "PartitionSpec(";
  for (size_t i = 0; i < dims.size(); ++i) {
    s += i ? ", " : "";
    const auto& a = dims[i].axes;
    if (a.empty())
      s += "None";
    else if (a.size() == 1)
      s += "'" + a[0] + "'";
    else {
      s += "(";
      for (size_t j = 0; j < a.size(); ++j) s += (j ? ", '" : "'") + a[j] + "'";
      s += ")";
    }
  }
  return s + ")";
}

// ---- HloSharding ----

HloSharding HloSharding::replicated(int64_t rank, int64_t num_partitions) {
  HloSharding h;
  h.tiles.assign(rank, 1);
  h.replicas = num_partitions;
  h.tile_devices.resize(num_partitions);
  std::iota(h.tile_devices.begin(), h.tile_devices.end(), 0);
  return h;
}

bool HloSharding::is_replicated() const {
  return std::all_of(tiles.begin(), tiles.end(), [](int64_t t) { return t == 1; });
}

bool HloSharding::operator==(const HloSharding& o) const {
  if (is_replicated() && o.is_replicated()) return tiles.size() == o.tiles.size();
  return tiles == o.tiles && replicas == o.replicas && tile_devices == o.tile_devices;
}

std::vector<int64_t> HloSharding::coords(int64_t p) const {
  auto it = std::find(tile_devices.begin(), tile_devices.end(), p);
  if (it == tile_devices.end())
    throw Error("sharding " + str() + " has no partition " + std::to_string(p));
  int64_t q = (it - tile_devices.begin()) / replicas;
  std::vector<int64_t> c(tiles.size());
  for (int64_t i = static_cast<int64_t>(tiles.size()) - 1; i >= 0; --i) {
    c[i] = q % tiles[i];
    q /= tiles[i];
  }
  return c;
}

std::string HloSharding::str() const {
  if (is_replicated()) return "{replicated}";
  std::vector<int64_t> dims = tiles;
  if (replicas > 1) dims.push_back(replicas);
  std::string s = "{devices=[" + join(dims) + "]";
  const int64_t n = num_partitions();
  // The shortest iota form that gives these devices: <=[n], or <=[a,b..]T(perm).
  std::vector<int64_t> id(n);
  std::iota(id.begin(), id.end(), 0);
  bool found = tile_devices == id;
  if (found) s += "<=[" + std::to_string(n) + "]";
  for (int64_t a = 2; !found && a < n; ++a) {
    if (n % a) continue;
    if (tile_devices == iota_devices({a, n / a}, {1, 0})) {
      s += "<=[" + std::to_string(a) + "," + std::to_string(n / a) + "]T(1,0)";
      found = true;
    }
  }
  if (!found) s += join(tile_devices);
  return s + (replicas > 1 ? " last_tile_dim_replicate}" : "}");
}

HloSharding HloSharding::parse(const std::string& text, int64_t rank, int64_t num_partitions) {
  if (text == "{replicated}") return replicated(rank, num_partitions);
  size_t pos = 0;
  expect(text, pos, "{devices=[", text);
  std::vector<int64_t> dims = parse_list(text, pos, text);
  expect(text, pos, "]", text);
  HloSharding h;
  if (text.compare(pos, 3, "<=[") == 0) {
    pos += 3;
    std::vector<int64_t> reshape = parse_list(text, pos, text);
    expect(text, pos, "]", text);
    std::vector<int64_t> perm(reshape.size());
    std::iota(perm.begin(), perm.end(), 0);
    if (text.compare(pos, 2, "T(") == 0) {
      pos += 2;
      perm = parse_list(text, pos, text);
      expect(text, pos, ")", text);
    }
    h.tile_devices = iota_devices(reshape, perm);
  } else {
    h.tile_devices = parse_list(text, pos, text);
  }
  const bool rep = text.find("last_tile_dim_replicate") != std::string::npos;
  if (static_cast<int64_t>(dims.size()) != rank + (rep ? 1 : 0))
    throw Error("mhlo.sharding " + text + " does not fit an array of rank " + std::to_string(rank));
  h.replicas = rep ? dims.back() : 1;
  h.tiles.assign(dims.begin(), dims.begin() + rank);
  if (h.num_partitions() != num_partitions ||
      std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>()) != num_partitions)
    throw Error("mhlo.sharding " + text + " does not cover " + std::to_string(num_partitions) +
                " partitions");
  return h;
}

// ---- Sharding ----

Sharding NamedSharding(Mesh mesh, PartitionSpec spec) {
  std::vector<std::string> used;
  for (const auto& d : spec.dims)
    for (const auto& a : d.axes) {
      mesh.axis_index(a);
      if (std::find(used.begin(), used.end(), a) != used.end())
        throw Error("NamedSharding: mesh axis '" + a + "' is used twice in " + spec.str());
      used.push_back(a);
    }
  Sharding s;
  s.kind_ = Sharding::Kind::Named;
  s.devices_ = mesh.devices();
  s.mesh_ = std::move(mesh);
  s.spec_ = std::move(spec);
  return s;
}

Sharding SingleDeviceSharding(int device) {
  Sharding s;
  s.kind_ = Sharding::Kind::SingleDevice;
  s.devices_ = {device};
  return s;
}

Sharding GSPMDSharding(std::vector<int> devices, HloSharding hlo) {
  Sharding s;
  s.kind_ = Sharding::Kind::Hlo;
  s.devices_ = std::move(devices);
  s.hlo_ = std::move(hlo);
  return s;
}

std::vector<int> Sharding::device_ids() const {
  return devices_;
}

std::vector<int64_t> Sharding::addressable_partitions() const {
  std::vector<int64_t> out;
  const int here = distributed::process_index();
  for (size_t p = 0; p < devices_.size(); ++p)
    if (distributed::process_of_device(devices_[p]) == here) out.push_back(static_cast<int64_t>(p));
  return out;
}

bool Sharding::is_fully_addressable() const {
  return addressable_partitions().size() == devices_.size();
}

std::string Sharding::str() const {
  switch (kind_) {
    case Kind::SingleDevice:
      return "SingleDeviceSharding(device=CpuDevice(id=" + std::to_string(devices_[0]) + "))";
    case Kind::Named:
      return "NamedSharding(mesh=" + mesh_.str() + ", spec=" + spec_.str() + ")";
    case Kind::Hlo:
      break;
  }
  return "GSPMDSharding(" + hlo_->str() + ")";
}

HloSharding Sharding::hlo(const Shape& shape) const {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (kind_ == Kind::SingleDevice) return HloSharding::replicated(rank, 1);
  if (kind_ == Kind::Hlo) {
    if (static_cast<int64_t>(hlo_->tiles.size()) != rank)
      throw Error("sharding " + str() + " is for rank " + std::to_string(hlo_->tiles.size()) +
                  ", not for an array of shape " + shape_to_string(shape));
    return *hlo_;
  }
  if (static_cast<int64_t>(spec_.dims.size()) > rank)
    throw Error(spec_.str() + " has " + std::to_string(spec_.dims.size()) +
                " entries, more than the rank of an array of shape " + shape_to_string(shape));
  const auto& names = mesh_.axis_names();
  std::vector<int64_t> perm;
  HloSharding h;
  h.tiles.assign(rank, 1);
  for (int64_t i = 0; i < static_cast<int64_t>(spec_.dims.size()); ++i)
    for (const auto& a : spec_.dims[i].axes) {
      const int k = mesh_.axis_index(a);
      perm.push_back(k);
      h.tiles[i] *= mesh_.shape()[k];
    }
  for (int64_t i = 0; i < rank; ++i)
    if (shape[i] % h.tiles[i] != 0) {
      std::string axes;
      for (const auto& a : spec_.dims[i].axes)
        axes += (axes.empty() ? "'" : ", '") + a + "' (size " + std::to_string(mesh_.axis_size(a)) +
                ")";
      throw Error("sharding " + spec_.str() + ": dimension " + std::to_string(i) +
                  " of an array of shape " + shape_to_string(shape) + " has size " +
                  std::to_string(shape[i]) + ", not divisible by mesh axes " + axes +
                  " of total size " + std::to_string(h.tiles[i]));
    }
  for (size_t k = 0; k < names.size(); ++k)
    if (std::find(perm.begin(), perm.end(), static_cast<int64_t>(k)) == perm.end()) {
      perm.push_back(static_cast<int64_t>(k));
      h.replicas *= mesh_.shape()[k];
    }
  std::vector<int64_t> mesh_shape(mesh_.shape().begin(), mesh_.shape().end());
  h.tile_devices = iota_devices(mesh_shape, perm);
  return h;
}

std::vector<std::pair<int64_t, int64_t>> Sharding::shard_index(const Shape& shape,
                                                               int64_t p) const {
  const HloSharding h = hlo(shape);
  const auto c = h.coords(p);
  std::vector<std::pair<int64_t, int64_t>> index;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t n = shape[i] / h.tiles[i];
    index.push_back({c[i] * n, (c[i] + 1) * n});
  }
  return index;
}

Sharding sharding_from_hlo(const Mesh& mesh, const Shape& shape, const HloSharding& hlo) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const auto& names = mesh.axis_names();
  // Each mesh axis goes to one dimension or none; try them all (meshes have few axes).
  const int64_t choices = rank + 1;
  int64_t combos = 1;
  for (size_t i = 0; i < names.size(); ++i) combos *= choices;
  for (int reversed = 0; reversed < 2; ++reversed)
    for (int64_t c = 0; c < combos; ++c) {
      std::vector<PartitionEntry> dims(rank);
      int64_t r = c;
      for (size_t k = 0; k < names.size(); ++k) {
        const size_t a = reversed ? names.size() - 1 - k : k;
        const int64_t d = r % choices;
        r /= choices;
        if (d < rank) dims[d].axes.push_back(names[a]);
      }
      while (!dims.empty() && dims.back().axes.empty()) dims.pop_back();
      Sharding s = NamedSharding(mesh, PartitionSpec(dims));
      try {
        if (s.hlo(shape) == hlo) return s;
      } catch (const Error&) {
      }
    }
  std::vector<int> devices;
  for (int64_t p = 0; p < hlo.num_partitions(); ++p) devices.push_back(mesh.devices()[p]);
  return GSPMDSharding(std::move(devices), hlo);
}

// ---- host slicing ----

namespace {
template <bool kToPiece>
void copy_box(std::byte* big, const Shape& big_shape, std::byte* piece,
              const std::vector<std::pair<int64_t, int64_t>>& index, size_t elem) {
  const size_t rank = big_shape.size();
  std::vector<int64_t> big_stride(rank + 1, 1), piece_stride(rank + 1, 1);
  for (int64_t i = static_cast<int64_t>(rank) - 1; i >= 0; --i) {
    big_stride[i] = big_stride[i + 1] * big_shape[i];
    piece_stride[i] = piece_stride[i + 1] * (index[i].second - index[i].first);
  }
  if (rank == 0) {
    kToPiece ? std::memcpy(piece, big, elem) : std::memcpy(big, piece, elem);
    return;
  }
  const int64_t rows = piece_stride[0] / piece_stride[rank - 1];
  const size_t row_bytes = static_cast<size_t>(piece_stride[rank - 1]) * elem;
  std::vector<int64_t> idx(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = index[rank - 1].first;
    for (size_t i = 0; i + 1 < rank; ++i) off += (index[i].first + idx[i]) * big_stride[i + 1];
    std::byte* b = big + off * elem;
    std::byte* p = piece + r * row_bytes;
    kToPiece ? std::memcpy(p, b, row_bytes) : std::memcpy(b, p, row_bytes);
    for (int64_t i = static_cast<int64_t>(rank) - 2; i >= 0; --i) {
      if (++idx[i] < index[i].second - index[i].first) break;
      idx[i] = 0;
    }
  }
}
}  // namespace

HostTensor host_slice(const HostTensor& x, const std::vector<std::pair<int64_t, int64_t>>& index) {
  Shape shape;
  for (const auto& [a, b] : index) shape.push_back(b - a);
  HostTensor out = HostTensor::uninitialized(x.dtype(), shape);
  if (out.size() == 0) return out;
  copy_box<true>(static_cast<std::byte*>(const_cast<void*>(x.data())), x.shape(),
                 static_cast<std::byte*>(out.data()), index, size_of(x.dtype()));
  return out;
}

void host_place(HostTensor& dst, const HostTensor& piece,
                const std::vector<std::pair<int64_t, int64_t>>& index) {
  if (piece.size() == 0) return;
  copy_box<false>(static_cast<std::byte*>(dst.data()), dst.shape(),
                  static_cast<std::byte*>(const_cast<void*>(piece.data())), index,
                  size_of(dst.dtype()));
}

// ---- sharded arrays ----

Array device_put(const Array& x, const Sharding& sharding) {
  if (x.is_tracer()) return with_sharding_constraint(x, sharding);
  const auto devices = sharding.device_ids();
  const int num_devices = static_cast<int>(distributed::global_device_ids().size());
  for (int d : devices)
    if (d < 0 || d >= num_devices)
      throw Error("device_put: device cpu:" + std::to_string(d) + " does not exist (" +
                  std::to_string(num_devices) +
                  " cpu devices; set CUJAX_NUM_CPU_DEVICES or runtime::set_num_cpu_devices)");
  if (sharding.kind() == Sharding::Kind::SingleDevice) return device_put(x, "cpu", devices[0]);
  sharding.hlo(x.shape());  // the errors for a spec that does not fit
  const runtime::DeviceBuffer& value = x.buffer()->wait();
  const HostTensor h = value.platform == "cpu"
                           ? value.as_host_tensor()
                           : runtime::transfer_to_host(value, true, x.aval().str());
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = x.aval();
  impl->device_id = devices[0];
  impl->committed = true;
  impl->sharding = std::make_shared<Sharding>(sharding);
  // Other processes' shards stay empty: they hold them.
  impl->shards.resize(devices.size());
  for (int64_t p : sharding.addressable_partitions())
    impl->shards[p] = std::make_shared<runtime::Buffer>(runtime::DeviceBuffer::on_cpu(
        host_slice(h, sharding.shard_index(x.shape(), p)), devices[p]));
  return Array(impl);
}

Array device_put(const Array& x, const Device& device) {
  if (device.process_index != distributed::process_index())
    throw Error("device_put: " + device.str() + " belongs to process " +
                std::to_string(device.process_index) + ", not to this one (" +
                std::to_string(distributed::process_index()) + ")");
  // cpu arrays name their device by its global id, as shardings do; GPUs by their ordinal here.
  return device_put(x, device.platform,
                    device.platform == "cpu" ? device.id : device.local_hardware_id);
}

Array device_put(const Array& x, const std::string& platform, int device) {
  if (x.is_tracer()) throw ConcretizationError("device_put of a traced array to a device");
  if (x.impl()->sharding) return device_put(array(x.to_host(), x.weak_type()), platform, device);
  const runtime::Backend& backend = runtime::get_backend(platform);  // says why it cannot start
  const auto devices = backend.devices();
  if (platform != "cpu" && (device < 0 || device >= static_cast<int>(devices.size())))
    throw Error("device_put: device " + platform + ":" + std::to_string(device) +
                " does not exist (" + std::to_string(devices.size()) + " " + platform +
                " devices)");
  auto impl = std::make_shared<ArrayImpl>();
  impl->aval = x.aval();
  impl->platform = platform;
  impl->device_id = device;
  impl->committed = true;
  const runtime::DeviceBuffer& value = x.buffer()->wait();
  impl->buffer = std::make_shared<runtime::Buffer>(
      runtime::transfer_between(value, platform, device, true, x.aval().str()));
  return Array(impl);
}

Sharding sharding_of(const Array& x) {
  if (x.is_tracer()) throw ConcretizationError("a traced array has no sharding");
  if (x.impl()->sharding) return *x.impl()->sharding;
  return SingleDeviceSharding(x.impl()->device_id);
}

std::vector<Shard> addressable_shards(const Array& x) {
  const Sharding s = sharding_of(x);
  std::vector<Shard> out;
  if (!x.impl()->sharding) {
    std::vector<std::pair<int64_t, int64_t>> all;
    for (int64_t d : x.shape()) all.push_back({0, d});
    out.push_back({s.device_ids()[0], all, x});
    return out;
  }
  const auto devices = s.device_ids();
  for (int64_t p : s.addressable_partitions()) {
    auto impl = std::make_shared<ArrayImpl>();
    impl->buffer = x.impl()->shards[p];
    impl->aval = x.aval();
    impl->aval.shape = impl->buffer->wait().shape;
    impl->platform = x.impl()->platform;
    impl->device_id = devices[p];
    impl->committed = true;
    out.push_back({devices[p], s.shard_index(x.shape(), p), Array(impl)});
  }
  return out;
}

bool is_fully_addressable(const Array& x) {
  // An unsharded array is this process's own value.
  return !x.impl()->sharding || x.impl()->sharding->is_fully_addressable();
}

Array process_allgather(const Array& x) {
  if (x.is_tracer()) throw ConcretizationError("process_allgather of a traced array");
  if (!x.impl()->sharding) return x;
  const Sharding& s = *x.impl()->sharding;
  if (s.is_fully_addressable() || s.hlo(x.shape()).is_replicated())
    return array(x.to_host(), x.weak_type());
  // A jitted identity whose output is replicated: the partitioner all_gathers the tiles.
  JitOptions options;
  options.name = "process_allgather";
  options.out_shardings = {
      GSPMDSharding(s.device_ids(), HloSharding::replicated(x.ndim(), s.num_devices()))};
  return array(jit([](const Array& a) { return a; }, options)(x).to_host(), x.weak_type());
}

void sync_global_devices(const std::string& name) {
  if (distributed::process_count() == 1) return;
  // Each device contributes a hash of the name its process reached; all must agree.
  uint32_t hash = 2166136261u;
  for (unsigned char c : name) hash = (hash ^ c) * 16777619u;
  const std::vector<int> devices = distributed::global_device_ids();
  const int64_t n = static_cast<int64_t>(devices.size());
  const Array mine = array(std::vector<int32_t>(n, static_cast<int32_t>(hash)), {n});
  const Array all =
      process_allgather(device_put(mine, NamedSharding(Mesh(devices, {n}, {"x"}), P("x"))));
  const std::vector<int32_t> seen = all.to_vector<int32_t>();
  std::set<int> others;
  for (int64_t d = 0; d < n; ++d)
    if (seen[d] != static_cast<int32_t>(hash))
      others.insert(distributed::process_of_device(devices[d]));
  if (others.empty()) return;
  std::string list;
  for (int p : others) list += (list.empty() ? "" : ", ") + std::to_string(p);
  throw Error("sync_global_devices('" + name + "'): process(es) " + list +
              " reached a barrier of another name");
}

}  // namespace cujax

namespace cujax {

Array with_sharding_constraint(const Array& x, const Sharding& sharding) {
  if (!trace::current_trace()) return device_put(x, sharding);
  // The program is partitioned over the constraint's devices.
  auto& attrs = trace::current_trace()->module().attributes;
  const int64_t n = static_cast<int64_t>(sharding.device_ids().size());
  bool found = false;
  for (auto& a : attrs)
    if (a.name == "mhlo.num_partitions" && a.value->integer > 1) {
      found = true;
      if (a.value->integer != n)
        throw Error("with_sharding_constraint: " + sharding.str() + " has " + std::to_string(n) +
                    " devices, but the traced program is partitioned over " +
                    std::to_string(a.value->integer));
    }
  if (!found) sharding::set_num_partitions(trace::current_trace()->module(), n);
  trace::OpSpec spec;
  spec.name = "stablehlo.custom_call";
  spec.attributes = {{"call_target_name", ir::Attribute::string_attr("Sharding")},
                     {"mhlo.sharding", ir::Attribute::string_attr(sharding.hlo(x.shape()).str())}};
  spec.result_types = {trace::ir_type(x.aval())};
  return trace::with_weak_type(trace::bind1(spec, {x}), x.weak_type());
}

}  // namespace cujax
