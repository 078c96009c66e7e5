// NumPy indexing (at), index updates (at_set, at_add, ...), take, take_along_axis, one_hot.
//
// x[index] is lowered in three steps: one slice (with a reverse for negative steps) for the
// integer and slice items, one reshape that drops integer dimensions and inserts new axes,
// then, when there are array indices, one gather. Updates use the same lowering on an iota of
// x's flat positions, which gives the flat position of every element x[index] reads; the
// values are then scattered into the flattened x.
#include <algorithm>
#include <limits>

#include "numpy/internal.h"

namespace cujax::numpy {

using detail::convert;
using detail::fail;
using detail::fail_index;
using detail::reshape_keep_weak;
using detail::set_weak;

namespace {

bool is_array(const IndexItem& it) {
  return std::holds_alternative<Array>(it.v);
}

// The fill value of JAX's "fill" mode for a dtype.
double default_fill(DType t) {
  if (is_float(t) || is_complex(t)) return std::numeric_limits<double>::quiet_NaN();  // nan+0j
  if (t == DType::Bool) return 1;
  double v = 0;
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      v = std::is_signed_v<T> ? static_cast<double>(std::numeric_limits<T>::min())
                              : static_cast<double>(std::numeric_limits<T>::max());
    }
  });
  return v;
}

// Replaces concrete bool masks by the integer arrays of their true positions.
Index expand_masks(const std::string& fn, const Index& index) {
  Index out;
  for (const auto& it : index) {
    if (!is_array(it) || std::get<Array>(it.v).dtype() != DType::Bool) {
      out.push_back(it);
      continue;
    }
    const Array& mask = std::get<Array>(it.v);
    if (mask.is_tracer())
      fail_index(fn, "a boolean index (shape " + shape_to_string(mask.shape()) +
                         ") needs a concrete value, which a traced array does not have: the "
                         "result's shape would depend on it. Use numpy::where(mask, x, 0), or "
                         "pass the mask as a static argument.");
    if (mask.ndim() == 0) fail_index(fn, "a 0-d boolean index is not supported");
    for (const auto& a : nonzero(mask)) out.push_back(a);
  }
  return out;
}

struct SliceBounds {
  int64_t start, len, step;
};

SliceBounds normalize_slice(const std::string& fn, const Slice& s, int64_t n) {
  const int64_t step = s.step.value_or(1);
  if (step == 0) fail_index(fn, "slice step cannot be zero");
  int64_t start, stop;
  if (step > 0) {
    start = s.start ? *s.start : 0;
    stop = s.stop ? *s.stop : n;
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    start = std::clamp<int64_t>(start, 0, n);
    stop = std::clamp<int64_t>(stop, 0, n);
    const int64_t len = stop > start ? (stop - start + step - 1) / step : 0;
    return {start, len, step};
  }
  start = s.start ? *s.start : n - 1;
  stop = s.stop ? *s.stop : -1;
  if (s.start && start < 0) start += n;
  if (s.stop && stop < 0) stop += n;
  start = std::clamp<int64_t>(start, -1, n - 1);
  stop = std::clamp<int64_t>(stop, -1, n - 1);
  const int64_t len = start > stop ? (start - stop - step - 1) / (-step) : 0;
  return {start, len, step};
}

// An integer index array of `dtype` with negative entries counted from the end.
Array normalize_index_array(const Array& idx, int64_t n, DType dtype, IndexMode mode) {
  Array i = convert(idx, dtype);
  if (mode == IndexMode::Wrap)
    return remainder(i, lax::full(i.shape(), static_cast<double>(n), dtype));
  if (!is_signed_int(dtype)) return i;
  Array neg = lax::lt(i, lax::full(i.shape(), 0, dtype));
  return lax::select(neg, lax::add(i, lax::full(i.shape(), static_cast<double>(n), dtype)), i);
}

}  // namespace

