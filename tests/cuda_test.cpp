// Every CUDA kernel against the CPU backend on random inputs (label `gpu`; built in CUDA builds
// only). Without a usable device each test still parses its program and runs it on the CPU,
// then SKIPs with the reason that `cujax doctor` would give.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/common/elementwise.h"
#include "backends/cuda/driver/driver.h"
#include "backends/cuda/library.h"
#include "backends/cuda/nccl.h"
#include "backends/cuda/program.h"
#include "cujax/core/error.h"
#include "cujax/core/json.h"
#include "cujax/grad.h"
#include "cujax/ir/parser.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/profiler.h"
#include "cujax/profiler_doctor.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/spmd.h"
#include "host_compare.h"

namespace cujax {
namespace {

std::string type_str(const Shape& s, DType t) {
  std::string out = "tensor<";
  for (int64_t d : s) out += std::to_string(d) + "x";
  return out + std::string(mlir_name(t)) + ">";
}

// Random values for `t`: floats in [-3, 3] with a few specials, integers over their range
// (`small` keeps them in [-8, 8], for divisors and exponents).
HostTensor random_tensor(DType t, Shape shape, std::mt19937& rng, bool small = false) {
  HostTensor out(t, std::move(shape));
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data_as<T>();
    for (int64_t i = 0; i < out.size(); ++i) {
      if constexpr (ew::is_float_v<T>) {
        std::uniform_real_distribution<double> u(-3.0, 3.0);
        double v = u(rng);
        if (i % 97 == 5) v = NAN;
        if (i % 89 == 7) v = 0.0;
        if (i % 83 == 11) v = -INFINITY;
        p[i] = ew::convert<T, double>(v);
      } else if constexpr (ew::is_bool_v<T>) {
        p[i] = (rng() & 1) != 0;
      } else {
        const uint64_t bits = (static_cast<uint64_t>(rng()) << 32) | rng();
        T v = static_cast<T>(bits);
        if (small)
          v = static_cast<T>(static_cast<int64_t>(bits % 17) - (std::is_signed_v<T> ? 8 : 0));
        p[i] = v;
      }
    }
  });
  return out;
}

// Relative tolerance per float type: a couple of ULPs (the GPU's libm is not glibc's).
double default_rtol(DType t) {
  switch (t) {
    case DType::F64:
      return 1e-14;
    case DType::F32:
      return 3e-7;
    case DType::F16:
      return 1e-3;
    case DType::BF16:
      return 8e-3;
    default:
      return 0;
  }
}

class CudaVsCpu : public ::testing::Test {
 protected:
  std::mt19937 rng{1234};

  // Runs `body` (ops on %a0, %a1, ... ending in `return`) on both backends and compares.
  // `host_ops`: how many ops are expected to run on the host (no CUDA kernel), checked without
  // a GPU too, so that a passing test on a GPU means the kernels ran.
  void check(const std::vector<HostTensor>& args, const std::string& body, const Shape& rshape,
             DType rtype, double rtol = -1, double atol = 0, int host_ops = 0) {
    std::string sig;
    for (size_t i = 0; i < args.size(); ++i)
      sig += (i ? ", " : "") + std::string("%a") + std::to_string(i) + ": " +
             type_str(args[i].shape(), args[i].dtype());
    const std::string text =
        "func.func @main(" + sig + ") -> " + type_str(rshape, rtype) + " {\n" + body + "\n}\n";
    SCOPED_TRACE(text);
    auto module = ir::parse_module(text);
    const auto cpu = runtime::get_backend("cpu").compile(*module)->execute_on_host(args);
    ASSERT_EQ(cpu.size(), 1u);
    EXPECT_EQ(cuda::host_steps(*cuda::compile_program(*module, *module->lookup("main"), nullptr)),
              host_ops);
    const std::string why = runtime::unavailable_reason("cuda");
    if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
    // Expected fallbacks are allowed even under CUJAX_HOST_FALLBACK=error (gpu-check.sh).
    runtime::CompileOptions options;
    if (host_ops > 0) options.host_fallback = runtime::HostFallback::Allow;
    const auto cuda =
        runtime::get_backend("cuda").compile(*module, "main", 0, options)->execute_on_host(args);
    ASSERT_EQ(cuda.size(), 1u);
    expect_same(cuda[0], cpu[0], rtol < 0 ? default_rtol(rtype) : rtol, atol, text);
  }
};

const char* kFloatUnary[] = {"abs",
                             "negate",
                             "sign",
                             "ceil",
                             "floor",
                             "round_nearest_afz",
                             "round_nearest_even",
                             "sqrt",
                             "rsqrt",
                             "cbrt",
                             "exponential",
                             "exponential_minus_one",
                             "log",
                             "log_plus_one",
                             "logistic",
                             "sine",
                             "cosine",
                             "tan",
                             "tanh"};
const DType kFloats[] = {DType::F16, DType::BF16, DType::F32, DType::F64};

TEST_F(CudaVsCpu, FloatUnary) {
  const Shape s{7, 33};
  for (DType t : kFloats)
    for (const char* op : kFloatUnary) {
      const std::string ty = type_str(s, t);
      check({random_tensor(t, s, rng)},
            "  %0 = \"stablehlo." + std::string(op) + "\"(%a0) : (" + ty + ") -> " + ty +
                "\n  return %0 : " + ty,
            s, t);
    }
}

TEST_F(CudaVsCpu, IntegerUnary) {
  const Shape s{300};
  for (DType t : {DType::I8, DType::I32, DType::I64, DType::U8, DType::U32})
    for (const char* op : {"abs", "negate", "sign", "not", "popcnt", "count_leading_zeros"}) {
      if (is_unsigned_int(t) &&
          (std::string(op) == "abs" || std::string(op) == "negate" || std::string(op) == "sign"))
        continue;  // the verifier rejects these for unsigned types
      const std::string ty = type_str(s, t);
      check({random_tensor(t, s, rng)},
            "  %0 = \"stablehlo." + std::string(op) + "\"(%a0) : (" + ty + ") -> " + ty +
                "\n  return %0 : " + ty,
            s, t);
    }
}

TEST_F(CudaVsCpu, Binary) {
  const Shape s{5, 41};
  struct Case {
    const char* op;
    std::vector<DType> types;
    bool small_rhs;
  };
  const std::vector<Case> cases = {
      {"add",
       {DType::F16, DType::BF16, DType::F32, DType::F64, DType::I32, DType::U8, DType::Bool},
       false},
      {"subtract", {DType::BF16, DType::F32, DType::I16, DType::U64}, false},
      {"multiply", {DType::F16, DType::F32, DType::I64, DType::Bool}, false},
      {"divide", {DType::F32, DType::F64, DType::I32, DType::U16}, true},
      {"remainder", {DType::F32, DType::I32, DType::I8}, true},
      {"maximum", {DType::F32, DType::BF16, DType::I32, DType::U32}, false},
      {"minimum", {DType::F64, DType::F16, DType::I64}, false},
      {"power", {DType::F32, DType::F64, DType::I32}, true},
      {"atan2", {DType::F32, DType::F64, DType::BF16}, false},
      {"and", {DType::I32, DType::Bool}, false},
      {"or", {DType::U8, DType::Bool}, false},
      {"xor", {DType::I64}, false},
      {"shift_left", {DType::I32, DType::U16}, true},
      {"shift_right_logical", {DType::I32, DType::U64}, true},
      {"shift_right_arithmetic", {DType::I8, DType::I64}, true},
  };
  for (const Case& c : cases)
    for (DType t : c.types) {
      const std::string ty = type_str(s, t);
      check({random_tensor(t, s, rng), random_tensor(t, s, rng, c.small_rhs)},
            "  %0 = \"stablehlo." + std::string(c.op) + "\"(%a0, %a1) : (" + ty + ", " + ty +
                ") -> " + ty + "\n  return %0 : " + ty,
            s, t);
    }
}

