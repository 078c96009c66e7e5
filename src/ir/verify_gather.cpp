// The verifier's type rules for gather and scatter (families of op_table.h).
#include <algorithm>
#include <string>
#include <vector>

#include "ir/verify_op.h"

namespace cujax::ir::rules {
namespace {

// Batch dimension sizes of an index tensor: its shape without index_vector_dim.
Shape index_batch_sizes(const Type& indices, int64_t index_vector_dim) {
  Shape s;
  for (int64_t d = 0; d < indices.rank(); ++d)
    if (d != index_vector_dim) s.push_back(indices.shape[static_cast<size_t>(d)]);
  return s;
}

void check_gather(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& idx = c.operand(1);
  c.operand_kind(1, Kinds::Integer);
  const Attribute& dn = c.struct_attr("dimension_numbers", "stablehlo.gather");
  const Dims offset = c.field_ints(dn, "offset_dims");
  const Dims collapsed = c.field_ints(dn, "collapsed_slice_dims");
  const Dims obatch = c.field_ints(dn, "operand_batching_dims");
  const Dims ibatch = c.field_ints(dn, "start_indices_batching_dims");
  const Dims start_map = c.field_ints(dn, "start_index_map");
  const int64_t ivd = c.field_int(dn, "index_vector_dim", 0);
  const Dims sizes = c.ints("slice_sizes");
  if (static_cast<int64_t>(offset.size() + collapsed.size() + obatch.size()) != in.rank())
    c.fail("offset_dims " + list_str(offset) + ", collapsed_slice_dims " + list_str(collapsed) +
           " and operand_batching_dims " + list_str(obatch) +
           " must cover the rank of operand 0, " + in.str());
  if (ivd < 0 || ivd > idx.rank())
    c.fail("index_vector_dim = " + std::to_string(ivd) + " is out of range for operand 1, " +
           idx.str());
  const int64_t index_len = ivd < idx.rank() ? idx.shape[static_cast<size_t>(ivd)] : 1;
  c.size_is("start_index_map", start_map, index_len,
            "the index vector length of operand 1, " + idx.str());
  c.unique("offset_dims", offset);
  c.sorted("offset_dims", offset);
  Dims cb = collapsed;
  cb.insert(cb.end(), obatch.begin(), obatch.end());
  c.unique("collapsed_slice_dims and operand_batching_dims", cb);
  c.sorted("collapsed_slice_dims", collapsed);
  c.sorted("operand_batching_dims", obatch);
  c.in_range("collapsed_slice_dims", collapsed, 0, in.rank());
  c.in_range("operand_batching_dims", obatch, 0, in.rank());
  c.unique("start_indices_batching_dims", ibatch);
  c.in_range("start_indices_batching_dims", ibatch, 0, idx.rank());
  if (std::find(ibatch.begin(), ibatch.end(), ivd) != ibatch.end())
    c.fail("start_indices_batching_dims = " + list_str(ibatch) + " contains index_vector_dim");
  if (obatch.size() != ibatch.size())
    c.fail("operand_batching_dims and start_indices_batching_dims differ in length");
  for (size_t i = 0; i < obatch.size(); ++i)
    if (in.shape[static_cast<size_t>(obatch[i])] != idx.shape[static_cast<size_t>(ibatch[i])])
      c.fail("operand batching dimension " + std::to_string(obatch[i]) + " of " + in.str() +
             " and start indices batching dimension " + std::to_string(ibatch[i]) + " of " +
             idx.str() + " differ in size");
  Dims sm = start_map;
  sm.insert(sm.end(), obatch.begin(), obatch.end());
  c.unique("start_index_map and operand_batching_dims", sm);
  c.in_range("start_index_map", start_map, 0, in.rank());
  c.size_is("slice_sizes", sizes, in.rank(), "the rank of operand 0, " + in.str());
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] < 0 || sizes[d] > in.shape[d])
      c.fail("slice_sizes = " + list_str(sizes) + " does not fit in operand 0, " + in.str());
  for (int64_t d : cb)
    if (sizes[static_cast<size_t>(d)] > 1)
      c.fail("slice_sizes = " + list_str(sizes) + " has " +
             std::to_string(sizes[static_cast<size_t>(d)]) +
             " in a collapsed or batching dimension " + std::to_string(d) + ", expected 0 or 1");
  const Shape batch = index_batch_sizes(idx, ivd);
  Shape offsets;
  for (int64_t d = 0; d < in.rank(); ++d)
    if (std::find(cb.begin(), cb.end(), d) == cb.end()) offsets.push_back(sizes[d]);
  const int64_t rank = static_cast<int64_t>(batch.size() + offsets.size());
  c.in_range("offset_dims", offset, 0, rank);
  Shape s(static_cast<size_t>(rank), 0);
  size_t bi = 0, oi = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(offset.begin(), offset.end(), d) != offset.end())
      s[d] = offsets[oi++];
    else
      s[d] = batch[bi++];
  }
  c.result_is(0, Type::tensor(s, in.dtype), "index batch dimensions with slices at offset_dims");
}