namespace detail {

Array gather_index(const std::string& fn, const Array& x, const Index& index_in, IndexMode mode,
                   std::optional<double> fill) {
  const Index index = expand_masks(fn, index_in);
  const int64_t ndim = x.ndim();
  int64_t consumed = 0, ellipses = 0;
  for (const auto& it : index) {
    if (std::holds_alternative<EllipsisT>(it.v))
      ++ellipses;
    else if (!std::holds_alternative<NewAxisT>(it.v))
      ++consumed;
  }
  if (ellipses > 1) fail_index(fn, "an index can only have a single ellipsis ('...')");
  if (consumed > ndim)
    fail_index(fn, "too many indices for array: array is " + std::to_string(ndim) +
                       "-dimensional, but " + std::to_string(consumed) + " were indexed");
  Index items;
  for (const auto& it : index) {
    if (std::holds_alternative<EllipsisT>(it.v)) {
      for (int64_t i = consumed; i < ndim; ++i) items.push_back(Slice());
    } else {
      items.push_back(it);
    }
  }
  if (!ellipses)
    for (int64_t i = consumed; i < ndim; ++i) items.push_back(Slice());
  const bool advanced = std::any_of(items.begin(), items.end(), is_array);

  // Step 1: slices (and integers, when there are no array indices) on x.
  std::vector<int64_t> starts(ndim, 0), limits = x.shape(), strides(ndim, 1), rev;
  std::vector<int64_t> int_value(items.size(), 0);
  {
    int64_t d = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      const auto& it = items[k];
      if (std::holds_alternative<NewAxisT>(it.v)) continue;
      const int64_t n = x.shape()[d];
      if (const int64_t* i = std::get_if<int64_t>(&it.v)) {
        const int64_t v = *i < 0 ? *i + n : *i;
        if (v < 0 || v >= n)
          fail_index(fn, "index " + std::to_string(*i) + " is out of bounds for axis " +
                             std::to_string(d) + " with size " + std::to_string(n));
        int_value[k] = v;
        if (!advanced) {
          starts[d] = v;
          limits[d] = v + 1;
        }
      } else if (const Slice* s = std::get_if<Slice>(&it.v)) {
        const SliceBounds b = normalize_slice(fn, *s, n);
        int64_t start = b.start, step = b.step;
        if (step < 0) {
          rev.push_back(d);
          start = n - 1 - start;
          step = -step;
        }
        if (b.len == 0) {
          starts[d] = limits[d] = std::clamp<int64_t>(start, 0, n);
        } else {
          starts[d] = start;
          limits[d] = start + (b.len - 1) * step + 1;
          strides[d] = step;
        }
      }
      ++d;
    }
  }
  Array y = x;
  if (!rev.empty()) y = lax::rev(y, rev);
  bool sliced = false;
  for (int64_t d = 0; d < ndim; ++d)
    sliced = sliced || starts[d] != 0 || limits[d] != x.shape()[d] || strides[d] != 1;
  if (sliced) y = lax::slice(y, starts, limits, strides);

  // Step 2: drop integer dimensions, insert new axes.
  Shape shape2;
  std::vector<int64_t> adv_dim;  // y-dimension of each advanced item
  std::vector<size_t> adv_item;  // position of each advanced item in `items`
  {
    int64_t d = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      const auto& it = items[k];
      if (std::holds_alternative<NewAxisT>(it.v)) {
        shape2.push_back(1);
        continue;
      }
      const bool is_int = std::holds_alternative<int64_t>(it.v);
      if (is_int && !advanced) {
        ++d;
        continue;
      }
      if (is_array(it) || is_int) {
        adv_dim.push_back(static_cast<int64_t>(shape2.size()));
        adv_item.push_back(k);
      }
      shape2.push_back(y.shape()[d]);
      ++d;
    }
  }
  y = reshape_keep_weak(set_weak(y, x.weak_type()), shape2);
  if (!advanced) return set_weak(y, x.weak_type());

  // Step 3: gather the advanced indices.
  std::vector<Shape> idx_shapes;
  bool wide = false;
  for (size_t j = 0; j < adv_item.size(); ++j) {
    const auto& it = items[adv_item[j]];
    if (is_array(it)) {
      const Array& a = std::get<Array>(it.v);
      if (!is_integer(a.dtype()))
        fail_index(fn, "indices must be integers or bools, got " + dtype_str(a.dtype()));
      wide = wide || size_of(a.dtype()) == 8 || a.dtype() == DType::U32;
      idx_shapes.push_back(a.shape());
    } else {
      idx_shapes.push_back({});
    }
    wide = wide || y.shape()[adv_dim[j]] > std::numeric_limits<int32_t>::max();
  }
  Shape batch;
  {
    bool ok = true;
    size_t r = 0;
    for (const auto& s : idx_shapes) r = std::max(r, s.size());
    batch.assign(r, 1);
    for (const auto& s : idx_shapes)
      for (size_t i = 0; i < s.size(); ++i) {
        int64_t& b = batch[r - s.size() + i];
        if (s[i] == b || s[i] == 1) continue;
        if (b == 1)
          b = s[i];
        else
          ok = false;
      }
    if (!ok) {
      std::string shapes;
      for (const auto& s : idx_shapes) shapes += " " + shape_to_string(s);
      fail_index(fn,
                 "shape mismatch: indexing arrays could not be broadcast together with "
                 "shapes" +
                     shapes);
    }
  }
  const DType it_t = wide ? DType::I64 : DType::I32;
  Shape col_shape = batch;
  col_shape.push_back(1);
  std::vector<Array> columns;
  Array valid;
  for (size_t j = 0; j < adv_item.size(); ++j) {
    const auto& it = items[adv_item[j]];
    const int64_t n = y.shape()[adv_dim[j]];
    Array idx;
    if (is_array(it)) {
      idx = normalize_index_array(std::get<Array>(it.v), n, it_t, mode);
      if (mode == IndexMode::Fill) {
        Array ok =
            lax::bitwise_and(lax::ge(idx, lax::full(idx.shape(), 0, it_t)),
                             lax::lt(idx, lax::full(idx.shape(), static_cast<double>(n), it_t)));
        ok = broadcast_to_shape(ok, batch);
        valid = valid.valid() ? lax::bitwise_and(valid, ok) : ok;
      }
    } else {
      idx = lax::full({}, static_cast<double>(int_value[adv_item[j]]), it_t);
    }
    columns.push_back(lax::reshape(broadcast_to_shape(idx, batch), col_shape));
  }
  Array indices = columns.size() == 1
                      ? columns[0]
                      : lax::concatenate(columns, static_cast<int64_t>(batch.size()));
  bool adjacent = true;
  for (size_t j = 1; j < adv_item.size(); ++j)
    adjacent = adjacent && adv_item[j] == adv_item[j - 1] + 1;
  const int64_t nb = static_cast<int64_t>(batch.size());
  const int64_t r = y.ndim();
  const int64_t k = static_cast<int64_t>(adv_dim.size());
  const int64_t pos = adjacent ? adv_dim[0] : 0;  // where the batch dimensions go
  lax::GatherDimensionNumbers dims;
  dims.collapsed_slice_dims = adv_dim;
  dims.start_index_map = adv_dim;
  dims.index_vector_dim = nb;
  for (int64_t j = 0; j < r - k; ++j) dims.offset_dims.push_back(j < pos ? j : j + nb);
  std::vector<int64_t> slice_sizes = y.shape();
  for (int64_t d : adv_dim) slice_sizes[d] = 1;
  Array g = lax::gather(y, indices, dims, slice_sizes);
  if (mode == IndexMode::Fill && valid.valid()) {
    std::vector<int64_t> bdims;
    for (int64_t j = 0; j < nb; ++j) bdims.push_back(pos + j);
    Array mask = lax::broadcast_in_dim(valid, g.shape(), bdims);
    Array f = lax::full(g.shape(), fill.value_or(default_fill(g.dtype())), g.dtype());
    g = lax::select(mask, g, f);
  }
  return set_weak(g, x.weak_type());
}

}  // namespace detail

