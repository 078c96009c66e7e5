// CPU gather and scatter: the spec's worked examples, index clamping (gather) and skipping of
// out-of-bounds updates (scatter), batching dimensions, every index dtype, combiners with
// wraparound, NaN and signed zeros, 16-bit float rounding per update, variadic scatter and
// general update computations. Expected values are written out by hand or computed from the
// op's definition with plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backends/cpu/kernels.h"
#include "cpu_data_movement_util.h"
#include "cujax/core/error.h"

namespace cujax {
namespace {

using dmtest::expect_tensor;
using dmtest::OneOp;
using dmtest::scalar;
using dmtest::tensor;

template <class T>
std::vector<T> iota_values(int64_t n, int64_t start = 0) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + i);
  return v;
}

ir::NamedAttribute field(const std::string& name, const std::vector<int64_t>& v) {
  return {name, ir::Attribute::int_list(v)};
}

// ---------------------------------------------------------------------------------------------
// gather

struct GatherDims {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, operand_batching_dims,
      start_indices_batching_dims, start_index_map;
  int64_t index_vector_dim = 0;
};

HostTensor run_gather(const HostTensor& operand, const HostTensor& indices, const GatherDims& g,
                      const std::vector<int64_t>& slice_sizes, Shape out) {
  OneOp t;
  auto* a = t.arg(operand);
  auto* i = t.arg(indices);
  auto& op = t.op("stablehlo.gather", {a, i}, std::move(out), operand.dtype());
  std::vector<ir::NamedAttribute> fields;
  if (!g.offset_dims.empty()) fields.push_back(field("offset_dims", g.offset_dims));
  if (!g.collapsed_slice_dims.empty())
    fields.push_back(field("collapsed_slice_dims", g.collapsed_slice_dims));
  if (!g.operand_batching_dims.empty())
    fields.push_back(field("operand_batching_dims", g.operand_batching_dims));
  if (!g.start_indices_batching_dims.empty())
    fields.push_back(field("start_indices_batching_dims", g.start_indices_batching_dims));
  fields.push_back(field("start_index_map", g.start_index_map));
  if (g.index_vector_dim != 0)
    fields.push_back(
        {"index_vector_dim", ir::Attribute::integer_attr(g.index_vector_dim, std::nullopt)});
  op.set_attr("dimension_numbers", ir::Attribute::struct_attr("stablehlo.gather", fields));
  op.set_attr("slice_sizes", ir::Attribute::dense_array(slice_sizes));
  op.set_attr("indices_are_sorted", ir::Attribute::boolean_attr(false));
  return t.run();
}

TEST(CpuGather, SpecExample) {
  const HostTensor operand = tensor<int32_t>(iota_values<int32_t>(24, 1), {3, 4, 2});
  const HostTensor idx = tensor<int64_t>({0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 0, 2}, {2, 3, 2});
  GatherDims g;
  g.offset_dims = {2, 3};
  g.collapsed_slice_dims = {0};
  g.start_index_map = {1, 0};
  g.index_vector_dim = 2;
  expect_tensor<int32_t>(run_gather(operand, idx, g, {1, 2, 2}, {2, 3, 2, 2}),
                         {1, 2,  3,  4,  3,  4,  5,  6,  13, 14, 15, 16,  //
                          9, 10, 11, 12, 11, 12, 13, 14, 17, 18, 19, 20},
                         {2, 3, 2, 2});
}

TEST(CpuGather, SpecExampleWithBatchingDims) {
  const HostTensor operand = tensor<int32_t>(iota_values<int32_t>(48, 1), {2, 3, 4, 2});
  const HostTensor idx = tensor<int64_t>(
      {0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 0, 9, 0, 0, 2, 1, 2, 2, 1, 2, 0, 1, 1, 0}, {2, 2, 3, 2});
  GatherDims g;
  g.offset_dims = {3, 4};
  g.collapsed_slice_dims = {1};
  g.operand_batching_dims = {0};
  g.start_indices_batching_dims = {1};
  g.start_index_map = {2, 1};
  g.index_vector_dim = 3;
  expect_tensor<int32_t>(run_gather(operand, idx, g, {1, 1, 2, 2}, {2, 2, 3, 2, 2}),
                         {1,  2,  3,  4,  3,  4,  5,  6,  13, 14, 15, 16,  //
                          33, 34, 35, 36, 35, 36, 37, 38, 41, 42, 43, 44,  //
                          1,  2,  3,  4,  13, 14, 15, 16, 21, 22, 23, 24,  //
                          43, 44, 45, 46, 33, 34, 35, 36, 27, 28, 29, 30},
                         {2, 2, 3, 2, 2});
}