TEST_F(CudaVsCpu, CompareAndSelect) {
  const Shape s{130};
  for (DType t : {DType::F32, DType::BF16, DType::I32, DType::U8})
    for (const char* dir : {"EQ", "NE", "GE", "GT", "LE", "LT"})
      for (const char* type : {"FLOAT", "TOTALORDER"}) {
        const bool f = is_float(t);
        if (!f && std::string(type) == "TOTALORDER") continue;
        const std::string ct = f ? type : (is_signed_int(t) ? "SIGNED" : "UNSIGNED");
        const std::string ty = type_str(s, t), rb = type_str(s, DType::Bool);
        HostTensor a = random_tensor(t, s, rng, true), b = random_tensor(t, s, rng, true);
        check({a, b},
              "  %0 = \"stablehlo.compare\"(%a0, %a1) {comparison_direction = "
              "#stablehlo<comparison_direction " +
                  std::string(dir) + ">, compare_type = #stablehlo<comparison_type " + ct +
                  ">} : (" + ty + ", " + ty + ") -> " + rb + "\n  return %0 : " + rb,
              s, DType::Bool);
      }
  for (DType t : {DType::F16, DType::I64, DType::Bool}) {
    const std::string ty = type_str(s, t), pb = type_str(s, DType::Bool);
    check({random_tensor(DType::Bool, s, rng), random_tensor(t, s, rng), random_tensor(t, s, rng)},
          "  %0 = \"stablehlo.select\"(%a0, %a1, %a2) : (" + pb + ", " + ty + ", " + ty + ") -> " +
              ty + "\n  return %0 : " + ty,
          s, t);
  }
}

TEST_F(CudaVsCpu, ConvertEveryPair) {
  const Shape s{64};
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      const std::string a = type_str(s, from), r = type_str(s, to);
      check({random_tensor(from, s, rng)},
            "  %0 = \"stablehlo.convert\"(%a0) : (" + a + ") -> " + r + "\n  return %0 : " + r, s,
            to, 0);
    }
}

TEST_F(CudaVsCpu, DataMovement) {
  for (DType t : {DType::F32, DType::BF16, DType::I8, DType::I64}) {
    const HostTensor x = random_tensor(t, {4, 6, 5}, rng);
    const std::string xt = type_str({4, 6, 5}, t);
    auto ty = [&](const Shape& s) { return type_str(s, t); };
    check({x},
          "  %0 = \"stablehlo.transpose\"(%a0) {permutation = array<i64: 2, 0, 1>} : (" + xt +
              ") -> " + ty({5, 4, 6}) + "\n  return %0 : " + ty({5, 4, 6}),
          {5, 4, 6}, t, 0);
    check({x},
          "  %0 = \"stablehlo.reshape\"(%a0) : (" + xt + ") -> " + ty({24, 5}) +
              "\n  return %0 : " + ty({24, 5}),
          {24, 5}, t, 0);
    check({x},
          "  %0 = \"stablehlo.slice\"(%a0) {start_indices = array<i64: 1, 0, 2>, limit_indices = "
          "array<i64: 4, 6, 5>, strides = array<i64: 2, 3, 1>} : (" +
              xt + ") -> " + ty({2, 2, 3}) + "\n  return %0 : " + ty({2, 2, 3}),
          {2, 2, 3}, t, 0);
    const HostTensor row = random_tensor(t, {1, 5}, rng);
    check({row},
          "  %0 = \"stablehlo.broadcast_in_dim\"(%a0) {broadcast_dimensions = array<i64: 0, 2>} "
          ": (" +
              ty({1, 5}) + ") -> " + xt + "\n  return %0 : " + xt,
          {4, 6, 5}, t, 0);
    const HostTensor y = random_tensor(t, {4, 2, 5}, rng);
    check({x, y},
          "  %0 = \"stablehlo.concatenate\"(%a0, %a1) {dimension = 1 : i64} : (" + xt + ", " +
              ty({4, 2, 5}) + ") -> " + ty({4, 8, 5}) + "\n  return %0 : " + ty({4, 8, 5}),
          {4, 8, 5}, t, 0);
    const HostTensor pv = random_tensor(t, {}, rng);
    check({x, pv},
          "  %0 = \"stablehlo.pad\"(%a0, %a1) {edge_padding_low = array<i64: 1, -1, 0>, "
          "edge_padding_high = array<i64: 0, 2, 1>, interior_padding = array<i64: 1, 0, 2>} : (" +
              xt + ", " + ty({}) + ") -> " + ty({8, 7, 14}) + "\n  return %0 : " + ty({8, 7, 14}),
          {8, 7, 14}, t, 0);
  }
  for (DType t : {DType::I32, DType::F16, DType::U64})
    check({},
          "  %0 = \"stablehlo.iota\"() {iota_dimension = 1 : i64} : () -> " + type_str({3, 70}, t) +
              "\n  return %0 : " + type_str({3, 70}, t),
          {3, 70}, t, 0);
}

TEST_F(CudaVsCpu, Reduce) {
  struct Case {
    const char* body;
    DType t;
    double rtol;
  };
  for (const Case& c : {Case{"add", DType::F32, 1e-5}, Case{"maximum", DType::BF16, 0},
                        Case{"multiply", DType::I32, 0}, Case{"minimum", DType::F64, 0},
                        Case{"or", DType::Bool, 0}, Case{"add", DType::F16, 1e-2}}) {
    const Shape s{6, 50, 7};
    const std::string xt = type_str(s, c.t), st = type_str({}, c.t), rt = type_str({6, 7}, c.t);
    const HostTensor init =
        c.t == DType::I32 ? HostTensor::from_vector<int32_t>({1}, {}) : random_tensor(c.t, {}, rng);
    check({random_tensor(c.t, s, rng, true), init},
          "  %0 = \"stablehlo.reduce\"(%a0, %a1) ({\n  ^bb0(%x: " + st + ", %y: " + st +
              "):\n    %s = \"stablehlo." + c.body + "\"(%x, %y) : (" + st + ", " + st + ") -> " +
              st + "\n    \"stablehlo.return\"(%s) : (" + st +
              ") -> ()\n  }) {dimensions = "
              "array<i64: 1>} : (" +
              xt + ", " + st + ") -> " + rt + "\n  return %0 : " + rt,
          {6, 7}, c.t, c.rtol, c.rtol);
  }
}

// Few results over long rows take the block-per-result kernel.
TEST_F(CudaVsCpu, ReduceLongRows) {
  const Shape s{3, 5000};
  for (DType t : {DType::I32, DType::F32, DType::F64}) {
    HostTensor x = random_tensor(t, s, rng, true);
    if (is_float(t))  // finite values, so that the sums are compared and not their NaNs
      for (int64_t i = 0; i < x.size(); ++i) {
        const double v = as_double(x, i);
        visit_dtype(t, [&](auto tag) {
          using T = typename decltype(tag)::type;
          x.data_as<T>()[i] = ew::convert<T, double>(std::isfinite(v) ? v : 1.0);
        });
      }
    for (const char* body : {"add", "maximum"}) {
      const std::string xt = type_str(s, t), st = type_str({}, t), rt = type_str({3}, t);
      check({x, random_tensor(t, {}, rng, true)},
            "  %0 = \"stablehlo.reduce\"(%a0, %a1) ({\n  ^bb0(%x: " + st + ", %y: " + st +
                "):\n    %s = \"stablehlo." + body + "\"(%x, %y) : (" + st + ", " + st + ") -> " +
                st + "\n    \"stablehlo.return\"(%s) : (" + st +
                ") -> ()\n  }) {dimensions = array<i64: 1>} : (" + xt + ", " + st + ") -> " + rt +
                "\n  return %0 : " + rt,
            {3}, t, 0,
            // Sums of 5000 values in another order: f32 rounding differs by ~1e-2; f64 (same
            // kernel code) catches a missed or doubled element.
            t == DType::F32   ? 0.1
            : t == DType::F64 ? 1e-9
                              : 0);
    }
  }
}

