// Shape manipulation: reshape, transpose, concatenate, split, flip, tile, pad, tril/triu...
#include <algorithm>
#include <numeric>

#include "numpy/internal.h"

namespace cujax::numpy {

using detail::fail;
using detail::normalize_axis;
using detail::reshape_keep_weak;
using detail::set_weak;

Array reshape(const Array& x, const Shape& shape) {
  Shape s = shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) fail("reshape", "can only specify one unknown dimension");
      infer = static_cast<int>(i);
    } else if (s[i] < 0) {
      fail("reshape",
           "invalid dimension " + std::to_string(s[i]) + " in shape " + shape_to_string(shape));
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.size() % known != 0)
      fail("reshape", "cannot reshape array of shape " + shape_to_string(x.shape()) + " (" +
                          std::to_string(x.size()) + " elements) into shape " +
                          shape_to_string(shape));
    s[infer] = x.size() / known;
  }
  if (num_elements(s) != x.size())
    fail("reshape", "cannot reshape array of shape " + shape_to_string(x.shape()) + " (" +
                        std::to_string(x.size()) + " elements) into shape " +
                        shape_to_string(shape));
  return reshape_keep_weak(x, s);
}

Array ravel(const Array& x) {
  return reshape_keep_weak(x, {x.size()});
}

Array transpose(const Array& x, const std::optional<std::vector<int64_t>>& axes) {
  const int64_t n = x.ndim();
  std::vector<int64_t> perm;
  if (!axes) {
    for (int64_t i = n - 1; i >= 0; --i) perm.push_back(i);
  } else {
    if (static_cast<int64_t>(axes->size()) != n)
      fail("transpose", "axes don't match array: " + std::to_string(axes->size()) +
                            " axes for an array of shape " + shape_to_string(x.shape()));
    std::vector<bool> seen(n, false);
    for (int64_t a : *axes) {
      const int64_t p = normalize_axis("transpose", a, n);
      if (seen[p]) fail("transpose", "repeated axis in transpose");
      seen[p] = true;
      perm.push_back(p);
    }
  }
  bool identity = true;
  for (int64_t i = 0; i < n; ++i) identity = identity && perm[i] == i;
  if (identity) return x;
  return set_weak(lax::transpose(x, perm), x.weak_type());
}

Array swapaxes(const Array& x, int64_t axis1, int64_t axis2) {
  const int64_t a = normalize_axis("swapaxes", axis1, x.ndim());
  const int64_t b = normalize_axis("swapaxes", axis2, x.ndim());
  std::vector<int64_t> perm(x.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[a], perm[b]);
  return transpose(x, perm);
}

Array matrix_transpose(const Array& x) {
  if (x.ndim() < 2)
    fail("matrix_transpose",
         "x must be at least two-dimensional for matrix_transpose; got "
         "shape " +
             shape_to_string(x.shape()));
  return swapaxes(x, -1, -2);
}

Array moveaxis(const Array& x, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination) {
  if (source.size() != destination.size())
    fail("moveaxis", "source and destination must have the same number of elements");
  const int64_t n = x.ndim();
  std::vector<int64_t> src, dst;
  for (int64_t a : source) src.push_back(normalize_axis("moveaxis", a, n));
  for (int64_t a : destination) dst.push_back(normalize_axis("moveaxis", a, n));
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < n; ++i)
    if (std::find(src.begin(), src.end(), i) == src.end()) perm.push_back(i);
  std::vector<std::pair<int64_t, int64_t>> order;
  for (size_t i = 0; i < src.size(); ++i) order.push_back({dst[i], src[i]});
  std::sort(order.begin(), order.end());
  for (auto [d, s] : order) perm.insert(perm.begin() + d, s);
  return transpose(x, perm);
}

Array moveaxis(const Array& x, int64_t source, int64_t destination) {
  return moveaxis(x, std::vector<int64_t>{source}, std::vector<int64_t>{destination});
}

