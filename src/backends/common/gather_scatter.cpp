#include "backends/common/gather_scatter.h"

#include <algorithm>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/ir/ir.h"

namespace cujax::plan {

namespace {

[[noreturn]] void fail(const ir::Operation& op, const std::string& message) {
  throw UnsupportedError(op.where() + ": " + message);
}

std::vector<int64_t> field_ints(const ir::Attribute& dn, const char* name) {
  const ir::Attribute* f = dn.field(name);
  return f ? ir::as_ints(*f) : std::vector<int64_t>{};
}

int64_t field_int(const ir::Attribute& dn, const char* name) {
  const ir::Attribute* f = dn.field(name);
  if (!f) return 0;
  const auto v = ir::as_ints(*f);
  return v.size() == 1 ? v[0] : 0;
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void check_dims(const ir::Operation& op, const std::vector<int64_t>& dims, int64_t rank,
                const char* what) {
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(rank, 0)), false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || seen[d])
      fail(op, std::string("invalid ") + what + " entry " + std::to_string(d));
    seen[d] = true;
  }
}

std::vector<int64_t> strides(const Shape& s) {
  std::vector<int64_t> st(s.size());
  if (!s.empty()) index::row_major_strides(s.data(), static_cast<int>(s.size()), st.data());
  return st;
}

// The index vectors of `indices` (index_vector_dim ivd) for an operand of shape `operand`,
// whose positions lie along `pos_dims` of `out` (the gather result or the scatter updates).
IndexVectors index_vectors(const ir::Operation& op, const Shape& operand, const ir::Type& indices,
                           int64_t ivd, const std::vector<int64_t>& start_map,
                           const std::vector<int64_t>& batching_dims,
                           const std::vector<int64_t>& index_batching_dims, const Shape& out,
                           const std::vector<int64_t>& pos_dims) {
  const Shape& S = indices.shape;
  const int64_t s_rank = static_cast<int64_t>(S.size());
  const int64_t o_rank = static_cast<int64_t>(operand.size());
  if (!is_integer(indices.dtype)) fail(op, "start indices must be integers");
  if (ivd < 0 || ivd > s_rank) fail(op, "invalid index_vector_dim");
  IndexVectors iv;
  iv.index_type = indices.dtype;
  const auto is = strides(S);
  iv.vec_len = ivd < s_rank ? static_cast<int>(S[ivd]) : 1;
  iv.vec_stride = ivd < s_rank ? is[ivd] : 0;
  if (iv.vec_len > kMaxRank || static_cast<int64_t>(start_map.size()) != iv.vec_len)
    fail(op, "the index map needs one entry per index vector element");
  std::vector<int64_t> pos_sizes;
  for (int64_t d = 0; d < s_rank; ++d) {
    if (d == ivd) continue;
    iv.idx_stride[iv.num_pos_dims++] = is[d];
    pos_sizes.push_back(S[d]);
  }
  if (pos_dims.size() != pos_sizes.size())
    fail(op, "the result has " + std::to_string(pos_dims.size()) +
                 " batch dimensions, the indices " + std::to_string(pos_sizes.size()));
  for (size_t j = 0; j < pos_dims.size(); ++j)
    if (out[pos_dims[j]] != pos_sizes[j])
      fail(op, "batch dimension sizes of the indices and the result differ");
  check_dims(op, start_map, o_rank, "index map");
  for (int k = 0; k < iv.vec_len; ++k) iv.start_dim[k] = static_cast<int8_t>(start_map[k]);
  if (batching_dims.size() != index_batching_dims.size())
    fail(op, "operand and index batching dimensions differ in number");
  check_dims(op, batching_dims, o_rank, "batching dimension");
  check_dims(op, index_batching_dims, s_rank, "index batching dimension");
  for (size_t i = 0; i < batching_dims.size(); ++i) {
    const int64_t sd = index_batching_dims[i];
    if (sd == ivd) fail(op, "index_vector_dim cannot be a batching dimension");
    if (contains(start_map, batching_dims[i]))
      fail(op, "a batching dimension cannot be in the index map");
    if (operand[batching_dims[i]] != S[sd]) fail(op, "batching dimension sizes differ");
    iv.batching_dim[iv.num_batching] = static_cast<int8_t>(batching_dims[i]);
    iv.batching_pos[iv.num_batching] = static_cast<int8_t>(sd < ivd ? sd : sd - 1);
    ++iv.num_batching;
  }
  return iv;
}

