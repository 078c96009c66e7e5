#include "partition.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "compiler/chlo_decompose.h"
#include "compiler/shardy.h"
#include "cujax/core/error.h"

namespace cujax::sharding {

namespace {

using ir::Attribute;
using ir::Operation;
using ir::Type;
using ir::Value;

const std::set<std::string> kElementwise = {"stablehlo.add",
                                            "stablehlo.subtract",
                                            "stablehlo.multiply",
                                            "stablehlo.divide",
                                            "stablehlo.maximum",
                                            "stablehlo.minimum",
                                            "stablehlo.power",
                                            "stablehlo.remainder",
                                            "stablehlo.and",
                                            "stablehlo.or",
                                            "stablehlo.xor",
                                            "stablehlo.atan2",
                                            "stablehlo.compare",
                                            "stablehlo.select",
                                            "stablehlo.clamp",
                                            "stablehlo.negate",
                                            "stablehlo.exponential",
                                            "stablehlo.log",
                                            "stablehlo.tanh",
                                            "stablehlo.logistic",
                                            "stablehlo.sqrt",
                                            "stablehlo.rsqrt",
                                            "stablehlo.abs",
                                            "stablehlo.sign",
                                            "stablehlo.convert",
                                            "stablehlo.floor",
                                            "stablehlo.ceil",
                                            "stablehlo.cosine",
                                            "stablehlo.sine",
                                            "stablehlo.tan",
                                            "stablehlo.not",
                                            "stablehlo.is_finite",
                                            "stablehlo.exponential_minus_one",
                                            "stablehlo.log_plus_one",
                                            "stablehlo.cbrt",
                                            "stablehlo.round_nearest_even",
                                            "stablehlo.round_nearest_afz",
                                            "stablehlo.shift_left",
                                            "stablehlo.shift_right_logical",
                                            "stablehlo.shift_right_arithmetic",
                                            "stablehlo.popcnt",
                                            "stablehlo.bitcast_convert",
                                            "stablehlo.reduce_precision"};

bool is_elementwise_chlo(const std::string& name) {
  for (const char* c : compiler::kElementwiseChloOps)
    if (name == c) return true;
  return false;
}

// A sharding given by each partition's tile coordinates.
HloSharding from_coords(const std::vector<int64_t>& tiles,
                        const std::vector<std::vector<int64_t>>& coords) {
  const int64_t n = static_cast<int64_t>(coords.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return coords[a] < coords[b]; });
  HloSharding h;
  h.tiles = tiles;
  const int64_t t = std::accumulate(tiles.begin(), tiles.end(), int64_t{1}, std::multiplies<>());
  h.replicas = n / t;
  h.tile_devices = order;
  return h;
}

// True when the partitions' coordinates name every tile of `tiles` equally often, so that
// from_coords gives a sharding of all of them (two operands tiled along different dimensions on
// too few devices give coordinates that do not).
bool covers_tiles(const std::vector<int64_t>& tiles,
                  const std::vector<std::vector<int64_t>>& coords) {
  const int64_t t = std::accumulate(tiles.begin(), tiles.end(), int64_t{1}, std::multiplies<>());
  const int64_t n = static_cast<int64_t>(coords.size());
  if (t <= 0 || n % t != 0) return false;
  std::map<std::vector<int64_t>, int64_t> count;
  for (const auto& c : coords) ++count[c];
  if (static_cast<int64_t>(count.size()) != t) return false;
  for (const auto& [c, k] : count)
    if (k != n / t) return false;
  return true;
}

std::vector<std::vector<int64_t>> all_coords(const HloSharding& h) {
  std::vector<std::vector<int64_t>> c;
  for (int64_t p = 0; p < h.num_partitions(); ++p) c.push_back(h.coords(p));
  return c;
}

// Partitions with equal `key` coordinates, split into groups in which every `inner` value
// appears once (in order); nullopt when the values do not split evenly.
std::optional<std::vector<std::vector<int64_t>>> groups_of(
    const std::vector<std::vector<int64_t>>& key, const std::vector<std::vector<int64_t>>& inner) {
  std::map<std::vector<int64_t>, std::map<std::vector<int64_t>, std::vector<int64_t>>> buckets;
  for (size_t p = 0; p < key.size(); ++p) buckets[key[p]][inner[p]].push_back(p);
  std::vector<std::vector<int64_t>> groups;
  size_t group_size = 0;
  for (auto& [k, by_inner] : buckets) {
    const size_t m = by_inner.begin()->second.size();
    if (group_size == 0) group_size = by_inner.size();
    if (by_inner.size() != group_size) return std::nullopt;
    for (auto& [i, ps] : by_inner)
      if (ps.size() != m) return std::nullopt;
    for (size_t j = 0; j < m; ++j) {
      std::vector<int64_t> g;
      for (auto& [i, ps] : by_inner) g.push_back(ps[j]);
      groups.push_back(g);
    }
  }
  return groups;
}

// The partitions that differ only in their tile of dimension d, one group per position on the
// other dimensions, in d's tile order. `coords` (each partition's tile coordinates) is left with
// dimension d zeroed: the key the groups were formed by.
std::vector<std::vector<int64_t>> groups_along(std::vector<std::vector<int64_t>>& coords,
                                               int64_t d) {
  std::vector<std::vector<int64_t>> inner;
  for (auto& c : coords) {
    inner.push_back({c[d]});
    c[d] = 0;
  }
  return *groups_of(coords, inner);  // every tile of d appears once per key: always even
}

class Partitioner {
 public:
  Partitioner(ir::Function& main, int64_t n) : main_(main), n_(n) {}

