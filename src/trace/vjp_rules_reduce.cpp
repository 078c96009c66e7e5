// VJP rules of the contractions, reductions and indexing ops: dot_general, reduce (add, max,
// min), reduce_window (add), gather, scatter (add, replace) and sort.
#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "cujax/control_flow.h"
#include "cujax/numpy.h"
#include "trace/autodiff_markers.h"
#include "trace/vjp_rules.h"

namespace cujax::trace::vjp {

using namespace cujax::lax;

namespace {

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::vector<int64_t> remaining(int64_t n, const std::vector<int64_t>& a,
                               const std::vector<int64_t>& b) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i)
    if (!contains(a, i) && !contains(b, i)) out.push_back(i);
  return out;
}

std::vector<int64_t> range(int64_t start, size_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

std::vector<int64_t> argsort(const std::vector<int64_t>& v) {
  std::vector<int64_t> idx = range(0, v.size());
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return v[a] < v[b]; });
  return idx;
}

// JAX's _dot_general_transpose_lhs.
Array dot_transpose_lhs(const Array& g, const Array& x, const Array& y,
                        const std::vector<int64_t>& x_contract,
                        const std::vector<int64_t>& y_contract, const std::vector<int64_t>& x_batch,
                        const std::vector<int64_t>& y_batch, bool swap_ans) {
  const std::vector<int64_t> x_kept = remaining(x.ndim(), x_contract, x_batch);
  const std::vector<int64_t> y_kept = remaining(y.ndim(), y_contract, y_batch);
  const std::vector<int64_t> ans_batch = range(0, x_batch.size());
  std::vector<int64_t> ans_y;
  if (swap_ans)
    ans_y = range(static_cast<int64_t>(x_batch.size()), y_kept.size());
  else
    ans_y = range(static_cast<int64_t>(x_batch.size() + x_kept.size()), y_kept.size());
  DotDimensionNumbers dims;
  dims.lhs_contracting_dimensions = ans_y;
  dims.rhs_contracting_dimensions = y_kept;
  dims.lhs_batch_dimensions = ans_batch;
  dims.rhs_batch_dimensions = y_batch;
  std::vector<int64_t> x_contract_sorted_by_y;
  for (int64_t i : argsort(y_contract)) x_contract_sorted_by_y.push_back(x_contract[i]);
  std::vector<int64_t> order = x_batch;
  order.insert(order.end(), x_kept.begin(), x_kept.end());
  order.insert(order.end(), x_contract_sorted_by_y.begin(), x_contract_sorted_by_y.end());
  const std::vector<int64_t> out_axes = argsort(order);
  Array r = dot_general(g, y, dims);
  if (out_axes != range(0, out_axes.size())) r = transpose(r, out_axes);
  if (r.dtype() != x.dtype()) r = convert_element_type(r, x.dtype());
  return r;
}

// Broadcasts a reduce result (or its cotangent) back to the operand's shape.
Array expand(const Array& r, const Shape& shape, const std::vector<int64_t>& reduced) {
  return broadcast_in_dim(r, shape, remaining(static_cast<int64_t>(shape.size()), reduced, {}));
}

// Clamps gather start indices as the gather op does, so that a scatter of the cotangent
// lands where the gather read.
Array clamp_indices(const Array& idx, int64_t ivd, const std::vector<int64_t>& hi) {
  std::vector<int64_t> h = hi;
  Array hv = convert_element_type(array(h), idx.dtype());
  Array hb = ivd < idx.ndim() ? broadcast_in_dim(hv, idx.shape(), {ivd})
                              : broadcast_in_dim(reshape(hv, {}), idx.shape(), {});
  return clamp(full(idx.shape(), 0.0, idx.dtype()), idx, hb);
}

}  // namespace

void clone_block(const ir::Block& src, ir::Block& dst,
                 std::unordered_map<const ir::Value*, ir::Value*>& map) {
  for (const auto& arg : src.arguments) map[arg.get()] = dst.add_argument(arg->type);
  for (const auto& op : src.ops) {
    std::vector<ir::Value*> operands;
    for (ir::Value* v : op->operands) {
      auto it = map.find(v);
      operands.push_back(it != map.end() ? it->second : v);
    }
    std::vector<ir::Type> types;
    for (const auto& r : op->results) types.push_back(r->type);
    auto c = ir::make_op(op->name, operands, types);
    c->attributes = op->attributes;
    for (const auto& region : op->regions) {
      ir::Region& nr = c->add_region();
      for (const auto& b : region->blocks) clone_block(*b, nr.add_block(), map);
    }
    for (size_t i = 0; i < op->results.size(); ++i) map[op->result(i)] = c->result(i);
    copy_annotations(*op, *c, map);
    dst.push_back(std::move(c));
  }
}