TEST_F(CudaVsCpu, DotGeneral) {
  struct Case {
    DType t;
    double rtol, atol;
  };
  for (const Case& c : {Case{DType::F32, 1e-5, 1e-4}, Case{DType::F64, 1e-12, 1e-12},
                        Case{DType::BF16, 1e-2, 5e-2}, Case{DType::F16, 2e-3, 1e-2}}) {
    auto ty = [&](const Shape& s) { return type_str(s, c.t); };
    // The random generator's NaNs and infinities would spread through a whole row.
    auto finite = [&](Shape s) {
      HostTensor h = random_tensor(DType::F64, std::move(s), rng);
      HostTensor out(c.t, h.shape());
      visit_dtype(c.t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (int64_t i = 0; i < h.size(); ++i) {
          const double v = h.data_as<double>()[i];
          out.data_as<T>()[i] = ew::convert<T, double>(std::isfinite(v) ? v : 0.5);
        }
      });
      return out;
    };
    // Plain matrix product.
    check({finite({33, 70}), finite({70, 21})},
          "  %0 = \"stablehlo.dot_general\"(%a0, %a1) {dot_dimension_numbers = "
          "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : "
          "(" +
              ty({33, 70}) + ", " + ty({70, 21}) + ") -> " + ty({33, 21}) +
              "\n  return %0 : " + ty({33, 21}),
          {33, 21}, c.t, c.rtol, c.atol);
    // Batched, with the batch dimension in the middle of rhs and contracting first in lhs.
    check({finite({3, 40, 9}), finite({17, 3, 40})},
          "  %0 = \"stablehlo.dot_general\"(%a0, %a1) {dot_dimension_numbers = "
          "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [1], "
          "lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [2]>} : (" +
              ty({3, 40, 9}) + ", " + ty({17, 3, 40}) + ") -> " + ty({3, 9, 17}) +
              "\n  return %0 : " + ty({3, 9, 17}),
          {3, 9, 17}, c.t, c.rtol, c.atol);
  }
}

// An op without a CUDA kernel (a sort whose comparator converts, which the device's scalar
// interpreter does not do) between two device ops runs on the host in between.
TEST_F(CudaVsCpu, HostFallbackBetweenDeviceOps) {
  const Shape s{50};
  const std::string ty = type_str(s, DType::F32), st = type_str({}, DType::F32),
                    bt = type_str({}, DType::Bool);
  check({random_tensor(DType::F32, s, rng)},
        "  %0 = \"stablehlo.exponential\"(%a0) : (" + ty + ") -> " + ty +
            "\n  %1 = \"stablehlo.sort\"(%0) ({\n  ^bb0(%x: " + st + ", %y: " + st +
            "):\n    %cx = stablehlo.convert %x : (" + st + ") -> tensor<f64>" +
            "\n    %cy = stablehlo.convert %y : (" + st + ") -> tensor<f64>" +
            "\n    %c = \"stablehlo.compare\"(%cx, %cy) {comparison_direction = "
            "#stablehlo<comparison_direction LT>} : (tensor<f64>, tensor<f64>) -> " +
            bt + "\n    \"stablehlo.return\"(%c) : (" + bt +
            ") -> ()\n  }) {dimension = 0 : i64} : (" + ty + ") -> " + ty +
            "\n  %2 = \"stablehlo.negate\"(%1) : (" + ty + ") -> " + ty + "\n  return %2 : " + ty,
        s, DType::F32, -1, 0, /*host_ops=*/1);
}

// The kernels of op_kernels.cpp, each on random inputs against the CPU backend (host_ops = 0:
// compiling checks, with or without a GPU, that they run on the device).
HostTensor random_indices(const Shape& s, int32_t lo, int32_t hi, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> u(lo, hi);
  HostTensor t(DType::I32, s);
  for (int64_t i = 0; i < t.size(); ++i) t.data_as<int32_t>()[i] = u(rng);
  return t;
}

TEST_F(CudaVsCpu, ConstantClampReverse) {
  const Shape s{6, 7};
  for (DType t : {DType::F32, DType::BF16, DType::I32, DType::U8}) {
    const std::string ty = type_str(s, t), sc = type_str({}, t);
    check({random_tensor(t, s, rng), random_tensor(t, {}, rng, true)},
          "  %c = stablehlo.constant dense<2> : " + sc +
              "\n  %0 = stablehlo.clamp %a1, %a0, %c : (" + sc + ", " + ty + ", " + sc + ") -> " +
              ty + "\n  %1 = stablehlo.reverse %0, dims = [0, 1] : " + ty + "\n  return %1 : " + ty,
          s, t);
  }
}

// rng_bit_generator runs on the device (no host op) and gives the cpu backend's bits and
// advanced state for both generators and every output layout.
TEST_F(CudaVsCpu, RngBitGenerator) {
  struct Case {
    const char* algorithm;
    int64_t words;
    Shape shape;
    DType dtype;
  };
  const Case cases[] = {{"THREE_FRY", 2, {5, 3}, DType::U32},  {"THREE_FRY", 2, {7}, DType::U64},
                        {"THREE_FRY", 2, {4, 6}, DType::U8},   {"PHILOX", 3, {9}, DType::U32},
                        {"PHILOX", 2, {3, 5}, DType::F32},     {"PHILOX", 3, {5}, DType::U64},
                        {"DEFAULT", 3, {1000, 33}, DType::U16}};
  for (const Case& c : cases) {
    const HostTensor state = random_tensor(DType::U64, {c.words}, rng);
    const std::string st = type_str({c.words}, DType::U64), ot = type_str(c.shape, c.dtype);
    const std::string op =
        "  %s, %b = \"stablehlo.rng_bit_generator\"(%a0) {rng_algorithm = "
        "#stablehlo<rng_algorithm " +
        std::string(c.algorithm) + ">} : (" + st + ") -> (" + st + ", " + ot + ")\n";
    check({state}, op + "  return %b : " + ot, c.shape, c.dtype);
    check({state}, op + "  return %s : " + st, {c.words}, DType::U64);
  }
}

TEST_F(CudaVsCpu, GatherEmbeddingAndScatterAdd) {
  check(
      {random_tensor(DType::F32, {50, 8}, rng), random_indices({4, 9}, -2, 52, rng)},
      R"(  %0 = "stablehlo.gather"(%a0, %a1) {dimension_numbers = #stablehlo.gather<offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2>, slice_sizes = array<i64: 1, 8>} : (tensor<50x8xf32>, tensor<4x9xi32>) -> tensor<4x9x8xf32>
  return %0 : tensor<4x9x8xf32>)",
      {4, 9, 8}, DType::F32);
  for (DType t : {DType::F32, DType::I32, DType::BF16, DType::I8}) {
    const std::string tt = std::string(mlir_name(t));
    // repeated indices: float sums may differ from the CPU's order by rounding only
    check({random_tensor(t, {20, 3}, rng, true), random_indices({40, 1}, -1, 20, rng),
           random_tensor(t, {40, 3}, rng, true)},
          "  %0 = \"stablehlo.scatter\"(%a0, %a1, %a2) ({\n  ^bb0(%x: tensor<" + tt +
              ">, %y: tensor<" + tt + ">):\n    %s = stablehlo.add %x, %y : tensor<" + tt +
              ">\n    stablehlo.return %s : tensor<" + tt +
              ">\n  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
              "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = "
              "1>} : (tensor<20x3x" +
              tt + ">, tensor<40x1xi32>, tensor<40x3x" + tt + ">) -> tensor<20x3x" + tt +
              ">\n  return %0 : tensor<20x3x" + tt + ">",
          {20, 3}, t, t == DType::F32 ? 1e-5 : (t == DType::BF16 ? 5e-2 : -1), 1e-5);
  }
}

TEST_F(CudaVsCpu, DynamicSliceAndUpdateSlice) {
  HostTensor start(DType::I32, {});
  for (int32_t at : {-3, 2, 40}) {
    *start.data_as<int32_t>() = at;
    check({random_tensor(DType::F32, {8, 16}, rng), random_tensor(DType::F32, {3, 16}, rng), start},
          R"(  %z = stablehlo.constant dense<0> : tensor<i32>
  %0 = stablehlo.dynamic_update_slice %a0, %a1, %a2, %z : (tensor<8x16xf32>, tensor<3x16xf32>, tensor<i32>, tensor<i32>) -> tensor<8x16xf32>
  %1 = stablehlo.dynamic_slice %0, %z, %a2, sizes = [8, 5] : (tensor<8x16xf32>, tensor<i32>, tensor<i32>) -> tensor<8x5xf32>
  return %1 : tensor<8x5xf32>)",
          {8, 5}, DType::F32);
  }
}

