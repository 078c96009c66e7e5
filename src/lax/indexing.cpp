// Gather and scatter with XLA's dimension numbers.
#include <algorithm>

#include "lax/util.h"

namespace cujax::lax {

using namespace detail;

namespace {

// Distinct, in [0, bound), and sorted when `sorted`.
void check_dim_list(const std::string& op, const char* what, const std::vector<int64_t>& v,
                    int64_t bound, bool sorted, const std::string& against) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] >= bound)
      fail(op, std::string(what) + " " + list_str(v) + " is out of range for " + against);
    for (size_t j = 0; j < i; ++j)
      if (v[j] == v[i]) fail(op, std::string(what) + " " + list_str(v) + " has repeated entries");
    if (sorted && i > 0 && v[i] < v[i - 1])
      fail(op, std::string(what) + " " + list_str(v) + " must be sorted");
  }
}

void check_disjoint(const std::string& op, const char* a_name, const std::vector<int64_t>& a,
                    const char* b_name, const std::vector<int64_t>& b) {
  for (int64_t x : a)
    if (contains(b, x))
      fail(op, std::string(a_name) + " " + list_str(a) + " and " + b_name + " " + list_str(b) +
                   " must be disjoint");
}

struct IndexInfo {
  int64_t ivd = 0;                  // index_vector_dim
  int64_t vector_size = 1;          // entries per index vector
  Shape batch_shape;                // indices' shape without index_vector_dim
  std::vector<int64_t> batch_dims;  // indices' dimensions other than index_vector_dim
};

IndexInfo index_info(const std::string& op, const Array& indices, int64_t index_vector_dim) {
  check_dtype(op, indices, Kinds::Int, "indices");
  IndexInfo info;
  info.ivd = index_vector_dim < 0 ? indices.ndim() - 1 : index_vector_dim;
  if (info.ivd < 0 || info.ivd > indices.ndim())
    fail(op, "index_vector_dim " + std::to_string(index_vector_dim) + " is out of range for " +
                 type_str(indices));
  info.vector_size = info.ivd < indices.ndim() ? indices.shape()[info.ivd] : 1;
  for (int64_t i = 0; i < indices.ndim(); ++i) {
    if (i == info.ivd) continue;
    info.batch_shape.push_back(indices.shape()[i]);
    info.batch_dims.push_back(i);
  }
  return info;
}

void field(std::vector<ir::NamedAttribute>& fields, const char* name,
           const std::vector<int64_t>& v) {
  if (!v.empty()) fields.push_back({name, ir::Attribute::int_list(v)});
}

}  // namespace