TEST(CpuGather, ClampsStartIndices) {
  const HostTensor operand = tensor<float>({10, 20, 30, 40, 50}, {5});
  GatherDims g;
  g.offset_dims = {1};
  g.start_index_map = {0};
  g.index_vector_dim = 1;
  expect_tensor<float>(
      run_gather(operand, tensor<int32_t>({-3, 4, 2, 100}, {4, 1}), g, {2}, {4, 2}),
      {10, 20, 40, 50, 30, 40, 40, 50}, {4, 2});
  expect_tensor<float>(
      run_gather(operand, tensor<uint64_t>({~uint64_t{0}, 1}, {2, 1}), g, {2}, {2, 2}),
      {40, 50, 20, 30}, {2, 2});
  expect_tensor<float>(run_gather(operand, tensor<int8_t>({-128, 127}, {2, 1}), g, {5}, {2, 5}),
                       {10, 20, 30, 40, 50, 10, 20, 30, 40, 50}, {2, 5});
}

TEST(CpuGather, CollapsedElementsAndImplicitIndexVector) {
  {
    // operand 3x3 values 0..8; pick (2,0), (0,2), (1,1)
    GatherDims g;
    g.collapsed_slice_dims = {0, 1};
    g.start_index_map = {0, 1};
    g.index_vector_dim = 1;
    expect_tensor<int64_t>(run_gather(tensor<int64_t>(iota_values<int64_t>(9), {3, 3}),
                                      tensor<uint8_t>({2, 0, 0, 2, 1, 1}, {3, 2}), g, {1, 1}, {3}),
                           {6, 2, 4}, {3});
  }
  {
    // index_vector_dim == rank(indices): every scalar is an index vector of length 1
    GatherDims g;
    g.collapsed_slice_dims = {0};
    g.start_index_map = {0};
    g.index_vector_dim = 2;
    expect_tensor<bfloat16>(
        run_gather(tensor<bfloat16>({bfloat16(1.5f), bfloat16(-2.0f), bfloat16(3.0f)}, {3}),
                   tensor<int16_t>({2, 0, 1, 1}, {2, 2}), g, {1}, {2, 2}),
        {bfloat16(3.0f), bfloat16(1.5f), bfloat16(-2.0f), bfloat16(-2.0f)}, {2, 2});
  }
  {
    // rows of a matrix, column window in the middle dimension of the result
    GatherDims g;
    g.offset_dims = {0};
    g.collapsed_slice_dims = {1};
    g.start_index_map = {1};
    g.index_vector_dim = 1;
    // operand 2x4 [[F,T,F,T],[T,F,T,F]]; columns 3 and 0, the row window as result dim 0
    expect_tensor<bool>(
        run_gather(tensor<bool>({false, true, false, true, true, false, true, false}, {2, 4}),
                   tensor<int32_t>({3, 0}, {2, 1}), g, {2, 1}, {2, 2}),
        {true, false, false, true}, {2, 2});
  }
}

TEST(CpuGather, EmptyIndicesAndEmptySlices) {
  GatherDims g;
  g.offset_dims = {1};
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = 1;
  expect_tensor<float>(run_gather(tensor<float>(iota_values<float>(6), {3, 2}),
                                  HostTensor(DType::I32, {0, 1}), g, {1, 2}, {0, 2}),
                       {}, {0, 2});
  expect_tensor<float>(run_gather(tensor<float>(iota_values<float>(6), {3, 2}),
                                  tensor<int32_t>({1, 2}, {2, 1}), g, {1, 0}, {2, 0}),
                       {}, {2, 0});
}