  PartitionResult run() {
    PartitionResult result;
    ir::Block& entry = main_.entry();
    for (size_t i = 0; i < entry.arguments.size(); ++i) {
      Value* a = entry.arguments[i].get();
      HloSharding h =
          annotation(main_.arg_attrs.size() > i ? &main_.arg_attrs[i] : nullptr, a->type.rank());
      result.in.push_back(h);
      sharding_[a] = h;
      a->type = local(a->type, h);
    }
    std::vector<std::unique_ptr<Operation>> ops = std::move(entry.ops);
    entry.ops.clear();
    std::function<void(const Operation&)> count = [&](const Operation& op) {
      for (Value* v : op.operands) ++uses_[v];
      for (const auto& r : op.regions)
        for (const auto& b : r->blocks)
          for (const auto& inner : b->ops) count(*inner);
    };
    for (const auto& op : ops) count(*op);
    for (auto& op : ops) {
      for (auto& v : op->operands)
        if (auto it = replaced_.find(v); it != replaced_.end()) v = it->second;
      if (op->name == "func.return") {
        finish_return(*op, result);
        out_.push_back(std::move(op));
        continue;
      }
      if (op->name == "stablehlo.custom_call") {
        const Attribute* t = op->attr("call_target_name");
        const Attribute* s = op->attr("mhlo.sharding");
        if (t && s && op->operands.size() == 1 && op->num_results() == 1) {
          if (t->text == "Sharding" && s->text == "{manual}") {  // a manual region's edge
            replaced_[op->result()] = op->operands[0];
            continue;
          }
          if (t->text == "SPMDFullToShardShape" || t->text == "SPMDShardToFullShape") {
            manual_edge(std::move(op), t->text == "SPMDShardToFullShape");
            continue;
          }
        }
        if (t && t->text == "Sharding" && s && op->operands.size() == 1) {
          Value* x = op->operands[0];
          const HloSharding want = HloSharding::parse(s->text, x->type.rank(), n_);
          replaced_[op->result()] = reshard(x, want);
          continue;
        }
      }
      rewrite(std::move(op));
    }
    entry.ops = std::move(out_);
    return result;
  }

 private:
  // GSPMD's manual regions (shard_map): SPMDFullToShardShape takes its operand's local shard,
  // which the ops up to SPMDShardToFullShape use as it is (unsharded values to the partitioner);
  // SPMDShardToFullShape's mhlo.sharding says how those shards form the global result. Both are
  // kept, with equal operand and result types, as identities that lower_annotations removes.
  void manual_edge(std::unique_ptr<Operation> op, bool to_full) {
    Value* x = op->operands[0];
    Value* r = op->result();
    const HloSharding h =
        to_full ? HloSharding::parse(op->attr("mhlo.sharding")->text, r->type.rank(), n_) : of(x);
    // The manual side is local; the global side's shard must be that shape.
    const Type global = to_full ? r->type : global_of(x);
    const Type manual = to_full ? x->type : r->type;
    if (local(global, h) != manual)
      throw UnsupportedError(op->where() + ": the shard of " + global.str() + " under " + h.str() +
                             " is " + local(global, h).str() + ", not " + manual.str());
    r->type = manual;
    if (to_full) sharding_[r] = h;
    emit(std::move(op));
  }
  // The global type of a partitioned value.
  Type global_of(Value* v) { return global(v->type, of(v)); }

