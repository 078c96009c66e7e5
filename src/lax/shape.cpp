// Shape ops: broadcasts, reshapes, transposes, slices, concatenation, padding and iota.
#include <algorithm>

#include "lax/util.h"

namespace cujax::lax {

using namespace detail;

Array broadcast_in_dim(const Array& x, const Shape& shape,
                       const std::vector<int64_t>& broadcast_dimensions) {
  const std::string op = "broadcast_in_dim";
  check_valid(op, x);
  const int64_t out_rank = static_cast<int64_t>(shape.size());
  if (static_cast<int64_t>(broadcast_dimensions.size()) != x.ndim())
    fail(op, "broadcast_dimensions " + list_str(broadcast_dimensions) +
                 " must have one entry per operand dimension, got operand " + type_str(x));
  std::vector<bool> used(shape.size(), false);
  for (int64_t d : shape)
    if (d < 0) fail(op, "negative dimension in shape " + shape_to_string(shape));
  for (int64_t i = 0; i < x.ndim(); ++i) {
    const int64_t d = broadcast_dimensions[i];
    if (d < 0 || d >= out_rank || used[d])
      fail(op, "broadcast_dimensions " + list_str(broadcast_dimensions) +
                   " must be distinct dimensions of the result shape " + shape_to_string(shape));
    used[d] = true;
    if (x.shape()[i] != 1 && x.shape()[i] != shape[d])
      fail(op, "operand " + type_str(x) + " cannot be broadcast to " + shape_to_string(shape) +
                   " with broadcast_dimensions " + list_str(broadcast_dimensions) + ": dimension " +
                   std::to_string(i) + " has size " + std::to_string(x.shape()[i]) +
                   ", expected 1 or " + std::to_string(shape[d]));
  }
  if (shape.empty() && x.ndim() == 0) return x;
  return trace::bind1(spec("stablehlo.broadcast_in_dim", shape, x.dtype(),
                           {{"broadcast_dimensions", dense(broadcast_dimensions)}}),
                      {x});
}

Array broadcast(const Array& x, const Shape& sizes) {
  check_valid("broadcast", x);
  Shape shape = sizes;
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.ndim(); ++i) dims.push_back(static_cast<int64_t>(sizes.size()) + i);
  return broadcast_in_dim(x, shape, dims);
}

Array reshape(const Array& x, const Shape& new_sizes) {
  check_valid("reshape", x);
  for (int64_t d : new_sizes)
    if (d < 0) fail("reshape", "negative dimension in new_sizes " + shape_to_string(new_sizes));
  if (num_elements(new_sizes) != x.size())
    fail("reshape", "cannot reshape " + type_str(x) + " (" + std::to_string(x.size()) +
                        " elements) to " + shape_to_string(new_sizes) + " (" +
                        std::to_string(num_elements(new_sizes)) + " elements)");
  if (new_sizes == x.shape()) return x;
  return trace::bind1(spec("stablehlo.reshape", new_sizes, x.dtype()), {x});
}

Array transpose(const Array& x, const std::vector<int64_t>& permutation) {
  check_valid("transpose", x);
  const int64_t n = x.ndim();
  bool is_perm = static_cast<int64_t>(permutation.size()) == n;
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (size_t i = 0; is_perm && i < permutation.size(); ++i) {
    const int64_t p = permutation[i];
    is_perm = p >= 0 && p < n && !seen[p];
    if (is_perm) seen[p] = true;
  }
  if (!is_perm)
    fail("transpose", "permutation " + list_str(permutation) +
                          " is not a permutation of the dimensions of " + type_str(x));
  bool identity = true;
  Shape shape;
  for (int64_t i = 0; i < n; ++i) {
    identity = identity && permutation[i] == i;
    shape.push_back(x.shape()[permutation[i]]);
  }
  if (identity) return x;
  return trace::bind1(
      spec("stablehlo.transpose", shape, x.dtype(), {{"permutation", dense(permutation)}}), {x});
}

