// compile_spmd for the cuda backend. Each local GPU gets the module compiled as a cuda Program
// whose collectives are NCCL calls on the GPU's stream, with a communicator per process group
// (made once per group of global devices and shared by the executables that use it). The
// operands' blocks are moved to and from NCCL's rank-major layout by the copy plans of
// backends/common/copy_plan.h, which the CPU tests check against the cpu collectives.
#include "backends/cuda/spmd.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "backends/common/copy_plan.h"
#include "backends/cpu/kernels.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/nccl.h"
#include "backends/cuda/program.h"
#include "runtime/collectives.h"
#include "runtime/process_group.h"

namespace cujax::cuda {

namespace {

// One NCCL communicator per member of a process group (global device ids) that runs in this
// process, made together: ncclCommInitRank blocks until every rank has joined.
class CommGroup {
 public:
  CommGroup(const std::vector<int>& members, const std::vector<std::shared_ptr<Device>>& gpus) {
    const Nccl& api = nccl();
    const int per_process = static_cast<int>(gpus.size());
    const runtime::ProcessGroup group = runtime::process_group();
    const int me = group.index;
    std::set<int> processes;
    for (int m : members) processes.insert(m / per_process);
    const int root = members.front() / per_process;
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (me == root) CUJAX_NCCL_CHECK(api.get_unique_id(&id));
    if (processes.size() > 1) {
      runtime::Transport* transport = group.transport;
      if (!transport)
        throw Error("NCCL group " + runtime::group_string(members) +
                    " spans processes: call distributed::initialize() first");
      std::vector<int> peers;
      for (int p : processes)
        if (p != me && (me == root || p == root)) peers.push_back(p);
      // Both sides derive the tag from the members; the top byte keeps it apart from the
      // collectives' tags.
      uint64_t tag = 0xCC;
      for (int m : members) tag = tag * 1000003u + static_cast<uint64_t>(m);
      tag = (tag & 0x00FFFFFFFFFFFFFFull) | (0xCCull << 56);
      std::vector<std::byte> payload;
      if (me == root) {
        payload.resize(sizeof id);
        std::memcpy(payload.data(), &id, sizeof id);
      }
      const auto got =
          transport->exchange(tag, peers, payload, runtime::collective_timeout_seconds());
      if (me != root) {
        if (got.empty() || got[0].size() != sizeof id)
          throw RuntimeError("NCCL group " + runtime::group_string(members) + ": process " +
                             std::to_string(root) + " sent no unique id");
        std::memcpy(&id, got[0].data(), sizeof id);
      }
    }
    CUJAX_NCCL_CHECK(api.group_start());
    for (size_t r = 0; r < members.size(); ++r) {
      if (members[r] / per_process != me) continue;
      const int ordinal = members[r] % per_process;
      ncclComm_t comm = nullptr;
      CUJAX_CUDA_CHECK(cudaSetDevice(ordinal));
      const ncclResult_t result =
          api.comm_init_rank(&comm, static_cast<int>(members.size()), id, static_cast<int>(r));
      if (result != ncclSuccess && result != ncclInProgress) {
        api.group_end();
        throw_nccl_error(result, "ncclCommInitRank", __FILE__, __LINE__);
      }
      comms_[members[r]] = comm;
    }
    CUJAX_NCCL_CHECK(api.group_end());
  }
  ~CommGroup() {
    for (auto& [device, comm] : comms_) nccl().comm_destroy(comm);  // no throw from here
  }
  CommGroup(const CommGroup&) = delete;
  CommGroup& operator=(const CommGroup&) = delete;

  ncclComm_t comm(int global_device) const { return comms_.at(global_device); }

 private:
  std::map<int, ncclComm_t> comms_;
};

// Communicators outlive one executable: recompiling a step reuses its groups.
std::shared_ptr<CommGroup> comm_group(const std::vector<int>& members,
                                      const std::vector<std::shared_ptr<Device>>& gpus) {
  static std::mutex mu;
  static std::map<std::vector<int>, std::weak_ptr<CommGroup>> groups;
  std::lock_guard<std::mutex> lock(mu);
  if (auto g = groups[members].lock()) return g;
  auto g = std::make_shared<CommGroup>(members, gpus);
  groups[members] = g;
  return g;
}

// Time in collectives on one device's stream: timing events around each, summed once the
// stream has finished.
class CollectiveClock {
 public:
  void start(cudaStream_t s) {
    if (used_ == events_.size())
      events_.emplace_back(std::make_unique<Event>(true), std::make_unique<Event>(true));
    events_[used_].first->record(s);
  }
  void stop(cudaStream_t s) { events_[used_++].second->record(s); }
  double take_ms() {
    double ms = 0;
    for (size_t i = 0; i < used_; ++i) ms += events_[i].second->elapsed_ms_since(*events_[i].first);
    used_ = 0;
    return ms;
  }