  HloSharding annotation(const std::vector<ir::NamedAttribute>* attrs, int64_t rank) const {
    if (attrs)
      for (const auto& a : *attrs)
        if (a.name == "mhlo.sharding") return HloSharding::parse(a.value->text, rank, n_);
    return HloSharding::replicated(rank, n_);
  }

  const HloSharding& of(Value* v) {
    auto it = sharding_.find(v);
    if (it == sharding_.end())
      it = sharding_.emplace(v, HloSharding::replicated(v->type.rank(), n_)).first;
    return it->second;
  }

  static Type local(Type t, const HloSharding& h) {
    if (t.is_token) return t;
    for (size_t i = 0; i < t.shape.size(); ++i) t.shape[i] /= h.tiles[i];
    return t;
  }
  static Type global(Type t, const HloSharding& h) {
    if (t.is_token) return t;
    for (size_t i = 0; i < t.shape.size(); ++i) t.shape[i] *= h.tiles[i];
    return t;
  }

  Operation* emit(std::unique_ptr<Operation> op) {
    out_.push_back(std::move(op));
    return out_.back().get();
  }
  Value* constant(const HostTensor& t) {
    auto op = ir::make_op("stablehlo.constant", {}, {Type::tensor(t.shape(), t.dtype())});
    op->set_attr("value", Attribute::dense_elements(t));
    return emit(std::move(op))->result();
  }
  Value* partition_id() {
    if (pid_) return pid_;
    Value* u =
        emit(ir::make_op("stablehlo.partition_id", {}, {Type::tensor({}, DType::U32)}))->result();
    pid_ = emit(ir::make_op("stablehlo.convert", {u}, {Type::tensor({}, DType::I32)}))->result();
    return pid_;
  }
  ir::AttrRef groups_attr(const std::vector<std::vector<int64_t>>& groups) {
    HostTensor t(DType::I64,
                 {static_cast<int64_t>(groups.size()), static_cast<int64_t>(groups[0].size())});
    int64_t k = 0;
    for (const auto& g : groups)
      for (int64_t p : g) t.data_as<int64_t>()[k++] = p;
    return Attribute::dense_elements(t);
  }
  // As JAX lowers collectives under jit: a channel and groups of partition ids, which
  // use_global_device_ids makes flattened ids; all_to_all has no such attribute and reads them
  // as partition ids (cross_partition), the same ids with one replica.
  void collective_attrs(Operation& op, const std::vector<std::vector<int64_t>>& groups) {
    op.set_attr("channel_handle",
                Attribute::struct_attr("stablehlo.channel_handle",
                                       {{"handle", Attribute::integer_attr(channel_++, {})},
                                        {"type", Attribute::integer_attr(1, {})}}));
    op.set_attr("replica_groups", groups_attr(groups));
    if (op.name != "stablehlo.all_to_all") op.set_attr("use_global_device_ids", Attribute::unit());
  }

  // Makes x (sharded by `from`) whole along dimension d: all_gather within its tile groups.
  Value* gather_dim(Value* x, HloSharding& h, int64_t d) {
    std::vector<std::vector<int64_t>> key = all_coords(h);
    const auto groups = groups_along(key, d);
    Type t = x->type;
    t.shape[d] *= h.tiles[d];
    auto op = ir::make_op("stablehlo.all_gather", {x}, {t});
    op->set_attr("all_gather_dim", Attribute::integer_attr(d, DType::I64));
    collective_attrs(*op, groups);
    Value* y = emit(std::move(op))->result();
    std::vector<int64_t> tiles = h.tiles;
    tiles[d] = 1;
    h = from_coords(tiles, key);
    return y;
  }

  // Moves the split of dimension a to dimension b (whole under h), each partition keeping its
  // coordinate: one all_to_all among the partitions that differ only in a's tile sends each
  // the b-tile it will hold, instead of every partition gathering the whole array.
  Value* all_to_all(Value* x, HloSharding& h, int64_t a, int64_t b) {
    auto coords = all_coords(h);
    std::vector<std::vector<int64_t>> key = coords;
    const auto groups = groups_along(key, a);
    const int64_t k = h.tiles[a];
    Type t = x->type;
    t.shape[b] /= k;
    t.shape[a] *= k;
    auto op = ir::make_op("stablehlo.all_to_all", {x}, {t});
    op->set_attr("split_dimension", Attribute::integer_attr(b, DType::I64));
    op->set_attr("concat_dimension", Attribute::integer_attr(a, DType::I64));
    op->set_attr("split_count", Attribute::integer_attr(k, DType::I64));
    collective_attrs(*op, groups);
    Value* y = emit(std::move(op))->result();
    std::vector<int64_t> tiles = h.tiles;
    tiles[b] = k;
    tiles[a] = 1;
    for (auto& c : coords) {
      c[b] = c[a];
      c[a] = 0;
    }
    h = from_coords(tiles, coords);
    return y;
  }

