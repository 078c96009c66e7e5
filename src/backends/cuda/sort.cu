// stablehlo.sort on the device. Both paths sort each row's positions and then gather every
// operand by them, so any number of operands ride along with the key:
//  - JAX's comparators for one key (LT or GT; floats by TOTALORDER after its canonicalisation):
//    the key becomes an unsigned integer with the same order, and CUB's segmented radix sort
//    (stable in both directions) sorts (key, position) pairs;
//  - any other comparator: a stable bottom-up merge sort of each row by the region on the
//    scalar interpreter, one thread per row (slow for a few long rows: the fallback, not the
//    common case).
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/op_launch.h"

namespace cujax::cuda {

namespace {

constexpr int kMaxOperands = 8;

// Row s of the sort and the stride along its dimension.
struct Rows {
  int outer_rank = 0;
  int64_t outer_dims[index::kMaxRank] = {};
  int64_t outer_strides[index::kMaxRank] = {};
  int64_t n = 0;       // elements per row
  int64_t stride = 1;  // along the sorted dimension
  int64_t rows = 1;

  __device__ int64_t base(int64_t s) const {
    return index::strided_offset(s, outer_dims, outer_strides, outer_rank);
  }
};

Rows rows_of(const SortShape& shape) {
  Rows r;
  int64_t strides[index::kMaxRank];
  index::row_major_strides(shape.dims, shape.rank, strides);
  for (int d = 0; d < shape.rank; ++d) {
    if (d == shape.dim) continue;
    r.outer_dims[r.outer_rank] = shape.dims[d];
    r.outer_strides[r.outer_rank++] = strides[d];
    r.rows *= shape.dims[d];
  }
  r.n = shape.dims[shape.dim];
  r.stride = strides[shape.dim];
  return r;
}

struct Operands {
  int n = 0;
  int bytes[kMaxOperands] = {};
  const void* in[kMaxOperands] = {};
  void* out[kMaxOperands] = {};
};

Operands operands_of(int n, const DType* types, const void* const* inputs, void* const* outputs) {
  if (n > kMaxOperands) throw UnsupportedError("sort: too many operands for cuda");
  Operands o;
  o.n = n;
  for (int k = 0; k < n; ++k) {
    o.bytes[k] = static_cast<int>(size_of(types[k]));
    o.in[k] = inputs[k];
    o.out[k] = outputs[k];
  }
  return o;
}

// out_k[row s, i] = in_k[row s, perm[s * n + i]].
__global__ void gather_rows_kernel(Rows r, Operands o, const int32_t* perm) {
  const int64_t total = r.rows * r.n;
  for (int64_t e = thread_begin(); e < total; e += thread_stride()) {
    const int64_t s = e / r.n, i = e % r.n;
    const int64_t base = r.base(s);
    const int64_t src = base + static_cast<int64_t>(perm[e]) * r.stride;
    const int64_t dst = base + i * r.stride;
    for (int k = 0; k < o.n; ++k)
      scalar_program::store(o.out[k], dst, o.bytes[k], scalar_program::load(o.in[k], src, o.bytes[k]));
  }
}

template <class K, class T>
__device__ K radix_key(T x, const RadixKey& key) {
  if constexpr (ew::is_float_v<T>) {
    uint64_t b = scalar_program::to_bits(x);
    if (key.canonicalize) {
      const double d = ew::to_compute<double>(x);
      if (d != d)
        b = key.canonical_nan;
      else if (d == 0.0)
        b = key.canonical_zero;
    }
    constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
    const K k = static_cast<K>(b);
    return (k & sign) ? static_cast<K>(~k) : static_cast<K>(k | sign);
  } else if constexpr (ew::is_signed_int_v<T>) {
    constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
    return static_cast<K>(static_cast<K>(x) ^ sign);
  } else {
    return static_cast<K>(x);
  }
}

template <class K, class T>
__global__ void radix_keys_kernel(Rows r, RadixKey key, const T* in, K* keys, int32_t* positions,
                                  int32_t* offsets) {
  const int64_t total = r.rows * r.n;
  for (int64_t e = thread_begin(); e < total; e += thread_stride()) {
    const int64_t s = e / r.n, i = e % r.n;
    keys[e] = radix_key<K>(in[r.base(s) + i * r.stride], key);
    positions[e] = static_cast<int32_t>(i);
    if (i == 0) offsets[s] = static_cast<int32_t>(e);
  }
  if (thread_begin() == 0) offsets[r.rows] = static_cast<int32_t>(total);
}

__global__ void merge_sort_rows_kernel(scalar_program::Program cmp, Rows r, Operands o, int32_t* perm,
                                       int32_t* tmp) {
  uint64_t args[2 * kMaxOperands], out[scalar_program::Program::kMaxResults];
  for (int64_t s = thread_begin(); s < r.rows; s += thread_stride()) {
    const int64_t base = r.base(s);
    int32_t* a = perm + s * r.n;
    int32_t* b = tmp + s * r.n;
    for (int64_t i = 0; i < r.n; ++i) a[i] = static_cast<int32_t>(i);
    // less(x, y): the comparator on (operand_k[x], operand_k[y]) pairs
    auto less = [&](int32_t x, int32_t y) {
      for (int k = 0; k < o.n; ++k) {
        args[2 * k] = scalar_program::load(o.in[k], base + x * r.stride, o.bytes[k]);
        args[2 * k + 1] = scalar_program::load(o.in[k], base + y * r.stride, o.bytes[k]);
      }
      cmp.run(args, out);
      return (out[0] & 1) != 0;
    };
    for (int64_t width = 1; width < r.n; width *= 2) {
      for (int64_t lo = 0; lo < r.n; lo += 2 * width) {
        const int64_t mid = lo + width < r.n ? lo + width : r.n;
        const int64_t hi = lo + 2 * width < r.n ? lo + 2 * width : r.n;
        int64_t i = lo, j = mid, k = lo;
        while (i < mid && j < hi) b[k++] = less(a[j], a[i]) ? a[j++] : a[i++];  // stable
        while (i < mid) b[k++] = a[i++];
        while (j < hi) b[k++] = a[j++];
      }
      int32_t* t = a;
      a = b;
      b = t;
    }
    if (a != perm + s * r.n)
      for (int64_t i = 0; i < r.n; ++i) perm[s * r.n + i] = a[i];
  }
}

void check_size(const Rows& r) {
  if (r.rows * r.n >= (int64_t{1} << 31))
    throw UnsupportedError("sort: more than 2^31 elements are not supported on cuda");
}

void gather_rows(const Rows& r, const Operands& o, const int32_t* perm, cudaStream_t s) {
  gather_rows_kernel<<<grid_for(r.rows * r.n), kBlock, 0, s>>>(r, o, perm);
  CUJAX_CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

}  // namespace

void launch_radix_sort(Device& device, const RadixKey& key, const SortShape& shape, int n,
                       const DType* types, const void* const* inputs, void* const* outputs) {
  const Rows r = rows_of(shape);
  const int64_t total = r.rows * r.n;
  if (total == 0) return;
  check_size(r);
  const Operands o = operands_of(n, types, inputs, outputs);
  cudaStream_t s = device.stream();
  const int items = static_cast<int>(total), segments = static_cast<int>(r.rows);
  auto pos_in = device.allocate(sizeof(int32_t) * total);
  auto pos_out = device.allocate(sizeof(int32_t) * total);
  auto offsets = device.allocate(sizeof(int32_t) * (r.rows + 1));
  visit_dtype(key.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using K = typename bits_of<sizeof(T)>::type;
    auto keys_in = device.allocate(sizeof(K) * total);
    auto keys_out = device.allocate(sizeof(K) * total);
    auto* ki = static_cast<K*>(keys_in.get());
    auto* ko = static_cast<K*>(keys_out.get());
    auto* pi = static_cast<int32_t*>(pos_in.get());
    auto* po = static_cast<int32_t*>(pos_out.get());
    auto* off = static_cast<int32_t*>(offsets.get());
    radix_keys_kernel<K, T>
        <<<grid_for(total), kBlock, 0, s>>>(r, key, static_cast<const T*>(o.in[0]), ki, pi, off);
    CUJAX_CUDA_CHECK_LAUNCH("radix_keys_kernel");
    auto sort = [&](void* temp, size_t& bytes) {
      if (key.descending)
        return cub::DeviceSegmentedRadixSort::SortPairsDescending(
            temp, bytes, ki, ko, pi, po, items, segments, off, off + 1, 0, int(sizeof(K) * 8), s);
      return cub::DeviceSegmentedRadixSort::SortPairs(temp, bytes, ki, ko, pi, po, items, segments,
                                                      off, off + 1, 0, int(sizeof(K) * 8), s);
    };
    size_t bytes = 0;
    CUJAX_CUDA_CHECK(sort(nullptr, bytes));
    auto temp = device.allocate(bytes);
    CUJAX_CUDA_CHECK(sort(temp.get(), bytes));
    gather_rows(r, o, po, s);
  });
}

void launch_region_sort(Device& device, const scalar_program::Program& comparator, const SortShape& shape,
                        int n, const DType* types, const void* const* inputs,
                        void* const* outputs) {
  const Rows r = rows_of(shape);
  const int64_t total = r.rows * r.n;
  if (total == 0) return;
  check_size(r);
  const Operands o = operands_of(n, types, inputs, outputs);
  cudaStream_t s = device.stream();
  auto perm = device.allocate(sizeof(int32_t) * total);
  auto tmp = device.allocate(sizeof(int32_t) * total);
  merge_sort_rows_kernel<<<grid_for(r.rows), kBlock, 0, s>>>(
      comparator, r, o, static_cast<int32_t*>(perm.get()), static_cast<int32_t*>(tmp.get()));
  CUJAX_CUDA_CHECK_LAUNCH("merge_sort_rows_kernel");
  gather_rows(r, o, static_cast<const int32_t*>(perm.get()), s);
}

}  // namespace cujax::cuda
