// The windows of reduce_window and select_and_scatter (window sizes, strides, base and window
// dilations, padding) as one GPU thread per output element walks them: where window element w
// of output element o reads the input, or -1 for padding and base-dilation holes. Trivially
// copyable and CUJAX_HD, like the CPU backend's WindowPlan it mirrors.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "backends/common/index.h"
#include "cujax/core/shape.h"

namespace cujax::plan {

struct Window {
  int rank = 0;
  int64_t in_dims[index::kMaxRank] = {};
  int64_t in_strides[index::kMaxRank] = {};
  int64_t out_dims[index::kMaxRank] = {};
  int64_t window[index::kMaxRank] = {};
  int64_t strides[index::kMaxRank] = {};
  int64_t base_dilation[index::kMaxRank] = {};
  int64_t window_dilation[index::kMaxRank] = {};
  int64_t pad_low[index::kMaxRank] = {};
  int64_t window_size = 1;
  int64_t num_out = 1;
};

// Window element w (row-major over the window) of the output element at `out_idx`.
CUJAX_HD inline int64_t window_source(const Window& p, const int64_t* out_idx, int64_t w) {
  int64_t off = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t wd = w % p.window[d];
    w /= p.window[d];
    const int64_t q = out_idx[d] * p.strides[d] + wd * p.window_dilation[d] - p.pad_low[d];
    const int64_t dilated = p.in_dims[d] == 0 ? 0 : (p.in_dims[d] - 1) * p.base_dilation[d] + 1;
    if (q < 0 || q >= dilated || q % p.base_dilation[d] != 0) return -1;
    off += (q / p.base_dilation[d]) * p.in_strides[d];
  }
  return off;
}

// The plan for an input of `in` with the ops' attribute values (one per dimension; padding as
// low, high pairs); nullopt when a size is not positive or the rank is too large.
inline std::optional<Window> window_plan(const Shape& in, const std::vector<int64_t>& window,
                                         const std::vector<int64_t>& strides,
                                         const std::vector<int64_t>& base_dilation,
                                         const std::vector<int64_t>& window_dilation,
                                         const std::vector<int64_t>& padding) {
  const size_t r = in.size();
  if (r > static_cast<size_t>(index::kMaxRank) || window.size() != r || strides.size() != r ||
      base_dilation.size() != r || window_dilation.size() != r || padding.size() != 2 * r)
    return std::nullopt;
  Window p;
  p.rank = static_cast<int>(r);
  if (r > 0) index::row_major_strides(in.data(), p.rank, p.in_strides);
  for (size_t d = 0; d < r; ++d) {
    if (window[d] <= 0 || strides[d] <= 0 || base_dilation[d] <= 0 || window_dilation[d] <= 0)
      return std::nullopt;
    p.in_dims[d] = in[d];
    p.window[d] = window[d];
    p.strides[d] = strides[d];
    p.base_dilation[d] = base_dilation[d];
    p.window_dilation[d] = window_dilation[d];
    p.pad_low[d] = padding[2 * d];
    const int64_t dilated = in[d] == 0 ? 0 : (in[d] - 1) * base_dilation[d] + 1;
    const int64_t padded = padding[2 * d] + dilated + padding[2 * d + 1];
    const int64_t dwin = (window[d] - 1) * window_dilation[d] + 1;
    p.out_dims[d] = (padded <= 0 || dwin > padded) ? 0 : (padded - dwin) / strides[d] + 1;
    p.window_size *= window[d];
    p.num_out *= p.out_dims[d];
  }
  return p;
}

}  // namespace cujax::plan
