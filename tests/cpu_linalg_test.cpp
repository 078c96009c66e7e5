// CPU backend: dot_general, dot, convolution and triangular_solve, checked against naive loops
// written here from the StableHLO specification and against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cujax/core/dtype.h"
#include "cujax/core/error.h"
#include "cujax/core/half.h"
#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

using ir::Attribute;
using ir::AttrRef;

// Runs `main(inputs...) = op(inputs...)` on the cpu backend.
HostTensor run_op(const std::string& name, const std::vector<HostTensor>& inputs,
                  const ir::Type& result, const std::vector<ir::NamedAttribute>& attrs) {
  ir::Module m;
  auto& f = m.add_function("main");
  std::vector<ir::Value*> args;
  for (const auto& t : inputs)
    args.push_back(f.entry().add_argument(ir::Type::tensor(t.shape(), t.dtype())));
  auto op = ir::make_op(name, args, {result});
  for (const auto& a : attrs) op->set_attr(a.name, a.value);
  ir::Value* r = f.entry().push_back(std::move(op))->result(0);
  f.entry().push_back(ir::make_op("func.return", {r}, {}));
  f.result_types = {result};
  auto exe = runtime::get_backend("cpu").compile(m);
  return exe->execute_on_host(inputs).at(0);
}

// Row-major multi-index helpers.
std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

// Element i of a tensor as a double (exact for every dtype here except huge 64-bit ints).
double get(const HostTensor& t, int64_t i) {
  return visit_dtype(t.dtype(), [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
      return static_cast<float>(t.data_as<T>()[i]);
    else
      return static_cast<double>(t.data_as<T>()[i]);
  });
}

// A tensor of `dtype` with values drawn by `gen` (rounded to the dtype).
HostTensor random_tensor(DType dtype, const Shape& shape, std::mt19937& rng,
                         const std::function<double(std::mt19937&)>& gen) {
  HostTensor t(dtype, shape);
  for (int64_t i = 0; i < t.size(); ++i) {
    const double v = gen(rng);
    visit_dtype(dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>)
        t.data_as<bool>()[i] = v != 0;
      else if constexpr (std::is_integral_v<T>)
        t.data_as<T>()[i] = static_cast<T>(static_cast<int64_t>(v));
      else if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
        t.data_as<T>()[i] = T(v);
      else
        t.data_as<T>()[i] = static_cast<T>(v);
    });
  }
  return t;
}

double round_to(DType dt, double v) {
  if (dt == DType::F16) return static_cast<float>(float16(v));
  if (dt == DType::BF16) return static_cast<float>(bfloat16(v));
  return v;
}

auto small_ints = [](std::mt19937& r) {
  return static_cast<double>(std::uniform_int_distribution<int>(-4, 4)(r));
};
auto uniform = [](std::mt19937& r) { return std::uniform_real_distribution<double>(-1, 1)(r); };

// ------------------------------------------------------------------ dot_general

AttrRef dot_dims(const std::vector<int64_t>& lb, const std::vector<int64_t>& rb,
                 const std::vector<int64_t>& lc, const std::vector<int64_t>& rc) {
  std::vector<ir::NamedAttribute> f;
  if (!lb.empty()) f.push_back({"lhs_batching_dimensions", Attribute::int_list(lb)});
  if (!rb.empty()) f.push_back({"rhs_batching_dimensions", Attribute::int_list(rb)});
  f.push_back({"lhs_contracting_dimensions", Attribute::int_list(lc)});
  f.push_back({"rhs_contracting_dimensions", Attribute::int_list(rc)});
  return Attribute::struct_attr("stablehlo.dot", f);
}

struct DotCase {
  Shape lhs, rhs;
  std::vector<int64_t> lb, rb, lc, rc;
};

// Naive dot_general in double: result dims are batch, lhs free, rhs free.
Shape dot_result_shape(const DotCase& c) {
  Shape out;
  for (int64_t d : c.lb) out.push_back(c.lhs[d]);
  for (int64_t d = 0; d < static_cast<int64_t>(c.lhs.size()); ++d)
    if (std::count(c.lb.begin(), c.lb.end(), d) + std::count(c.lc.begin(), c.lc.end(), d) == 0)
      out.push_back(c.lhs[d]);
  for (int64_t d = 0; d < static_cast<int64_t>(c.rhs.size()); ++d)
    if (std::count(c.rb.begin(), c.rb.end(), d) + std::count(c.rc.begin(), c.rc.end(), d) == 0)
      out.push_back(c.rhs[d]);
  return out;
}

// Calls f(result_index, lhs_index, rhs_index) for every term of the sum.
void for_each_dot_term(const DotCase& c, const std::function<void(int64_t, int64_t, int64_t)>& f) {
  const Shape out = dot_result_shape(c);
  std::vector<int64_t> lf, rf;
  for (int64_t d = 0; d < static_cast<int64_t>(c.lhs.size()); ++d)
    if (std::count(c.lb.begin(), c.lb.end(), d) + std::count(c.lc.begin(), c.lc.end(), d) == 0)
      lf.push_back(d);
  for (int64_t d = 0; d < static_cast<int64_t>(c.rhs.size()); ++d)
    if (std::count(c.rb.begin(), c.rb.end(), d) + std::count(c.rc.begin(), c.rc.end(), d) == 0)
      rf.push_back(d);
  Shape kshape;
  for (int64_t d : c.lc) kshape.push_back(c.lhs[d]);
  const int64_t nk = num_elements(kshape);
  for (int64_t o = 0; o < num_elements(out); ++o) {
    const auto oi = unravel(o, out);
    std::vector<int64_t> li(c.lhs.size()), ri(c.rhs.size());
    size_t pos = 0;
    for (size_t i = 0; i < c.lb.size(); ++i, ++pos) {
      li[c.lb[i]] = oi[pos];
      ri[c.rb[i]] = oi[pos];
    }
    for (int64_t d : lf) li[d] = oi[pos++];
    for (int64_t d : rf) ri[d] = oi[pos++];
    for (int64_t k = 0; k < nk; ++k) {
      const auto ki = unravel(k, kshape);
      for (size_t i = 0; i < c.lc.size(); ++i) {
        li[c.lc[i]] = ki[i];
        ri[c.rc[i]] = ki[i];
      }
      f(o, ravel(li, c.lhs), ravel(ri, c.rhs));
    }
  }
}

