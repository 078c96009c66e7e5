// gather and scatter with the spec's full dimension numbers (batching dimensions included).
//
// Both walk the "positions" of the index tensor (every index vector: all its dimensions but
// index_vector_dim) and move one window per position: gather copies a clamped window of the
// operand into the result, scatter combines a window of the updates into the results,
// skipping the update elements whose result index falls outside the results (the spec's
// per-element rule). The combiner is run directly when the region is a single binary op or
// an assignment, and as a compiled program per element otherwise.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/common/index.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/strided_copy.h"

namespace cujax::cpu {

namespace {

constexpr int64_t kParallelElements = 64 * 1024;

// How the positions of an index tensor map to operand/input dimensions and to the
// result (gather) or updates (scatter) tensor.
struct IndexPlan {
  int nb = 0;                                // position (batch) dimensions
  int64_t bdims[index::kMaxRank] = {};       // their sizes
  int64_t idx_stride[index::kMaxRank] = {};  // their strides in the index tensor
  int64_t out_stride[index::kMaxRank] = {};  // their strides in the result / updates
  int64_t num_positions = 1;
  int vec_len = 1;                      // elements of one index vector
  int64_t vec_stride = 0;               // stride of index_vector_dim in the index tensor
  int start_dim[index::kMaxRank] = {};  // operand dim of each index vector element
  int nbatching = 0;
  int batching_dim[index::kMaxRank] = {};  // operand dim of each batching pair
  int batching_pos[index::kMaxRank] = {};  // position dim of each batching pair
};

std::vector<int64_t> field_ints(const ir::Attribute& dn, const char* name) {
  const ir::Attribute* f = dn.field(name);
  return f ? ir::as_ints(*f) : std::vector<int64_t>{};
}

int64_t field_int(const ir::Attribute& dn, const char* name, int64_t fallback) {
  const ir::Attribute* f = dn.field(name);
  if (!f) return fallback;
  const auto v = ir::as_ints(*f);
  return v.size() == 1 ? v[0] : fallback;
}

bool bool_attr(const ir::Operation& op, const char* name) {
  const ir::Attribute* a = op.attr(name);
  return a && ((a->kind == ir::Attribute::Kind::Bool && a->boolean) ||
               a->kind == ir::Attribute::Kind::Unit);
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void check_dims(const ir::Operation& op, const std::vector<int64_t>& dims, int64_t rank,
                const char* what) {
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || seen[d])
      unsupported(op, std::string("invalid ") + what + " entry " + std::to_string(d));
    seen[d] = true;
  }
}

// Shared part of gather and scatter: positions of `indices` (shape S, index_vector_dim ivd)
// laid out along `out_pos_dims` of the result/updates (shape `out`, strides row-major).
IndexPlan make_plan(const ir::Operation& op, const Shape& operand, const Shape& indices,
                    int64_t ivd, const std::vector<int64_t>& start_map,
                    const std::vector<int64_t>& batching_dims,
                    const std::vector<int64_t>& index_batching_dims, const Shape& out,
                    const std::vector<int64_t>& out_pos_dims) {
  const int64_t s_rank = static_cast<int64_t>(indices.size());
  const int64_t o_rank = static_cast<int64_t>(operand.size());
  if (o_rank > index::kMaxRank || s_rank > index::kMaxRank ||
      static_cast<int64_t>(out.size()) > index::kMaxRank)
    unsupported(op, "rank above " + std::to_string(index::kMaxRank) + " is not supported");
  if (ivd < 0 || ivd > s_rank) unsupported(op, "invalid index_vector_dim");
  IndexPlan p;
  const auto is = row_major_strides(indices);
  const auto os = row_major_strides(out);
  p.vec_len = ivd < s_rank ? static_cast<int>(indices[ivd]) : 1;
  p.vec_stride = ivd < s_rank ? is[ivd] : 0;
  if (static_cast<int64_t>(start_map.size()) != p.vec_len)
    unsupported(op, "the index map needs one entry per index vector element");
  for (int64_t d = 0; d < s_rank; ++d) {
    if (d == ivd) continue;
    p.bdims[p.nb] = indices[d];
    p.idx_stride[p.nb] = is[d];
    ++p.nb;
  }
  if (static_cast<int64_t>(out_pos_dims.size()) != p.nb)
    unsupported(op, "the result has " + std::to_string(out_pos_dims.size()) +
                        " batch dimensions, the indices " + std::to_string(p.nb));
  for (int j = 0; j < p.nb; ++j) {
    if (out[out_pos_dims[j]] != p.bdims[j])
      unsupported(op, "batch dimension sizes of the indices and the result differ");
    p.out_stride[j] = os[out_pos_dims[j]];
    p.num_positions *= p.bdims[j];
  }
  check_dims(op, start_map, o_rank, "index map");
  for (int k = 0; k < p.vec_len; ++k) p.start_dim[k] = static_cast<int>(start_map[k]);
  if (batching_dims.size() != index_batching_dims.size())
    unsupported(op, "operand and index batching dimensions differ in number");
  check_dims(op, batching_dims, o_rank, "batching dimension");
  check_dims(op, index_batching_dims, s_rank, "index batching dimension");
  for (size_t i = 0; i < batching_dims.size(); ++i) {
    const int64_t sd = index_batching_dims[i];
    if (sd == ivd) unsupported(op, "index_vector_dim cannot be a batching dimension");
    if (contains(start_map, batching_dims[i]))
      unsupported(op, "a batching dimension cannot be in the index map");
    if (operand[batching_dims[i]] != indices[sd])
      unsupported(op, "batching dimension sizes differ");
    p.batching_dim[p.nbatching] = static_cast<int>(batching_dims[i]);
    p.batching_pos[p.nbatching] = static_cast<int>(sd < ivd ? sd : sd - 1);
    ++p.nbatching;
  }
  return p;
}

std::vector<int64_t> read_indices(const HostTensor& t, const std::string& where) {
  std::vector<int64_t> out(static_cast<size_t>(t.size()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      const T* p = t.data_as<T>();
      for (int64_t i = 0; i < t.size(); ++i) out[i] = index::to_index(p[i]);
    } else {
      throw RuntimeError(where + ": indices of type " + t.type_string() + " are not integers");
    }
  });
  return out;
}