Array at(const Array& x, const Index& index) {
  return detail::gather_index("at", x, index, IndexMode::Clip);
}

namespace {

enum class Update { Set, Add, Mul, Min, Max };

Array scatter_index(const char* fn, const Array& x, const Index& index, const ArrayLike& values,
                    Update kind, bool negate = false) {
  const int64_t n = x.size();
  const DType it_t = n + 1 > std::numeric_limits<int32_t>::max() ? DType::I64 : DType::I32;
  // The flat position of every element that x[index] reads; n (a dummy slot) where an array
  // index is out of range, so that the update is dropped.
  Array positions = lax::reshape(lax::iota(it_t, n), x.shape());
  Array target =
      detail::gather_index(fn, positions, index, IndexMode::Fill, static_cast<double>(n));
  const Shape& rs = target.shape();
  Array v = detail::to_dtype(fn, values, x.dtype());
  {
    const Shape& vs = v.shape();
    bool ok = vs.size() <= rs.size();
    for (size_t i = 0; ok && i < vs.size(); ++i)
      ok = vs[i] == 1 || vs[i] == rs[rs.size() - vs.size() + i];
    if (!ok)
      fail(fn, "values of shape " + shape_to_string(vs) +
                   " cannot be broadcast to the indexed shape " + shape_to_string(rs));
  }
  v = detail::broadcast_to_shape(v, rs);
  if (negate) v = lax::neg(v);
  const int64_t m = num_elements(rs);
  Array flat = lax::concatenate({lax::reshape(x, {n}), lax::full({1}, 0, x.dtype())}, 0);
  Array idx = lax::reshape(target, {m, 1});
  Array upd = lax::reshape(v, {m});
  lax::ScatterDimensionNumbers dims;
  dims.inserted_window_dims = {0};
  dims.scatter_dims_to_operand_dims = {0};
  dims.index_vector_dim = 1;
  Array out;
  switch (kind) {
    case Update::Set:
      out = lax::scatter(flat, idx, upd, dims);
      break;
    case Update::Add:
      out = lax::scatter_add(flat, idx, upd, dims);
      break;
    case Update::Mul:
      out = lax::scatter_mul(flat, idx, upd, dims);
      break;
    case Update::Min:
      out = lax::scatter_min(flat, idx, upd, dims);
      break;
    case Update::Max:
      out = lax::scatter_max(flat, idx, upd, dims);
      break;
  }
  out = lax::reshape(lax::slice(out, {0}, {n}), x.shape());
  return set_weak(out, x.weak_type());
}

}  // namespace

