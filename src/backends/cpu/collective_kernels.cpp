// The collectives of the StableHLO spec on the cpu backend. At compile time each op's
// replica_groups, channel_handle and use_global_device_ids become process groups of logical
// devices (replica_id * num_partitions + partition_id), as the spec's cross_replica,
// cross_partition, cross_replica_and_partition and flattened_ids strategies define them. At run
// time the device's group meets in a runtime::Communicator; results are computed from the
// members' operands in group order, so they are the same bits on every member.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "cujax/runtime/spmd.h"
#include "runtime/collectives.h"

namespace cujax::cpu {

std::optional<int64_t> module_int_attr(const ir::Module& module, std::string_view name) {
  for (const auto& a : module.attributes)
    if (a.name == name && a.value && a.value->kind == ir::Attribute::Kind::Integer)
      return a.value->integer;
  return std::nullopt;
}

namespace {

enum class Scope { Replica, Partition };  // what the ids of cross_replica/cross_partition name

std::vector<std::vector<int64_t>> id_rows(const ir::Operation& op, const char* name) {
  std::vector<std::vector<int64_t>> rows;
  const ir::Attribute* a = op.attr(name);
  if (!a) return rows;
  if (a->kind != ir::Attribute::Kind::DenseElements || a->tensor.rank() != 2)
    unsupported(op, std::string(name) + " must be a 2-d dense tensor of ids");
  if (a->tensor.dtype() != DType::I64)  // the spec's si64
    unsupported(op, std::string(name) + " must hold i64 ids, got " + a->tensor.type_string());
  const HostTensor& t = a->tensor;
  const int64_t n = t.shape()[0], m = t.shape()[1];
  const int64_t* d = t.data_as<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    std::vector<int64_t> row;
    for (int64_t j = 0; j < m; ++j)
      if (d[i * m + j] != -1) row.push_back(d[i * m + j]);  // -1 pads uneven groups
    rows.push_back(std::move(row));
  }
  return rows;
}

int64_t channel_id(const ir::Operation& op) {
  const ir::Attribute* c = op.attr("channel_handle");
  if (!c) return 0;
  const ir::Attribute* h = c->field("handle");
  return h && h->kind == ir::Attribute::Kind::Integer ? h->integer : 0;
}

bool use_global_device_ids(const ir::Operation& op) {
  const ir::Attribute* a = op.attr("use_global_device_ids");
  return a && (a->kind == ir::Attribute::Kind::Unit || a->boolean);
}

ProcessGroups make_groups(const ir::Operation& op, Compiler& cc,
                          std::vector<std::vector<int>> groups) {
  const int n = cc.num_replicas() * cc.num_partitions();
  ProcessGroups pg;
  pg.group_of.assign(n, -1);
  pg.rank_of.assign(n, -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t r = 0; r < groups[g].size(); ++r) {
      const int d = groups[g][r];
      if (pg.group_of[d] >= 0)
        unsupported(op, "device " + std::to_string(d) + " is in two process groups, " +
                            runtime::group_string(groups[pg.group_of[d]]) + " and " +
                            runtime::group_string(groups[g]));
      pg.group_of[d] = static_cast<int>(g);
      pg.rank_of[d] = static_cast<int>(r);
    }
  }
  pg.groups = std::move(groups);
  return pg;
}

// Checks that an id of replica_groups names one of `count` replicas/partitions/devices.
int checked_id(const ir::Operation& op, Compiler& cc, int64_t id, int64_t count, const char* what) {
  if (id < 0 || id >= count)
    unsupported(op, "replica_groups name " + std::string(what) + " " + std::to_string(id) +
                        ", but the program has " + std::to_string(count) +
                        " (num_replicas = " + std::to_string(cc.num_replicas()) +
                        ", num_partitions = " + std::to_string(cc.num_partitions()) + ")");
  return static_cast<int>(id);
}

std::vector<int64_t> iota_row(int n) {
  std::vector<int64_t> r(n);
  for (int i = 0; i < n; ++i) r[i] = i;
  return r;
}

// cross_replica: each row of replica ids is a group within every partition.
std::vector<std::vector<int>> cross_replica_groups(const ir::Operation& op, Compiler& cc,
                                                   const std::vector<std::vector<int64_t>>& rows) {
  const int R = cc.num_replicas(), P = cc.num_partitions();
  std::vector<std::vector<int>> groups;
  for (int p = 0; p < P; ++p)
    for (const auto& row : rows) {
      std::vector<int> g;
      for (int64_t r : row) g.push_back(checked_id(op, cc, r, R, "replica") * P + p);
      groups.push_back(g);
    }
  return groups;
}