TEST(CpuGather, LargeRowGather) {
  const int64_t rows = 200, cols = 300, n = 3000;
  std::vector<float> x(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) x[i] = static_cast<float>(i);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> dist(-20, rows + 20);
  std::vector<int32_t> idx(n);
  for (auto& v : idx) v = dist(rng);
  GatherDims g;
  g.offset_dims = {1};
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = 1;
  std::vector<float> want(n * cols);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = std::min<int64_t>(std::max<int64_t>(idx[i], 0), rows - 1);
    for (int64_t j = 0; j < cols; ++j) want[i * cols + j] = x[r * cols + j];
  }
  expect_tensor<float>(run_gather(tensor<float>(x, {rows, cols}), tensor<int32_t>(idx, {n, 1}), g,
                                  {1, cols}, {n, cols}),
                       want, {n, cols});
}

// ---------------------------------------------------------------------------------------------
// scatter

struct ScatterDims {
  std::vector<int64_t> update_window_dims, inserted_window_dims, input_batching_dims,
      scatter_indices_batching_dims, scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
};

ir::AttrRef scatter_dn(const ScatterDims& s) {
  std::vector<ir::NamedAttribute> fields;
  if (!s.update_window_dims.empty())
    fields.push_back(field("update_window_dims", s.update_window_dims));
  if (!s.inserted_window_dims.empty())
    fields.push_back(field("inserted_window_dims", s.inserted_window_dims));
  if (!s.input_batching_dims.empty())
    fields.push_back(field("input_batching_dims", s.input_batching_dims));
  if (!s.scatter_indices_batching_dims.empty())
    fields.push_back(field("scatter_indices_batching_dims", s.scatter_indices_batching_dims));
  fields.push_back(field("scatter_dims_to_operand_dims", s.scatter_dims_to_operand_dims));
  if (s.index_vector_dim != 0)
    fields.push_back(
        {"index_vector_dim", ir::Attribute::integer_attr(s.index_vector_dim, std::nullopt)});
  return ir::Attribute::struct_attr("stablehlo.scatter", fields);
}

// The update computation `return combiner(a, b)`, or `return b` when combiner is empty.
void binary_region(ir::Operation& op, DType dt, const std::string& combiner, bool swapped = false) {
  ir::Block& b = op.add_region().add_block();
  const ir::Type t = ir::Type::tensor({}, dt);
  ir::Value* x = b.add_argument(t);
  ir::Value* y = b.add_argument(t);
  ir::Value* r = y;
  if (!combiner.empty()) {
    std::vector<ir::Value*> args =
        swapped ? std::vector<ir::Value*>{y, x} : std::vector<ir::Value*>{x, y};
    r = b.push_back(ir::make_op(combiner, args, {t}))->result(0);
  }
  b.push_back(ir::make_op("stablehlo.return", {r}, {}));
}

HostTensor run_scatter(const HostTensor& input, const HostTensor& indices,
                       const HostTensor& updates, const ScatterDims& s, const std::string& combiner,
                       bool unique = false) {
  OneOp t;
  auto* a = t.arg(input);
  auto* i = t.arg(indices);
  auto* u = t.arg(updates);
  auto& op = t.op("stablehlo.scatter", {a, i, u}, input.shape(), input.dtype());
  op.set_attr("scatter_dimension_numbers", scatter_dn(s));
  if (unique) op.set_attr("unique_indices", ir::Attribute::boolean_attr(true));
  binary_region(op, input.dtype(), combiner);
  return t.run();
}

// 1-D input, one index per update element.
ScatterDims elementwise_1d() {
  ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  return s;
}