Array rev(const Array& x, const std::vector<int64_t>& dimensions) {
  check_valid("rev", x);
  const auto dims = canonical_axes("rev", dimensions, x.ndim());
  if (dims.empty()) return x;
  return trace::bind1(
      spec("stablehlo.reverse", x.shape(), x.dtype(), {{"dimensions", dense(dims)}}), {x});
}

Array squeeze(const Array& x, const std::vector<int64_t>& dimensions) {
  check_valid("squeeze", x);
  const auto dims = canonical_axes("squeeze", dimensions, x.ndim());
  Shape shape;
  for (int64_t i = 0; i < x.ndim(); ++i) {
    const bool drop = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (drop && x.shape()[i] != 1)
      fail("squeeze", "cannot squeeze dimension " + std::to_string(i) + " of " + type_str(x) +
                          ": its size is not 1");
    if (!drop) shape.push_back(x.shape()[i]);
  }
  return reshape(x, shape);
}

Array expand_dims(const Array& x, const std::vector<int64_t>& dimensions) {
  check_valid("expand_dims", x);
  const int64_t out_rank = x.ndim() + static_cast<int64_t>(dimensions.size());
  const auto dims = canonical_axes("expand_dims", dimensions, out_rank);
  Shape shape;
  std::vector<int64_t> bdims;
  int64_t k = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    if (std::find(dims.begin(), dims.end(), i) != dims.end()) {
      shape.push_back(1);
    } else {
      shape.push_back(x.shape()[k++]);
      bdims.push_back(i);
    }
  }
  if (dims.empty()) return x;
  return broadcast_in_dim(x, shape, bdims);
}

Array slice(const Array& x, const std::vector<int64_t>& start_indices,
            const std::vector<int64_t>& limit_indices, const std::vector<int64_t>& strides) {
  const std::string op = "slice";
  check_valid(op, x);
  const size_t n = static_cast<size_t>(x.ndim());
  const std::vector<int64_t> st = strides.empty() ? std::vector<int64_t>(n, 1) : strides;
  if (start_indices.size() != n || limit_indices.size() != n || st.size() != n)
    fail(op, "start_indices " + list_str(start_indices) + ", limit_indices " +
                 list_str(limit_indices) + " and strides " + list_str(st) +
                 " must have one entry per dimension of " + type_str(x));
  Shape shape;
  for (size_t i = 0; i < n; ++i) {
    const int64_t s = start_indices[i], l = limit_indices[i], d = x.shape()[i];
    if (s < 0 || l > d || s > l || st[i] < 1)
      fail(op, "invalid slice " + list_str(start_indices) + ":" + list_str(limit_indices) +
                   " with strides " + list_str(st) + " of " + type_str(x) + " in dimension " +
                   std::to_string(i));
    shape.push_back((l - s + st[i] - 1) / st[i]);
  }
  return trace::bind1(spec("stablehlo.slice", shape, x.dtype(),
                           {{"start_indices", dense(start_indices)},
                            {"limit_indices", dense(limit_indices)},
                            {"strides", dense(st)}}),
                      {x});
}

Array slice_in_dim(const Array& x, int64_t start, int64_t limit, int64_t stride, int64_t axis) {
  check_valid("slice_in_dim", x);
  const int64_t a = canonical_axis("slice_in_dim", axis, x.ndim());
  const int64_t d = x.shape()[a];
  if (start < 0) start += d;
  if (limit < 0) limit += d;
  std::vector<int64_t> starts(x.ndim(), 0), limits = x.shape(), strides(x.ndim(), 1);
  starts[a] = start;
  limits[a] = limit;
  strides[a] = stride;
  return slice(x, starts, limits, strides);
}