void check_scatter(OpCheck& c) {
  if (c.num_operands() < 3 || c.num_operands() % 2 == 0)
    c.fail("expects N inputs, the indices and N updates, got " + std::to_string(c.num_operands()) +
           " operands");
  c.all_tensors();
  const size_t n = (c.num_operands() - 1) / 2;
  if (c.num_results() != n)
    c.fail("has " + std::to_string(c.num_results()) + " results, expected " + std::to_string(n) +
           " (one per input)");
  const Type& in = c.operand(0);
  const Type& idx = c.operand(n);
  c.operand_kind(n, Kinds::Integer);
  for (size_t i = 1; i < n; ++i)
    if (c.operand(i).shape != in.shape)
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected the shape of operand 0, " + in.str());
  for (size_t i = 0; i < n; ++i) {
    const Type& u = c.operand(n + 1 + i);
    if (u.shape != c.operand(n + 1).shape)
      c.fail("operand " + std::to_string(n + 1 + i) + " has type " + u.str() +
             ", expected the shape of the first update, " + c.operand(n + 1).str());
    if (u.dtype != c.operand(i).dtype)
      c.fail("operand " + std::to_string(n + 1 + i) + " has type " + u.str() +
             ", expected the element type of input " + std::to_string(i) + ", " +
             c.operand(i).str());
  }
  const Type& upd = c.operand(n + 1);
  const Attribute& dn = c.struct_attr("scatter_dimension_numbers", "stablehlo.scatter");
  const Dims window = c.field_ints(dn, "update_window_dims");
  const Dims inserted = c.field_ints(dn, "inserted_window_dims");
  const Dims ibatch = c.field_ints(dn, "input_batching_dims");
  const Dims sbatch = c.field_ints(dn, "scatter_indices_batching_dims");
  const Dims to_operand = c.field_ints(dn, "scatter_dims_to_operand_dims");
  const int64_t ivd = c.field_int(dn, "index_vector_dim", 0);
  if (static_cast<int64_t>(window.size() + inserted.size() + ibatch.size()) != in.rank())
    c.fail("update_window_dims " + list_str(window) + ", inserted_window_dims " +
           list_str(inserted) + " and input_batching_dims " + list_str(ibatch) +
           " must cover the rank of operand 0, " + in.str());
  c.unique("update_window_dims", window);
  c.sorted("update_window_dims", window);
  c.in_range("update_window_dims", window, 0, upd.rank());
  Dims ib = inserted;
  ib.insert(ib.end(), ibatch.begin(), ibatch.end());
  c.unique("inserted_window_dims and input_batching_dims", ib);
  c.sorted("inserted_window_dims", inserted);
  c.sorted("input_batching_dims", ibatch);
  c.in_range("inserted_window_dims", inserted, 0, in.rank());
  c.in_range("input_batching_dims", ibatch, 0, in.rank());
  c.unique("scatter_indices_batching_dims", sbatch);
  c.in_range("scatter_indices_batching_dims", sbatch, 0, idx.rank());
  if (std::find(sbatch.begin(), sbatch.end(), ivd) != sbatch.end())
    c.fail("scatter_indices_batching_dims = " + list_str(sbatch) + " contains index_vector_dim");
  if (ibatch.size() != sbatch.size())
    c.fail("input_batching_dims and scatter_indices_batching_dims differ in length");
  for (size_t i = 0; i < ibatch.size(); ++i)
    if (in.shape[static_cast<size_t>(ibatch[i])] != idx.shape[static_cast<size_t>(sbatch[i])])
      c.fail("input batching dimension " + std::to_string(ibatch[i]) + " of " + in.str() +
             " and scatter indices batching dimension " + std::to_string(sbatch[i]) + " of " +
             idx.str() + " differ in size");
  if (ivd < 0 || ivd > idx.rank())
    c.fail("index_vector_dim = " + std::to_string(ivd) + " is out of range for the indices, " +
           idx.str());
  const int64_t index_len = ivd < idx.rank() ? idx.shape[static_cast<size_t>(ivd)] : 1;
  c.size_is("scatter_dims_to_operand_dims", to_operand, index_len,
            "the index vector length of the indices, " + idx.str());
  Dims tb = to_operand;
  tb.insert(tb.end(), ibatch.begin(), ibatch.end());
  c.unique("scatter_dims_to_operand_dims and input_batching_dims", tb);
  c.in_range("scatter_dims_to_operand_dims", to_operand, 0, in.rank());
  // Updates: scatter dimensions (the indices' batch sizes) and window dimensions that fit in
  // the input's non-inserted dimensions.
  const Shape scatter_sizes = index_batch_sizes(idx, ivd);
  Shape window_bounds;
  for (int64_t d = 0; d < in.rank(); ++d)
    if (std::find(ib.begin(), ib.end(), d) == ib.end())
      window_bounds.push_back(in.shape[static_cast<size_t>(d)]);
  if (upd.rank() != static_cast<int64_t>(scatter_sizes.size() + window.size()))
    c.fail("updates have type " + upd.str() + ", expected rank " +
           std::to_string(scatter_sizes.size() + window.size()) + " (" +
           std::to_string(scatter_sizes.size()) + " scatter and " + std::to_string(window.size()) +
           " window dimensions)");
  size_t si = 0, wi = 0;
  for (int64_t d = 0; d < upd.rank(); ++d) {
    const int64_t size = upd.shape[static_cast<size_t>(d)];
    if (std::find(window.begin(), window.end(), d) != window.end()) {
      if (size > window_bounds[wi])
        c.fail("update window dimension " + std::to_string(d) + " of " + upd.str() + " has size " +
               std::to_string(size) + ", larger than " + std::to_string(window_bounds[wi]) +
               " in operand 0, " + in.str());
      ++wi;
    } else if (size != scatter_sizes[si++]) {
      c.fail("update scatter dimension " + std::to_string(d) + " of " + upd.str() + " has size " +
             std::to_string(size) + ", expected " + std::to_string(scatter_sizes[si - 1]) +
             " (from the indices, " + idx.str() + ")");
    }
  }
  std::vector<DType> acc;
  for (size_t i = 0; i < n; ++i) {
    acc.push_back(c.result(i).dtype);
    if (!promotable(c.operand(i).dtype, c.result(i).dtype))
      c.result_is(i, c.operand(i), "same as operand " + std::to_string(i));
    c.result_is(i, Type::tensor(c.operand(i).shape, c.result(i).dtype),
                "the shape of operand " + std::to_string(i));
  }
  reducer_signature(c, 0, "update_computation", acc);
}

}  // namespace

void add_gather_rules(Checkers& m) {
  m["stablehlo.gather"] = check_gather;
  m["stablehlo.scatter"] = check_scatter;
}

}  // namespace cujax::ir::rules
