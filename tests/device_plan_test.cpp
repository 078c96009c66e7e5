// The index math and the scalar interpreter that the cuda backend's gather, scatter, reduce,
// sort and window kernels run per thread (backends/common/gather_scatter.h, window.h,
// scalar_program.h), run here on the CPU one element at a time and compared with the CPU
// backend: indexing mistakes show up without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <complex>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/common/gather_scatter.h"
#include "backends/common/scalar_program.h"
#include "backends/common/window.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

HostTensor iota_f32(const Shape& s) {
  HostTensor t(DType::F32, s);
  for (int64_t i = 0; i < t.size(); ++i) t.data_as<float>()[i] = static_cast<float>(i) * 0.5f;
  return t;
}

HostTensor indices_i32(const Shape& s, int32_t lo, int32_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> u(lo, hi);
  HostTensor t(DType::I32, s);
  for (int64_t i = 0; i < t.size(); ++i) t.data_as<int32_t>()[i] = u(rng);
  return t;
}

const ir::Operation& first_op(const ir::Module& m) {
  return *m.lookup("main")->body.front().ops.front();
}

std::vector<HostTensor> run_cpu(const ir::Module& m, const std::vector<HostTensor>& args) {
  return runtime::get_backend("cpu").compile(m)->execute_on_host(args);
}

// Gather forms JAX emits: an embedding lookup, take_along_axis (batching dims) and
// cross-entropy's gather of one logit per row, plus clamped out-of-range starts.
struct GatherCase {
  const char* name;
  const char* text;
  Shape operand, indices;
};

const GatherCase kGathers[] = {
    {"embedding",
     R"(func.func @main(%a: tensor<10x4xf32>, %i: tensor<3x5xi32>) -> tensor<3x5x4xf32> {
  %0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>, slice_sizes = array<i64: 1, 4>} : (tensor<10x4xf32>, tensor<3x5xi32>) -> tensor<3x5x4xf32>
  return %0 : tensor<3x5x4xf32>
})",
     {10, 4},
     {3, 5}},
    {"take_along_axis",
     R"(func.func @main(%a: tensor<3x7xf32>, %i: tensor<3x2x1xi32>) -> tensor<3x2xf32> {
  %0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2>, slice_sizes = array<i64: 1, 1>} : (tensor<3x7xf32>, tensor<3x2x1xi32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
})",
     {3, 7},
     {3, 2, 1}},
    {"window",
     R"(func.func @main(%a: tensor<6x8xf32>, %i: tensor<4x2xi32>) -> tensor<4x3x2xf32> {
  %0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], start_index_map = [0, 1], index_vector_dim = 1>, slice_sizes = array<i64: 3, 2>} : (tensor<6x8xf32>, tensor<4x2xi32>) -> tensor<4x3x2xf32>
  return %0 : tensor<4x3x2xf32>
})",
     {6, 8},
     {4, 2}},
};

TEST(DevicePlan, GatherSourceMatchesCpuGather) {
  uint32_t seed = 1;
  for (const GatherCase& c : kGathers) {
    SCOPED_TRACE(c.name);
    auto m = ir::parse_module(c.text);
    const HostTensor a = iota_f32(c.operand);
    const HostTensor idx = indices_i32(c.indices, -3, 12, seed++);  // some out of range
    const HostTensor want = run_cpu(*m, {a, idx}).at(0);
    const auto g = plan::gather_plan(first_op(*m));
    ASSERT_TRUE(g.has_value());
    for (int64_t r = 0; r < want.size(); ++r)
      ASSERT_EQ(a.data_as<float>()[plan::gather_source(*g, idx.data(), r)],
                want.data_as<float>()[r])
          << "result element " << r;
  }
}

