// CPU data-movement ops: reshape, broadcast_in_dim, transpose, slice, pad, concatenate,
// reverse, iota, dynamic_slice, dynamic_update_slice, get_dimension_size, and the shared index
// math of backends/common/index.h. Expected values are written out by hand (the spec's
// examples among them) or computed from the op's definition with plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "backends/common/index.h"
#include "cpu_data_movement_util.h"
#include "cujax/core/error.h"

namespace cujax {
namespace {

using dmtest::expect_tensor;
using dmtest::i64;
using dmtest::i64s;
using dmtest::OneOp;
using dmtest::scalar;
using dmtest::tensor;

template <class T>
std::vector<T> iota_values(int64_t n, int64_t start = 0) {
  std::vector<T> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + i);
  return v;
}

// ---------------------------------------------------------------------------------------------
// index.h

TEST(IndexMath, RavelUnravelRoundTrip) {
  const int64_t dims[] = {2, 3, 4};
  int64_t strides[3];
  index::row_major_strides(dims, 3, strides);
  EXPECT_EQ(strides[0], 12);
  EXPECT_EQ(strides[1], 4);
  EXPECT_EQ(strides[2], 1);
  for (int64_t f = 0; f < 24; ++f) {
    int64_t idx[3];
    index::unravel(f, dims, 3, idx);
    EXPECT_EQ(idx[0], f / 12);
    EXPECT_EQ(idx[1], (f / 4) % 3);
    EXPECT_EQ(idx[2], f % 4);
    EXPECT_EQ(index::ravel(idx, strides, 3), f);
    EXPECT_EQ(index::strided_offset(f, dims, strides, 3), f);
  }
  int64_t idx[3] = {0, 0, 0};
  int count = 1;
  while (index::next_index(idx, dims, 3)) ++count;
  EXPECT_EQ(count, 24);
}

TEST(IndexMath, ClampAndIndexConversion) {
  EXPECT_EQ(index::clamp_start(-5, 10, 3), 0);
  EXPECT_EQ(index::clamp_start(8, 10, 3), 7);
  EXPECT_EQ(index::clamp_start(4, 10, 3), 4);
  EXPECT_EQ(index::clamp_start(4, 3, 3), 0);
  EXPECT_EQ(index::to_index<uint64_t>(~uint64_t{0}), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(index::to_index<int8_t>(-3), -3);
  EXPECT_EQ(index::to_index<uint8_t>(200), 200);
}

TEST(IndexMath, PadSourceRange) {
  int64_t first, count;
  // [1,2,3] low -1 high -1 interior 1 -> positions 0,2,4 shifted by -1: -1,1,3 in a size-3 dim
  index::pad_source_range(3, 3, -1, 1, &first, &count);
  EXPECT_EQ(first, 1);
  EXPECT_EQ(count, 1);
  index::pad_source_range(5, 4, -2, 0, &first, &count);
  EXPECT_EQ(first, 2);
  EXPECT_EQ(count, 3);
  index::pad_source_range(3, 9, 1, 2, &first, &count);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(count, 3);
  index::pad_source_range(3, 0, -10, 0, &first, &count);
  EXPECT_EQ(count, 0);
}

TEST(IndexMath, StridedCopySimplifyKeepsMapping) {
  // transpose of a 2x3x4 array, permutation [0, 2, 1]
  index::StridedCopy c;
  c.push(2, 12, 12);
  c.push(4, 1, 3);
  c.push(3, 4, 1);
  index::StridedCopy s = c;
  s.simplify();
  EXPECT_LE(s.rank, 3);
  for (int64_t f = 0; f < 24; ++f) {
    int64_t a, b, x, y;
    c.offsets(f, &a, &b);
    s.offsets(f, &x, &y);
    EXPECT_EQ(a, x);
    EXPECT_EQ(b, y);
  }
  // contiguous box collapses to one dimension
  index::StridedCopy d;
  d.push(2, 12, 12);
  d.push(3, 4, 4);
  d.push(4, 1, 1);
  d.simplify();
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.dims[0], 24);
  std::vector<int> src(24), dst(24, -1);
  std::iota(src.begin(), src.end(), 0);
  index::strided_copy_elements(c, src.data(), dst.data(), 0, 24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(dst[i * 12 + j * 3 + k], src[i * 12 + k * 4 + j]);
}

// ---------------------------------------------------------------------------------------------
// reshape

TEST(CpuShape, ReshapeSharesStorage) {
  OneOp t;
  const HostTensor x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto* a = t.arg(x);
  t.op("stablehlo.reshape", {a}, {3, 2}, DType::F32);
  const HostTensor r = t.run();
  expect_tensor<float>(r, {1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(r.data(), x.data());
}

TEST(CpuShape, ReshapeToScalarAndEmpty) {
  {
    OneOp t;
    auto* a = t.arg(tensor<int32_t>({-7}, {1, 1}));
    t.op("stablehlo.reshape", {a}, {}, DType::I32);
    expect_tensor<int32_t>(t.run(), {-7}, {});
  }
  {
    OneOp t;
    auto* a = t.arg(HostTensor(DType::F16, {0, 3}));
    t.op("stablehlo.reshape", {a}, {3, 0, 2}, DType::F16);
    expect_tensor<float16>(t.run(), {}, {3, 0, 2});
  }
}

// ---------------------------------------------------------------------------------------------
// broadcast_in_dim

TEST(CpuShape, BroadcastInDimRowAndColumn) {
  {
    OneOp t;
    auto* a = t.arg(tensor<float>({1, 2, 3}, {3}));
    t.op("stablehlo.broadcast_in_dim", {a}, {2, 3}, DType::F32)
        .set_attr("broadcast_dimensions", i64s({1}));
    expect_tensor<float>(t.run(), {1, 2, 3, 1, 2, 3}, {2, 3});
  }
  {
    OneOp t;
    auto* a = t.arg(tensor<int8_t>({1, -2, 3}, {3}));
    t.op("stablehlo.broadcast_in_dim", {a}, {3, 2}, DType::I8)
        .set_attr("broadcast_dimensions", i64s({0}));
    expect_tensor<int8_t>(t.run(), {1, 1, -2, -2, 3, 3}, {3, 2});
  }
}

TEST(CpuShape, BroadcastInDimSpecExample) {
  // spec: operand [[1],[2],[3]] : 1x3 -> 2x3x2 with dimensions [2, 1]
  OneOp t;
  auto* a = t.arg(tensor<int32_t>({1, 2, 3}, {1, 3}));
  t.op("stablehlo.broadcast_in_dim", {a}, {2, 3, 2}, DType::I32)
      .set_attr("broadcast_dimensions", i64s({2, 1}));
  expect_tensor<int32_t>(t.run(), {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}, {2, 3, 2});
}

TEST(CpuShape, BroadcastScalarBoolAndBf16) {
  {
    OneOp t;
    auto* a = t.arg(scalar<bool>(true));
    t.op("stablehlo.broadcast_in_dim", {a}, {2, 2}, DType::Bool)
        .set_attr("broadcast_dimensions", i64s({}));
    expect_tensor<bool>(t.run(), {true, true, true, true}, {2, 2});
  }
  {
    OneOp t;
    auto* a = t.arg(tensor<bfloat16>({bfloat16(1.5f), bfloat16(-0.0f)}, {2, 1}));
    t.op("stablehlo.broadcast_in_dim", {a}, {2, 3}, DType::BF16)
        .set_attr("broadcast_dimensions", i64s({0, 1}));
    const bfloat16 p(1.5f), m(-0.0f);
    expect_tensor<bfloat16>(t.run(), {p, p, p, m, m, m}, {2, 3});
  }
}

TEST(CpuShape, BroadcastZeroSizeAndIdentity) {
  {
    OneOp t;
    auto* a = t.arg(HostTensor(DType::F32, {0}));
    t.op("stablehlo.broadcast_in_dim", {a}, {4, 0}, DType::F32)
        .set_attr("broadcast_dimensions", i64s({1}));
    expect_tensor<float>(t.run(), {}, {4, 0});
  }
  {
    OneOp t;
    const HostTensor x = tensor<uint16_t>({1, 2, 3, 4}, {2, 2});
    auto* a = t.arg(x);
    t.op("stablehlo.broadcast_in_dim", {a}, {2, 2}, DType::U16)
        .set_attr("broadcast_dimensions", i64s({0, 1}));
    const HostTensor r = t.run();
    expect_tensor<uint16_t>(r, {1, 2, 3, 4}, {2, 2});
  }
}

TEST(CpuShape, BroadcastLarge) {
  const int64_t n = 700, m = 300;
  OneOp t;
  auto* a = t.arg(tensor<double>(iota_values<double>(m), {m}));
  t.op("stablehlo.broadcast_in_dim", {a}, {n, 1, m}, DType::F64)
      .set_attr("broadcast_dimensions", i64s({2}));
  std::vector<double> want(n * m);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) want[i * m + j] = static_cast<double>(j);
  expect_tensor<double>(t.run(), want, {n, 1, m});
}

// ---------------------------------------------------------------------------------------------
// transpose

TEST(CpuShape, Transpose2D) {
  OneOp t;
  auto* a = t.arg(tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  t.op("stablehlo.transpose", {a}, {3, 2}, DType::F32).set_attr("permutation", i64s({1, 0}));
  expect_tensor<float>(t.run(), {1, 4, 2, 5, 3, 6}, {3, 2});
}

TEST(CpuShape, TransposeSpecExample) {
  // spec: 2x3x2 operand, permutation [1, 0, 2] -> 3x2x2
  OneOp t;
  auto* a = t.arg(tensor<int32_t>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2}));
  t.op("stablehlo.transpose", {a}, {3, 2, 2}, DType::I32).set_attr("permutation", i64s({1, 0, 2}));
  expect_tensor<int32_t>(t.run(), {1, 2, 7, 8, 3, 4, 9, 10, 5, 6, 11, 12}, {3, 2, 2});
}

// result[i0, i1, ...] = operand[j] with j[perm[d]] = i[d], checked against plain loops.
template <class T>
void check_transpose(const Shape& s, const std::vector<int64_t>& perm, DType dt) {
  const int64_t n = num_elements(s);
  std::vector<T> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(i * 7 + 3);
  Shape rs;
  for (int64_t p : perm) rs.push_back(s[p]);
  OneOp t;
  auto* a = t.arg(tensor<T>(x, s));
  t.op("stablehlo.transpose", {a}, rs, dt).set_attr("permutation", i64s(perm));
  const auto os = row_major_strides(s);
  std::vector<T> want(n);
  std::vector<int64_t> idx(rs.size(), 0);
  for (int64_t f = 0; f < n; ++f) {
    int64_t rem = f, off = 0;
    for (int64_t d = static_cast<int64_t>(rs.size()) - 1; d >= 0; --d) {
      idx[d] = rem % rs[d];
      rem /= rs[d];
    }
    for (size_t d = 0; d < rs.size(); ++d) off += idx[d] * os[perm[d]];
    want[f] = x[off];
  }
  expect_tensor<T>(t.run(), want, rs);
}

TEST(CpuShape, TransposeGeneralAndLarge) {
  check_transpose<float>({2, 3, 4}, {2, 0, 1}, DType::F32);
  check_transpose<int64_t>({4, 5, 6}, {1, 0, 2}, DType::I64);  // inner dimension kept
  check_transpose<uint8_t>({3, 1, 5, 2}, {3, 2, 1, 0}, DType::U8);
  check_transpose<float>({300, 500}, {1, 0}, DType::F32);          // tiled, parallel
  check_transpose<uint16_t>({7, 65, 129}, {0, 2, 1}, DType::U16);  // batched tiles
  check_transpose<double>({40, 30, 70}, {2, 1, 0}, DType::F64);
  check_transpose<int8_t>({0, 3}, {1, 0}, DType::I8);
}

// ---------------------------------------------------------------------------------------------
// slice

TEST(CpuShape, SliceSpecExample) {
  // spec: [[0,0,1,0,0,1],[0,0,0,0,0,0],[0,0,1,0,0,1]], start [0,2], limit [3,6], strides [2,3]
  OneOp t;
  auto* a = t.arg(tensor<int64_t>({0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1}, {3, 6}));
  auto& op = t.op("stablehlo.slice", {a}, {2, 2}, DType::I64);
  op.set_attr("start_indices", i64s({0, 2}));
  op.set_attr("limit_indices", i64s({3, 6}));
  op.set_attr("strides", i64s({2, 3}));
  expect_tensor<int64_t>(t.run(), {1, 1, 1, 1}, {2, 2});
}

TEST(CpuShape, SliceStridedDistinctValues) {
  {
    OneOp t;
    auto* a = t.arg(tensor<float>(iota_values<float>(10), {10}));
    auto& op = t.op("stablehlo.slice", {a}, {3}, DType::F32);
    op.set_attr("start_indices", i64s({1}));
    op.set_attr("limit_indices", i64s({8}));
    op.set_attr("strides", i64s({3}));
    expect_tensor<float>(t.run(), {1, 4, 7}, {3});
  }
  {
    // 3x4 values 0..11, rows 1..3, columns 1..3
    OneOp t;
    auto* a = t.arg(tensor<int16_t>(iota_values<int16_t>(12), {3, 4}));
    auto& op = t.op("stablehlo.slice", {a}, {2, 2}, DType::I16);
    op.set_attr("start_indices", i64s({1, 1}));
    op.set_attr("limit_indices", i64s({3, 3}));
    op.set_attr("strides", i64s({1, 1}));
    expect_tensor<int16_t>(t.run(), {5, 6, 9, 10}, {2, 2});
  }
  {
    // empty slice
    OneOp t;
    auto* a = t.arg(tensor<int16_t>(iota_values<int16_t>(12), {3, 4}));
    auto& op = t.op("stablehlo.slice", {a}, {0, 4}, DType::I16);
    op.set_attr("start_indices", i64s({2, 0}));
    op.set_attr("limit_indices", i64s({2, 4}));
    op.set_attr("strides", i64s({1, 1}));
    expect_tensor<int16_t>(t.run(), {}, {0, 4});
  }
}

// ---------------------------------------------------------------------------------------------
// pad

HostTensor run_pad(const HostTensor& x, const HostTensor& value, const std::vector<int64_t>& lo,
                   const std::vector<int64_t>& hi, const std::vector<int64_t>& in, Shape out) {
  OneOp t;
  auto* a = t.arg(x);
  auto* v = t.arg(value);
  auto& op = t.op("stablehlo.pad", {a, v}, std::move(out), x.dtype());
  op.set_attr("edge_padding_low", i64s(lo));
  op.set_attr("edge_padding_high", i64s(hi));
  op.set_attr("interior_padding", i64s(in));
  return t.run();
}

TEST(CpuShape, PadSpecExample) {
  const HostTensor r = run_pad(tensor<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}), scalar<int32_t>(0),
                               {0, 1}, {2, 1}, {1, 2}, {5, 9});
  expect_tensor<int32_t>(r, {0, 1, 0, 0, 2, 0, 0, 3, 0,  //
                             0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                             0, 4, 0, 0, 5, 0, 0, 6, 0,  //
                             0, 0, 0, 0, 0, 0, 0, 0, 0,  //
                             0, 0, 0, 0, 0, 0, 0, 0, 0},
                         {5, 9});
}