// all_reduce, all_gather, reduce_scatter: cross_replica, cross_replica_and_partition or
// flattened_ids.
ProcessGroups replica_groups(const ir::Operation& op, Compiler& cc) {
  const int R = cc.num_replicas(), P = cc.num_partitions();
  auto rows = id_rows(op, "replica_groups");
  const bool channel = channel_id(op) > 0, global = use_global_device_ids(op);
  if (global && !channel) unsupported(op, "use_global_device_ids needs a channel_handle");
  std::vector<std::vector<int>> groups;
  if (global) {  // flattened_ids
    if (rows.empty()) rows.push_back(iota_row(R * P));
    for (const auto& row : rows) {
      std::vector<int> g;
      for (int64_t id : row) g.push_back(checked_id(op, cc, id, int64_t{R} * P, "device"));
      groups.push_back(g);
    }
  } else {
    if (rows.empty()) rows.push_back(iota_row(R));
    if (channel) {  // cross_replica_and_partition
      for (const auto& row : rows) {
        std::vector<int> g;
        for (int p = 0; p < P; ++p)
          for (int64_t r : row) g.push_back(checked_id(op, cc, r, R, "replica") * P + p);
        groups.push_back(g);
      }
    } else {
      groups = cross_replica_groups(op, cc, rows);
    }
  }
  return make_groups(op, cc, std::move(groups));
}

// all_to_all, collective_broadcast, collective_permute: cross_partition with a channel,
// cross_replica without. `rows` are ids of the scope (all of it when empty).
ProcessGroups scoped_groups(const ir::Operation& op, Compiler& cc,
                            std::vector<std::vector<int64_t>> rows) {
  const int R = cc.num_replicas(), P = cc.num_partitions();
  const bool partitions = channel_id(op) > 0;
  if (rows.empty()) rows.push_back(iota_row(partitions ? P : R));
  std::vector<std::vector<int>> groups;
  if (partitions) {
    for (const auto& row : rows)
      for (int r = 0; r < R; ++r) {
        std::vector<int> g;
        for (int64_t p : row) g.push_back(r * P + checked_id(op, cc, p, P, "partition"));
        groups.push_back(g);
      }
  } else {
    groups = cross_replica_groups(op, cc, rows);
  }
  return make_groups(op, cc, std::move(groups));
}

// The members' operand `i`, checked to have one type across the group.
void check_same_types(const runtime::Gathered& g, const std::vector<int>& group,
                      const std::string& where) {
  const auto& first = g.parts[0];
  for (size_t m = 1; m < g.parts.size(); ++m) {
    if (g.parts[m].size() != first.size())
      throw RuntimeError(where + ": device " + std::to_string(group[m]) + " passed " +
                         std::to_string(g.parts[m].size()) + " operands, device " +
                         std::to_string(group[0]) + " passed " + std::to_string(first.size()));
    for (size_t i = 0; i < first.size(); ++i)
      if (g.parts[m][i].dtype() != first[i].dtype() || g.parts[m][i].shape() != first[i].shape())
        throw RuntimeError(where + ": operand " + std::to_string(i) + " is " +
                           g.parts[m][i].type_string() + " on device " + std::to_string(group[m]) +
                           " but " + first[i].type_string() + " on device " +
                           std::to_string(group[0]) + " of group " + runtime::group_string(group));
  }
}

// Adds the time a collective kernel takes (meeting, waiting and combining) to its device's.
class CollectiveTimer {
 public:
  explicit CollectiveTimer(ExecContext& ctx)
      : ctx_(ctx), start_(std::chrono::steady_clock::now()) {}
  ~CollectiveTimer() {
    if (ctx_.spmd)
      ctx_.spmd->collective_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  ExecContext& ctx_;
  std::chrono::steady_clock::time_point start_;
};

// What every collective kernel shares: finding the device's group and meeting it, timed.
struct Meeting {
  ProcessGroups pg;
  int64_t id = 0;
  std::string where;