  // A sum (or other all_reduce) of partial values that `to` wants split along a dimension
  // over the partitions of its groups, rank r taking tile r: a reduce_scatter gives each
  // partition only its tile. Only when the sum has no other use, which would need it whole.
  // The groups and their order are the all_reduce's, so the bits are those of its slice.
  Value* reduce_scatter(Value* x, HloSharding& h, const HloSharding& to) {
    auto it = partials_.find(x);
    if (it == partials_.end() || uses_[it->second.partial] != 1) return x;
    const Partial p = it->second;
    const int64_t k = static_cast<int64_t>(p.groups[0].size());
    for (int64_t d = 0; d < x->type.rank(); ++d) {
      if (h.tiles[d] != 1 || to.tiles[d] != k) continue;
      bool ranks = true;
      for (const auto& g : p.groups)
        for (int64_t r = 0; r < k; ++r) ranks = ranks && to.coords(g[r])[d] == r;
      if (!ranks) continue;
      Type t = x->type;
      t.shape[d] /= k;
      auto rs = ir::make_op("stablehlo.reduce_scatter", {p.partial}, {t});
      rs->set_attr("scatter_dimension", Attribute::integer_attr(d, DType::I64));
      collective_attrs(*rs, p.groups);
      add_reducer(*rs, p.kind, t.dtype);
      Value* y = emit(std::move(rs))->result();
      const Operation* ar = x->defining_op;
      std::erase_if(out_, [&](const auto& o) { return o.get() == ar; });
      partials_.erase(it);
      sharding_.erase(x);
      replaced_.erase(p.partial);
      auto coords = all_coords(h);
      for (int64_t q = 0; q < n_; ++q) coords[q][d] = to.coords(q)[d];
      std::vector<int64_t> tiles = h.tiles;
      tiles[d] = k;
      h = from_coords(tiles, coords);
      sharding_[y] = h;
      return y;
    }
    return x;
  }

  // Whether every partition holds the same tile of dimension d under both shardings.
  bool same_split(const HloSharding& a, const HloSharding& b, size_t d) const {
    if (a.tiles[d] != b.tiles[d]) return false;
    for (int64_t p = 0; p < n_; ++p)
      if (a.coords(p)[d] != b.coords(p)[d]) return false;
    return true;
  }