// jnp.sort's comparator (canonicalised, TOTALORDER: CUB's radix sort) and a plain one (the
// merge sort of the scalar interpreter), both with NaNs and signed zeros.
TEST_F(CudaVsCpu, SortRadixAndMergePaths) {
  const std::string canon = R"(
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %n = stablehlo.constant dense<0x7FC00000> : tensor<f32>
    %e0 = stablehlo.compare EQ, %x, %z, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %s0 = stablehlo.select %e0, %z, %x : tensor<i1>, tensor<f32>
    %q0 = stablehlo.compare NE, %x, %x, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %x1 = stablehlo.select %q0, %n, %s0 : tensor<i1>, tensor<f32>
    %e1 = stablehlo.compare EQ, %y, %z, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %s1 = stablehlo.select %e1, %z, %y : tensor<i1>, tensor<f32>
    %q1 = stablehlo.compare NE, %y, %y, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %y1 = stablehlo.select %q1, %n, %s1 : tensor<i1>, tensor<f32>
    %c = stablehlo.compare GT, %x1, %y1, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>)";
  const std::string plain = R"(
    %c = stablehlo.compare LT, %y, %x, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %d = stablehlo.not %c : tensor<i1>
    %e = stablehlo.not %d : tensor<i1>)";
  for (const std::string* body : {&canon, &plain})
    check(
        {random_tensor(DType::F32, {5, 300}, rng)},
        "  %0 = \"stablehlo.sort\"(%a0) ({\n  ^bb0(%x: tensor<f32>, %y: tensor<f32>):" + *body +
            "\n    stablehlo.return " + (body == &canon ? "%c" : "%e") +
            " : tensor<i1>\n  }) {dimension = 1 : i64, is_stable = true} : (tensor<5x300xf32>) -> "
            "tensor<5x300xf32>\n  return %0 : tensor<5x300xf32>",
        {5, 300}, DType::F32);
}

TEST_F(CudaVsCpu, ArgmaxReduceAndReduceWindow) {
  HostTensor iota(DType::I32, {4, 3000});
  for (int64_t i = 0; i < iota.size(); ++i)
    iota.data_as<int32_t>()[i] = static_cast<int32_t>(i % 3000);
  check({random_tensor(DType::F32, {4, 3000}, rng), iota},
        R"(  %v0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.reduce(%a0 init: %v0), (%a1 init: %i0) across dimensions = [1] : (tensor<4x3000xf32>, tensor<4x3000xi32>, tensor<f32>, tensor<i32>) -> (tensor<4xf32>, tensor<4xi32>)
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
  return %0#1 : tensor<4xi32>)",
        {4}, DType::I32);
  check({random_tensor(DType::F32, {9, 10}, rng)},
        R"(  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%a0, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {window_dimensions = array<i64: 3, 2>, window_strides = array<i64: 2, 1>, padding = dense<[[1, 1], [0, 1]]> : tensor<2x2xi64>} : (tensor<9x10xf32>, tensor<f32>) -> tensor<5x10xf32>
  return %0 : tensor<5x10xf32>)",
        {5, 10}, DType::F32, 1e-6, 1e-6);
}

TEST_F(CudaVsCpu, WhileLoopAndMixedPrecisionDot) {
  check({random_tensor(DType::F32, {16}, rng)},
        R"(  %i = stablehlo.constant dense<0> : tensor<i32>
  %n = stablehlo.constant dense<5> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %0:2 = stablehlo.while(%k = %i, %x = %a0) : tensor<i32>, tensor<16xf32>
   cond {
    %c = stablehlo.compare LT, %k, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %k1 = stablehlo.add %k, %one : tensor<i32>
    %x1 = stablehlo.multiply %x, %a0 : tensor<16xf32>
    stablehlo.return %k1, %x1 : tensor<i32>, tensor<16xf32>
  }
  return %0#1 : tensor<16xf32>)",
        {16}, DType::F32, 1e-6);
  check(
      {random_tensor(DType::BF16, {2, 8, 32}, rng), random_tensor(DType::BF16, {2, 32, 16}, rng)},
      R"(  %0 = stablehlo.dot_general %a0, %a1, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x8x32xbf16>, tensor<2x32x16xbf16>) -> tensor<2x8x16xf32>
  return %0 : tensor<2x8x16xf32>)",
      {2, 8, 16}, DType::F32, 1e-5, 1e-4);
}

TEST_F(CudaVsCpu, ConvolutionAndTriangularSolve) {
  // feature groups, padding, strides and dilations in one; sums in double on the GPU
  check(
      {random_tensor(DType::F32, {2, 6, 9, 10}, rng), random_tensor(DType::F32, {4, 3, 3, 2}, rng)},
      R"(  %0 = stablehlo.convolution(%a0, %a1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 1], pad = [[1, 1], [0, 2]], rhs_dilate = [1, 2]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<2x6x9x10xf32>, tensor<4x3x3x2xf32>) -> tensor<2x4x5x10xf32>
  return %0 : tensor<2x4x5x10xf32>)",
      {2, 4, 5, 10}, DType::F32, 1e-5, 1e-5);
  // a well-conditioned upper triangle (diagonal 4..), solved from the right
  HostTensor a = random_tensor(DType::F32, {2, 8, 8}, rng);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 8; ++i) {
      float* row = a.data_as<float>() + (b * 8 + i) * 8;
      for (int64_t j = 0; j < 8; ++j)
        if (std::isnan(row[j]) || std::isinf(row[j])) row[j] = 0.5f;
      row[i] = 4.0f + static_cast<float>(i);
    }
  check(
      {a, random_tensor(DType::F32, {2, 10, 8}, rng)},
      R"(  %0 = "stablehlo.triangular_solve"(%a0, %a1) <{left_side = false, lower = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>, unit_diagonal = false}> : (tensor<2x8x8xf32>, tensor<2x10x8xf32>) -> tensor<2x10x8xf32>
  return %0 : tensor<2x10x8xf32>)",
      {2, 10, 8}, DType::F32, 1e-5, 1e-5);
}

// Finite values in [-3, 3]: an FFT spreads a NaN or an infinity over its whole row, where the
// two libraries may give different NaN/infinity patterns.
HostTensor finite_tensor(DType t, Shape shape, std::mt19937& rng) {
  HostTensor out(t, std::move(shape));
  std::uniform_real_distribution<double> u(-3.0, 3.0);
  for (int64_t i = 0; i < out.size(); ++i) {
    if (t == DType::F64)
      out.data_as<double>()[i] = u(rng);
    else
      out.data_as<float>()[i] = static_cast<float>(u(rng));
  }
  return out;
}

// stablehlo.fft through cuFFT (in double, rounded once) against the CPU's kissfft (in double
// too): every kind, 1 to 3 axes, batches, odd and prime lengths, and IRFFT of a spectrum that is
// not Hermitian (the imaginary parts of X[0] and X[n/2] must not count). Complex operands are
// built and taken apart on the device too (complex, real, imag).
TEST_F(CudaVsCpu, FftEveryKindThroughCufft) {
  struct Case {
    DType t;
    std::string kind, length;
    Shape in, out;  // the complex side as its two parts; the real side as it is
  };
  const Case cases[] = {
      {DType::F32, "FFT", "[8, 12]", {3, 8, 12}, {3, 8, 12}},
      {DType::F64, "IFFT", "[17]", {4, 17}, {4, 17}},
      {DType::F32, "IFFT", "[3, 5, 7]", {2, 3, 5, 7}, {2, 3, 5, 7}},
      {DType::F32, "RFFT", "[4, 6, 10]", {2, 4, 6, 10}, {2, 4, 6, 6}},
      {DType::F64, "RFFT", "[15]", {6, 15}, {6, 8}},
      {DType::F64, "IRFFT", "[16]", {5, 9}, {5, 16}},
      {DType::F32, "IRFFT", "[6, 11]", {3, 6, 6}, {3, 6, 11}},
  };
  for (const Case& c : cases) {
    const std::string real = std::string(mlir_name(c.t));
    const std::string cplx = "complex<" + real + ">";
    auto tensor = [](const Shape& s, const std::string& e) {
      std::string out = "tensor<";
      for (int64_t d : s) out += std::to_string(d) + "x";
      return out + e + ">";
    };
    const bool real_in = c.kind == "RFFT", real_out = c.kind == "IRFFT";
    std::vector<HostTensor> args{finite_tensor(c.t, c.in, rng)};
    std::string body, operand = "%a0";
    if (!real_in) {
      args.push_back(finite_tensor(c.t, c.in, rng));
      body += "  %c = stablehlo.complex %a0, %a1 : " + tensor(c.in, cplx) + "\n";
      operand = "%c";
    }
    const std::string in_type = tensor(c.in, real_in ? real : cplx);
    const std::string out_type = tensor(c.out, real_out ? real : cplx);
    body += "  %f = stablehlo.fft " + operand + ", type = " + c.kind + ", length = " + c.length +
            " : (" + in_type + ") -> " + out_type + "\n";
    Shape rshape = c.out;
    if (real_out) {
      body += "  return %f : " + tensor(c.out, real);
    } else {
      // real and imaginary parts side by side along the first axis
      rshape[0] *= 2;
      body += "  %re = stablehlo.real %f : (" + out_type + ") -> " + tensor(c.out, real) + "\n";
      body += "  %im = stablehlo.imag %f : (" + out_type + ") -> " + tensor(c.out, real) + "\n";
      body += "  %o = stablehlo.concatenate %re, %im, dim = 0 : (" + tensor(c.out, real) + ", " +
              tensor(c.out, real) + ") -> " + tensor(rshape, real) + "\n";
      body += "  return %o : " + tensor(rshape, real);
    }
    // Both round a double-precision result once; outputs near zero carry the sum's error.
    check(args, body, rshape, c.t, c.t == DType::F64 ? 1e-13 : 3e-7,
          c.t == DType::F64 ? 1e-12 : 2e-6);
  }
}

