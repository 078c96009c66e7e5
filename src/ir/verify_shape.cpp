// The verifier's type rules for shapes and data movement (families of op_table.h).
#include <algorithm>
#include <string>
#include <vector>

#include "ir/verify_op.h"

namespace cujax::ir::rules {
namespace {

void check_constant(OpCheck& c) {
  const Attribute& v = c.required("value");
  if (v.kind != Attribute::Kind::DenseElements) return;  // kept verbatim (e.g. dense_resource)
  const Type t = v.type ? *v.type : Type::tensor(v.tensor.shape(), v.tensor.dtype());
  if (t != c.result(0))
    c.fail("attribute 'value' has type " + t.str() + ", expected " + c.result(0).str() +
           " (the result type)");
}

void check_iota(OpCheck& c) {
  c.all_tensors();
  c.result_kind(0, Kinds::IntFloatOrComplex);
  const int64_t d = c.integer("iota_dimension");
  if (d < 0 || d >= c.result(0).rank())
    c.fail("iota_dimension = " + std::to_string(d) + " is out of range for result type " +
           c.result(0).str());
}

void check_broadcast_in_dim(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& out = c.result(0);
  const Dims dims = c.ints("broadcast_dimensions");
  c.size_is("broadcast_dimensions", dims, in.rank(), "the rank of operand 0, " + in.str());
  c.in_range("broadcast_dimensions", dims, 0, out.rank());
  c.unique("broadcast_dimensions", dims);
  if (out.dtype != in.dtype)
    c.result_is(0, Type::tensor(out.shape, in.dtype), "same element type as operand 0");
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t s = in.shape[i], t = out.shape[static_cast<size_t>(dims[i])];
    if (s != 1 && s != t)
      c.fail("operand 0 dimension " + std::to_string(i) + " has size " + std::to_string(s) +
             ", expected 1 or " + std::to_string(t) + " (result dimension " +
             std::to_string(dims[i]) + " of " + out.str() + ")");
  }
}

void check_reshape(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& out = c.result(0);
  if (out.dtype != in.dtype)
    c.result_is(0, Type::tensor(out.shape, in.dtype), "same element type as operand 0");
  if (out.num_elements() != in.num_elements())
    c.fail("result 0 has type " + out.str() + " with " + std::to_string(out.num_elements()) +
           " elements, expected " + std::to_string(in.num_elements()) + " (as operand 0, " +
           in.str() + ")");
}

void check_transpose(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Dims perm = c.ints("permutation");
  Dims sorted_perm = perm;
  std::sort(sorted_perm.begin(), sorted_perm.end());
  bool is_perm = static_cast<int64_t>(perm.size()) == in.rank();
  for (size_t i = 0; is_perm && i < sorted_perm.size(); ++i)
    is_perm = sorted_perm[i] == static_cast<int64_t>(i);
  if (!is_perm)
    c.fail("permutation = " + list_str(perm) + " is not a permutation of the " +
           std::to_string(in.rank()) + " dimensions of operand 0, " + in.str());
  Shape s;
  for (int64_t p : perm) s.push_back(in.shape[static_cast<size_t>(p)]);
  c.result_is(0, Type::tensor(s, in.dtype), "operand 0 transposed by " + list_str(perm));
}

void check_slice(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Dims start = c.ints("start_indices");
  const Dims limit = c.ints("limit_indices");
  const Dims strides = c.ints_or("strides", Dims(in.shape.size(), 1));
  const std::string why = "the rank of operand 0, " + in.str();
  c.size_is("start_indices", start, in.rank(), why);
  c.size_is("limit_indices", limit, in.rank(), why);
  c.size_is("strides", strides, in.rank(), why);
  c.all_positive("strides", strides);
  Shape s;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > in.shape[d])
      c.fail("dimension " + std::to_string(d) + " slices [" + std::to_string(start[d]) + ", " +
             std::to_string(limit[d]) + "), expected 0 <= start <= limit <= " +
             std::to_string(in.shape[d]) + " (operand 0 is " + in.str() + ")");
    s.push_back((limit[d] - start[d] + strides[d] - 1) / strides[d]);
  }
  c.result_is(0, Type::tensor(s, in.dtype),
              "slice " + list_str(start) + " to " + list_str(limit) + " by " + list_str(strides));
}

// Start index operands [first, end) are integer scalars of one type.
void check_start_indices(OpCheck& c, size_t first, int64_t rank) {
  const size_t n = c.num_operands() - first;
  if (static_cast<int64_t>(n) != rank)
    c.fail("has " + std::to_string(n) + " start index operands, expected " + std::to_string(rank) +
           " (the rank of operand 0, " + c.operand(0).str() + ")");
  for (size_t i = first; i < c.num_operands(); ++i) {
    c.tensor_operand(i);
    if (c.operand(i).rank() != 0 || !is_integer(c.operand(i).dtype))
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected a 0-dimensional integer tensor (a start index)");
    if (i > first) c.operand_is(i, c.operand(first), "same as the first start index");
  }
}