  // x's value (sharded by of(x)) sharded by `to`: dimensions split the same way in both stay
  // as they are (a bias split over 'model' added to a product split over 'data' and 'model' is
  // only sliced along 'data'); the others are gathered, then each partition slices its tile.
  Value* reshard(Value* x, const HloSharding& to) {
    HloSharding h = of(x);
    if (h == to) return x;
    x = reduce_scatter(x, h, to);
    for (size_t a = 0; a < h.tiles.size(); ++a) {
      if (h.tiles[a] == 1 || same_split(h, to, a)) continue;
      for (size_t b = 0; b < h.tiles.size(); ++b) {
        if (h.tiles[b] != 1 || to.tiles[b] != h.tiles[a]) continue;
        bool moves = true;
        for (int64_t p = 0; p < n_; ++p) moves = moves && to.coords(p)[b] == h.coords(p)[a];
        if (moves) {
          x = all_to_all(x, h, static_cast<int64_t>(a), static_cast<int64_t>(b));
          break;
        }
      }
    }
    std::vector<bool> kept(h.tiles.size());
    for (size_t d = 0; d < h.tiles.size(); ++d) kept[d] = h.tiles[d] > 1 && same_split(h, to, d);
    for (size_t d = 0; d < h.tiles.size(); ++d)
      if (h.tiles[d] > 1 && !kept[d]) x = gather_dim(x, h, static_cast<int64_t>(d));
    sharding_[x] = h;
    if (to.is_replicated()) return x;
    bool sliced = false;
    for (size_t d = 0; d < to.tiles.size(); ++d) sliced = sliced || (to.tiles[d] > 1 && !kept[d]);
    if (!sliced) return x;  // the same tiles: only the order of replicas differed
    const Type lt = local(global(x->type, h), to);
    // A splat constant is the same constant, smaller.
    if (Operation* c = x->defining_op; c && c->name == "stablehlo.constant" && c->attr("value")) {
      const HostTensor& v = c->attr("value")->tensor;
      const size_t e = size_of(v.dtype());
      const auto* b = static_cast<const std::byte*>(v.data());
      bool splat = v.size() > 0;
      for (int64_t i = 1; splat && i < v.size(); ++i) splat = std::memcmp(b, b + i * e, e) == 0;
      if (splat) {
        HostTensor t = HostTensor::uninitialized(v.dtype(), lt.shape);
        for (int64_t i = 0; i < t.size(); ++i)
          std::memcpy(static_cast<std::byte*>(t.data()) + i * e, b, e);
        Value* y = constant(t);
        sharding_[y] = to;
        return y;
      }
    }
    // Each partition takes its tile: offsets from a per-partition table.
    std::vector<Value*> operands{x};
    for (size_t d = 0; d < to.tiles.size(); ++d) {
      if (to.tiles[d] == 1 || kept[d]) {
        if (!zero_) zero_ = constant(HostTensor(DType::I32, {}));
        operands.push_back(zero_);
        continue;
      }
      HostTensor table(DType::I32, {n_});
      for (int64_t p = 0; p < n_; ++p)
        table.data_as<int32_t>()[p] = static_cast<int32_t>(to.coords(p)[d] * lt.shape[d]);
      Value* tv = constant(table);
      auto ds = ir::make_op("stablehlo.dynamic_slice", {tv, partition_id()},
                            {Type::tensor({1}, DType::I32)});
      ds->set_attr("slice_sizes", Attribute::dense_array({1}));
      Value* one = emit(std::move(ds))->result();
      operands.push_back(
          emit(ir::make_op("stablehlo.reshape", {one}, {Type::tensor({}, DType::I32)}))->result());
    }
    auto ds = ir::make_op("stablehlo.dynamic_slice", operands, {lt});
    ds->set_attr("slice_sizes", Attribute::dense_array(lt.shape));
    Value* y = emit(std::move(ds))->result();
    sharding_[y] = to;
    return y;
  }

  // Values used inside op's regions but defined outside them are whole there.
  void replicate_captures(Operation& op) {
    std::set<Value*> inside;
    std::function<void(Operation&)> walk = [&](Operation& o) {
      for (auto& r : o.regions)
        for (auto& b : r->blocks) {
          for (auto& a : b->arguments) inside.insert(a.get());
          for (auto& inner : b->ops) {
            for (auto& v : inner->operands) {
              if (auto it = replaced_.find(v); it != replaced_.end()) v = it->second;
              if (!inside.count(v) && sharding_.count(v) && !of(v).is_replicated())
                v = reshard(v, HloSharding::replicated(v->type.rank(), n_));
            }
            for (auto& res : inner->results) inside.insert(res.get());
            walk(*inner);
          }
        }
    };
    walk(op);
  }

  // The fallback: every operand whole, results whole.
  void replicated_op(std::unique_ptr<Operation> op) {
    for (auto& v : op->operands) v = reshard(v, HloSharding::replicated(v->type.rank(), n_));
    replicate_captures(*op);
    for (auto& r : op->results) sharding_[r.get()] = HloSharding::replicated(r->type.rank(), n_);
    emit(std::move(op));
  }

  void set_result(Operation& op, const HloSharding& h) {
    sharding_[op.result()] = h;
    op.result()->type = local(op.result()->type, h);
  }

  static int64_t tile_count(const HloSharding& h) {
    return std::accumulate(h.tiles.begin(), h.tiles.end(), int64_t{1}, std::multiplies<>());
  }

  // The result takes the most finely split operand's sharding (the first of those), so the
  // others are sliced to it rather than it gathered to theirs.
  bool elementwise(Operation& op) {
    const Type& rt = op.result()->type;
    const HloSharding* target = nullptr;
    for (Value* v : op.operands) {
      const Shape g = global(v->type, of(v)).shape;
      if (g != rt.shape && v->type.rank() != 0) return false;
      if (g == rt.shape && !of(v).is_replicated() &&
          (!target || tile_count(of(v)) > tile_count(*target)))
        target = &of(v);
    }
    const HloSharding h = target ? *target : HloSharding::replicated(rt.rank(), n_);
    for (auto& v : op.operands)
      if (v->type.rank() == rt.rank()) v = reshard(v, h);
    set_result(op, h);
    return true;
  }