// scatter-add as cross-entropy's and the embedding's gradients emit it (repeated and
// out-of-range indices): the sum over update elements of scatter_target's places.
TEST(DevicePlan, ScatterTargetMatchesCpuScatterAdd) {
  auto m = ir::parse_module(
      R"(func.func @main(%a: tensor<10x4xf32>, %i: tensor<6x1xi32>, %u: tensor<6x4xf32>) -> tensor<10x4xf32> {
  %0 = "stablehlo.scatter"(%a, %i, %u) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>} : (tensor<10x4xf32>, tensor<6x1xi32>, tensor<6x4xf32>) -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
})");
  const HostTensor a = iota_f32({10, 4});
  const HostTensor idx = indices_i32({6, 1}, -2, 11, 7);
  const HostTensor u = iota_f32({6, 4});
  const HostTensor want = run_cpu(*m, {a, idx, u}).at(0);
  const auto p = plan::scatter_plan(first_op(*m));
  ASSERT_TRUE(p.has_value());
  HostTensor got = a.clone();
  for (int64_t e = 0; e < u.size(); ++e) {
    const int64_t t = plan::scatter_target(*p, idx.data(), e);
    if (t >= 0) got.data_as<float>()[t] += u.data_as<float>()[e];
  }
  for (int64_t k = 0; k < want.size(); ++k)
    EXPECT_EQ(got.data_as<float>()[k], want.data_as<float>()[k]) << "element " << k;
}

// The argmax reduce JAX emits: (value, index) pairs, NaN-aware, lower index on ties.
TEST(DevicePlan, ScalarProgramRunsArgmaxLikeTheCpu) {
  auto m = ir::parse_module(
      R"(func.func @main(%v: tensor<3x5xf32>, %i: tensor<3x5xi32>, %v0: tensor<f32>, %i0: tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>) {
  %0:2 = stablehlo.reduce(%v init: %v0), (%i init: %i0) across dimensions = [1] : (tensor<3x5xf32>, tensor<3x5xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
   reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<i32>, %d: tensor<i32>)  {
    %1 = stablehlo.compare  GT, %a, %c,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %2 = stablehlo.compare  NE, %a, %a,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %3 = stablehlo.or %1, %2 : tensor<i1>
    %4 = stablehlo.compare  EQ, %a, %c,  FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %5 = stablehlo.compare  LT, %b, %d,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %6 = stablehlo.and %4, %5 : tensor<i1>
    %7 = stablehlo.or %3, %6 : tensor<i1>
    %8 = stablehlo.select %3, %a, %c : tensor<i1>, tensor<f32>
    %9 = stablehlo.select %7, %b, %d : tensor<i1>, tensor<i32>
    stablehlo.return %8, %9 : tensor<f32>, tensor<i32>
  }
  return %0#0, %0#1 : tensor<3xf32>, tensor<3xi32>
})");
  HostTensor v(DType::F32, {3, 5}), i(DType::I32, {3, 5});
  const float vals[15] = {1, 4, 4, 2, 0, -1, -3, -1, -2, -5, 2, NAN, 7, NAN, 1};
  std::memcpy(v.data(), vals, sizeof vals);
  for (int k = 0; k < 15; ++k) i.data_as<int32_t>()[k] = k % 5;
  HostTensor v0(DType::F32, {}), i0(DType::I32, {});
  *v0.data_as<float>() = -INFINITY;
  *i0.data_as<int32_t>() = 0;
  const auto want = run_cpu(*m, {v, i, v0, i0});
  const auto prog = scalar_program::compile(*first_op(*m).regions[0]);
  ASSERT_TRUE(prog.has_value());
  for (int row = 0; row < 3; ++row) {
    uint64_t acc[2] = {scalar_program::to_bits(-INFINITY), 0};
    for (int k = 0; k < 5; ++k) {
      const uint64_t args[4] = {acc[0], acc[1], scalar_program::to_bits(vals[row * 5 + k]),
                                static_cast<uint64_t>(k)};
      prog->run(args, acc);
    }
    EXPECT_EQ(static_cast<int32_t>(acc[1]), want[1].data_as<int32_t>()[row]) << "row " << row;
    EXPECT_EQ(acc[0], scalar_program::to_bits(want[0].data_as<float>()[row])) << "row " << row;
  }
}