  // nullptr when the device is in no group.
  std::shared_ptr<runtime::Gathered> meet(std::span<const HostTensor> in, size_t n,
                                          ExecContext& ctx, int* rank = nullptr,
                                          const std::vector<int>** group = nullptr) const {
    const int device = ctx.spmd ? ctx.spmd->device : 0;
    if (device >= static_cast<int>(pg.group_of.size()))
      throw RuntimeError(where + ": device " + std::to_string(device) + " is not one of the " +
                         std::to_string(pg.group_of.size()) + " devices the program is for");
    const int g = pg.group_of[device];
    if (g < 0) return nullptr;
    const std::vector<int>& members = pg.groups[g];
    if (rank) *rank = pg.rank_of[device];
    if (group) *group = &members;
    std::vector<HostTensor> operands(in.begin(), in.begin() + n);
    if (members.size() == 1) {
      auto one = std::make_shared<runtime::Gathered>();
      one->parts.push_back(std::move(operands));
      return one;
    }
    if (!ctx.spmd)
      throw RuntimeError(where + ": a collective over " + std::to_string(members.size()) +
                         " devices; run the program with runtime::compile_spmd");
    const int64_t seq = ctx.spmd->executions[id]++;
    auto gathered =
        ctx.spmd->comm->exchange({id, g, seq}, members, pg.rank_of[device], operands, where);
    check_same_types(*gathered, members, where);
    return gathered;
  }
};

Meeting meeting(const ir::Operation& op, Compiler& cc, ProcessGroups pg) {
  return Meeting{std::move(pg), cc.next_collective_id(), op.where()};
}

// [outer, dim, inner] view of a tensor along `axis`, in bytes for inner.
struct AxisView {
  int64_t outer = 1, dim = 1, inner_bytes = 1;
};
AxisView axis_view(const Shape& s, int64_t axis, DType t) {
  AxisView v;
  for (int64_t i = 0; i < axis; ++i) v.outer *= s[i];
  v.dim = s[axis];
  v.inner_bytes = static_cast<int64_t>(size_of(t));
  for (size_t i = axis + 1; i < s.size(); ++i) v.inner_bytes *= s[i];
  return v;
}

HostTensor concatenate(const std::vector<HostTensor>& parts, int64_t axis) {
  Shape s = parts[0].shape();
  s[axis] = 0;
  for (const HostTensor& p : parts) s[axis] += p.shape()[axis];
  HostTensor out = HostTensor::uninitialized(parts[0].dtype(), s);
  const AxisView ov = axis_view(s, axis, out.dtype());
  auto* dst = static_cast<std::byte*>(out.data());
  int64_t offset = 0;
  for (const HostTensor& p : parts) {
    const AxisView pv = axis_view(p.shape(), axis, p.dtype());
    const auto* src = static_cast<const std::byte*>(p.data());
    const int64_t row = pv.dim * pv.inner_bytes;
    for (int64_t o = 0; o < pv.outer; ++o)
      std::memcpy(dst + (o * ov.dim + offset) * ov.inner_bytes, src + o * row, row);
    offset += pv.dim;
  }
  return out;
}

// Block `k` of `count` equal blocks along `axis`.
HostTensor split_block(const HostTensor& t, int64_t axis, int64_t count, int64_t k,
                       const std::string& where) {
  if (t.shape()[axis] % count != 0)
    throw RuntimeError(where + ": dimension " + std::to_string(axis) + " of " + t.type_string() +
                       " does not split into " + std::to_string(count) + " equal blocks");
  Shape s = t.shape();
  s[axis] /= count;
  HostTensor out = HostTensor::uninitialized(t.dtype(), s);
  const AxisView tv = axis_view(t.shape(), axis, t.dtype());
  const int64_t row = s[axis] * tv.inner_bytes;
  const auto* src = static_cast<const std::byte*>(t.data());
  auto* dst = static_cast<std::byte*>(out.data());
  for (int64_t o = 0; o < tv.outer; ++o)
    std::memcpy(dst + o * row, src + (o * tv.dim + k * s[axis]) * tv.inner_bytes, row);
  return out;
}

// out = f(...f(f(x0, x1), x2)..., xn) element-wise, members in order, one cache-sized block
// at a time: one pass over memory instead of one per member.
template <class T, class F>
void combine_into(T* out, const std::vector<const T*>& xs, int64_t n, F f) {
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    for (int64_t lo = b; lo < e; lo += 2048) {
      const int64_t hi = std::min(e, lo + 2048);
      std::copy(xs[0] + lo, xs[0] + hi, out + lo);
      for (size_t m = 1; m < xs.size(); ++m) {
        const T* x = xs[m];
        for (int64_t i = lo; i < hi; ++i) out[i] = f(out[i], x[i]);
      }
    }
  });
}

// The members' values folded with `op`; half types compute in float and round, as their ops do.
HostTensor fold(const std::vector<const HostTensor*>& parts, const std::string& op) {
  HostTensor acc = HostTensor::uninitialized(parts[0]->dtype(), parts[0]->shape());
  visit_dtype(acc.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* a = acc.data_as<T>();
    std::vector<const T*> b;
    for (const HostTensor* p : parts) b.push_back(p->data_as<T>());
    const int64_t n = acc.size();
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      auto lift = [&](auto f) {
        combine_into(a, b, n, [f](T u, T v) { return T(f(static_cast<float>(u), float(v))); });
      };
      if (op == "stablehlo.add")
        lift([](float u, float v) { return u + v; });
      else if (op == "stablehlo.multiply")
        lift([](float u, float v) { return u * v; });
      else if (op == "stablehlo.maximum")
        lift([](float u, float v) { return std::max(u, v); });
      else
        lift([](float u, float v) { return std::min(u, v); });
    } else if constexpr (std::is_same_v<T, bool>) {
      if (op == "stablehlo.and" || op == "stablehlo.multiply" || op == "stablehlo.minimum")
        combine_into(a, b, n, [](bool u, bool v) { return u && v; });
      else if (op == "stablehlo.xor")
        combine_into(a, b, n, [](bool u, bool v) { return u != v; });
      else
        combine_into(a, b, n, [](bool u, bool v) { return u || v; });
    } else {
      if (op == "stablehlo.add")
        combine_into(a, b, n, [](T u, T v) { return T(u + v); });
      else if (op == "stablehlo.multiply")
        combine_into(a, b, n, [](T u, T v) { return T(u * v); });
      else if (op == "stablehlo.maximum")
        combine_into(a, b, n, [](T u, T v) { return std::max(u, v); });
      else if (op == "stablehlo.minimum")
        combine_into(a, b, n, [](T u, T v) { return std::min(u, v); });
      else if constexpr (std::is_integral_v<T>) {
        if (op == "stablehlo.and")
          combine_into(a, b, n, [](T u, T v) { return T(u & v); });
        else if (op == "stablehlo.or")
          combine_into(a, b, n, [](T u, T v) { return T(u | v); });
        else
          combine_into(a, b, n, [](T u, T v) { return T(u ^ v); });
      }
    }
  });
  return acc;
}