  bool broadcast_in_dim(Operation& op) {
    Value* x = op.operands[0];
    const auto dims = op.ints("broadcast_dimensions");
    const HloSharding& a = of(x);
    const Type& rt = op.result()->type;
    std::vector<int64_t> tiles(rt.rank(), 1);
    for (size_t k = 0; k < dims.size(); ++k) {
      if (a.tiles[k] == 1) continue;
      if (x->type.shape[k] * a.tiles[k] != rt.shape[dims[k]]) return false;
      tiles[dims[k]] = a.tiles[k];
    }
    std::vector<std::vector<int64_t>> coords;
    for (int64_t p = 0; p < n_; ++p) {
      const auto c = a.coords(p);
      std::vector<int64_t> r(rt.rank(), 0);
      for (size_t k = 0; k < dims.size(); ++k) r[dims[k]] = c[k];
      coords.push_back(r);
    }
    set_result(op, from_coords(tiles, coords));
    return true;
  }

  bool transpose(Operation& op) {
    const auto perm = op.ints("permutation");
    const HloSharding& a = of(op.operands[0]);
    std::vector<int64_t> tiles;
    for (int64_t d : perm) tiles.push_back(a.tiles[d]);
    std::vector<std::vector<int64_t>> coords;
    for (int64_t p = 0; p < n_; ++p) {
      const auto c = a.coords(p);
      std::vector<int64_t> r;
      for (int64_t d : perm) r.push_back(c[d]);
      coords.push_back(r);
    }
    set_result(op, from_coords(tiles, coords));
    return true;
  }

  // A tiled dimension maps to a result dimension with the same product of the dimensions
  // before it whose size the tiles divide: the same rows then land in the same tile. Each
  // tile's elements are then the same set in both shapes, so several tiled dimensions (the
  // batch and the heads of attention's [B, T, N, H] -> [B, T, N, 1, H]) map independently.
  bool reshape(Operation& op) {
    Value* x = op.operands[0];
    const HloSharding& a = of(x);
    const Shape in = global(x->type, a).shape;
    const Shape out = op.result()->type.shape;
    std::vector<int64_t> target(in.size(), -1);
    for (size_t i = 0; i < in.size(); ++i) {
      if (a.tiles[i] == 1) continue;
      int64_t before = 1;
      for (size_t k = 0; k < i; ++k) before *= in[k];
      int64_t acc = 1;
      for (size_t j = 0; j < out.size(); ++j) {
        if (acc == before && out[j] % a.tiles[i] == 0 &&
            (out[j] >= in[i] ? out[j] % in[i] == 0 : in[i] % out[j] == 0)) {
          target[i] = static_cast<int64_t>(j);
          break;
        }
        acc *= out[j];
      }
      if (target[i] < 0) return false;
    }
    std::vector<int64_t> tiles(out.size(), 1);
    std::vector<std::vector<int64_t>> coords;
    for (size_t i = 0; i < in.size(); ++i)
      if (target[i] >= 0) tiles[target[i]] = a.tiles[i];
    for (int64_t p = 0; p < n_; ++p) {
      const auto c = a.coords(p);
      std::vector<int64_t> r(out.size(), 0);
      for (size_t i = 0; i < in.size(); ++i)
        if (target[i] >= 0) r[target[i]] = c[i];
      coords.push_back(r);
    }
    set_result(op, from_coords(tiles, coords));
    return true;
  }