// Complex arithmetic, a sum and data movement on the device (complex.cu, and the byte-moving
// kernels with 8- and 16-byte elements) against the CPU backend: the formulas are
// backends/common/complex_math.h's, which complex_test checks against the CPU's on the host.
TEST_F(CudaVsCpu, ComplexArithmeticAndDataMovement) {
  for (DType t : {DType::F32, DType::F64}) {
    const std::string r = std::string(mlir_name(t)), c = "complex<" + r + ">";
    auto ty = [](const std::string& shape, const std::string& e) {
      return "tensor<" + shape + "x" + e + ">";
    };
    const std::string c34 = ty("3x4", c), c43 = ty("4x3", c), r34 = ty("3x4", r);
    const std::string body =
        "  %z = stablehlo.complex %a0, %a1 : " + c34 + "\n" +
        "  %w = stablehlo.complex %a1, %a2 : " + c34 + "\n" +
        "  %p = stablehlo.multiply %z, %w : " + c34 + "\n" +
        "  %q = stablehlo.divide %p, %z : " + c34 + "\n" +
        "  %s = stablehlo.subtract %q, %w : " + c34 + "\n" + "  %n = stablehlo.negate %s : " + c34 +
        "\n" + "  %u = stablehlo.add %n, %z : " + c34 + "\n" +
        "  %tr = stablehlo.transpose %u, dims = [1, 0] : (" + c34 + ") -> " + c43 + "\n" +
        "  %b = stablehlo.broadcast_in_dim %tr, dims = [1, 2] : (" + c43 + ") -> " +
        ty("2x4x3", c) + "\n" + "  %sl = stablehlo.slice %b [1:2, 0:4, 0:3] : (" + ty("2x4x3", c) +
        ") -> " + ty("1x4x3", c) + "\n" + "  %rs = stablehlo.reshape %sl : (" + ty("1x4x3", c) +
        ") -> " + c43 + "\n" + "  %back = stablehlo.transpose %rs, dims = [1, 0] : (" + c43 +
        ") -> " + c34 + "\n" + "  %eq = stablehlo.compare EQ, %back, %u : (" + c34 + ", " + c34 +
        ") -> " + ty("3x4", "i1") + "\n" +
        "  %sel = stablehlo.select %eq, %back, %w : " + ty("3x4", "i1") + ", " + c34 + "\n" +
        "  %re = stablehlo.real %sel : (" + c34 + ") -> " + r34 + "\n" +
        "  %im = stablehlo.imag %sel : (" + c34 + ") -> " + r34 + "\n" +
        "  %ab = stablehlo.abs %p : (" + c34 + ") -> " + r34 + "\n" +
        "  %zero = stablehlo.constant dense<(0.0, 0.0)> : tensor<" + c + ">\n" +
        "  %sum = stablehlo.reduce(%q init: %zero) applies stablehlo.add across dimensions = [0] "
        ": (" +
        c34 + ", tensor<" + c + ">) -> " + ty("4", c) + "\n" + "  %sr = stablehlo.real %sum : (" +
        ty("4", c) + ") -> " + ty("4", r) + "\n" + "  %si = stablehlo.imag %sum : (" + ty("4", c) +
        ") -> " + ty("4", r) + "\n" + "  %sr2 = stablehlo.reshape %sr : (" + ty("4", r) + ") -> " +
        ty("1x4", r) + "\n" + "  %si2 = stablehlo.reshape %si : (" + ty("4", r) + ") -> " +
        ty("1x4", r) + "\n" +
        "  %o = stablehlo.concatenate %re, %im, %ab, %sr2, %si2, dim = 0 : (" + r34 + ", " + r34 +
        ", " + r34 + ", " + ty("1x4", r) + ", " + ty("1x4", r) + ") -> " + ty("11x4", r) + "\n" +
        "  return %o : " + ty("11x4", r);
    check({finite_tensor(t, {3, 4}, rng), finite_tensor(t, {3, 4}, rng),
           finite_tensor(t, {3, 4}, rng)},
          body, {11, 4}, t, t == DType::F64 ? 1e-14 : 3e-7, t == DType::F64 ? 1e-13 : 1e-6);
  }
}

// Values over the narrow formats' whole range: magnitudes 2^-30 .. 2^20 (subnormals, overflow
// and E8M0's large exponents included), ties and the specials.
HostTensor narrow_range_tensor(DType t, int64_t n, std::mt19937& rng) {
  HostTensor out(t, {n});
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::uniform_int_distribution<int> e(-30, 20);
  const double specials[] = {0.0, -0.0, NAN,   -NAN,  INFINITY, -INFINITY, 0.5,
                             1.5, 2.5,  448.0, 464.0, 57344.0,  61440.0};
  for (int64_t i = 0; i < n; ++i) {
    double v = std::ldexp(1.0 + u(rng), e(rng)) * ((rng() & 1) ? -1 : 1);
    if (i % 7 == 3) v = std::ldexp(std::round(u(rng) * 64) + 0.5, e(rng) % 4);  // ties
    if (i < static_cast<int64_t>(std::size(specials))) v = specials[i];
    if (t == DType::F64)
      out.data_as<double>()[i] = v;
    else
      out.data_as<float>()[i] = static_cast<float>(v);
  }
  return out;
}

// The converts that keep narrow values (int4, float8_e4m3fn, ...; everything else computes on
// wide types between them) run on the device with the CPU's rounding, bit for bit: every float
// format from and back to f32 and f64, and the integers' wrapping and saturation.
TEST_F(CudaVsCpu, NarrowConvertsMatchTheCpuBitForBit) {
  const int64_t n = 4096;
  for (DType fmt : {DType::F8E4M3FN, DType::F8E5M2, DType::F8E4M3FNUZ, DType::F8E5M2FNUZ,
                    DType::F8E4M3B11FNUZ, DType::F8E3M4, DType::F8E4M3, DType::F8E8M0FNU,
                    DType::F6E2M3FN, DType::F6E3M2FN, DType::F4E2M1FN})
    for (DType wide : {DType::F32, DType::F64}) {
      const std::string w = type_str({n}, wide), q = type_str({n}, fmt);
      check({narrow_range_tensor(wide, n, rng)},
            "  %0 = stablehlo.convert %a0 : (" + w + ") -> " + q +
                "\n  %1 = stablehlo.convert %0 : (" + q + ") -> " + w + "\n  return %1 : " + w,
            {n}, wide, 0, 0);
    }
  const std::string f = type_str({n}, DType::F32), i32 = type_str({n}, DType::I32);
  const std::string i4 = type_str({n}, DType::I4), u2 = type_str({n}, DType::U2);
  // f32 -> i4 saturates and truncates; i32 -> i4 wraps; i4 -> ui2 wraps; back out to i32.
  HostTensor ints = random_tensor(DType::I32, {n}, rng);
  check({narrow_range_tensor(DType::F32, n, rng), ints},
        "  %0 = stablehlo.convert %a0 : (" + f + ") -> " + i4 +
            "\n  %1 = stablehlo.convert %a1 : (" + i32 + ") -> " + i4 +
            "\n  %2 = stablehlo.convert %1 : (" + i4 + ") -> " + u2 +
            "\n  %3 = stablehlo.convert %0 : (" + i4 + ") -> " + i32 +
            "\n  %4 = stablehlo.convert %2 : (" + u2 + ") -> " + i32 +
            "\n  %5 = stablehlo.add %3, %4 : " + i32 + "\n  return %5 : " + i32,
        {n}, DType::I32);
}