Array at_set(const Array& x, const Index& index, const ArrayLike& values) {
  return scatter_index("at_set", x, index, values, Update::Set);
}
Array at_add(const Array& x, const Index& index, const ArrayLike& values) {
  return scatter_index("at_add", x, index, values, Update::Add);
}
Array at_subtract(const Array& x, const Index& index, const ArrayLike& values) {
  return scatter_index("at_subtract", x, index, values, Update::Add, true);
}
Array at_multiply(const Array& x, const Index& index, const ArrayLike& values) {
  return scatter_index("at_multiply", x, index, values, Update::Mul);
}
Array at_min(const Array& x, const Index& index, const ArrayLike& values) {
  return scatter_index("at_min", x, index, values, Update::Min);
}
Array at_max(const Array& x, const Index& index, const ArrayLike& values) {
  return scatter_index("at_max", x, index, values, Update::Max);
}

Array take(const Array& x, const ArrayLike& indices, std::optional<int64_t> axis, IndexMode mode) {
  if (!axis) return take(ravel(x), indices, 0, mode);
  const int64_t ax = detail::normalize_axis("take", *axis, x.ndim());
  Array idx = indices.to_array();
  if (!is_integer(idx.dtype()))
    fail("take", "indices must be integers, got " + detail::dtype_str(idx.dtype()));
  Index index;
  for (int64_t i = 0; i < ax; ++i) index.push_back(Slice());
  index.push_back(idx);
  return detail::gather_index("take", x, index, mode);
}

Array take_along_axis(const Array& x, const Array& indices, int64_t axis, IndexMode mode) {
  if (indices.ndim() != x.ndim())
    fail("take_along_axis", "indices and array must have the same number of dimensions; " +
                                std::to_string(indices.ndim()) + " vs " + std::to_string(x.ndim()));
  if (!is_integer(indices.dtype()))
    fail("take_along_axis", "indices must be integers, got " + detail::dtype_str(indices.dtype()));
  const int64_t ax = detail::normalize_axis("take_along_axis", axis, x.ndim());
  Index index;
  for (int64_t d = 0; d < x.ndim(); ++d) {
    if (d == ax) {
      index.push_back(indices);
      continue;
    }
    const int64_t n = x.shape()[d], m = indices.shape()[d];
    if (n != m && n != 1 && m != 1)
      fail("take_along_axis", "shapes " + detail::shapes_str({x.shape(), indices.shape()}) +
                                  " cannot be broadcast outside axis " + std::to_string(ax));
    Shape s(x.ndim(), 1);
    s[d] = n;
    index.push_back(lax::broadcasted_iota(DType::I32, s, d));
  }
  return detail::gather_index("take_along_axis", x, index, mode);
}

Array one_hot(const Array& x, int64_t num_classes, DType dtype, int64_t axis) {
  const int64_t out_rank = x.ndim() + 1;
  const int64_t ax = detail::normalize_axis("one_hot", axis, out_rank);
  Array xe = expand_dims(x, ax);
  Shape s(out_rank, 1);
  s[ax] = num_classes;
  const DType t = x.dtype() == DType::Bool ? DType::I32 : x.dtype();
  Array classes = lax::broadcasted_iota(t, s, ax);
  return astype(equal(xe, classes), dtype);
}

std::vector<Array> nonzero(const Array& x) {
  if (x.is_tracer())
    fail("nonzero", "the result's shape depends on the values, which a traced array (" +
                        x.aval().str() + ") does not have; call it outside jit");
  const HostTensor h = x.to_host();
  const int64_t nd = std::max<int64_t>(1, x.ndim());
  std::vector<std::vector<int32_t>> coords(nd);
  const std::vector<int64_t> strides = row_major_strides(x.shape());
  visit_dtype(h.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = h.data_as<T>();
    for (int64_t i = 0; i < h.size(); ++i) {
      if (static_cast<double>(p[i]) == 0.0) continue;
      int64_t rem = i;
      for (int64_t d = 0; d < x.ndim(); ++d) {
        coords[d].push_back(static_cast<int32_t>(rem / strides[d]));
        rem %= strides[d];
      }
      if (x.ndim() == 0) coords[0].push_back(0);
    }
  });
  std::vector<Array> out;
  for (int64_t d = 0; d < x.ndim(); ++d) out.push_back(cujax::array(coords[d]));
  return out;
}

}  // namespace cujax::numpy

namespace cujax {

Array Array::operator[](const IndexItem& item) const {
  return numpy::at(*this, {item});
}

Array Array::operator[](std::initializer_list<IndexItem> index) const {
  return numpy::at(*this, Index(index));
}

Array Array::operator[](const std::vector<IndexItem>& index) const {
  return numpy::at(*this, index);
}

}  // namespace cujax