void copy_annotations(const ir::Operation& op, const ir::Operation& copy,
                      const std::unordered_map<const ir::Value*, ir::Value*>& map) {
  if (is_stop_gradient_marker(&op)) mark_stop_gradient(&copy);
  const std::any* a = annotation(&op);
  const auto* rec = a ? std::any_cast<lax::detail::ScanRecord>(a) : nullptr;
  if (!rec) return;
  lax::detail::ScanRecord r = *rec;
  auto remap = [&](std::vector<const ir::Value*>& vs) {
    for (auto& v : vs) {
      auto it = map.find(v);
      if (it != map.end()) v = it->second;
    }
  };
  remap(r.f_in);
  remap(r.f_out);
  annotate(&copy, r);
}

void register_reduction_rules(Rules& r) {
  r["stablehlo.dot_general"] = [](const VjpArgs& a) -> Cts {
    const ir::Attribute* dn = a.op.attr("dot_dimension_numbers");
    const auto lc = struct_ints(dn, "lhs_contracting_dimensions");
    const auto rc = struct_ints(dn, "rhs_contracting_dimensions");
    const auto lb = struct_ints(dn, "lhs_batching_dimensions");
    const auto rb = struct_ints(dn, "rhs_batching_dimensions");
    const Array &x = a.operands[0], &y = a.operands[1];
    Array g = a.cts[0];
    if (g.dtype() != x.dtype() && x.dtype() == y.dtype()) g = convert_element_type(g, x.dtype());
    Cts out(2);
    if (a.needed[0]) out[0] = dot_transpose_lhs(g, x, y, lc, rc, lb, rb, false);
    if (a.needed[1]) out[1] = dot_transpose_lhs(g, y, x, rc, lc, rb, lb, true);
    return out;
  };

  r["stablehlo.reduce"] = [](const VjpArgs& a) -> Cts {
    const std::string kind = body_kind(a.op);
    const auto dims = a.op.ints("dimensions");
    if (a.operands.size() != 2)
      throw Error("grad of a variadic stablehlo.reduce is not supported yet");
    const Array &x = a.operands[0], &y = a.results[0], &g = a.cts[0];
    if (kind == "stablehlo.add") return {expand(g, x.shape(), dims), std::nullopt};
    if (kind == "stablehlo.maximum" || kind == "stablehlo.minimum") {
      // JAX's _reduce_chooser_jvp_rule: the cotangent is shared among the elements equal to
      // the extreme value.
      const Array loc = convert_element_type(eq(x, expand(y, x.shape(), dims)), x.dtype());
      const Array counts = reduce_sum(loc, dims);
      return {mul(loc, expand(div(g, counts), x.shape(), dims)), std::nullopt};
    }
    if (kind == "stablehlo.multiply") {
      // The product of the other elements, zeros included: with no zero in the reduced slice
      // it is prod / x; with one zero it is the product of the non-zeros at the zero and 0
      // elsewhere; with more it is 0. x is made non-zero before dividing so that no inf or NaN
      // appears even in the branches that select drops (their gradients would be NaN).
      const Array zero = eq(x, like(x, 0.0));
      const Array safe = select(zero, like(x, 1.0), x);
      const Array p = expand(reduce_prod(safe, dims), x.shape(), dims);
      const Array nz =
          expand(reduce_sum(convert_element_type(zero, x.dtype()), dims), x.shape(), dims);
      const Array gb = expand(g, x.shape(), dims);
      const Array one_zero = bitwise_and(eq(nz, like(x, 1.0)), zero);
      const Array other =
          select(eq(nz, like(x, 0.0)), div(p, safe), select(one_zero, p, like(x, 0.0)));
      return {mul(gb, other), std::nullopt};
    }
    throw Error("grad of stablehlo.reduce with a " + (kind.empty() ? "custom" : kind) +
                " body is not supported yet");
  };

  r["stablehlo.reduce_window"] = [](const VjpArgs& a) -> Cts {
    const std::string kind = body_kind(a.op);
    if (a.operands.size() != 2 || kind != "stablehlo.add")
      throw Error("grad of stablehlo.reduce_window with a " + (kind.empty() ? "custom" : kind) +
                  " body is not supported yet");
    const Array &x = a.operands[0], &g = a.cts[0];
    const size_t n = static_cast<size_t>(x.ndim());
    const auto wdims = a.op.ints("window_dimensions");
    const auto strides = ints_or(a.op, "window_strides", std::vector<int64_t>(n, 1));
    const auto bdil = ints_or(a.op, "base_dilations", std::vector<int64_t>(n, 1));
    const auto wdil = ints_or(a.op, "window_dilations", std::vector<int64_t>(n, 1));
    const auto pad_flat = ints_or(a.op, "padding", std::vector<int64_t>(2 * n, 0));
    // JAX's _reduce_window_sum_transpose_rule with _conv_general_vjp_lhs_padding.
    std::vector<PadConfig> cfg;
    for (size_t i = 0; i < n; ++i) {
      const int64_t lhs = dilate(x.shape()[i], bdil[i]);
      const int64_t rhs = dilate(wdims[i], wdil[i]);
      const int64_t out = dilate(g.shape()[i], strides[i]);
      const int64_t before = rhs - pad_flat[2 * i] - 1;
      const int64_t after = lhs + rhs - 1 - out - before;
      cfg.push_back({before, after, strides[i] - 1});
    }
    const Array padded = pad(g, full({}, 0.0, g.dtype()), cfg);
    WindowConfig w;
    w.window_dimensions = wdims;
    w.window_strides = bdil;
    w.window_dilation = wdil;
    const Array zero = full({}, 0.0, g.dtype());
    Array res = reduce_window(
        {padded}, {zero},
        [](const std::vector<Array>& v) { return std::vector<Array>{add(v[0], v[1])}; }, w)[0];
    return {res, std::nullopt};
  };

  r["stablehlo.gather"] = [](const VjpArgs& a) -> Cts {
    const ir::Attribute* dn = a.op.attr("dimension_numbers");
    const Array &x = a.operands[0], &idx = a.operands[1], &g = a.cts[0];
    const auto slice_sizes = a.op.ints("slice_sizes");
    ScatterDimensionNumbers sd;
    sd.update_window_dims = struct_ints(dn, "offset_dims");
    sd.inserted_window_dims = struct_ints(dn, "collapsed_slice_dims");
    sd.scatter_dims_to_operand_dims = struct_ints(dn, "start_index_map");
    sd.input_batching_dims = struct_ints(dn, "operand_batching_dims");
    sd.scatter_indices_batching_dims = struct_ints(dn, "start_indices_batching_dims");
    sd.index_vector_dim = struct_int(dn, "index_vector_dim", 0);
    std::vector<int64_t> hi;
    for (int64_t d : sd.scatter_dims_to_operand_dims) hi.push_back(x.shape()[d] - slice_sizes[d]);
    const Array cidx = clamp_indices(idx, sd.index_vector_dim, hi);
    return {scatter_add(like(x, 0.0), cidx, g, sd), std::nullopt};
  };

  r["stablehlo.scatter"] = [](const VjpArgs& a) -> Cts {
    const std::string kind = body_kind(a.op);
    if (a.operands.size() != 3 || (kind != "stablehlo.add" && kind != "select_update"))
      throw Error("grad of stablehlo.scatter with a " + (kind.empty() ? "custom" : kind) +
                  " combiner is not supported yet");
    const ir::Attribute* dn = a.op.attr("scatter_dimension_numbers");
    const Array &x = a.operands[0], &idx = a.operands[1], &u = a.operands[2], &g = a.cts[0];
    GatherDimensionNumbers gd;
    gd.offset_dims = struct_ints(dn, "update_window_dims");
    gd.collapsed_slice_dims = struct_ints(dn, "inserted_window_dims");
    gd.start_index_map = struct_ints(dn, "scatter_dims_to_operand_dims");
    gd.operand_batching_dims = struct_ints(dn, "input_batching_dims");
    gd.start_indices_batching_dims = struct_ints(dn, "scatter_indices_batching_dims");
    gd.index_vector_dim = struct_int(dn, "index_vector_dim", 0);
    std::vector<int64_t> slice_sizes;
    size_t pos = 0;
    for (int64_t i = 0; i < x.ndim(); ++i) {
      if (contains(gd.collapsed_slice_dims, i) || contains(gd.operand_batching_dims, i))
        slice_sizes.push_back(1);
      else
        slice_sizes.push_back(u.shape()[gd.offset_dims[pos++]]);
    }
    Cts out(3);
    if (a.needed[2]) {
      // Updates whose window is out of bounds are dropped by scatter: their cotangent is 0.
      const int64_t ivd = gd.index_vector_dim;
      std::vector<int64_t> hi;
      for (int64_t d : gd.start_index_map) hi.push_back(x.shape()[d] - slice_sizes[d]);
      Array in_bounds = bitwise_and(
          ge(idx, full(idx.shape(), 0.0, idx.dtype())), le(idx, [&] {
            Array hv = convert_element_type(array(hi), idx.dtype());
            return ivd < idx.ndim() ? broadcast_in_dim(hv, idx.shape(), {ivd})
                                    : broadcast_in_dim(reshape(hv, {}), idx.shape(), {});
          }()));
      if (ivd < idx.ndim()) in_bounds = reduce_and(in_bounds, {ivd});
      std::vector<int64_t> scatter_dims;
      for (int64_t i = 0; i < u.ndim(); ++i)
        if (!contains(gd.offset_dims, i)) scatter_dims.push_back(i);
      const Array mask = broadcast_in_dim(in_bounds, u.shape(), scatter_dims);
      const Array gathered = gather(g, idx, gd, slice_sizes);
      out[2] = select(mask, gathered, like(u, 0.0));
    }
    if (a.needed[0]) {
      if (kind == "stablehlo.add") {
        out[0] = g;
      } else {
        // Replaced positions get no cotangent (exact for unique indices).
        ScatterDimensionNumbers sd;
        sd.update_window_dims = gd.offset_dims;
        sd.inserted_window_dims = gd.collapsed_slice_dims;
        sd.scatter_dims_to_operand_dims = gd.start_index_map;
        sd.input_batching_dims = gd.operand_batching_dims;
        sd.scatter_indices_batching_dims = gd.start_indices_batching_dims;
        sd.index_vector_dim = gd.index_vector_dim;
        out[0] = scatter(g, idx, like(u, 0.0), sd);
      }
    }
    return out;
  };

  r["stablehlo.sort"] = [](const VjpArgs& a) -> Cts {
    // Sort again with an iota operand to get the permutation (the comparator ignores it),
    // then gather each cotangent back by the inverse permutation.
    const int64_t dim = a.op.int_attr("dimension");
    const Array& x0 = a.operands[0];
    const Array iota = broadcasted_iota(DType::I32, x0.shape(), dim);
    OpSpec s;
    s.name = "stablehlo.sort";
    s.attributes = a.op.attributes;
    for (const auto& x : a.operands) s.result_types.push_back(ir_type(x.aval()));
    s.result_types.push_back(ir_type(iota.aval()));
    const ir::Operation* op = &a.op;
    s.regions.push_back([op](TraceContext&, ir::Block& block) {
      std::unordered_map<const ir::Value*, ir::Value*> map;
      const ir::Block& src = op->regions[0]->front();
      for (const auto& arg : src.arguments) map[arg.get()] = block.add_argument(arg->type);
      block.add_argument(ir::Type::tensor({}, DType::I32));
      block.add_argument(ir::Type::tensor({}, DType::I32));
      std::unordered_map<const ir::Value*, ir::Value*> inner = map;
      // Clone the ops with the argument mapping already fixed.
      for (const auto& o : src.ops) {
        std::vector<ir::Value*> operands;
        for (ir::Value* v : o->operands) {
          auto it = inner.find(v);
          operands.push_back(it != inner.end() ? it->second : v);
        }
        std::vector<ir::Type> types;
        for (const auto& res : o->results) types.push_back(res->type);
        auto c = ir::make_op(o->name, operands, types);
        c->attributes = o->attributes;
        for (const auto& region : o->regions) {
          ir::Region& nr = c->add_region();
          for (const auto& b : region->blocks) clone_block(*b, nr.add_block(), inner);
        }
        for (size_t i = 0; i < o->results.size(); ++i) inner[o->result(i)] = c->result(i);
        block.push_back(std::move(c));
      }
    });
    std::vector<Array> ins = a.operands;
    ins.push_back(iota);
    const std::vector<Array> sorted = cujax::trace::bind(s, ins);
    const Array perm = sorted.back();
    const Array inv = sort_key_val(perm, iota, dim).second;
    Cts out;
    for (size_t i = 0; i < a.operands.size(); ++i) {
      if (!a.needed[i]) {
        out.push_back(std::nullopt);
        continue;
      }
      out.push_back(numpy::take_along_axis(a.cts[i], inv, dim, numpy::IndexMode::Clip));
    }
    return out;
  };
}

}  // namespace cujax::trace::vjp
