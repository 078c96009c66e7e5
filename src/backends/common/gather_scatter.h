// gather and scatter as one GPU thread per element: where result element r of a gather reads the
// operand, and where update element u of a scatter lands in the results (or that it lands
// outside them and is skipped, the spec's per-element rule). The plans are built once from the
// ops' dimension numbers (batching dimensions included) and are trivially copyable; the
// functions are CUJAX_HD, so the CPU tests check them against the CPU backend's gather and
// scatter kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backends/common/index.h"
#include "backends/common/scalar_program.h"

namespace cujax::ir {
struct Operation;
}

namespace cujax::plan {

using index::kMaxRank;

// How the index vectors of a start-indices tensor are found from a position (the indices of
// every dimension but index_vector_dim) and which operand dimension each element starts.
struct IndexVectors {
  int num_pos_dims = 0;
  int64_t idx_stride[kMaxRank] = {};  // per position dimension, its stride in the indices
  int vec_len = 1;
  int64_t vec_stride = 0;
  int8_t start_dim[kMaxRank] = {};  // operand dimension of each index vector element
  int num_batching = 0;
  int8_t batching_dim[kMaxRank] = {};  // operand dimension of each batching pair
  int8_t batching_pos[kMaxRank] = {};  // its position dimension
  DType index_type = DType::I32;
};

struct GatherPlan {
  IndexVectors iv;
  int operand_rank = 0, result_rank = 0;
  int64_t operand_dims[kMaxRank] = {};
  int64_t operand_strides[kMaxRank] = {};
  int64_t slice_sizes[kMaxRank] = {};  // collapsed/batching dimensions: 1
  int64_t result_dims[kMaxRank] = {};
  int8_t offset_operand_dim[kMaxRank] = {};  // per result dimension: operand dimension, or -1
  int8_t pos_dim[kMaxRank] = {};             // per result dimension: position dimension, or -1
};

struct ScatterPlan {
  IndexVectors iv;
  int input_rank = 0, update_rank = 0;
  int64_t input_dims[kMaxRank] = {};
  int64_t input_strides[kMaxRank] = {};
  int64_t update_dims[kMaxRank] = {};
  int8_t window_input_dim[kMaxRank] = {};  // per update dimension: input dimension, or -1
  int8_t pos_dim[kMaxRank] = {};           // per update dimension: position dimension, or -1
};

// Element `i` of a start-indices array of type `t`, as an index (unsigned values saturate).
CUJAX_HD inline int64_t load_index(const void* indices, DType t, int64_t i) {
  return scalar_program::dispatch(t, [&](auto tag) -> int64_t {
    using T = typename decltype(tag)::type;
    if constexpr (ew::is_int_v<T>)
      return index::to_index(static_cast<const T*>(indices)[i]);
    else
      return 0;  // the plans accept integer indices only
  });
}

// Offset in the operand of row-major result element r.
CUJAX_HD inline int64_t gather_source(const GatherPlan& g, const void* indices, int64_t r) {
  int64_t ri[kMaxRank];
  index::unravel(r, g.result_dims, g.result_rank, ri);
  int64_t pos[kMaxRank];
  int64_t off = 0;
  for (int d = 0; d < g.result_rank; ++d) {
    if (g.pos_dim[d] >= 0) pos[g.pos_dim[d]] = ri[d];
    if (g.offset_operand_dim[d] >= 0) off += ri[d] * g.operand_strides[g.offset_operand_dim[d]];
  }
  const IndexVectors& iv = g.iv;
  int64_t ioff = 0;
  for (int j = 0; j < iv.num_pos_dims; ++j) ioff += pos[j] * iv.idx_stride[j];
  for (int k = 0; k < iv.vec_len; ++k) {
    const int d = iv.start_dim[k];
    const int64_t start = load_index(indices, iv.index_type, ioff + k * iv.vec_stride);
    off += index::clamp_start(start, g.operand_dims[d], g.slice_sizes[d]) * g.operand_strides[d];
  }
  for (int b = 0; b < iv.num_batching; ++b)
    off += pos[iv.batching_pos[b]] * g.operand_strides[iv.batching_dim[b]];
  return off;
}

// Offset in the results of row-major update element u, or -1 when it falls outside them. *pos
// gets the element's position (row-major over the position dimensions), which orders updates.
CUJAX_HD inline int64_t scatter_target(const ScatterPlan& s, const void* indices, int64_t u,
                                       int64_t* position = nullptr) {
  int64_t ui[kMaxRank];
  index::unravel(u, s.update_dims, s.update_rank, ui);
  int64_t pos[kMaxRank];
  int64_t full[kMaxRank] = {};
  int64_t flat_pos = 0;
  for (int d = 0; d < s.update_rank; ++d) {
    if (s.pos_dim[d] >= 0) {
      pos[s.pos_dim[d]] = ui[d];
      flat_pos = flat_pos * s.update_dims[d] + ui[d];
    }
    if (s.window_input_dim[d] >= 0) full[s.window_input_dim[d]] = ui[d];
  }
  if (position) *position = flat_pos;
  const IndexVectors& iv = s.iv;
  int64_t ioff = 0;
  for (int j = 0; j < iv.num_pos_dims; ++j) ioff += pos[j] * iv.idx_stride[j];
  for (int k = 0; k < iv.vec_len; ++k) {
    const int64_t start = load_index(indices, iv.index_type, ioff + k * iv.vec_stride);
    // no wraparound: far out-of-range starts stay out of range
    const int64_t n = s.input_dims[iv.start_dim[k]];
    full[iv.start_dim[k]] += index::clamp(start, -n - 1, n + 1);
  }
  for (int b = 0; b < iv.num_batching; ++b) full[iv.batching_dim[b]] += pos[iv.batching_pos[b]];
  int64_t off = 0;
  for (int d = 0; d < s.input_rank; ++d) {
    if (full[d] < 0 || full[d] >= s.input_dims[d]) return -1;
    off += full[d] * s.input_strides[d];
  }
  return off;
}

// From the op's attributes, with the CPU backend's checks; nullopt for a form the plans do not
// hold (rank above kMaxRank). Throws UnsupportedError naming the op for invalid ones.
std::optional<GatherPlan> gather_plan(const ir::Operation& op);
std::optional<ScatterPlan> scatter_plan(const ir::Operation& op);

}  // namespace cujax::plan
