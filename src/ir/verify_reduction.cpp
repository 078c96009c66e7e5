// The verifier's type rules for reductions, windows and sort (families of op_table.h).
#include <algorithm>
#include <string>
#include <vector>

#include "ir/verify_op.h"

namespace cujax::ir::rules {
namespace {

// Checks inputs[0..n) share a shape and init values [n, 2n) are scalars; returns the element
// types of the accumulators (the init values').
std::vector<DType> reduction_inputs(OpCheck& c, const std::string& op_kind) {
  if (c.num_operands() == 0 || c.num_operands() % 2)
    c.fail("expects inputs and as many init values, got " + std::to_string(c.num_operands()) +
           " operands");
  c.all_tensors();
  const size_t n = c.num_operands() / 2;
  if (c.num_results() != n)
    c.fail("has " + std::to_string(c.num_results()) + " results, expected " + std::to_string(n) +
           " (one per " + op_kind + " input)");
  std::vector<DType> acc;
  for (size_t i = 0; i < n; ++i) {
    if (c.operand(i).shape != c.operand(0).shape)
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected the shape of operand 0, " + c.operand(0).str());
    const Type& init = c.operand(n + i);
    if (init.rank() != 0)
      c.fail("operand " + std::to_string(n + i) + " has type " + init.str() +
             ", expected a 0-dimensional tensor (the init value of input " + std::to_string(i) +
             ")");
    if (!promotable(c.operand(i).dtype, init.dtype))
      c.fail("operand " + std::to_string(n + i) + " has type " + init.str() +
             ", expected element type " + std::string(mlir_name(c.operand(i).dtype)) +
             " (as input " + std::to_string(i) + ")");
    acc.push_back(init.dtype);
  }
  return acc;
}

void check_reduce(OpCheck& c) {
  const std::vector<DType> acc = reduction_inputs(c, "reduce");
  const Type& in = c.operand(0);
  const Dims dims = c.ints("dimensions");
  c.in_range("dimensions", dims, 0, in.rank());
  c.unique("dimensions", dims);
  Shape s;
  for (int64_t d = 0; d < in.rank(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end())
      s.push_back(in.shape[static_cast<size_t>(d)]);
  for (size_t i = 0; i < acc.size(); ++i)
    c.result_is(i, Type::tensor(s, acc[i]),
                "input " + std::to_string(i) + " reduced across " + list_str(dims));
  reducer_signature(c, 0, "body", acc);
}

void check_reduce_window(OpCheck& c) {
  const std::vector<DType> acc = reduction_inputs(c, "reduce_window");
  const Type& in = c.operand(0);
  const int64_t r = in.rank();
  const Dims ones(static_cast<size_t>(r), 1);
  const Dims window = c.ints("window_dimensions");
  const Dims strides = c.ints_or("window_strides", ones);
  const Dims base = c.ints_or("base_dilations", ones);
  const Dims wdil = c.ints_or("window_dilations", ones);
  const std::string why = "the rank of operand 0, " + in.str();
  c.size_is("window_dimensions", window, r, why);
  c.size_is("window_strides", strides, r, why);
  c.size_is("base_dilations", base, r, why);
  c.size_is("window_dilations", wdil, r, why);
  c.all_positive("window_dimensions", window);
  c.all_positive("window_strides", strides);
  c.all_positive("base_dilations", base);
  c.all_positive("window_dilations", wdil);
  const Dims pad = c.padding("padding", r);
  Shape s;
  for (size_t d = 0; d < static_cast<size_t>(r); ++d)
    s.push_back(num_windows(in.shape[d], base[d], pad[2 * d], pad[2 * d + 1], window[d], wdil[d],
                            strides[d]));
  for (size_t i = 0; i < acc.size(); ++i)
    c.result_is(i, Type::tensor(s, acc[i]), "the number of windows in each dimension");
  reducer_signature(c, 0, "body", acc);
}

void check_select_and_scatter(OpCheck& c) {
  c.all_tensors();
  const Type& in = c.operand(0);
  const Type& source = c.operand(1);
  const int64_t r = in.rank();
  const Dims window = c.ints("window_dimensions");
  const Dims strides = c.ints_or("window_strides", Dims(static_cast<size_t>(r), 1));
  const std::string why = "the rank of operand 0, " + in.str();
  c.size_is("window_dimensions", window, r, why);
  c.size_is("window_strides", strides, r, why);
  c.all_positive("window_dimensions", window);
  c.all_positive("window_strides", strides);
  const Dims pad = c.padding("padding", r);
  Shape s;
  for (size_t d = 0; d < static_cast<size_t>(r); ++d)
    s.push_back(num_windows(in.shape[d], 1, pad[2 * d], pad[2 * d + 1], window[d], 1, strides[d]));
  c.operand_is(1, Type::tensor(s, in.dtype), "one source element per window of operand 0");
  (void)source;
  c.operand_is(2, scalar(in.dtype), "the init value is a scalar of operand 0's element type");
  c.result_is(0, in, "same as operand 0");
  const Type e = scalar(in.dtype);
  c.region_signature(0, "select", {e, e}, {scalar(DType::Bool)});
  c.region_signature(1, "scatter", {e, e}, {e});
}

void check_sort(OpCheck& c) {
  c.all_tensors();
  const size_t n = c.num_operands();
  const Type& first = c.operand(0);
  for (size_t i = 1; i < n; ++i)
    if (c.operand(i).shape != first.shape)
      c.fail("operand " + std::to_string(i) + " has type " + c.operand(i).str() +
             ", expected the shape of operand 0, " + first.str());
  for (size_t i = 0; i < n; ++i)
    c.result_is(i, c.operand(i), "same as operand " + std::to_string(i));
  const int64_t d = c.integer_or("dimension", -1);
  if (d < -first.rank() || d >= first.rank() || (first.rank() == 0))
    c.fail("dimension = " + std::to_string(d) + " is out of range for operand 0, " + first.str());
  std::vector<Type> args;
  for (size_t i = 0; i < n; ++i) {
    args.push_back(scalar(c.operand(i).dtype));
    args.push_back(scalar(c.operand(i).dtype));
  }
  c.region_signature(0, "comparator", args, {scalar(DType::Bool)});
}

}  // namespace

void add_reduction_rules(Checkers& m) {
  m["stablehlo.reduce"] = check_reduce;
  m["stablehlo.reduce_window"] = check_reduce_window;
  m["stablehlo.select_and_scatter"] = check_select_and_scatter;
  m["stablehlo.sort"] = check_sort;
}

}  // namespace cujax::ir::rules