TEST(CpuShape, PadNegativeEdges) {
  expect_tensor<float>(
      run_pad(tensor<float>({1, 2, 3, 4, 5}, {5}), scalar<float>(9), {-2}, {1}, {0}, {4}),
      {3, 4, 5, 9}, {4});
  // [1, p, 2, p, 3] with one element cut from each side
  expect_tensor<float>(
      run_pad(tensor<float>({1, 2, 3}, {3}), scalar<float>(-1.5f), {-1}, {-1}, {1}, {3}),
      {-1.5f, 2, -1.5f}, {3});
  expect_tensor<float>(
      run_pad(tensor<float>({1, 2, 3}, {3}), scalar<float>(7), {-3}, {0}, {1}, {2}), {7, 3}, {2});
  // 2-D: remove the first row, add a column on the right
  expect_tensor<int8_t>(run_pad(tensor<int8_t>({1, 2, 3, 4, 5, 6}, {3, 2}), scalar<int8_t>(-1),
                                {-1, 0}, {0, 1}, {0, 0}, {2, 3}),
                        {3, 4, -1, 5, 6, -1}, {2, 3});
  // everything cut away
  expect_tensor<int8_t>(
      run_pad(tensor<int8_t>({1, 2}, {2}), scalar<int8_t>(5), {-2}, {0}, {0}, {0}), {}, {0});
}