std::vector<double> naive_dot(const DotCase& c, const HostTensor& l, const HostTensor& r) {
  std::vector<double> out(num_elements(dot_result_shape(c)), 0.0);
  for_each_dot_term(c, [&](int64_t o, int64_t a, int64_t b) { out[o] += get(l, a) * get(r, b); });
  return out;
}

HostTensor run_dot(const DotCase& c, const HostTensor& l, const HostTensor& r, DType out) {
  return run_op("stablehlo.dot_general", {l, r}, ir::Type::tensor(dot_result_shape(c), out),
                {{"dot_dimension_numbers", dot_dims(c.lb, c.rb, c.lc, c.rc)}});
}

TEST(CpuDotGeneral, HandComputedMatmul) {
  auto l = HostTensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto r = HostTensor::from_vector<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  auto out = run_dot({{2, 3}, {3, 2}, {}, {}, {1}, {0}}, l, r, DType::F32);
  EXPECT_EQ(out.shape(), (Shape{2, 2}));
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
}

TEST(CpuDotGeneral, HandComputedNegativeAndVector) {
  // [-1 2] . [3 -4] = -11; outer dims absent: rank 0 result.
  auto l = HostTensor::from_vector<double>({-1, 2}, {2});
  auto r = HostTensor::from_vector<double>({3, -4}, {2});
  auto out = run_dot({{2}, {2}, {}, {}, {0}, {0}}, l, r, DType::F64);
  EXPECT_EQ(out.shape(), Shape{});
  EXPECT_EQ(out.to_vector<double>(), std::vector<double>{-11});
}

// Layouts: every case is checked exactly with small integers in f32 and f64, and with random
// reals against the double result.
const std::vector<DotCase> kDotCases = {
    {{4, 3}, {3, 5}, {}, {}, {1}, {0}},                      // plain
    {{3, 4}, {3, 5}, {}, {}, {0}, {0}},                      // lhs transposed
    {{4, 3}, {5, 3}, {}, {}, {1}, {1}},                      // rhs transposed
    {{3, 4}, {5, 3}, {}, {}, {0}, {1}},                      // both transposed
    {{2, 4, 3}, {2, 3, 5}, {0}, {0}, {2}, {1}},              // batched
    {{4, 2, 3}, {3, 5, 2}, {1}, {2}, {2}, {0}},              // batch dims not leading
    {{2, 3, 4, 5}, {4, 2, 3, 6}, {}, {}, {1, 2}, {2, 0}},    // two contracting dims, permuted
    {{3, 2, 4}, {4, 3, 2}, {}, {}, {0, 2}, {1, 0}},          // contracting dims around a free dim
    {{2, 3, 7, 5}, {3, 2, 5, 6}, {1, 0}, {0, 1}, {3}, {2}},  // two batch dims, swapped
    {{6}, {6, 4}, {}, {}, {0}, {0}},                         // vector-matrix
    {{4, 6}, {6}, {}, {}, {1}, {0}},                         // matrix-vector
    {{3, 1, 4}, {4, 1, 2}, {}, {}, {2}, {0}},                // unit dims
    {{2, 3}, {4, 5}, {}, {}, {}, {}},                        // outer product
    {{64, 3, 4}, {64, 4, 2}, {0}, {0}, {2}, {1}},            // many small products
    {{2, 40, 70}, {2, 70, 50}, {0}, {0}, {2}, {1}},          // products for BLAS
};