// Converts between real and complex types, a complex dot_general summed in the operand type and
// a reverse of 16-byte elements: the CPU's bits (finite values).
TEST_F(CudaVsCpu, ComplexDotGeneralAndConverts) {
  const std::string c43 = "tensor<4x3xcomplex<f32>>", c36 = "tensor<3x6xcomplex<f32>>";
  const std::string c46 = "tensor<4x6xcomplex<f32>>", z46 = "tensor<4x6xcomplex<f64>>";
  const std::string f46 = "tensor<4x6xf64>";
  check({random_tensor(DType::I32, {4, 3}, rng), finite_tensor(DType::F32, {3, 6}, rng),
         finite_tensor(DType::F32, {3, 6}, rng)},
        "  %zi = stablehlo.convert %a0 : (tensor<4x3xi32>) -> " + c43 +
            "\n  %w = stablehlo.complex %a1, %a2 : " + c36 +
            "\n  %d = stablehlo.dot_general %zi, %w, contracting_dims = [1] x [0] : (" + c43 +
            ", " + c36 + ") -> " + c46 + "\n  %rv = stablehlo.reverse %d, dims = [0] : " + c46 +
            "\n  %d2 = stablehlo.convert %rv : (" + c46 + ") -> " + z46 +
            "\n  %re = stablehlo.real %d2 : (" + z46 + ") -> " + f46 +
            "\n  %im = stablehlo.imag %d2 : (" + z46 + ") -> " + f46 +
            "\n  %h = stablehlo.convert %d : (" + c46 + ") -> tensor<4x6xf16>" +
            "\n  %h2 = stablehlo.convert %h : (tensor<4x6xf16>) -> " + f46 +
            "\n  %o = stablehlo.concatenate %re, %im, %h2, dim = 0 : (" + f46 + ", " + f46 + ", " +
            f46 + ") -> tensor<12x6xf64>\n  return %o : tensor<12x6xf64>",
        {12, 6}, DType::F64, 0, 0);
}

// The element functions on complex values, in complex<double> on the device (cuda::std's
// functions; the CPU's formulas for expm1, log1p and sign): within a few ULPs of the CPU's
// (complex<double> for complex64, long double for complex128), on values in [-3, 3]^2.
TEST_F(CudaVsCpu, ComplexFunctions) {
  const char* unary[] = {"exponential", "exponential_minus_one",
                         "log",         "log_plus_one",
                         "sqrt",        "rsqrt",
                         "cbrt",        "sign",
                         "sine",        "cosine",
                         "tan",         "tanh",
                         "logistic",    "chlo.sinh",
                         "chlo.cosh",   "chlo.asin",
                         "chlo.acos",   "chlo.atan",
                         "chlo.asinh",  "chlo.acosh",
                         "chlo.atanh"};
  for (DType t : {DType::F32, DType::F64}) {
    const std::string r = std::string(mlir_name(t));
    const std::string c = "tensor<64xcomplex<" + r + ">>", f = "tensor<64x" + r + ">";
    const std::string f2 = "tensor<128x" + r + ">";
    auto body = [&](const std::string& op, bool binary) {
      const std::string name = std::string(op).starts_with("chlo.") ? op : "stablehlo." + op;
      return "  %z = stablehlo.complex %a0, %a1 : " + c +
             "\n  %w = stablehlo.complex %a2, %a3 : " + c + "\n  %y = " + name + " %z" +
             (binary ? ", %w" : "") + " : " + c + "\n  %re = stablehlo.real %y : (" + c + ") -> " +
             f + "\n  %im = stablehlo.imag %y : (" + c + ") -> " + f +
             "\n  %o = stablehlo.concatenate %re, %im, dim = 0 : (" + f + ", " + f + ") -> " + f2 +
             "\n  return %o : " + f2;
    };
    std::vector<HostTensor> args;
    for (int i = 0; i < 4; ++i) args.push_back(finite_tensor(t, {64}, rng));
    const double rtol = t == DType::F64 ? 1e-12 : 1e-5, atol = t == DType::F64 ? 1e-13 : 1e-6;
    for (const char* op : unary) {
      SCOPED_TRACE(op);
      check(args, body(op, false), {128}, t, rtol, atol);
    }
    for (const char* op : {"power", "maximum", "minimum"}) {
      SCOPED_TRACE(op);
      check(args, body(op, true), {128}, t, rtol, atol);
    }
  }
}

// Complex64 reductions with JAX's max body and a sort with a (real, imaginary) comparator, run by
// the region interpreter on the device (it selects and splits complex64 bit patterns): the CPU's
// bits, ties in the real part included.
TEST_F(CudaVsCpu, Complex64ReduceMaxAndSortRegions) {
  const std::string e = "tensor<complex<f32>>", f = "tensor<f32>", i1 = "tensor<i1>";
  const std::string c = "tensor<16x32xcomplex<f32>>", c16 = "tensor<16xcomplex<f32>>";
  const std::string r = "tensor<16x32xf32>", r16 = "tensor<16xf32>", r1 = "tensor<16x1xf32>";
  auto op = [&](const std::string& v, const std::string& name, const std::string& args,
                const std::string& type) {
    return "    " + v + " = " + name + " " + args + " : " + type + "\n";
  };
  auto cmp = [&](const std::string& v, const std::string& dir, const std::string& args,
                 const char* kind) {
    return op(v, "stablehlo.compare " + dir + ",", args + ", " + kind,
              "(" + f + ", " + f + ") -> " + i1);
  };
  const std::string parts = op("%1", "stablehlo.real", "%x", "(" + e + ") -> " + f) +
                            op("%2", "stablehlo.real", "%y", "(" + e + ") -> " + f) +
                            op("%3", "stablehlo.imag", "%x", "(" + e + ") -> " + f) +
                            op("%4", "stablehlo.imag", "%y", "(" + e + ") -> " + f);
  const std::string body =
      "  %z = stablehlo.complex %a0, %a1 : " + c + "\n" +
      "  %ninf = stablehlo.constant dense<(0xFF800000, 0.0)> : " + e + "\n" +
      "  %m = stablehlo.reduce(%z init: %ninf) across dimensions = [1] : (" + c + ", " + e +
      ") -> " + c16 + "\n   reducer(%x: " + e + ", %y: " + e + ")  {\n" + parts +
      cmp("%5", "EQ", "%1, %2", "FLOAT") + cmp("%6", "GT", "%1, %2", "FLOAT") +
      cmp("%7", "GT", "%3, %4", "FLOAT") +
      op("%8", "stablehlo.select", "%5, %7, %6", i1 + ", " + i1) +
      op("%9", "stablehlo.select", "%8, %x, %y", i1 + ", " + e) + "    stablehlo.return %9 : " + e +
      "\n  }\n  %s = \"stablehlo.sort\"(%z) <{dimension = 1 : i64, is_stable = true}> ({\n" +
      "  ^bb0(%x: " + e + ", %y: " + e + "):\n" + parts + cmp("%5", "LT", "%1, %2", "TOTALORDER") +
      cmp("%6", "EQ", "%1, %2", "TOTALORDER") + cmp("%7", "LT", "%3, %4", "TOTALORDER") +
      op("%8", "stablehlo.and", "%6, %7", i1) + op("%9", "stablehlo.or", "%5, %8", i1) +
      "    stablehlo.return %9 : " + i1 + "\n  }) : (" + c + ") -> " + c + "\n" +
      "  %mr = stablehlo.real %m : (" + c16 + ") -> " + r16 + "\n" +
      "  %mi = stablehlo.imag %m : (" + c16 + ") -> " + r16 + "\n" +
      "  %mr2 = stablehlo.reshape %mr : (" + r16 + ") -> " + r1 + "\n" +
      "  %mi2 = stablehlo.reshape %mi : (" + r16 + ") -> " + r1 + "\n" +
      "  %sr = stablehlo.real %s : (" + c + ") -> " + r + "\n" + "  %si = stablehlo.imag %s : (" +
      c + ") -> " + r + "\n" + "  %o = stablehlo.concatenate %sr, %si, %mr2, %mi2, dim = 1 : (" +
      r + ", " + r + ", " + r1 + ", " + r1 +
      ") -> tensor<16x66xf32>\n  return %o : tensor<16x66xf32>";
  // Every third real part rounded to an integer: ties that the imaginary parts decide.
  HostTensor re = finite_tensor(DType::F32, {16, 32}, rng);
  for (int64_t i = 0; i < re.size(); i += 3)
    re.data_as<float>()[i] = std::round(re.data_as<float>()[i]);
  check({re, finite_tensor(DType::F32, {16, 32}, rng)}, body, {16, 66}, DType::F32, 0, 0);
}