TEST(CpuScatter, SpecExample) {
  const HostTensor input = tensor<int64_t>(iota_values<int64_t>(24, 1), {3, 4, 2});
  const HostTensor idx = tensor<int64_t>({0, 2, 1, 0, 2, 1, 0, 1, 1, 0, 0, 9}, {2, 3, 2});
  const HostTensor upd = tensor<int64_t>(std::vector<int64_t>(24, 1), {2, 3, 2, 2});
  ScatterDims s;
  s.update_window_dims = {2, 3};
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {1, 0};
  s.index_vector_dim = 2;
  expect_tensor<int64_t>(run_scatter(input, idx, upd, s, "stablehlo.add"),
                         {1,  2,  5,  6,  7,  8,  7,  8,   //
                          10, 11, 12, 13, 14, 15, 16, 17,  //
                          18, 19, 20, 21, 21, 22, 23, 24},
                         {3, 4, 2});
}

TEST(CpuScatter, SpecExampleWithBatchingDims) {
  const HostTensor input = tensor<int64_t>(iota_values<int64_t>(48, 1), {2, 3, 4, 2});
  const HostTensor idx = tensor<int64_t>(
      {0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 0, 9, 0, 0, 2, 1, 2, 2, 1, 2, 0, 1, 1, 0}, {2, 2, 3, 2});
  const HostTensor upd = tensor<int64_t>(std::vector<int64_t>(48, 1), {2, 2, 3, 2, 2});
  ScatterDims s;
  s.update_window_dims = {3, 4};
  s.inserted_window_dims = {1};
  s.input_batching_dims = {0};
  s.scatter_indices_batching_dims = {1};
  s.scatter_dims_to_operand_dims = {2, 1};
  s.index_vector_dim = 3;
  expect_tensor<int64_t>(run_scatter(input, idx, upd, s, "stablehlo.add"),
                         {3,  4,  6,  7,  6,  7,  7,  8,   //
                          9,  10, 11, 12, 15, 16, 17, 18,  //
                          17, 18, 19, 20, 22, 23, 24, 25,  //
                          25, 26, 28, 29, 30, 31, 31, 32,  //
                          35, 36, 38, 39, 38, 39, 39, 40,  //
                          41, 42, 44, 45, 46, 47, 47, 48},
                         {2, 3, 4, 2});
}

TEST(CpuScatter, AddAccumulatesDuplicates) {
  const HostTensor input = tensor<float>({0, 0, 0, 0}, {4});
  expect_tensor<float>(
      run_scatter(input, tensor<int32_t>({1, 3, 1, 1}, {4, 1}), tensor<float>({1, 2, 3, 4}, {4}),
                  elementwise_1d(), "stablehlo.add"),
      {0, 8, 0, 2}, {4});
  // the input is left alone
  expect_tensor<float>(input, {0, 0, 0, 0}, {4});
}

TEST(CpuScatter, AssignAndOutOfBoundsSkipped) {
  const HostTensor input = tensor<int32_t>({1, 2, 3}, {3});
  expect_tensor<int32_t>(run_scatter(input, tensor<int64_t>({2, 0}, {2, 1}),
                                     tensor<int32_t>({7, 8}, {2}), elementwise_1d(), ""),
                         {8, 2, 7}, {3});
  expect_tensor<int32_t>(run_scatter(input, tensor<int64_t>({5, -1, 1, 3}, {4, 1}),
                                     tensor<int32_t>({9, 9, 6, 9}, {4}), elementwise_1d(), ""),
                         {1, 6, 3}, {3});
  // unsigned indices above INT64_MAX are out of bounds, not negative
  expect_tensor<int32_t>(
      run_scatter(input, tensor<uint64_t>({~uint64_t{0}, 0}, {2, 1}), tensor<int32_t>({9, 5}, {2}),
                  elementwise_1d(), "stablehlo.add"),
      {6, 2, 3}, {3});
  expect_tensor<int32_t>(
      run_scatter(input, tensor<int8_t>({-128, 127, 2}, {3, 1}), tensor<int32_t>({9, 9, 4}, {3}),
                  elementwise_1d(), "stablehlo.add"),
      {1, 2, 7}, {3});
}

TEST(CpuScatter, WindowPartlyOutOfBoundsUpdatesInBoundsElements) {
  // spec: each update element is applied iff its result index is in bounds
  ScatterDims s;
  s.update_window_dims = {1};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  expect_tensor<int16_t>(
      run_scatter(tensor<int16_t>({0, 0, 0, 0, 0}, {5}), tensor<int32_t>({3, -2}, {2, 1}),
                  tensor<int16_t>({1, 2, 3, 10, 20, 30}, {2, 3}), s, "stablehlo.add"),
      {30, 0, 0, 1, 2}, {5});
}