TEST(CpuDotGeneral, LayoutsExactWithSmallIntegers) {
  std::mt19937 rng(1);
  for (DType dt : {DType::F32, DType::F64, DType::I32, DType::F16, DType::BF16}) {
    for (const auto& c : kDotCases) {
      auto l = random_tensor(dt, c.lhs, rng, small_ints);
      auto r = random_tensor(dt, c.rhs, rng, small_ints);
      const auto want = naive_dot(c, l, r);
      auto got = run_dot(c, l, r, dt);
      ASSERT_EQ(got.shape(), dot_result_shape(c));
      ASSERT_EQ(got.dtype(), dt);
      // The exact sum (in f32, exact here) rounded once to the 16-bit types.
      for (int64_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(get(got, i), round_to(dt, want[i]))
            << mlir_name(dt) << " case lhs " << shape_to_string(c.lhs) << " rhs "
            << shape_to_string(c.rhs) << " at " << i;
    }
  }
}

TEST(CpuDotGeneral, RandomRealsAgainstDouble) {
  std::mt19937 rng(2);
  for (const auto& c : kDotCases) {
    for (DType dt : {DType::F32, DType::F64}) {
      auto l = random_tensor(dt, c.lhs, rng, uniform);
      auto r = random_tensor(dt, c.rhs, rng, uniform);
      const auto want = naive_dot(c, l, r);
      auto got = run_dot(c, l, r, dt);
      std::vector<double> mag(want.size(), 0.0);
      for_each_dot_term(
          c, [&](int64_t o, int64_t a, int64_t b) { mag[o] += std::abs(get(l, a) * get(r, b)); });
      const double eps = dt == DType::F32 ? 1e-6 : 1e-14;
      for (int64_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(get(got, i), want[i], eps * (mag[i] + 1e-30) * 4) << i;
    }
  }
}

TEST(CpuDotGeneral, HalfPrecisionAccumulatesInFloatAndRoundsOnce) {
  // 2048 + 1 + 1 in f16 step by step would stay 2048 (1 is half an ulp, ties to even); in f32
  // the sum is 2050, which f16 represents.
  auto l = HostTensor::from_vector<float16>({float16(2048.0), float16(1.0), float16(1.0)}, {1, 3});
  auto r = HostTensor::from_vector<float16>({float16(1.0), float16(1.0), float16(1.0)}, {3, 1});
  auto out = run_dot({{1, 3}, {3, 1}, {}, {}, {1}, {0}}, l, r, DType::F16);
  EXPECT_EQ(static_cast<float>(out.data_as<float16>()[0]), 2050.0f);
  // bf16: 256 + 1 + 1 -> 258 exactly representable in bf16 (8 significant bits).
  auto lb =
      HostTensor::from_vector<bfloat16>({bfloat16(256.0), bfloat16(1.0), bfloat16(1.0)}, {1, 3});
  auto rb =
      HostTensor::from_vector<bfloat16>({bfloat16(1.0), bfloat16(1.0), bfloat16(1.0)}, {3, 1});
  auto outb = run_dot({{1, 3}, {3, 1}, {}, {}, {1}, {0}}, lb, rb, DType::BF16);
  EXPECT_EQ(static_cast<float>(outb.data_as<bfloat16>()[0]), 258.0f);
}

TEST(CpuDotGeneral, ResultTypeDiffersFromOperands) {
  std::mt19937 rng(3);
  const DotCase c = {{3, 5}, {5, 4}, {}, {}, {1}, {0}};
  struct Conv {
    DType in, out;
  };
  for (Conv cv :
       {Conv{DType::BF16, DType::F32}, Conv{DType::F16, DType::F32}, Conv{DType::I8, DType::I32},
        Conv{DType::I16, DType::F32}, Conv{DType::U8, DType::F64}, Conv{DType::F32, DType::F64},
        Conv{DType::I8, DType::F16}}) {
    auto l = random_tensor(cv.in, c.lhs, rng, [](std::mt19937& r) {
      return static_cast<double>(std::uniform_int_distribution<int>(0, 100)(r));
    });
    auto r = random_tensor(cv.in, c.rhs, rng, [](std::mt19937& r) {
      return static_cast<double>(std::uniform_int_distribution<int>(-100, 100)(r));
    });
    const auto want = naive_dot(c, l, r);
    auto got = run_dot(c, l, r, cv.out);
    ASSERT_EQ(got.dtype(), cv.out);
    for (int64_t i = 0; i < got.size(); ++i) {
      double w = want[i];
      w = round_to(cv.out, w);
      ASSERT_EQ(get(got, i), w) << mlir_name(cv.in) << "->" << mlir_name(cv.out) << " at " << i;
    }
  }
}

TEST(CpuDotGeneral, IntegerOverflowWraps) {
  std::mt19937 rng(4);
  const DotCase c = {{2, 3, 7}, {2, 7, 4}, {0}, {0}, {2}, {1}};
  auto wide = [](std::mt19937& r) {
    return static_cast<double>(std::uniform_int_distribution<int>(-128, 127)(r));
  };
  // Exact products in int64, then truncation to the result width.
  auto expect_wrapped = [&](DType dt, const HostTensor& l, const HostTensor& r, auto tag) {
    using T = decltype(tag);
    auto got = run_dot(c, l, r, dt);
    std::vector<uint64_t> sum(got.size(), 0);
    for_each_dot_term(c, [&](int64_t o, int64_t a, int64_t b) {
      sum[o] += static_cast<uint64_t>(l.data_as<T>()[a]) * static_cast<uint64_t>(r.data_as<T>()[b]);
    });
    for (int64_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got.data_as<T>()[i], static_cast<T>(sum[i])) << mlir_name(dt) << " at " << i;
  };
  {
    auto l = random_tensor(DType::I8, c.lhs, rng, wide),
         r = random_tensor(DType::I8, c.rhs, rng, wide);
    expect_wrapped(DType::I8, l, r, int8_t{});
  }
  {
    auto l = random_tensor(DType::U8, c.lhs, rng, [](std::mt19937& r) {
      return static_cast<double>(std::uniform_int_distribution<int>(0, 255)(r));
    });
    auto r = random_tensor(DType::U8, c.rhs, rng, [](std::mt19937& r) {
      return static_cast<double>(std::uniform_int_distribution<int>(0, 255)(r));
    });
    expect_wrapped(DType::U8, l, r, uint8_t{});
  }
  {
    auto big = [](std::mt19937& r) {
      return static_cast<double>(std::uniform_int_distribution<int>(-60000, 60000)(r));
    };
    auto l = random_tensor(DType::I16, c.lhs, rng, big),
         r = random_tensor(DType::I16, c.rhs, rng, big);
    expect_wrapped(DType::I16, l, r, int16_t{});
  }
  {
    // int32: 2^31 - 1 squared wraps to 1; (2^31-1)*(2^31-1) + (2^31-1)*1 = ... checked exactly.
    auto l = HostTensor::from_vector<int32_t>({2147483647, 2147483647}, {1, 2});
    auto r = HostTensor::from_vector<int32_t>({2147483647, 1}, {2, 1});
    auto got = run_dot({{1, 2}, {2, 1}, {}, {}, {1}, {0}}, l, r, DType::I32);
    // (2^31-1)^2 = 2^62 - 2^32 + 1 -> low 32 bits 1; plus 2^31-1 -> 2^31 -> INT32_MIN.
    EXPECT_EQ(got.data_as<int32_t>()[0], INT32_MIN);
  }
  {
    auto l = HostTensor::from_vector<uint64_t>({UINT64_MAX, 3}, {1, 2});
    auto r = HostTensor::from_vector<uint64_t>({2, UINT64_MAX}, {2, 1});
    auto got = run_dot({{1, 2}, {2, 1}, {}, {}, {1}, {0}}, l, r, DType::U64);
    // (2^64-1)*2 + 3*(2^64-1) = 5*(2^64-1) = -5 mod 2^64.
    EXPECT_EQ(got.data_as<uint64_t>()[0], UINT64_MAX - 4);
  }
  {
    auto l = HostTensor::from_vector<int64_t>({INT64_MIN, -1}, {1, 2});
    auto r = HostTensor::from_vector<int64_t>({-1, INT64_MIN}, {2, 1});
    auto got = run_dot({{1, 2}, {2, 1}, {}, {}, {1}, {0}}, l, r, DType::I64);
    // INT64_MIN * -1 wraps to INT64_MIN; twice gives 0.
    EXPECT_EQ(got.data_as<int64_t>()[0], 0);
  }
}

TEST(CpuDotGeneral, BooleansAreOrOfAnds) {
  auto l = HostTensor::from_vector<bool>({true, false, false, false, true, true}, {2, 3});
  auto r = HostTensor::from_vector<bool>({false, true, true, true, false, false}, {3, 2});
  auto out = run_dot({{2, 3}, {3, 2}, {}, {}, {1}, {0}}, l, r, DType::Bool);
  // r = [[0,1],[1,1],[0,0]]. row0 = [1,0,0] picks r[0] = [0,1]; row1 = [0,1,1] gives
  // r[1] | r[2] = [1,1].
  EXPECT_EQ(out.to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
  // A column of all-false products stays false.
  auto z =
      run_dot({{2, 3}, {3, 2}, {}, {}, {1}, {0}}, l, HostTensor(DType::Bool, {3, 2}), DType::Bool);
  EXPECT_EQ(z.to_vector<bool>(), std::vector<bool>(4, false));
}

TEST(CpuDotGeneral, EmptyDimensions) {
  // Zero-size contraction gives zeros.
  auto l = HostTensor(DType::F32, {3, 0});
  auto r = HostTensor(DType::F32, {0, 2});
  auto out = run_dot({{3, 0}, {0, 2}, {}, {}, {1}, {0}}, l, r, DType::F32);
  EXPECT_EQ(out.shape(), (Shape{3, 2}));
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(6, 0.0f));
  auto li = HostTensor(DType::I32, {2, 0, 3});
  auto ri = HostTensor(DType::I32, {2, 3, 4});
  auto oi = run_dot({{2, 0, 3}, {2, 3, 4}, {0}, {0}, {2}, {1}}, li, ri, DType::I32);
  EXPECT_EQ(oi.shape(), (Shape{2, 0, 4}));
  EXPECT_EQ(oi.size(), 0);
}

TEST(CpuDotGeneral, NanAndInfPropagate) {
  const float inf = std::numeric_limits<float>::infinity();
  auto l = HostTensor::from_vector<float>({inf, 1, std::nanf(""), 1}, {2, 2});
  auto r = HostTensor::from_vector<float>({1, 0, 1, 1}, {2, 2});
  auto out = run_dot({{2, 2}, {2, 2}, {}, {}, {1}, {0}}, l, r, DType::F32).to_vector<float>();
  EXPECT_EQ(out[0], inf);           // inf*1 + 1*1
  EXPECT_TRUE(std::isnan(out[1]));  // inf*0 + 1*1
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_TRUE(std::isnan(out[3]));
}

TEST(CpuDotGeneral, LargeF32MatchesDouble) {
  std::mt19937 rng(5);
  const DotCase c = {{130, 257}, {190, 257}, {}, {}, {1}, {1}};
  auto l = random_tensor(DType::F32, c.lhs, rng, uniform);
  auto r = random_tensor(DType::F32, c.rhs, rng, uniform);
  const auto want = naive_dot(c, l, r);
  auto got = run_dot(c, l, r, DType::F32);
  for (int64_t i = 0; i < got.size(); ++i) ASSERT_NEAR(get(got, i), want[i], 2e-4) << i;
}

// The shapes of a training step's large products, each split over threads its own way: a
// weight gradient (few rows, contracting the leading dimensions: blocks of columns), a product
// with more rows than columns (blocks of rows), and attention's batches of products read in
// the (batch, seq, heads, head_dim) layout (whole products per thread).
TEST(CpuDotGeneral, TrainingStepShapesMatchDouble) {
  std::mt19937 rng(6);
  const std::vector<DotCase> cases = {
      {{8, 64, 24}, {8, 64, 96}, {}, {}, {0, 1}, {0, 1}},
      {{300, 72}, {72, 40}, {}, {}, {1}, {0}},
      {{2, 40, 4, 16}, {2, 48, 4, 16}, {0, 2}, {0, 2}, {3}, {3}},
      {{2, 4, 80, 96}, {2, 96, 4, 40}, {0, 1}, {0, 2}, {3}, {1}},
  };
  for (const DotCase& c : cases) {
    auto l = random_tensor(DType::F32, c.lhs, rng, uniform);
    auto r = random_tensor(DType::F32, c.rhs, rng, uniform);
    const auto want = naive_dot(c, l, r);
    auto got = run_dot(c, l, r, DType::F32);
    ASSERT_EQ(got.shape(), dot_result_shape(c));
    for (int64_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(get(got, i), want[i], 1e-4 * (1 + std::abs(want[i]))) << i;
  }
}

TEST(CpuDot, LegacyDotMatrixVector) {
  auto l = HostTensor::from_vector<int32_t>({1, -2, 3, 4, 5, -6}, {2, 3});
  auto r = HostTensor::from_vector<int32_t>({1, 2, 3}, {3});
  auto out = run_op("stablehlo.dot", {l, r}, ir::Type::tensor({2}, DType::I32), {});
  EXPECT_EQ(out.to_vector<int32_t>(), (std::vector<int32_t>{6, -4}));
}

TEST(CpuDotGeneral, RejectsMismatchedResultShape) {
  auto l = HostTensor(DType::F32, {2, 3});
  auto r = HostTensor(DType::F32, {3, 4});
  EXPECT_THROW(run_op("stablehlo.dot_general", {l, r}, ir::Type::tensor({2, 5}, DType::F32),
                      {{"dot_dimension_numbers", dot_dims({}, {}, {1}, {0})}}),
               UnsupportedError);
}

// ------------------------------------------------------------------ convolution

struct ConvCase {
  Shape lhs, rhs;
  // Dimension numbers.
  int64_t ib, ifd;
  std::vector<int64_t> is;
  int64_t kid, kod;
  std::vector<int64_t> ks;
  int64_t ob, ofd;
  std::vector<int64_t> os;
  std::vector<int64_t> stride = {}, pad = {}, ldil = {}, rdil = {};  // empty = default
  std::vector<bool> rev = {};
  int64_t fgc = 1, bgc = 1;
};

int64_t nsp(const ConvCase& c) {
  return static_cast<int64_t>(c.lhs.size()) - 2;
}
std::vector<int64_t> or_default(const std::vector<int64_t>& v, size_t n, int64_t d) {
  return v.empty() ? std::vector<int64_t>(n, d) : v;
}

// Per the spec: padded/dilated input, windows sliced with rhs dilation, optionally reversed,
// dot product with the kernel; groups split and concatenated. Returns shape and values.
// Only every `every`-th output element is computed (the rest are NaN).
std::pair<Shape, std::vector<double>> naive_conv(const ConvCase& c, const HostTensor& lhs,
                                                 const HostTensor& rhs, int64_t every = 1) {
  const int64_t d = nsp(c);
  const auto stride = or_default(c.stride, d, 1), pad = or_default(c.pad, 2 * d, 0);
  const auto ldil = or_default(c.ldil, d, 1), rdil = or_default(c.rdil, d, 1);
  std::vector<bool> rev = c.rev.empty() ? std::vector<bool>(d, false) : c.rev;
  const int64_t N = c.lhs[c.ib], C = c.lhs[c.ifd], O = c.rhs[c.kod];
  // Padded input: dims [N][padded spatial...][C] built by placing each element.
  Shape padded;
  for (int64_t i = 0; i < d; ++i) {
    const int64_t s = c.lhs[c.is[i]];
    padded.push_back(pad[2 * i] + (s == 0 ? 0 : (s - 1) * ldil[i] + 1) + pad[2 * i + 1]);
  }
  Shape pshape = {N};
  pshape.insert(pshape.end(), padded.begin(), padded.end());
  pshape.push_back(C);
  for (int64_t v : pshape) {
    if (v < 0) return {{}, {}};
  }
  std::vector<double> P(num_elements(pshape), 0.0);
  for (int64_t e = 0; e < lhs.size(); ++e) {
    const auto li = unravel(e, c.lhs);
    std::vector<int64_t> pi = {li[c.ib]};
    bool inside = true;
    for (int64_t i = 0; i < d; ++i) {
      const int64_t q = pad[2 * i] + li[c.is[i]] * ldil[i];
      if (q < 0 || q >= padded[i]) inside = false;
      pi.push_back(q);
    }
    pi.push_back(li[c.ifd]);
    if (inside) P[ravel(pi, pshape)] = get(lhs, e);
  }
  Shape osp;
  for (int64_t i = 0; i < d; ++i) {
    const int64_t k = c.rhs[c.ks[i]];
    const int64_t win = k == 0 ? 0 : (k - 1) * rdil[i] + 1;
    osp.push_back((padded[i] == 0 || win > padded[i]) ? 0 : (padded[i] - win) / stride[i] + 1);
  }
  Shape out(c.lhs.size());
  const int64_t Nout = N / c.bgc;
  out[c.ob] = Nout;
  out[c.ofd] = O;
  for (int64_t i = 0; i < d; ++i) out[c.os[i]] = osp[i];
  std::vector<double> res(num_elements(out), std::nan(""));
  const int64_t G = c.fgc * c.bgc, Og = O / G, Cg = C / c.fgc;
  Shape kwin;
  for (int64_t i = 0; i < d; ++i) kwin.push_back(c.rhs[c.ks[i]]);
  for (int64_t e = 0; e < static_cast<int64_t>(res.size()); e += every) {
    const auto oi = unravel(e, out);
    const int64_t o = oi[c.ofd], g = o / Og;
    const int64_t n = c.bgc > 1 ? g * Nout + oi[c.ob] : oi[c.ob];
    double acc = 0;
    for (int64_t kw = 0; kw < num_elements(kwin); ++kw) {
      const auto ki = unravel(kw, kwin);
      // Window element ki of the (reversed) lhs window pairs with rhs element ki.
      std::vector<int64_t> pi = {n};
      for (int64_t i = 0; i < d; ++i) {
        const int64_t kk = rev[i] ? kwin[i] - 1 - ki[i] : ki[i];
        pi.push_back(oi[c.os[i]] * stride[i] + kk * rdil[i]);
      }
      pi.push_back(0);
      for (int64_t ci = 0; ci < Cg; ++ci) {
        pi.back() = (c.fgc > 1 ? g * Cg : 0) + ci;
        std::vector<int64_t> ri(c.rhs.size());
        for (int64_t i = 0; i < d; ++i) ri[c.ks[i]] = ki[i];
        ri[c.kid] = ci;
        ri[c.kod] = o;
        acc += P[ravel(pi, pshape)] * get(rhs, ravel(ri, c.rhs));
      }
    }
    res[e] = acc;
  }
  return {out, res};
}

AttrRef conv_dims(const ConvCase& c) {
  auto i = [](int64_t v) { return Attribute::integer_attr(v, std::nullopt); };
  return Attribute::struct_attr("stablehlo.conv",
                                {{"input_batch_dimension", i(c.ib)},
                                 {"input_feature_dimension", i(c.ifd)},
                                 {"input_spatial_dimensions", Attribute::int_list(c.is)},
                                 {"kernel_input_feature_dimension", i(c.kid)},
                                 {"kernel_output_feature_dimension", i(c.kod)},
                                 {"kernel_spatial_dimensions", Attribute::int_list(c.ks)},
                                 {"output_batch_dimension", i(c.ob)},
                                 {"output_feature_dimension", i(c.ofd)},
                                 {"output_spatial_dimensions", Attribute::int_list(c.os)}});
}

HostTensor run_conv(const ConvCase& c, const HostTensor& l, const HostTensor& r, const Shape& out,
                    DType dt) {
  std::vector<ir::NamedAttribute> attrs = {
      {"dimension_numbers", conv_dims(c)},
      {"feature_group_count", Attribute::integer_attr(c.fgc, DType::I64)},
      {"batch_group_count", Attribute::integer_attr(c.bgc, DType::I64)}};
  const size_t d = nsp(c);
  if (!c.stride.empty()) attrs.push_back({"window_strides", Attribute::dense_array(c.stride)});
  if (!c.pad.empty()) {
    HostTensor p = HostTensor::from_vector<int64_t>(c.pad, {static_cast<int64_t>(d), 2});
    attrs.push_back({"padding", Attribute::dense_elements(p)});
  }
  if (!c.ldil.empty()) attrs.push_back({"lhs_dilation", Attribute::dense_array(c.ldil)});
  if (!c.rdil.empty()) attrs.push_back({"rhs_dilation", Attribute::dense_array(c.rdil)});
  if (!c.rev.empty()) {
    std::vector<int64_t> r(c.rev.begin(), c.rev.end());
    attrs.push_back({"window_reversal", Attribute::dense_array(r, DType::Bool)});
  }
  return run_op("stablehlo.convolution", {l, r}, ir::Type::tensor(out, dt), attrs);
}

TEST(CpuConvolution, SpecExample) {
  // The spec's example: 1x4x4x1 input, 3x3 ones kernel, stride 4, lhs dilation 2.
  std::vector<int64_t> in = {1, 2, 5, 6, 3, 4, 7, 8, 10, 11, 14, 15, 12, 13, 16, 17};
  auto l = HostTensor::from_vector<int64_t>(in, {1, 4, 4, 1});
  auto r = HostTensor::from_vector<int64_t>(std::vector<int64_t>(9, 1), {3, 3, 1, 1});
  ConvCase c{{1, 4, 4, 1}, {3, 3, 1, 1}, 0,      3,      {1, 2},        2, 3, {0, 1}, 0, 3, {1, 2},
             {4, 4},       {0, 0, 0, 0}, {2, 2}, {1, 1}, {false, false}};
  auto out = run_conv(c, l, r, {1, 2, 2, 1}, DType::I64);
  EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{10, 26, 46, 62}));
}

TEST(CpuConvolution, HandComputed1D) {
  // Input [1, 2, 3, 4], kernel [1, -1], pad 1 each side: windows [0,1],[1,2],[2,3],[3,4],[4,0].
  auto l = HostTensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 4});
  auto r = HostTensor::from_vector<float>({1, -1}, {1, 1, 2});
  ConvCase c{{1, 1, 4}, {1, 1, 2}, 0, 1, {2}, 1, 0, {2}, 0, 1, {2}, {}, {1, 1}};
  auto out = run_conv(c, l, r, {1, 1, 5}, DType::F32);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{-1, -1, -1, -1, 4}));
  // Reversed window: kernel acts as [-1, 1].
  c.rev = {true};
  out = run_conv(c, l, r, {1, 1, 5}, DType::F32);
  EXPECT_EQ(out.to_vector<float>(), (std::vector<float>{1, 1, 1, 1, -4}));
}