// The reduction of all_reduce/reduce_scatter: a known binary op runs as a loop, any other
// region runs per element on rank-0 tensors. Members are folded in group order.
class Reducer {
 public:
  Reducer(const ir::Operation& op, Compiler& cc) : where_(op.where()) {
    if (op.regions.size() != 1) unsupported(op, "needs one reduction region");
    const ir::Region& region = *op.regions[0];
    const ir::Block& b = region.front();
    if (b.arguments.size() != 2) unsupported(op, "the reduction region must take two scalars");
    dtype_ = b.arguments[0]->type.dtype;
    binary_ = simple_binary_region(region);
    static const char* kFast[] = {"stablehlo.add",     "stablehlo.multiply", "stablehlo.maximum",
                                  "stablehlo.minimum", "stablehlo.and",      "stablehlo.or",
                                  "stablehlo.xor"};
    if (binary_ && std::find_if(std::begin(kFast), std::end(kFast),
                                [&](const char* k) { return *binary_ == k; }) == std::end(kFast))
      binary_.reset();
    if (binary_ && is_float(dtype_) &&
        (*binary_ == "stablehlo.and" || *binary_ == "stablehlo.or" || *binary_ == "stablehlo.xor"))
      binary_.reset();
    if (!binary_) {
      if (!captured_values(op).empty())
        unsupported(op, "a reduction region that uses values from outside it");
      region_ = cc.compile_region(region);
    }
  }

  // parts[m] are the members' values of one operand, in group order.
  HostTensor reduce(const std::vector<const HostTensor*>& parts, ExecContext& ctx) const {
    if (parts[0]->dtype() != dtype_)
      throw RuntimeError(where_ + ": operand is " + parts[0]->type_string() +
                         " but the reduction region takes " + std::string(mlir_name(dtype_)));
    if (binary_) return fold(parts, *binary_);
    HostTensor acc = parts[0]->clone();
    for (size_t m = 1; m < parts.size(); ++m) {
      const size_t es = size_of(dtype_);
      auto* a = static_cast<std::byte*>(acc.data());
      const auto* x = static_cast<const std::byte*>(parts[m]->data());
      for (int64_t i = 0; i < acc.size(); ++i) {
        HostTensor l = HostTensor::uninitialized(dtype_, {}),
                   r = HostTensor::uninitialized(dtype_, {});
        std::memcpy(l.data(), a + i * es, es);
        std::memcpy(r.data(), x + i * es, es);
        const HostTensor args[2] = {l, r};
        std::vector<HostTensor> out = region_->run(args, ctx);
        if (out.size() != 1 || out[0].dtype() != dtype_ || out[0].size() != 1)
          throw RuntimeError(where_ + ": the reduction region must return one " +
                             std::string(mlir_name(dtype_)) + " scalar");
        std::memcpy(a + i * es, out[0].data(), es);
      }
    }
    return acc;
  }

  // Every operand reduced across the members.
  std::vector<HostTensor> reduce_all(const runtime::Gathered& g, ExecContext& ctx) const {
    std::vector<HostTensor> out;
    for (size_t i = 0; i < g.parts[0].size(); ++i) {
      std::vector<const HostTensor*> column;
      for (const auto& p : g.parts) column.push_back(&p[i]);
      out.push_back(reduce(column, ctx));
    }
    return out;
  }

 private:
  std::string where_;
  DType dtype_ = DType::F32;
  std::optional<std::string> binary_;
  std::shared_ptr<const Program> region_;
};

std::vector<HostTensor> zeros_like(const ir::Operation& op) {
  std::vector<HostTensor> out;
  for (const auto& r : op.results) out.emplace_back(r->type.dtype, r->type.shape);
  return out;
}