void check_dynamic_slice(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  check_start_indices(c, 1, in.rank());
  const Dims sizes = c.ints("slice_sizes");
  c.size_is("slice_sizes", sizes, in.rank(), "the rank of operand 0, " + in.str());
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] < 0 || sizes[d] > in.shape[d])
      c.fail("slice_sizes = " + list_str(sizes) + " does not fit in operand 0, " + in.str());
  c.result_is(0, Type::tensor(sizes, in.dtype), "slice_sizes " + list_str(sizes));
}

void check_dynamic_update_slice(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& update = c.operand(1);
  if (update.dtype != in.dtype || update.rank() != in.rank())
    c.fail("operand 1 has type " + update.str() + ", expected the element type and rank of " +
           "operand 0, " + in.str());
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (update.shape[d] > in.shape[d])
      c.fail("operand 1 has type " + update.str() + ", which does not fit in operand 0, " +
             in.str());
  check_start_indices(c, 2, in.rank());
  c.result_is(0, in, "same as operand 0");
}

void check_pad(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  c.operand_is(1, scalar(in.dtype), "the padding value is a scalar of operand 0's element type");
  const Dims lo = c.ints("edge_padding_low");
  const Dims hi = c.ints("edge_padding_high");
  const Dims interior = c.ints("interior_padding");
  const std::string why = "the rank of operand 0, " + in.str();
  c.size_is("edge_padding_low", lo, in.rank(), why);
  c.size_is("edge_padding_high", hi, in.rank(), why);
  c.size_is("interior_padding", interior, in.rank(), why);
  Shape s;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (interior[d] < 0)
      c.fail("interior_padding = " + list_str(interior) + " has a negative value");
    const int64_t n = in.shape[d];
    const int64_t size = lo[d] + n + std::max<int64_t>(n - 1, 0) * interior[d] + hi[d];
    if (size < 0)
      c.fail("padding dimension " + std::to_string(d) + " of " + in.str() +
             " gives a negative size " + std::to_string(size));
    s.push_back(size);
  }
  c.result_is(
      0, Type::tensor(s, in.dtype),
      "low " + list_str(lo) + ", high " + list_str(hi) + ", interior " + list_str(interior));
}

void check_concatenate(OpCheck& c) {
  c.all_tensors();
  const Type& first = c.operand(0);
  const int64_t dim = c.integer("dimension");
  if (dim < 0 || dim >= first.rank())
    c.fail("dimension = " + std::to_string(dim) + " is out of range for operand 0, " + first.str());
  Shape s = first.shape;
  for (size_t i = 1; i < c.num_operands(); ++i) {
    const Type& t = c.operand(i);
    Shape a = t.shape, b = first.shape;
    bool ok = t.dtype == first.dtype && t.rank() == first.rank();
    if (ok) {
      a[static_cast<size_t>(dim)] = b[static_cast<size_t>(dim)] = 0;
      ok = a == b;
    }
    if (!ok)
      c.fail("operand " + std::to_string(i) + " has type " + t.str() + ", expected " +
             "the type of operand 0, " + first.str() + ", except in dimension " +
             std::to_string(dim));
    s[static_cast<size_t>(dim)] += t.shape[static_cast<size_t>(dim)];
  }
  c.result_is(0, Type::tensor(s, first.dtype),
              "the operands joined along dimension " + std::to_string(dim));
}

void check_reverse(OpCheck& c) {
  c.all_tensors();
  const Dims dims = c.ints("dimensions");
  c.in_range("dimensions", dims, 0, c.operand(0).rank());
  c.unique("dimensions", dims);
  c.result_is(0, c.operand(0), "same as operand 0");
}

void check_get_dimension_size(OpCheck& c) {
  c.all_tensors();
  const int64_t d = c.integer("dimension");
  if (d < 0 || d >= c.operand(0).rank())
    c.fail("dimension = " + std::to_string(d) + " is out of range for operand 0, " +
           c.operand(0).str());
  c.result_is(0, scalar(DType::I32), "the size as a 32-bit integer");
}

}  // namespace

void add_shape_rules(Checkers& m) {
  m["stablehlo.constant"] = check_constant;
  m["stablehlo.iota"] = check_iota;
  m["stablehlo.broadcast_in_dim"] = check_broadcast_in_dim;
  m["stablehlo.reshape"] = check_reshape;
  m["stablehlo.transpose"] = check_transpose;
  m["stablehlo.slice"] = check_slice;
  m["stablehlo.dynamic_slice"] = check_dynamic_slice;
  m["stablehlo.dynamic_update_slice"] = check_dynamic_update_slice;
  m["stablehlo.pad"] = check_pad;
  m["stablehlo.concatenate"] = check_concatenate;
  m["stablehlo.reverse"] = check_reverse;
  m["stablehlo.get_dimension_size"] = check_get_dimension_size;
}

}  // namespace cujax::ir::rules