Array expand_dims(const Array& x, const Axes& axis) {
  if (axis.is_none()) fail("expand_dims", "axis must be given");
  const int64_t out_rank = x.ndim() + static_cast<int64_t>(axis.axes->size());
  const std::vector<int64_t> axes = detail::normalize_axes("expand_dims", axis, out_rank);
  Shape s;
  size_t src = 0, k = 0;
  for (int64_t i = 0; i < out_rank; ++i) {
    if (k < axes.size() && axes[k] == i) {
      s.push_back(1);
      ++k;
    } else {
      s.push_back(x.shape()[src++]);
    }
  }
  return reshape_keep_weak(x, s);
}

Array squeeze(const Array& x, const Axes& axis) {
  std::vector<int64_t> axes;
  if (axis.is_none()) {
    for (int64_t i = 0; i < x.ndim(); ++i)
      if (x.shape()[i] == 1) axes.push_back(i);
  } else {
    axes = detail::normalize_axes("squeeze", axis, x.ndim());
    for (int64_t a : axes)
      if (x.shape()[a] != 1)
        fail("squeeze",
             "cannot select an axis to squeeze out which has size not equal to one "
             "(axis " +
                 std::to_string(a) + " of shape " + shape_to_string(x.shape()) + ")");
  }
  Shape s;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) s.push_back(x.shape()[i]);
  return reshape_keep_weak(x, s);
}

Array atleast_1d(const Array& x) {
  return x.ndim() >= 1 ? x : reshape_keep_weak(x, {1});
}

Array atleast_2d(const Array& x) {
  if (x.ndim() >= 2) return x;
  if (x.ndim() == 1) return reshape_keep_weak(x, {1, x.shape()[0]});
  return reshape_keep_weak(x, {1, 1});
}

Array atleast_3d(const Array& x) {
  if (x.ndim() >= 3) return x;
  if (x.ndim() == 2) return reshape_keep_weak(x, {x.shape()[0], x.shape()[1], 1});
  if (x.ndim() == 1) return reshape_keep_weak(x, {1, x.shape()[0], 1});
  return reshape_keep_weak(x, {1, 1, 1});
}

Array concatenate(const std::vector<Array>& xs, std::optional<int64_t> axis) {
  if (xs.empty()) fail("concatenate", "need at least one array to concatenate");
  if (!axis) {
    std::vector<Array> flat;
    for (const auto& x : xs) flat.push_back(ravel(x));
    return concatenate(flat, 0);
  }
  const Array& first = xs[0];
  if (first.ndim() == 0) fail("concatenate", "zero-dimensional arrays cannot be concatenated");
  const int64_t ax = normalize_axis("concatenate", *axis, first.ndim());
  for (size_t i = 1; i < xs.size(); ++i) {
    if (xs[i].ndim() != first.ndim())
      fail("concatenate",
           "all the input arrays must have same number of dimensions, but the "
           "array at index 0 has " +
               std::to_string(first.ndim()) + " dimension(s) and the array at index " +
               std::to_string(i) + " has " + std::to_string(xs[i].ndim()) + " dimension(s)");
    for (int64_t d = 0; d < first.ndim(); ++d)
      if (d != ax && xs[i].shape()[d] != first.shape()[d])
        fail("concatenate",
             "all the input array dimensions except for the concatenation axis must match "
             "exactly, but along dimension " +
                 std::to_string(d) + ", the array at index 0 has size " +
                 std::to_string(first.shape()[d]) + " and the array at index " + std::to_string(i) +
                 " has size " + std::to_string(xs[i].shape()[d]));
  }
  std::vector<ArrayLike> args(xs.begin(), xs.end());
  auto p = detail::promote("concatenate", args, false);
  if (p.args.size() == 1) return p.args[0];
  return set_weak(lax::concatenate(p.args, ax), p.type.weak_type);
}

Array stack(const std::vector<Array>& xs, int64_t axis) {
  if (xs.empty()) fail("stack", "need at least one array to stack");
  for (size_t i = 1; i < xs.size(); ++i)
    if (xs[i].shape() != xs[0].shape())
      fail("stack", "all input arrays must have the same shape, got " +
                        detail::shapes_str({xs[0].shape(), xs[i].shape()}));
  const int64_t ax = normalize_axis("stack", axis, xs[0].ndim() + 1);
  std::vector<Array> expanded;
  for (const auto& x : xs) expanded.push_back(expand_dims(x, ax));
  return concatenate(expanded, ax);
}