 private:
  std::vector<std::pair<std::unique_ptr<Event>, std::unique_ptr<Event>>> events_;
  size_t used_ = 0;
};

struct LocalDevice {
  std::shared_ptr<Device> device;
  int logical = 0;  // position in device_ids: replica_id * num_partitions + partition_id
  std::shared_ptr<const Program> program;
  CollectiveClock clock;
};

std::optional<ncclDataType_t> nccl_type(DType t) {
  switch (t) {
    case DType::I8:
      return ncclInt8;
    case DType::U8:
      return ncclUint8;
    case DType::I32:
      return ncclInt32;
    case DType::U32:
      return ncclUint32;
    case DType::I64:
      return ncclInt64;
    case DType::U64:
      return ncclUint64;
    case DType::F16:
      return ncclFloat16;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    default:
      return std::nullopt;
  }
}

// The NCCL type and operation of an all_reduce/reduce_scatter region over `t`. Booleans are
// bytes 0/1, so `and` is their minimum and `or` their maximum (the cpu kernels fold bool add
// and max as `or` too).
std::pair<ncclDataType_t, ncclRedOp_t> nccl_reduction(const ir::Operation& op, DType t) {
  if (op.regions.size() != 1) cpu::unsupported(op, "needs one reduction region");
  const auto body = cpu::simple_binary_region(*op.regions[0]);
  if (!body) cpu::unsupported(op, "NCCL reduces with add, multiply, maximum or minimum only");
  if (t == DType::Bool) {
    if (*body == "stablehlo.and" || *body == "stablehlo.minimum" || *body == "stablehlo.multiply")
      return {ncclUint8, ncclMin};
    if (*body == "stablehlo.or" || *body == "stablehlo.maximum" || *body == "stablehlo.add")
      return {ncclUint8, ncclMax};
    cpu::unsupported(op, "NCCL cannot reduce i1 with " + *body);
  }
  const auto type = nccl_type(t);
  if (!type) cpu::unsupported(op, "NCCL cannot reduce " + std::string(mlir_name(t)));
  static const std::map<std::string, ncclRedOp_t> ops = {{"stablehlo.add", ncclSum},
                                                         {"stablehlo.multiply", ncclProd},
                                                         {"stablehlo.maximum", ncclMax},
                                                         {"stablehlo.minimum", ncclMin}};
  const auto it = ops.find(*body);
  if (it == ops.end()) cpu::unsupported(op, "NCCL cannot reduce with " + *body);
  return {*type, it->second};
}

// Runs `enqueue` between ncclGroupStart/End (so its sends and receives pair up) and between
// the device's timing events.
template <class F>
void timed_group(LocalDevice& ld, F&& enqueue) {
  const Nccl& api = nccl();
  ld.clock.start(ld.device->stream());
  CUJAX_NCCL_CHECK(api.group_start());
  try {
    enqueue(api);
  } catch (...) {
    api.group_end();
    throw;
  }
  CUJAX_NCCL_CHECK(api.group_end());
  ld.clock.stop(ld.device->stream());
}

DeviceArray copied(Device& d, const std::optional<index::StridedCopy>& box, DeviceArray in,
                   Shape shape) {
  if (!box) {
    in.shape = std::move(shape);
    return in;
  }
  DeviceArray out = d.allocate(in.dtype, std::move(shape));
  launch_strided_copy(size_of(in.dtype), *box, in.data.get(), out.data.get(), d.stream());
  return out;
}

class Collectives {
 public:
  Collectives(std::vector<int> device_ids,
              std::map<std::vector<int>, std::shared_ptr<CommGroup>>& groups)
      : device_ids_(std::move(device_ids)), groups_(groups) {}