TEST(CpuShape, PadDtypesAndEmptyOperand) {
  expect_tensor<bool>(
      run_pad(tensor<bool>({false, false}, {2}), scalar<bool>(true), {1}, {1}, {1}, {5}),
      {true, false, true, false, true}, {5});
  const float16 h(0.25f), z(0.0f);
  expect_tensor<float16>(
      run_pad(tensor<float16>({z}, {1, 1}), scalar<float16>(h), {1, 0}, {0, 1}, {0, 0}, {2, 2}),
      {h, h, z, h}, {2, 2});
  expect_tensor<uint64_t>(
      run_pad(HostTensor(DType::U64, {0}), scalar<uint64_t>(~uint64_t{0}), {2}, {1}, {3}, {3}),
      {~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}}, {3});
}

TEST(CpuShape, PadLarge) {
  const int64_t n = 300;
  std::vector<float> x(n * n);
  for (int64_t i = 0; i < n * n; ++i) x[i] = static_cast<float>(i);
  const HostTensor r = run_pad(tensor<float>(x, {n, n}), scalar<float>(-1), {2, -1}, {-3, 4},
                               {1, 0}, {2 * n - 2, n + 3});
  std::vector<float> want((2 * n - 2) * (n + 3), -1.0f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const int64_t oi = 2 + 2 * i, oj = j - 1;
      if (oi >= 0 && oi < 2 * n - 2 && oj >= 0 && oj < n + 3)
        want[oi * (n + 3) + oj] = x[i * n + j];
    }
  expect_tensor<float>(r, want, {2 * n - 2, n + 3});
}

