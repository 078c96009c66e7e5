// Reductions (sum, mean, max, var, argmax, ...), cumulative sums, sorting.
#include <limits>

#include "numpy/internal.h"

namespace cujax::numpy {

using detail::convert;
using detail::fail;
using detail::normalize_axes;
using detail::reshape_keep_weak;
using detail::set_weak;

namespace {

// The accumulation dtype of sum/prod/cumsum (JAX's promote_integers).
DType sum_dtype(DType t) {
  if (t == DType::Bool) return DType::I32;
  if (is_signed_int(t) && size_of(t) < 4) return DType::I32;
  if (is_unsigned_int(t) && size_of(t) < 4) return DType::U32;
  return t;
}

// f16/bf16 reduce in f32.
DType compute_dtype(DType t) {
  return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t;
}

Array finish(const Array& r, const Shape& in_shape, const std::vector<int64_t>& axes,
             bool keepdims) {
  if (!keepdims) return r;
  return reshape_keep_weak(r, detail::keepdims_shape(in_shape, axes));
}

int64_t reduced_count(const Shape& s, const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (int64_t a : axes) n *= s[a];
  return n;
}

using LaxReduce = Array (*)(const Array&, const std::vector<int64_t>&);

Array sum_like(const char* fn, const Array& x, const Axes& axis, bool keepdims,
               std::optional<DType> dtype, LaxReduce op) {
  const std::vector<int64_t> axes = normalize_axes(fn, axis, x.ndim());
  const DType out_t = dtype.value_or(sum_dtype(x.dtype()));
  const DType ct = compute_dtype(out_t);
  Array a = convert(x, ct);
  Array r = axes.empty() ? a : op(a, axes);
  r = convert(r, out_t);
  r = set_weak(r, !dtype && out_t == x.dtype() && x.weak_type());
  return finish(r, x.shape(), axes, keepdims);
}

Array extreme(const char* fn, const char* what, const Array& x, const Axes& axis, bool keepdims,
              bool is_max) {
  const std::vector<int64_t> axes = normalize_axes(fn, axis, x.ndim());
  for (int64_t a : axes)
    if (x.shape()[a] == 0)
      fail(fn, std::string("zero-size array to reduction operation ") + what +
                   " which has no identity (shape " + shape_to_string(x.shape()) + ")");
  if (axes.empty()) return x;
  Array r;
  if (x.dtype() == DType::Bool)
    r = is_max ? lax::reduce_or(x, axes) : lax::reduce_and(x, axes);
  else
    r = is_max ? lax::reduce_max(x, axes) : lax::reduce_min(x, axes);
  return finish(set_weak(r, x.weak_type()), x.shape(), axes, keepdims);
}

}  // namespace

Array sum(const Array& x, const Axes& axis, bool keepdims, std::optional<DType> dtype) {
  return sum_like("sum", x, axis, keepdims, dtype, lax::reduce_sum);
}

Array prod(const Array& x, const Axes& axis, bool keepdims, std::optional<DType> dtype) {
  return sum_like("prod", x, axis, keepdims, dtype, lax::reduce_prod);
}

Array mean(const Array& x, const Axes& axis, bool keepdims, std::optional<DType> dtype) {
  const std::vector<int64_t> axes = normalize_axes("mean", axis, x.ndim());
  const DType out_t = dtype.value_or(inexact_dtype(x.dtype()));
  const DType ct = compute_dtype(inexact_dtype(out_t));
  Array a = convert(x, ct);
  Array s = axes.empty() ? a : lax::reduce_sum(a, axes);
  const double n = static_cast<double>(reduced_count(x.shape(), axes));
  Array r = lax::div(s, lax::full(s.shape(), n, ct));
  r = set_weak(convert(r, out_t), !dtype && x.weak_type());
  return finish(r, x.shape(), axes, keepdims);
}

Array max(const Array& x, const Axes& axis, bool keepdims) {
  return extreme("max", "max", x, axis, keepdims, true);
}
Array min(const Array& x, const Axes& axis, bool keepdims) {
  return extreme("min", "min", x, axis, keepdims, false);
}
Array amax(const Array& x, const Axes& axis, bool keepdims) {
  return extreme("amax", "max", x, axis, keepdims, true);
}
Array amin(const Array& x, const Axes& axis, bool keepdims) {
  return extreme("amin", "min", x, axis, keepdims, false);
}

Array all(const Array& x, const Axes& axis, bool keepdims) {
  const std::vector<int64_t> axes = normalize_axes("all", axis, x.ndim());
  Array b = convert(x, DType::Bool);
  Array r = axes.empty() ? b : lax::reduce_and(b, axes);
  return finish(set_weak(r, false), x.shape(), axes, keepdims);
}

Array any(const Array& x, const Axes& axis, bool keepdims) {
  const std::vector<int64_t> axes = normalize_axes("any", axis, x.ndim());
  Array b = convert(x, DType::Bool);
  Array r = axes.empty() ? b : lax::reduce_or(b, axes);
  return finish(set_weak(r, false), x.shape(), axes, keepdims);
}

Array var(const Array& x, const Axes& axis, int64_t ddof, bool keepdims) {
  const std::vector<int64_t> axes = normalize_axes("var", axis, x.ndim());
  const DType out_t = inexact_dtype(x.dtype());
  const DType ct = compute_dtype(out_t);
  Array a = convert(x, ct);
  const double n = static_cast<double>(reduced_count(x.shape(), axes));
  Array s = axes.empty() ? a : lax::reduce_sum(a, axes);
  Array m = lax::div(s, lax::full(s.shape(), n, ct));
  Array mb = detail::broadcast_to_shape(
      reshape_keep_weak(m, detail::keepdims_shape(x.shape(), axes)), x.shape());
  Array d = lax::sub(a, mb);
  // |d|^2: the variance of complex numbers is real, as in NumPy.
  Array sq = is_complex(ct) ? lax::add(lax::mul(lax::real(d), lax::real(d)),
                                       lax::mul(lax::imag(d), lax::imag(d)))
                            : lax::mul(d, d);
  Array ss = axes.empty() ? sq : lax::reduce_sum(sq, axes);
  const double norm = std::max(n - static_cast<double>(ddof), 0.0);
  Array r = lax::div(ss, lax::full(ss.shape(), norm, ss.dtype()));
  r = set_weak(convert(r, complex_component(out_t)), x.weak_type());
  return finish(r, x.shape(), axes, keepdims);
}

Array std(const Array& x, const Axes& axis, int64_t ddof, bool keepdims) {
  Array v = var(x, axis, ddof, keepdims);
  return set_weak(lax::sqrt(v), v.weak_type());
}

Array count_nonzero(const Array& x, const Axes& axis, bool keepdims) {
  return sum(convert(x, DType::Bool), axis, keepdims, DType::I32);
}

namespace {
Array arg_extreme(const char* fn, const Array& x, std::optional<int64_t> axis, bool keepdims,
                  bool is_max) {
  if (!axis) {
    Array r = arg_extreme(fn, ravel(x), 0, false, is_max);
    return keepdims ? reshape_keep_weak(r, Shape(x.ndim(), 1)) : r;
  }
  const int64_t ax = detail::normalize_axis(fn, *axis, x.ndim());
  if (x.shape()[ax] == 0)
    fail(fn, std::string("attempt to get ") + (is_max ? "argmax" : "argmin") +
                 " of an empty sequence (shape " + shape_to_string(x.shape()) + ")");
  Array a = x.dtype() == DType::Bool ? convert(x, DType::U8) : x;
  Array r = is_max ? lax::argmax(a, ax, DType::I32) : lax::argmin(a, ax, DType::I32);
  return finish(r, x.shape(), {ax}, keepdims);
}

Array cumulative(const char* fn, const Array& x, std::optional<int64_t> axis,
                 std::optional<DType> dtype, bool is_sum) {
  if (!axis) return cumulative(fn, ravel(x), 0, dtype, is_sum);
  const int64_t ax = detail::normalize_axis(fn, *axis, x.ndim());
  const DType out_t = dtype.value_or(sum_dtype(x.dtype()));
  const DType ct = compute_dtype(out_t);
  Array a = convert(x, ct);
  Array r = is_sum ? lax::cumsum(a, ax) : lax::cumprod(a, ax);
  return set_weak(convert(r, out_t), !dtype && out_t == x.dtype() && x.weak_type());
}

Array sort_impl(const char* fn, const Array& x, std::optional<int64_t> axis, bool descending,
                bool want_indices) {
  if (!axis) return sort_impl(fn, ravel(x), 0, descending, want_indices);
  const int64_t ax = detail::normalize_axis(fn, *axis, x.ndim());
  const int64_t n = x.shape()[ax];
  Array a = descending ? lax::rev(x, {ax}) : x;
  if (!want_indices) {
    Array s = lax::sort({a}, ax, true, 1)[0];
    if (descending) s = lax::rev(s, {ax});
    return set_weak(s, x.weak_type());
  }
  Array iota = lax::broadcasted_iota(DType::I32, x.shape(), ax);
  Array idx = lax::sort({a, iota}, ax, true, 1)[1];
  if (descending) {
    // Sorting the reversed array keeps equal elements in their original order once reversed.
    idx = lax::rev(idx, {ax});
    idx = lax::sub(lax::full(idx.shape(), static_cast<double>(n - 1), DType::I32), idx);
  }
  return idx;
}
}  // namespace

Array argmax(const Array& x, std::optional<int64_t> axis, bool keepdims) {
  return arg_extreme("argmax", x, axis, keepdims, true);
}

Array argmin(const Array& x, std::optional<int64_t> axis, bool keepdims) {
  return arg_extreme("argmin", x, axis, keepdims, false);
}

Array cumsum(const Array& x, std::optional<int64_t> axis, std::optional<DType> dtype) {
  return cumulative("cumsum", x, axis, dtype, true);
}

Array cumprod(const Array& x, std::optional<int64_t> axis, std::optional<DType> dtype) {
  return cumulative("cumprod", x, axis, dtype, false);
}

Array sort(const Array& x, std::optional<int64_t> axis, bool descending) {
  return sort_impl("sort", x, axis, descending, false);
}

Array argsort(const Array& x, std::optional<int64_t> axis, bool descending) {
  return sort_impl("argsort", x, axis, descending, true);
}

}  // namespace cujax::numpy
