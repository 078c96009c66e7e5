// Index arithmetic shared by the backends: flat <-> multi-index conversion over row-major
// shapes, strided box copies (the core of transpose, slice, reverse, broadcast, pad,
// concatenate and the dynamic slices), and the clamping rules of the StableHLO spec.
// Header-only, and every function is CUJAX_HD, so CUDA kernels use the same math as the CPU
// backend and the CPU unit tests check it.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cujax/core/half.h"

namespace cujax::index {

// The largest rank the shared index structures hold.
inline constexpr int kMaxRank = 16;

CUJAX_HD constexpr int64_t clamp(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// An index value of any integer type as int64; unsigned values above INT64_MAX saturate, so
// they stay out of range instead of wrapping to negative.
template <class T>
CUJAX_HD constexpr int64_t to_index(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? 1 : 0;
  } else if constexpr (std::is_unsigned_v<T>) {
    return static_cast<uint64_t>(v) > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                                       : static_cast<int64_t>(v);
  } else {
    return static_cast<int64_t>(v);
  }
}

// Start index of a dynamic_slice / dynamic_update_slice / gather window of `size` elements
// in a dimension of `dim` elements: clamp(start, 0, dim - size).
CUJAX_HD constexpr int64_t clamp_start(int64_t start, int64_t dim, int64_t size) {
  const int64_t hi = dim - size;
  return start < 0 ? 0 : (hi < 0 ? 0 : (start > hi ? hi : start));
}

CUJAX_HD inline int64_t num_elements(const int64_t* dims, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= dims[d];
  return n;
}

// Row-major strides (in elements) of `dims`.
CUJAX_HD inline void row_major_strides(const int64_t* dims, int rank, int64_t* strides) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= dims[d];
  }
}

// Multi-index of row-major element `flat` of `dims`.
CUJAX_HD inline void unravel(int64_t flat, const int64_t* dims, int rank, int64_t* idx) {
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t n = dims[d];
    idx[d] = n > 0 ? flat % n : 0;
    flat = n > 0 ? flat / n : 0;
  }
}

// sum idx[d] * strides[d].
CUJAX_HD inline int64_t ravel(const int64_t* idx, const int64_t* strides, int rank) {
  int64_t off = 0;
  for (int d = 0; d < rank; ++d) off += idx[d] * strides[d];
  return off;
}

// Offset of row-major element `flat` of `dims` in a layout with `strides`: unravel then ravel
// without the temporary.
CUJAX_HD inline int64_t strided_offset(int64_t flat, const int64_t* dims, const int64_t* strides,
                                       int rank) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t n = dims[d];
    if (n <= 0) return 0;
    off += (flat % n) * strides[d];
    flat /= n;
  }
  return off;
}

// Advances a row-major multi-index over dims[0..rank) (an odometer); false after the last.
CUJAX_HD inline bool next_index(int64_t* idx, const int64_t* dims, int rank) {
  for (int d = rank - 1; d >= 0; --d) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

// The input indices of one dimension of `pad` that land inside the result: input index i goes
// to low + i * (interior + 1) in a result dimension of `out_dim` elements. Gives the first
// such i and how many there are (0 when none; edge padding may be negative).
CUJAX_HD inline void pad_source_range(int64_t in_dim, int64_t out_dim, int64_t low,
                                      int64_t interior, int64_t* first, int64_t* count) {
  const int64_t step = interior + 1;
  // smallest i with low + i * step >= 0
  int64_t lo = 0;
  if (low < 0) lo = (-low + step - 1) / step;
  // largest i with low + i * step <= out_dim - 1
  const int64_t top = out_dim - 1 - low;
  int64_t hi = top < 0 ? -1 : top / step;
  if (hi > in_dim - 1) hi = in_dim - 1;
  *first = lo;
  *count = hi >= lo ? hi - lo + 1 : 0;
}

// A box of dims[0..rank) elements read from src[src_offset + sum idx * src_strides] and
// written to dst[dst_offset + sum idx * dst_strides] (strides in elements, possibly zero or
// negative).
struct StridedCopy {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t src_strides[kMaxRank] = {};
  int64_t dst_strides[kMaxRank] = {};
  int64_t src_offset = 0;
  int64_t dst_offset = 0;

  CUJAX_HD int64_t num_elements() const { return index::num_elements(dims, rank); }

  // Appends a dimension (outermost first).
  CUJAX_HD void push(int64_t size, int64_t src_stride, int64_t dst_stride) {
    dims[rank] = size;
    src_strides[rank] = src_stride;
    dst_strides[rank] = dst_stride;
    ++rank;
  }

  // The same element mapping with fewer dimensions: drops size-1 dimensions and merges
  // neighbours that are contiguous in both src and dst. An empty box becomes one dimension
  // of size 0.
  CUJAX_HD void simplify() {
    for (int d = 0; d < rank; ++d)
      if (dims[d] == 0) {
        rank = 1;
        dims[0] = 0;
        src_strides[0] = dst_strides[0] = 0;
        return;
      }
    int r = 0;
    for (int d = 0; d < rank; ++d) {
      if (dims[d] == 1) continue;
      if (r > 0 && src_strides[r - 1] == src_strides[d] * dims[d] &&
          dst_strides[r - 1] == dst_strides[d] * dims[d]) {
        dims[r - 1] *= dims[d];
        src_strides[r - 1] = src_strides[d];
        dst_strides[r - 1] = dst_strides[d];
        continue;
      }
      dims[r] = dims[d];
      src_strides[r] = src_strides[d];
      dst_strides[r] = dst_strides[d];
      ++r;
    }
    rank = r;
  }

  // Source and destination offsets of row-major element `flat` of the box.
  CUJAX_HD void offsets(int64_t flat, int64_t* src, int64_t* dst) const {
    int64_t s = src_offset, t = dst_offset;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t i = flat % dims[d];
      flat /= dims[d];
      s += i * src_strides[d];
      t += i * dst_strides[d];
    }
    *src = s;
    *dst = t;
  }
};

// Copies elements [begin, end) (row-major over the box) of `c`, one element at a time: the
// form a GPU thread or a small CPU loop uses.
template <class T>
CUJAX_HD inline void strided_copy_elements(const StridedCopy& c, const T* src, T* dst,
                                           int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    int64_t s, t;
    c.offsets(i, &s, &t);
    dst[t] = src[s];
  }
}

}  // namespace cujax::index
