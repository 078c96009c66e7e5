// cujax::lax: the StableHLO-level ops under jax.lax's names. Operands must already agree in
// shape and dtype (no broadcasting, no promotion: that is cujax::numpy's job); a mismatch
// throws Error naming the op and both types. Every function works eagerly and under jit.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "cujax/array.h"

namespace cujax::lax {

// Element-wise, binary.
Array add(const Array& x, const Array& y);
Array sub(const Array& x, const Array& y);
Array mul(const Array& x, const Array& y);
Array div(const Array& x, const Array& y);  // integer division rounds toward zero
Array rem(const Array& x, const Array& y);  // sign of x, as C's fmod
Array pow(const Array& x, const Array& y);
Array max(const Array& x, const Array& y);  // NaN-propagating
Array min(const Array& x, const Array& y);
Array atan2(const Array& x, const Array& y);
Array bitwise_and(const Array& x, const Array& y);
Array bitwise_or(const Array& x, const Array& y);
Array bitwise_xor(const Array& x, const Array& y);
Array shift_left(const Array& x, const Array& y);
Array shift_right_logical(const Array& x, const Array& y);
Array shift_right_arithmetic(const Array& x, const Array& y);

// Comparisons give bool arrays; floats compare as IEEE (NaN unordered).
Array eq(const Array& x, const Array& y);
Array ne(const Array& x, const Array& y);
Array lt(const Array& x, const Array& y);
Array le(const Array& x, const Array& y);
Array gt(const Array& x, const Array& y);
Array ge(const Array& x, const Array& y);

// Element-wise, unary.
Array neg(const Array& x);
Array abs(const Array& x);
Array sign(const Array& x);
Array floor(const Array& x);
Array ceil(const Array& x);
Array round(const Array& x, bool away_from_zero = true);  // false: to nearest even
Array exp(const Array& x);
Array expm1(const Array& x);
Array log(const Array& x);
Array log1p(const Array& x);
Array tanh(const Array& x);
Array logistic(const Array& x);
Array sin(const Array& x);
Array cos(const Array& x);
Array tan(const Array& x);
Array sqrt(const Array& x);
Array rsqrt(const Array& x);
Array cbrt(const Array& x);
Array erf(const Array& x);      // a rational approximation in element-wise ops, as XLA expands it
Array erfc(const Array& x);     // 1 - erf(x), accurate in the tails
Array erf_inv(const Array& x);  // inverse of erf on (-1, 1)
Array square(const Array& x);
Array reciprocal(const Array& x);
Array integer_pow(const Array& x, int y);  // repeated squaring; y < 0 gives 1 / x^-y
Array exp2(const Array& x);
Array asin(const Array& x);
Array acos(const Array& x);
Array atan(const Array& x);
Array sinh(const Array& x);
Array cosh(const Array& x);
Array asinh(const Array& x);
Array acosh(const Array& x);
Array atanh(const Array& x);
Array is_finite(const Array& x);  // float -> bool
Array bitwise_not(const Array& x);
Array population_count(const Array& x);
Array clz(const Array& x);

// Complex numbers (complex64 has f32 parts, complex128 f64 parts).
// complex(re, im): re + i im from two floats of one shape and dtype (f32 -> complex64).
Array complex(const Array& re, const Array& im);
// The real and imaginary parts of a complex x (complex64 -> f32).
Array real(const Array& x);
Array imag(const Array& x);
// The complex conjugate; a real x gives a complex result with zero imaginary part, as in
// jax.lax. StableHLO has no conj op: complex(real(x), -imag(x)).
Array conj(const Array& x);

// Discrete Fourier transforms over the last fft_lengths.size() (1 to 3) dimensions, as
// jax.lax.fft. FFT/IFFT: complex -> complex (a real operand is converted to complex), IFFT
// divides by the number of points. RFFT: real -> complex, the last dimension n becomes n/2+1.
// IRFFT: complex -> real, the last dimension (fft_lengths.back()/2+1 entries) becomes
// fft_lengths.back(). The transformed dimensions of the operand must equal fft_lengths (but
// IRFFT's last).
enum class FftType { FFT, IFFT, RFFT, IRFFT };
Array fft(const Array& x, FftType fft_type, const std::vector<int64_t>& fft_lengths);

// `pred` is bool, of the operands' shape or a scalar.
Array select(const Array& pred, const Array& on_true, const Array& on_false);
// `min` and `max` have x's shape or are scalars.
Array clamp(const Array& min, const Array& x, const Array& max);

// The identity, marking that gradients do not flow through x.
Array stop_gradient(const Array& x);

// To bool: x != 0. The identity when x already has `dtype`.
Array convert_element_type(const Array& x, DType dtype);
// Same bit width: same shape. Narrower: a trailing dimension of the width ratio is added.
// Wider: the trailing dimension (the ratio) is consumed.
Array bitcast_convert_type(const Array& x, DType dtype);
Array reduce_precision(const Array& x, int exponent_bits, int mantissa_bits);

// Shapes. Axis arguments may be negative (counted from the end) where JAX allows it.
Array broadcast_in_dim(const Array& x, const Shape& shape,
                       const std::vector<int64_t>& broadcast_dimensions);
Array broadcast(const Array& x, const Shape& sizes);  // prepends `sizes`
Array reshape(const Array& x, const Shape& new_sizes);
Array transpose(const Array& x, const std::vector<int64_t>& permutation);
Array rev(const Array& x, const std::vector<int64_t>& dimensions);
Array squeeze(const Array& x, const std::vector<int64_t>& dimensions);      // a reshape
Array expand_dims(const Array& x, const std::vector<int64_t>& dimensions);  // a broadcast_in_dim
Array slice(const Array& x, const std::vector<int64_t>& start_indices,
            const std::vector<int64_t>& limit_indices, const std::vector<int64_t>& strides = {});
Array slice_in_dim(const Array& x, int64_t start, int64_t limit, int64_t stride, int64_t axis);
// Start indices are scalar integer arrays, one per dimension. As in jax.lax, a negative start
// counts from the end of its dimension; then out-of-range starts are clamped so that the slice
// fits, as in XLA.
Array dynamic_slice(const Array& x, const std::vector<Array>& start_indices,
                    const std::vector<int64_t>& slice_sizes);
Array dynamic_update_slice(const Array& x, const Array& update,
                           const std::vector<Array>& start_indices);
Array dynamic_slice_in_dim(const Array& x, const Array& start_index, int64_t slice_size,
                           int64_t axis = 0);
Array dynamic_update_slice_in_dim(const Array& x, const Array& update, const Array& start_index,
                                  int64_t axis);
Array concatenate(const std::vector<Array>& operands, int64_t dimension);
struct PadConfig {
  int64_t low = 0, high = 0, interior = 0;
};
// Negative low/high padding removes elements.
Array pad(const Array& x, const Array& padding_value, const std::vector<PadConfig>& config);
Array iota(DType dtype, int64_t size);
Array broadcasted_iota(DType dtype, const Shape& shape, int64_t dimension);

// Contractions.
struct DotDimensionNumbers {
  std::vector<int64_t> lhs_contracting_dimensions, rhs_contracting_dimensions;
  std::vector<int64_t> lhs_batch_dimensions, rhs_batch_dimensions;
};
Array dot_general(const Array& lhs, const Array& rhs, const DotDimensionNumbers& dims,
                  std::optional<DType> preferred_element_type = std::nullopt);
// Vector/matrix product (ranks 1 or 2) contracting lhs's last and rhs's first dimension.
Array dot(const Array& lhs, const Array& rhs,
          std::optional<DType> preferred_element_type = std::nullopt);

// Convolution, as jax.lax.conv_general_dilated. Layouts are spelled as in JAX: lhs and out
// with N (batch), C (feature) and spatial letters, rhs with O (output feature), I (input
// feature) and the same spatial letters, e.g. {"NHWC", "HWIO", "NHWC"}. Empty specs mean
// NC<spatial>, OI<spatial>, NC<spatial> (JAX's default).
struct ConvDimensionNumbers {
  std::string lhs_spec, rhs_spec, out_spec;
};
// (low, high) per spatial dimension; empty means no padding.
using Padding = std::vector<std::pair<int64_t, int64_t>>;
// "SAME" or "VALID" padding for the given input spatial sizes, window sizes and strides (as
// jax.lax.padtype_to_pads).
Padding padtype_to_pads(const std::vector<int64_t>& in_shape,
                        const std::vector<int64_t>& window_shape,
                        const std::vector<int64_t>& window_strides, const std::string& padding);
Array conv_general_dilated(const Array& lhs, const Array& rhs,
                           const std::vector<int64_t>& window_strides, const Padding& padding,
                           const std::vector<int64_t>& lhs_dilation = {},
                           const std::vector<int64_t>& rhs_dilation = {},
                           const ConvDimensionNumbers& dimension_numbers = {},
                           int64_t feature_group_count = 1, int64_t batch_group_count = 1,
                           std::optional<DType> preferred_element_type = std::nullopt);
// jax.lax.conv_transpose: the convolution whose window slides over the input dilated by
// `strides` (so the output grows by them), padded as `padding` says: "SAME" (output = input *
// stride), "VALID" (input * stride + max(k - stride, 0) for the dilated kernel size k) or
// explicit pairs, which pad the dilated input. Empty dimension numbers mean channels last as
// JAX's defaults (NWC/WIO, NHWC/HWIO, NDHWC/DHWIO). transpose_kernel flips the kernel's spatial
// axes and swaps its I and O axes, which makes this the gradient of conv_general_dilated with
// the same kernel and strides.
Array conv_transpose(const Array& lhs, const Array& rhs, const std::vector<int64_t>& strides,
                     const std::variant<std::string, Padding>& padding,
                     const std::vector<int64_t>& rhs_dilation = {},
                     const ConvDimensionNumbers& dimension_numbers = {},
                     bool transpose_kernel = false,
                     std::optional<DType> preferred_element_type = std::nullopt);

// Reductions. `computation` maps (accumulators..., values...) to new accumulators and is
// traced once into the op's region.
using Computation = std::function<std::vector<Array>(const std::vector<Array>&)>;
std::vector<Array> reduce(const std::vector<Array>& operands, const std::vector<Array>& init_values,
                          const Computation& computation, const std::vector<int64_t>& dimensions);
Array reduce_sum(const Array& x, const std::vector<int64_t>& axes);
Array reduce_max(const Array& x, const std::vector<int64_t>& axes);
Array reduce_min(const Array& x, const std::vector<int64_t>& axes);
Array reduce_prod(const Array& x, const std::vector<int64_t>& axes);
Array reduce_and(const Array& x, const std::vector<int64_t>& axes);
Array reduce_or(const Array& x, const std::vector<int64_t>& axes);
// First index of the max/min along `axis` (NaN counts as the max, as in JAX).
Array argmax(const Array& x, int64_t axis, DType index_dtype = DType::I32);
Array argmin(const Array& x, int64_t axis, DType index_dtype = DType::I32);
struct WindowConfig {
  std::vector<int64_t> window_dimensions;
  std::vector<int64_t> window_strides;               // default 1
  std::vector<std::pair<int64_t, int64_t>> padding;  // (low, high) per dimension; default none
  std::vector<int64_t> base_dilation;                // default 1
  std::vector<int64_t> window_dilation;              // default 1
};
std::vector<Array> reduce_window(const std::vector<Array>& operands,
                                 const std::vector<Array>& init_values,
                                 const Computation& computation, const WindowConfig& window);
// Cumulative reductions along `axis`, as reduce_window over a window of the whole axis (the
// lowering jax.lax uses on CPU).
Array cumsum(const Array& x, int64_t axis, bool reverse = false);
Array cumprod(const Array& x, int64_t axis, bool reverse = false);
Array cummax(const Array& x, int64_t axis, bool reverse = false);
Array cummin(const Array& x, int64_t axis, bool reverse = false);

// Sorting along `dimension`; the first `num_keys` operands are compared lexicographically
// (floats in total order with NaN last, as jax.lax.sort).
std::vector<Array> sort(const std::vector<Array>& operands, int64_t dimension = -1,
                        bool is_stable = true, int num_keys = 1);
Array sort(const Array& operand, int64_t dimension = -1, bool is_stable = true);
// Sorts keys and carries values along: {sorted keys, values}.
std::pair<Array, Array> sort_key_val(const Array& keys, const Array& values, int64_t dimension = -1,
                                     bool is_stable = true);
// The k largest entries along the last axis, in descending order, and their indices (i32).
std::pair<Array, Array> top_k(const Array& operand, int64_t k);

// Gather and scatter with XLA's dimension numbers. Gather clamps start indices so that each
// slice fits; scatter skips updates whose window is out of bounds (XLA's semantics).
struct GatherDimensionNumbers {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map;
  std::vector<int64_t> operand_batching_dims, start_indices_batching_dims;
  int64_t index_vector_dim = -1;  // -1: the last dimension of the indices
};
Array gather(const Array& operand, const Array& start_indices, const GatherDimensionNumbers& dims,
             const std::vector<int64_t>& slice_sizes, bool indices_are_sorted = false);
struct ScatterDimensionNumbers {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  std::vector<int64_t> input_batching_dims, scatter_indices_batching_dims;
  int64_t index_vector_dim = -1;
};
Array scatter(const Array& operand, const Array& indices, const Array& updates,
              const ScatterDimensionNumbers& dims);  // the update replaces
// Scatter combining with `computation` ((current, update) -> new value), traced into the op.
Array scatter_apply(const Array& operand, const Array& indices, const Array& updates,
                    const ScatterDimensionNumbers& dims, const Computation& computation);
Array scatter_add(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims);
Array scatter_max(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims);
Array scatter_min(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims);
Array scatter_mul(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims);

// An array of `shape` filled with `value` converted to `dtype` (a scalar constant broadcast
// under a trace, as jax.lax.full). ±inf become the extreme values of integer dtypes.
Array full(const Shape& shape, double value, DType dtype);
Array full_like(const Array& x, double value);

std::vector<Array> optimization_barrier(const std::vector<Array>& operands);

}  // namespace cujax::lax

// cond, switch_, while_loop, fori_loop, scan.
#include "cujax/control_flow.h"  // IWYU pragma: export