  // A reduce whose body is one add/max/min/... and whose init is that op's identity: reduce
  // locally, then all_reduce across the tiles of the reduced dimensions.
  bool reduce(std::unique_ptr<Operation>& op) {
    if (op->operands.size() != 2 || op->regions.size() != 1) return false;
    const ir::Block& body = op->regions[0]->front();
    if (body.ops.size() != 2) return false;
    const std::string kind = body.ops[0]->name;
    Value* init = op->operands[1];
    if (!init->defining_op || init->defining_op->name != "stablehlo.constant") return false;
    const Attribute* v = init->defining_op->attr("value");
    if (!v || v->kind != Attribute::Kind::DenseElements) return false;
    double x0 = 0;
    visit_dtype(v->tensor.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      x0 = static_cast<double>(v->tensor.template data_as<T>()[0]);
    });
    const bool identity = (kind == "stablehlo.add" && x0 == 0) ||
                          (kind == "stablehlo.multiply" && x0 == 1) ||
                          (kind == "stablehlo.maximum" && (x0 == -INFINITY || x0 < -1e30)) ||
                          (kind == "stablehlo.minimum" && (x0 == INFINITY || x0 > 1e30)) ||
                          (kind == "stablehlo.or" && x0 == 0);
    if (!identity) return false;
    Value* x = op->operands[0];
    const HloSharding a = of(x);
    const auto dims = op->ints("dimensions");
    std::vector<std::vector<int64_t>> key, inner;
    std::vector<int64_t> tiles;
    for (int64_t d = 0; d < x->type.rank(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) tiles.push_back(a.tiles[d]);
    bool crosses = false;
    for (int64_t d : dims) crosses = crosses || a.tiles[d] > 1;
    for (int64_t p = 0; p < n_; ++p) {
      const auto c = a.coords(p);
      std::vector<int64_t> k, i;
      for (int64_t d = 0; d < x->type.rank(); ++d)
        (std::find(dims.begin(), dims.end(), d) == dims.end() ? k : i).push_back(c[d]);
      key.push_back(k);
      inner.push_back(i);
    }
    auto groups = groups_of(key, inner);
    if (!groups || !covers_tiles(tiles, key)) return false;
    const HloSharding h = from_coords(tiles, key);
    Operation* r = emit(std::move(op));
    set_result(*r, h);
    if (crosses) replaced_[r->result()] = all_reduce(r->result(), kind, *groups, h);
    return true;
  }

  static void add_reducer(Operation& op, const std::string& kind, DType dtype) {
    ir::Block& b = op.add_region().add_block();
    const Type scalar = Type::tensor({}, dtype);
    Value* l = b.add_argument(scalar);
    Value* r = b.add_argument(scalar);
    Value* s = b.push_back(ir::make_op(kind, {l, r}, {scalar}))->result();
    b.push_back(ir::make_op("stablehlo.return", {s}, {}));
  }

  // x's partial values combined across each group; reshard may turn it into a reduce_scatter.
  Value* all_reduce(Value* x, const std::string& kind,
                    const std::vector<std::vector<int64_t>>& groups, const HloSharding& h) {
    auto ar = ir::make_op("stablehlo.all_reduce", {x}, {x->type});
    collective_attrs(*ar, groups);
    add_reducer(*ar, kind, x->type.dtype);
    Value* y = emit(std::move(ar))->result();
    sharding_[y] = h;
    partials_[y] = {x, kind, groups};
    return y;
  }

  bool dot_general(std::unique_ptr<Operation>& op) {
    const Attribute* dn = op->attr("dot_dimension_numbers");
    auto list = [&](const char* name) {
      const Attribute* f = dn ? dn->field(name) : nullptr;
      return f ? ir::as_ints(*f) : std::vector<int64_t>{};
    };
    const auto lb = list("lhs_batching_dimensions"), rb = list("rhs_batching_dimensions");
    const auto lc = list("lhs_contracting_dimensions"), rc = list("rhs_contracting_dimensions");
    Value* lhs = op->operands[0];
    Value* rhs = op->operands[1];
    const HloSharding L = of(lhs), R = of(rhs);
    auto has = [](const std::vector<int64_t>& v, int64_t d) {
      return std::find(v.begin(), v.end(), d) != v.end();
    };
    for (size_t i = 0; i < lb.size(); ++i)
      if (L.tiles[lb[i]] != R.tiles[rb[i]]) return false;
    for (size_t i = 0; i < lc.size(); ++i)
      if (L.tiles[lc[i]] != R.tiles[rc[i]]) return false;
    std::vector<int64_t> tiles;
    for (int64_t d : lb) tiles.push_back(L.tiles[d]);
    for (int64_t d = 0; d < lhs->type.rank(); ++d)
      if (!has(lb, d) && !has(lc, d)) tiles.push_back(L.tiles[d]);
    for (int64_t d = 0; d < rhs->type.rank(); ++d)
      if (!has(rb, d) && !has(rc, d)) tiles.push_back(R.tiles[d]);
    std::vector<std::vector<int64_t>> key, inner;
    bool crosses = false;
    for (int64_t d : lc) crosses = crosses || L.tiles[d] > 1;
    for (int64_t p = 0; p < n_; ++p) {
      const auto l = L.coords(p), r = R.coords(p);
      std::vector<int64_t> k, in;
      for (size_t i = 0; i < lb.size(); ++i) {
        if (l[lb[i]] != r[rb[i]]) return false;
        k.push_back(l[lb[i]]);
      }
      for (int64_t d = 0; d < lhs->type.rank(); ++d)
        if (!has(lb, d) && !has(lc, d)) k.push_back(l[d]);
      for (int64_t d = 0; d < rhs->type.rank(); ++d)
        if (!has(rb, d) && !has(rc, d)) k.push_back(r[d]);
      for (size_t i = 0; i < lc.size(); ++i) {
        if (l[lc[i]] != r[rc[i]]) return false;
        in.push_back(l[lc[i]]);
      }
      key.push_back(k);
      inner.push_back(in);
    }
    auto groups = groups_of(key, inner);
    if (!groups || !covers_tiles(tiles, key)) return false;
    const HloSharding h = from_coords(tiles, key);
    Operation* d = emit(std::move(op));
    set_result(*d, h);
    if (crosses) replaced_[d->result()] = all_reduce(d->result(), "stablehlo.add", *groups, h);
    return true;
  }