TEST(CpuScatter, MaxMinPropagateNaNAndOrderZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const HostTensor input = tensor<float>({1, 5, nan, 0.0f, -0.0f, -1}, {6});
  const HostTensor idx = tensor<int32_t>({0, 1, 2, 3, 4, 5}, {6, 1});
  const HostTensor upd = tensor<float>({nan, 2, 1, -0.0f, 0.0f, -1}, {6});
  const HostTensor mx = run_scatter(input, idx, upd, elementwise_1d(), "stablehlo.maximum");
  const HostTensor mn = run_scatter(input, idx, upd, elementwise_1d(), "stablehlo.minimum");
  const float* a = mx.data_as<float>();
  const float* b = mn.data_as<float>();
  EXPECT_TRUE(std::isnan(a[0]));
  EXPECT_EQ(a[1], 5);
  EXPECT_TRUE(std::isnan(a[2]));
  EXPECT_TRUE(a[3] == 0 && !std::signbit(a[3]));
  EXPECT_TRUE(a[4] == 0 && !std::signbit(a[4]));
  EXPECT_EQ(a[5], -1);
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(b[1], 2);
  EXPECT_TRUE(std::isnan(b[2]));
  EXPECT_TRUE(b[3] == 0 && std::signbit(b[3]));
  EXPECT_TRUE(b[4] == 0 && std::signbit(b[4]));
  EXPECT_EQ(b[5], -1);
  // f16 NaN as well
  const float16 hn(nan), h1(1.0f), h2(2.0f);
  const HostTensor hm =
      run_scatter(tensor<float16>({h1, hn}, {2}), tensor<int32_t>({0, 1, 0}, {3, 1}),
                  tensor<float16>({hn, h2, h2}, {3}), elementwise_1d(), "stablehlo.maximum");
  EXPECT_TRUE(std::isnan(static_cast<float>(hm.data_as<float16>()[0])));
  EXPECT_TRUE(std::isnan(static_cast<float>(hm.data_as<float16>()[1])));
}

TEST(CpuScatter, SixteenBitFloatsRoundAfterEveryUpdate) {
  // 1 + 2^-8 is a tie in bf16 and rounds to even (1), so adding 2^-8 twice stays 1; an f32
  // accumulator would give 1 + 2^-7.
  const bfloat16 one(1.0f), tiny(0.00390625f);
  expect_tensor<bfloat16>(
      run_scatter(tensor<bfloat16>({one}, {1}), tensor<int32_t>({0, 0}, {2, 1}),
                  tensor<bfloat16>({tiny, tiny}, {2}), elementwise_1d(), "stablehlo.add"),
      {one}, {1});
  // f16: 2048 + 1 is a tie, rounds to 2048; 2048 * 1.5 = 3072 exactly
  const float16 big(2048.0f), h1(1.0f), h15(1.5f), r(3072.0f);
  expect_tensor<float16>(
      run_scatter(tensor<float16>({big, big}, {2}), tensor<int32_t>({0, 0}, {2, 1}),
                  tensor<float16>({h1, h1}, {2}), elementwise_1d(), "stablehlo.add"),
      {big, big}, {2});
  expect_tensor<float16>(
      run_scatter(tensor<float16>({big}, {1}), tensor<int32_t>({0}, {1, 1}),
                  tensor<float16>({h15}, {1}), elementwise_1d(), "stablehlo.multiply"),
      {r}, {1});
}