Kernel all_reduce_kernel(const ir::Operation& op, Compiler& cc) {
  auto m = std::make_shared<Meeting>(meeting(op, cc, collective_process_groups(op, cc)));
  auto reducer = std::make_shared<Reducer>(op, cc);
  const size_t n = op.operands.size();
  return [m, reducer, n](std::span<const HostTensor> in, ExecContext& ctx) {
    const CollectiveTimer timer(ctx);
    auto g = m->meet(in, n, ctx);
    if (!g) throw RuntimeError(m->where + ": device is in no replica group");
    // The first member to get here reduces for all of them; the result is shared.
    std::call_once(g->once, [&] { g->derived = reducer->reduce_all(*g, ctx); });
    if (g->derived.size() != n) throw RuntimeError(m->where + ": reduction failed on a member");
    return g->derived;
  };
}

Kernel reduce_scatter_kernel(const ir::Operation& op, Compiler& cc) {
  auto m = std::make_shared<Meeting>(meeting(op, cc, collective_process_groups(op, cc)));
  auto reducer = std::make_shared<Reducer>(op, cc);
  const int64_t dim = op.int_attr("scatter_dimension");
  return [m, reducer, dim](std::span<const HostTensor> in, ExecContext& ctx) {
    int rank = 0;
    const std::vector<int>* group = nullptr;
    const CollectiveTimer timer(ctx);
    auto g = m->meet(in, 1, ctx, &rank, &group);
    if (!g) throw RuntimeError(m->where + ": device is in no replica group");
    std::call_once(g->once, [&] { g->derived = reducer->reduce_all(*g, ctx); });
    if (g->derived.size() != 1) throw RuntimeError(m->where + ": reduction failed on a member");
    return std::vector<HostTensor>{
        split_block(g->derived[0], dim, static_cast<int64_t>(group->size()), rank, m->where)};
  };
}

Kernel all_gather_kernel(const ir::Operation& op, Compiler& cc) {
  auto m = std::make_shared<Meeting>(meeting(op, cc, collective_process_groups(op, cc)));
  const int64_t dim = op.int_attr("all_gather_dim");
  const size_t n = op.operands.size();
  return [m, dim, n](std::span<const HostTensor> in, ExecContext& ctx) {
    const CollectiveTimer timer(ctx);
    auto g = m->meet(in, n, ctx);
    if (!g) throw RuntimeError(m->where + ": device is in no replica group");
    std::call_once(g->once, [&] {
      for (size_t i = 0; i < n; ++i) {
        std::vector<HostTensor> column;
        for (const auto& p : g->parts) column.push_back(p[i]);
        g->derived.push_back(concatenate(column, dim));
      }
    });
    return g->derived;
  };
}

Kernel all_to_all_kernel(const ir::Operation& op, Compiler& cc) {
  auto m = std::make_shared<Meeting>(meeting(op, cc, collective_process_groups(op, cc)));
  const int64_t split_dim = op.int_attr("split_dimension");
  const int64_t concat_dim = op.int_attr("concat_dimension");
  const int64_t split_count = op.int_attr("split_count");
  for (const auto& group : m->pg.groups)
    if (static_cast<int64_t>(group.size()) != split_count)
      unsupported(op, "split_count = " + std::to_string(split_count) + " but group " +
                          runtime::group_string(group) + " has " + std::to_string(group.size()) +
                          " devices");
  const size_t n = op.operands.size();
  return
      [m, split_dim, concat_dim, split_count, n](std::span<const HostTensor> in, ExecContext& ctx) {
        int rank = 0;
        const CollectiveTimer timer(ctx);
        auto g = m->meet(in, n, ctx, &rank);
        if (!g) throw RuntimeError(m->where + ": device is in no replica group");
        std::vector<HostTensor> out;
        for (size_t i = 0; i < n; ++i) {
          std::vector<HostTensor> column;
          for (const auto& p : g->parts)
            column.push_back(split_block(p[i], split_dim, split_count, rank, m->where));
          out.push_back(concatenate(column, concat_dim));
        }
        return out;
      };
}

Kernel collective_permute_kernel(const ir::Operation& op, Compiler& cc) {
  // Every device of a scope (a replica's partitions, or a partition's replicas) meets; each
  // takes the operand of its source, or zeros when no pair names it as a target.
  auto m = std::make_shared<Meeting>(meeting(op, cc, collective_process_groups(op, cc)));
  const std::vector<int> source_of = permute_sources(op, cc);
  auto zeros = std::make_shared<std::vector<HostTensor>>(zeros_like(op));
  return [m, source_of, zeros](std::span<const HostTensor> in, ExecContext& ctx) {
    int rank = 0;
    const CollectiveTimer timer(ctx);
    auto g = m->meet(in, 1, ctx, &rank);
    if (!g) throw RuntimeError(m->where + ": device is in no group");
    const int s = source_of.at(rank);
    return s < 0 ? *zeros : std::vector<HostTensor>{g->parts.at(s)[0]};
  };
}