const std::vector<ConvCase> kConvCases = {
    // NCHW x OIHW -> NCHW, stride and padding.
    {{2, 3, 7, 6}, {4, 3, 3, 2}, 0, 1, {2, 3}, 1, 0, {2, 3}, 0, 1, {2, 3}, {2, 1}, {1, 2, 0, 1}},
    // NHWC x HWIO -> NHWC with lhs and rhs dilation.
    {{1, 5, 6, 2},
     {2, 3, 2, 3},
     0,
     3,
     {1, 2},
     2,
     3,
     {0, 1},
     0,
     3,
     {1, 2},
     {1, 2},
     {},
     {2, 1},
     {1, 2}},
    // Negative padding and reversal.
    {{2, 8, 3}, {3, 3, 2}, 0, 2, {1}, 1, 2, {0}, 0, 2, {1}, {}, {-1, 2}, {}, {}, {true}},
    // Depthwise: feature groups equal to input features.
    {{2, 3, 6, 6},
     {6, 1, 3, 3},
     0,
     1,
     {2, 3},
     1,
     0,
     {2, 3},
     0,
     1,
     {2, 3},
     {},
     {1, 1, 1, 1},
     {},
     {},
     {},
     3},
    // Two feature groups of two features.
    {{1, 4, 5}, {2, 4, 3}, 0, 1, {2}, 0, 1, {2}, 0, 1, {2}, {}, {}, {}, {}, {}, 2},
    // Batch groups (as in a weight gradient).
    {{4, 2, 5}, {3, 2, 6}, 0, 1, {2}, 1, 2, {0}, 0, 1, {2}, {}, {}, {}, {}, {}, 1, 2},
    // 3 spatial dims, output layout permuted.
    {{1, 2, 4, 3, 5},
     {2, 2, 2, 2, 3},
     0,
     1,
     {2, 3, 4},
     3,
     4,
     {0, 1, 2},
     4,
     0,
     {1, 2, 3},
     {1, 1, 2}},
    // 1x1 pointwise (uses the input directly), with and without groups.
    {{2, 4, 3, 3}, {6, 4, 1, 1}, 0, 1, {2, 3}, 1, 0, {2, 3}, 0, 1, {2, 3}},
    {{2, 3, 3, 4}, {1, 1, 2, 6}, 0, 3, {1, 2}, 2, 3, {0, 1}, 0, 3, {1, 2}, {}, {}, {}, {}, {}, 2},
    {{4, 3, 3, 2},
     {1, 1, 2, 6},
     0,
     3,
     {1, 2},
     2,
     3,
     {0, 1},
     0,
     3,
     {1, 2},
     {},
     {},
     {},
     {},
     {},
     1,
     2},
    // No spatial dims: a matmul.
    {{3, 4}, {4, 5}, 0, 1, {}, 0, 1, {}, 0, 1, {}},
    // Window larger than the input: empty output dimension.
    {{1, 1, 3}, {1, 1, 5}, 0, 1, {2}, 1, 0, {2}, 0, 1, {2}},
};

