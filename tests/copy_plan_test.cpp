// The copy plans that the cuda backend runs with its strided-copy kernel (transpose,
// broadcast_in_dim, slice, concatenate, pad, dot_general's operand layout), run here on the host
// with the same index::strided_copy_elements and compared with the CPU backend: the GPU's data
// movement is checked without a GPU.
#include <gtest/gtest.h>

#include <numeric>

#include "backends/common/copy_plan.h"
#include "cpu_data_movement_util.h"
#include "cujax/lax.h"
#include "cujax/numpy.h"

namespace cujax {
namespace {

using dmtest::i64;
using dmtest::i64s;
using dmtest::OneOp;

// Distinct values, so that any misplaced element shows.
HostTensor counting(const Shape& s, int32_t from = 1) {
  std::vector<int32_t> v(static_cast<size_t>(num_elements(s)));
  std::iota(v.begin(), v.end(), from);
  return HostTensor::from_vector(v, s);
}

HostTensor run_plan(const index::StridedCopy& c, const HostTensor& in, const Shape& out_shape,
                    int32_t fill = 0) {
  HostTensor out(DType::I32, out_shape);
  std::fill(out.data_as<int32_t>(), out.data_as<int32_t>() + out.size(), fill);
  index::StridedCopy box = c;
  box.simplify();
  index::strided_copy_elements(box, in.data_as<int32_t>(), out.data_as<int32_t>(), 0,
                               box.num_elements());
  return out;
}

void expect_equal(const HostTensor& got, const HostTensor& want) {
  ASSERT_EQ(got.type_string(), want.type_string());
  dmtest::expect_tensor(got, want.to_vector<int32_t>(), want.shape());
}

TEST(CopyPlan, Transpose) {
  const Shape in{2, 3, 4, 5};
  for (const std::vector<int64_t>& perm :
       {std::vector<int64_t>{3, 1, 0, 2}, {0, 1, 2, 3}, {1, 0, 3, 2}, {3, 2, 1, 0}}) {
    Shape out;
    for (int64_t p : perm) out.push_back(in[p]);
    OneOp m;
    const HostTensor x = counting(in);
    m.op("stablehlo.transpose", {m.arg(x)}, out, DType::I32).set_attr("permutation", i64s(perm));
    expect_equal(run_plan(plan::transpose(in, perm), x, out), m.run());
  }
}

TEST(CopyPlan, BroadcastInDim) {
  struct Case {
    Shape in, out;
    std::vector<int64_t> dims;
  };
  for (const Case& c :
       {Case{{3}, {2, 3}, {1}}, Case{{3, 1}, {3, 4}, {0, 1}}, Case{{1, 4}, {2, 4, 5}, {0, 1}},
        Case{{}, {2, 2}, {}}, Case{{4, 2}, {2, 3, 4}, {2, 0}}}) {
    OneOp m;
    const HostTensor x = counting(c.in);
    m.op("stablehlo.broadcast_in_dim", {m.arg(x)}, c.out, DType::I32)
        .set_attr("broadcast_dimensions", i64s(c.dims));
    expect_equal(run_plan(plan::broadcast_in_dim(c.in, c.out, c.dims), x, c.out), m.run());
  }
}

TEST(CopyPlan, Slice) {
  const Shape in{7, 6, 5};
  const std::vector<int64_t> start{1, 0, 2}, limit{7, 6, 5}, step{2, 4, 1};
  Shape out;
  for (size_t d = 0; d < in.size(); ++d)
    out.push_back((limit[d] - start[d] + step[d] - 1) / step[d]);
  OneOp m;
  const HostTensor x = counting(in);
  ir::Operation& op = m.op("stablehlo.slice", {m.arg(x)}, out, DType::I32);
  op.set_attr("start_indices", i64s(start));
  op.set_attr("limit_indices", i64s(limit));
  op.set_attr("strides", i64s(step));
  expect_equal(run_plan(plan::slice(in, out, start, step), x, out), m.run());
}

TEST(CopyPlan, Concatenate) {
  for (int64_t dim : {0, 1, 2}) {
    std::vector<Shape> ins = {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}};
    ins[1][dim] = 1;
    ins[2][dim] = 5;
    Shape out = ins[0];
    out[dim] = ins[0][dim] + ins[1][dim] + ins[2][dim];
    OneOp m;
    std::vector<HostTensor> xs;
    std::vector<ir::Value*> args;
    for (size_t i = 0; i < ins.size(); ++i) {
      xs.push_back(counting(ins[i], 1000 * static_cast<int32_t>(i + 1)));
      args.push_back(m.arg(xs.back()));
    }
    m.op("stablehlo.concatenate", args, out, DType::I32).set_attr("dimension", i64(dim));
    const HostTensor want = m.run();
    HostTensor got(DType::I32, out);
    const auto copies = plan::concatenate(ins, out, dim);
    ASSERT_EQ(copies.size(), ins.size());
    for (size_t i = 0; i < copies.size(); ++i) {
      index::StridedCopy box = copies[i];
      box.simplify();
      index::strided_copy_elements(box, xs[i].data_as<int32_t>(), got.data_as<int32_t>(), 0,
                                   box.num_elements());
    }
    expect_equal(got, want);
  }
}

TEST(CopyPlan, PadWithNegativeEdgesAndInterior) {
  const Shape in{3, 4};
  struct Case {
    std::vector<int64_t> lo, hi, interior;
  };
  for (const Case& c : {Case{{1, 2}, {0, 1}, {0, 0}}, Case{{-1, 0}, {2, -2}, {1, 2}},
                        Case{{0, -3}, {0, 0}, {2, 0}}, Case{{-2, 0}, {-1, 0}, {0, 0}}}) {
    Shape out;
    for (size_t d = 0; d < in.size(); ++d)
      out.push_back(std::max<int64_t>(
          0, c.lo[d] + c.hi[d] + in[d] + std::max<int64_t>(in[d] - 1, 0) * c.interior[d]));
    OneOp m;
    const HostTensor x = counting(in);
    const HostTensor pv = HostTensor::from_vector<int32_t>({-7}, {});
    ir::Operation& op = m.op("stablehlo.pad", {m.arg(x), m.arg(pv)}, out, DType::I32);
    op.set_attr("edge_padding_low", i64s(c.lo));
    op.set_attr("edge_padding_high", i64s(c.hi));
    op.set_attr("interior_padding", i64s(c.interior));
    expect_equal(run_plan(plan::pad(in, out, c.lo, c.interior), x, out, -7), m.run());
  }
}

// The operand permutations and sizes, followed by a naive batched row-major product, give
// what the CPU backend's dot_general gives (small integers in f64: exact).
TEST(CopyPlan, DotGeneralLayout) {
  struct Case {
    Shape lhs, rhs, out;
    std::vector<int64_t> lb, rb, lc, rc;
    bool lhs_copy, rhs_copy;
  };
  for (const Case& c :
       {Case{{4, 5}, {5, 3}, {4, 3}, {}, {}, {1}, {0}, false, false},
        Case{{5, 4}, {3, 5}, {4, 3}, {}, {}, {0}, {1}, true, true},
        Case{{2, 4, 5}, {2, 5, 3}, {2, 4, 3}, {0}, {0}, {2}, {1}, false, false},
        Case{{4, 2, 5, 6}, {6, 3, 2, 5}, {2, 4, 3}, {1}, {2}, {2, 3}, {3, 0}, true, true}}) {
    const plan::DotPlan p = plan::dot_general(c.lhs, c.rhs, c.lb, c.rb, c.lc, c.rc);
    EXPECT_EQ(!p.lhs_perm.empty(), c.lhs_copy);
    EXPECT_EQ(!p.rhs_perm.empty(), c.rhs_copy);
    auto values = [](const Shape& s, int seed) {
      std::vector<double> v(static_cast<size_t>(num_elements(s)));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7 + seed) % 11) - 5;
      return HostTensor::from_vector(v, s);
    };
    const HostTensor a = values(c.lhs, 1), b = values(c.rhs, 3);
    OneOp m;
    auto dn = ir::Attribute::struct_attr(
        "stablehlo.dot", {{"lhs_batching_dimensions", ir::Attribute::int_list(c.lb)},
                          {"rhs_batching_dimensions", ir::Attribute::int_list(c.rb)},
                          {"lhs_contracting_dimensions", ir::Attribute::int_list(c.lc)},
                          {"rhs_contracting_dimensions", ir::Attribute::int_list(c.rc)}});
    m.op("stablehlo.dot_general", {m.arg(a), m.arg(b)}, c.out, DType::F64)
        .set_attr("dot_dimension_numbers", dn);
    const HostTensor want = m.run();