  DeviceKernel kernel(const ir::Operation& op, cpu::Compiler& cc, LocalDevice& ld) const {
    if (op.name == "stablehlo.partition_id" || op.name == "stablehlo.replica_id") {
      const int P = cc.num_partitions();
      const uint32_t id = static_cast<uint32_t>(
          op.name == "stablehlo.partition_id" ? ld.logical % P : ld.logical / P);
      auto value = std::make_shared<DeviceArray>();
      return [&ld, id, value](std::span<const DeviceArray>) {
        if (!value->data) {  // once, on the device's thread
          *value = ld.device->allocate(DType::U32, {});
          CUJAX_CUDA_CHECK(cudaMemcpyAsync(value->data.get(), &id, sizeof id,
                                           cudaMemcpyHostToDevice, ld.device->stream()));
          ld.device->synchronize();  // `id` is a copy in this closure: keep it until copied
        }
        return std::vector<DeviceArray>{*value};
      };
    }
    if (!cpu::is_collective(op.name)) return {};
    for (const ir::Value* v : op.operands)
      if (v->type.is_token || v->type.rank() >= index::kMaxRank)
        cpu::unsupported(
            op, "operands must be tensors of rank below " + std::to_string(index::kMaxRank));
    const cpu::ProcessGroups pg = cpu::collective_process_groups(op, cc);
    const int g = pg.group_of.at(ld.logical);
    if (g < 0) {
      if (op.name != "stablehlo.collective_broadcast")
        cpu::unsupported(op, "device " + std::to_string(ld.logical) + " is in no process group");
      return zeros(op, ld);
    }
    std::vector<int> members;
    for (int m : pg.groups[g]) members.push_back(device_ids_.at(m));
    const ncclComm_t comm = groups_.at(members)->comm(device_ids_.at(ld.logical));
    const int n = static_cast<int>(members.size());
    const int rank = pg.rank_of[ld.logical];
    if (op.name == "stablehlo.all_reduce") return all_reduce(op, ld, comm);
    if (op.name == "stablehlo.all_gather") return all_gather(op, ld, comm, n);
    if (op.name == "stablehlo.reduce_scatter") return reduce_scatter(op, ld, comm, n);
    if (op.name == "stablehlo.all_to_all") return all_to_all(op, ld, comm, n);
    if (op.name == "stablehlo.collective_broadcast") return broadcast(op, ld, comm);
    return permute(op, cc, ld, comm, rank);
  }

 private:
  static DeviceKernel zeros(const ir::Operation& op, LocalDevice& ld) {
    const ir::Type t = op.result(0)->type;
    return [&ld, t](std::span<const DeviceArray>) {
      DeviceArray out = ld.device->allocate(t.dtype, t.shape);
      CUJAX_CUDA_CHECK(cudaMemsetAsync(out.data.get(), 0, out.nbytes(), ld.device->stream()));
      return std::vector<DeviceArray>{out};
    };
  }

  static DeviceKernel all_reduce(const ir::Operation& op, LocalDevice& ld, ncclComm_t comm) {
    const DType t = op.operands.at(0)->type.dtype;
    for (const ir::Value* v : op.operands)
      if (v->type.dtype != t) cpu::unsupported(op, "operands of different element types");
    const auto [type, reduction] = nccl_reduction(op, t);
    return [&ld, comm, type, reduction](std::span<const DeviceArray> in) {
      std::vector<DeviceArray> out;
      for (const DeviceArray& x : in) out.push_back(ld.device->allocate(x.dtype, x.shape));
      timed_group(ld, [&](const Nccl& api) {
        for (size_t i = 0; i < in.size(); ++i)
          CUJAX_NCCL_CHECK(api.all_reduce(in[i].data.get(), out[i].data.get(),
                                          static_cast<size_t>(in[i].size()), type, reduction, comm,
                                          ld.device->stream()));
      });
      return out;
    };
  }

