#include "backends/cpu/fusion.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "backends/cpu/elementwise_ops.h"
#include "backends/cpu/fusion_tiles.h"
#include "backends/cpu/parallel.h"

namespace cujax::cpu {

namespace {

using namespace tiles;

// Elements per tile: a few tiles of f32 fit in L1 together.
constexpr int64_t kTile = 1024;
// Elements per parallel task, as the per-op kernels use.
constexpr int64_t kGrain = int64_t{1} << 15;
constexpr int64_t kGrainPrecise = int64_t{1} << 11;

// The tile functions of the same-type unary and binary ops, by element type.
struct TileTable {
  std::unordered_map<std::string, TileOp> f32, pred;
};

template <class F, size_t kArity>
void add_tile_op(TileTable& t, const char* name) {
  auto fn_for = [](auto tag) -> TileFn {
    using T = typename decltype(tag)::type;
    if constexpr (kArity == 1 && F::kPrecise)
      return precise_unary_tile<F, T>;
    else if constexpr (kArity == 1)
      return unary_tile<F, T>;
    else
      return binary_tile<F, T>;
  };
  if constexpr (ew::supports<F, float>())
    t.f32[name] = TileOp{fn_for(TypeTag<float>{}), kArity, F::kPrecise};
  if constexpr (ew::supports<F, bool>())
    t.pred[name] = TileOp{fn_for(TypeTag<bool>{}), kArity, F::kPrecise};
}

const TileTable& tile_table() {
  static const TileTable table = [] {
    TileTable t;
#define CUJAX_TILE_UNARY(name, F) add_tile_op<ew::F, 1>(t, name);
#define CUJAX_TILE_BINARY(name, F) add_tile_op<ew::F, 2>(t, name);
    CUJAX_CPU_UNARY_OPS(CUJAX_TILE_UNARY)
    CUJAX_CPU_BINARY_OPS(CUJAX_TILE_BINARY)
#undef CUJAX_TILE_UNARY
#undef CUJAX_TILE_BINARY
    return t;
  }();
  return table;
}

bool is_fusible_type(DType t) {
  return t == DType::F32 || t == DType::Bool;
}

// The tile function of `op` when it is element-wise with every operand of the result's shape
// and f32/i1 types; nullopt otherwise (the op then runs as its own step).
std::optional<TileOp> elementwise_tile_op(const ir::Operation& op) {
  if (op.num_results() != 1 || !op.regions.empty() || op.operands.empty()) return std::nullopt;
  const ir::Type& r = op.result(0)->type;
  if (r.is_token || !is_fusible_type(r.dtype)) return std::nullopt;
  for (const ir::Value* v : op.operands)
    if (v->type.is_token || v->type.shape != r.shape) return std::nullopt;
  auto operand_dtype = [&](size_t i) { return op.operands[i]->type.dtype; };

  if (op.name == "stablehlo.compare") {
    if (op.operands.size() != 2 || r.dtype != DType::Bool || operand_dtype(0) != DType::F32 ||
        operand_dtype(1) != DType::F32)
      return std::nullopt;
    if (const ir::Attribute* ct = op.attr("compare_type"))
      if (ct->kind != ir::Attribute::Kind::Enum ||
          (ct->enum_value != "FLOAT" && ct->enum_value != "NOTYPE"))
        return std::nullopt;
    const ir::Attribute* d = op.attr("comparison_direction");
    if (!d || d->kind != ir::Attribute::Kind::Enum) return std::nullopt;
    const std::optional<ew::CompareDirection> dir = parse_compare_direction(d->enum_value);
    if (!dir) return std::nullopt;
    TileOp t{nullptr, 2, false};
    with_direction(*dir, [&](auto tag) { t.fn = compare_tile<decltype(tag)::value>; });
    return t;
  }
  if (op.name == "stablehlo.select") {
    if (op.operands.size() != 3 || operand_dtype(0) != DType::Bool || operand_dtype(1) != r.dtype ||
        operand_dtype(2) != r.dtype)
      return std::nullopt;
    return TileOp{r.dtype == DType::F32 ? select_tile<float> : select_tile<bool>, 3, false};
  }
  if (op.name == "stablehlo.convert") {
    if (op.operands.size() != 1 || !is_fusible_type(operand_dtype(0))) return std::nullopt;
    if (operand_dtype(0) == r.dtype) return std::nullopt;  // the kernel forwards its operand
    return TileOp{r.dtype == DType::F32 ? convert_tile<float, bool> : convert_tile<bool, float>, 1,
                  false};
  }
  for (size_t i = 0; i < op.operands.size(); ++i)
    if (operand_dtype(i) != r.dtype) return std::nullopt;
  const auto& table = r.dtype == DType::F32 ? tile_table().f32 : tile_table().pred;
  auto it = table.find(op.name);
  if (it == table.end() || it->second.arity != op.operands.size()) return std::nullopt;
  return it->second;
}

// A broadcast_in_dim read in place: element i of the result is source[(i / repeat) % period].
// Holds when the source's non-unit dimensions map, in order, onto consecutive result
// dimensions: a scalar, a trailing bias (period = its size), a per-row statistic (repeat =
// the size of the trailing dimensions).
struct BroadcastView {
  int64_t period = 1;
  int64_t repeat = 1;
};

std::optional<BroadcastView> broadcast_view(const ir::Operation& op) {
  if (op.name != "stablehlo.broadcast_in_dim" || op.operands.size() != 1 || op.num_results() != 1)
    return std::nullopt;
  const ir::Type& x = op.operands[0]->type;
  const ir::Type& r = op.result(0)->type;
  if (x.is_token || r.is_token || x.dtype != r.dtype || !is_fusible_type(r.dtype))
    return std::nullopt;
  const int64_t nx = x.num_elements();
  const int64_t nr = r.num_elements();
  // A source as large as the result is a full operand; an empty one has nothing to fuse.
  if (nx >= nr || nx == 0) return std::nullopt;
  if (nx == 1) return BroadcastView{};
  const std::vector<int64_t> dims = op.ints("broadcast_dimensions");
  if (dims.size() != x.shape.size()) return std::nullopt;
  int64_t first = -1, last = -1;
  for (size_t j = 0; j < dims.size(); ++j) {
    if (x.shape[j] == 1) continue;
    const int64_t d = dims[j];
    if (d < 0 || d >= r.rank() || x.shape[j] != r.shape[d]) return std::nullopt;
    if (last >= 0 && d != last + 1) return std::nullopt;
    if (first < 0) first = d;
    last = d;
  }
  BroadcastView view;
  for (int64_t d = first; d <= last; ++d) view.period *= r.shape[d];
  for (int64_t d = last + 1; d < r.rank(); ++d) view.repeat *= r.shape[d];
  return view;
}

// A reduce that a fused step computes row by row: one f32 input folded by add, multiply,
// maximum or minimum over its trailing dimensions (size-1 dimensions aside), so each result
// element folds `len` contiguous elements. Longer rows and fewer rows are left to the reduce
// kernel, which splits them differently.
struct RowReduce {
  RowReduceFn fn = nullptr;
  int64_t len = 1;   // elements folded per result element
  int64_t rows = 1;  // result elements
};
constexpr int64_t kMaxRowLength = 16384;
constexpr int64_t kMinRows = 8;

std::optional<RowReduce> row_reduce(const ir::Operation& op) {
  if (op.name != "stablehlo.reduce" || op.operands.size() != 2 || op.num_results() != 1 ||
      op.regions.size() != 1)
    return std::nullopt;
  const ir::Type& x = op.operands[0]->type;
  const ir::Type& init = op.operands[1]->type;
  const ir::Type& r = op.result(0)->type;
  if (x.is_token || init.is_token || r.is_token || x.dtype != DType::F32 ||
      init.dtype != DType::F32 || r.dtype != DType::F32 || init.rank() != 0)
    return std::nullopt;
  const std::optional<std::string> body = simple_binary_region(*op.regions[0]);
  if (!body) return std::nullopt;
  RowReduce rr;
  if (*body == "stablehlo.add")
    rr.fn = reduce_rows<ReduceAdd>;
  else if (*body == "stablehlo.multiply")
    rr.fn = reduce_rows<ReduceMul>;
  else if (*body == "stablehlo.maximum")
    rr.fn = extreme_rows<ReduceMax, true>;
  else if (*body == "stablehlo.minimum")
    rr.fn = extreme_rows<ReduceMin, false>;
  else
    return std::nullopt;
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t d : op.ints("dimensions")) {
    if (d < 0 || d >= x.rank() || reduced[d]) return std::nullopt;
    reduced[d] = true;
  }
  bool seen_kept = false;  // walking from the last dimension outwards
  for (size_t d = x.shape.size(); d-- > 0;) {
    if (x.shape[d] == 1) continue;
    if (reduced[d]) {
      if (seen_kept) return std::nullopt;  // a reduced dimension left of a kept one
      rr.len *= x.shape[d];
    } else {
      seen_kept = true;
      rr.rows *= x.shape[d];
    }
  }
  if (rr.len <= 1 || rr.len > kMaxRowLength || rr.rows < kMinRows) return std::nullopt;
  if (rr.rows * rr.len != x.num_elements() || r.num_elements() != rr.rows) return std::nullopt;
  return rr;
}

// The compiled form of one group: values are numbered inputs first, then nodes. A group with
// row reductions runs over rows of `row_length` elements: its values are either row-level
// (one element per element of the group's shape) or per-row (one element per row: the
// reductions' results and the element-wise ops on them), and an expand node broadcasts a
// per-row value back along its rows. Without reductions every element is a row of one.
struct FusedProgram {
  struct Input {
    DType dtype = DType::F32;
    bool per_row = false;  // indexed by row, not by element
    bool full = true;      // a tensor of its level's size; else a broadcast source
    Shape shape;           // when full
    BroadcastView view;    // when !full
  };
  enum class Kind { Map, Reduce, Expand, Copy };
  struct Node {
    Kind kind = Kind::Map;
    TileFn fn = nullptr;           // Map
    RowReduceFn reduce = nullptr;  // Reduce: args are the operand and the init value
    std::vector<int> args;         // value numbers
    DType dtype = DType::F32;
    bool per_row = false;
    Shape shape;      // of the op's result
    int output = -1;  // index of the group output it writes, or -1 (scratch)
    int slot = -1;    // its scratch tile when it is not an output
  };
  Shape shape;
  int64_t row_length = 1;
  int num_slots = 0;  // scratch tiles for the nodes: as many as are live at once
  std::vector<Input> inputs;
  std::vector<Node> nodes;
  std::vector<int> output_nodes;  // node of each output
  std::vector<int> last_reader;   // per input: the last node that reads it (-1: none)
  bool precise = false;
};

template <class T>
void expand_view(const T* __restrict src, const BroadcastView& v, int64_t begin, int64_t n,
                 T* __restrict dst) {
  if (v.period == 1) {
    std::fill(dst, dst + n, src[0]);
    return;
  }
  if (v.repeat == 1) {
    int64_t pos = begin % v.period;
    for (int64_t done = 0; done < n;) {
      const int64_t len = std::min(v.period - pos, n - done);
      std::memcpy(dst + done, src + pos, static_cast<size_t>(len) * sizeof(T));
      done += len;
      pos = 0;
    }
    return;
  }
  int64_t q = (begin / v.repeat) % v.period;
  int64_t r = begin % v.repeat;
  for (int64_t done = 0; done < n;) {
    const int64_t len = std::min(v.repeat - r, n - done);
    std::fill(dst + done, dst + done + len, src[q]);
    done += len;
    r = 0;
    q = q + 1 == v.period ? 0 : q + 1;
  }
}

size_t element_size(DType t) {
  return t == DType::Bool ? sizeof(bool) : sizeof(float);
}

template <class T>
void expand_rows(const T* __restrict src, int64_t rows, int64_t len, T* __restrict dst) {
  for (int64_t r = 0; r < rows; ++r) std::fill(dst + r * len, dst + (r + 1) * len, src[r]);
}

// Computes rows [begin, end) of every node, a tile of about kTile elements at a time.
void run_tiles(const FusedProgram& p, const std::vector<const void*>& in,
               const std::vector<void*>& out, int64_t begin, int64_t end) {
  const size_t num_inputs = p.inputs.size();
  const int64_t len = p.row_length;
  const int64_t tile_rows = std::max<int64_t>(1, kTile / len);
  const int64_t capacity = tile_rows * len;  // elements per value and tile
  thread_local std::vector<float> scratch;   // float-aligned; bool tiles use its bytes
  thread_local std::vector<const void*> values;
  scratch.resize((num_inputs + p.num_slots) * static_cast<size_t>(capacity));
  values.resize(num_inputs + p.nodes.size());
  auto tile_buffer = [&](size_t value) { return scratch.data() + value * capacity; };
  const void* args[3];
  // A broadcast scalar (a constant, a reduce's init value) is the same tile every time: fill it
  // once per call. Input tiles are never written by nodes, so it stays.
  auto is_scalar = [&](size_t i) { return !p.inputs[i].full && p.inputs[i].view.period == 1; };
  for (size_t i = 0; i < num_inputs; ++i) {
    if (!is_scalar(i)) continue;
    if (p.inputs[i].dtype == DType::F32) {
      expand_view(static_cast<const float*>(in[i]), p.inputs[i].view, 0, capacity, tile_buffer(i));
      values[i] = tile_buffer(i);
    } else {
      bool* dst = reinterpret_cast<bool*>(tile_buffer(i));
      expand_view(static_cast<const bool*>(in[i]), p.inputs[i].view, 0, capacity, dst);
      values[i] = dst;
    }
  }
  for (int64_t t = begin; t < end; t += tile_rows) {
    const int64_t rows = std::min(tile_rows, end - t);
    // Where a value's tile starts in its tensor, and its length.
    auto first = [&](bool per_row) { return per_row ? t : t * len; };
    auto count = [&](bool per_row) { return per_row ? rows : rows * len; };
    for (size_t i = 0; i < num_inputs; ++i) {
      const FusedProgram::Input& input = p.inputs[i];
      const int64_t at = first(input.per_row), n = count(input.per_row);
      if (is_scalar(i)) continue;
      if (input.full) {
        values[i] = static_cast<const std::byte*>(in[i]) + at * element_size(input.dtype);
      } else if (input.dtype == DType::F32) {
        expand_view(static_cast<const float*>(in[i]), input.view, at, n, tile_buffer(i));
        values[i] = tile_buffer(i);
      } else {
        bool* dst = reinterpret_cast<bool*>(tile_buffer(i));
        expand_view(static_cast<const bool*>(in[i]), input.view, at, n, dst);
        values[i] = dst;
      }
    }
    for (size_t k = 0; k < p.nodes.size(); ++k) {
      const FusedProgram::Node& node = p.nodes[k];
      for (size_t a = 0; a < node.args.size(); ++a) args[a] = values[node.args[a]];
      const size_t size = element_size(node.dtype);
      void* dst = node.output >= 0
                      ? static_cast<std::byte*>(out[node.output]) + first(node.per_row) * size
                      : static_cast<void*>(tile_buffer(num_inputs + node.slot));
      switch (node.kind) {
        case FusedProgram::Kind::Map:
          node.fn(args, dst, count(node.per_row));
          break;
        case FusedProgram::Kind::Reduce:
          node.reduce(static_cast<const float*>(args[0]), static_cast<const float*>(args[1]),
                      static_cast<float*>(dst), rows, len);
          break;
        case FusedProgram::Kind::Expand:
          if (node.dtype == DType::F32)
            expand_rows(static_cast<const float*>(args[0]), rows, len, static_cast<float*>(dst));
          else
            expand_rows(static_cast<const bool*>(args[0]), rows, len, static_cast<bool*>(dst));
          break;
        case FusedProgram::Kind::Copy:
          if (dst != args[0])
            std::memcpy(dst, args[0], static_cast<size_t>(count(node.per_row)) * size);
          break;
      }
      values[num_inputs + k] = dst;
    }
  }
}

Kernel fused_kernel(std::shared_ptr<const FusedProgram> program, std::string where) {
  return [p = std::move(program), where = std::move(where)](std::span<const HostTensor> in,
                                                            ExecContext& ctx) {
    if (in.size() != p->inputs.size())
      throw RuntimeError(where + ": expects " + std::to_string(p->inputs.size()) + " inputs, got " +
                         std::to_string(in.size()));
    const int64_t n = num_elements(p->shape);
    std::vector<const void*> in_data(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const FusedProgram::Input& input = p->inputs[i];
      const bool ok =
          in[i].dtype() == input.dtype &&
          (input.full ? in[i].shape() == input.shape : in[i].size() == input.view.period);
      if (!ok)
        throw RuntimeError(where + ": input #" + std::to_string(i) + " is " + in[i].type_string() +
                           ", not the compiled type");
      in_data[i] = in[i].data();
    }
    std::vector<HostTensor> results;
    std::vector<void*> out_data;
    std::vector<bool> taken(in.size(), false);
    // Whether output node `node` may be written into input i's memory: every reference to that
    // memory is one of this kernel's full inputs (an input and its reshaped views read the same
    // element at the same index), and no node after `node` reads any of them.
    auto reusable = [&](size_t i, int node) {
      const FusedProgram::Node& out = p->nodes[node];
      if (taken[i] || !p->inputs[i].full || p->inputs[i].per_row != out.per_row ||
          in[i].dtype() != out.dtype || in[i].shape() != out.shape)
        return false;
      long sharers = 0;
      for (size_t j = 0; j < in.size(); ++j) {
        if (in[j].data() != in[i].data()) continue;
        if (!p->inputs[j].full || p->last_reader[j] > node) return false;
        ++sharers;
      }
      return in[i].storage_owners() == sharers;
    };
    for (int node : p->output_nodes) {
      int reuse = -1;  // a donated argument's memory first
      for (size_t i = 0; i < in.size() && reuse < 0; ++i)
        if (reusable(i, node) && ctx.is_donated(in[i].data())) reuse = static_cast<int>(i);
      for (size_t i = 0; i < in.size() && reuse < 0; ++i)
        if (reusable(i, node)) reuse = static_cast<int>(i);
      if (reuse >= 0)
        for (size_t j = 0; j < in.size(); ++j)
          if (in[j].data() == in[reuse].data()) taken[j] = true;
      results.push_back(
          reuse >= 0 ? in[reuse]
                     : HostTensor::uninitialized(p->nodes[node].dtype, p->nodes[node].shape));
      out_data.push_back(results.back().data());
    }
    const int64_t grain = p->precise ? kGrainPrecise : kGrain;
    const int64_t rows = n / p->row_length;
    auto body = [&](int64_t b, int64_t e) { run_tiles(*p, in_data, out_data, b, e); };
    if (n < 2 * grain) {
      if (rows > 0) body(0, rows);
    } else {
      parallel_for(rows, std::max<int64_t>(1, grain / p->row_length), body);
    }
    return results;
  };
}

// Gives each scratch node a tile that no live value holds: a node's tile is free again once its
// last reader has run, so a long chain (Adam, a GELU gradient) keeps a few tiles in L1 instead
// of one per op. A node never shares a tile with its own operands.
void assign_slots(FusedProgram& p) {
  const int num_inputs = static_cast<int>(p.inputs.size());
  std::vector<int> last_use(p.nodes.size(), -1);
  for (size_t k = 0; k < p.nodes.size(); ++k)
    for (int a : p.nodes[k].args)
      if (a >= num_inputs) last_use[a - num_inputs] = static_cast<int>(k);
  std::vector<int> free_slots;
  for (size_t k = 0; k < p.nodes.size(); ++k) {
    FusedProgram::Node& node = p.nodes[k];
    if (node.output < 0) {
      if (free_slots.empty()) {
        node.slot = p.num_slots++;
      } else {
        node.slot = free_slots.back();
        free_slots.pop_back();
      }
    }
    for (size_t j = 0; j <= k; ++j)
      if (p.nodes[j].slot >= 0 && std::max(last_use[j], static_cast<int>(j)) == static_cast<int>(k))
        free_slots.push_back(p.nodes[j].slot);
  }
}

std::atomic<int> fusion_setting{-1};  // -1: not read from the environment yet

}  // namespace