// ---------------------------------------------------------------------------------------------
// concatenate

TEST(CpuShape, Concatenate) {
  {
    OneOp t;
    auto* a = t.arg(tensor<int32_t>({1, 2, 3, 4}, {2, 2}));
    auto* b = t.arg(tensor<int32_t>({5, 6}, {1, 2}));
    t.op("stablehlo.concatenate", {a, b}, {3, 2}, DType::I32).set_attr("dimension", i64(0));
    expect_tensor<int32_t>(t.run(), {1, 2, 3, 4, 5, 6}, {3, 2});
  }
  {
    OneOp t;
    auto* a = t.arg(tensor<double>({1, 2}, {2, 1}));
    auto* e = t.arg(HostTensor(DType::F64, {2, 0}));
    auto* b = t.arg(tensor<double>({3, 4, 5, 6}, {2, 2}));
    t.op("stablehlo.concatenate", {a, e, b}, {2, 3}, DType::F64).set_attr("dimension", i64(1));
    expect_tensor<double>(t.run(), {1, 3, 4, 2, 5, 6}, {2, 3});
  }
  {
    OneOp t;
    auto* a = t.arg(HostTensor(DType::Bool, {0, 2}));
    auto* b = t.arg(tensor<bool>({true, false}, {1, 2}));
    t.op("stablehlo.concatenate", {a, b}, {1, 2}, DType::Bool).set_attr("dimension", i64(0));
    expect_tensor<bool>(t.run(), {true, false}, {1, 2});
  }
}

