// Helpers shared by the cujax::numpy implementation files.
#pragma once

#include <string>
#include <vector>

#include "cujax/lax.h"
#include "cujax/numpy.h"

namespace cujax::numpy::detail {

// Throws Error("numpy.<fn>: <message>").
[[noreturn]] void fail(const std::string& fn, const std::string& message);
[[noreturn]] void fail_index(const std::string& fn, const std::string& message);

std::string shapes_str(const std::vector<Shape>& shapes);  // "[2,3] and [4]"
std::string dtype_str(DType t);                            // "float32"

int64_t normalize_axis(const std::string& fn, int64_t axis, int64_t ndim);
// Sorted, unique, normalized; none gives every axis.
std::vector<int64_t> normalize_axes(const std::string& fn, const Axes& axes, int64_t ndim);

Array set_weak(const Array& x, bool weak);
// convert_element_type, skipped when the dtype already matches; to bool it is x != 0.
Array convert(const Array& x, DType dtype);
// A scalar (or 0-d array) converted to `dtype`, as a 0-d Array.
Array to_dtype(const std::string& fn, const ArrayLike& x, DType dtype);
// Broadcasts (NumPy rules; the shapes must already be compatible).
Array broadcast_to_shape(const Array& x, const Shape& shape);
Shape broadcast_shapes(const std::string& fn, const std::vector<Shape>& shapes);

// The operands converted to their common dtype (and optionally broadcast to their common
// shape). `type` receives the promoted dtype and weak type.
struct Promoted {
  std::vector<Array> args;
  WeakDType type;
  Shape shape;
};
enum class Promote { Plain, Inexact };
Promoted promote(const std::string& fn, const std::vector<ArrayLike>& args, bool broadcast = true,
                 Promote how = Promote::Plain);
// One operand as an array of its promoted (optionally inexact) dtype.
Array promoted_operand(const char* fn, const ArrayLike& x, Promote how = Promote::Plain);

// A constant of x's dtype and shape.
Array full_as(const Array& like, double value);
Array reshape_keep_weak(const Array& x, const Shape& shape);
// The reduced shape with ones at `axes` (keepdims).
Shape keepdims_shape(const Shape& shape, const std::vector<int64_t>& axes);

// x[index] with an explicit mode for out-of-range array indices; `fill` overrides the fill
// value in Fill mode.
Array gather_index(const std::string& fn, const Array& x, const Index& index, IndexMode mode,
                   std::optional<double> fill = std::nullopt);

}  // namespace cujax::numpy::detail