namespace {

// Checks scalar integer start indices, converts them to one dtype and makes negative starts
// count from the end (as jax.lax's _dynamic_slice_indices).
std::vector<Array> start_indices_for(const std::string& op, const Array& x,
                                     const std::vector<Array>& starts) {
  if (static_cast<int64_t>(starts.size()) != x.ndim())
    fail(op, "needs one start index per dimension of " + type_str(x) + ", got " +
                 std::to_string(starts.size()));
  bool mixed = false, wide = false;
  for (const auto& s : starts) {
    check_dtype(op, s, Kinds::Int, "start indices");
    if (!s.shape().empty()) fail(op, "start indices must be scalars, got " + type_str(s));
    mixed = mixed || s.dtype() != starts[0].dtype();
    wide = wide || bit_width(s.dtype()) == 64;
  }
  std::vector<Array> out;
  for (size_t i = 0; i < starts.size(); ++i) {
    Array s = mixed ? convert_element_type(starts[i], wide ? DType::I64 : DType::I32) : starts[i];
    s = trace::with_weak_type(s, false);
    if (is_signed_int(s.dtype()))
      s = select(lt(s, constant(0, s.dtype())), add(s, constant(x.shape()[i], s.dtype())), s);
    out.push_back(s);
  }
  return out;
}

}  // namespace

Array dynamic_slice(const Array& x, const std::vector<Array>& start_indices,
                    const std::vector<int64_t>& slice_sizes) {
  const std::string op = "dynamic_slice";
  check_valid(op, x);
  if (static_cast<int64_t>(slice_sizes.size()) != x.ndim())
    fail(op, "slice_sizes " + list_str(slice_sizes) + " must have one entry per dimension of " +
                 type_str(x));
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (slice_sizes[i] < 0 || slice_sizes[i] > x.shape()[i])
      fail(op, "slice_sizes " + list_str(slice_sizes) + " do not fit in " + type_str(x));
  std::vector<Array> operands = {x};
  for (auto& s : start_indices_for(op, x, start_indices)) operands.push_back(s);
  return trace::bind1(spec("stablehlo.dynamic_slice", slice_sizes, x.dtype(),
                           {{"slice_sizes", dense(slice_sizes)}}),
                      operands);
}

Array dynamic_update_slice(const Array& x, const Array& update,
                           const std::vector<Array>& start_indices) {
  const std::string op = "dynamic_update_slice";
  check_valid(op, x);
  check_valid(op, update);
  if (update.dtype() != x.dtype() || update.ndim() != x.ndim())
    fail(op, "update must have the operand's dtype and rank, got " + type_str(x) + " and " +
                 type_str(update));
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (update.shape()[i] > x.shape()[i])
      fail(op, "update " + type_str(update) + " does not fit in " + type_str(x));
  std::vector<Array> operands = {x, update};
  for (auto& s : start_indices_for(op, x, start_indices)) operands.push_back(s);
  return trace::bind1(spec("stablehlo.dynamic_update_slice", x.shape(), x.dtype()), operands);
}

Array dynamic_slice_in_dim(const Array& x, const Array& start_index, int64_t slice_size,
                           int64_t axis) {
  check_valid("dynamic_slice_in_dim", x);
  check_valid("dynamic_slice_in_dim", start_index);
  const int64_t a = canonical_axis("dynamic_slice_in_dim", axis, x.ndim());
  std::vector<Array> starts;
  for (int64_t i = 0; i < x.ndim(); ++i)
    starts.push_back(i == a ? start_index : constant(0, start_index.dtype()));
  Shape sizes = x.shape();
  sizes[a] = slice_size;
  return dynamic_slice(x, starts, sizes);
}

Array dynamic_update_slice_in_dim(const Array& x, const Array& update, const Array& start_index,
                                  int64_t axis) {
  check_valid("dynamic_update_slice_in_dim", x);
  check_valid("dynamic_update_slice_in_dim", start_index);
  const int64_t a = canonical_axis("dynamic_update_slice_in_dim", axis, x.ndim());
  std::vector<Array> starts;
  for (int64_t i = 0; i < x.ndim(); ++i)
    starts.push_back(i == a ? start_index : constant(0, start_index.dtype()));
  return dynamic_update_slice(x, update, starts);
}