Array hstack(const std::vector<Array>& xs) {
  std::vector<Array> a;
  for (const auto& x : xs) a.push_back(atleast_1d(x));
  if (a.empty()) fail("hstack", "need at least one array to stack");
  return concatenate(a, a[0].ndim() == 1 ? 0 : 1);
}

Array vstack(const std::vector<Array>& xs) {
  std::vector<Array> a;
  for (const auto& x : xs) a.push_back(atleast_2d(x));
  return concatenate(a, 0);
}

namespace {

Array slice_axis(const Array& x, int64_t start, int64_t limit, int64_t axis) {
  if (start == 0 && limit == x.shape()[axis]) return x;
  std::vector<int64_t> starts(x.ndim(), 0), limits = x.shape();
  starts[axis] = start;
  limits[axis] = limit;
  return set_weak(lax::slice(x, starts, limits), x.weak_type());
}

std::vector<Array> split_at(const Array& x, const std::vector<int64_t>& bounds, int64_t axis) {
  std::vector<Array> out;
  for (size_t i = 0; i + 1 < bounds.size(); ++i)
    out.push_back(slice_axis(x, bounds[i], std::max(bounds[i], bounds[i + 1]), axis));
  return out;
}

}  // namespace

std::vector<Array> split(const Array& x, int64_t sections, int64_t axis) {
  const int64_t ax = normalize_axis("split", axis, x.ndim());
  const int64_t n = x.shape()[ax];
  if (sections <= 0) fail("split", "number sections must be larger than 0");
  if (n % sections != 0)
    fail("split", "array split does not result in an equal division: " + std::to_string(n) +
                      " elements into " + std::to_string(sections) + " sections");
  std::vector<int64_t> bounds;
  for (int64_t i = 0; i <= sections; ++i) bounds.push_back(i * (n / sections));
  return split_at(x, bounds, ax);
}

std::vector<Array> split(const Array& x, const std::vector<int64_t>& indices, int64_t axis) {
  const int64_t ax = normalize_axis("split", axis, x.ndim());
  const int64_t n = x.shape()[ax];
  std::vector<int64_t> bounds{0};
  for (int64_t i : indices) {
    int64_t b = i < 0 ? i + n : i;
    bounds.push_back(std::clamp<int64_t>(b, 0, n));
  }
  bounds.push_back(n);
  return split_at(x, bounds, ax);
}

std::vector<Array> array_split(const Array& x, int64_t sections, int64_t axis) {
  const int64_t ax = normalize_axis("array_split", axis, x.ndim());
  if (sections <= 0) fail("array_split", "number sections must be larger than 0");
  const int64_t n = x.shape()[ax];
  const int64_t each = n / sections, extra = n % sections;
  std::vector<int64_t> bounds{0};
  for (int64_t i = 0; i < sections; ++i) bounds.push_back(bounds.back() + each + (i < extra));
  return split_at(x, bounds, ax);
}

Array flip(const Array& x, const Axes& axis) {
  const std::vector<int64_t> axes = detail::normalize_axes("flip", axis, x.ndim());
  if (axes.empty()) return x;
  return set_weak(lax::rev(x, axes), x.weak_type());
}

Array fliplr(const Array& x) {
  if (x.ndim() < 2) fail("fliplr", "input must be at least 2-D, got " + shape_to_string(x.shape()));
  return flip(x, 1);
}

Array flipud(const Array& x) {
  if (x.ndim() < 1) fail("flipud", "input must be at least 1-D");
  return flip(x, 0);
}

Array roll(const Array& x, int64_t shift, std::optional<int64_t> axis) {
  if (!axis) return reshape(roll(ravel(x), shift, 0), x.shape());
  const int64_t ax = normalize_axis("roll", *axis, x.ndim());
  const int64_t n = x.shape()[ax];
  if (n == 0) return x;
  const int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  return concatenate({slice_axis(x, n - s, n, ax), slice_axis(x, 0, n - s, ax)}, ax);
}