bool fits(std::initializer_list<size_t> ranks) {
  for (size_t r : ranks)
    if (r > static_cast<size_t>(kMaxRank)) return false;
  return true;
}

}  // namespace

std::optional<GatherPlan> gather_plan(const ir::Operation& op) {
  const ir::Attribute* dn = op.attr("dimension_numbers");
  if (!dn) fail(op, "needs dimension_numbers");
  if (op.operands.size() != 2 || op.num_results() != 1)
    fail(op, "takes an operand and start indices");
  const ir::Type& operand = op.operands[0]->type;
  const ir::Type& indices = op.operands[1]->type;
  const ir::Type& out = op.result(0)->type;
  if (!fits({operand.shape.size(), indices.shape.size() + 1, out.shape.size()}))
    return std::nullopt;
  const auto offset_dims = field_ints(*dn, "offset_dims");
  const auto collapsed = field_ints(*dn, "collapsed_slice_dims");
  const auto obatch = field_ints(*dn, "operand_batching_dims");
  const auto sbatch = field_ints(*dn, "start_indices_batching_dims");
  const auto start_map = field_ints(*dn, "start_index_map");
  const int64_t ivd = field_int(*dn, "index_vector_dim");
  const auto slice_sizes = op.ints("slice_sizes");
  const int64_t o_rank = operand.rank();
  if (out.dtype != operand.dtype) fail(op, "result and operand types differ");
  if (static_cast<int64_t>(slice_sizes.size()) != o_rank)
    fail(op, "slice_sizes needs one entry per operand dimension");
  if (static_cast<int64_t>(offset_dims.size() + collapsed.size() + obatch.size()) != o_rank)
    fail(op, "offset, collapsed and batching dimensions must cover the operand");
  check_dims(op, offset_dims, out.rank(), "offset_dims");
  std::vector<int64_t> removed = collapsed;
  removed.insert(removed.end(), obatch.begin(), obatch.end());
  check_dims(op, removed, o_rank, "collapsed/batching dimension");
  std::vector<int64_t> pos_dims;
  for (int64_t d = 0; d < out.rank(); ++d)
    if (!contains(offset_dims, d)) pos_dims.push_back(d);
  GatherPlan g;
  g.iv = index_vectors(op, operand.shape, indices, ivd, start_map, obatch, sbatch, out.shape,
                       pos_dims);
  g.operand_rank = static_cast<int>(o_rank);
  g.result_rank = static_cast<int>(out.rank());
  const auto os = strides(operand.shape);
  for (int64_t d = 0; d < o_rank; ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > operand.shape[d])
      fail(op, "slice size out of range in dimension " + std::to_string(d));
    if (contains(removed, d) && slice_sizes[d] > 1)
      fail(op, "collapsed and batching dimensions need slice size <= 1");
    g.operand_dims[d] = operand.shape[d];
    g.operand_strides[d] = os[d];
    // a collapsed slice of size 0 still names one operand element per result element
    g.slice_sizes[d] = contains(removed, d) ? 1 : slice_sizes[d];
  }
  for (int64_t d = 0; d < out.rank(); ++d) {
    g.result_dims[d] = out.shape[d];
    g.offset_operand_dim[d] = -1;
    g.pos_dim[d] = -1;
  }
  for (size_t j = 0; j < pos_dims.size(); ++j) g.pos_dim[pos_dims[j]] = static_cast<int8_t>(j);
  size_t i = 0;
  for (int64_t d = 0; d < o_rank; ++d) {
    if (contains(removed, d)) continue;
    const int64_t rd = offset_dims[i++];
    if (out.shape[rd] != slice_sizes[d])
      fail(op, "result dimension " + std::to_string(rd) + " does not match slice size");
    g.offset_operand_dim[rd] = static_cast<int8_t>(d);
  }
  return g;
}