void check_input(const HostTensor& t, const ir::Type& type, const std::string& where,
                 const char* what) {
  if (t.shape() != type.shape || t.dtype() != type.dtype)
    throw RuntimeError(where + ": " + what + " is " + t.type_string() + ", expected " + type.str());
}

// ---------------------------------------------------------------------------------------------
// gather

struct GatherPlan {
  IndexPlan ip;
  Shape operand;
  int64_t operand_strides[index::kMaxRank] = {};
  int64_t slice_sizes[index::kMaxRank] = {};
  index::StridedCopy window;  // operand -> result, offsets set per position
};

Kernel gather_kernel(const ir::Operation& op, Compiler&) {
  const ir::Attribute* dn = op.attr("dimension_numbers");
  if (!dn) unsupported(op, "needs dimension_numbers");
  if (op.operands.size() != 2 || op.results.size() != 1)
    unsupported(op, "takes an operand and start indices");
  const ir::Type operand = op.operands[0]->type;
  const ir::Type indices = op.operands[1]->type;
  const ir::Type out = op.result(0)->type;
  const auto offset_dims = field_ints(*dn, "offset_dims");
  const auto collapsed = field_ints(*dn, "collapsed_slice_dims");
  const auto obatch = field_ints(*dn, "operand_batching_dims");
  const auto sbatch = field_ints(*dn, "start_indices_batching_dims");
  const auto start_map = field_ints(*dn, "start_index_map");
  const int64_t ivd = field_int(*dn, "index_vector_dim", 0);
  const auto slice_sizes = op.ints("slice_sizes");
  const int64_t o_rank = operand.rank();
  if (!is_integer(indices.dtype)) unsupported(op, "start indices must be integers");
  if (out.dtype != operand.dtype) unsupported(op, "result and operand types differ");
  if (static_cast<int64_t>(slice_sizes.size()) != o_rank)
    unsupported(op, "slice_sizes needs one entry per operand dimension");
  if (static_cast<int64_t>(offset_dims.size() + collapsed.size() + obatch.size()) != o_rank)
    unsupported(op, "offset, collapsed and batching dimensions must cover the operand");
  check_dims(op, offset_dims, out.rank(), "offset_dims");
  std::vector<int64_t> removed = collapsed;
  removed.insert(removed.end(), obatch.begin(), obatch.end());
  check_dims(op, removed, o_rank, "collapsed/batching dimension");
  std::vector<int64_t> batch_dims;
  for (int64_t d = 0; d < out.rank(); ++d)
    if (!contains(offset_dims, d)) batch_dims.push_back(d);

  GatherPlan g;
  g.ip = make_plan(op, operand.shape, indices.shape, ivd, start_map, obatch, sbatch, out.shape,
                   batch_dims);
  g.operand = operand.shape;
  const auto ostr = row_major_strides(operand.shape);
  const auto rstr = row_major_strides(out.shape);
  for (int64_t d = 0; d < o_rank; ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > operand.shape[d])
      unsupported(op, "slice size out of range in dimension " + std::to_string(d));
    if (contains(removed, d) && slice_sizes[d] > 1)
      unsupported(op, "collapsed and batching dimensions need slice size <= 1");
    g.operand_strides[d] = ostr[d];
    g.slice_sizes[d] = slice_sizes[d];
  }
  size_t i = 0;
  for (int64_t d = 0; d < o_rank; ++d) {
    if (contains(removed, d)) {
      // a collapsed slice of size 0 still names one operand element per result element
      g.slice_sizes[d] = 1;
      continue;
    }
    const int64_t rd = offset_dims[i++];
    if (out.shape[rd] != slice_sizes[d])
      unsupported(op, "result dimension " + std::to_string(rd) + " does not match slice size");
    g.window.push(slice_sizes[d], ostr[d], rstr[rd]);
  }
  g.window.simplify();
  const std::string where = op.where();
  const auto plan = std::make_shared<const GatherPlan>(g);
  return [plan, operand, indices, out, where](std::span<const HostTensor> in, ExecContext&) {
    check_input(in[0], operand, where, "operand");
    check_input(in[1], indices, where, "start indices");
    HostTensor r(out.dtype, out.shape);
    const GatherPlan& g = *plan;
    const IndexPlan& p = g.ip;
    const int64_t win = g.window.num_elements();
    // an empty operand leaves nothing to read (only possible with size-0 slices)
    if (r.size() == 0 || win == 0 || in[0].size() == 0) return std::vector<HostTensor>{r};
    const std::vector<int64_t> idx = read_indices(in[1], where);
    const size_t w = size_of(out.dtype);
    const void* src = in[0].data();
    void* dst = r.data();
    auto run = [&](int64_t pb, int64_t pe, bool inner_parallel) {
      int64_t bi[index::kMaxRank];
      index::unravel(pb, p.bdims, p.nb, bi);
      index::StridedCopy c = g.window;
      for (int64_t pos = pb; pos < pe; ++pos) {
        const int64_t ioff = index::ravel(bi, p.idx_stride, p.nb);
        int64_t so = 0;
        for (int k = 0; k < p.vec_len; ++k) {
          const int d = p.start_dim[k];
          so += index::clamp_start(idx[ioff + k * p.vec_stride], g.operand[d], g.slice_sizes[d]) *
                g.operand_strides[d];
        }
        for (int b = 0; b < p.nbatching; ++b)
          so += bi[p.batching_pos[b]] * g.operand_strides[p.batching_dim[b]];
        c.src_offset = so;
        c.dst_offset = index::ravel(bi, p.out_stride, p.nb);
        run_strided_copy(c, src, dst, w, inner_parallel);
        index::next_index(bi, p.bdims, p.nb);
      }
    };
    if (p.num_positions >= 2 * num_threads() && r.size() >= kParallelElements) {
      parallel_for(p.num_positions, std::max<int64_t>(1, 16384 / win),
                   [&](int64_t b, int64_t e) { run(b, e, false); });
    } else {
      run(0, p.num_positions, true);
    }
    return std::vector<HostTensor>{r};
  };
}

