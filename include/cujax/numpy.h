// cujax::numpy: the NumPy-style array API under jax.numpy's names, and C++ operators on Array.
//
// Every function works eagerly and under jit: shapes, dtypes and static arguments are used
// while tracing, array values never are. Binary functions broadcast their operands (NumPy
// rules) and promote their dtypes (JAX's lattice, below) before calling the lax op.
//
//   namespace jnp = cujax::numpy;
//   Array x = jnp::reshape(jnp::arange(6), {2, 3});   // i32[2,3]
//   Array y = jnp::where(x > 2, x * 2.0, 0);           // f32[2,3]: 2.0 is weakly typed
//   Array s = jnp::sum(jnp::at(y, {Slice(), 1}));      // y[:, 1].sum()
//
// Type promotion (https://docs.jax.dev/en/latest/type_promotion.html). The result dtype of a
// binary op is the join of its operands' types on JAX's lattice
//
//   b1 -> i* -> {u8 -> u16 -> u32 -> u64, i8 -> i16 -> i32 -> i64} -> f* -> {bf16, f16} -> f32 ->
//   f64 (u8 -> i16, u16 -> i32, u32 -> i64; u64 and i64 -> f*), f* -> c* -> c64 -> c128,
//   f32 -> c64, f64 -> c128
//
// where i*, f* and c* are weakly typed integers, floats and complex numbers: a C++
// `int`/`int64_t` is i*, a C++ `double`/`float` is f*, a std::complex<double>/<float> is c*,
// exactly as Python's int, float and complex are in JAX; a C++ `bool` is b1. So float32 +
// complex64 is complex64, float64 + complex64 is complex128, f32_array * 1i is complex64.
// Weak types adopt the other operand's width: f16_array * 2.0 is f16, int8_array + 1 is int8,
// int32_array + 1.5 is f32 (weak), bool_array + 1 is i32 (weak). Explicit 64-bit dtypes take
// part in the lattice as with jax_enable_x64; a result that is i* or f* becomes the default
// int or float, i32 or f32 (as in JAX's default mode), marked weak. Mixing a signed and an
// unsigned 64-bit integer therefore gives f32 (weak). A C++ integer that does not fit the
// dtype it is converted to (uint8_array + 300) throws, as JAX raises OverflowError.
//
// Indexing (x[idx] in NumPy) is x[item] or x[{items...}] (Array::operator[]), or at(x, {items...}):
//   NumPy            cujax
//   x[3], x[-1]      x[3], x[-1]
//   x[1::2]          x[Slice(1, none, 2)]
//   x[::-1]          x[Slice(none, none, -1)]
//   x[None]          x[newaxis] (or x[none])
//   x[..., 0]        x[{Ellipsis, 0}]
//   x[idx]           x[idx], an integer Array (a gather); several broadcast together
//   x[mask]          x[mask], a concrete bool Array (eager only)
// with NumPy's rules: missing trailing dimensions are taken whole, negative integers count
// from the end, integer-array ("advanced") indices broadcast together and their dimensions go
// where the first of them is when they are adjacent, first otherwise. An out-of-range static
// integer throws IndexError; out-of-range array indices are clamped when reading (as JAX
// does), and dropped by the updates. x.at[idx].set(v) is `at_set(x, {idx}, v)`; likewise
// at_add, at_multiply, at_min, at_max. None of them modifies x: they return a new array.
#pragma once

#include <complex>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "cujax/array.h"

namespace cujax {

// A dtype with JAX's weak-type flag: {F32, true} is f* (a Python float), {I32, true} is i*.
struct WeakDType {
  DType dtype = DType::F32;
  bool weak_type = false;
  bool operator==(const WeakDType& o) const = default;
  std::string str() const;  // "f32", "i32{weak}"
};

// A static C++ number: a weakly typed scalar in array expressions.
struct Scalar {
  enum class Kind : uint8_t { Bool, Int, Float, Complex };
  Kind kind = Kind::Float;
  int64_t i = 0;
  double f = 0;     // the real part of a complex scalar
  double imag = 0;  // a complex scalar's imaginary part