TEST(CpuConvolution, MatchesNaiveLoops) {
  std::mt19937 rng(7);
  for (DType dt : {DType::F32, DType::F64, DType::I32, DType::F16, DType::I8}) {
    for (size_t ci = 0; ci < kConvCases.size(); ++ci) {
      const auto& c = kConvCases[ci];
      auto l = random_tensor(dt, c.lhs, rng, small_ints);
      auto r = random_tensor(dt, c.rhs, rng, small_ints);
      auto [shape, want] = naive_conv(c, l, r);
      auto got = run_conv(c, l, r, shape, dt);
      ASSERT_EQ(got.shape(), shape) << ci;
      for (int64_t i = 0; i < got.size(); ++i) {
        double w = want[i];
        if (dt == DType::I8) w = static_cast<int8_t>(static_cast<int64_t>(w));  // wraps
        ASSERT_EQ(get(got, i), w) << mlir_name(dt) << " case " << ci << " at " << i;
      }
    }
  }
}

TEST(CpuConvolution, RandomRealsAndLargeImages) {
  std::mt19937 rng(8);
  const std::vector<ConvCase> cases = {
      // Several im2col rows per task, one BLAS product.
      {{2, 20, 20, 8},
       {3, 3, 8, 16},
       0,
       3,
       {1, 2},
       2,
       3,
       {0, 1},
       0,
       3,
       {1, 2},
       {1, 1},
       {1, 1, 1, 1}},
      // Feature groups through BLAS, in more than one im2col chunk.
      {{2, 80, 80, 16},
       {3, 3, 8, 32},
       0,
       3,
       {1, 2},
       2,
       3,
       {0, 1},
       0,
       3,
       {1, 2},
       {},
       {1, 1, 1, 1},
       {},
       {},
       {},
       2},
      // Depthwise with strides, NCHW.
      {{2, 16, 30, 30},
       {16, 1, 3, 3},
       0,
       1,
       {2, 3},
       1,
       0,
       {2, 3},
       0,
       1,
       {2, 3},
       {2, 2},
       {0, 1, 0, 1},
       {},
       {},
       {},
       16},
      // Batch groups through BLAS.
      {{4, 16, 30}, {3, 16, 64}, 0, 1, {2}, 1, 2, {0}, 0, 1, {2}, {}, {}, {}, {}, {}, 1, 2},
      // Large pointwise.
      {{4, 32, 20, 20}, {48, 32, 1, 1}, 0, 1, {2, 3}, 1, 0, {2, 3}, 0, 1, {2, 3}},
  };
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const auto& c = cases[ci];
    auto l = random_tensor(DType::F32, c.lhs, rng, uniform);
    auto r = random_tensor(DType::F32, c.rhs, rng, uniform);
    auto [shape, want] = naive_conv(c, l, r, 7);
    auto got = run_conv(c, l, r, shape, DType::F32);
    ASSERT_EQ(got.shape(), shape) << ci;
    for (int64_t i = 0; i < got.size(); i += 7)
      ASSERT_NEAR(get(got, i), want[i], 1e-4) << ci << " at " << i;
  }
}

