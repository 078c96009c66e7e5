// The strided box copies that implement the data-movement ops (transpose, broadcast_in_dim,
// slice, concatenate, pad) and the operand layout of a dot_general as a batched matrix product.
// The cuda backend runs these plans with its copy kernel; the CPU tests run them with
// index::strided_copy_elements and compare with the CPU backend, so the plans are checked
// without a GPU. Shapes are row-major and assumed verified (the ops' shapes agree).
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "backends/common/index.h"
#include "cujax/core/shape.h"

namespace cujax::plan {

inline std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size());
  if (!s.empty()) index::row_major_strides(s.data(), static_cast<int>(s.size()), st.data());
  return st;
}

// out[i...] = in[i[perm^-1]...]: result dimension d is operand dimension perm[d].
inline index::StridedCopy transpose(const Shape& in, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> is = strides_of(in);
  Shape out;
  for (int64_t p : perm) out.push_back(in.at(p));
  const std::vector<int64_t> os = strides_of(out);
  index::StridedCopy c;
  for (size_t d = 0; d < perm.size(); ++d) c.push(out[d], is[perm[d]], os[d]);
  return c;
}

// Operand dimension i goes to result dimension dims[i]; size-1 operand dimensions and the
// result dimensions no operand dimension maps to are read with stride 0.
inline index::StridedCopy broadcast_in_dim(const Shape& in, const Shape& out,
                                           const std::vector<int64_t>& dims) {
  const std::vector<int64_t> is = strides_of(in), os = strides_of(out);
  std::vector<int64_t> src(out.size(), 0);
  for (size_t i = 0; i < dims.size(); ++i)
    if (in[i] != 1) src.at(dims[i]) = is[i];
  index::StridedCopy c;
  for (size_t d = 0; d < out.size(); ++d) c.push(out[d], src[d], os[d]);
  return c;
}

inline index::StridedCopy slice(const Shape& in, const Shape& out,
                                const std::vector<int64_t>& start,
                                const std::vector<int64_t>& step) {
  const std::vector<int64_t> is = strides_of(in), os = strides_of(out);
  index::StridedCopy c;
  for (size_t d = 0; d < out.size(); ++d) {
    c.push(out[d], step[d] * is[d], os[d]);
    c.src_offset += start[d] * is[d];
  }
  return c;
}

// One copy per operand, each into its place along `dim`.
inline std::vector<index::StridedCopy> concatenate(const std::vector<Shape>& ins, const Shape& out,
                                                   int64_t dim) {
  const std::vector<int64_t> os = strides_of(out);
  std::vector<index::StridedCopy> copies;
  int64_t at = 0;
  for (const Shape& s : ins) {
    const std::vector<int64_t> is = strides_of(s);
    index::StridedCopy c;
    for (size_t d = 0; d < s.size(); ++d) c.push(s[d], is[d], os[d]);
    c.dst_offset = at * os.at(dim);
    at += s.at(dim);
    copies.push_back(c);
  }
  return copies;
}

// The operand elements that land inside the result (edge padding may be negative); the rest
// of the result is the padding value, filled first.
inline index::StridedCopy pad(const Shape& in, const Shape& out, const std::vector<int64_t>& low,
                              const std::vector<int64_t>& interior) {
  const std::vector<int64_t> is = strides_of(in), os = strides_of(out);
  index::StridedCopy c;
  for (size_t d = 0; d < in.size(); ++d) {
    int64_t first = 0, count = 0;
    index::pad_source_range(in[d], out[d], low[d], interior[d], &first, &count);
    c.push(count, is[d], (interior[d] + 1) * os[d]);
    c.src_offset += first * is[d];
    c.dst_offset += (low[d] + first * (interior[d] + 1)) * os[d];
  }
  return c;
}

// dot_general as C[b] (m x n) = A[b] (m x k) * B[b] (k x n), row-major: lhs permuted to
// [batch..., free..., contracting...], rhs to [batch..., contracting..., free...]; the result's
// [batch..., lhs free..., rhs free...] order is then C's. An empty permutation needs no copy.
struct DotPlan {
  std::vector<int64_t> lhs_perm, rhs_perm;  // empty: already in that order
  int64_t batch = 1, m = 1, n = 1, k = 1;
};

inline DotPlan dot_general(const Shape& lhs, const Shape& rhs, const std::vector<int64_t>& lb,
                           const std::vector<int64_t>& rb, const std::vector<int64_t>& lc,
                           const std::vector<int64_t>& rc) {
  auto order = [](const Shape& s, const std::vector<int64_t>& batch,
                  const std::vector<int64_t>& contract, bool contract_last, int64_t* free_size) {
    std::vector<int64_t> free;
    *free_size = 1;
    for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i)
      if (std::find(batch.begin(), batch.end(), i) == batch.end() &&
          std::find(contract.begin(), contract.end(), i) == contract.end()) {
        free.push_back(i);
        *free_size *= s[i];
      }
    std::vector<int64_t> perm = batch;
    const auto& first = contract_last ? free : contract;
    const auto& second = contract_last ? contract : free;
    perm.insert(perm.end(), first.begin(), first.end());
    perm.insert(perm.end(), second.begin(), second.end());
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
    if (identity) perm.clear();
    return perm;
  };
  DotPlan p;
  p.lhs_perm = order(lhs, lb, lc, true, &p.m);
  p.rhs_perm = order(rhs, rb, rc, false, &p.n);
  for (int64_t d : lb) p.batch *= lhs.at(d);
  for (int64_t d : lc) p.k *= lhs.at(d);
  return p;
}

// Collectives over NCCL move flat buffers made of n rank blocks, one after another. These
// copies go between such a buffer and a tensor whose dimension `dim` holds the n blocks; they
// return nullopt when no copy is needed (every dimension before `dim` has size 1).

// The n blocks of shape `block`, one after another -> their concatenation along `dim`
// (all_gather's result, all_to_all's received blocks).
inline std::optional<index::StridedCopy> from_rank_blocks(const Shape& block, int64_t dim,
                                                          int64_t n) {
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= block[d];
  if (outer == 1) return std::nullopt;
  Shape blocks{n};
  blocks.insert(blocks.end(), block.begin(), block.end());
  std::vector<int64_t> perm;  // (n, s0, ..., sk) -> (s0, ..., s[dim-1], n, s[dim], ...)
  for (int64_t d = 1; d <= dim; ++d) perm.push_back(d);
  perm.push_back(0);
  for (int64_t d = dim + 1; d < static_cast<int64_t>(blocks.size()); ++d) perm.push_back(d);
  return transpose(blocks, perm);
}

// A tensor whose dimension `dim` splits into n equal blocks -> those blocks one after another
// (reduce_scatter's operand, all_to_all's blocks to send).
inline std::optional<index::StridedCopy> to_rank_blocks(const Shape& shape, int64_t dim,
                                                        int64_t n) {
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  if (outer == 1) return std::nullopt;
  Shape split(shape.begin(), shape.begin() + dim);  // (s0, ..., n, s[dim] / n, ...)
  split.push_back(n);
  split.push_back(shape[dim] / n);
  split.insert(split.end(), shape.begin() + dim + 1, shape.end());
  std::vector<int64_t> perm{dim};  // -> (n, s0, ..., s[dim] / n, ...)
  for (int64_t d = 0; d < static_cast<int64_t>(split.size()); ++d)
    if (d != dim) perm.push_back(d);
  return transpose(split, perm);
}

}  // namespace cujax::plan