  static DeviceKernel all_gather(const ir::Operation& op, LocalDevice& ld, ncclComm_t comm, int n) {
    const int64_t dim = op.int_attr("all_gather_dim");
    std::vector<std::optional<index::StridedCopy>> layouts;
    std::vector<Shape> shapes;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      layouts.push_back(plan::from_rank_blocks(op.operands[i]->type.shape, dim, n));
      shapes.push_back(op.result(i)->type.shape);
    }
    return [&ld, comm, n, layouts, shapes](std::span<const DeviceArray> in) {
      std::vector<DeviceArray> gathered;
      for (const DeviceArray& x : in)
        gathered.push_back(ld.device->allocate(x.dtype, {n * x.size()}));
      timed_group(ld, [&](const Nccl& api) {
        for (size_t i = 0; i < in.size(); ++i)
          CUJAX_NCCL_CHECK(api.all_gather(in[i].data.get(), gathered[i].data.get(), in[i].nbytes(),
                                          ncclUint8, comm, ld.device->stream()));
      });
      std::vector<DeviceArray> out;
      for (size_t i = 0; i < in.size(); ++i)
        out.push_back(copied(*ld.device, layouts[i], gathered[i], shapes[i]));
      return out;
    };
  }

  static DeviceKernel reduce_scatter(const ir::Operation& op, LocalDevice& ld, ncclComm_t comm,
                                     int n) {
    if (op.operands.size() != 1) cpu::unsupported(op, "takes one operand");
    const ir::Type& t = op.operands[0]->type;
    const int64_t dim = op.int_attr("scatter_dimension");
    if (dim < 0 || dim >= t.rank() || t.shape[dim] % n != 0)
      cpu::unsupported(op, "dimension " + std::to_string(dim) + " of " + t.str() +
                               " does not split into " + std::to_string(n) + " blocks");
    const auto [type, reduction] = nccl_reduction(op, t.dtype);
    const auto layout = plan::to_rank_blocks(t.shape, dim, n);
    const ir::Type rt = op.result(0)->type;
    return [&ld, comm, type, reduction, layout, rt](std::span<const DeviceArray> in) {
      const DeviceArray blocks = copied(*ld.device, layout, in[0], in[0].shape);
      DeviceArray out = ld.device->allocate(rt.dtype, rt.shape);
      timed_group(ld, [&](const Nccl& api) {
        CUJAX_NCCL_CHECK(api.reduce_scatter(blocks.data.get(), out.data.get(),
                                            static_cast<size_t>(out.size()), type, reduction, comm,
                                            ld.device->stream()));
      });
      return std::vector<DeviceArray>{out};
    };
  }

  static DeviceKernel all_to_all(const ir::Operation& op, LocalDevice& ld, ncclComm_t comm, int n) {
    const int64_t split = op.int_attr("split_dimension"), concat = op.int_attr("concat_dimension");
    if (op.int_attr("split_count") != n)
      cpu::unsupported(op, "split_count = " + std::to_string(op.int_attr("split_count")) +
                               " but the group has " + std::to_string(n) + " devices");
    std::vector<std::optional<index::StridedCopy>> sends, receives;
    std::vector<Shape> shapes;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      const Shape& s = op.operands[i]->type.shape;
      if (split < 0 || split >= static_cast<int64_t>(s.size()) || s[split] % n != 0)
        cpu::unsupported(op, "split_dimension " + std::to_string(split) + " of " +
                                 op.operands[i]->type.str() + " does not split into " +
                                 std::to_string(n) + " blocks");
      Shape block = s;
      block[split] /= n;
      sends.push_back(plan::to_rank_blocks(s, split, n));
      receives.push_back(plan::from_rank_blocks(block, concat, n));
      shapes.push_back(op.result(i)->type.shape);
    }
    return [&ld, comm, n, sends, receives, shapes](std::span<const DeviceArray> in) {
      std::vector<DeviceArray> send, received;
      for (size_t i = 0; i < in.size(); ++i) {
        send.push_back(copied(*ld.device, sends[i], in[i], in[i].shape));
        received.push_back(ld.device->allocate(in[i].dtype, {in[i].size()}));
      }
      timed_group(ld, [&](const Nccl& api) {
        for (size_t i = 0; i < in.size(); ++i) {
          const size_t block = in[i].nbytes() / n;
          const auto* src = static_cast<const std::byte*>(send[i].data.get());
          auto* dst = static_cast<std::byte*>(received[i].data.get());
          for (int peer = 0; peer < n; ++peer) {
            CUJAX_NCCL_CHECK(
                api.send(src + peer * block, block, ncclUint8, peer, comm, ld.device->stream()));
            CUJAX_NCCL_CHECK(
                api.recv(dst + peer * block, block, ncclUint8, peer, comm, ld.device->stream()));
          }
        }
      });
      std::vector<DeviceArray> out;
      for (size_t i = 0; i < in.size(); ++i)
        out.push_back(copied(*ld.device, receives[i], received[i], shapes[i]));
      return out;
    };
  }