// Complex values assigned by scatter (JAX's x.at[i].set) on the device: 8- and 16-byte elements
// moved whole, repeated indices (the last update wins, as on the CPU) and unique ones.
TEST_F(CudaVsCpu, ComplexScatterAssigns) {
  for (DType t : {DType::F32, DType::F64})
    for (const std::string unique : {"false", "true"}) {
      const std::string r = std::string(mlir_name(t)), e = "tensor<complex<" + r + ">>";
      const std::string c = "tensor<20x3xcomplex<" + r + ">>";
      const std::string u = "tensor<8x3xcomplex<" + r + ">>";
      const std::string rr = "tensor<20x3x" + r + ">";
      const HostTensor indices =
          unique == "true"
              ? HostTensor::from_vector(std::vector<int32_t>{0, 3, 19, 7, 12, 5, 1, 18}, {8, 1})
              : random_indices({8, 1}, 0, 5, rng);
      const std::string body =
          "  %z = stablehlo.complex %a0, %a1 : " + c +
          "\n  %w = stablehlo.complex %a3, %a4 : " + u +
          "\n  %0 = \"stablehlo.scatter\"(%z, %a2, %w) ({\n  ^bb0(%x: " + e + ", %y: " + e +
          "):\n    stablehlo.return %y : " + e +
          "\n  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
          "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
          "unique_indices = " +
          unique + "} : (" + c + ", tensor<8x1xi32>, " + u + ") -> " + c +
          "\n  %re = stablehlo.real %0 : (" + c + ") -> " + rr + "\n  %im = stablehlo.imag %0 : (" +
          c + ") -> " + rr + "\n  %o = stablehlo.concatenate %re, %im, dim = 0 : (" + rr + ", " +
          rr + ") -> tensor<40x3x" + r + ">\n  return %o : tensor<40x3x" + r + ">";
      check({finite_tensor(t, {20, 3}, rng), finite_tensor(t, {20, 3}, rng), indices,
             finite_tensor(t, {8, 3}, rng), finite_tensor(t, {8, 3}, rng)},
            body, {40, 3}, t, 0, 0);
    }
}

// Quantized programs (lowered to integer and float ops by compiler/quantized.h) give the CPU's
// stored integers bit for bit: quantize per tensor and per axis, an op on quantized values, and
// dequantize.
TEST_F(CudaVsCpu, QuantizedProgramsMatchTheCpuBitForBit) {
  const std::string f = type_str({512, 4}, DType::F32), i8 = type_str({512, 4}, DType::I8);
  const std::string q =
      "tensor<512x4x!quant.uniform<i8:f32:1, {0.5:0, 0.01:-30, 0.03:12, 2.0:100}>>";
  const std::string p = "tensor<512x4x!quant.uniform<i8<-100:90>:f32, 0.05:3>>";
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);  // past both ends of every range
  std::vector<float> values(512 * 4);
  for (float& v : values) v = u(rng);
  const HostTensor x = HostTensor::from_vector(values, {512, 4});
  check({x},
        "  %0 = stablehlo.uniform_quantize %a0 : (" + f + ") -> " + q +
            "\n  %1 = stablehlo.add %0, %0 : (" + q + ", " + q + ") -> " + p +
            "\n  %2 = stablehlo.bitcast_convert %1 : (" + p + ") -> " + i8 +
            "\n  return %2 : " + i8,
        {512, 4}, DType::I8, 0, 0);
  check({x},
        "  %0 = stablehlo.uniform_quantize %a0 : (" + f + ") -> " + q +
            "\n  %1 = stablehlo.uniform_dequantize %0 : (" + q + ") -> " + f +
            "\n  return %1 : " + f,
        {512, 4}, DType::F32, 0, 0);
}

// compile_spmd on cuda runs collectives over NCCL, one rank per GPU; the same program on as many
// virtual cpu devices is the reference. With one GPU every group has one member: this checks
// the NCCL calls, communicators and device ids, not the rank-block layouts (copy_plan_test
// checks those on the CPU for several ranks).
int spmd_devices() {
  if (!runtime::unavailable_reason("cuda").empty()) return 1;
  return std::min<int>(8, static_cast<int>(runtime::get_backend("cuda").devices().size()));
}

struct SpmdDevices : ::testing::Environment {
  void SetUp() override { runtime::set_num_cpu_devices(spmd_devices()); }
};
const auto* spmd_env = ::testing::AddGlobalTestEnvironment(new SpmdDevices);

std::string reduction(const std::string& op, const std::string& t) {
  return "({\n  ^bb0(%x: tensor<" + t + ">, %y: tensor<" + t + ">):\n    %s = " + op +
         " %x, %y : tensor<" + t + ">\n    stablehlo.return %s : tensor<" + t + ">\n  })";
}

TEST(CudaSpmd, EveryCollectiveMatchesCpu) {
  const int n = spmd_devices();
  const std::string N = std::to_string(n);
  std::string all = "dense<[[";
  for (int d = 0; d < n; ++d) all += (d ? ", " : "") + std::to_string(d);
  all += "]]> : tensor<1x" + N + "xi64>";
  std::string ring = "dense<[";
  for (int d = 0; d < n; ++d)
    ring += std::string(d ? ", " : "") + "[" + std::to_string(d) + ", " +
            std::to_string((d + 1) % n) + "]";
  ring += "]> : tensor<" + N + "x2xi64>";
  const std::string ch = "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>";
  const std::string groups = ch + ", replica_groups = " + all + ", use_global_device_ids";
  const std::string g3 = "tensor<2x" + std::to_string(3 * n) + "xi32>";
  const std::string s4 = "tensor<2x" + std::to_string(4 * n) + "xf32>";
  const std::string t2 = "tensor<2x" + std::to_string(2 * n) + "xf32>";
  const std::string a2 = "tensor<" + std::to_string(2 * n) + "x2xf32>";
  const std::string text =
      "module @collectives attributes {mhlo.num_partitions = " + N +
      " : i32, mhlo.num_replicas = 1 : i32} {\n"
      "func.func public @main(%f: tensor<4x6xf32>, %b: tensor<4x6xbf16>, %i: tensor<2x3xi32>, "
      "%p: tensor<5xi1>, %q: " +
      s4 + ", %t: " + t2 + ") -> (tensor<4x6xf32>, tensor<4x6xbf16>, " + g3 +
      ", tensor<5xi1>, tensor<2x4xf32>, " + a2 +
      ", tensor<4x6xf32>, tensor<2x3xi32>, tensor<ui32>) {\n"
      "  %0 = \"stablehlo.all_reduce\"(%f) <{" +
      groups + "}> " + reduction("stablehlo.add", "f32") +
      " : (tensor<4x6xf32>) -> tensor<4x6xf32>\n" + "  %1 = \"stablehlo.all_reduce\"(%b) <{" +
      groups + "}> " + reduction("stablehlo.maximum", "bf16") +
      " : (tensor<4x6xbf16>) -> tensor<4x6xbf16>\n" +
      "  %2 = \"stablehlo.all_gather\"(%i) <{all_gather_dim = 1 : i64, " + groups +
      "}> : (tensor<2x3xi32>) -> " + g3 + "\n" + "  %3 = \"stablehlo.all_reduce\"(%p) <{" + groups +
      "}> " + reduction("stablehlo.or", "i1") + " : (tensor<5xi1>) -> tensor<5xi1>\n" +
      "  %4 = \"stablehlo.reduce_scatter\"(%q) <{" + groups + ", scatter_dimension = 1 : i64}> " +
      reduction("stablehlo.add", "f32") + " : (" + s4 + ") -> tensor<2x4xf32>\n" +
      "  %5 = \"stablehlo.all_to_all\"(%t) <{" + ch +
      ", concat_dimension = 0 : i64, replica_groups = " + all + ", split_count = " + N +
      " : i64, split_dimension = 1 : i64}> : (" + t2 + ") -> " + a2 + "\n" +
      "  %6 = \"stablehlo.collective_permute\"(%f) <{" + ch + ", source_target_pairs = " + ring +
      "}> : (tensor<4x6xf32>) -> tensor<4x6xf32>\n" +
      "  %7 = \"stablehlo.collective_broadcast\"(%i) <{" + ch + ", replica_groups = " + all +
      "}> : (tensor<2x3xi32>) -> tensor<2x3xi32>\n" +
      "  %8 = stablehlo.partition_id : tensor<ui32>\n" +
      "  return %0, %1, %2, %3, %4, %5, %6, %7, %8 : tensor<4x6xf32>, tensor<4x6xbf16>, " + g3 +
      ", tensor<5xi1>, tensor<2x4xf32>, " + a2 +
      ", tensor<4x6xf32>, tensor<2x3xi32>, tensor<ui32>\n"
      "}\n}\n";
  SCOPED_TRACE(text);
  auto module = ir::parse_module(text);
  std::mt19937 rng(7);
  std::vector<std::vector<HostTensor>> args(n);
  for (auto& a : args)
    a = {random_tensor(DType::F32, {4, 6}, rng),     random_tensor(DType::BF16, {4, 6}, rng),
         random_tensor(DType::I32, {2, 3}, rng),     random_tensor(DType::Bool, {5}, rng),
         random_tensor(DType::F32, {2, 4 * n}, rng), random_tensor(DType::F32, {2, 2 * n}, rng)};
  std::vector<int> ids(n);
  for (int d = 0; d < n; ++d) ids[d] = d;
  const auto cpu =
      runtime::compile_spmd(runtime::get_backend("cpu"), *module, ids)->execute_on_host(args);
  const std::string why = runtime::unavailable_reason("cuda");
  if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
  auto exe = runtime::compile_spmd(runtime::get_backend("cuda"), *module, ids);
  const auto cuda = exe->execute_on_host(args);
  ASSERT_EQ(cuda.size(), cpu.size());
  for (int d = 0; d < n; ++d) {
    ASSERT_EQ(cuda[d].size(), cpu[d].size());
    for (size_t r = 0; r < cpu[d].size(); ++r)
      expect_same(cuda[d][r], cpu[d][r], n > 1 ? default_rtol(cpu[d][r].dtype()) * n : 0, 0,
                  "device " + std::to_string(d) + " result " + std::to_string(r));
  }
  EXPECT_GT(exe->last_stats().collective_seconds, 0.0);
  // A second execute reuses the communicators and gives the same results.
  const auto again = exe->execute_on_host(args);
  for (int d = 0; d < n; ++d)
    for (size_t r = 0; r < cpu[d].size(); ++r)
      expect_same(again[d][r], cuda[d][r], 0, 0, "again: result " + std::to_string(r));
}