// ---------------------------------------------------------------------------------------------
// scatter combiners

template <class T>
constexpr bool is_half_v = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

enum class Combine { Keep, Assign, Add, Sub, Mul, Max, Min, And, Or, Xor, Program };

template <Combine K, class T>
struct Combiner {
  T operator()(T a, T b) const {
    if constexpr (K == Combine::Assign) {
      return b;
    } else if constexpr (std::is_same_v<T, bool>) {
      if constexpr (K == Combine::Add || K == Combine::Or || K == Combine::Max) return a || b;
      if constexpr (K == Combine::Mul || K == Combine::And || K == Combine::Min) return a && b;
      if constexpr (K == Combine::Xor) return a != b;
      return b;
    } else if constexpr (std::is_integral_v<T>) {
      // two's-complement wraparound, computed in uint64_t (no promotion to int)
      using U = std::make_unsigned_t<T>;
      if constexpr (K == Combine::Add)
        return static_cast<T>(static_cast<U>(uint64_t{static_cast<U>(a)} + static_cast<U>(b)));
      if constexpr (K == Combine::Sub)
        return static_cast<T>(static_cast<U>(uint64_t{static_cast<U>(a)} - static_cast<U>(b)));
      if constexpr (K == Combine::Mul)
        return static_cast<T>(static_cast<U>(uint64_t{static_cast<U>(a)} * static_cast<U>(b)));
      if constexpr (K == Combine::Max) return a > b ? a : b;
      if constexpr (K == Combine::Min) return a < b ? a : b;
      if constexpr (K == Combine::And) return static_cast<T>(a & b);
      if constexpr (K == Combine::Or) return static_cast<T>(a | b);
      if constexpr (K == Combine::Xor) return static_cast<T>(a ^ b);
      return b;
    } else {
      using C = compute_t<T>;
      const C x = static_cast<C>(a), y = static_cast<C>(b);
      if constexpr (K == Combine::Add) return T(x + y);
      if constexpr (K == Combine::Sub) return T(x - y);
      if constexpr (K == Combine::Mul) return T(x * y);
      if constexpr (K == Combine::Max || K == Combine::Min) {
        // NaN propagates; -0 < +0 (IEEE 754 maximum / minimum)
        if (std::isnan(x)) return a;
        if (std::isnan(y)) return b;
        if (x == y) return (std::signbit(x) == (K == Combine::Max)) ? b : a;
        if constexpr (K == Combine::Max) return x > y ? a : b;
        return x < y ? a : b;
      }
      return b;
    }
  }
};

