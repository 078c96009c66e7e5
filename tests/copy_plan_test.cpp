// The copy plans that the cuda backend runs with its strided-copy kernel (transpose,
// broadcast_in_dim, slice, concatenate, pad, dot_general's operand layout), run here on the host
// with the same index::strided_copy_elements and compared with the CPU backend: the GPU's data
// movement is checked without a GPU.
#include <gtest/gtest.h>

#include <numeric>

#include "backends/common/copy_plan.h"
#include "cpu_data_movement_util.h"

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

}  // namespace
}  // namespace cujax