  void rewrite(std::unique_ptr<Operation> op) {
    const std::string& name = op->name;
    const bool one = op->num_results() == 1 && op->regions.empty();
    bool done = false;
    if (one && (kElementwise.count(name) || is_elementwise_chlo(name))) {
      done = elementwise(*op);
    } else if (one && name == "stablehlo.broadcast_in_dim") {
      done = broadcast_in_dim(*op);
    } else if (one && name == "stablehlo.transpose") {
      done = transpose(*op);
    } else if (one && name == "stablehlo.reshape") {
      done = reshape(*op);
    } else if (name == "stablehlo.reduce") {
      if (reduce(op)) return;
    } else if (one && name == "stablehlo.dot_general") {
      if (dot_general(op)) return;
    }
    if (done) {
      emit(std::move(op));
      return;
    }
    replicated_op(std::move(op));
  }

  void finish_return(Operation& ret, PartitionResult& result) {
    main_.result_attrs.resize(ret.operands.size());
    for (size_t i = 0; i < ret.operands.size(); ++i) {
      Value*& v = ret.operands[i];
      bool annotated = false;
      for (const auto& a : main_.result_attrs[i])
        annotated = annotated || a.name == "mhlo.sharding";
      const HloSharding want =
          annotated ? annotation(&main_.result_attrs[i], v->type.rank()) : of(v);
      v = reshard(v, want);
      if (!annotated)
        main_.result_attrs[i].push_back({"mhlo.sharding", Attribute::string_attr(want.str())});
      result.out.push_back(want);
      main_.result_types[i] = v->type;
    }
  }

  ir::Function& main_;
  int64_t n_;
  std::map<Value*, HloSharding> sharding_;
  std::map<Value*, Value*> replaced_;
  // An all_reduce's result -> its operand (the partial values), reduction and groups.
  struct Partial {
    Value* partial;
    std::string kind;
    std::vector<std::vector<int64_t>> groups;
  };
  std::map<Value*, Partial> partials_;
  std::map<Value*, int64_t> uses_;  // operands in @main (regions included) naming each value
  std::vector<std::unique_ptr<Operation>> out_;
  Value* pid_ = nullptr;
  Value* zero_ = nullptr;
  int64_t channel_ = 1;
};

}  // namespace

int64_t num_partitions(const ir::Module& module) {
  for (const auto& a : module.attributes)
    if (a.name == "mhlo.num_partitions") return a.value->integer;
  return 0;
}

void set_num_partitions(ir::Module& module, int64_t n) {
  auto set = [&](const char* name, int64_t v) {
    for (auto& a : module.attributes)
      if (a.name == name) {
        a.value = Attribute::integer_attr(v, DType::I32);
        return;
      }
    module.attributes.push_back({name, Attribute::integer_attr(v, DType::I32)});
  };
  set("mhlo.num_partitions", n);
  set("mhlo.num_replicas", 1);
}

PartitionResult partition(ir::Module& module) {
  ir::Function* main = module.lookup("main");
  if (!main) throw Error("partition: module has no @main");
  const int64_t n = num_partitions(module);
  compiler::shardy_to_gspmd(module, n);
  return Partitioner(*main, n).run();
}

}  // namespace cujax::sharding