  Scalar() = default;
  template <class T>
  requires std::is_arithmetic_v<T> Scalar(
      T v) {  // NOLINT(google-explicit-constructor): numbers mix with arrays implicitly
    if constexpr (std::is_same_v<T, bool>) {
      kind = Kind::Bool;
      i = v ? 1 : 0;
      f = i;
    } else if constexpr (std::is_integral_v<T>) {
      kind = Kind::Int;
      i = static_cast<int64_t>(v);
      f = static_cast<double>(v);
    } else {
      kind = Kind::Float;
      f = static_cast<double>(v);
      i = saturate(f);
    }
  }
  template <class T>
  Scalar(std::complex<T> v)  // NOLINT(google-explicit-constructor)
      : kind(Kind::Complex),
        i(saturate(static_cast<double>(v.real()))),
        f(static_cast<double>(v.real())),
        imag(static_cast<double>(v.imag())) {}
  WeakDType dtype() const;  // b1, i*, f* or c*
  // The value (a complex scalar's real part) as a double.
  double as_double() const {
    return kind == Kind::Float || kind == Kind::Complex ? f : static_cast<double>(i);
  }
  std::string str() const;

 private:
  // A cast out of int64's range is undefined (-inf masks are common): NaN gives 0, the rest
  // saturates.
  static int64_t saturate(double v) {
    return v != v         ? 0
           : v <= -0x1p63 ? std::numeric_limits<int64_t>::min()
           : v >= 0x1p63  ? std::numeric_limits<int64_t>::max()
                          : static_cast<int64_t>(v);
  }
};

// An argument of a numpy function: an Array or a static C++ number.
class ArrayLike {
 public:
  ArrayLike(const Array& a) : array_(a) {}                      // NOLINT
  ArrayLike(Array&& a) : array_(std::move(a)) {}                // NOLINT
  ArrayLike(const Scalar& s) : scalar_(s), is_scalar_(true) {}  // NOLINT
  template <class T>
  requires std::is_arithmetic_v<T> ArrayLike(T v) : scalar_(v), is_scalar_(true) {}  // NOLINT
  template <class T>
  ArrayLike(std::complex<T> v) : scalar_(v), is_scalar_(true) {}  // NOLINT

  bool is_scalar() const { return is_scalar_; }
  const Scalar& scalar() const { return scalar_; }
  const Array& array() const { return array_; }
  WeakDType dtype() const;
  Shape shape() const;
  // The value as an Array: a scalar becomes a 0-d array of `as` (default: its weak dtype);
  // throws when an integer does not fit. `fn` names the caller in errors.
  Array to_array(std::optional<DType> as = std::nullopt, const char* fn = "numpy.asarray") const;