std::optional<Combine> combine_from_op_name(const std::string& name) {
  if (name == "stablehlo.add") return Combine::Add;
  if (name == "stablehlo.subtract") return Combine::Sub;
  if (name == "stablehlo.multiply") return Combine::Mul;
  if (name == "stablehlo.maximum") return Combine::Max;
  if (name == "stablehlo.minimum") return Combine::Min;
  if (name == "stablehlo.and") return Combine::And;
  if (name == "stablehlo.or") return Combine::Or;
  if (name == "stablehlo.xor") return Combine::Xor;
  return std::nullopt;
}

bool combine_allowed(Combine k, DType t) {
  switch (k) {
    case Combine::Sub:
      return t != DType::Bool;
    case Combine::And:
    case Combine::Or:
    case Combine::Xor:
      return !is_float(t);
    default:
      return true;
  }
}

// ---------------------------------------------------------------------------------------------
// scatter

struct ScatterPlan {
  IndexPlan ip;
  int rank = 0;
  int64_t input[index::kMaxRank] = {};  // input shape
  int64_t input_strides[index::kMaxRank] = {};
  int64_t win_size[index::kMaxRank] = {};        // window extent per input dim (1 if none)
  int64_t win_upd_stride[index::kMaxRank] = {};  // update stride of each input dim's window
  bool is_window[index::kMaxRank] = {};
};

