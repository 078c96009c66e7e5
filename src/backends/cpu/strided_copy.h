// Fast CPU execution of index::StridedCopy: memcpy for contiguous rows, tiled loops for
// transposes, and parallel_for over the outer rows of large boxes. Element types only matter
// through their width, so the copies run on unsigned integers of 1, 2, 4 or 8 bytes.
#pragma once

#include <algorithm>
#include <cstring>

#include "backends/common/index.h"
#include "backends/cpu/parallel.h"

namespace cujax::cpu {

// A 16-byte element (complex<f64>) moved as one value by the dtype-generic copies.
struct Word128 {
  uint64_t lo, hi;
};

namespace strided_detail {

template <class U>
inline void copy_row(const U* s, U* d, int64_t n, int64_t ss, int64_t ds) {
  if (ss == 1 && ds == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * sizeof(U));
  } else if (ds == 1 && ss == 0) {
    std::fill(d, d + n, *s);
  } else if (ds == 1) {
    for (int64_t i = 0; i < n; ++i) d[i] = s[i * ss];
  } else {
    for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
  }
}

// Rows [row_begin, row_end) of the box, a row being the innermost dimension.
template <class U>
void copy_rows(const index::StridedCopy& c, const U* src, U* dst, int64_t row_begin,
               int64_t row_end) {
  const int outer = c.rank - 1;
  const int64_t n = c.dims[outer];
  const int64_t ss = c.src_strides[outer], ds = c.dst_strides[outer];
  int64_t idx[index::kMaxRank];
  index::unravel(row_begin, c.dims, outer, idx);
  int64_t so = c.src_offset + index::ravel(idx, c.src_strides, outer);
  int64_t dof = c.dst_offset + index::ravel(idx, c.dst_strides, outer);
  for (int64_t r = row_begin; r < row_end; ++r) {
    copy_row(src + so, dst + dof, n, ss, ds);
    // odometer step with incremental offsets
    for (int d = outer - 1; d >= 0; --d) {
      so += c.src_strides[d];
      dof += c.dst_strides[d];
      if (++idx[d] < c.dims[d]) break;
      so -= c.src_strides[d] * c.dims[d];
      dof -= c.dst_strides[d] * c.dims[d];
      idx[d] = 0;
    }
  }
}

// A transpose-like box: the innermost dimension is contiguous in dst but not in src, and
// dimension `t` is contiguous in src. Copies kTile x kTile tiles of (t, innermost) so both
// sides stay in cache. Work items are (outer index, tile row) pairs.
inline constexpr int64_t kTile = 32;

template <class U>
void copy_tiled(const index::StridedCopy& c, int t, const U* src, U* dst, int64_t item_begin,
                int64_t item_end) {
  const int inner = c.rank - 1;
  int64_t odims[index::kMaxRank], os[index::kMaxRank], od[index::kMaxRank];
  int no = 0;
  for (int d = 0; d < inner; ++d)
    if (d != t) {
      odims[no] = c.dims[d];
      os[no] = c.src_strides[d];
      od[no] = c.dst_strides[d];
      ++no;
    }
  const int64_t rows = c.dims[t], cols = c.dims[inner];
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  const int64_t rs = c.src_strides[t], rd = c.dst_strides[t];
  const int64_t cs = c.src_strides[inner], cd = c.dst_strides[inner];
  int64_t idx[index::kMaxRank];
  for (int64_t item = item_begin; item < item_end; ++item) {
    const int64_t o = item / row_tiles, rt = item % row_tiles;
    index::unravel(o, odims, no, idx);
    const U* s = src + c.src_offset + index::ravel(idx, os, no);
    U* d = dst + c.dst_offset + index::ravel(idx, od, no);
    const int64_t r0 = rt * kTile, r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        const U* sr = s + r * rs;
        U* dr = d + r * rd;
        for (int64_t j = c0; j < c1; ++j) dr[j * cd] = sr[j * cs];
      }
    }
  }
}

template <class U>
void run_typed(const index::StridedCopy& c, const U* src, U* dst, bool parallel) {
  const int64_t total = c.num_elements();
  if (total == 0) return;
  if (c.rank == 0) {
    dst[c.dst_offset] = src[c.src_offset];
    return;
  }
  const int inner = c.rank - 1;
  constexpr int64_t kParallelElements = 64 * 1024;
  const bool par = parallel && total >= kParallelElements;
  // Transpose: rows strided in src, and another dimension contiguous in src.
  if (c.src_strides[inner] != 1 && c.src_strides[inner] != 0 && c.dst_strides[inner] == 1 &&
      c.dims[inner] >= 8) {
    int t = -1;
    for (int d = inner - 1; d >= 0; --d)
      if (c.src_strides[d] == 1 && c.dims[d] >= 8) {
        t = d;
        break;
      }
    if (t >= 0) {
      const int64_t outer = total / (c.dims[t] * c.dims[inner]);
      const int64_t items = outer * ((c.dims[t] + kTile - 1) / kTile);
      if (par) {
        const int64_t per_item = std::max<int64_t>(1, total / items);
        parallel_for(items, std::max<int64_t>(1, 16384 / per_item),
                     [&](int64_t b, int64_t e) { copy_tiled(c, t, src, dst, b, e); });
      } else {
        copy_tiled(c, t, src, dst, 0, items);
      }
      return;
    }
  }
  const int64_t rows = total / c.dims[inner];
  if (par) {
    parallel_for(rows, std::max<int64_t>(1, 16384 / c.dims[inner]),
                 [&](int64_t b, int64_t e) { copy_rows(c, src, dst, b, e); });
  } else {
    copy_rows(c, src, dst, 0, rows);
  }
}

}  // namespace strided_detail

// Runs `c` (simplify() it first for speed) on elements of `elem_size` bytes.
inline void run_strided_copy(const index::StridedCopy& c, const void* src, void* dst,
                             size_t elem_size, bool parallel = true) {
  switch (elem_size) {
    case 1:
      strided_detail::run_typed(c, static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst),
                                parallel);
      break;
    case 2:
      strided_detail::run_typed(c, static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst),
                                parallel);
      break;
    case 4:
      strided_detail::run_typed(c, static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst),
                                parallel);
      break;
    case 8:
      strided_detail::run_typed(c, static_cast<const uint64_t*>(src), static_cast<uint64_t*>(dst),
                                parallel);
      break;
    default:  // 16: complex<f64>
      strided_detail::run_typed(c, static_cast<const Word128*>(src), static_cast<Word128*>(dst),
                                parallel);
      break;
  }
}

}  // namespace cujax::cpu