TEST(CpuConvolution, BoolIsOrOfAnds) {
  auto l = HostTensor::from_vector<bool>({true, false, true, false}, {1, 1, 4});
  auto r = HostTensor::from_vector<bool>({true, true}, {1, 1, 2});
  ConvCase c{{1, 1, 4}, {1, 1, 2}, 0, 1, {2}, 1, 0, {2}, 0, 1, {2}};
  auto out = run_conv(c, l, r, {1, 1, 3}, DType::Bool);
  EXPECT_EQ(out.to_vector<bool>(), (std::vector<bool>{true, true, true}));
}

TEST(CpuConvolution, EmptyInputsGiveZeros) {
  // Zero input features: every output is 0.
  ConvCase c{{2, 0, 4}, {3, 0, 2}, 0, 1, {2}, 1, 0, {2}, 0, 1, {2}};
  auto out = run_conv(c, HostTensor(DType::F32, c.lhs), HostTensor(DType::F32, c.rhs), {2, 3, 3},
                      DType::F32);
  EXPECT_EQ(out.to_vector<float>(), std::vector<float>(18, 0.0f));
}

// ------------------------------------------------------------------ triangular_solve

HostTensor run_trsm(const HostTensor& a, const HostTensor& b, bool left, bool lower, bool unit,
                    const std::string& transpose) {
  return run_op("stablehlo.triangular_solve", {a, b}, ir::Type::tensor(b.shape(), b.dtype()),
                {{"left_side", Attribute::boolean_attr(left)},
                 {"lower", Attribute::boolean_attr(lower)},
                 {"unit_diagonal", Attribute::boolean_attr(unit)},
                 {"transpose_a", Attribute::enum_attr("transpose", transpose)}});
}