  static DeviceKernel broadcast(const ir::Operation& op, LocalDevice& ld, ncclComm_t comm) {
    const ir::Type rt = op.result(0)->type;
    return [&ld, comm, rt](std::span<const DeviceArray> in) {
      DeviceArray out = ld.device->allocate(rt.dtype, rt.shape);
      timed_group(ld, [&](const Nccl& api) {  // the group's first member is the source
        CUJAX_NCCL_CHECK(api.broadcast(in[0].data.get(), out.data.get(), out.nbytes(), ncclUint8, 0,
                                       comm, ld.device->stream()));
      });
      return std::vector<DeviceArray>{out};
    };
  }

  static DeviceKernel permute(const ir::Operation& op, cpu::Compiler& cc, LocalDevice& ld,
                              ncclComm_t comm, int rank) {
    const std::vector<int> source_of = cpu::permute_sources(op, cc);
    int target = -1;
    for (size_t t = 0; t < source_of.size(); ++t)
      if (source_of[t] == rank) target = static_cast<int>(t);
    const int source = source_of.at(rank);
    const ir::Type rt = op.result(0)->type;
    return [&ld, comm, source, target, rt](std::span<const DeviceArray> in) {
      DeviceArray out = ld.device->allocate(rt.dtype, rt.shape);
      if (source < 0)  // no pair names this device as a target: zeros
        CUJAX_CUDA_CHECK(cudaMemsetAsync(out.data.get(), 0, out.nbytes(), ld.device->stream()));
      timed_group(ld, [&](const Nccl& api) {
        if (target >= 0)
          CUJAX_NCCL_CHECK(api.send(in[0].data.get(), in[0].nbytes(), ncclUint8, target, comm,
                                    ld.device->stream()));
        if (source >= 0)
          CUJAX_NCCL_CHECK(
              api.recv(out.data.get(), out.nbytes(), ncclUint8, source, comm, ld.device->stream()));
      });
      return std::vector<DeviceArray>{out};
    };
  }

  std::vector<int> device_ids_;
  std::map<std::vector<int>, std::shared_ptr<CommGroup>>& groups_;
};

class CudaSpmdExecutable final : public runtime::SpmdExecutable {
 public:
  CudaSpmdExecutable(std::vector<std::unique_ptr<LocalDevice>> locals,
                     std::map<std::vector<int>, std::shared_ptr<CommGroup>> groups)
      : locals_(std::move(locals)), groups_(std::move(groups)) {}

  std::vector<std::vector<runtime::DeviceBuffer>> execute(
      std::vector<std::vector<runtime::DeviceBuffer>> per_device_args) override {
    if (per_device_args.size() != locals_.size())
      throw RuntimeError("SPMD execute: got arguments for " +
                         std::to_string(per_device_args.size()) + " devices, this process runs " +
                         std::to_string(locals_.size()));
    std::lock_guard<std::mutex> lock(mu_);
    const auto start = std::chrono::steady_clock::now();
    const size_t n = locals_.size();
    std::vector<std::vector<runtime::DeviceBuffer>> results(n);
    std::vector<double> collective_ms(n, 0);
    std::vector<std::exception_ptr> errors(n);
    // One thread per GPU: each enqueues its program and its NCCL calls on its own stream.
    auto run = [&](size_t i) {
      LocalDevice& ld = *locals_[i];
      try {
        check_arguments(*ld.program, per_device_args[i], ld.device->ordinal());
        std::vector<DeviceArray> in;
        for (runtime::DeviceBuffer& a : per_device_args[i])
          in.push_back(as_device_array(std::move(a)));
        std::lock_guard<std::mutex> device_lock(ld.device->mutex());
        ld.device->activate();
        std::vector<DeviceArray> out = run_program(*ld.program, *ld.device, std::move(in));
        collective_ms[i] = ld.clock.take_ms();
        auto ready = stream_event(*ld.device);
        for (DeviceArray& r : out)
          results[i].push_back(as_buffer(std::move(r), ld.device->ordinal(), ready));
      } catch (const std::exception& e) {
        errors[i] = std::make_exception_ptr(
            RuntimeError("device cuda:" + std::to_string(ld.device->ordinal()) + ": " + e.what()));
      }
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < n; ++i) threads.emplace_back(run, i);
    if (n) run(0);
    for (auto& t : threads) t.join();
    stats_.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    stats_.collective_seconds = 0;
    for (double ms : collective_ms) stats_.collective_seconds += ms / 1e3 / n;
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    return results;
  }