Kernel collective_broadcast_kernel(const ir::Operation& op, Compiler& cc) {
  auto m = std::make_shared<Meeting>(meeting(op, cc, collective_process_groups(op, cc)));
  auto zeros = std::make_shared<std::vector<HostTensor>>(zeros_like(op));
  // has_dynamic_root: a last operand of 1-d integer group ranks, one per data operand, names
  // each one's source; otherwise every operand comes from rank 0.
  const ir::Attribute* dyn = op.attr("has_dynamic_root");
  const bool dynamic = dyn && (dyn->kind == ir::Attribute::Kind::Unit || dyn->boolean);
  const size_t data = op.operands.size() - (dynamic ? 1 : 0);
  return [m, zeros, dynamic, data](std::span<const HostTensor> in, ExecContext& ctx) {
    const CollectiveTimer timer(ctx);
    auto g = m->meet(in, data, ctx);
    if (!g) return *zeros;
    std::vector<HostTensor> out;
    for (size_t k = 0; k < data; ++k) {
      int64_t root = 0;
      if (dynamic) {
        const HostTensor& r = in[data];
        if (r.rank() != 1 || static_cast<size_t>(r.size()) != data || !is_integer(r.dtype()))
          throw RuntimeError(m->where + ": the root operand " + r.type_string() +
                             " must hold one integer group rank per data operand (" +
                             std::to_string(data) + ")");
        visit_dtype(r.dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_integral_v<T>) root = static_cast<int64_t>(r.data_as<T>()[k]);
        });
        if (root < 0 || root >= static_cast<int64_t>(g->parts.size()))
          throw RuntimeError(m->where + ": root " + std::to_string(root) +
                             " is not a rank of its group of " + std::to_string(g->parts.size()));
      }
      out.push_back(g->parts[root][k]);
    }
    return out;
  };
}

Kernel process_id_kernel(const ir::Operation& op, Compiler& cc) {
  const bool partition = op.name == "stablehlo.partition_id";
  const int P = cc.num_partitions();
  return [partition, P](std::span<const HostTensor>, ExecContext& ctx) {
    const int device = ctx.spmd ? ctx.spmd->device : 0;
    const uint32_t id = static_cast<uint32_t>(partition ? device % P : device / P);
    return std::vector<HostTensor>{HostTensor::from_vector<uint32_t>({id}, {})};
  };
}

