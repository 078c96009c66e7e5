// Reductions: reduce with a traced computation, the monoid reductions, argmax/argmin,
// reduce_window and the cumulative reductions.
#include <algorithm>

#include "lax/util.h"

namespace cujax::lax {

using namespace detail;

namespace {

using Binary = Array (*)(const Array&, const Array&);

Computation monoid(Binary f) {
  return [f](const std::vector<Array>& a) { return std::vector<Array>{f(a[0], a[1])}; };
}

void check_operands_and_inits(const std::string& op, const std::vector<Array>& operands,
                              const std::vector<Array>& init_values) {
  if (operands.empty()) fail(op, "needs at least one operand");
  if (operands.size() != init_values.size())
    fail(op, "needs one init value per operand, got " + std::to_string(operands.size()) +
                 " operands and " + std::to_string(init_values.size()) + " init values");
  for (size_t i = 0; i < operands.size(); ++i) {
    check_valid(op, operands[i]);
    check_valid(op, init_values[i]);
    if (operands[i].shape() != operands[0].shape())
      fail(op, "operands must have the same shape, got " + type_str(operands[0]) + " and " +
                   type_str(operands[i]));
    if (!init_values[i].shape().empty() || init_values[i].dtype() != operands[i].dtype())
      fail(op, "init value " + std::to_string(i) +
                   " must be a scalar of its operand's dtype, got " + type_str(init_values[i]) +
                   " for operand " + type_str(operands[i]));
  }
}

}  // namespace

std::vector<Array> reduce(const std::vector<Array>& operands, const std::vector<Array>& init_values,
                          const Computation& computation, const std::vector<int64_t>& dimensions) {
  const std::string op = "reduce";
  check_operands_and_inits(op, operands, init_values);
  const int64_t rank = operands[0].ndim();
  const auto dims = canonical_axes(op, dimensions, rank);
  Shape shape;
  for (int64_t i = 0; i < rank; ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end())
      shape.push_back(operands[0].shape()[i]);
  trace::OpSpec s;
  s.name = "stablehlo.reduce";
  s.attributes = {{"dimensions", dense(dims)}};
  std::vector<DType> dtypes;
  for (const auto& a : operands) {
    s.result_types.push_back(ir::Type::tensor(shape, a.dtype()));
    dtypes.push_back(a.dtype());
  }
  std::vector<DType> args = dtypes;
  args.insert(args.end(), dtypes.begin(), dtypes.end());
  s.regions.push_back([=](trace::TraceContext& tc, ir::Block& block) {
    trace_computation(op, tc, block, args, dtypes, computation);
  });
  std::vector<Array> ins = operands;
  ins.insert(ins.end(), init_values.begin(), init_values.end());
  return trace::bind(s, ins);
}

namespace {

Array reduce1(const std::string& op, const Array& x, const std::vector<int64_t>& axes, Kinds kinds,
              const Array& init, Binary f) {
  check_dtype(op, x, kinds);
  return reduce({x}, {init}, monoid(f), canonical_axes(op, axes, x.ndim()))[0];
}

}  // namespace

Array reduce_sum(const Array& x, const std::vector<int64_t>& axes) {
  check_dtype("reduce_sum", x, Kinds::Num);
  return reduce1("reduce_sum", x, axes, Kinds::Num, constant(0, x.dtype()), add);
}
Array reduce_prod(const Array& x, const std::vector<int64_t>& axes) {
  check_dtype("reduce_prod", x, Kinds::Num);
  return reduce1("reduce_prod", x, axes, Kinds::Num, constant(1, x.dtype()), mul);
}
Array reduce_max(const Array& x, const std::vector<int64_t>& axes) {
  check_dtype("reduce_max", x, Kinds::Real);
  return reduce1("reduce_max", x, axes, Kinds::Real, lowest(x.dtype()), max);
}
Array reduce_min(const Array& x, const std::vector<int64_t>& axes) {
  check_dtype("reduce_min", x, Kinds::Real);
  return reduce1("reduce_min", x, axes, Kinds::Real, highest(x.dtype()), min);
}
Array reduce_and(const Array& x, const std::vector<int64_t>& axes) {
  check_dtype("reduce_and", x, Kinds::IntOrBool);
  return reduce1("reduce_and", x, axes, Kinds::IntOrBool, all_ones(x.dtype()), bitwise_and);
}
Array reduce_or(const Array& x, const std::vector<int64_t>& axes) {
  check_dtype("reduce_or", x, Kinds::IntOrBool);
  return reduce1("reduce_or", x, axes, Kinds::IntOrBool, constant(0, x.dtype()), bitwise_or);
}

namespace {

// jax.lax's _compute_argminmax: a variadic reduce over (value, index) that picks the value when
// it compares better or is NaN, and the lower index among equal values.
Array argminmax(const std::string& op, const Array& x, int64_t axis, DType index_dtype,
                bool is_max) {
  check_dtype(op, x, Kinds::Real);
  if (!is_integer(index_dtype))
    fail(op, "index_dtype must be an integer type, got " + std::string(mlir_name(index_dtype)));
  const int64_t a = canonical_axis(op, axis, x.ndim());
  if (x.shape()[a] == 0)
    fail(op, "cannot take the " + op.substr(3) + " of an empty axis, got " + type_str(x));
  const Array indices = broadcasted_iota(index_dtype, x.shape(), a);
  const Array init = is_max ? lowest(x.dtype()) : highest(x.dtype());
  Computation reducer = [is_max](const std::vector<Array>& v) {
    const Array &op_val = v[0], &op_index = v[1], &acc_val = v[2], &acc_index = v[3];
    const Array better = is_max ? gt(op_val, acc_val) : lt(op_val, acc_val);
    const Array pick_val = bitwise_or(better, ne(op_val, op_val));
    const Array same_val = eq(op_val, acc_val);
    const Array lower_index = lt(op_index, acc_index);
    const Array pick_index = bitwise_or(pick_val, bitwise_and(same_val, lower_index));
    return std::vector<Array>{select(pick_val, op_val, acc_val),
                              select(pick_index, op_index, acc_index)};
  };
  return reduce({x, indices}, {init, constant(0, index_dtype)}, reducer, {a})[1];
}

}  // namespace

Array argmax(const Array& x, int64_t axis, DType index_dtype) {
  return argminmax("argmax", x, axis, index_dtype, true);
}
Array argmin(const Array& x, int64_t axis, DType index_dtype) {
  return argminmax("argmin", x, axis, index_dtype, false);
}

std::vector<Array> reduce_window(const std::vector<Array>& operands,
                                 const std::vector<Array>& init_values,
                                 const Computation& computation, const WindowConfig& window) {
  const std::string op = "reduce_window";
  check_operands_and_inits(op, operands, init_values);
  const Shape& in = operands[0].shape();
  const size_t n = in.size();
  auto per_dim = [&](const std::vector<int64_t>& v, const char* what, int64_t dflt) {
    if (v.empty()) return std::vector<int64_t>(n, dflt);
    if (v.size() != n)
      fail(op, std::string(what) + " " + list_str(v) + " needs one entry per dimension of " +
                   type_str(operands[0]));
    for (int64_t x : v)
      if (x < 1) fail(op, std::string(what) + " " + list_str(v) + " must be positive");
    return v;
  };
  if (window.window_dimensions.size() != n)
    fail(op, "window_dimensions " + list_str(window.window_dimensions) +
                 " needs one entry per dimension of " + type_str(operands[0]));
  const auto wdims = per_dim(window.window_dimensions, "window_dimensions", 1);
  const auto strides = per_dim(window.window_strides, "window_strides", 1);
  const auto bdil = per_dim(window.base_dilation, "base_dilation", 1);
  const auto wdil = per_dim(window.window_dilation, "window_dilation", 1);
  auto pads = window.padding;
  if (pads.empty()) pads.assign(n, {0, 0});
  if (pads.size() != n)
    fail(op, "padding needs one (low, high) pair per dimension of " + type_str(operands[0]));
  Shape shape;
  bool padded = false;
  HostTensor pad_t(DType::I64, {static_cast<int64_t>(n), 2});
  for (size_t i = 0; i < n; ++i) {
    const int64_t din = in[i] == 0 ? 0 : (in[i] - 1) * bdil[i] + 1;
    const int64_t p = din + pads[i].first + pads[i].second;
    const int64_t w = (wdims[i] - 1) * wdil[i] + 1;
    shape.push_back(p < w ? 0 : (p - w) / strides[i] + 1);
    pad_t.data_as<int64_t>()[2 * i] = pads[i].first;
    pad_t.data_as<int64_t>()[2 * i + 1] = pads[i].second;
    padded = padded || pads[i].first != 0 || pads[i].second != 0;
  }
  auto all_one = [](const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
  };
  trace::OpSpec s;
  s.name = "stablehlo.reduce_window";
  s.attributes.push_back({"window_dimensions", dense(wdims)});
  if (!all_one(strides)) s.attributes.push_back({"window_strides", dense(strides)});
  if (!all_one(bdil)) s.attributes.push_back({"base_dilations", dense(bdil)});
  if (!all_one(wdil)) s.attributes.push_back({"window_dilations", dense(wdil)});
  if (padded) s.attributes.push_back({"padding", ir::Attribute::dense_elements(pad_t)});
  std::vector<DType> dtypes;
  for (const auto& a : operands) {
    s.result_types.push_back(ir::Type::tensor(shape, a.dtype()));
    dtypes.push_back(a.dtype());
  }
  std::vector<DType> args = dtypes;
  args.insert(args.end(), dtypes.begin(), dtypes.end());
  s.regions.push_back([=](trace::TraceContext& tc, ir::Block& block) {
    trace_computation(op, tc, block, args, dtypes, computation);
  });
  std::vector<Array> ins = operands;
  ins.insert(ins.end(), init_values.begin(), init_values.end());
  return trace::bind(s, ins);
}

namespace {

// jax.lax's cumred_reduce_window_impl: a window spanning the whole axis, padded on one side.
Array cumulative(const std::string& op, const Array& x, int64_t axis, bool reverse, Kinds kinds,
                 const Array& init, Binary f) {
  check_dtype(op, x, kinds);
  const int64_t a = canonical_axis(op, axis, x.ndim());
  const int64_t n = x.shape()[a];
  if (n == 0) return x;
  WindowConfig w;
  w.window_dimensions.assign(x.ndim(), 1);
  w.window_dimensions[a] = n;
  w.padding.assign(x.ndim(), {0, 0});
  w.padding[a] =
      reverse ? std::pair<int64_t, int64_t>{0, n - 1} : std::pair<int64_t, int64_t>{n - 1, 0};
  return reduce_window({x}, {init}, monoid(f), w)[0];
}

}  // namespace

Array cumsum(const Array& x, int64_t axis, bool reverse) {
  check_valid("cumsum", x);
  return cumulative("cumsum", x, axis, reverse, Kinds::Num, constant(0, x.dtype()), add);
}
Array cumprod(const Array& x, int64_t axis, bool reverse) {
  check_valid("cumprod", x);
  return cumulative("cumprod", x, axis, reverse, Kinds::Num, constant(1, x.dtype()), mul);
}
Array cummax(const Array& x, int64_t axis, bool reverse) {
  check_valid("cummax", x);
  return cumulative("cummax", x, axis, reverse, Kinds::Real, lowest(x.dtype()), max);
}
Array cummin(const Array& x, int64_t axis, bool reverse) {
  check_valid("cummin", x);
  return cumulative("cummin", x, axis, reverse, Kinds::Real, highest(x.dtype()), min);
}

}  // namespace cujax::lax