Array gather(const Array& operand, const Array& start_indices, const GatherDimensionNumbers& dims,
             const std::vector<int64_t>& slice_sizes, bool indices_are_sorted) {
  const std::string op = "gather";
  check_valid(op, operand);
  check_valid(op, start_indices);
  const IndexInfo info = index_info(op, start_indices, dims.index_vector_dim);
  const int64_t rank = operand.ndim();
  const std::string ot = "operand " + type_str(operand);
  if (static_cast<int64_t>(slice_sizes.size()) != rank)
    fail(op,
         "slice_sizes " + list_str(slice_sizes) + " must have one entry per dimension of " + ot);
  for (int64_t i = 0; i < rank; ++i)
    if (slice_sizes[i] < 0 || slice_sizes[i] > operand.shape()[i])
      fail(op, "slice_sizes " + list_str(slice_sizes) + " do not fit in " + ot);
  check_dim_list(op, "collapsed_slice_dims", dims.collapsed_slice_dims, rank, true, ot);
  check_dim_list(op, "operand_batching_dims", dims.operand_batching_dims, rank, true, ot);
  check_disjoint(op, "collapsed_slice_dims", dims.collapsed_slice_dims, "operand_batching_dims",
                 dims.operand_batching_dims);
  check_dim_list(op, "start_index_map", dims.start_index_map, rank, false, ot);
  check_disjoint(op, "start_index_map", dims.start_index_map, "operand_batching_dims",
                 dims.operand_batching_dims);
  check_dim_list(op, "start_indices_batching_dims", dims.start_indices_batching_dims,
                 start_indices.ndim(), false, "indices " + type_str(start_indices));
  if (contains(dims.start_indices_batching_dims, info.ivd))
    fail(op, "start_indices_batching_dims cannot contain index_vector_dim");
  if (dims.operand_batching_dims.size() != dims.start_indices_batching_dims.size())
    fail(op, "operand_batching_dims and start_indices_batching_dims must have the same length");
  for (size_t i = 0; i < dims.operand_batching_dims.size(); ++i)
    if (operand.shape()[dims.operand_batching_dims[i]] !=
        start_indices.shape()[dims.start_indices_batching_dims[i]])
      fail(op, "batching dimensions have different sizes in " + ot + " and indices " +
                   type_str(start_indices));
  for (int64_t d : dims.collapsed_slice_dims)
    if (slice_sizes[d] > 1)
      fail(op, "collapsed dimension " + std::to_string(d) + " needs a slice size of 1, got " +
                   list_str(slice_sizes));
  for (int64_t d : dims.operand_batching_dims)
    if (slice_sizes[d] > 1)
      fail(op, "batching dimension " + std::to_string(d) + " needs a slice size of 1, got " +
                   list_str(slice_sizes));
  if (static_cast<int64_t>(dims.start_index_map.size()) != info.vector_size)
    fail(op, "start_index_map " + list_str(dims.start_index_map) + " must have one entry per " +
                 "index vector entry (" + std::to_string(info.vector_size) + ") of indices " +
                 type_str(start_indices));
  std::vector<int64_t> offset_sizes;
  for (int64_t i = 0; i < rank; ++i)
    if (!contains(dims.collapsed_slice_dims, i) && !contains(dims.operand_batching_dims, i))
      offset_sizes.push_back(slice_sizes[i]);
  if (dims.offset_dims.size() != offset_sizes.size())
    fail(op, "offset_dims " + list_str(dims.offset_dims) + " must have one entry per " +
                 "non-collapsed dimension of the slice (" + std::to_string(offset_sizes.size()) +
                 ")");
  const int64_t out_rank = static_cast<int64_t>(dims.offset_dims.size() + info.batch_shape.size());
  check_dim_list(op, "offset_dims", dims.offset_dims, out_rank, true,
                 "a result of rank " + std::to_string(out_rank));
  Shape shape;
  size_t oi = 0, bi = 0;
  for (int64_t i = 0; i < out_rank; ++i)
    shape.push_back(contains(dims.offset_dims, i) ? offset_sizes[oi++] : info.batch_shape[bi++]);
  std::vector<ir::NamedAttribute> fields;
  field(fields, "offset_dims", dims.offset_dims);
  field(fields, "collapsed_slice_dims", dims.collapsed_slice_dims);
  field(fields, "operand_batching_dims", dims.operand_batching_dims);
  field(fields, "start_indices_batching_dims", dims.start_indices_batching_dims);
  field(fields, "start_index_map", dims.start_index_map);
  if (info.ivd != 0)
    fields.push_back({"index_vector_dim", ir::Attribute::integer_attr(info.ivd, std::nullopt)});
  std::vector<ir::NamedAttribute> attrs = {
      {"dimension_numbers", ir::Attribute::struct_attr("stablehlo.gather", fields)}};
  if (indices_are_sorted)
    attrs.push_back({"indices_are_sorted", ir::Attribute::boolean_attr(true)});
  attrs.push_back({"slice_sizes", dense(slice_sizes)});
  return trace::bind1(spec("stablehlo.gather", shape, operand.dtype(), attrs),
                      {operand, start_indices});
}