// ---------------------------------------------------------------------------------------------
// reverse

TEST(CpuShape, Reverse) {
  const HostTensor x = tensor<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto rev = [&](std::vector<int64_t> dims) {
    OneOp t;
    auto* a = t.arg(x);
    t.op("stablehlo.reverse", {a}, {2, 3}, DType::I32).set_attr("dimensions", i64s(dims));
    return t.run();
  };
  expect_tensor<int32_t>(rev({1}), {3, 2, 1, 6, 5, 4}, {2, 3});
  expect_tensor<int32_t>(rev({0}), {4, 5, 6, 1, 2, 3}, {2, 3});
  expect_tensor<int32_t>(rev({0, 1}), {6, 5, 4, 3, 2, 1}, {2, 3});
  expect_tensor<int32_t>(rev({}), {1, 2, 3, 4, 5, 6}, {2, 3});
  OneOp t;
  auto* a = t.arg(HostTensor(DType::BF16, {0, 2}));
  t.op("stablehlo.reverse", {a}, {0, 2}, DType::BF16).set_attr("dimensions", i64s({0, 1}));
  expect_tensor<bfloat16>(t.run(), {}, {0, 2});
}

// ---------------------------------------------------------------------------------------------
// iota

HostTensor run_iota(Shape s, DType dt, int64_t dim) {
  OneOp t;
  t.op("stablehlo.iota", {}, std::move(s), dt).set_attr("iota_dimension", i64(dim));
  return t.run();
}