    auto permuted = [](const HostTensor& t, const std::vector<int64_t>& perm) {
      if (perm.empty()) return t.to_vector<double>();
      std::vector<double> out(static_cast<size_t>(t.size()));
      index::StridedCopy box = plan::transpose(t.shape(), perm);
      box.simplify();
      index::strided_copy_elements(box, t.data_as<double>(), out.data(), 0, box.num_elements());
      return out;
    };
    const std::vector<double> pa = permuted(a, p.lhs_perm), pb = permuted(b, p.rhs_perm);
    ASSERT_EQ(p.batch * p.m * p.n, want.size());
    const double* w = want.data_as<double>();
    for (int64_t bi = 0; bi < p.batch; ++bi)
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) {
          double acc = 0;
          for (int64_t k = 0; k < p.k; ++k)
            acc += pa[(bi * p.m + i) * p.k + k] * pb[(bi * p.k + k) * p.n + j];
          EXPECT_EQ(acc, w[(bi * p.m + i) * p.n + j])
              << "batch " << bi << " row " << i << " col " << j;
        }
  }
}

// NCCL moves flat buffers made of n rank blocks; the cuda backend's all_gather, reduce_scatter
// and all_to_all move their operands into and out of that layout with from_rank_blocks and
// to_rank_blocks. NCCL's part is simulated here on the host and the result compared with what
// the collective means: concatenation along a dimension, and blocks of one.