TEST(CpuScatter, IntegerWraparound) {
  expect_tensor<int8_t>(
      run_scatter(tensor<int8_t>({100, -128}, {2}), tensor<int32_t>({0, 1}, {2, 1}),
                  tensor<int8_t>({100, -1}, {2}), elementwise_1d(), "stablehlo.add"),
      {-56, 127}, {2});
  expect_tensor<uint16_t>(
      run_scatter(tensor<uint16_t>({65535, 3}, {2}), tensor<int32_t>({0, 1}, {2, 1}),
                  tensor<uint16_t>({65535, 30000}, {2}), elementwise_1d(), "stablehlo.multiply"),
      {1, 24464}, {2});
  const int32_t mn = std::numeric_limits<int32_t>::min();
  expect_tensor<int32_t>(
      run_scatter(tensor<int32_t>({mn}, {1}), tensor<int32_t>({0}, {1, 1}),
                  tensor<int32_t>({-1}, {1}), elementwise_1d(), "stablehlo.multiply"),
      {mn}, {1});
  expect_tensor<uint64_t>(
      run_scatter(tensor<uint64_t>({~uint64_t{0}, 5}, {2}), tensor<int32_t>({0, 1}, {2, 1}),
                  tensor<uint64_t>({2, 7}, {2}), elementwise_1d(), "stablehlo.add"),
      {1, 12}, {2});
  expect_tensor<uint8_t>(
      run_scatter(tensor<uint8_t>({200, 3, 12}, {3}), tensor<int32_t>({0, 1, 2}, {3, 1}),
                  tensor<uint8_t>({100, 5, 10}, {3}), elementwise_1d(), "stablehlo.maximum"),
      {200, 5, 12}, {3});
  expect_tensor<int64_t>(
      run_scatter(tensor<int64_t>({-5, 3}, {2}), tensor<int32_t>({0, 1, 1}, {3, 1}),
                  tensor<int64_t>({-7, 1, 2}, {3}), elementwise_1d(), "stablehlo.minimum"),
      {-7, 1}, {2});
  expect_tensor<uint32_t>(run_scatter(tensor<uint32_t>({0xF0F0u, 0xFFu, 0x0Fu}, {3}),
                                      tensor<int32_t>({0, 1, 2}, {3, 1}),
                                      tensor<uint32_t>({0xFF00u, 0x0Fu, 0xF0u}, {3}),
                                      elementwise_1d(), "stablehlo.and"),
                          {0xF000u, 0x0Fu, 0u}, {3});
  expect_tensor<int16_t>(
      run_scatter(tensor<int16_t>({5, 6}, {2}), tensor<int32_t>({0, 1}, {2, 1}),
                  tensor<int16_t>({3, 3}, {2}), elementwise_1d(), "stablehlo.xor"),
      {6, 5}, {2});
}

TEST(CpuScatter, BoolCombiners) {
  const HostTensor input = tensor<bool>({false, true, false, true}, {4});
  const HostTensor idx = tensor<int32_t>({0, 1, 2, 3}, {4, 1});
  const HostTensor upd = tensor<bool>({false, false, true, true}, {4});
  expect_tensor<bool>(run_scatter(input, idx, upd, elementwise_1d(), "stablehlo.or"),
                      {false, true, true, true}, {4});
  expect_tensor<bool>(run_scatter(input, idx, upd, elementwise_1d(), "stablehlo.and"),
                      {false, false, false, true}, {4});
  expect_tensor<bool>(run_scatter(input, idx, upd, elementwise_1d(), "stablehlo.add"),
                      {false, true, true, true}, {4});
  expect_tensor<bool>(run_scatter(input, idx, upd, elementwise_1d(), "stablehlo.multiply"),
                      {false, false, false, true}, {4});
  expect_tensor<bool>(run_scatter(input, idx, upd, elementwise_1d(), "stablehlo.maximum"),
                      {false, true, true, true}, {4});
  expect_tensor<bool>(run_scatter(input, idx, upd, elementwise_1d(), "stablehlo.minimum"),
                      {false, false, false, true}, {4});
  expect_tensor<bool>(run_scatter(input, idx, upd, elementwise_1d(), ""),
                      {false, false, true, true}, {4});
}