std::optional<ScatterPlan> scatter_plan(const ir::Operation& op) {
  const ir::Attribute* dn = op.attr("scatter_dimension_numbers");
  if (!dn) fail(op, "needs scatter_dimension_numbers");
  if (op.operands.size() < 3 || op.operands.size() % 2 == 0)
    fail(op, "takes N inputs, the scatter indices and N updates");
  const size_t n_in = (op.operands.size() - 1) / 2;
  const ir::Type& input = op.operands[0]->type;
  const ir::Type& indices = op.operands[n_in]->type;
  const ir::Type& updates = op.operands[n_in + 1]->type;
  const Shape& I = input.shape;
  const Shape& U = updates.shape;
  if (!fits({I.size(), indices.shape.size() + 1, U.size()})) return std::nullopt;
  for (size_t k = 0; k < n_in; ++k) {
    const ir::Type& in = op.operands[k]->type;
    const ir::Type& up = op.operands[n_in + 1 + k]->type;
    if (in.shape != I || up.shape != U)
      fail(op, "inputs (and updates) must all have the same shape");
    if (up.dtype != in.dtype || k >= op.num_results() || op.result(k)->type != in)
      fail(op, "input, update and result types must match");
  }
  const int64_t rank = static_cast<int64_t>(I.size());
  const auto uwd = field_ints(*dn, "update_window_dims");
  const auto inserted = field_ints(*dn, "inserted_window_dims");
  const auto ibatch = field_ints(*dn, "input_batching_dims");
  const auto sbatch = field_ints(*dn, "scatter_indices_batching_dims");
  const auto sdod = field_ints(*dn, "scatter_dims_to_operand_dims");
  const int64_t ivd = field_int(*dn, "index_vector_dim");
  if (static_cast<int64_t>(uwd.size() + inserted.size() + ibatch.size()) != rank)
    fail(op, "window, inserted and batching dimensions must cover the input");
  check_dims(op, uwd, static_cast<int64_t>(U.size()), "update_window_dims");
  std::vector<int64_t> removed = inserted;
  removed.insert(removed.end(), ibatch.begin(), ibatch.end());
  check_dims(op, removed, rank, "inserted/batching dimension");
  std::vector<int64_t> pos_dims;
  for (int64_t d = 0; d < static_cast<int64_t>(U.size()); ++d)
    if (!contains(uwd, d)) pos_dims.push_back(d);
  ScatterPlan s;
  s.iv = index_vectors(op, I, indices, ivd, sdod, ibatch, sbatch, U, pos_dims);
  s.input_rank = static_cast<int>(rank);
  s.update_rank = static_cast<int>(U.size());
  const auto is = strides(I);
  for (int64_t d = 0; d < rank; ++d) {
    s.input_dims[d] = I[d];
    s.input_strides[d] = is[d];
  }
  for (size_t d = 0; d < U.size(); ++d) {
    s.update_dims[d] = U[d];
    s.window_input_dim[d] = -1;
    s.pos_dim[d] = -1;
  }
  for (size_t j = 0; j < pos_dims.size(); ++j) s.pos_dim[pos_dims[j]] = static_cast<int8_t>(j);
  size_t w = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (contains(removed, d)) continue;
    const int64_t ud = uwd[w++];
    if (U[ud] > I[d])
      fail(op, "update window dimension " + std::to_string(ud) + " is larger than the input");
    s.window_input_dim[ud] = static_cast<int8_t>(d);
  }
  return s;
}

}  // namespace cujax::plan