// reduce_window with stride, padding and dilations: max over window_source's elements.
TEST(DevicePlan, WindowSourceMatchesCpuReduceWindow) {
  auto m =
      ir::parse_module(R"(func.func @main(%a: tensor<5x6xf32>, %z: tensor<f32>) -> tensor<4x3xf32> {
  %0 = "stablehlo.reduce_window"(%a, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.maximum %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {window_dimensions = array<i64: 2, 3>, window_strides = array<i64: 1, 2>, base_dilations = array<i64: 1, 1>, window_dilations = array<i64: 2, 1>, padding = dense<[[1, 0], [1, 1]]> : tensor<2x2xi64>} : (tensor<5x6xf32>, tensor<f32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
})");
  const HostTensor a = iota_f32({5, 6});
  HostTensor z(DType::F32, {});
  *z.data_as<float>() = -100;
  const HostTensor want = run_cpu(*m, {a, z}).at(0);
  const auto w = plan::window_plan({5, 6}, {2, 3}, {1, 2}, {1, 1}, {2, 1}, {1, 0, 1, 1});
  ASSERT_TRUE(w.has_value());
  ASSERT_EQ(w->num_out, want.size());
  int64_t oi[index::kMaxRank];
  for (int64_t o = 0; o < w->num_out; ++o) {
    index::unravel(o, w->out_dims, w->rank, oi);
    float acc = -100;
    for (int64_t e = 0; e < w->window_size; ++e) {
      const int64_t off = plan::window_source(*w, oi, e);
      acc = std::max(acc, off >= 0 ? a.data_as<float>()[off] : -100.0f);
    }
    EXPECT_EQ(acc, want.data_as<float>()[o]) << "output " << o;
  }
}

// jnp.cumlogsumexp's reduce_window calls logaddexp (exp, log1p): the interpreter inlines the
// call and runs the transcendental functions as the CPU backend does.
TEST(DevicePlan, ScalarProgramInlinesCallsAndTranscendentals) {
  auto m = ir::parse_module(R"(func.func @main(%a: tensor<6xf32>) -> tensor<6xf32> {
  %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%a, %cst) <{padding = dense<[[0, 5]]> : tensor<1x2xi64>, window_dimensions = array<i64: 6>}> ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %1 = func.call @logaddexp(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<6xf32>, tensor<f32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}
func.func private @logaddexp(%x: tensor<f32>, %y: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.maximum %x, %y : tensor<f32>
  %1 = stablehlo.subtract %x, %y : tensor<f32>
  %2 = stablehlo.abs %1 : tensor<f32>
  %3 = stablehlo.negate %2 : tensor<f32>
  %4 = stablehlo.exponential %3 : tensor<f32>
  %5 = stablehlo.log_plus_one %4 : tensor<f32>
  %6 = stablehlo.add %0, %5 : tensor<f32>
  return %6 : tensor<f32>
})");
  const HostTensor a = iota_f32({6});
  const HostTensor want = run_cpu(*m, {a}).at(0);
  const ir::Operation& rw = *m->lookup("main")->body.front().ops[1];
  EXPECT_FALSE(scalar_program::compile(*rw.regions[0]).has_value());  // the call needs the module
  const auto prog = scalar_program::compile(*rw.regions[0], m.get());
  ASSERT_TRUE(prog.has_value());
  const auto w = plan::window_plan({6}, {6}, {1}, {1}, {1}, {0, 5});
  ASSERT_TRUE(w.has_value());
  int64_t oi[index::kMaxRank];
  for (int64_t o = 0; o < w->num_out; ++o) {
    index::unravel(o, w->out_dims, w->rank, oi);
    uint64_t acc = scalar_program::to_bits(-INFINITY);
    for (int64_t e = 0; e < w->window_size; ++e) {
      const int64_t off = plan::window_source(*w, oi, e);
      const uint64_t args[2] = {
          acc, off >= 0 ? scalar_program::to_bits(a.data_as<float>()[off]) : scalar_program::to_bits(-INFINITY)};
      prog->run(args, &acc);
    }
    EXPECT_EQ(scalar_program::from_bits<float>(acc), want.data_as<float>()[o]) << "output " << o;
  }
}

HostTensor c64_tensor(const std::vector<std::complex<float>>& v, Shape shape) {
  return HostTensor::from_bytes(
      DType::C64, std::move(shape),
      {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(v[0])});
}

uint64_t c64_bits(std::complex<float> z) {
  uint64_t b;
  std::memcpy(&b, &z, sizeof b);
  return b;
}

// Rows with ties in the real part, signed zeros and a NaN: where an order could go wrong.
std::vector<std::complex<float>> complex_rows() {
  return {{1, 2},     {3, 4},     {3, -1},   {-2, 9},  {3, 0}, {0, 1},
          {-0.0f, 5}, {0, -5},    {-1, 0},   {-1, 2},  {7, 7}, {NAN, 1},
          {2, -3},    {2, -3.5f}, {-4, 0},   {2, 3},   {5, 0}, {5, -0.0f},
          {-6, 1},    {4, 4},     {4, 4.5f}, {-9, -9}, {8, 0}, {-0.0f, -0.0f}};
}