 private:
  Array array_;
  Scalar scalar_;
  bool is_scalar_ = false;
};

namespace numpy {

class IndexError : public Error {
 public:
  using Error::Error;
};

// ----- Type promotion -------------------------------------------------------------------

// jnp.promote_types for two strong dtypes (a result of f* is F32, the default float).
DType promote_types(DType a, DType b);
// The same, with weak types: the join on the lattice, i* and f* given as {I32|F32, weak}.
WeakDType promote_types(WeakDType a, WeakDType b);
// The dtype and weak type that the operands of an n-ary op are promoted to (JAX's
// dtypes._lattice_result_type followed by canonicalization to 32-bit defaults).
WeakDType result_type(const std::vector<WeakDType>& types);
WeakDType result_type(const std::vector<ArrayLike>& operands);
// True when values of `from` convert to `to` without loss (jnp.can_cast(..., "safe")).
bool can_cast(DType from, DType to);
// The dtype a function such as exp or divide computes in: floats and complex types stay,
// others -> f32.
DType inexact_dtype(DType t);

// ----- Broadcasting ---------------------------------------------------------------------

Shape broadcast_shapes(const std::vector<Shape>& shapes);
Array broadcast_to(const ArrayLike& x, const Shape& shape);
std::vector<Array> broadcast_arrays(const std::vector<ArrayLike>& xs);

// ----- Axes -----------------------------------------------------------------------------

using cujax::none;  // array.h

// An axis argument: one axis, a list of axes, or none (all axes). Negative axes count from
// the end. sum(x) and sum(x, none) reduce everything; sum(x, 0); sum(x, {0, 2}).
struct Axes {
  std::optional<std::vector<int64_t>> axes;
  Axes() = default;
  Axes(std::nullopt_t) {}                                                    // NOLINT
  Axes(int a) : axes(std::vector<int64_t>{a}) {}                             // NOLINT
  Axes(int64_t a) : axes(std::vector<int64_t>{a}) {}                         // NOLINT
  Axes(std::initializer_list<int64_t> a) : axes(std::vector<int64_t>(a)) {}  // NOLINT
  Axes(std::vector<int64_t> a) : axes(std::move(a)) {}                       // NOLINT
  bool is_none() const { return !axes.has_value(); }
};

// ----- Creation -------------------------------------------------------------------------

Array zeros(const Shape& shape, DType dtype = DType::F32);
Array ones(const Shape& shape, DType dtype = DType::F32);
Array empty(const Shape& shape, DType dtype = DType::F32);  // zeros, as in JAX
// fill may be an Array (broadcast to `shape`); without dtype it keeps fill's (weak) type.
Array full(const Shape& shape, const ArrayLike& fill, std::optional<DType> dtype = std::nullopt);
Array zeros_like(const Array& x, std::optional<DType> dtype = std::nullopt);
Array ones_like(const Array& x, std::optional<DType> dtype = std::nullopt);
Array full_like(const Array& x, const ArrayLike& fill, std::optional<DType> dtype = std::nullopt);
Array empty_like(const Array& x, std::optional<DType> dtype = std::nullopt);
// arange(stop), arange(start, stop, step): i32 when all are integers, else f32.
Array arange(Scalar stop, std::optional<DType> dtype = std::nullopt);
Array arange(Scalar start, Scalar stop, Scalar step = 1, std::optional<DType> dtype = std::nullopt);
Array linspace(double start, double stop, int64_t num = 50, bool endpoint = true,
               DType dtype = DType::F32);
// eye(N, M, k): ones on the k-th diagonal.
Array eye(int64_t n, std::optional<int64_t> m = std::nullopt, int64_t k = 0,
          DType dtype = DType::F32);
Array identity(int64_t n, DType dtype = DType::F32);
// array(values, shape, dtype): a concrete array from host values (the C++ element type's
// dtype unless `dtype` is given; 1-D unless `shape` is given). Literal lists follow Python:
// array({1.5, 2.0}) is f32, array({1, 2}) is i32, array({true}) is bool.
template <class T>
Array array(const std::vector<T>& values, std::optional<Shape> shape = std::nullopt,
            std::optional<DType> dtype = std::nullopt);
Array array(std::initializer_list<double> values, std::optional<Shape> shape = std::nullopt,
            std::optional<DType> dtype = std::nullopt);
Array array(std::initializer_list<int> values, std::optional<Shape> shape = std::nullopt,
            std::optional<DType> dtype = std::nullopt);
Array array(std::initializer_list<bool> values, std::optional<Shape> shape = std::nullopt,
            std::optional<DType> dtype = std::nullopt);
// A list of C++ complex numbers is complex64, as a list of Python complex numbers in JAX.
Array array(std::initializer_list<std::complex<double>> values,
            std::optional<Shape> shape = std::nullopt, std::optional<DType> dtype = std::nullopt);
Array array(const HostTensor& values, std::optional<DType> dtype = std::nullopt);
Array asarray(const ArrayLike& x, std::optional<DType> dtype = std::nullopt);
Array astype(const Array& x, DType dtype);
Array copy(const Array& x);

// ----- Element-wise ---------------------------------------------------------------------

Array add(const ArrayLike& x, const ArrayLike& y);
Array subtract(const ArrayLike& x, const ArrayLike& y);
Array multiply(const ArrayLike& x, const ArrayLike& y);
Array divide(const ArrayLike& x, const ArrayLike& y);  // true division: integers give floats
Array true_divide(const ArrayLike& x, const ArrayLike& y);
Array floor_divide(const ArrayLike& x, const ArrayLike& y);  // rounds toward -inf
Array remainder(const ArrayLike& x, const ArrayLike& y);     // sign of y, as Python's %
Array mod(const ArrayLike& x, const ArrayLike& y);
Array fmod(const ArrayLike& x, const ArrayLike& y);  // sign of x, as C's fmod
Array power(const ArrayLike& x, const ArrayLike& y);
Array float_power(const ArrayLike& x, const ArrayLike& y);
Array maximum(const ArrayLike& x, const ArrayLike& y);  // NaN-propagating
Array minimum(const ArrayLike& x, const ArrayLike& y);
Array arctan2(const ArrayLike& x, const ArrayLike& y);
Array hypot(const ArrayLike& x, const ArrayLike& y);
Array copysign(const ArrayLike& x, const ArrayLike& y);

Array negative(const ArrayLike& x);
Array positive(const ArrayLike& x);
Array abs(const ArrayLike& x);
Array absolute(const ArrayLike& x);
Array sign(const ArrayLike& x);
Array square(const ArrayLike& x);
Array reciprocal(const ArrayLike& x);
Array exp(const ArrayLike& x);
Array exp2(const ArrayLike& x);
Array expm1(const ArrayLike& x);
Array log(const ArrayLike& x);
Array log2(const ArrayLike& x);
Array log10(const ArrayLike& x);
Array log1p(const ArrayLike& x);
Array sqrt(const ArrayLike& x);
Array rsqrt(const ArrayLike& x);  // jax.lax.rsqrt
Array cbrt(const ArrayLike& x);
Array sin(const ArrayLike& x);
Array cos(const ArrayLike& x);
Array tan(const ArrayLike& x);
Array arcsin(const ArrayLike& x);
Array arccos(const ArrayLike& x);
Array arctan(const ArrayLike& x);
Array sinh(const ArrayLike& x);
Array cosh(const ArrayLike& x);
Array tanh(const ArrayLike& x);
Array arcsinh(const ArrayLike& x);
Array arccosh(const ArrayLike& x);
Array arctanh(const ArrayLike& x);
Array floor(const ArrayLike& x);
Array ceil(const ArrayLike& x);
Array trunc(const ArrayLike& x);
Array rint(const ArrayLike& x);
// Half to even, as NumPy; `decimals` may be negative.
Array round(const ArrayLike& x, int decimals = 0);
// clip(x, min, max); either bound may be none.
Array clip(const ArrayLike& x, const std::optional<ArrayLike>& min,
           const std::optional<ArrayLike>& max);
Array where(const ArrayLike& condition, const ArrayLike& x, const ArrayLike& y);

Array equal(const ArrayLike& x, const ArrayLike& y);
Array not_equal(const ArrayLike& x, const ArrayLike& y);
Array less(const ArrayLike& x, const ArrayLike& y);
Array less_equal(const ArrayLike& x, const ArrayLike& y);
Array greater(const ArrayLike& x, const ArrayLike& y);
Array greater_equal(const ArrayLike& x, const ArrayLike& y);
Array isfinite(const ArrayLike& x);
Array isnan(const ArrayLike& x);
Array isinf(const ArrayLike& x);
Array signbit(const ArrayLike& x);
// allclose/isclose as NumPy: |x - y| <= atol + rtol * |y|
Array isclose(const ArrayLike& x, const ArrayLike& y, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
Array allclose(const ArrayLike& x, const ArrayLike& y, double rtol = 1e-5, double atol = 1e-8,
               bool equal_nan = false);
Array array_equal(const ArrayLike& x, const ArrayLike& y);

Array logical_and(const ArrayLike& x, const ArrayLike& y);
Array logical_or(const ArrayLike& x, const ArrayLike& y);
Array logical_xor(const ArrayLike& x, const ArrayLike& y);
Array logical_not(const ArrayLike& x);
Array bitwise_and(const ArrayLike& x, const ArrayLike& y);
Array bitwise_or(const ArrayLike& x, const ArrayLike& y);
Array bitwise_xor(const ArrayLike& x, const ArrayLike& y);
Array bitwise_not(const ArrayLike& x);
Array invert(const ArrayLike& x);
Array left_shift(const ArrayLike& x, const ArrayLike& y);
Array right_shift(const ArrayLike& x, const ArrayLike& y);  // arithmetic for signed types

// ----- Complex numbers ------------------------------------------------------------------
// complex64 (f32 parts) and complex128 (f64 parts). Real operands are accepted where NumPy
// accepts them: real(x) is x, imag(x) zeros, conj(x) x, angle(x) 0 or pi.

Array real(const ArrayLike& x);
Array imag(const ArrayLike& x);
Array conj(const ArrayLike& x);
Array conjugate(const ArrayLike& x);
// The argument atan2(imag(x), real(x)), in radians or (deg) degrees; a float result.
Array angle(const ArrayLike& x, bool deg = false);
// Whether x's dtype is complex (iscomplexobj), or not (isrealobj).
bool iscomplexobj(const ArrayLike& x);
bool isrealobj(const ArrayLike& x);
// Element-wise: whether the imaginary part is non-zero (iscomplex), or zero (isreal).
Array iscomplex(const ArrayLike& x);
Array isreal(const ArrayLike& x);

// ----- Linear algebra -------------------------------------------------------------------

// matmul: batch dimensions broadcast; a 1-D operand is a vector (its added dimension is
// removed from the result).
Array matmul(const Array& a, const Array& b);
// dot: scalars multiply; 1-D x 1-D is the inner product; otherwise the last axis of a is
// contracted with the second-to-last of b (the last, when b is 1-D).
Array dot(const Array& a, const Array& b);
Array vdot(const Array& a, const Array& b);
Array inner(const Array& a, const Array& b);
Array outer(const Array& a, const Array& b);
// tensordot(a, b, n): the last n axes of a with the first n of b.
Array tensordot(const Array& a, const Array& b, int64_t axes = 2);
Array tensordot(const Array& a, const Array& b, const std::vector<int64_t>& a_axes,
                const std::vector<int64_t>& b_axes);
// einsum("ij,jk->ik", {a, b}): explicit ("->") or implicit output (the labels that appear
// once, in alphabetical order), "..." for broadcast dimensions, repeated labels in one
// operand for diagonals. Lowered to dot_general, transposes and reductions.
Array einsum(const std::string& subscripts, const std::vector<Array>& operands);
Array trace(const Array& x, int64_t offset = 0, int64_t axis1 = 0, int64_t axis2 = 1);
Array diagonal(const Array& x, int64_t offset = 0, int64_t axis1 = 0, int64_t axis2 = 1);

// ----- Shapes ---------------------------------------------------------------------------

Array reshape(const Array& x, const Shape& shape);  // one dimension may be -1
Array ravel(const Array& x);
Array transpose(const Array& x, const std::optional<std::vector<int64_t>>& axes = std::nullopt);
Array swapaxes(const Array& x, int64_t axis1, int64_t axis2);
// The last two axes swapped (x.mT); x needs at least two dimensions.
Array matrix_transpose(const Array& x);
Array moveaxis(const Array& x, const std::vector<int64_t>& source,
               const std::vector<int64_t>& destination);
Array moveaxis(const Array& x, int64_t source, int64_t destination);
Array expand_dims(const Array& x, const Axes& axis);
Array squeeze(const Array& x, const Axes& axis = {});
Array atleast_1d(const Array& x);
Array atleast_2d(const Array& x);
Array atleast_3d(const Array& x);
// Operands are promoted to a common dtype.
Array concatenate(const std::vector<Array>& xs, std::optional<int64_t> axis = 0);
Array stack(const std::vector<Array>& xs, int64_t axis = 0);
Array hstack(const std::vector<Array>& xs);
Array vstack(const std::vector<Array>& xs);
// split(x, n): n equal parts; split(x, {2, 5}): at those indices.
std::vector<Array> split(const Array& x, int64_t sections, int64_t axis = 0);
std::vector<Array> split(const Array& x, const std::vector<int64_t>& indices, int64_t axis = 0);
std::vector<Array> array_split(const Array& x, int64_t sections, int64_t axis = 0);
Array flip(const Array& x, const Axes& axis = {});
Array fliplr(const Array& x);
Array flipud(const Array& x);
Array roll(const Array& x, int64_t shift, std::optional<int64_t> axis = std::nullopt);
Array tile(const Array& x, const std::vector<int64_t>& reps);
Array repeat(const Array& x, int64_t repeats, std::optional<int64_t> axis = std::nullopt);
// Constant padding: (before, after) per axis.
Array pad(const Array& x, const std::vector<std::pair<int64_t, int64_t>>& pad_width,
          const ArrayLike& constant_value = 0);
Array tril(const Array& x, int64_t k = 0);
Array triu(const Array& x, int64_t k = 0);

// ----- Indexing -------------------------------------------------------------------------

// Slice, newaxis, Ellipsis and IndexItem are defined with Array (array.h); x[index] is at(x,
// index).
using cujax::Ellipsis;
using cujax::EllipsisT;
using cujax::Index;
using cujax::IndexItem;
using cujax::NewAxis;
using cujax::newaxis;
using cujax::NewAxisT;
using cujax::Slice;

// What out-of-range indices do: Clip clamps them into range, Fill gives a fill value (NaN for
// floats, the minimum of signed and maximum of unsigned integers, true for bool), Wrap takes
// them modulo the dimension.
enum class IndexMode { Clip, Fill, Wrap };

// x[index]
Array at(const Array& x, const Index& index);
// x.at[index].set(values) and the other updates; values broadcast to x[index]'s shape and
// are converted to x's dtype. Out-of-range array indices are dropped.
Array at_set(const Array& x, const Index& index, const ArrayLike& values);
Array at_add(const Array& x, const Index& index, const ArrayLike& values);
Array at_subtract(const Array& x, const Index& index, const ArrayLike& values);
Array at_multiply(const Array& x, const Index& index, const ArrayLike& values);
Array at_min(const Array& x, const Index& index, const ArrayLike& values);
Array at_max(const Array& x, const Index& index, const ArrayLike& values);

// take(x, indices, axis): along `axis` (the flattened array when none).
Array take(const Array& x, const ArrayLike& indices, std::optional<int64_t> axis = std::nullopt,
           IndexMode mode = IndexMode::Fill);
// take_along_axis(x, indices, axis): indices broadcast with x in the other dimensions.
Array take_along_axis(const Array& x, const Array& indices, int64_t axis,
                      IndexMode mode = IndexMode::Fill);
// one_hot(x, num_classes): as jax.nn.one_hot, along a new last axis.
Array one_hot(const Array& x, int64_t num_classes, DType dtype = DType::F32, int64_t axis = -1);
// Eager only: the indices of the non-zero elements, one array per dimension.
std::vector<Array> nonzero(const Array& x);

// ----- Reductions -----------------------------------------------------------------------

// Sums and products of bool and integers narrower than 32 bits accumulate in i32 (u32 for
// unsigned) as in JAX; f16/bf16 accumulate in f32 and return their own dtype.
Array sum(const Array& x, const Axes& axis = {}, bool keepdims = false,
          std::optional<DType> dtype = std::nullopt);
Array prod(const Array& x, const Axes& axis = {}, bool keepdims = false,
           std::optional<DType> dtype = std::nullopt);
Array mean(const Array& x, const Axes& axis = {}, bool keepdims = false,
           std::optional<DType> dtype = std::nullopt);
Array max(const Array& x, const Axes& axis = {}, bool keepdims = false);
Array min(const Array& x, const Axes& axis = {}, bool keepdims = false);
Array amax(const Array& x, const Axes& axis = {}, bool keepdims = false);
Array amin(const Array& x, const Axes& axis = {}, bool keepdims = false);
Array all(const Array& x, const Axes& axis = {}, bool keepdims = false);
Array any(const Array& x, const Axes& axis = {}, bool keepdims = false);
Array var(const Array& x, const Axes& axis = {}, int64_t ddof = 0, bool keepdims = false);
Array std(const Array& x, const Axes& axis = {}, int64_t ddof = 0, bool keepdims = false);
Array count_nonzero(const Array& x, const Axes& axis = {}, bool keepdims = false);
// First index of the extreme value (int32); over the flattened array when axis is none.
Array argmax(const Array& x, std::optional<int64_t> axis = std::nullopt, bool keepdims = false);
Array argmin(const Array& x, std::optional<int64_t> axis = std::nullopt, bool keepdims = false);
Array cumsum(const Array& x, std::optional<int64_t> axis = std::nullopt,
             std::optional<DType> dtype = std::nullopt);
Array cumprod(const Array& x, std::optional<int64_t> axis = std::nullopt,
              std::optional<DType> dtype = std::nullopt);
// Ascending (NaN last); stable. axis none sorts the flattened array.
Array sort(const Array& x, std::optional<int64_t> axis = -1, bool descending = false);
Array argsort(const Array& x, std::optional<int64_t> axis = -1, bool descending = false);

// ----- numpy.fft --------------------------------------------------------------------------
// jnp.fft's transforms, lowered to lax::fft over the innermost axes (the transformed axes are
// moved there and back; more than 3 axes take several transforms). `n`/`s` crop or zero-pad
// the input along the transformed axes (irfft: the output length, 2 (m - 1) by default).
// `norm` scales as NumPy: "backward" (the default: none forward, 1/n inverse), "ortho"
// (1/sqrt(n) both ways) or "forward" (1/n forward, none inverse). fft/ifft/fftn/ifftn give
// complex64 for f32 and narrower inputs, complex128 for f64; rfft* take real inputs.
namespace fft {

Array fft(const ArrayLike& a, std::optional<int64_t> n = std::nullopt, int64_t axis = -1,
          const std::string& norm = "backward");
Array ifft(const ArrayLike& a, std::optional<int64_t> n = std::nullopt, int64_t axis = -1,
           const std::string& norm = "backward");
Array rfft(const ArrayLike& a, std::optional<int64_t> n = std::nullopt, int64_t axis = -1,
           const std::string& norm = "backward");
Array irfft(const ArrayLike& a, std::optional<int64_t> n = std::nullopt, int64_t axis = -1,
            const std::string& norm = "backward");
// s: the transformed sizes; axes: the axes (default: the last len(s) axes, or all).
using Sizes = std::optional<std::vector<int64_t>>;
Array fftn(const ArrayLike& a, const Sizes& s = std::nullopt, const Sizes& axes = std::nullopt,
           const std::string& norm = "backward");
Array ifftn(const ArrayLike& a, const Sizes& s = std::nullopt, const Sizes& axes = std::nullopt,
            const std::string& norm = "backward");
Array rfftn(const ArrayLike& a, const Sizes& s = std::nullopt, const Sizes& axes = std::nullopt,
            const std::string& norm = "backward");
Array irfftn(const ArrayLike& a, const Sizes& s = std::nullopt, const Sizes& axes = std::nullopt,
             const std::string& norm = "backward");
// The 2-D forms: axes {-2, -1} by default.
Array fft2(const ArrayLike& a, const Sizes& s = std::nullopt,
           const std::vector<int64_t>& axes = {-2, -1}, const std::string& norm = "backward");
Array ifft2(const ArrayLike& a, const Sizes& s = std::nullopt,
            const std::vector<int64_t>& axes = {-2, -1}, const std::string& norm = "backward");
Array rfft2(const ArrayLike& a, const Sizes& s = std::nullopt,
            const std::vector<int64_t>& axes = {-2, -1}, const std::string& norm = "backward");
Array irfft2(const ArrayLike& a, const Sizes& s = std::nullopt,
             const std::vector<int64_t>& axes = {-2, -1}, const std::string& norm = "backward");
// Sample frequencies (cycles per unit of d) of an n-point fft, and of an rfft.
Array fftfreq(int64_t n, double d = 1.0, DType dtype = DType::F32);
Array rfftfreq(int64_t n, double d = 1.0, DType dtype = DType::F32);
// The zero frequency moved to the centre (and back) along `axes` (default: all).
Array fftshift(const Array& x, const Axes& axes = {});
Array ifftshift(const Array& x, const Axes& axes = {});

}  // namespace fft

}  // namespace numpy

// ----- Operators ------------------------------------------------------------------------
// Element-wise, with broadcasting and promotion, as the numpy function of the same meaning.
// Comparisons return bool Arrays (use all()/any() or where() to act on them).

#define CUJAX_NUMPY_BINARY_OPERATOR(op)                  \
  Array operator op(const Array& x, const Array& y);     \
  Array operator op(const Array& x, const ArrayLike& y); \
  Array operator op(const ArrayLike& x, const Array& y);
CUJAX_NUMPY_BINARY_OPERATOR(+)
CUJAX_NUMPY_BINARY_OPERATOR(-)
CUJAX_NUMPY_BINARY_OPERATOR(*)
CUJAX_NUMPY_BINARY_OPERATOR(/)
CUJAX_NUMPY_BINARY_OPERATOR(%)
CUJAX_NUMPY_BINARY_OPERATOR(&)
CUJAX_NUMPY_BINARY_OPERATOR(|)
CUJAX_NUMPY_BINARY_OPERATOR(^)
CUJAX_NUMPY_BINARY_OPERATOR(==)
CUJAX_NUMPY_BINARY_OPERATOR(!=)
CUJAX_NUMPY_BINARY_OPERATOR(<)
CUJAX_NUMPY_BINARY_OPERATOR(<=)
CUJAX_NUMPY_BINARY_OPERATOR(>)
CUJAX_NUMPY_BINARY_OPERATOR(>=)
#undef CUJAX_NUMPY_BINARY_OPERATOR

Array operator-(const Array& x);
Array operator+(const Array& x);
Array operator~(const Array& x);  // bitwise not (logical not for bool)

// x += y rebinds x to a new array (arrays are immutable), as in JAX.
Array& operator+=(Array& x, const ArrayLike& y);
Array& operator-=(Array& x, const ArrayLike& y);
Array& operator*=(Array& x, const ArrayLike& y);
Array& operator/=(Array& x, const ArrayLike& y);

// ----- Template definitions -------------------------------------------------------------

namespace numpy {
template <class T>
Array array(const std::vector<T>& values, std::optional<Shape> shape, std::optional<DType> dtype) {
  Shape s = shape ? *shape : Shape{static_cast<int64_t>(values.size())};
  return array(HostTensor::from_vector(values, std::move(s)), dtype);
}
}  // namespace numpy

}  // namespace cujax
