// Batching rules of the element-wise and shape ops. Element-wise ops keep the operands' batch
// dimension where it is when they agree; shape ops map their dimension attributes past it.
#include <numeric>

#include "compiler/chlo_decompose.h"
#include "lax/util.h"
#include "trace/batching_rules.h"

namespace cujax::trace::batching {

using namespace cujax::lax;

namespace {

// Element-wise ops, select and clamp (whose predicate / bounds may be scalars): unbatched
// operands are broadcast, a batched scalar operand is broadcast to the result's shape.
std::vector<Batched> elementwise(const BatchArgs& a) {
  const Shape& rshape = a.op.result(0)->type.shape;
  Bdim common;
  bool agree = true;
  for (const Bdim& b : a.bdims)
    if (b) {
      agree = agree && (!common || *common == *b);
      common = common.value_or(*b);
    }
  // A bitcast between widths changes the trailing dimension: keep the batch in front.
  const int64_t at = agree && a.op.name != "stablehlo.bitcast_convert" ? *common : 0;
  std::vector<Array> ops;
  for (size_t i = 0; i < a.operands.size(); ++i) {
    const Array& x = a.operands[i];
    const bool scalar = a.op.operands[i]->type.shape.empty() && !rshape.empty();
    if (scalar && !a.bdims[i])
      ops.push_back(x);
    else if (scalar)
      ops.push_back(broadcast_in_dim(x, insert_dim(rshape, at, a.size), {at}));
    else
      ops.push_back(batch_at(x, a.bdims[i], a.size, at));
  }
  std::vector<Batched> out;
  for (const Array& r : rebind(a.op, ops, batched_types(a.op, a.size, at)))
    out.push_back(Batched{r, at});
  return out;
}

// The start indices of a dynamic slice or update, one per dimension, as a [size, n] array.
Array stacked_starts(const BatchArgs& a, size_t first, const std::vector<Array>& starts) {
  std::vector<Array> cols;
  const DType t = starts[0].dtype();
  for (size_t i = 0; i < starts.size(); ++i) {
    Array s = convert_element_type(starts[i], t);
    s = a.bdims[first + i] ? s : broadcast_in_dim(s, {a.size}, {});
    cols.push_back(reshape(s, {a.size, 1}));
  }
  return concatenate(cols, 1);
}

std::vector<int64_t> range(int64_t start, int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

bool any_batched(const std::vector<Bdim>& bdims, size_t from) {
  for (size_t i = from; i < bdims.size(); ++i)
    if (bdims[i]) return true;
  return false;
}

}  // namespace

void register_elementwise_rules(Rules& r) {
  for (const char* name : {"stablehlo.add",
                           "stablehlo.subtract",
                           "stablehlo.multiply",
                           "stablehlo.divide",
                           "stablehlo.remainder",
                           "stablehlo.power",
                           "stablehlo.maximum",
                           "stablehlo.minimum",
                           "stablehlo.atan2",
                           "stablehlo.and",
                           "stablehlo.or",
                           "stablehlo.xor",
                           "stablehlo.shift_left",
                           "stablehlo.shift_right_logical",
                           "stablehlo.shift_right_arithmetic",
                           "stablehlo.compare",
                           "stablehlo.negate",
                           "stablehlo.abs",
                           "stablehlo.sign",
                           "stablehlo.floor",
                           "stablehlo.ceil",
                           "stablehlo.round_nearest_afz",
                           "stablehlo.round_nearest_even",
                           "stablehlo.exponential",
                           "stablehlo.exponential_minus_one",
                           "stablehlo.log",
                           "stablehlo.log_plus_one",
                           "stablehlo.tanh",
                           "stablehlo.logistic",
                           "stablehlo.sine",
                           "stablehlo.cosine",
                           "stablehlo.tan",
                           "stablehlo.sqrt",
                           "stablehlo.rsqrt",
                           "stablehlo.cbrt",
                           "stablehlo.is_finite",
                           "stablehlo.not",
                           "stablehlo.popcnt",
                           "stablehlo.count_leading_zeros",
                           "stablehlo.select",
                           "stablehlo.clamp",
                           "stablehlo.convert",
                           "stablehlo.bitcast_convert",
                           "stablehlo.reduce_precision",
                           "stablehlo.real",
                           "stablehlo.imag",
                           "stablehlo.complex"})
    r[name] = elementwise;
  for (const char* name : compiler::kElementwiseChloOps) r[name] = elementwise;

  // fft transforms the trailing dimensions: a batch dimension in front is carried along.
  r["stablehlo.fft"] = [](const BatchArgs& a) {
    const Array x = batch_at(a.operands[0], a.bdims[0], a.size, 0);
    return at_front(rebind(a.op, {x}, batched_types(a.op, a.size, 0)));
  };

  // Each result keeps its operand's batch dimension.
  r["stablehlo.optimization_barrier"] = [](const BatchArgs& a) {
    std::vector<ir::Type> types;
    for (const Array& x : a.operands) types.push_back(ir_type(ShapeDtype{x.shape(), x.dtype()}));
    const std::vector<Array> rs = rebind(a.op, a.operands, types);
    std::vector<Batched> out;
    for (size_t i = 0; i < rs.size(); ++i) out.push_back(Batched{rs[i], a.bdims[i]});
    return out;
  };
}

void register_shape_rules(Rules& r) {
  r["stablehlo.broadcast_in_dim"] = [](const BatchArgs& a) {
    const int64_t b = *a.bdims[0];
    const auto bd = a.op.ints("broadcast_dimensions");
    std::vector<int64_t> dims;
    for (int64_t j = 0; j < a.operands[0].ndim(); ++j)
      dims.push_back(j == b ? 0 : bd[j < b ? j : j - 1] + 1);
    const Shape shape = insert_dim(a.op.result(0)->type.shape, 0, a.size);
    return at_front({broadcast_in_dim(a.operands[0], shape, dims)});
  };
  r["stablehlo.reshape"] = [](const BatchArgs& a) {
    const Array x = batch_at(a.operands[0], a.bdims[0], a.size);
    return at_front({reshape(x, insert_dim(a.op.result(0)->type.shape, 0, a.size))});
  };
  r["stablehlo.transpose"] = [](const BatchArgs& a) {
    const int64_t b = *a.bdims[0];
    std::vector<int64_t> perm{b};
    for (int64_t p : a.op.ints("permutation")) perm.push_back(skip(p, b));
    return at_front({transpose(a.operands[0], perm)});
  };
  r["stablehlo.reverse"] = [](const BatchArgs& a) {
    const int64_t b = *a.bdims[0];
    return std::vector<Batched>{{rev(a.operands[0], skip_all(a.op.ints("dimensions"), b)), b}};
  };
  r["stablehlo.slice"] = [](const BatchArgs& a) {
    const int64_t b = *a.bdims[0];
    auto start = a.op.ints("start_indices");
    auto limit = a.op.ints("limit_indices");
    auto strides = a.op.ints_if_present("strides").value_or(std::vector<int64_t>(start.size(), 1));
    start.insert(start.begin() + b, 0);
    limit.insert(limit.begin() + b, a.size);
    strides.insert(strides.begin() + b, 1);
    return std::vector<Batched>{{slice(a.operands[0], start, limit, strides), b}};
  };
  r["stablehlo.pad"] = [](const BatchArgs& a) {
    const auto lo = a.op.ints("edge_padding_low");
    const auto hi = a.op.ints("edge_padding_high");
    const auto interior = a.op.ints("interior_padding");
    std::vector<PadConfig> cfg;
    for (size_t d = 0; d < lo.size(); ++d) cfg.push_back({lo[d], hi[d], interior[d]});
    const Array& x = a.operands[0];
    const Array& value = a.operands[1];
    if (!a.bdims[1]) {
      const int64_t b = *a.bdims[0];
      cfg.insert(cfg.begin() + b, PadConfig{});
      return std::vector<Batched>{{pad(x, value, cfg), b}};
    }
    // A batched padding value: pad with zeros, then select the value where padding went.
    const Shape& out = a.op.result(0)->type.shape;
    std::vector<PadConfig> bcfg = cfg;
    bcfg.insert(bcfg.begin(), PadConfig{});
    const Array padded = pad(batch_at(x, a.bdims[0], a.size), full({}, 0.0, x.dtype()), bcfg);
    const Array inside =
        pad(full(a.op.operands[0]->type.shape, 1.0, DType::Bool), full({}, 0.0, DType::Bool), cfg);
    const Shape bshape = insert_dim(out, 0, a.size);
    const Array mask = broadcast_in_dim(inside, bshape, range(1, static_cast<int64_t>(out.size())));
    return at_front({select(mask, padded, broadcast_in_dim(value, bshape, {0}))});
  };
  r["stablehlo.concatenate"] = [](const BatchArgs& a) {
    std::vector<Array> xs;
    for (size_t i = 0; i < a.operands.size(); ++i)
      xs.push_back(batch_at(a.operands[i], a.bdims[i], a.size));
    return at_front({concatenate(xs, a.op.int_attr("dimension") + 1)});
  };

  r["stablehlo.dynamic_slice"] = [](const BatchArgs& a) {
    const Array& x = a.operands[0];
    const std::vector<Array> starts(a.operands.begin() + 1, a.operands.end());
    auto sizes = a.op.ints("slice_sizes");
    const int64_t rank = static_cast<int64_t>(sizes.size());
    if (!any_batched(a.bdims, 1)) {
      // Slice the whole batch dimension, with the op's own clamping of the other starts.
      const int64_t b = *a.bdims[0];
      std::vector<Array> ops{x};
      for (int64_t d = 0; d <= rank; ++d)
        ops.push_back(d == b ? full({}, 0.0, starts[0].dtype())
                             : starts[static_cast<size_t>(d < b ? d : d - 1)]);
      sizes.insert(sizes.begin() + b, a.size);
      return std::vector<Batched>{{rebind(a.op, ops, batched_types(a.op, a.size, b),
                                          {{"slice_sizes", lax::detail::dense(sizes)}})[0],
                                   b}};
    }
    // Per-example starts: a gather of one slice per example (gather clamps as the op does).
    const Array idx = stacked_starts(a, 1, starts);
    GatherDimensionNumbers g;
    g.offset_dims = range(1, rank);
    g.index_vector_dim = 1;
    if (!a.bdims[0]) {
      g.start_index_map = range(0, rank);
      return at_front({gather(x, idx, g, sizes)});
    }
    g.start_index_map = range(1, rank);
    g.operand_batching_dims = {0};
    g.start_indices_batching_dims = {0};
    sizes.insert(sizes.begin(), 1);
    return at_front({gather(batch_at(x, a.bdims[0], a.size), idx, g, sizes)});
  };
  r["stablehlo.dynamic_update_slice"] = [](const BatchArgs& a) {
    const Array x = batch_at(a.operands[0], a.bdims[0], a.size);
    const Array u = batch_at(a.operands[1], a.bdims[1], a.size);
    const std::vector<Array> starts(a.operands.begin() + 2, a.operands.end());
    if (!any_batched(a.bdims, 2)) {
      std::vector<Array> ops{x, u, full({}, 0.0, starts[0].dtype())};
      ops.insert(ops.end(), starts.begin(), starts.end());
      return at_front(rebind(a.op, ops, batched_types(a.op, a.size)));
    }
    // Per-example starts: a scatter of one window per example. The op clamps its starts so
    // that the update fits, where scatter would drop it: clamp first.
    const Shape& xs = a.op.operands[0]->type.shape;
    const Shape& us = a.op.operands[1]->type.shape;
    std::vector<Array> clamped;
    for (size_t d = 0; d < starts.size(); ++d) {
      const DType t = starts[d].dtype();
      clamped.push_back(
          clamp(full({}, 0.0, t), starts[d], full({}, static_cast<double>(xs[d] - us[d]), t)));
    }
    const Array idx = stacked_starts(a, 2, clamped);
    const int64_t rank = static_cast<int64_t>(xs.size());
    ScatterDimensionNumbers s;
    s.update_window_dims = range(1, rank);
    s.scatter_dims_to_operand_dims = range(1, rank);
    s.input_batching_dims = {0};
    s.scatter_indices_batching_dims = {0};
    s.index_vector_dim = 1;
    return at_front({scatter(x, idx, u, s)});
  };
}

}  // namespace cujax::trace::batching