  runtime::SpmdStats last_stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  std::vector<int> local_devices() const override {
    std::vector<int> out;
    for (const auto& ld : locals_) out.push_back(ld->logical);
    return out;
  }
  std::string_view platform() const override { return "cuda"; }
  std::vector<int> local_device_indices() const override {
    std::vector<int> out;
    for (const auto& ld : locals_) out.push_back(ld->device->ordinal());
    return out;
  }

 private:
  std::vector<std::unique_ptr<LocalDevice>> locals_;
  std::map<std::vector<int>, std::shared_ptr<CommGroup>> groups_;
  mutable std::mutex mu_;
  runtime::SpmdStats stats_;
};

// Every process group of the main body's collectives that has a member here, in op order (the
// same on every process, so communicators are made in the same order everywhere).
std::vector<std::vector<int>> groups_used(const ir::Module& module, const ir::Function& fn,
                                          const std::vector<int>& device_ids, int replicas,
                                          int partitions, int per_process) {
  cpu::Compiler cc(module);
  cc.set_process_grid(replicas, partitions);
  std::vector<std::vector<int>> out;
  std::set<std::vector<int>> seen;
  const int me = runtime::process_group().index;
  for (const auto& block : fn.body.blocks)
    for (const auto& op : block->ops) {
      if (!cpu::is_collective(op->name)) continue;
      for (const auto& group : cpu::collective_process_groups(*op, cc).groups) {
        std::vector<int> members;
        bool here = false;
        for (int m : group) {
          members.push_back(device_ids.at(m));
          here = here || members.back() / per_process == me;
        }
        if (here && seen.insert(members).second) out.push_back(members);
      }
    }
  return out;
}

}  // namespace

std::unique_ptr<runtime::SpmdExecutable> compile_cuda_spmd(
    const std::vector<std::shared_ptr<Device>>& gpus, const ir::Module& module,
    std::vector<int> device_ids, std::string_view entry) {
  const ir::Function* fn = module.lookup(entry);
  if (!fn) throw Error("compile_spmd: module has no function @" + std::string(entry));
  if (device_ids.empty()) throw Error("compile_spmd: no devices given");
  const int64_t n = static_cast<int64_t>(device_ids.size());
  const auto [replicas, partitions] = cpu::spmd_process_grid(module, n);
  const int per_process = static_cast<int>(gpus.size());
  const int total = per_process * runtime::process_group().count;
  std::set<int> seen;
  for (int id : device_ids) {
    if (id < 0 || id >= total)
      throw Error("compile_spmd: device cuda:" + std::to_string(id) + " does not exist (" +
                  std::to_string(total) + " GPUs: " + std::to_string(per_process) + " in each of " +
                  std::to_string(runtime::process_group().count) + " processes)");
    if (!seen.insert(id).second)
      throw Error("compile_spmd: device cuda:" + std::to_string(id) + " is listed twice");
  }
  std::map<std::vector<int>, std::shared_ptr<CommGroup>> groups;
  for (const auto& members :
       groups_used(module, *fn, device_ids, replicas, partitions, per_process))
    groups[members] = comm_group(members, gpus);
  const Collectives collectives(device_ids, groups);
  std::vector<std::unique_ptr<LocalDevice>> locals;
  for (int64_t i = 0; i < n; ++i) {
    if (device_ids[i] / per_process != runtime::process_group().index) continue;
    auto ld = std::make_unique<LocalDevice>();
    ld->device = gpus[device_ids[i] % per_process];
    ld->logical = static_cast<int>(i);
    SpmdContext ctx;
    ctx.num_replicas = replicas;
    ctx.num_partitions = partitions;
    LocalDevice* raw = ld.get();
    ctx.device_kernel = [&collectives, raw](const ir::Operation& op, cpu::Compiler& cc) {
      return collectives.kernel(op, cc, *raw);
    };
    ld->program = compile_program(module, *fn, ld->device, &ctx);
    locals.push_back(std::move(ld));
  }
  return std::make_unique<CudaSpmdExecutable>(std::move(locals), std::move(groups));
}

}  // namespace cujax::cuda
