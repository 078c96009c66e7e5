#include "backends/cpu/fusion.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "backends/cpu/elementwise_ops.h"
#include "backends/cpu/parallel.h"

namespace cujax::cpu {

namespace {

// Elements per tile: a few tiles of f32 fit in L1 together.
constexpr int64_t kTile = 1024;
// Elements per parallel task, as the per-op kernels use.
constexpr int64_t kGrain = int64_t{1} << 15;
constexpr int64_t kGrainPrecise = int64_t{1} << 11;

// The tile loops are also built for AVX2 and picked at load time: wider vectors for the
// polynomial exp and tanh and for the arithmetic. fusion.cpp is compiled with
// -ffp-contract=off, so both builds round every operation alike and give identical bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CUJAX_TILE_LOOP __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CUJAX_TILE_LOOP
#endif

// out[0, n) = f(in[0][0, n), in[1][0, n), ...).
using TileFn = void (*)(const void* const* in, void* out, int64_t n);

struct TileOp {
  TileFn fn = nullptr;
  size_t arity = 0;
  bool precise = false;
};

// No __restrict: a group's output may be written into the memory of an input it reads (a
// donated or dead operand's), element for element.
template <class F, class T>
CUJAX_TILE_LOOP void unary_tile(const void* const* in, void* out, int64_t n) {
  const T* a = static_cast<const T*>(in[0]);
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ew::apply(F{}, a[i]);
}

template <class F, class T>
CUJAX_TILE_LOOP void binary_tile(const void* const* in, void* out, int64_t n) {
  const T* a = static_cast<const T*>(in[0]);
  const T* b = static_cast<const T*>(in[1]);
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ew::apply(F{}, a[i], b[i]);
}

template <ew::CompareDirection D>
CUJAX_TILE_LOOP void compare_tile(const void* const* in, void* out, int64_t n) {
  const float* a = static_cast<const float*>(in[0]);
  const float* b = static_cast<const float*>(in[1]);
  bool* o = static_cast<bool*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ew::Compare<D>{}(a[i], b[i]);
}

template <class To, class From>
CUJAX_TILE_LOOP void convert_tile(const void* const* in, void* out, int64_t n) {
  const From* a = static_cast<const From*>(in[0]);
  To* o = static_cast<To*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ew::convert<To>(a[i]);
}

template <class T>
CUJAX_TILE_LOOP void select_tile(const void* const* in, void* out, int64_t n) {
  const bool* p = static_cast<const bool*>(in[0]);
  const T* t = static_cast<const T*>(in[1]);
  const T* f = static_cast<const T*>(in[2]);
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = p[i] ? t[i] : f[i];
}

// The tile functions of the same-type unary and binary ops, by element type.
struct TileTable {
  std::unordered_map<std::string, TileOp> f32, pred;
};

template <class F, size_t kArity>
void add_tile_op(TileTable& t, const char* name) {
  auto fn_for = [](auto tag) -> TileFn {
    using T = typename decltype(tag)::type;
    if constexpr (kArity == 1)
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

// The compiled form of one group: values are numbered inputs first, then nodes.
struct FusedProgram {
  struct Input {
    DType dtype = DType::F32;
    bool full = true;    // a tensor of the group's shape; else a broadcast source
    BroadcastView view;  // when !full
  };
  struct Node {
    TileFn fn = nullptr;
    std::vector<int> args;  // value numbers
    DType dtype = DType::F32;
    int output = -1;  // index of the group output it writes, or -1 (scratch)
  };
  Shape shape;
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

// Computes elements [begin, end) of every node, kTile at a time.
void run_tiles(const FusedProgram& p, const std::vector<const void*>& in,
               const std::vector<void*>& out, int64_t begin, int64_t end) {
  const size_t num_inputs = p.inputs.size();
  thread_local std::vector<float> scratch;  // float-aligned; bool tiles use its bytes
  thread_local std::vector<const void*> values;
  scratch.resize((num_inputs + p.nodes.size()) * kTile);
  values.resize(num_inputs + p.nodes.size());
  auto tile_buffer = [&](size_t value) { return scratch.data() + value * kTile; };
  const void* args[3];
  for (int64_t t = begin; t < end; t += kTile) {
    const int64_t n = std::min(kTile, end - t);
    for (size_t i = 0; i < num_inputs; ++i) {
      const FusedProgram::Input& input = p.inputs[i];
      if (input.full) {
        values[i] = static_cast<const std::byte*>(in[i]) + t * element_size(input.dtype);
      } else if (input.dtype == DType::F32) {
        expand_view(static_cast<const float*>(in[i]), input.view, t, n, tile_buffer(i));
        values[i] = tile_buffer(i);
      } else {
        bool* dst = reinterpret_cast<bool*>(tile_buffer(i));
        expand_view(static_cast<const bool*>(in[i]), input.view, t, n, dst);
        values[i] = dst;
      }
    }
    for (size_t k = 0; k < p.nodes.size(); ++k) {
      const FusedProgram::Node& node = p.nodes[k];
      for (size_t a = 0; a < node.args.size(); ++a) args[a] = values[node.args[a]];
      void* dst = node.output >= 0
                      ? static_cast<std::byte*>(out[node.output]) + t * element_size(node.dtype)
                      : static_cast<void*>(tile_buffer(num_inputs + k));
      node.fn(args, dst, n);
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
      const bool ok = in[i].dtype() == input.dtype &&
                      (input.full ? in[i].shape() == p->shape : in[i].size() == input.view.period);
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
      if (taken[i] || !p->inputs[i].full || in[i].dtype() != p->nodes[node].dtype) return false;
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
      results.push_back(reuse >= 0 ? in[reuse]
                                   : HostTensor::uninitialized(p->nodes[node].dtype, p->shape));
      out_data.push_back(results.back().data());
    }
    const int64_t grain = p->precise ? kGrainPrecise : kGrain;
    auto body = [&](int64_t b, int64_t e) { run_tiles(*p, in_data, out_data, b, e); };
    if (n < 2 * grain) {
      if (n > 0) body(0, n);
    } else {
      parallel_for(n, grain, body);
    }
    return results;
  };
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
  for (size_t i = 0; i < num_ops; ++i) {
    const ir::Operation& op = *block.ops[i];
    for (const ir::Value* v : op.operands) users[v].push_back(i);
    if (!op.regions.empty())
      for (const ir::Value* v : captured_values(op)) users[v].push_back(i);
    for (const auto& r : op.results) defined_by[r.get()] = i;
    tile[i] = elementwise_tile_op(op);
    view[i] = broadcast_view(op);
  }
  for (size_t i = num_ops; i < block.ops.size(); ++i)
    for (const ir::Value* v : block.ops[i]->operands) users[v].push_back(kAfter);

  // Runs of element-wise ops of one shape, one open run per shape. An op that reads a member
  // of an open run closes that run first, since the run's values exist only once its fused
  // step (placed at its last member) has run; other ops in between keep their place.
  std::vector<int> group_of(num_ops, -1);
  std::vector<std::vector<size_t>> runs;
  struct OpenRun {
    Shape shape;
    std::vector<size_t> members;
  };
  std::vector<OpenRun> open;
  std::vector<int> open_run_of(num_ops, -1);  // index into `open` while the run is open
  auto close = [&](size_t r) {
    for (size_t m : open[r].members) open_run_of[m] = -1;
    if (open[r].members.size() >= 2) {
      for (size_t m : open[r].members) group_of[m] = static_cast<int>(runs.size());
      runs.push_back(open[r].members);
    }
    open[r].members.clear();
  };
  std::vector<const ir::Value*> reads;
  for (size_t i = 0; i < num_ops; ++i) {
    const ir::Operation& op = *block.ops[i];
    int own = -1;
    if (tile[i]) {
      const Shape& shape = op.result(0)->type.shape;
      for (size_t r = 0; r < open.size() && own < 0; ++r)
        if (open[r].shape == shape) own = static_cast<int>(r);
      if (own < 0) {
        own = static_cast<int>(open.size());
        open.push_back(OpenRun{shape, {}});
      }
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
    }
  }
  for (size_t r = 0; r < open.size(); ++r) close(r);
  // Fused steps are emitted at their last member, in program order.
  std::sort(runs.begin(), runs.end(),
            [](const auto& x, const auto& y) { return x.back() < y.back(); });
  for (size_t g = 0; g < runs.size(); ++g)
    for (size_t m : runs[g]) group_of[m] = static_cast<int>(g);

  // A view whose every user is a fused op is never materialized.
  for (size_t i = 0; i < num_ops; ++i) {
    if (!view[i]) continue;
    const auto& us = users[block.ops[i]->result(0)];
    plan.absorbed[i] = !us.empty() && std::all_of(us.begin(), us.end(), [&](size_t u) {
      return u != kAfter && group_of[u] >= 0;
    });
  }

  for (size_t g = 0; g < runs.size(); ++g) {
    const std::vector<size_t>& members = runs[g];
    auto program = std::make_shared<FusedProgram>();
    program->shape = block.ops[members[0]]->result(0)->type.shape;
    FusedStep step;
    // Value number of an input (>= 0) or of node k (-(k + 1)) until the inputs are known.
    std::unordered_map<const ir::Value*, int> number;
    for (size_t m : members) {
      const ir::Operation& op = *block.ops[m];
      step.ops.push_back(&op);
      FusedProgram::Node node;
      node.fn = tile[m]->fn;
      node.dtype = op.result(0)->type.dtype;
      program->precise = program->precise || tile[m]->precise;
      for (const ir::Value* v : op.operands) {
        auto it = number.find(v);
        if (it == number.end()) {
          FusedProgram::Input input;
          input.dtype = v->type.dtype;
          const ir::Value* source = v;
          auto def = defined_by.find(v);
          if (def != defined_by.end() && view[def->second]) {
            input.full = false;
            input.view = *view[def->second];
            source = block.ops[def->second]->operands[0];
          }
          it = number.emplace(v, static_cast<int>(program->inputs.size())).first;
          program->inputs.push_back(input);
          step.inputs.push_back(source);
        }
        node.args.push_back(it->second);
      }
      const ir::Value* result = op.result(0);
      const auto& us = users[result];
      const bool used_after = std::any_of(us.begin(), us.end(), [&](size_t u) {
        return u == kAfter || group_of[u] != static_cast<int>(g);
      });
      if (used_after) {
        node.output = static_cast<int>(step.outputs.size());
        step.outputs.push_back(result);
        program->output_nodes.push_back(static_cast<int>(program->nodes.size()));
      }
      number[result] = -static_cast<int>(program->nodes.size()) - 1;
      program->nodes.push_back(std::move(node));
    }
    const int num_inputs = static_cast<int>(program->inputs.size());
    program->last_reader.assign(num_inputs, -1);
    for (size_t k = 0; k < program->nodes.size(); ++k)
      for (int& a : program->nodes[k].args) {
        if (a < 0) a = num_inputs - a - 1;
        if (a < num_inputs) program->last_reader[a] = static_cast<int>(k);
      }
    step.where = block.ops[members[0]]->where() + " (fused with " +
                 std::to_string(members.size() - 1) + " following element-wise ops)";
    step.kernel = fused_kernel(program, step.where);
    for (size_t k = 0; k + 1 < members.size(); ++k) plan.absorbed[members[k]] = true;
    plan.step_at[members.back()] = static_cast<int>(plan.steps.size());
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

}  // namespace cujax::cpu