TEST(CpuShape, Iota) {
  expect_tensor<float>(run_iota({2, 3}, DType::F32, 1), {0, 1, 2, 0, 1, 2}, {2, 3});
  expect_tensor<int32_t>(run_iota({2, 3}, DType::I32, 0), {0, 0, 0, 1, 1, 1}, {2, 3});
  expect_tensor<bool>(run_iota({3}, DType::Bool, 0), {false, true, true}, {3});
  expect_tensor<bfloat16>(run_iota({3}, DType::BF16, 0),
                          {bfloat16(0.0f), bfloat16(1.0f), bfloat16(2.0f)}, {3});
  expect_tensor<double>(run_iota({1, 2, 2}, DType::F64, 2), {0, 1, 0, 1}, {1, 2, 2});
  expect_tensor<uint64_t>(run_iota({0, 4}, DType::U64, 1), {}, {0, 4});
}

TEST(CpuShape, IotaWrapsAndRounds) {
  const HostTensor u = run_iota({300}, DType::U8, 0);
  EXPECT_EQ(u.data_as<uint8_t>()[255], 255);
  EXPECT_EQ(u.data_as<uint8_t>()[256], 0);
  EXPECT_EQ(u.data_as<uint8_t>()[299], 43);
  const HostTensor s = run_iota({200}, DType::I8, 0);
  EXPECT_EQ(s.data_as<int8_t>()[127], 127);
  EXPECT_EQ(s.data_as<int8_t>()[130], -126);
  // f16 has 11 significant bits: 2049 rounds to even (2048), 2051 to 2052
  const HostTensor h = run_iota({2052}, DType::F16, 0);
  EXPECT_EQ(static_cast<float>(h.data_as<float16>()[2049]), 2048.0f);
  EXPECT_EQ(static_cast<float>(h.data_as<float16>()[2051]), 2052.0f);
  EXPECT_EQ(static_cast<float>(h.data_as<float16>()[1000]), 1000.0f);
}

// ---------------------------------------------------------------------------------------------
// dynamic_slice / dynamic_update_slice

template <class I>
HostTensor run_dynamic_slice(const HostTensor& x, std::vector<I> starts,
                             std::vector<int64_t> sizes) {
  OneOp t;
  std::vector<ir::Value*> ops{t.arg(x)};
  for (I s : starts) ops.push_back(t.arg(scalar<I>(s)));
  t.op("stablehlo.dynamic_slice", ops, Shape(sizes), x.dtype())
      .set_attr("slice_sizes", i64s(sizes));
  return t.run();
}

TEST(CpuShape, DynamicSliceSpecExample) {
  // spec: starts (-1, 3) clamp to (0, 2)
  const HostTensor x = tensor<int32_t>({0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0}, {4, 4});
  expect_tensor<int32_t>(run_dynamic_slice<int64_t>(x, {-1, 3}, {2, 2}), {1, 1, 1, 1}, {2, 2});
}