// interpreter.run_parallel(args...) {programs = [[@f00, @f01, ...], [@f10, ...], ...]}: the
// reference interpreter's SPMD execution. Row r, column p of `programs` is the process of
// replica r and partition p (logical device r * num_partitions + p); each process takes the
// next arguments in that order, as many as its function has, and the op returns every
// process's results in the same order. The processes run on one thread each and meet in a
// runtime::Communicator, as compile_spmd's devices do.
Kernel run_parallel_kernel(const ir::Operation& op, Compiler& cc) {
  const ir::Attribute* programs = op.attr("programs");
  if (!programs || programs->kind != ir::Attribute::Kind::Array || programs->elements.empty())
    unsupported(op, "needs programs = [[@f, ...], ...] (one row per replica)");
  const int R = static_cast<int>(programs->elements.size());
  int P = -1;
  std::vector<const ir::Function*> fns;
  for (const auto& row : programs->elements) {
    if (row->kind != ir::Attribute::Kind::Array || row->elements.empty())
      unsupported(op, "each row of programs must be a non-empty list of functions");
    if (P >= 0 && static_cast<int>(row->elements.size()) != P)
      unsupported(op, "the rows of programs have different lengths (" + std::to_string(P) +
                          " and " + std::to_string(row->elements.size()) + " partitions)");
    P = static_cast<int>(row->elements.size());
    for (const auto& f : row->elements) {
      if (f->kind != ir::Attribute::Kind::Symbol)
        unsupported(op, "programs must hold function symbols");
      const ir::Function* fn = cc.module().lookup(f->text);
      if (!fn) unsupported(op, "runs undefined function @" + f->text);
      fns.push_back(fn);
    }
  }
  // The processes' programs, compiled for the R x P grid; one compiler numbers the collectives
  // so that the processes of one function match up the same op's instances.
  auto sub = std::make_shared<Compiler>(cc.module());
  sub->set_process_grid(R, P);
  std::vector<std::shared_ptr<const Program>> compiled;
  std::vector<size_t> arg_begin, res_begin;
  size_t args = 0, results = 0;
  for (const ir::Function* fn : fns) {
    compiled.push_back(sub->compile_function(*fn));
    arg_begin.push_back(args);
    res_begin.push_back(results);
    args += fn->arg_types().size();
    results += fn->result_types.size();
  }
  if (args != op.operands.size() || results != op.results.size())
    unsupported(op, "its " + std::to_string(fns.size()) + " processes take " +
                        std::to_string(args) + " arguments and return " + std::to_string(results) +
                        " results, but the op has " + std::to_string(op.operands.size()) +
                        " operands and " + std::to_string(op.results.size()) + " results");
  arg_begin.push_back(args);
  res_begin.push_back(results);
  // infeed = [@q0, @q1, ...]: functions whose results, in order, make the infeed queue.
  std::vector<std::shared_ptr<const Program>> queue;
  if (const ir::Attribute* infeed = op.attr("infeed")) {
    if (infeed->kind != ir::Attribute::Kind::Array)
      unsupported(op, "infeed must be a list of functions");
    for (const auto& f : infeed->elements) {
      const ir::Function* fn =
          f->kind == ir::Attribute::Kind::Symbol ? cc.module().lookup(f->text) : nullptr;
      if (!fn || !fn->arg_types().empty())
        unsupported(op, "infeed must list functions without arguments");
      queue.push_back(sub->compile_function(*fn));
    }
  }
  const std::string where = op.where();
  return [compiled, queue, arg_begin, res_begin, results, where](std::span<const HostTensor> in,
                                                                 ExecContext& ctx) {
    const size_t n = compiled.size();
    InterpreterHost host;
    for (const auto& q : queue) {
      ExecContext c;
      c.options = ctx.options;
      for (HostTensor& t : q->run(std::vector<HostTensor>{}, c)) host.infeed.push_back(t);
    }
    runtime::Communicator comm(std::vector<int>(n, 0), 0, nullptr);
    std::vector<SpmdDevice> devices(n);
    std::vector<std::vector<HostTensor>> outs(n);
    std::vector<std::string> errors(n);
    // The processes' checks and prints reach the caller's callbacks one at a time.
    std::mutex check_mu;
    runtime::ExecuteOptions options;
    if (ctx.options && ctx.options->on_check)
      options.on_check = [&](const runtime::CheckResult& r) {
        const std::lock_guard<std::mutex> lock(check_mu);
        ctx.options->on_check(r);
      };
    if (ctx.options && ctx.options->on_print)
      options.on_print = [&](const std::string& text) {
        const std::lock_guard<std::mutex> lock(check_mu);
        ctx.options->on_print(text);
      };
    auto run = [&](size_t i) {
      devices[i].comm = &comm;
      devices[i].device = static_cast<int>(i);
      ExecContext c;
      c.options = &options;
      c.spmd = &devices[i];
      c.host = &host;
      try {
        outs[i] = compiled[i]->run(in.subspan(arg_begin[i], arg_begin[i + 1] - arg_begin[i]), c);
      } catch (const std::exception& e) {
        errors[i] = e.what();
        const std::string why =
            "stopped because process " + std::to_string(i) + " failed: " + e.what();
        comm.abort(why);
        const std::lock_guard<std::mutex> lock(host.mu);
        if (host.aborted.empty()) host.aborted = why;
        host.cv.notify_all();
      }
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < n; ++i) threads.emplace_back(run, i);
    run(0);
    for (auto& t : threads) t.join();
    // A failing process aborts the others; report the one whose error is not the abort.
    for (size_t i = 0; i < n; ++i)
      if (!errors[i].empty() && errors[i].find("stopped because process") == std::string::npos)
        throw RuntimeError(where + ": process " + std::to_string(i) + ": " + errors[i]);
    for (size_t i = 0; i < n; ++i)
      if (!errors[i].empty())
        throw RuntimeError(where + ": process " + std::to_string(i) + ": " + errors[i]);
    std::vector<HostTensor> all;
    all.reserve(results);
    for (auto& o : outs)
      for (HostTensor& t : o) all.push_back(std::move(t));
    return all;
  };
}

InterpreterHost& host_of(ExecContext& ctx, const std::string& where) {
  if (!ctx.host)
    throw UnsupportedError(where + ": runs only in a process of interpreter.run_parallel");
  return *ctx.host;
}

// A token: the last result of the ops below, which hold no data (see after_all).
HostTensor token() {
  return HostTensor(DType::F32, {});
}

// stablehlo.infeed: the next values of run_parallel's infeed queue, one per tensor result.
Kernel infeed_kernel(const ir::Operation& op, Compiler&) {
  const size_t n = op.num_results() - 1;
  return [n, where = op.where()](std::span<const HostTensor>, ExecContext& ctx) {
    InterpreterHost& host = host_of(ctx, where);
    const std::lock_guard<std::mutex> lock(host.mu);
    if (host.infeed.size() < n)
      throw RuntimeError(where + ": the infeed queue holds " + std::to_string(host.infeed.size()) +
                         " values, the op reads " + std::to_string(n));
    std::vector<HostTensor> out;
    for (size_t i = 0; i < n; ++i) {
      out.push_back(std::move(host.infeed.front()));
      host.infeed.pop_front();
    }
    out.push_back(token());
    return out;
  };
}