// JAX's complex maximum as a reduce body: real, imag, compare and select on complex64 scalars,
// which the interpreter selects and splits as bit patterns; folded here over each row as the
// device's reduce kernel does, against the CPU backend, bit for bit.
TEST(DevicePlan, ScalarProgramRunsComplex64MaxLikeTheCpu) {
  auto m = ir::parse_module(
      R"(func.func @main(%a: tensor<3x8xcomplex<f32>>, %z: tensor<complex<f32>>) -> tensor<3xcomplex<f32>> {
  %0 = stablehlo.reduce(%a init: %z) across dimensions = [1] : (tensor<3x8xcomplex<f32>>, tensor<complex<f32>>) -> tensor<3xcomplex<f32>>
   reducer(%x: tensor<complex<f32>>, %y: tensor<complex<f32>>)  {
    %1 = stablehlo.real %x : (tensor<complex<f32>>) -> tensor<f32>
    %2 = stablehlo.real %y : (tensor<complex<f32>>) -> tensor<f32>
    %3 = stablehlo.compare EQ, %1, %2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %4 = stablehlo.compare GT, %1, %2, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %5 = stablehlo.imag %x : (tensor<complex<f32>>) -> tensor<f32>
    %6 = stablehlo.imag %y : (tensor<complex<f32>>) -> tensor<f32>
    %7 = stablehlo.compare GT, %5, %6, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %8 = stablehlo.select %3, %7, %4 : tensor<i1>, tensor<i1>
    %9 = stablehlo.select %8, %x, %y : tensor<i1>, tensor<complex<f32>>
    stablehlo.return %9 : tensor<complex<f32>>
  }
  return %0 : tensor<3xcomplex<f32>>
})");
  const auto rows = complex_rows();
  const std::complex<float> init(-INFINITY, 0);
  const auto want = run_cpu(*m, {c64_tensor(rows, {3, 8}), c64_tensor({init}, {})});
  const auto prog = scalar_program::compile(*first_op(*m).regions[0]);
  ASSERT_TRUE(prog.has_value());
  for (int row = 0; row < 3; ++row) {
    uint64_t acc = c64_bits(init);
    for (int k = 0; k < 8; ++k) {
      const uint64_t args[2] = {acc, c64_bits(rows[row * 8 + k])};
      prog->run(args, &acc);
    }
    EXPECT_EQ(acc, c64_bits(want[0].data_as<std::complex<float>>()[row])) << "row " << row;
  }
}

// A sort comparator in JAX's form for complex64 (by real part, then imaginary part, in total
// order, with -0 read as 0 through a constant), as the device's comparison sort calls
// it, against the CPU backend's stable sort of each row, bit for bit.
TEST(DevicePlan, ScalarProgramSortsComplex64LikeTheCpu) {
  auto m = ir::parse_module(
      R"(func.func @main(%a: tensor<3x8xcomplex<f32>>) -> tensor<3x8xcomplex<f32>> {
  %0 = "stablehlo.sort"(%a) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%x: tensor<complex<f32>>, %y: tensor<complex<f32>>):
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.real %x : (tensor<complex<f32>>) -> tensor<f32>
    %2 = stablehlo.compare EQ, %1, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %3 = stablehlo.select %2, %zero, %1 : tensor<i1>, tensor<f32>
    %4 = stablehlo.real %y : (tensor<complex<f32>>) -> tensor<f32>
    %5 = stablehlo.compare EQ, %4, %zero, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %6 = stablehlo.select %5, %zero, %4 : tensor<i1>, tensor<f32>
    %7 = stablehlo.imag %x : (tensor<complex<f32>>) -> tensor<f32>
    %8 = stablehlo.imag %y : (tensor<complex<f32>>) -> tensor<f32>
    %9 = stablehlo.compare LT, %3, %6, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %10 = stablehlo.compare EQ, %3, %6, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %11 = stablehlo.compare LT, %7, %8, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %12 = stablehlo.and %10, %11 : tensor<i1>
    %13 = stablehlo.or %9, %12 : tensor<i1>
    stablehlo.return %13 : tensor<i1>
  }) : (tensor<3x8xcomplex<f32>>) -> tensor<3x8xcomplex<f32>>
  return %0 : tensor<3x8xcomplex<f32>>
})");
  const auto rows = complex_rows();
  const auto want = run_cpu(*m, {c64_tensor(rows, {3, 8})});
  const auto prog = scalar_program::compile(*first_op(*m).regions[0]);
  ASSERT_TRUE(prog.has_value());
  for (int row = 0; row < 3; ++row) {
    std::vector<uint64_t> got;
    for (int k = 0; k < 8; ++k) got.push_back(c64_bits(rows[row * 8 + k]));
    std::stable_sort(got.begin(), got.end(), [&](uint64_t x, uint64_t y) {
      const uint64_t args[2] = {x, y};
      uint64_t less = 0;
      prog->run(args, &less);
      return (less & 1) != 0;
    });
    for (int k = 0; k < 8; ++k)
      EXPECT_EQ(got[k], c64_bits(want[0].data_as<std::complex<float>>()[row * 8 + k]))
          << "row " << row << ", element " << k;
  }
}