bool fusion_enabled() {
  int v = fusion_setting.load();
  if (v < 0) {
    const char* env = std::getenv("CUJAX_CPU_FUSION");
    v = env && std::string(env) == "0" ? 0 : 1;
    fusion_setting.store(v);
  }
  return v == 1;
}

void set_fusion_enabled(bool on) {
  fusion_setting.store(on ? 1 : 0);
}

FusionPlan plan_fusion(const ir::Block& block, size_t num_ops) {
  FusionPlan plan;
  plan.step_at.assign(num_ops, -1);
  plan.absorbed.assign(num_ops, false);
  const size_t kAfter = num_ops;  // the terminator as a user

  std::unordered_map<const ir::Value*, std::vector<size_t>> users;
  std::unordered_map<const ir::Value*, size_t> defined_by;
  std::vector<std::optional<TileOp>> tile(num_ops);
  std::vector<std::optional<BroadcastView>> view(num_ops);
  std::vector<std::optional<RowReduce>> reduce(num_ops);
  for (size_t i = 0; i < num_ops; ++i) {
    const ir::Operation& op = *block.ops[i];
    for (const ir::Value* v : op.operands) users[v].push_back(i);
    if (!op.regions.empty())
      for (const ir::Value* v : captured_values(op)) users[v].push_back(i);
    for (const auto& r : op.results) defined_by[r.get()] = i;
    tile[i] = elementwise_tile_op(op);
    view[i] = broadcast_view(op);
    reduce[i] = row_reduce(op);
  }
  for (size_t i = num_ops; i < block.ops.size(); ++i)
    for (const ir::Value* v : block.ops[i]->operands) users[v].push_back(kAfter);

  // Runs of element-wise ops of one shape, one open run per shape. An op that reads a member
  // of an open run closes that run first, since the run's values exist only once its fused
  // step (placed at its last member) has run; other ops in between keep their place.
  //
  // A run also takes a reduce of its shape over trailing dimensions (rows), the element-wise
  // ops on the per-row results (a mean, a variance plus epsilon, a log), their reshapes, and
  // their broadcasts back along the rows; then softmax, layer norm and cross-entropy run in
  // one pass over each tile of rows instead of materializing each step.
  enum class Role { Map, MapPerRow, Reduce, Expand, Copy };
  std::vector<Role> role(num_ops, Role::Map);
  std::vector<bool> per_row(num_ops, false);  // a member whose result is indexed by row
  struct Run {
    Shape shape;
    std::vector<size_t> members;
    int64_t row_length = 1;  // > 1 once it holds a reduce
    int64_t rows = 0;
  };
  std::vector<Run> runs;
  std::vector<Run> open;
  std::vector<int> open_run_of(num_ops, -1);  // index into `open` while the run is open
  auto close = [&](size_t r) {
    for (size_t m : open[r].members) open_run_of[m] = -1;
    if (open[r].members.size() >= 2) runs.push_back(open[r]);
    open[r].members.clear();
    open[r].row_length = 1;
    open[r].rows = 0;
  };
  auto open_run_with_shape = [&](const Shape& shape) {
    for (size_t r = 0; r < open.size(); ++r)
      if (open[r].shape == shape) return static_cast<int>(r);
    open.push_back(Run{shape, {}, 1, 0});
    return static_cast<int>(open.size() - 1);
  };
  // The open run that has `v` as a per-row value, or -1.
  auto per_row_run_of = [&](const ir::Value* v) {
    auto def = defined_by.find(v);
    if (def == defined_by.end() || !per_row[def->second]) return -1;
    return open_run_of[def->second];
  };
  // The open run whose per-row values `op` (of one result) computes on, or -1.
  auto per_row_run = [&](const ir::Operation& op) {
    for (const ir::Value* v : op.operands) {
      const int r = per_row_run_of(v);
      if (r >= 0 && op.result(0)->type.num_elements() == open[r].rows) return r;
    }
    return -1;
  };
  std::vector<const ir::Value*> reads;
  for (size_t i = 0; i < num_ops; ++i) {
    const ir::Operation& op = *block.ops[i];
    int own = -1;
    if (tile[i]) {
      own = per_row_run(op);
      role[i] = own >= 0 ? Role::MapPerRow : Role::Map;
      if (own < 0) own = open_run_with_shape(op.result(0)->type.shape);
    } else if (reduce[i]) {
      // The init value comes from outside every open run (a constant, as a rule).
      auto init = defined_by.find(op.operands[1]);
      const bool init_outside = init == defined_by.end() || open_run_of[init->second] < 0;
      const int r = open_run_with_shape(op.operands[0]->type.shape);
      if (init_outside && (open[r].row_length == 1 || open[r].row_length == reduce[i]->len)) {
        own = r;
        role[i] = Role::Reduce;
        open[r].row_length = reduce[i]->len;
        open[r].rows = reduce[i]->rows;
      }
    } else if (view[i]) {
      const int r = per_row_run_of(op.operands[0]);
      if (r >= 0 && op.result(0)->type.shape == open[r].shape && view[i]->period == open[r].rows &&
          view[i]->repeat == open[r].row_length) {
        own = r;
        role[i] = Role::Expand;
      }
    } else if (op.name == "stablehlo.reshape" && op.operands.size() == 1 && op.num_results() == 1) {
      own = per_row_run(op);
      if (own >= 0) role[i] = Role::Copy;
    }
    reads.assign(op.operands.begin(), op.operands.end());
    if (!op.regions.empty())
      for (const ir::Value* v : captured_values(op)) reads.push_back(v);
    for (const ir::Value* v : reads) {
      auto def = defined_by.find(v);
      if (def == defined_by.end()) continue;
      const int r = open_run_of[def->second];
      if (r >= 0 && r != own) close(static_cast<size_t>(r));
    }
    if (own >= 0) {
      open[own].members.push_back(i);
      open_run_of[i] = own;
      per_row[i] = role[i] == Role::MapPerRow || role[i] == Role::Reduce || role[i] == Role::Copy;
    }
  }
  for (size_t r = 0; r < open.size(); ++r) close(r);
  // Fused steps are emitted at their last member, in program order.
  std::sort(runs.begin(), runs.end(),
            [](const Run& x, const Run& y) { return x.members.back() < y.members.back(); });
  std::vector<int> group_of(num_ops, -1);
  for (size_t g = 0; g < runs.size(); ++g)
    for (size_t m : runs[g].members) group_of[m] = static_cast<int>(g);

  // A view whose every user is a fused op is never materialized.
  for (size_t i = 0; i < num_ops; ++i) {
    if (!view[i] || group_of[i] >= 0) continue;
    const auto& us = users[block.ops[i]->result(0)];
    plan.absorbed[i] = !us.empty() && std::all_of(us.begin(), us.end(), [&](size_t u) {
      return u != kAfter && group_of[u] >= 0;
    });
  }

  // A broadcast outside every group, or the expand node of another group: read through a view
  // of its source.
  auto read_through_view = [&](size_t e) {
    return view[e] && (group_of[e] < 0 || role[e] == Role::Expand);
  };
  // Recomputation instead of residuals: a group that reads a row-level element-wise value of an
  // earlier group computes it again from that group's inputs, when that reads at most one
  // full-size tensor the group does not read already (GELU's x * x and 1 + tanh(...) from the
  // pre-activation and the tanh, a masked logit from the attention product). The earlier group
  // then writes fewer tensors and the later one reads fewer; the functors are the same, so are
  // the bits. exp, tanh and the other precise ops are read, not computed again: they cost more
  // than a pass over memory.
  constexpr size_t kMaxRecomputed = 24;  // ops one value may take
  std::vector<std::unordered_set<size_t>> recomputed(runs.size());
  std::unordered_set<const ir::Value*> expand_sources;
  // What recomputations read: their groups write these out even when no op outside reads them.
  std::unordered_set<const ir::Value*> recomputation_leaves;
  for (size_t g = 0; g < runs.size(); ++g) {
    std::unordered_set<const ir::Value*> reads_full;  // full-size tensors the group reads
    std::vector<const ir::Value*> candidates;
    for (size_t m : runs[g].members)
      for (const ir::Value* v : block.ops[m]->operands) {
        auto def = defined_by.find(v);
        if (def == defined_by.end()) {
          reads_full.insert(v);
        } else if (group_of[def->second] != static_cast<int>(g) &&
                   !read_through_view(def->second)) {
          if (group_of[def->second] >= 0 && role[def->second] == Role::Map)
            candidates.push_back(v);
          else
            reads_full.insert(v);
        }
      }
    for (const ir::Value* v : candidates) {
      const size_t d = defined_by.at(v);
      if (recomputed[g].count(d)) continue;
      if (tile[d]->precise) {  // exp, tanh, ...: cost more to compute again than to read
        reads_full.insert(v);
        continue;
      }
      const int g1 = group_of[d];
      std::vector<size_t> cone, stack{d};
      std::unordered_set<size_t> seen{d};
      std::unordered_set<const ir::Value*> leaves;
      bool ok = true;
      while (ok && !stack.empty()) {
        const size_t e = stack.back();
        stack.pop_back();
        cone.push_back(e);
        for (const ir::Value* w : block.ops[e]->operands) {
          auto wd = defined_by.find(w);
          if (wd != defined_by.end() &&
              (group_of[wd->second] == static_cast<int>(g) || read_through_view(wd->second)))
            continue;  // read anyway, or a view: no full-size tensor
          if (wd == defined_by.end() || group_of[wd->second] != g1 ||
              (role[wd->second] == Role::Map && tile[wd->second]->precise)) {
            leaves.insert(w);
          } else if (role[wd->second] != Role::Map) {
            ok = false;
          } else if (seen.insert(wd->second).second) {
            stack.push_back(wd->second);
          }
        }
        ok = ok && cone.size() <= kMaxRecomputed;
      }
      const size_t added = std::count_if(leaves.begin(), leaves.end(),
                                         [&](const ir::Value* w) { return !reads_full.count(w); });
      if (!ok || added > 1) {
        reads_full.insert(v);
        continue;
      }
      reads_full.insert(leaves.begin(), leaves.end());
      recomputation_leaves.insert(leaves.begin(), leaves.end());
      for (size_t e : cone) {
        recomputed[g].insert(e);
        for (const ir::Value* w : block.ops[e]->operands) {
          auto wd = defined_by.find(w);
          if (wd != defined_by.end() && role[wd->second] == Role::Expand &&
              group_of[wd->second] != static_cast<int>(g))
            expand_sources.insert(block.ops[wd->second]->operands[0]);
        }
      }
    }
  }

  // A broadcast back along the rows computed in one group (an expand node) and read by later
  // groups: they read its per-row source through a view, which the first group writes out
  // instead of the broadcast (softmax's row sums, read again by its gradient: 32 KiB instead of
  // 4 MiB). Ops outside every group still read the broadcast itself.
  for (size_t i = 0; i < num_ops; ++i) {
    if (group_of[i] < 0 || role[i] != Role::Expand) continue;
    const auto& us = users[block.ops[i]->result(0)];
    if (std::any_of(us.begin(), us.end(), [&](size_t u) {
          return u != kAfter && group_of[u] >= 0 && group_of[u] != group_of[i];
        }))
      expand_sources.insert(block.ops[i]->operands[0]);
  }

  for (size_t g = 0; g < runs.size(); ++g) {
    const Run& run = runs[g];
    const std::vector<size_t>& members = run.members;
    auto program = std::make_shared<FusedProgram>();
    program->shape = run.shape;
    program->row_length = run.row_length;
    const int64_t size = num_elements(run.shape);
    FusedStep step;
    // Value number of an input (>= 0) or of node k (-(k + 1)) until the inputs are known.
    std::unordered_map<const ir::Value*, int> number;
    std::function<void(size_t, bool)> emit;
    // The value number of operand `v` of op `m`, emitting the ops that recompute it first.
    auto arg_of = [&](const ir::Value* v, size_t m) {
      auto it = number.find(v);
      if (it != number.end()) return it->second;
      auto def = defined_by.find(v);
      if (def != defined_by.end() && recomputed[g].count(def->second)) {
        emit(def->second, true);
        return number.at(v);
      }
      FusedProgram::Input input;
      input.dtype = v->type.dtype;
      input.shape = v->type.shape;
      const ir::Value* source = v;
      if (def != defined_by.end() && read_through_view(def->second)) {
        input.full = false;
        input.view = *view[def->second];
        source = block.ops[def->second]->operands[0];
      } else if (v->type.rank() == 0 && role[m] == Role::Reduce) {
        input.full = false;  // the init value, read as a per-row broadcast
      }
      // Row-level values have the group's size; the rest are per row.
      input.per_row = v->type.num_elements() != size;
      number.emplace(v, static_cast<int>(program->inputs.size()));
      program->inputs.push_back(input);
      step.inputs.push_back(source);
      return static_cast<int>(program->inputs.size()) - 1;
    };
    emit = [&](size_t m, bool recompute) {
      const ir::Operation& op = *block.ops[m];
      step.ops.push_back(&op);
      FusedProgram::Node node;
      node.dtype = op.result(0)->type.dtype;
      node.shape = op.result(0)->type.shape;
      node.per_row = per_row[m];
      switch (role[m]) {
        case Role::Map:
        case Role::MapPerRow:
          node.fn = tile[m]->fn;
          program->precise = program->precise || tile[m]->precise;
          break;
        case Role::Reduce:
          node.kind = FusedProgram::Kind::Reduce;
          node.reduce = reduce[m]->fn;
          break;
        case Role::Expand:
          node.kind = FusedProgram::Kind::Expand;
          break;
        case Role::Copy:
          node.kind = FusedProgram::Kind::Copy;
          break;
      }
      for (const ir::Value* v : op.operands) node.args.push_back(arg_of(v, m));
      const ir::Value* result = op.result(0);
      const auto& us = users[result];
      // Other groups read an expand node through its source, and some recompute a value.
      const bool expand = role[m] == Role::Expand;
      const bool used_after = !recompute && (expand_sources.count(result) > 0 ||
                                             recomputation_leaves.count(result) > 0 ||
                                             std::any_of(us.begin(), us.end(), [&](size_t u) {
                                               if (u == kAfter || group_of[u] < 0) return true;
                                               return group_of[u] != static_cast<int>(g) &&
                                                      !expand && !recomputed[group_of[u]].count(m);
                                             }));
      if (used_after) {
        node.output = static_cast<int>(step.outputs.size());
        step.outputs.push_back(result);
        program->output_nodes.push_back(static_cast<int>(program->nodes.size()));
      }
      number[result] = -static_cast<int>(program->nodes.size()) - 1;
      program->nodes.push_back(std::move(node));
    };
    for (size_t m : members) emit(m, false);
    const int num_inputs = static_cast<int>(program->inputs.size());
    program->last_reader.assign(num_inputs, -1);
    for (size_t k = 0; k < program->nodes.size(); ++k)
      for (int& a : program->nodes[k].args) {
        if (a < 0) a = num_inputs - a - 1;
        if (a < num_inputs) program->last_reader[a] = static_cast<int>(k);
      }
    assign_slots(*program);
    step.where = block.ops[members[0]]->where() + " (fused with " +
                 std::to_string(members.size() - 1) + " following ops" +
                 (recomputed[g].empty()
                      ? ""
                      : ", recomputing " + std::to_string(recomputed[g].size()) + " more") +
                 (run.row_length > 1 ? ", rows of " + std::to_string(run.row_length) : "") + ")";
    step.kernel = fused_kernel(program, step.where);
    for (size_t k = 0; k + 1 < members.size(); ++k) plan.absorbed[members[k]] = true;
    plan.step_at[members.back()] = static_cast<int>(plan.steps.size());
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

}  // namespace cujax::cpu