// stablehlo.outfeed: appends its operands (all but the token) to run_parallel's outfeed.
Kernel outfeed_kernel(const ir::Operation& op, Compiler&) {
  const size_t n = op.operands.size() - 1;
  return [n, where = op.where()](std::span<const HostTensor> in, ExecContext& ctx) {
    InterpreterHost& host = host_of(ctx, where);
    const std::lock_guard<std::mutex> lock(host.mu);
    for (size_t i = 0; i < n; ++i) host.outfeed.push_back(in[i]);
    return std::vector<HostTensor>{token()};
  };
}

// stablehlo.send: posts its operands (all but the token) on its channel; the recv of the same
// channel handle, in any process of the run, takes them.
Kernel send_kernel(const ir::Operation& op, Compiler&) {
  const size_t n = op.operands.size() - 1;
  return [n, channel = channel_id(op), where = op.where()](std::span<const HostTensor> in,
                                                           ExecContext& ctx) {
    InterpreterHost& host = host_of(ctx, where);
    {
      const std::lock_guard<std::mutex> lock(host.mu);
      host.channels[channel].emplace_back(in.begin(), in.begin() + n);
    }
    host.cv.notify_all();
    return std::vector<HostTensor>{token()};
  };
}

// stablehlo.recv: waits (at most collective_timeout_seconds) for a send on its channel.
Kernel recv_kernel(const ir::Operation& op, Compiler&) {
  const size_t n = op.num_results() - 1;
  return [n, channel = channel_id(op), where = op.where()](std::span<const HostTensor>,
                                                           ExecContext& ctx) {
    InterpreterHost& host = host_of(ctx, where);
    std::unique_lock<std::mutex> lock(host.mu);
    auto& box = host.channels[channel];
    const auto timeout = std::chrono::duration<double>(runtime::collective_timeout_seconds());
    if (!host.cv.wait_for(lock, timeout, [&] { return !box.empty() || !host.aborted.empty(); }))
      throw RuntimeError(where + ": nothing was sent on channel " + std::to_string(channel) +
                         " within " + std::to_string(runtime::collective_timeout_seconds()) + " s");
    if (box.empty()) throw RuntimeError(where + ": " + host.aborted);
    std::vector<HostTensor> out = std::move(box.front());
    box.pop_front();
    if (out.size() != n)
      throw RuntimeError(where + ": channel " + std::to_string(channel) + " carried " +
                         std::to_string(out.size()) + " values, the op receives " +
                         std::to_string(n));
    out.push_back(token());
    return out;
  };
}

}  // namespace

bool is_collective(std::string_view op_name) {
  return op_name == "stablehlo.all_reduce" || op_name == "stablehlo.all_gather" ||
         op_name == "stablehlo.reduce_scatter" || op_name == "stablehlo.all_to_all" ||
         op_name == "stablehlo.collective_permute" || op_name == "stablehlo.collective_broadcast";
}

ProcessGroups collective_process_groups(const ir::Operation& op, Compiler& cc) {
  if (op.name == "stablehlo.collective_permute") return scoped_groups(op, cc, {});
  if (op.name == "stablehlo.all_to_all" || op.name == "stablehlo.collective_broadcast")
    return scoped_groups(op, cc, id_rows(op, "replica_groups"));
  return replica_groups(op, cc);
}

std::vector<int> permute_sources(const ir::Operation& op, Compiler& cc) {
  const int scope = channel_id(op) > 0 ? cc.num_partitions() : cc.num_replicas();
  std::vector<int> source_of(scope, -1);
  std::vector<bool> is_source(scope, false);
  for (const auto& p : id_rows(op, "source_target_pairs")) {
    if (p.size() != 2) unsupported(op, "source_target_pairs must be pairs");
    const int s = checked_id(op, cc, p[0], scope, "source");
    const int t = checked_id(op, cc, p[1], scope, "target");
    if (source_of[t] >= 0)
      unsupported(op, "device " + std::to_string(t) + " is the target of two sources");
    if (is_source[s])
      unsupported(op, "device " + std::to_string(s) + " is the source of two pairs");
    source_of[t] = s;
    is_source[s] = true;
  }
  return source_of;
}

void register_collective_kernels(KernelRegistry& r) {
  r.add("stablehlo.all_reduce", all_reduce_kernel);
  r.add("stablehlo.all_gather", all_gather_kernel);
  r.add("stablehlo.reduce_scatter", reduce_scatter_kernel);
  r.add("stablehlo.all_to_all", all_to_all_kernel);
  r.add("stablehlo.collective_permute", collective_permute_kernel);
  r.add("stablehlo.collective_broadcast", collective_broadcast_kernel);
  r.add("stablehlo.partition_id", process_id_kernel);
  r.add("stablehlo.replica_id", process_id_kernel);
  r.add("interpreter.run_parallel", run_parallel_kernel);
  r.add("stablehlo.infeed", infeed_kernel);
  r.add("stablehlo.outfeed", outfeed_kernel);
  r.add("stablehlo.send", send_kernel);
  r.add("stablehlo.recv", recv_kernel);
}

}  // namespace cujax::cpu