// What the interpreter cannot compute on complex values it declines, and the op runs on the
// host: arithmetic and comparisons of complex64 (dispatch() has no complex type, so their bits
// would be read as a double's) and any complex128 value (16 bytes do not fit a slot).
TEST(DevicePlan, ScalarProgramDeclinesComplexArithmetic) {
  auto region_of = [](const std::string& type, const std::string& body) {
    return ir::parse_module("func.func @main(%a: tensor<4x" + type + ">, %z: tensor<" + type +
                            ">) -> tensor<" + type + "> {\n  %0 = stablehlo.reduce(%a init: %z) " +
                            "across dimensions = [0] : (tensor<4x" + type + ">, tensor<" + type +
                            ">) -> tensor<" + type + ">\n   reducer(%x: tensor<" + type +
                            ">, %y: tensor<" + type + ">)  {\n" + body +
                            "  }\n  return %0 : tensor<" + type + ">\n}\n");
  };
  const auto sum = region_of("complex<f32>",
                             "    %1 = stablehlo.add %x, %y : tensor<complex<f32>>\n"
                             "    stablehlo.return %1 : tensor<complex<f32>>\n");
  EXPECT_FALSE(scalar_program::compile(*first_op(*sum).regions[0]).has_value());
  const auto equal = region_of(
      "complex<f32>",
      "    %1 = stablehlo.compare EQ, %x, %y : (tensor<complex<f32>>, tensor<complex<f32>>) -> "
      "tensor<i1>\n    %2 = stablehlo.select %1, %x, %y : tensor<i1>, tensor<complex<f32>>\n"
      "    stablehlo.return %2 : tensor<complex<f32>>\n");
  EXPECT_FALSE(scalar_program::compile(*first_op(*equal).regions[0]).has_value());
  const auto wide = region_of(
      "complex<f64>",
      "    %1 = stablehlo.real %x : (tensor<complex<f64>>) -> tensor<f64>\n"
      "    %2 = stablehlo.real %y : (tensor<complex<f64>>) -> tensor<f64>\n"
      "    %3 = stablehlo.compare GT, %1, %2, FLOAT : (tensor<f64>, tensor<f64>) -> tensor<i1>\n"
      "    %4 = stablehlo.select %3, %x, %y : tensor<i1>, tensor<complex<f64>>\n"
      "    stablehlo.return %4 : tensor<complex<f64>>\n");
  EXPECT_FALSE(scalar_program::compile(*first_op(*wide).regions[0]).has_value());
  const auto pick = region_of("complex<f32>",
                              "    %1 = stablehlo.real %x : (tensor<complex<f32>>) -> tensor<f32>\n"
                              "    %2 = stablehlo.imag %y : (tensor<complex<f32>>) -> tensor<f32>\n"
                              "    %3 = stablehlo.compare GT, %1, %2, FLOAT : (tensor<f32>, "
                              "tensor<f32>) -> tensor<i1>\n"
                              "    %4 = stablehlo.select %3, %x, %y : tensor<i1>, "
                              "tensor<complex<f32>>\n    stablehlo.return %4 : "
                              "tensor<complex<f32>>\n");
  EXPECT_TRUE(scalar_program::compile(*first_op(*pick).regions[0]).has_value());
}

}  // namespace
}  // namespace cujax
