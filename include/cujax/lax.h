// cujax::lax: the StableHLO-level ops under jax.lax's names. Operands must already agree in
// shape and dtype (no broadcasting, no promotion: that is cujax::numpy's job); a mismatch
// throws Error naming the op and both types. Every function works eagerly and under jit.
#pragma once

#include <functional>
#include <optional>
#include <string>
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
Array erf(const Array& x);  // a rational approximation in element-wise ops, as XLA expands it
Array is_finite(const Array& x);
Array bitwise_not(const Array& x);
Array population_count(const Array& x);
Array clz(const Array& x);

Array select(const Array& pred, const Array& on_true, const Array& on_false);
Array clamp(const Array& min, const Array& x, const Array& max);

Array convert_element_type(const Array& x, DType dtype);
Array bitcast_convert_type(const Array& x, DType dtype);
Array reduce_precision(const Array& x, int exponent_bits, int mantissa_bits);

// Shapes.
Array broadcast_in_dim(const Array& x, const Shape& shape,
                       const std::vector<int64_t>& broadcast_dimensions);
Array broadcast(const Array& x, const Shape& sizes);  // prepends `sizes`
Array reshape(const Array& x, const Shape& new_sizes);
Array transpose(const Array& x, const std::vector<int64_t>& permutation);
Array rev(const Array& x, const std::vector<int64_t>& dimensions);
Array squeeze(const Array& x, const std::vector<int64_t>& dimensions);
Array expand_dims(const Array& x, const std::vector<int64_t>& dimensions);
Array slice(const Array& x, const std::vector<int64_t>& start_indices,
            const std::vector<int64_t>& limit_indices, const std::vector<int64_t>& strides = {});
Array slice_in_dim(const Array& x, int64_t start, int64_t limit, int64_t stride, int64_t axis);
// Start indices are scalar integer arrays; out-of-range starts are clamped, as in XLA.
Array dynamic_slice(const Array& x, const std::vector<Array>& start_indices,
                    const std::vector<int64_t>& slice_sizes);
Array dynamic_update_slice(const Array& x, const Array& update,
                           const std::vector<Array>& start_indices);
Array concatenate(const std::vector<Array>& operands, int64_t dimension);
struct PadConfig {
  int64_t low = 0, high = 0, interior = 0;
};
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
Array dot(const Array& lhs, const Array& rhs);  // vector/matrix product on the last/first dims

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
  std::vector<int64_t> window_strides;  // default 1
  std::vector<std::pair<int64_t, int64_t>> padding;  // default none
};
std::vector<Array> reduce_window(const std::vector<Array>& operands,
                                 const std::vector<Array>& init_values,
                                 const Computation& computation, const WindowConfig& window);
Array cumsum(const Array& x, int64_t axis, bool reverse = false);
Array cumprod(const Array& x, int64_t axis, bool reverse = false);
Array cummax(const Array& x, int64_t axis, bool reverse = false);
Array cummin(const Array& x, int64_t axis, bool reverse = false);

// Sorting along `dimension`; the first `num_keys` operands are compared lexicographically
// (floats in total order with NaN last, as jax.lax.sort).
std::vector<Array> sort(const std::vector<Array>& operands, int64_t dimension = -1,
                        bool is_stable = true, int num_keys = 1);

// Gather and scatter with XLA's dimension numbers.
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
Array scatter_add(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims);
Array scatter_max(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims);
Array scatter_min(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims);
Array scatter_mul(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims);

// A scalar of `dtype` (for literals inside traced code).
Array full(const Shape& shape, double value, DType dtype);

std::vector<Array> optimization_barrier(const std::vector<Array>& operands);

}  // namespace cujax::lax