Array scatter_apply(const Array& operand, const Array& indices, const Array& updates,
                    const ScatterDimensionNumbers& dims, const Computation& computation) {
  const std::string op = "scatter";
  check_valid(op, operand);
  check_valid(op, indices);
  check_valid(op, updates);
  if (updates.dtype() != operand.dtype())
    fail(op, "updates must have the operand's dtype, got " + type_str(operand) + " and " +
                 type_str(updates));
  if (is_complex(operand.dtype()))
    fail(op, "complex operands support scatter (replace) and scatter_add only, got " +
                 type_str(operand));
  const IndexInfo info = index_info(op, indices, dims.index_vector_dim);
  const int64_t rank = operand.ndim();
  const std::string ot = "operand " + type_str(operand);
  const std::string ut = "updates " + type_str(updates);
  check_dim_list(op, "update_window_dims", dims.update_window_dims, updates.ndim(), true, ut);
  check_dim_list(op, "inserted_window_dims", dims.inserted_window_dims, rank, true, ot);
  check_dim_list(op, "input_batching_dims", dims.input_batching_dims, rank, true, ot);
  check_disjoint(op, "inserted_window_dims", dims.inserted_window_dims, "input_batching_dims",
                 dims.input_batching_dims);
  check_dim_list(op, "scatter_dims_to_operand_dims", dims.scatter_dims_to_operand_dims, rank, false,
                 ot);
  check_disjoint(op, "scatter_dims_to_operand_dims", dims.scatter_dims_to_operand_dims,
                 "input_batching_dims", dims.input_batching_dims);
  check_dim_list(op, "scatter_indices_batching_dims", dims.scatter_indices_batching_dims,
                 indices.ndim(), false, "indices " + type_str(indices));
  if (contains(dims.scatter_indices_batching_dims, info.ivd))
    fail(op, "scatter_indices_batching_dims cannot contain index_vector_dim");
  if (dims.input_batching_dims.size() != dims.scatter_indices_batching_dims.size())
    fail(op, "input_batching_dims and scatter_indices_batching_dims must have the same length");
  for (size_t i = 0; i < dims.input_batching_dims.size(); ++i)
    if (operand.shape()[dims.input_batching_dims[i]] !=
        indices.shape()[dims.scatter_indices_batching_dims[i]])
      fail(op, "batching dimensions have different sizes in " + ot + " and indices " +
                   type_str(indices));
  if (static_cast<int64_t>(dims.scatter_dims_to_operand_dims.size()) != info.vector_size)
    fail(op, "scatter_dims_to_operand_dims " + list_str(dims.scatter_dims_to_operand_dims) +
                 " must have one entry per index vector entry (" +
                 std::to_string(info.vector_size) + ") of indices " + type_str(indices));
  if (static_cast<int64_t>(dims.update_window_dims.size() + dims.inserted_window_dims.size() +
                           dims.input_batching_dims.size()) != rank)
    fail(op, "update_window_dims " + list_str(dims.update_window_dims) + ", inserted_window_dims " +
                 list_str(dims.inserted_window_dims) + " and input_batching_dims " +
                 list_str(dims.input_batching_dims) + " must account for every dimension of " + ot);
  // Scatter dimensions of the updates match the indices' batch dimensions.
  Shape scatter_shape;
  for (int64_t i = 0; i < updates.ndim(); ++i)
    if (!contains(dims.update_window_dims, i)) scatter_shape.push_back(updates.shape()[i]);
  if (scatter_shape != info.batch_shape)
    fail(op, "the scatter dimensions of " + ut + " (" + shape_to_string(scatter_shape) +
                 ") must match the batch dimensions of indices " + type_str(indices) + " (" +
                 shape_to_string(info.batch_shape) + ")");
  size_t w = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (contains(dims.inserted_window_dims, i) || contains(dims.input_batching_dims, i)) continue;
    const int64_t size = updates.shape()[dims.update_window_dims[w++]];
    if (size > operand.shape()[i])
      fail(op, "the update window of " + ut + " does not fit in dimension " + std::to_string(i) +
                   " of " + ot);
  }
  std::vector<ir::NamedAttribute> fields;
  field(fields, "update_window_dims", dims.update_window_dims);
  field(fields, "inserted_window_dims", dims.inserted_window_dims);
  field(fields, "input_batching_dims", dims.input_batching_dims);
  field(fields, "scatter_indices_batching_dims", dims.scatter_indices_batching_dims);
  field(fields, "scatter_dims_to_operand_dims", dims.scatter_dims_to_operand_dims);
  if (info.ivd != 0)
    fields.push_back({"index_vector_dim", ir::Attribute::integer_attr(info.ivd, std::nullopt)});
  trace::OpSpec s = spec(
      "stablehlo.scatter", operand.shape(), operand.dtype(),
      {{"scatter_dimension_numbers", ir::Attribute::struct_attr("stablehlo.scatter", fields)}});
  const DType t = operand.dtype();
  s.regions.push_back([=](trace::TraceContext& tc, ir::Block& block) {
    trace_computation(op, tc, block, {t, t}, {t}, computation);
  });
  return trace::bind1(s, {operand, indices, updates});
}

namespace {
Computation combiner(Array (*f)(const Array&, const Array&)) {
  return [f](const std::vector<Array>& a) { return std::vector<Array>{f(a[0], a[1])}; };
}

// Complex replace and add act on the real and imaginary parts independently, so they are two
// scatters of the parts (the backends have no complex scatter kernel).
Array scatter_parts(Array (*f)(const Array&, const Array&, const Array&,
                               const ScatterDimensionNumbers&),
                    const std::string& op, const Array& operand, const Array& indices,
                    const Array& updates, const ScatterDimensionNumbers& dims) {
  check_valid(op, updates);
  if (updates.dtype() != operand.dtype())
    fail(op, "updates must have the operand's dtype, got " + type_str(operand) + " and " +
                 type_str(updates));
  return complex(f(real(operand), indices, real(updates), dims),
                 f(imag(operand), indices, imag(updates), dims));
}

}  // namespace

Array scatter(const Array& operand, const Array& indices, const Array& updates,
              const ScatterDimensionNumbers& dims) {
  check_valid("scatter", operand);
  if (is_complex(operand.dtype()))
    return scatter_parts(scatter, "scatter", operand, indices, updates, dims);
  return scatter_apply(operand, indices, updates, dims,
                       [](const std::vector<Array>& a) { return std::vector<Array>{a[1]}; });
}

Array scatter_add(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims) {
  check_valid("scatter_add", operand);
  if (is_complex(operand.dtype()))
    return scatter_parts(scatter_add, "scatter_add", operand, indices, updates, dims);
  return scatter_apply(operand, indices, updates, dims,
                       combiner(operand.dtype() == DType::Bool ? bitwise_or : add));
}

Array scatter_mul(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims) {
  check_valid("scatter_mul", operand);
  return scatter_apply(operand, indices, updates, dims,
                       combiner(operand.dtype() == DType::Bool ? bitwise_and : mul));
}

Array scatter_max(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims) {
  return scatter_apply(operand, indices, updates, dims, combiner(max));
}

Array scatter_min(const Array& operand, const Array& indices, const Array& updates,
                  const ScatterDimensionNumbers& dims) {
  return scatter_apply(operand, indices, updates, dims, combiner(min));
}

}  // namespace cujax::lax