// Checks op(A) X = B (left) or X op(A) = B (right), where A keeps only the chosen triangle
// and a unit diagonal replaces the stored one when asked.
void check_trsm(const HostTensor& a, const HostTensor& b, const HostTensor& x, bool left,
                bool lower, bool unit, bool transpose, double tol) {
  const int64_t rank = a.rank(), n = a.shape()[rank - 1];
  const int64_t rows = b.shape()[rank - 2], cols = b.shape()[rank - 1];
  const int64_t batch = b.size() / std::max<int64_t>(1, rows * cols);
  for (int64_t bi = 0; bi < batch; ++bi) {
    auto A = [&](int64_t i, int64_t j) {
      if (transpose) std::swap(i, j);
      if (i == j && unit) return 1.0;
      if (lower ? j > i : j < i) return 0.0;
      return get(a, bi * n * n + i * n + j);
    };
    auto X = [&](int64_t i, int64_t j) { return get(x, bi * rows * cols + i * cols + j); };
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double s = 0;
        for (int64_t k = 0; k < n; ++k) s += left ? A(i, k) * X(k, j) : X(i, k) * A(k, j);
        ASSERT_NEAR(s, get(b, bi * rows * cols + i * cols + j), tol)
            << "left " << left << " lower " << lower << " unit " << unit << " transpose "
            << transpose << " batch " << bi << " at " << i << "," << j;
      }
  }
}