// Calls body(box) for every position in [pb, pe) whose window is not entirely out of bounds;
// box maps update elements (src) to result elements (dst), clipped to the in-bounds part.
template <class Body>
void for_each_window(const ScatterPlan& s, const std::vector<int64_t>& idx, int64_t pb, int64_t pe,
                     Body&& body) {
  const IndexPlan& p = s.ip;
  int64_t bi[index::kMaxRank];
  index::unravel(pb, p.bdims, p.nb, bi);
  for (int64_t pos = pb; pos < pe; ++pos, index::next_index(bi, p.bdims, p.nb)) {
    int64_t full[index::kMaxRank] = {};
    const int64_t ioff = index::ravel(bi, p.idx_stride, p.nb);
    for (int k = 0; k < p.vec_len; ++k) full[p.start_dim[k]] = idx[ioff + k * p.vec_stride];
    for (int b = 0; b < p.nbatching; ++b) full[p.batching_dim[b]] = bi[p.batching_pos[b]];
    index::StridedCopy box;
    box.src_offset = index::ravel(bi, p.out_stride, p.nb);
    bool empty = false;
    for (int d = 0; d < s.rank && !empty; ++d) {
      const int64_t n = s.input[d], wsz = s.win_size[d];
      // clamped so the arithmetic below cannot overflow; the bounds test is unchanged
      const int64_t st = index::clamp(full[d], -wsz - 1, n + 1);
      const int64_t lo = std::max<int64_t>(0, -st);
      const int64_t hi = std::min<int64_t>(wsz, n - st);
      if (hi <= lo) {
        empty = true;
        break;
      }
      box.dst_offset += (st + lo) * s.input_strides[d];
      if (s.is_window[d]) {
        box.src_offset += lo * s.win_upd_stride[d];
        box.push(hi - lo, s.win_upd_stride[d], s.input_strides[d]);
      }
    }
    if (empty) continue;
    box.simplify();
    body(box);
  }
}