TEST(CpuShape, DynamicSliceClampsEveryIndexType) {
  const HostTensor x = tensor<float>(iota_values<float>(16), {4, 4});
  expect_tensor<float>(run_dynamic_slice<int32_t>(x, {-1, 3}, {2, 2}), {2, 3, 6, 7}, {2, 2});
  expect_tensor<float>(run_dynamic_slice<int64_t>(x, {10, 1}, {2, 2}), {9, 10, 13, 14}, {2, 2});
  expect_tensor<float>(run_dynamic_slice<uint8_t>(x, {255, 0}, {1, 3}), {12, 13, 14}, {1, 3});
  expect_tensor<float>(run_dynamic_slice<uint64_t>(x, {~uint64_t{0}, 1}, {1, 1}), {13}, {1, 1});
  expect_tensor<float>(run_dynamic_slice<int8_t>(x, {-128, 2}, {3, 1}), {2, 6, 10}, {3, 1});
  expect_tensor<float>(run_dynamic_slice<int16_t>(x, {1, 1}, {2, 0}), {}, {2, 0});
  expect_tensor<float>(run_dynamic_slice<uint32_t>(x, {1, 0}, {1, 4}), {4, 5, 6, 7}, {1, 4});
}

template <class I>
HostTensor run_dus(const HostTensor& x, const HostTensor& u, std::vector<I> starts) {
  OneOp t;
  std::vector<ir::Value*> ops{t.arg(x), t.arg(u)};
  for (I s : starts) ops.push_back(t.arg(scalar<I>(s)));
  t.op("stablehlo.dynamic_update_slice", ops, x.shape(), x.dtype());
  return t.run();
}

TEST(CpuShape, DynamicUpdateSliceSpecExample) {
  const HostTensor x = tensor<int32_t>({1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {4, 4});
  const HostTensor u = tensor<int32_t>({1, 1, 1, 1}, {2, 2});
  expect_tensor<int32_t>(run_dus<int64_t>(x, u, {-1, 3}), std::vector<int32_t>(16, 1), {4, 4});
}

TEST(CpuShape, DynamicUpdateSliceClampsAndCopies) {
  const HostTensor x = tensor<int16_t>(iota_values<int16_t>(12), {3, 4});
  const HostTensor u = tensor<int16_t>({-1, -2, -3, -4}, {2, 2});
  expect_tensor<int16_t>(run_dus<int32_t>(x, u, {5, -3}),
                         {0, 1, 2, 3, -1, -2, 6, 7, -3, -4, 10, 11}, {3, 4});
  // the operand is not modified
  expect_tensor<int16_t>(x, iota_values<int16_t>(12), {3, 4});
  expect_tensor<int16_t>(run_dus<uint64_t>(x, u, {0, ~uint64_t{0}}),
                         {0, 1, -1, -2, 4, 5, -3, -4, 8, 9, 10, 11}, {3, 4});
  expect_tensor<int16_t>(run_dus<int8_t>(x, HostTensor(DType::I16, {0, 2}), {1, 1}),
                         iota_values<int16_t>(12), {3, 4});
  const HostTensor b = tensor<bool>({false, false, false}, {3});
  expect_tensor<bool>(run_dus<int32_t>(b, scalar<bool>(true).reshaped({1}), {1}),
                      {false, true, false}, {3});
}

TEST(CpuShape, GetDimensionSize) {
  OneOp t;
  auto* a = t.arg(HostTensor(DType::F32, {2, 7}));
  t.op("stablehlo.get_dimension_size", {a}, {}, DType::I32).set_attr("dimension", i64(1));
  expect_tensor<int32_t>(t.run(), {7}, {});
}

TEST(CpuShape, BadAttributesAreUnsupported) {
  OneOp t;
  auto* a = t.arg(tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3}));
  t.op("stablehlo.transpose", {a}, {3, 2}, DType::F32).set_attr("permutation", i64s({0, 0}));
  EXPECT_THROW(t.run(), UnsupportedError);
}

}  // namespace
}  // namespace cujax