TEST(CudaSpmd, UnsupportedReductionNamesTheOp) {
  const std::string text =
      "module @xor attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
      "func.func public @main(%i: tensor<3xi32>) -> tensor<3xi32> {\n"
      "  %0 = \"stablehlo.all_reduce\"(%i) <{replica_groups = dense<[[0]]> : tensor<1x1xi64>}> " +
      reduction("stablehlo.xor", "i32") + " : (tensor<3xi32>) -> tensor<3xi32>\n" +
      "  return %0 : tensor<3xi32>\n}\n}\n";
  auto module = ir::parse_module(text);
  const std::string why = runtime::unavailable_reason("cuda");
  if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
  try {
    runtime::compile_spmd(runtime::get_backend("cuda"), *module, {0});
    FAIL() << "an xor all_reduce compiled for NCCL";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("stablehlo.all_reduce"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("xor"), std::string::npos) << e.what();
  }
}

// The loader needs no driver: the toolkit's libraries open wherever they are installed.
TEST(CudaLibraries, NcclLoadsAndAMissingLibraryNamesTheFix) {
  try {
    EXPECT_EQ(cuda::nccl().version / 10000, NCCL_MAJOR);
  } catch (const cuda::CudaError& e) {
    GTEST_SKIP() << e.what();  // a machine without NCCL
  }
  try {
    cuda::Library lib("libcujax-no-such-library.so.1", "a test", "install it");
    FAIL() << "a library that does not exist was opened";
  } catch (const cuda::CudaError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot load libcujax-no-such-library.so.1 (a test)"), std::string::npos)
        << what;
    EXPECT_NE(what.find("install it"), std::string::npos) << what;
  }
  void (*fn)() = nullptr;
  cuda::Library nccl_lib("libnccl.so." + std::to_string(NCCL_MAJOR), "a test", "");
  nccl_lib.resolve(fn, "ncclNoSuchFunction");
  EXPECT_EQ(fn, nullptr);
  try {
    nccl_lib.check_resolved();
    FAIL() << "a missing entry point went unreported";
  } catch (const cuda::CudaError& e) {
    EXPECT_NE(std::string(e.what()).find("lacks ncclNoSuchFunction"), std::string::npos)
        << e.what();
  }
}

// Device spans (profiler): each traced run on cuda:0 is a "run on cuda:0" span on the device's
// own track with its ops inside it, timed by the GPU, placed within the host's trace, and
// counted by the doctor as device time.
TEST(CudaProfiler, DeviceSpansTimeEveryOpOfARun) {
  const std::string why = runtime::unavailable_reason("cuda");
  if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
  JitOptions options;
  options.platform = "cuda";
  auto f =
      jit([](const Array& a, const Array& b) { return numpy::tanh(numpy::matmul(a, b)) + 1.0f; },
          options);
  const Array a = numpy::ones({256, 256}), b = numpy::ones({256, 256}) * 0.01f;
  f(a, b).block_until_ready();  // compiled outside the trace
  const auto dir =
      std::filesystem::temp_directory_path() / ("cujax_cuda_profile_" + std::to_string(::getpid()));
  profiler::start_trace(dir.string());
  for (int i = 0; i < 3; ++i) f(a, b).block_until_ready();
  const std::string file = profiler::stop_trace();
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const json::Value trace = json::parse(text.str(), file);
  int64_t track = -1;
  for (const json::Value& e : trace.at("traceEvents").as_array())
    if (e.at("ph").as_string() == "M" && e.at("name").as_string() == "thread_name" &&
        e.at("args").at("name").as_string() == "cuda:0 stream")
      track = e.at("tid").as_int();
  ASSERT_GE(track, 0) << "no cuda:0 stream track in " << file;
  struct Span {
    std::string cat, name;
    double ts, dur;
  };
  std::vector<Span> runs, ops;
  for (const json::Value& e : trace.at("traceEvents").as_array()) {
    if (e.at("ph").as_string() != "X" || e.at("tid").as_int() != track) continue;
    Span s{e.at("cat").as_string(), e.at("name").as_string(), e.at("ts").as_double(),
           e.at("dur").as_double()};
    (s.cat == "device" ? runs : ops).push_back(s);
  }
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_GE(ops.size(), 3u * 2);  // the dot and the fused tanh + 1, per run
  for (const Span& r : runs) {
    EXPECT_GT(r.dur, 0);
    int inside = 0;
    for (const Span& o : ops)
      if (o.ts >= r.ts - 1e-3 && o.ts + o.dur <= r.ts + r.dur + 1e-3) ++inside;
    EXPECT_GE(inside, 2) << "run at " << r.ts;
  }
  // 256^3 multiply-adds take microseconds on any GPU of cc >= 8.0: a run is not a second long.
  for (const Span& r : runs) EXPECT_LT(r.dur, 1e6);
  const profiler::Report report = profiler::diagnose_trace(dir.string());
  EXPECT_GT(report.device_us, 0) << report.str();
  EXPECT_NE(std::find(report.devices.begin(), report.devices.end(), "cuda:0"),
            report.devices.end());
  std::filesystem::remove_all(dir);
}

TEST(CudaPlatform, AvailabilityMatchesReason) {
  const std::string why = runtime::unavailable_reason("cuda");
  const auto platforms = runtime::available_platforms();
  const bool listed = std::find(platforms.begin(), platforms.end(), "cuda") != platforms.end();
  EXPECT_EQ(listed, why.empty()) << why;
  if (!why.empty()) {
    try {
      runtime::get_backend("cuda");
      FAIL() << "get_backend(\"cuda\") succeeded although: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace cujax