Array tile(const Array& x, const std::vector<int64_t>& reps) {
  std::vector<int64_t> r = reps;
  Shape s = x.shape();
  while (r.size() < s.size()) r.insert(r.begin(), 1);
  while (s.size() < r.size()) s.insert(s.begin(), 1);
  Shape big, out;
  std::vector<int64_t> dims;
  for (size_t i = 0; i < s.size(); ++i) {
    if (r[i] < 0) fail("tile", "negative repetitions are not allowed");
    big.push_back(r[i]);
    big.push_back(s[i]);
    dims.push_back(static_cast<int64_t>(2 * i + 1));
    out.push_back(r[i] * s[i]);
  }
  Array y = reshape_keep_weak(x, s);
  Array b = set_weak(lax::broadcast_in_dim(y, big, dims), x.weak_type());
  return reshape_keep_weak(b, out);
}

Array repeat(const Array& x, int64_t repeats, std::optional<int64_t> axis) {
  if (repeats < 0) fail("repeat", "repeats may not contain negative values");
  if (!axis) return repeat(ravel(x), repeats, 0);
  const int64_t ax = normalize_axis("repeat", *axis, x.ndim());
  Shape big, out = x.shape();
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.ndim(); ++i) {
    dims.push_back(static_cast<int64_t>(big.size()));
    big.push_back(x.shape()[i]);
    if (i == ax) big.push_back(repeats);
  }
  out[ax] *= repeats;
  Array b = set_weak(lax::broadcast_in_dim(x, big, dims), x.weak_type());
  return reshape_keep_weak(b, out);
}

Array pad(const Array& x, const std::vector<std::pair<int64_t, int64_t>>& pad_width,
          const ArrayLike& constant_value) {
  std::vector<std::pair<int64_t, int64_t>> w = pad_width;
  if (w.size() == 1 && x.ndim() != 1) w.assign(x.ndim(), pad_width[0]);
  if (static_cast<int64_t>(w.size()) != x.ndim())
    fail("pad", std::to_string(pad_width.size()) + " pad widths given for an array of shape " +
                    shape_to_string(x.shape()));
  std::vector<lax::PadConfig> config;
  for (auto [lo, hi] : w) {
    if (lo < 0 || hi < 0) fail("pad", "index can't contain negative values");
    config.push_back({lo, hi, 0});
  }
  Array v = detail::to_dtype("pad", constant_value, x.dtype());
  if (v.ndim() != 0) fail("pad", "constant_value must be a scalar");
  return set_weak(lax::pad(x, v, config), x.weak_type());
}

namespace {
Array tri_mask(const char* fn, const Array& x, int64_t k, bool lower) {
  if (x.ndim() < 2) fail(fn, "input must be at least 2-D, got shape " + shape_to_string(x.shape()));
  const int64_t m = x.shape()[x.ndim() - 2], n = x.shape()[x.ndim() - 1];
  Array rows = lax::broadcasted_iota(DType::I64, {m, n}, 0);
  Array cols = lax::broadcasted_iota(DType::I64, {m, n}, 1);
  Array diff = lax::sub(cols, rows);
  Array kk = lax::full({m, n}, static_cast<double>(k), DType::I64);
  Array mask = lower ? lax::le(diff, kk) : lax::ge(diff, kk);
  mask = detail::broadcast_to_shape(mask, x.shape());
  return set_weak(lax::select(mask, x, detail::full_as(x, 0)), x.weak_type());
}
}  // namespace

Array tril(const Array& x, int64_t k) {
  return tri_mask("tril", x, k, true);
}

Array triu(const Array& x, int64_t k) {
  return tri_mask("triu", x, k, false);
}

}  // namespace cujax::numpy

namespace cujax {

Array Array::T() const {
  return numpy::transpose(*this);
}

Array Array::mT() const {
  return numpy::matrix_transpose(*this);
}

}  // namespace cujax