// Random matrix with a dominant diagonal (well conditioned); the ignored triangle holds
// garbage that must not be read.
HostTensor trsm_matrix(DType dt, const Shape& shape, std::mt19937& rng) {
  const int64_t n = shape.back();
  auto a = random_tensor(dt, shape, rng, [n](std::mt19937& r) { return uniform(r) / n; });
  const int64_t batch = a.size() / (n * n);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i) {
      const double v = (i % 2 ? -1.0 : 1.0) * (2.0 + (i % 3));
      const int64_t e = b * n * n + i * n + i;
      if (dt == DType::F32) a.data_as<float>()[e] = static_cast<float>(v);
      if (dt == DType::F64) a.data_as<double>()[e] = v;
      if (dt == DType::F16) a.data_as<float16>()[e] = float16(v);
      if (dt == DType::BF16) a.data_as<bfloat16>()[e] = bfloat16(v);
    }
  return a;
}

TEST(CpuTriangularSolve, HandComputed2x2) {
  // [[2, 0], [1, 4]] x = [2, 9]  ->  x = [1, 2].
  auto a = HostTensor::from_vector<float>({2, 99, 1, 4}, {2, 2});
  auto b = HostTensor::from_vector<float>({2, 9}, {2, 1});
  auto x = run_trsm(a, b, true, true, false, "NO_TRANSPOSE");
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2}));
  // Transposed: [[2, 1], [0, 4]] x = [5, 8] -> x = [1.5, 2].
  auto b2 = HostTensor::from_vector<float>({5, 8}, {2, 1});
  auto x2 = run_trsm(a, b2, true, true, false, "TRANSPOSE");
  EXPECT_EQ(x2.to_vector<float>(), (std::vector<float>{1.5, 2}));
  // Unit diagonal: [[1, 0], [1, 1]] x = [1, 3] -> [1, 2].
  auto b3 = HostTensor::from_vector<float>({1, 3}, {2, 1});
  auto x3 = run_trsm(a, b3, true, true, true, "NO_TRANSPOSE");
  EXPECT_EQ(x3.to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(CpuTriangularSolve, AllVariantsSatisfyTheSystem) {
  std::mt19937 rng(9);
  struct Size {
    Shape batch;
    int64_t n, other;
  };
  // Blocked path (batch <= 8 or n >= 32), direct path (batch > 8 and n < 32), two blocks of
  // 128, a single row.
  for (Size s : {Size{{}, 5, 3}, Size{{2}, 8, 10}, Size{{3, 4}, 6, 2}, Size{{}, 150, 4},
                 Size{{2}, 40, 1}, Size{{}, 1, 3}}) {
    for (DType dt : {DType::F64, DType::F32}) {
      for (int mask = 0; mask < 16; ++mask) {
        const bool left = mask & 1, lower = mask & 2, unit = mask & 4, tr = mask & 8;
        Shape ashape = s.batch, bshape = s.batch;
        ashape.push_back(s.n);
        ashape.push_back(s.n);
        bshape.push_back(left ? s.n : s.other);
        bshape.push_back(left ? s.other : s.n);
        auto a = trsm_matrix(dt, ashape, rng);
        auto b = random_tensor(dt, bshape, rng, uniform);
        auto x = run_trsm(a, b, left, lower, unit,
                          tr ? (mask & 1 ? "ADJOINT" : "TRANSPOSE") : "NO_TRANSPOSE");
        ASSERT_EQ(x.shape(), b.shape());
        check_trsm(a, b, x, left, lower, unit, tr, dt == DType::F64 ? 1e-12 : 1e-5);
      }
    }
  }
}

TEST(CpuTriangularSolve, HalfPrecision) {
  std::mt19937 rng(10);
  for (DType dt : {DType::F16, DType::BF16}) {
    auto a = trsm_matrix(dt, {4, 4}, rng);
    auto b = random_tensor(dt, {4, 3}, rng, uniform);
    auto x = run_trsm(a, b, true, false, false, "NO_TRANSPOSE");
    check_trsm(a, b, x, true, false, false, false, dt == DType::F16 ? 2e-2 : 1e-1);
  }
}

TEST(CpuTriangularSolve, OneByOneDividesAndEmptyPassesThrough) {
  auto a = HostTensor::from_vector<double>({4}, {1, 1});
  auto b = HostTensor::from_vector<double>({1, -2, 8}, {1, 3});
  EXPECT_EQ(run_trsm(a, b, true, true, false, "NO_TRANSPOSE").to_vector<double>(),
            (std::vector<double>{0.25, -0.5, 2}));
  auto a0 = HostTensor::from_vector<double>({0}, {1, 1});
  auto x0 = run_trsm(a0, b, true, true, false, "NO_TRANSPOSE").to_vector<double>();
  EXPECT_TRUE(std::isinf(x0[0]) && x0[0] > 0);
  auto e = run_trsm(HostTensor(DType::F32, {3, 3}), HostTensor(DType::F32, {3, 0}), true, true,
                    false, "NO_TRANSPOSE");
  EXPECT_EQ(e.shape(), (Shape{3, 0}));
}

TEST(CpuTriangularSolve, RejectsIntegers) {
  EXPECT_THROW(run_trsm(HostTensor(DType::I32, {2, 2}), HostTensor(DType::I32, {2, 2}), true, true,
                        false, "NO_TRANSPOSE"),
               UnsupportedError);
}

}  // namespace
}  // namespace cujax