TEST(CpuScatter, RowWindowsAndImplicitIndexVector) {
  // input 3x2, rows 2 and 0 get the update rows; index_vector_dim = rank(indices) = 1
  ScatterDims s;
  s.update_window_dims = {1};
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  expect_tensor<double>(
      run_scatter(tensor<double>({1, 2, 3, 4, 5, 6}, {3, 2}), tensor<uint32_t>({2, 0}, {2}),
                  tensor<double>({10, 20, 30, 40}, {2, 2}), s, "stablehlo.add"),
      {31, 42, 3, 4, 15, 26}, {3, 2});
  // window dimension before the scatter dimension in the updates: columns 1 and 2 of a 2x3
  ScatterDims c;
  c.update_window_dims = {0};
  c.inserted_window_dims = {1};
  c.scatter_dims_to_operand_dims = {1};
  c.index_vector_dim = 1;
  expect_tensor<int32_t>(
      run_scatter(tensor<int32_t>({0, 0, 0, 0, 0, 0}, {2, 3}), tensor<int32_t>({2, 1}, {2, 1}),
                  tensor<int32_t>({1, 2, 3, 4}, {2, 2}), c, ""),
      {0, 2, 1, 0, 4, 3}, {2, 3});
}

TEST(CpuScatter, EmptyUpdates) {
  const HostTensor input = tensor<float>({1, 2}, {2});
  expect_tensor<float>(run_scatter(input, HostTensor(DType::I32, {0, 1}),
                                   HostTensor(DType::F32, {0}), elementwise_1d(), "stablehlo.add"),
                       {1, 2}, {2});
}

TEST(CpuScatter, LargeUniqueAndLargeWindow) {
  // a permutation scatter (unique indices, parallel over positions)
  const int64_t n = 200000;
  std::vector<int64_t> perm(n);
  for (int64_t i = 0; i < n; ++i) perm[i] = (i * 7919) % n;  // 7919 is prime, coprime to n
  std::vector<float> upd(n), base(n), want(n);
  for (int64_t i = 0; i < n; ++i) {
    upd[i] = static_cast<float>(i);
    base[i] = 0.5f;
  }
  for (int64_t i = 0; i < n; ++i) want[perm[i]] = base[perm[i]] + upd[i];
  expect_tensor<float>(
      run_scatter(tensor<float>(base, {n}), tensor<int64_t>(perm, {n, 1}), tensor<float>(upd, {n}),
                  elementwise_1d(), "stablehlo.add", true),
      want, {n});
  // one big window added twice at overlapping offsets
  const int64_t m = 100000;
  ScatterDims s;
  s.update_window_dims = {1};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  std::vector<int32_t> u(2 * m, 1), w(m + 10, 0);
  for (int64_t i = 0; i < m; ++i) {
    w[i] += 1;
    w[i + 10] += 1;
  }
  expect_tensor<int32_t>(
      run_scatter(tensor<int32_t>(std::vector<int32_t>(m + 10, 0), {m + 10}),
                  tensor<int32_t>({0, 10}, {2, 1}), tensor<int32_t>(u, {2, m}), s, "stablehlo.add"),
      w, {m + 10});
}

bool has_kernel(const char* name) {
  return cpu::kernel_registry().find(name) != nullptr;
}

TEST(CpuScatter, GeneralRegionRunsAsProgram) {
  if (!has_kernel("stablehlo.subtract")) GTEST_SKIP() << "needs the elementwise kernels";
  // update computation b - a (operands swapped, so not a plain binary combiner)
  OneOp t;
  auto* a = t.arg(tensor<int32_t>({10, 20, 30}, {3}));
  auto* i = t.arg(tensor<int32_t>({0, 2, 0}, {3, 1}));
  auto* u = t.arg(tensor<int32_t>({1, 2, 3}, {3}));
  auto& op = t.op("stablehlo.scatter", {a, i, u}, {3}, DType::I32);
  op.set_attr("scatter_dimension_numbers", scatter_dn(elementwise_1d()));
  binary_region(op, DType::I32, "stablehlo.subtract", /*swapped=*/true);
  // element 0: 1 - 10 = -9, then 3 - (-9) = 12; element 2: 2 - 30 = -28
  expect_tensor<int32_t>(t.run(), {12, 20, -28}, {3});
}

