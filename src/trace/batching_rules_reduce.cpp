// Batching rules of the contractions, reductions, sort and indexing ops: dot_general (the
// batch becomes a batching or free dimension), reduce and reduce_window (the batch is one
// more kept dimension), sort, gather and scatter (JAX's _gather_batching_rule and
// _scatter_batching_rule, with operand/indices batching dimensions when both are batched).
#include <algorithm>

#include "lax/util.h"
#include "trace/batching_rules.h"
#include "trace/vjp_rules.h"

namespace cujax::trace::batching {

using namespace cujax::lax;
using vjp::struct_int;
using vjp::struct_ints;

namespace {

std::vector<int64_t> plus1(const std::vector<int64_t>& v) {
  std::vector<int64_t> out;
  for (int64_t d : v) out.push_back(d + 1);
  return out;
}

std::vector<int64_t> with_front(int64_t x, const std::vector<int64_t>& v) {
  std::vector<int64_t> out{x};
  out.insert(out.end(), v.begin(), v.end());
  return out;
}

// Number of dimensions of a rank-`rank` operand that are neither in `a` nor in `b` and lie
// below `d`.
int64_t free_below(int64_t rank, const std::vector<int64_t>& a, const std::vector<int64_t>& b,
                   int64_t d) {
  int64_t n = 0;
  for (int64_t i = 0; i < d && i < rank; ++i)
    if (std::find(a.begin(), a.end(), i) == a.end() && std::find(b.begin(), b.end(), i) == b.end())
      ++n;
  return n;
}

void check_unbatched(const BatchArgs& a, size_t from, size_t to, const std::string& what) {
  for (size_t i = from; i < to; ++i)
    if (a.bdims[i]) unsupported(a.op, what);
}

}  // namespace

void register_reduction_rules(Rules& r) {
  r["stablehlo.dot_general"] = [](const BatchArgs& a) {
    const ir::Attribute* dn = a.op.attr("dot_dimension_numbers");
    auto lc = struct_ints(dn, "lhs_contracting_dimensions");
    auto rc = struct_ints(dn, "rhs_contracting_dimensions");
    auto lb = struct_ints(dn, "lhs_batching_dimensions");
    auto rb = struct_ints(dn, "rhs_batching_dimensions");
    const Array &x = a.operands[0], &y = a.operands[1];
    const DType out = a.op.result(0)->type.dtype;
    DotDimensionNumbers d;
    if (a.bdims[0] && a.bdims[1]) {
      // Both batched: the batch becomes a dot batching dimension, the first of the result.
      const int64_t bx = *a.bdims[0], by = *a.bdims[1];
      d.lhs_batch_dimensions = with_front(bx, skip_all(lb, bx));
      d.rhs_batch_dimensions = with_front(by, skip_all(rb, by));
      d.lhs_contracting_dimensions = skip_all(lc, bx);
      d.rhs_contracting_dimensions = skip_all(rc, by);
      return at_front({dot_general(x, y, d, out)});
    }
    // One side batched: its batch dimension is a free dimension, which the result lists after
    // the batching dimensions, the lhs free dimensions, then the rhs free dimensions.
    const bool left = a.bdims[0].has_value();
    const int64_t b = left ? *a.bdims[0] : *a.bdims[1];
    if (left) {
      lc = skip_all(lc, b);
      lb = skip_all(lb, b);
    } else {
      rc = skip_all(rc, b);
      rb = skip_all(rb, b);
    }
    d.lhs_contracting_dimensions = lc;
    d.rhs_contracting_dimensions = rc;
    d.lhs_batch_dimensions = lb;
    d.rhs_batch_dimensions = rb;
    const int64_t nb = static_cast<int64_t>(lb.size());
    int64_t at;
    if (left) {
      at = nb + free_below(x.ndim(), lc, lb, b);
    } else {
      const int64_t lhs_free = x.ndim() - static_cast<int64_t>(lc.size() + lb.size());
      at = nb + lhs_free + free_below(y.ndim(), rc, rb, b);
    }
    return std::vector<Batched>{{dot_general(x, y, d, out), at}};
  };

  r["stablehlo.reduce"] = [](const BatchArgs& a) {
    const size_t n = a.operands.size() / 2;
    check_unbatched(a, n, 2 * n, "batched init values");
    std::vector<Array> xs,
        inits(a.operands.begin() + static_cast<std::ptrdiff_t>(n), a.operands.end());
    for (size_t i = 0; i < n; ++i) xs.push_back(batch_at(a.operands[i], a.bdims[i], a.size));
    return at_front(reduce(xs, inits, region_computation(a.op), plus1(a.op.ints("dimensions"))));
  };

  r["stablehlo.reduce_window"] = [](const BatchArgs& a) {
    const size_t n = a.operands.size() / 2;
    check_unbatched(a, n, 2 * n, "batched init values");
    std::vector<Array> xs,
        inits(a.operands.begin() + static_cast<std::ptrdiff_t>(n), a.operands.end());
    for (size_t i = 0; i < n; ++i) xs.push_back(batch_at(a.operands[i], a.bdims[i], a.size));
    const size_t rank = a.op.operands[0]->type.shape.size();
    const std::vector<int64_t> ones(rank, 1);
    WindowConfig w;
    w.window_dimensions = with_front(1, a.op.ints("window_dimensions"));
    w.window_strides = with_front(1, vjp::ints_or(a.op, "window_strides", ones));
    w.base_dilation = with_front(1, vjp::ints_or(a.op, "base_dilations", ones));
    w.window_dilation = with_front(1, vjp::ints_or(a.op, "window_dilations", ones));
    const auto pads = vjp::ints_or(a.op, "padding", std::vector<int64_t>(2 * rank, 0));
    w.padding.push_back({0, 0});
    for (size_t i = 0; i < rank; ++i) w.padding.push_back({pads[2 * i], pads[2 * i + 1]});
    return at_front(reduce_window(xs, inits, region_computation(a.op), w));
  };

  r["stablehlo.sort"] = [](const BatchArgs& a) {
    std::vector<Array> xs;
    for (size_t i = 0; i < a.operands.size(); ++i)
      xs.push_back(batch_at(a.operands[i], a.bdims[i], a.size));
    return at_front(rebind(a.op, xs, batched_types(a.op, a.size),
                           {{"dimension", lax::detail::i64_attr(a.op.int_attr("dimension") + 1)}}));
  };

  r["stablehlo.gather"] = [](const BatchArgs& a) {
    const ir::Attribute* dn = a.op.attr("dimension_numbers");
    const auto offset = struct_ints(dn, "offset_dims");
    const auto collapsed = struct_ints(dn, "collapsed_slice_dims");
    const auto index_map = struct_ints(dn, "start_index_map");
    const auto operand_batch = struct_ints(dn, "operand_batching_dims");
    const auto indices_batch = struct_ints(dn, "start_indices_batching_dims");
    const int64_t ivd = struct_int(dn, "index_vector_dim", 0);
    auto sizes = a.op.ints("slice_sizes");
    GatherDimensionNumbers g;
    g.offset_dims = plus1(offset);
    if (!a.bdims[1]) {
      // Only the operand: its batch dimension is one more offset dimension, taken whole, the
      // first of the result.
      g.offset_dims.insert(g.offset_dims.begin(), 0);
      g.collapsed_slice_dims = plus1(collapsed);
      g.start_index_map = plus1(index_map);
      g.operand_batching_dims = plus1(operand_batch);
      g.start_indices_batching_dims = indices_batch;
      g.index_vector_dim = ivd;
      sizes.insert(sizes.begin(), a.size);
      return at_front(
          {gather(batch_at(a.operands[0], a.bdims[0], a.size), a.operands[1], g, sizes)});
    }
    const Array idx = batch_at(a.operands[1], a.bdims[1], a.size);
    g.index_vector_dim = ivd + 1;
    if (!a.bdims[0]) {
      // Only the indices: the batch is one more index batch dimension, the first of the result.
      g.collapsed_slice_dims = collapsed;
      g.start_index_map = index_map;
      g.operand_batching_dims = operand_batch;
      g.start_indices_batching_dims = plus1(indices_batch);
      return at_front({gather(a.operands[0], idx, g, sizes)});
    }
    // Both: the batch pairs an operand batching dimension with an indices batching dimension.
    g.collapsed_slice_dims = plus1(collapsed);
    g.start_index_map = plus1(index_map);
    g.operand_batching_dims = with_front(0, plus1(operand_batch));
    g.start_indices_batching_dims = with_front(0, plus1(indices_batch));
    sizes.insert(sizes.begin(), 1);
    return at_front({gather(batch_at(a.operands[0], a.bdims[0], a.size), idx, g, sizes)});
  };

  r["stablehlo.scatter"] = [](const BatchArgs& a) {
    if (a.operands.size() != 3) unsupported(a.op, "several operands (a variadic scatter)");
    const ir::Attribute* dn = a.op.attr("scatter_dimension_numbers");
    ScatterDimensionNumbers s;
    s.update_window_dims = plus1(struct_ints(dn, "update_window_dims"));
    s.inserted_window_dims = plus1(struct_ints(dn, "inserted_window_dims"));
    s.scatter_dims_to_operand_dims = plus1(struct_ints(dn, "scatter_dims_to_operand_dims"));
    s.input_batching_dims = plus1(struct_ints(dn, "input_batching_dims"));
    s.scatter_indices_batching_dims = struct_ints(dn, "scatter_indices_batching_dims");
    s.index_vector_dim = struct_int(dn, "index_vector_dim", 0);
    const Array x = batch_at(a.operands[0], a.bdims[0], a.size);
    const Array u = batch_at(a.operands[2], a.bdims[2], a.size);
    Array idx = a.operands[1];
    if (!a.bdims[1]) {
      // Unbatched indices: the batch is one more window dimension of the updates, taken whole.
      s.update_window_dims.insert(s.update_window_dims.begin(), 0);
    } else {
      // Batched indices: the batch pairs an operand batching dimension with an indices one;
      // in the updates it is the first scatter dimension.
      idx = batch_at(idx, a.bdims[1], a.size);
      s.index_vector_dim += 1;
      s.scatter_indices_batching_dims = with_front(0, plus1(s.scatter_indices_batching_dims));
      s.input_batching_dims.insert(s.input_batching_dims.begin(), 0);
    }
    return at_front({scatter_apply(x, idx, u, s, region_computation(a.op))});
  };
}

}  // namespace cujax::trace::batching