// dst[box] = f(dst[box], src[box]) for rows [rb, re) of the box.
template <class T, class F>
void apply_rows(const index::StridedCopy& c, const T* src, T* dst, int64_t rb, int64_t re, F f) {
  if (c.rank == 0) {
    dst[c.dst_offset] = f(dst[c.dst_offset], src[c.src_offset]);
    return;
  }
  const int outer = c.rank - 1;
  const int64_t n = c.dims[outer];
  const int64_t ss = c.src_strides[outer], ds = c.dst_strides[outer];
  int64_t idx[index::kMaxRank];
  index::unravel(rb, c.dims, outer, idx);
  for (int64_t r = rb; r < re; ++r) {
    const T* s = src + c.src_offset + index::ravel(idx, c.src_strides, outer);
    T* d = dst + c.dst_offset + index::ravel(idx, c.dst_strides, outer);
    if (ss == 1 && ds == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = f(d[i], s[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * ds] = f(d[i * ds], s[i * ss]);
    }
    index::next_index(idx, c.dims, outer);
  }
}

template <class T, class F>
void scatter_one(const ScatterPlan& s, const std::vector<int64_t>& idx, const T* upd, T* res,
                 bool unique, F f) {
  const int64_t n = s.ip.num_positions;
  int64_t win = 1;
  for (int d = 0; d < s.rank; ++d) win *= s.win_size[d];
  const int64_t total = n * win;
  auto whole_box = [&](const index::StridedCopy& box) {
    const int64_t rows = box.rank == 0 ? 1 : box.num_elements() / box.dims[box.rank - 1];
    apply_rows(box, upd, res, 0, rows, f);
  };
  if (total >= kParallelElements && unique && n >= 2 * num_threads()) {
    // distinct result elements per position: positions run in parallel
    parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(win, 1)),
                 [&](int64_t b, int64_t e) { for_each_window(s, idx, b, e, whole_box); });
  } else if (win >= kParallelElements) {
    // positions in order, each window split across threads
    for_each_window(s, idx, 0, n, [&](const index::StridedCopy& box) {
      if (box.rank == 0) return whole_box(box);
      const int64_t len = box.dims[box.rank - 1];
      const int64_t rows = box.num_elements() / len;
      parallel_for(rows, std::max<int64_t>(1, 16384 / len),
                   [&](int64_t b, int64_t e) { apply_rows(box, upd, res, b, e, f); });
    });
  } else {
    for_each_window(s, idx, 0, n, whole_box);
  }
}

template <class T>
void scatter_typed(Combine k, const ScatterPlan& s, const std::vector<int64_t>& idx, const T* upd,
                   T* res, bool unique) {
  switch (k) {
    case Combine::Assign:
      return scatter_one(s, idx, upd, res, unique, Combiner<Combine::Assign, T>{});
    case Combine::Add:
      return scatter_one(s, idx, upd, res, unique, Combiner<Combine::Add, T>{});
    case Combine::Sub:
      return scatter_one(s, idx, upd, res, unique, Combiner<Combine::Sub, T>{});
    case Combine::Mul:
      return scatter_one(s, idx, upd, res, unique, Combiner<Combine::Mul, T>{});
    case Combine::Max:
      return scatter_one(s, idx, upd, res, unique, Combiner<Combine::Max, T>{});
    case Combine::Min:
      return scatter_one(s, idx, upd, res, unique, Combiner<Combine::Min, T>{});
    case Combine::And:
      return scatter_one(s, idx, upd, res, unique, Combiner<Combine::And, T>{});
    case Combine::Or:
      return scatter_one(s, idx, upd, res, unique, Combiner<Combine::Or, T>{});
    case Combine::Xor:
      return scatter_one(s, idx, upd, res, unique, Combiner<Combine::Xor, T>{});
    default:
      return;
  }
}

