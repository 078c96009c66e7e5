// Host-callable launchers of the kernels behind op_kernels.cpp (defined in indexing.cu, sort.cu,
// region_reduce.cu and misc.cu). Pointers are device pointers; every launcher enqueues on `s`
// and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/common/gather_scatter.h"
#include "backends/common/index.h"
#include "backends/common/rng_bit_generator.h"
#include "backends/common/scalar_program.h"
#include "backends/common/window.h"
#include "cujax/core/dtype.h"

namespace cujax::cuda {

class Device;

// out[r] = operand[gather_source(r)], n result elements.
void launch_gather(size_t element_bytes, const plan::GatherPlan& g, const void* operand,
                   const void* indices, void* out, int64_t n, cudaStream_t s);

enum class Combine : uint8_t { Assign, Add, Sub, Mul, Max, Min, And, Or, Xor, Region };

// One input's scatter: `result` holds the input; every in-bounds update element is combined
// into it with atomics (any order: the combiners are commutative, and integer results do not
// depend on the order). Assign without unique indices lets the last position win, as the CPU
// backend does, through `winners` (one int64 per result element, n_results of them).
void launch_scatter(DType t, Combine c, const scalar_program::Program* region, const plan::ScatterPlan& p,
                    const void* indices, const void* updates, void* result, int64_t n_updates,
                    int64_t* winners, int64_t n_results, cudaStream_t s);
// Several inputs combined by one region: one thread applies the updates in order.
void launch_scatter_serial(int n_inputs, const DType* types, const scalar_program::Program& region,
                           const plan::ScatterPlan& p, const void* indices,
                           const void* const* updates, void* const* results, int64_t n_updates,
                           cudaStream_t s);

// dynamic_slice / dynamic_update_slice: the operand's dims, the window's sizes, and a device
// pointer to each start index (a scalar of index_type), clamped as the spec says.
struct DynamicWindow {
  int rank = 0;
  int64_t operand_dims[index::kMaxRank] = {};
  int64_t sizes[index::kMaxRank] = {};
  const void* starts[index::kMaxRank] = {};
  DType index_type = DType::I32;
};
// out (the window, row-major) = operand[window].
void launch_dynamic_slice(size_t element_bytes, const DynamicWindow& w, const void* operand,
                          void* out, cudaStream_t s);
// result[window] = update (result already holds the operand).
void launch_dynamic_update_slice(size_t element_bytes, const DynamicWindow& w, const void* update,
                                 void* result, cudaStream_t s);

// stablehlo.rng_bit_generator: `out` gets the plan's bits, `new_state` the advanced state
// (both device buffers; `state` is read on the device).
void launch_rng_bit_generator(const rng_bits::Plan& p, const void* state, void* out,
                              void* new_state, cudaStream_t s);

// clamp(lo, x, hi) with the CPU backend's maximum-then-minimum; scalar bounds when *_scalar.
void launch_clamp(DType t, const void* lo, bool lo_scalar, const void* x, const void* hi,
                  bool hi_scalar, void* out, int64_t n, cudaStream_t s);

// A reduce of n inputs (types[k]) by a region (args: n accumulators, then n elements) over the
// dimensions flagged in `reduced` of `dims`, starting from the scalars inits[k].
void launch_reduce_region(const scalar_program::Program& region, int n, const DType* types,
                          const void* const* inputs, const void* const* inits, void* const* outs,
                          const int64_t* dims, const bool* reduced, int rank, cudaStream_t s);

// Sorting along `dim` of `dims` (every operand has that shape).
struct SortShape {
  int rank = 0;
  int dim = 0;
  int64_t dims[index::kMaxRank] = {};
};
// The comparator JAX emits for one key (operand 0) compared LT or GT, floats by TOTALORDER
// (after -0 -> 0 and NaN -> one NaN when `canonical_*` are set): a stable radix sort of
// (key, position) pairs with CUB, then every operand gathered by the sorted positions.
struct RadixKey {
  DType type = DType::F32;
  bool descending = false;
  bool canonicalize = false;
  uint64_t canonical_zero = 0, canonical_nan = 0;  // bits of the comparator's constants
};
void launch_radix_sort(Device& device, const RadixKey& key, const SortShape& shape, int n,
                       const DType* types, const void* const* inputs, void* const* outputs);
// Any other comparator: a stable merge sort of each row's positions by the region (args:
// lhs and rhs of operand 0, of operand 1, ...), one thread per row, then the same gathers.
void launch_region_sort(Device& device, const scalar_program::Program& comparator, const SortShape& shape,
                        int n, const DType* types, const void* const* inputs, void* const* outputs);

// reduce_window of n inputs by a region (n accumulators, then n elements); padding and
// dilation holes contribute the init values, as the spec's padded operand does.
void launch_reduce_window(const scalar_program::Program& region, int n, const DType* types,
                          const void* const* inputs, const void* const* inits, void* const* outs,
                          const plan::Window& w, cudaStream_t s);
// select_and_scatter: each window of `operand` (one per source element) selects an element by
// the `select` region (args: the current pick, the next element; true keeps the pick); the
// source element is combined into it (by `scatter`, or `combine` when it is a single binary op)
// with atomics. `result` holds the init value everywhere; `selected` has one int64 per source
// element.
void launch_select_and_scatter(DType t, const scalar_program::Program& select, Combine combine,
                               const scalar_program::Program* scatter, const plan::Window& w,
                               const void* operand, const void* source, void* result,
                               int64_t* selected, cudaStream_t s);
// C[b] = A[b] (m x k) * B[b] (k x n), row-major, in the element type (integers wrap, booleans
// or/and): the products cuBLASLt does not run. One thread per result element.
void launch_dot_naive(DType t, const void* a, const void* b, void* c, int64_t batch, int64_t m,
                      int64_t n, int64_t k, cudaStream_t s);
void launch_is_finite(DType t, const void* in, bool* out, int64_t n, cudaStream_t s);
void launch_reduce_precision(DType t, int exponent_bits, int mantissa_bits, const void* in,
                             void* out, int64_t n, cudaStream_t s);

// convolution with its dimension numbers, strides, padding, dilations, window reversal and
// feature/batch groups: one thread per result element sums its window in double (f16, bf16,
// f32, f64 operands of the result's type), rounding once. Correct for every form; cuDNN is the
// fast path still to come.
struct ConvGeometry {
  int nsp = 0;  // spatial dimensions
  int out_rank = 0;
  int64_t out_dims[index::kMaxRank] = {};
  int out_batch_dim = 0, out_feature_dim = 0;
  int out_spatial_dim[index::kMaxRank] = {};
  int64_t in_batch_stride = 0, in_feature_stride = 0;
  int64_t in_spatial[index::kMaxRank] = {}, in_spatial_stride[index::kMaxRank] = {};
  int64_t k_spatial[index::kMaxRank] = {}, k_spatial_stride[index::kMaxRank] = {};
  int64_t k_in_stride = 0, k_out_stride = 0;
  int64_t stride[index::kMaxRank] = {}, pad_low[index::kMaxRank] = {};
  int64_t lhs_dilation[index::kMaxRank] = {}, rhs_dilation[index::kMaxRank] = {};
  bool reverse[index::kMaxRank] = {};
  int64_t Cg = 1, Og = 1, Nout = 1, feature_groups = 1, batch_groups = 1;
};
void launch_convolution(DType t, const ConvGeometry& g, const void* lhs, const void* rhs, void* out,
                        int64_t n, cudaStream_t s);

// triangular_solve of real matrices: op(a) x = b (left_side) or x op(a) = b, with a's `lower`
// triangle only (its unit diagonal assumed when unit_diagonal). One thread per right-hand side
// (a column of b on the left, a row on the right), substitution in double.
struct TriangularSolve {
  int64_t batch = 1, m = 0, rows = 0, cols = 0;
  bool left = true, lower = true, unit = false, transpose = false;
};
void launch_triangular_solve(DType t, const TriangularSolve& p, const void* a, const void* b,
                             void* x, cudaStream_t s);

}  // namespace cujax::cuda
