// Shared helpers: errors, axes, conversion, broadcasting and promotion of operands.
#include <algorithm>

#include "cujax/trace/trace.h"
#include "numpy/internal.h"

namespace cujax::numpy {

namespace detail {

void fail(const std::string& fn, const std::string& message) {
  throw Error("numpy." + fn + ": " + message);
}

void fail_index(const std::string& fn, const std::string& message) {
  throw IndexError("numpy." + fn + ": " + message);
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (i > 0) s += i + 1 == shapes.size() ? " and " : ", ";
    s += shape_to_string(shapes[i]);
  }
  return s;
}

std::string dtype_str(DType t) {
  return std::string(numpy_name(t));
}

int64_t normalize_axis(const std::string& fn, int64_t axis, int64_t ndim) {
  if (axis < -ndim || axis >= ndim)
    fail(fn, "axis " + std::to_string(axis) + " is out of bounds for array of dimension " +
                 std::to_string(ndim));
  return axis < 0 ? axis + ndim : axis;
}

std::vector<int64_t> normalize_axes(const std::string& fn, const Axes& axes, int64_t ndim) {
  std::vector<int64_t> out;
  if (axes.is_none()) {
    for (int64_t i = 0; i < ndim; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : *axes.axes) out.push_back(normalize_axis(fn, a, ndim));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    fail(fn, "duplicate value in 'axis'");
  return out;
}

Array set_weak(const Array& x, bool weak) {
  return cujax::trace::with_weak_type(x, weak);
}

Array convert(const Array& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  if (dtype == DType::Bool) return lax::ne(x, lax::full(x.shape(), 0, x.dtype()));
  return lax::convert_element_type(x, dtype);
}

Array to_dtype(const std::string& fn, const ArrayLike& x, DType dtype) {
  if (x.is_scalar()) return x.to_array(dtype, ("numpy." + fn).c_str());
  return convert(x.array(), dtype);
}

Shape broadcast_shapes(const std::string& fn, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const auto& s : shapes) {
    const size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[off + i];
      if (s[i] == o || s[i] == 1) continue;
      if (o == 1) {
        o = s[i];
        continue;
      }
      fail(fn, "shapes " + shapes_str(shapes) + " cannot be broadcast");
    }
  }
  return out;
}

Array broadcast_to_shape(const Array& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  std::vector<int64_t> dims;
  const int64_t off = static_cast<int64_t>(shape.size()) - x.ndim();
  for (int64_t i = 0; i < x.ndim(); ++i) dims.push_back(off + i);
  return set_weak(lax::broadcast_in_dim(x, shape, dims), x.weak_type());
}

Promoted promote(const std::string& fn, const std::vector<ArrayLike>& args, bool broadcast,
                 Promote how) {
  Promoted p;
  p.type = result_type(args);
  if (how == Promote::Inexact) p.type.dtype = inexact_dtype(p.type.dtype);
  if (broadcast) {
    std::vector<Shape> shapes;
    shapes.reserve(args.size());
    for (const auto& a : args) shapes.push_back(a.shape());
    p.shape = broadcast_shapes(fn, shapes);
  }
  p.args.reserve(args.size());
  for (const auto& a : args) {
    Array v = to_dtype(fn, a, p.type.dtype);
    if (broadcast) v = broadcast_to_shape(v, p.shape);
    p.args.push_back(set_weak(v, p.type.weak_type));
  }
  return p;
}

Array promoted_operand(const char* fn, const ArrayLike& x, Promote how) {
  return promote(fn, {x}, false, how).args[0];
}

Array full_as(const Array& like, double value) {
  return lax::full(like.shape(), value, like.dtype());
}

Array reshape_keep_weak(const Array& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  return set_weak(lax::reshape(x, shape), x.weak_type());
}

Shape keepdims_shape(const Shape& shape, const std::vector<int64_t>& axes) {
  Shape out = shape;
  for (int64_t a : axes) out[a] = 1;
  return out;
}

}  // namespace detail

Shape broadcast_shapes(const std::vector<Shape>& shapes) {
  return detail::broadcast_shapes("broadcast_shapes", shapes);
}

Array broadcast_to(const ArrayLike& x, const Shape& shape) {
  Array a = x.to_array();
  const Shape& s = a.shape();
  bool ok = s.size() <= shape.size();
  for (size_t i = 0; ok && i < s.size(); ++i) {
    const int64_t t = shape[shape.size() - s.size() + i];
    ok = s[i] == t || s[i] == 1;
  }
  if (!ok)
    detail::fail("broadcast_to", "cannot broadcast an array of shape " + shape_to_string(s) +
                                     " to shape " + shape_to_string(shape));
  return detail::broadcast_to_shape(a, shape);
}

std::vector<Array> broadcast_arrays(const std::vector<ArrayLike>& xs) {
  std::vector<Shape> shapes;
  for (const auto& x : xs) shapes.push_back(x.shape());
  const Shape s = detail::broadcast_shapes("broadcast_arrays", shapes);
  std::vector<Array> out;
  for (const auto& x : xs) out.push_back(detail::broadcast_to_shape(x.to_array(), s));
  return out;
}

}  // namespace cujax::numpy