Kernel scatter_kernel(const ir::Operation& op, Compiler& cc) {
  const ir::Attribute* dn = op.attr("scatter_dimension_numbers");
  if (!dn) unsupported(op, "needs scatter_dimension_numbers");
  if (op.operands.size() < 3 || op.operands.size() % 2 == 0)
    unsupported(op, "takes N inputs, the scatter indices and N updates");
  const size_t n_in = (op.operands.size() - 1) / 2;
  if (op.results.size() != n_in) unsupported(op, "needs one result per input");
  if (op.regions.size() != 1 || op.regions[0]->blocks.size() != 1)
    unsupported(op, "needs an update computation region");
  std::vector<ir::Type> in_types, upd_types;
  for (size_t i = 0; i < n_in; ++i) {
    in_types.push_back(op.operands[i]->type);
    upd_types.push_back(op.operands[n_in + 1 + i]->type);
    if (in_types[i].shape != in_types[0].shape || upd_types[i].shape != upd_types[0].shape)
      unsupported(op, "inputs (and updates) must all have the same shape");
    if (upd_types[i].dtype != in_types[i].dtype || op.result(i)->type != in_types[i])
      unsupported(op, "input, update and result types must match");
  }
  const ir::Type indices = op.operands[n_in]->type;
  if (!is_integer(indices.dtype)) unsupported(op, "scatter indices must be integers");
  const Shape& I = in_types[0].shape;
  const Shape& U = upd_types[0].shape;
  const int64_t rank = static_cast<int64_t>(I.size());
  const auto uwd = field_ints(*dn, "update_window_dims");
  const auto inserted = field_ints(*dn, "inserted_window_dims");
  const auto ibatch = field_ints(*dn, "input_batching_dims");
  const auto sbatch = field_ints(*dn, "scatter_indices_batching_dims");
  const auto sdod = field_ints(*dn, "scatter_dims_to_operand_dims");
  const int64_t ivd = field_int(*dn, "index_vector_dim", 0);
  if (static_cast<int64_t>(uwd.size() + inserted.size() + ibatch.size()) != rank)
    unsupported(op, "window, inserted and batching dimensions must cover the input");
  check_dims(op, uwd, static_cast<int64_t>(U.size()), "update_window_dims");
  std::vector<int64_t> removed = inserted;
  removed.insert(removed.end(), ibatch.begin(), ibatch.end());
  check_dims(op, removed, rank, "inserted/batching dimension");
  std::vector<int64_t> scatter_dims;
  for (int64_t d = 0; d < static_cast<int64_t>(U.size()); ++d)
    if (!contains(uwd, d)) scatter_dims.push_back(d);

  ScatterPlan s;
  s.ip = make_plan(op, I, indices.shape, ivd, sdod, ibatch, sbatch, U, scatter_dims);
  s.rank = static_cast<int>(rank);
  const auto istr = row_major_strides(I);
  const auto ustr = row_major_strides(U);
  size_t w = 0;
  for (int64_t d = 0; d < rank; ++d) {
    s.input[d] = I[d];
    s.input_strides[d] = istr[d];
    s.win_size[d] = 1;
    if (contains(removed, d)) continue;
    const int64_t ud = uwd[w++];
    if (U[ud] > I[d])
      unsupported(op,
                  "update window dimension " + std::to_string(ud) + " is larger than the input");
    s.is_window[d] = true;
    s.win_size[d] = U[ud];
    s.win_upd_stride[d] = ustr[ud];
  }

  // The update computation.
  const ir::Region& region = *op.regions[0];
  const ir::Block& block = region.front();
  if (block.arguments.size() != 2 * n_in)
    unsupported(op, "update computation needs " + std::to_string(2 * n_in) + " arguments");
  for (size_t i = 0; i < 2 * n_in; ++i) {
    const ir::Type& t = block.arguments[i]->type;
    if (t.rank() != 0 || t.dtype != in_types[i % n_in].dtype)
      unsupported(op, "update computation arguments must be scalars of the input types");
  }
  std::vector<Combine> kinds(n_in, Combine::Program);
  const ir::Operation* term = block.terminator();
  if (term && block.ops.size() == 1 && term->operands.size() == n_in) {
    // returns block arguments only: each result keeps its value or takes the update
    for (size_t i = 0; i < n_in; ++i) {
      const ir::Value* v = term->operands[i];
      if (v == block.arguments[i].get())
        kinds[i] = Combine::Keep;
      else if (v == block.arguments[n_in + i].get())
        kinds[i] = Combine::Assign;
    }
  } else if (n_in == 1) {
    if (auto name = simple_binary_region(region)) {
      const ir::Operation& body_op = *block.ops[0];
      if (auto k = combine_from_op_name(*name); k && combine_allowed(*k, in_types[0].dtype) &&
                                                body_op.result(0)->type == block.arguments[0]->type)
        kinds[0] = *k;
    }
  }
  // Complex values have no typed combine: the region runs as a program on their bytes.
  const bool use_program =
      std::any_of(kinds.begin(), kinds.end(), [](Combine k) { return k == Combine::Program; }) ||
      std::any_of(in_types.begin(), in_types.end(),
                  [](const ir::Type& t) { return is_complex(t.dtype); });
  std::shared_ptr<const Program> program;
  if (use_program) program = cc.compile_region(region, captured_values(op));
  const bool unique = bool_attr(op, "unique_indices");
  const std::string where = op.where();
  const auto plan = std::make_shared<const ScatterPlan>(s);
  return [plan, kinds, program, n_in, in_types, upd_types, indices, unique, where](
             std::span<const HostTensor> in, ExecContext& ctx) {
    const ScatterPlan& s = *plan;
    for (size_t i = 0; i < n_in; ++i) {
      check_input(in[i], in_types[i], where, "input");
      check_input(in[n_in + 1 + i], upd_types[i], where, "update");
    }
    check_input(in[n_in], indices, where, "scatter indices");
    // In place when nothing else sees the input (a donated cache, a dead value), as
    // dynamic_update_slice does: a serving step's scatter of B new rows into its KV cache then
    // writes those rows and copies nothing.
    std::vector<HostTensor> results(n_in);
    for (size_t i = 0; i < n_in; ++i)
      results[i] =
          ((!program && kinds[i] == Combine::Keep) || in[i].is_unique()) ? in[i] : in[i].clone();
    if (s.ip.num_positions == 0 || in[n_in + 1].size() == 0) return results;
    const std::vector<int64_t> idx = read_indices(in[n_in], where);
    if (!program) {
      for (size_t i = 0; i < n_in; ++i) {
        if (kinds[i] == Combine::Keep) continue;
        const HostTensor& upd = in[n_in + 1 + i];
        visit_dtype(in_types[i].dtype, [&](auto tag) {
          using T = typename decltype(tag)::type;
          scatter_typed<T>(kinds[i], s, idx, upd.data_as<T>(), results[i].data_as<T>(), unique);
        });
      }
      return results;
    }
    // General region: run the program on scalars for every in-bounds element, in order.
    const auto captures = in.subspan(2 * n_in + 1);
    std::vector<HostTensor> args;
    std::vector<size_t> widths;
    for (size_t i = 0; i < 2 * n_in; ++i) {
      args.emplace_back(in_types[i % n_in].dtype, Shape{});
      widths.push_back(size_of(in_types[i % n_in].dtype));
    }
    auto element = [&](int64_t src, int64_t dst) {
      for (size_t i = 0; i < n_in; ++i) {
        const size_t wd = widths[i];
        std::memcpy(args[i].data(), static_cast<const std::byte*>(results[i].data()) + dst * wd,
                    wd);
        std::memcpy(args[n_in + i].data(),
                    static_cast<const std::byte*>(in[n_in + 1 + i].data()) + src * wd, wd);
      }
      const std::vector<HostTensor> out = program->run(args, ctx, captures);
      if (out.size() != n_in)
        throw RuntimeError(where + ": update computation returned the wrong number of values");
      for (size_t i = 0; i < n_in; ++i) {
        if (out[i].size() != 1 || out[i].dtype() != in_types[i].dtype)
          throw RuntimeError(where + ": update computation returned " + out[i].type_string());
        std::memcpy(static_cast<std::byte*>(results[i].data()) + dst * widths[i], out[i].data(),
                    widths[i]);
      }
    };
    for_each_window(s, idx, 0, s.ip.num_positions, [&](const index::StridedCopy& box) {
      const int64_t n = box.num_elements();
      for (int64_t e = 0; e < n; ++e) {
        int64_t so, dof;
        box.offsets(e, &so, &dof);
        element(so, dof);
      }
    });
    return results;
  };
}

}  // namespace

void register_indexing_kernels(KernelRegistry& r) {
  r.add("stablehlo.gather", gather_kernel);
  r.add("stablehlo.scatter", scatter_kernel);
}

}  // namespace cujax::cpu