// The parts' elements one after another, as NCCL's all_gather leaves them.
HostTensor flat_concat(const std::vector<HostTensor>& parts) {
  std::vector<int32_t> all;
  for (const HostTensor& p : parts) {
    const auto v = p.to_vector<int32_t>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return HostTensor::from_vector(all, {static_cast<int64_t>(all.size())});
}

// A plan's copy, or the same elements in a new shape where the plan says none is needed.
HostTensor relayout(const std::optional<index::StridedCopy>& c, const HostTensor& in,
                    const Shape& out) {
  if (c) return run_plan(*c, in, out);
  return HostTensor::from_vector(in.to_vector<int32_t>(), out);
}

HostTensor block_along(const HostTensor& x, int64_t dim, int64_t n, int64_t k) {
  const int64_t c = x.shape()[dim] / n;
  return lax::slice_in_dim(numpy::array(x), k * c, (k + 1) * c, 1, dim).to_host();
}

HostTensor concat_along(const std::vector<HostTensor>& parts, int64_t dim) {
  std::vector<Array> xs;
  for (const HostTensor& p : parts) xs.push_back(numpy::array(p));
  return numpy::concatenate(xs, dim).to_host();
}

struct ShapeDim {
  Shape shape;
  int64_t dim;
};

TEST(CopyPlan, RankBlocksOfAllGather) {
  const int64_t n = 3;
  for (const ShapeDim& c : std::vector<ShapeDim>{
           {{2, 3, 4}, 0}, {{2, 3, 4}, 1}, {{2, 3, 4}, 2}, {{1, 3, 4}, 1}, {{5}, 0}}) {
    SCOPED_TRACE("dim " + std::to_string(c.dim));
    std::vector<HostTensor> parts;
    for (int64_t r = 0; r < n; ++r) parts.push_back(counting(c.shape, 1000 * (r + 1)));
    Shape out = c.shape;
    out[c.dim] *= n;
    const auto layout = plan::from_rank_blocks(c.shape, c.dim, n);
    EXPECT_EQ(layout.has_value(), c.dim > 0 && c.shape[0] > 1);
    expect_equal(relayout(layout, flat_concat(parts), out), concat_along(parts, c.dim));
  }
}

TEST(CopyPlan, RankBlocksOfReduceScatter) {
  const int64_t n = 2;
  for (const ShapeDim& c :
       std::vector<ShapeDim>{{{4, 3, 2}, 0}, {{3, 4, 2}, 1}, {{3, 2, 6}, 2}, {{1, 6}, 1}}) {
    SCOPED_TRACE("dim " + std::to_string(c.dim));
    const HostTensor x = counting(c.shape);
    const HostTensor blocks =
        relayout(plan::to_rank_blocks(c.shape, c.dim, n), x, {num_elements(c.shape)});
    const auto flat = blocks.to_vector<int32_t>();
    const size_t size = flat.size() / n;
    for (int64_t r = 0; r < n; ++r) {
      const HostTensor want = block_along(x, c.dim, n, r);
      const std::vector<int32_t> got(flat.begin() + r * size, flat.begin() + (r + 1) * size);
      expect_equal(HostTensor::from_vector(got, want.shape()), want);
    }
  }
}

TEST(CopyPlan, RankBlocksOfAllToAll) {
  const int64_t n = 4;
  const Shape shape{4, 8, 4};
  for (int64_t split = 0; split < 3; ++split)
    for (int64_t concat = 0; concat < 3; ++concat) {
      SCOPED_TRACE("split " + std::to_string(split) + ", concat " + std::to_string(concat));
      std::vector<HostTensor> xs, sent;
      for (int64_t j = 0; j < n; ++j) {
        xs.push_back(counting(shape, 1000 * (j + 1)));
        sent.push_back(
            relayout(plan::to_rank_blocks(shape, split, n), xs.back(), {num_elements(shape)}));
      }
      Shape block = shape;
      block[split] /= n;
      Shape out = block;
      out[concat] *= n;
      const size_t size = static_cast<size_t>(num_elements(block));
      for (int64_t r = 0; r < n; ++r) {  // rank r receives block r of every member, in order
        std::vector<int32_t> received;
        std::vector<HostTensor> want_parts;
        for (int64_t j = 0; j < n; ++j) {
          const auto v = sent[j].to_vector<int32_t>();
          received.insert(received.end(), v.begin() + r * size, v.begin() + (r + 1) * size);
          want_parts.push_back(block_along(xs[j], split, n, r));
        }
        const HostTensor got = relayout(
            plan::from_rank_blocks(block, concat, n),
            HostTensor::from_vector(received, {static_cast<int64_t>(received.size())}), out);
        expect_equal(got, concat_along(want_parts, concat));
      }
    }
}

}  // namespace
}  // namespace cujax