Array concatenate(const std::vector<Array>& operands, int64_t dimension) {
  const std::string op = "concatenate";
  if (operands.empty()) fail(op, "needs at least one operand");
  for (const auto& a : operands) check_valid(op, a);
  const Array& first = operands[0];
  if (first.ndim() == 0) fail(op, "cannot concatenate scalars, got " + type_str(first));
  const int64_t d = canonical_axis(op, dimension, first.ndim());
  Shape shape = first.shape();
  shape[d] = 0;
  for (const auto& a : operands) {
    bool ok = a.dtype() == first.dtype() && a.ndim() == first.ndim();
    for (int64_t i = 0; ok && i < a.ndim(); ++i) ok = i == d || a.shape()[i] == first.shape()[i];
    if (!ok)
      fail(op, "operands must have the same dtype and the same shape except in dimension " +
                   std::to_string(d) + ", got " + type_str(first) + " and " + type_str(a));
    shape[d] += a.shape()[d];
  }
  if (operands.size() == 1) return first;
  return trace::bind1(
      spec("stablehlo.concatenate", shape, first.dtype(), {{"dimension", i64_attr(d)}}), operands);
}

Array pad(const Array& x, const Array& padding_value, const std::vector<PadConfig>& config) {
  const std::string op = "pad";
  check_valid(op, x);
  check_valid(op, padding_value);
  if (padding_value.dtype() != x.dtype() || !padding_value.shape().empty())
    fail(op, "padding_value must be a scalar of the operand's dtype, got " + type_str(x) + " and " +
                 type_str(padding_value));
  if (static_cast<int64_t>(config.size()) != x.ndim())
    fail(op, "needs one padding config per dimension of " + type_str(x) + ", got " +
                 std::to_string(config.size()));
  std::vector<int64_t> lo, hi, interior;
  Shape shape;
  for (int64_t i = 0; i < x.ndim(); ++i) {
    const PadConfig& c = config[i];
    const int64_t d = x.shape()[i];
    if (c.interior < 0)
      fail(op, "interior padding must be >= 0, got " + std::to_string(c.interior) +
                   " in dimension " + std::to_string(i));
    const int64_t size = c.low + c.high + d + std::max<int64_t>(d - 1, 0) * c.interior;
    if (size < 0)
      fail(op, "padding (" + std::to_string(c.low) + ", " + std::to_string(c.high) + ", " +
                   std::to_string(c.interior) + ") of dimension " + std::to_string(i) + " of " +
                   type_str(x) + " gives a negative size");
    lo.push_back(c.low);
    hi.push_back(c.high);
    interior.push_back(c.interior);
    shape.push_back(size);
  }
  return trace::bind1(spec("stablehlo.pad", shape, x.dtype(),
                           {{"edge_padding_low", dense(lo)},
                            {"edge_padding_high", dense(hi)},
                            {"interior_padding", dense(interior)}}),
                      {x, padding_value});
}

Array broadcasted_iota(DType dtype, const Shape& shape, int64_t dimension) {
  const std::string op = "broadcasted_iota";
  if (!dtype_in(dtype, Kinds::Num))
    fail(op, "dtype must be a number type, got " + std::string(mlir_name(dtype)));
  for (int64_t d : shape)
    if (d < 0) fail(op, "negative dimension in shape " + shape_to_string(shape));
  const int64_t d = canonical_axis(op, dimension, static_cast<int64_t>(shape.size()));
  return trace::bind1(spec("stablehlo.iota", shape, dtype, {{"iota_dimension", i64_attr(d)}}), {});
}

Array iota(DType dtype, int64_t size) {
  if (size < 0) fail("iota", "size must be >= 0, got " + std::to_string(size));
  return broadcasted_iota(dtype, {size}, 0);
}

std::vector<Array> optimization_barrier(const std::vector<Array>& operands) {
  trace::OpSpec s;
  s.name = "stablehlo.optimization_barrier";
  for (const auto& a : operands) {
    check_valid("optimization_barrier", a);
    s.result_types.push_back(trace::ir_type(a.aval()));
  }
  if (operands.empty()) return {};
  return trace::bind(s, operands);
}

}  // namespace cujax::lax