TEST(CpuScatter, RegionWithCapturedValue) {
  if (!has_kernel("stablehlo.add")) GTEST_SKIP() << "needs the elementwise kernels";
  // update computation: a + b + c, with c a value from the enclosing function
  OneOp t;
  auto* a = t.arg(tensor<float>({1, 2}, {2}));
  auto* i = t.arg(tensor<int32_t>({1}, {1, 1}));
  auto* u = t.arg(tensor<float>({10}, {1}));
  auto* c = t.arg(scalar<float>(100));
  auto& op = t.op("stablehlo.scatter", {a, i, u}, {2}, DType::F32);
  op.set_attr("scatter_dimension_numbers", scatter_dn(elementwise_1d()));
  ir::Block& b = op.add_region().add_block();
  const ir::Type st = ir::Type::tensor({}, DType::F32);
  ir::Value* x = b.add_argument(st);
  ir::Value* y = b.add_argument(st);
  ir::Value* s1 = b.push_back(ir::make_op("stablehlo.add", {x, y}, {st}))->result(0);
  ir::Value* s2 = b.push_back(ir::make_op("stablehlo.add", {s1, c}, {st}))->result(0);
  b.push_back(ir::make_op("stablehlo.return", {s2}, {}));
  expect_tensor<float>(t.run(), {1, 112}, {2});
}

TEST(CpuScatter, VariadicAssignAndProgram) {
  // two inputs of different types scattered together
  auto build = [](bool use_add, OneOp& t) {
    auto* a0 = t.arg(tensor<float>({1, 2, 3}, {3}));
    auto* a1 = t.arg(tensor<int32_t>({4, 5, 6}, {3}));
    auto* i = t.arg(tensor<int32_t>({2, 0, 2}, {3, 1}));
    auto* u0 = t.arg(tensor<float>({10, 20, 30}, {3}));
    auto* u1 = t.arg(tensor<int32_t>({-1, -2, -3}, {3}));
    auto& op = t.op("stablehlo.scatter", {a0, a1, i, u0, u1},
                    {ir::Type::tensor({3}, DType::F32), ir::Type::tensor({3}, DType::I32)});
    op.set_attr("scatter_dimension_numbers", scatter_dn(elementwise_1d()));
    ir::Block& b = op.add_region().add_block();
    const ir::Type tf = ir::Type::tensor({}, DType::F32), ti = ir::Type::tensor({}, DType::I32);
    ir::Value* x0 = b.add_argument(tf);
    ir::Value* x1 = b.add_argument(ti);
    ir::Value* y0 = b.add_argument(tf);
    ir::Value* y1 = b.add_argument(ti);
    if (use_add) {
      ir::Value* r0 = b.push_back(ir::make_op("stablehlo.add", {x0, y0}, {tf}))->result(0);
      ir::Value* r1 = b.push_back(ir::make_op("stablehlo.add", {x1, y1}, {ti}))->result(0);
      b.push_back(ir::make_op("stablehlo.return", {r0, r1}, {}));
    } else {
      b.push_back(
          ir::make_op("stablehlo.return", {y0, x1}, {}));  // assign the first, keep the second
    }
  };
  {
    OneOp t;
    build(false, t);
    const auto r = t.run_all();
    expect_tensor<float>(r[0], {20, 2, 30}, {3});
    expect_tensor<int32_t>(r[1], {4, 5, 6}, {3});
  }
  if (!has_kernel("stablehlo.add")) GTEST_SKIP() << "needs the elementwise kernels";
  {
    OneOp t;
    build(true, t);
    const auto r = t.run_all();
    expect_tensor<float>(r[0], {21, 2, 43}, {3});
    expect_tensor<int32_t>(r[1], {2, 5, 2}, {3});
  }
}

TEST(CpuScatter, BadDimensionNumbersAreUnsupported) {
  ScatterDims s;
  s.inserted_window_dims = {0, 0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  EXPECT_THROW(run_scatter(tensor<float>({1, 2}, {2}), tensor<int32_t>({0}, {1, 1}),
                           tensor<float>({1}, {1}), s, "stablehlo.add"),
               UnsupportedError);
}

}  // namespace
}  // namespace cujax
