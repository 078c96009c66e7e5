// CPU backend: reduce, reduce_window, select_and_scatter and sort, built as one-op modules with
// the IR builder API. Expected values are worked out by hand (or by a plain loop in the test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

using ir::Attribute;
using ir::Type;
using ir::Value;

template <class T>
HostTensor tensor(const std::vector<T>& v, Shape shape) {
  return HostTensor::from_vector(v, std::move(shape));
}
template <class T>
HostTensor scalar(T v) {
  return HostTensor::from_vector(std::vector<T>{v}, {});
}

// Region builder: a block with typed arguments; ops appended in order.
class RegionBuilder {
 public:
  explicit RegionBuilder(ir::Region& r) : block_(r.add_block()) {}
  Value* arg(DType t) { return block_.add_argument(Type::tensor({}, t)); }
  Value* op(const std::string& name, std::vector<Value*> operands, DType result) {
    return block_.push_back(ir::make_op(name, std::move(operands), {Type::tensor({}, result)}))
        ->result();
  }
  Value* compare(const std::string& dir, Value* a, Value* b, const std::string& type = "") {
    auto o = ir::make_op("stablehlo.compare", {a, b}, {Type::tensor({}, DType::Bool)});
    o->set_attr("comparison_direction", Attribute::enum_attr("comparison_direction", dir));
    if (!type.empty()) o->set_attr("compare_type", Attribute::enum_attr("comparison_type", type));
    return block_.push_back(std::move(o))->result();
  }
  Value* select(Value* p, Value* a, Value* b) {
    return op("stablehlo.select", {p, a, b}, a->type.dtype);
  }
  template <class T>
  Value* constant(T v) {
    auto o = ir::make_op("stablehlo.constant", {}, {Type::tensor({}, dtype_of<T>())});
    o->set_attr("value", Attribute::dense_elements(scalar(v)));
    return block_.push_back(std::move(o))->result();
  }
  Value* push(std::unique_ptr<ir::Operation> o) { return block_.push_back(std::move(o))->result(); }
  void ret(std::vector<Value*> vs) {
    block_.push_back(ir::make_op("stablehlo.return", std::move(vs), {}));
  }

 private:
  ir::Block& block_;
};

// `^bb0(%a, %b): return name(%a, %b)`
void binary_region(ir::Operation& op, const std::string& name, DType t) {
  RegionBuilder r(op.add_region());
  Value* a = r.arg(t);
  Value* b = r.arg(t);
  r.ret({r.op(name, {a, b}, t)});
}

class OneOp {
 public:
  OneOp() : fn_(module_.add_function("main")) {}
  Value* arg(const HostTensor& t) {
    inputs_.push_back(t);
    return fn_.entry().add_argument(Type::tensor(t.shape(), t.dtype()));
  }
  ir::Operation& op(const std::string& name, std::vector<Value*> operands,
                    const std::vector<Type>& results) {
    op_ = fn_.entry().push_back(ir::make_op(name, std::move(operands), results));
    return *op_;
  }
  ir::Module& module() { return module_; }
  std::vector<HostTensor> run() {
    std::vector<Value*> rs;
    for (const auto& r : op_->results) {
      rs.push_back(r.get());
      fn_.result_types.push_back(r->type);
    }
    fn_.entry().push_back(ir::make_op("func.return", rs, {}));
    return runtime::get_backend("cpu").compile(module_)->execute_on_host(inputs_);
  }

 private:
  ir::Module module_;
  ir::Function& fn_;
  std::vector<HostTensor> inputs_;
  ir::Operation* op_ = nullptr;
};

// reduce(input, init) across `dims` with a one-op body.
template <class T>
HostTensor reduce1(const std::string& body, const HostTensor& input, T init,
                   std::vector<int64_t> dims) {
  OneOp m;
  Value* x = m.arg(input);
  Value* i = m.arg(scalar(init));
  Shape out;
  for (size_t d = 0; d < input.shape().size(); ++d)
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end())
      out.push_back(input.shape()[d]);
  auto& op = m.op("stablehlo.reduce", {x, i}, {Type::tensor(out, dtype_of<T>())});
  op.set_attr("dimensions", Attribute::dense_array(dims));
  binary_region(op, body, dtype_of<T>());
  return m.run().at(0);
}

template <class T>
std::vector<T> values(const HostTensor& t) {
  EXPECT_EQ(t.dtype(), dtype_of<T>());
  return t.to_vector<T>();
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// ----------------------------------------------------------------------------------- reduce

TEST(CpuReduce, SumAlongEachDimension) {
  const auto x = tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(values<float>(reduce1<float>("stablehlo.add", x, 0.f, {1})),
            (std::vector<float>{6, 15}));
  EXPECT_EQ(values<float>(reduce1<float>("stablehlo.add", x, 0.f, {0})),
            (std::vector<float>{5, 7, 9}));
  const HostTensor all = reduce1<float>("stablehlo.add", x, 0.f, {0, 1});
  EXPECT_EQ(all.shape(), Shape{});
  EXPECT_EQ(values<float>(all), (std::vector<float>{21}));
  // No reduced dimension: the body still combines init with each element once.
  EXPECT_EQ(values<float>(reduce1<float>("stablehlo.add", x, 10.f, {})),
            (std::vector<float>{11, 12, 13, 14, 15, 16}));
}

TEST(CpuReduce, InitIsCombinedOnce) {
  EXPECT_EQ(
      values<int32_t>(reduce1<int32_t>("stablehlo.add", tensor<int32_t>({1, 2}, {2}), 10, {0})),
      (std::vector<int32_t>{13}));
  // Rank 0 input, nothing reduced.
  EXPECT_EQ(values<int32_t>(reduce1<int32_t>("stablehlo.multiply", scalar<int32_t>(5), 3, {})),
            (std::vector<int32_t>{15}));
}

TEST(CpuReduce, IntegerOverflowWraps) {
  EXPECT_EQ(values<int8_t>(reduce1<int8_t>("stablehlo.add", tensor<int8_t>({100, 100, 100}, {3}),
                                           int8_t{0}, {0})),
            (std::vector<int8_t>{44}));  // 300 - 256
  EXPECT_EQ(values<uint8_t>(reduce1<uint8_t>("stablehlo.add", tensor<uint8_t>({200, 100}, {2}),
                                             uint8_t{0}, {0})),
            (std::vector<uint8_t>{44}));
  EXPECT_EQ(values<int32_t>(reduce1<int32_t>("stablehlo.multiply",
                                             tensor<int32_t>({65536, 65536, 7}, {3}), 1, {0})),
            (std::vector<int32_t>{0}));
  EXPECT_EQ(values<uint16_t>(reduce1<uint16_t>(
                "stablehlo.multiply", tensor<uint16_t>({65535, 65535}, {2}), uint16_t{1}, {0})),
            (std::vector<uint16_t>{1}));  // (2^16 - 1)^2 = 1 mod 2^16
  EXPECT_EQ(values<int64_t>(reduce1<int64_t>(
                "stablehlo.add", tensor<int64_t>({std::numeric_limits<int64_t>::max(), 1}, {2}),
                int64_t{0}, {0})),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(
      values<int16_t>(reduce1<int16_t>(
          "stablehlo.minimum", tensor<int16_t>({-5, 3, -32768, 7}, {4}), int16_t{32767}, {0})),
      (std::vector<int16_t>{-32768}));
  EXPECT_EQ(values<uint32_t>(reduce1<uint32_t>(
                "stablehlo.maximum", tensor<uint32_t>({1, 0xffffffffu, 5}, {3}), 0u, {0})),
            (std::vector<uint32_t>{0xffffffffu}));
}

TEST(CpuReduce, BitwiseAndBooleans) {
  EXPECT_EQ(values<uint8_t>(reduce1<uint8_t>("stablehlo.and", tensor<uint8_t>({0xf3, 0x3f}, {2}),
                                             uint8_t{0xff}, {0})),
            (std::vector<uint8_t>{0x33}));
  EXPECT_EQ(
      values<int32_t>(reduce1<int32_t>("stablehlo.xor", tensor<int32_t>({5, 3, -1}, {3}), 0, {0})),
      (std::vector<int32_t>{~6}));
  const auto b = tensor<bool>({true, false, true, true}, {2, 2});
  EXPECT_EQ(values<bool>(reduce1<bool>("stablehlo.and", b, true, {1})),
            (std::vector<bool>{false, true}));
  EXPECT_EQ(values<bool>(reduce1<bool>("stablehlo.or", b, false, {0})),
            (std::vector<bool>{true, true}));
  // On booleans add is OR, multiply is AND, maximum is OR, minimum is AND.
  EXPECT_EQ(values<bool>(reduce1<bool>("stablehlo.add", b, false, {1})),
            (std::vector<bool>{true, true}));
  EXPECT_EQ(values<bool>(reduce1<bool>("stablehlo.multiply", b, true, {1})),
            (std::vector<bool>{false, true}));
  EXPECT_EQ(values<bool>(reduce1<bool>("stablehlo.maximum", b, false, {0})),
            (std::vector<bool>{true, true}));
  EXPECT_EQ(values<bool>(reduce1<bool>("stablehlo.minimum", b, true, {0})),
            (std::vector<bool>{true, false}));
}

TEST(CpuReduce, FloatMaxMinPropagateNaNAndOrderZeros) {
  auto mx = values<float>(
      reduce1<float>("stablehlo.maximum", tensor<float>({1, kNaN, 3}, {3}), -kInf, {0}));
  EXPECT_TRUE(std::isnan(mx[0]));
  auto mn =
      values<double>(reduce1<double>("stablehlo.minimum", tensor<double>({4, 2, std::nan("")}, {3}),
                                     std::numeric_limits<double>::infinity(), {0}));
  EXPECT_TRUE(std::isnan(mn[0]));
  // IEEE maximum/minimum: -0 < +0.
  auto z = values<float>(
      reduce1<float>("stablehlo.minimum", tensor<float>({0.f, -0.f}, {2}), kInf, {0}));
  EXPECT_EQ(bits_of(z[0]), 0x80000000u);
  z = values<float>(
      reduce1<float>("stablehlo.maximum", tensor<float>({-0.f, 0.f}, {2}), -kInf, {0}));
  EXPECT_EQ(bits_of(z[0]), 0u);
  // Infinities are ordinary values.
  EXPECT_EQ(values<float>(reduce1<float>("stablehlo.maximum", tensor<float>({-kInf, 2, kInf}, {3}),
                                         -kInf, {0})),
            (std::vector<float>{kInf}));
}

TEST(CpuReduce, EmptyInputsGiveInit) {
  auto r = reduce1<float>("stablehlo.add", HostTensor(DType::F32, {0, 3}), 7.f, {0});
  EXPECT_EQ(r.shape(), (Shape{3}));
  EXPECT_EQ(values<float>(r), (std::vector<float>{7, 7, 7}));
  r = reduce1<float>("stablehlo.add", HostTensor(DType::F32, {2, 0}), 7.f, {1});
  EXPECT_EQ(values<float>(r), (std::vector<float>{7, 7}));
  r = reduce1<float>("stablehlo.add", HostTensor(DType::F32, {0, 3}), 7.f, {1});
  EXPECT_EQ(r.shape(), (Shape{0}));
}

TEST(CpuReduce, HalfPrecisionSteps) {
  // bf16 has 8 significant bits: 256 + 1 rounds (to even) back to 256 at every step.
  const auto x = tensor<bfloat16>({bfloat16(256.f), bfloat16(1.f), bfloat16(1.f)}, {3});
  EXPECT_EQ(static_cast<float>(
                values<bfloat16>(reduce1<bfloat16>("stablehlo.add", x, bfloat16(0.f), {0}))[0]),
            256.f);
  const auto h = tensor<float16>({float16(2048.f), float16(1.f), float16(1.f)}, {3});
  EXPECT_EQ(static_cast<float>(
                values<float16>(reduce1<float16>("stablehlo.add", h, float16(0.f), {0}))[0]),
            2048.f);
  const auto m = tensor<float16>({float16(-3.f), float16(0.5f), float16(4.f)}, {3});
  EXPECT_EQ(static_cast<float>(
                values<float16>(reduce1<float16>("stablehlo.maximum", m, float16(-1.f), {0}))[0]),
            4.f);
}

// Non-adjacent dimensions and the middle dimension, checked against a plain loop.
TEST(CpuReduce, StridedDimensionsMatchALoop) {
  const Shape shape{3, 4, 5, 6};
  std::vector<int64_t> data(360);
  for (int64_t i = 0; i < 360; ++i) data[i] = (i * 7919) % 101 - 50;
  const auto x = tensor(data, shape);
  for (const std::vector<int64_t>& dims :
       std::vector<std::vector<int64_t>>{{1}, {0, 2}, {1, 3}, {0, 1, 3}, {2}, {3}, {0}}) {
    std::vector<bool> red(4, false);
    for (int64_t d : dims) red[d] = true;
    Shape out_shape;
    for (int d = 0; d < 4; ++d)
      if (!red[d]) out_shape.push_back(shape[d]);
    std::vector<int64_t> expect(num_elements(out_shape), 1000);
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t b = 0; b < 4; ++b)
        for (int64_t c = 0; c < 5; ++c)
          for (int64_t d = 0; d < 6; ++d) {
            const int64_t idx[4] = {a, b, c, d};
            int64_t o = 0;
            for (int k = 0; k < 4; ++k)
              if (!red[k]) o = o * shape[k] + idx[k];
            expect[o] += data[((a * 4 + b) * 5 + c) * 6 + d];
          }
    EXPECT_EQ(values<int64_t>(reduce1<int64_t>("stablehlo.add", x, int64_t{1000}, dims)), expect)
        << "dims " << dims.size();
  }
}

// Rows reduced along the contiguous last dimension (softmax's sums) are folded several at once;
// each must still add its elements in order, so f32 sums equal a plain loop bit for bit.
TEST(CpuReduce, InnermostRowsFoldInOrder) {
  const Shape shape{3, 5, 37};  // 15 rows: the last group of rows is short
  std::vector<float> data(num_elements(shape));
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = (i % 3 == 0 ? 1e8f : 1.0f) * static_cast<float>(static_cast<int>(i * 7919 % 23) - 11);
  std::vector<float> expect(15);
  for (int64_t r = 0; r < 15; ++r) {
    float acc = 0.5f;
    for (int64_t k = 0; k < 37; ++k) acc += data[r * 37 + k];
    expect[r] = acc;
  }
  const std::vector<float> got =
      values<float>(reduce1<float>("stablehlo.add", tensor(data, shape), 0.5f, {2}));
  ASSERT_EQ(got.size(), expect.size());
  for (size_t r = 0; r < got.size(); ++r) EXPECT_EQ(bits_of(got[r]), bits_of(expect[r])) << r;
}

TEST(CpuReduce, LargeReductionsAreExact) {
  // Split into chunks internally; integer sums must still be exact.
  const int64_t n = 1 << 21;
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  EXPECT_EQ(values<int64_t>(reduce1<int64_t>("stablehlo.add", tensor(v, {n}), int64_t{0}, {0})),
            (std::vector<int64_t>{n * (n - 1) / 2}));
  std::vector<double> d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<double>(i % 1000);
  double expect = 0;
  for (int64_t i = 0; i < n; ++i) expect += d[i];
  EXPECT_EQ(values<double>(reduce1<double>("stablehlo.add", tensor(d, {n}), 0.0, {0}))[0], expect);
  // Few outputs along the outer dimension: [n/2, 2] reduced over dimension 0.
  const auto m = reduce1<int64_t>("stablehlo.add", tensor(v, {n / 2, 2}), int64_t{0}, {0});
  const int64_t half = n / 2;
  EXPECT_EQ(values<int64_t>(m),
            (std::vector<int64_t>{half * (half - 1), half * (half - 1) + half}));
  const auto mx = reduce1<int64_t>("stablehlo.maximum", tensor(v, {4, n / 4}), int64_t{-1}, {1});
  EXPECT_EQ(values<int64_t>(mx),
            (std::vector<int64_t>{n / 4 - 1, n / 2 - 1, 3 * n / 4 - 1, n - 1}));
}

// jnp.argmax's reducer: (value, index) pairs, NaN wins, ties go to the lower index.
void argmax_body(ir::Operation& op, DType vt) {
  RegionBuilder r(op.add_region());
  Value* a = r.arg(vt);
  Value* ai = r.arg(DType::I32);
  Value* b = r.arg(vt);
  Value* bi = r.arg(DType::I32);
  Value* gt = r.compare("GT", a, b, "FLOAT");
  Value* nan = r.compare("NE", a, a, "FLOAT");
  Value* pick_a = r.op("stablehlo.or", {gt, nan}, DType::Bool);
  Value* eq = r.compare("EQ", a, b, "FLOAT");
  Value* lt = r.compare("LT", ai, bi, "SIGNED");
  Value* tie = r.op("stablehlo.and", {eq, lt}, DType::Bool);
  Value* pick_ai = r.op("stablehlo.or", {pick_a, tie}, DType::Bool);
  r.ret({r.select(pick_a, a, b), r.select(pick_ai, ai, bi)});
}

std::vector<int32_t> argmax_rows(const std::vector<float>& v, int64_t rows, int64_t cols) {
  OneOp m;
  Value* x = m.arg(tensor(v, {rows, cols}));
  std::vector<int32_t> iota(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) iota[i] = static_cast<int32_t>(i % cols);
  Value* idx = m.arg(tensor(iota, {rows, cols}));
  Value* init = m.arg(scalar(-kInf));
  Value* init_i = m.arg(scalar<int32_t>(0));
  auto& op = m.op("stablehlo.reduce", {x, idx, init, init_i},
                  {Type::tensor({rows}, DType::F32), Type::tensor({rows}, DType::I32)});
  op.set_attr("dimensions", Attribute::dense_array({1}));
  argmax_body(op, DType::F32);
  return values<int32_t>(m.run().at(1));
}

TEST(CpuReduce, VariadicArgmax) {
  EXPECT_EQ(argmax_rows({1, 5, 2, 5, 3, -1, kNaN, 9, -kInf, -kInf, -kInf, -kInf}, 3, 4),
            (std::vector<int32_t>{1, 2, 0}));
  // Many rows: parallel over outputs.
  const int64_t rows = 5000, cols = 37;
  std::vector<float> v(rows * cols);
  std::vector<int32_t> expect(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = static_cast<float>((r * 31 + c * 17) % 53);
    int32_t best = 0;
    for (int32_t c = 1; c < cols; ++c)
      if (v[r * cols + c] > v[r * cols + best]) best = c;
    expect[r] = best;
  }
  EXPECT_EQ(argmax_rows(v, rows, cols), expect);
}

// A body that ScalarProgram cannot run (a func.call) takes the region-program path.
TEST(CpuReduce, RegionProgramPath) {
  OneOp m;
  Value* x = m.arg(tensor<int32_t>({4, 8, 15, 16, 23, 42}, {2, 3}));
  Value* init = m.arg(scalar<int32_t>(-1));
  auto& op = m.op("stablehlo.reduce", {x, init}, {Type::tensor({2}, DType::I32)});
  op.set_attr("dimensions", Attribute::dense_array({1}));
  // @second(%a, %b) = %b: the reduction keeps the last element.
  ir::Function& second = m.module().add_function("second");
  Value* p0 = second.entry().add_argument(Type::tensor({}, DType::I32));
  Value* p1 = second.entry().add_argument(Type::tensor({}, DType::I32));
  (void)p0;
  second.result_types = {Type::tensor({}, DType::I32)};
  second.entry().push_back(ir::make_op("func.return", {p1}, {}));
  RegionBuilder r(op.add_region());
  Value* a = r.arg(DType::I32);
  Value* b = r.arg(DType::I32);
  auto call = ir::make_op("func.call", {a, b}, {Type::tensor({}, DType::I32)});
  call->set_attr("callee", Attribute::symbol("second"));
  r.ret({r.push(std::move(call))});
  EXPECT_EQ(values<int32_t>(m.run().at(0)), (std::vector<int32_t>{15, 42}));
}

// ----------------------------------------------------------------------------- reduce_window

template <class T>
HostTensor reduce_window1(const std::string& body, const HostTensor& x, T init, Shape out,
                          std::vector<int64_t> window, std::vector<int64_t> strides = {},
                          std::vector<int64_t> bdil = {}, std::vector<int64_t> wdil = {},
                          std::vector<int64_t> padding = {}) {
  OneOp m;
  Value* a = m.arg(x);
  Value* i = m.arg(scalar(init));
  auto& op = m.op("stablehlo.reduce_window", {a, i}, {Type::tensor(out, dtype_of<T>())});
  op.set_attr("window_dimensions", Attribute::dense_array(window));
  if (!strides.empty()) op.set_attr("window_strides", Attribute::dense_array(strides));
  if (!bdil.empty()) op.set_attr("base_dilations", Attribute::dense_array(bdil));
  if (!wdil.empty()) op.set_attr("window_dilations", Attribute::dense_array(wdil));
  if (!padding.empty())
    op.set_attr("padding", Attribute::dense_elements(
                               tensor(padding, {static_cast<int64_t>(padding.size() / 2), 2})));
  binary_region(op, body, dtype_of<T>());
  return m.run().at(0);
}

TEST(CpuReduceWindow, SpecExample) {
  const auto r =
      reduce_window1<int32_t>("stablehlo.add", tensor<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2}), 0,
                              {2, 2}, {2, 1}, {4, 1}, {2, 1}, {3, 1}, {2, 1, 0, 0});
  EXPECT_EQ(values<int32_t>(r), (std::vector<int32_t>{0, 0, 3, 4}));
}

TEST(CpuReduceWindow, CumulativeSumAndMax) {
  // jnp.cumsum lowers to a window as long as the axis with low padding of length - 1.
  EXPECT_EQ(
      values<int32_t>(reduce_window1<int32_t>("stablehlo.add", tensor<int32_t>({1, 2, 3, 4}, {4}),
                                              0, {4}, {4}, {}, {}, {}, {3, 0})),
      (std::vector<int32_t>{1, 3, 6, 10}));
  // Reverse cumulative max along dimension 0 of a 3x2 (high padding).
  EXPECT_EQ(values<int8_t>(reduce_window1<int8_t>(
                "stablehlo.maximum", tensor<int8_t>({1, -5, 3, -7, 2, -6}, {3, 2}), int8_t{-128},
                {3, 2}, {3, 1}, {}, {}, {}, {0, 2, 0, 0})),
            (std::vector<int8_t>{3, -5, 3, -6, 2, -6}));
}

TEST(CpuReduceWindow, MaxPoolWithStrides) {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>((i * 5) % 16);
  // v = [[0,5,10,15],[4,9,14,3],[8,13,2,7],[12,1,6,11]]
  const auto r =
      reduce_window1<float>("stablehlo.maximum", tensor(v, {4, 4}), -kInf, {2, 2}, {2, 2}, {2, 2});
  EXPECT_EQ(values<float>(r), (std::vector<float>{9, 15, 13, 11}));
}

TEST(CpuReduceWindow, PaddingIsInitValue) {
  // The padded input holds init values, which the body combines like any element: 1 + 1 + 5.
  EXPECT_EQ(values<int32_t>(reduce_window1<int32_t>("stablehlo.add", tensor<int32_t>({5}, {1}), 1,
                                                    {1}, {2}, {}, {}, {}, {1, 0})),
            (std::vector<int32_t>{7}));
  // Base dilation holes too: [1, h, 2] windows of 2 with init 0: [1, 2].
  EXPECT_EQ(values<int32_t>(reduce_window1<int32_t>("stablehlo.add", tensor<int32_t>({1, 2}, {2}),
                                                    0, {2}, {2}, {}, {2})),
            (std::vector<int32_t>{1, 2}));
  // Negative padding drops elements: [1,2,3,4] without its first: windows of 2 -> [5, 7].
  EXPECT_EQ(
      values<int32_t>(reduce_window1<int32_t>("stablehlo.add", tensor<int32_t>({1, 2, 3, 4}, {4}),
                                              0, {2}, {2}, {}, {}, {}, {-1, 0})),
      (std::vector<int32_t>{5, 7}));
}

TEST(CpuReduceWindow, EmptyAndRankZero) {
  const auto r = reduce_window1<float>("stablehlo.add", tensor<float>({1, 2}, {2}), 0.f, {0}, {3});
  EXPECT_EQ(r.shape(), (Shape{0}));
  const auto s = reduce_window1<int32_t>("stablehlo.add", scalar<int32_t>(4), 3, {}, {});
  EXPECT_EQ(values<int32_t>(s), (std::vector<int32_t>{7}));
}

TEST(CpuReduceWindow, WindowDilation) {
  // Windows of 2 taps 2 apart over [1..6]: (1+3), (2+4), (3+5), (4+6).
  EXPECT_EQ(values<int64_t>(reduce_window1<int64_t>("stablehlo.add",
                                                    tensor<int64_t>({1, 2, 3, 4, 5, 6}, {6}),
                                                    int64_t{0}, {4}, {2}, {}, {}, {2})),
            (std::vector<int64_t>{4, 6, 8, 10}));
}

TEST(CpuReduceWindow, VariadicWindowArgmax) {
  OneOp m;
  Value* x = m.arg(tensor<float>({3, 1, 4, 1, 5, 9, 2, 6, 5}, {9}));
  Value* idx = m.arg(tensor<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8}, {9}));
  Value* init = m.arg(scalar(-kInf));
  Value* init_i = m.arg(scalar<int32_t>(0));
  auto& op = m.op("stablehlo.reduce_window", {x, idx, init, init_i},
                  {Type::tensor({3}, DType::F32), Type::tensor({3}, DType::I32)});
  op.set_attr("window_dimensions", Attribute::dense_array({3}));
  op.set_attr("window_strides", Attribute::dense_array({3}));
  argmax_body(op, DType::F32);
  const auto r = m.run();
  EXPECT_EQ(values<float>(r[0]), (std::vector<float>{4, 9, 6}));
  EXPECT_EQ(values<int32_t>(r[1]), (std::vector<int32_t>{2, 5, 7}));
}

// ------------------------------------------------------------------------- select_and_scatter

HostTensor select_and_scatter(const HostTensor& operand, const HostTensor& source, int32_t init,
                              const std::string& dir, std::vector<int64_t> window,
                              std::vector<int64_t> strides, std::vector<int64_t> padding) {
  OneOp m;
  Value* a = m.arg(operand);
  Value* s = m.arg(source);
  Value* i = m.arg(scalar(init));
  auto& op =
      m.op("stablehlo.select_and_scatter", {a, s, i}, {Type::tensor(operand.shape(), DType::I32)});
  op.set_attr("window_dimensions", Attribute::dense_array(window));
  op.set_attr("window_strides", Attribute::dense_array(strides));
  op.set_attr("padding", Attribute::dense_elements(
                             tensor(padding, {static_cast<int64_t>(padding.size() / 2), 2})));
  {
    RegionBuilder r(op.add_region());
    Value* x = r.arg(DType::I32);
    Value* y = r.arg(DType::I32);
    r.ret({r.compare(dir, x, y, "SIGNED")});
  }
  binary_region(op, "stablehlo.add", DType::I32);
  return m.run().at(0);
}

TEST(CpuSelectAndScatter, SpecExample) {
  const auto r = select_and_scatter(tensor<int32_t>({1, 5, 2, 5, 3, 6, 4, 4}, {4, 2}),
                                    tensor<int32_t>({5, 6, 7, 8}, {2, 2}), 0, "GE", {3, 1}, {2, 1},
                                    {0, 1, 0, 0});
  EXPECT_EQ(values<int32_t>(r), (std::vector<int32_t>{0, 0, 0, 0, 5, 14, 7, 0}));
}

TEST(CpuSelectAndScatter, TiesAndOverlaps) {
  // Windows of 2, stride 1 over [7, 7, 1]: GE keeps the first of equal values, GT the last.
  const auto operand = tensor<int32_t>({7, 7, 1}, {3});
  const auto source = tensor<int32_t>({10, 20}, {2});
  EXPECT_EQ(values<int32_t>(select_and_scatter(operand, source, 100, "GE", {2}, {1}, {0, 0})),
            (std::vector<int32_t>{110, 120, 100}));
  EXPECT_EQ(values<int32_t>(select_and_scatter(operand, source, 100, "GT", {2}, {1}, {0, 0})),
            (std::vector<int32_t>{100, 130, 100}));
  // A window that holds only padding selects nothing: its source value is dropped.
  EXPECT_EQ(
      values<int32_t>(select_and_scatter(tensor<int32_t>({3}, {1}), tensor<int32_t>({1, 2, 4}, {3}),
                                         0, "GE", {1}, {1}, {1, 1})),
      (std::vector<int32_t>{2}));
}

// ------------------------------------------------------------------------------------- sort

std::vector<HostTensor> sort(const std::vector<HostTensor>& inputs, int64_t dimension,
                             const std::function<void(RegionBuilder&, std::vector<Value*>&)>& cmp) {
  OneOp m;
  std::vector<Value*> args;
  std::vector<Type> types;
  for (const auto& t : inputs) {
    args.push_back(m.arg(t));
    types.push_back(Type::tensor(t.shape(), t.dtype()));
  }
  auto& op = m.op("stablehlo.sort", args, types);
  op.set_attr("dimension", Attribute::integer_attr(dimension, DType::I64));
  op.set_attr("is_stable", Attribute::boolean_attr(true));
  RegionBuilder r(op.add_region());
  std::vector<Value*> params;
  for (const auto& t : inputs) {
    params.push_back(r.arg(t.dtype()));
    params.push_back(r.arg(t.dtype()));
  }
  cmp(r, params);
  return m.run();
}

auto simple_cmp(const std::string& dir, const std::string& type = "") {
  return
      [=](RegionBuilder& r, std::vector<Value*>& p) { r.ret({r.compare(dir, p[0], p[1], type)}); };
}

TEST(CpuSort, SimpleComparators) {
  EXPECT_EQ(values<float>(sort({tensor<float>({3, 1, 2}, {3})}, 0, simple_cmp("LT", "FLOAT"))[0]),
            (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(values<float>(sort({tensor<float>({3, 1, 2}, {3})}, 0, simple_cmp("GT", "FLOAT"))[0]),
            (std::vector<float>{3, 2, 1}));
  EXPECT_EQ(values<uint8_t>(
                sort({tensor<uint8_t>({200, 1, 255, 0}, {4})}, 0, simple_cmp("LT", "UNSIGNED"))[0]),
            (std::vector<uint8_t>{0, 1, 200, 255}));
  EXPECT_EQ(values<int8_t>(
                sort({tensor<int8_t>({-1, 5, -128, 127}, {4})}, 0, simple_cmp("LT", "SIGNED"))[0]),
            (std::vector<int8_t>{-128, -1, 5, 127}));
  EXPECT_EQ(values<bool>(
                sort({tensor<bool>({true, false, true}, {3})}, 0, simple_cmp("LT", "UNSIGNED"))[0]),
            (std::vector<bool>{false, true, true}));
  // Operands swapped in the compare: `rhs < lhs` sorts descending.
  const auto desc =
      sort({tensor<int32_t>({2, 9, 4}, {3})}, 0, [](RegionBuilder& r, std::vector<Value*>& p) {
        r.ret({r.compare("LT", p[1], p[0], "SIGNED")});
      });
  EXPECT_EQ(values<int32_t>(desc[0]), (std::vector<int32_t>{9, 4, 2}));
}

TEST(CpuSort, AlongEachDimension) {
  const auto x = tensor<int32_t>({3, 1, 2, 0, 5, 4}, {2, 3});
  EXPECT_EQ(values<int32_t>(sort({x}, 1, simple_cmp("LT"))[0]),
            (std::vector<int32_t>{1, 2, 3, 0, 4, 5}));
  EXPECT_EQ(values<int32_t>(sort({x}, -1, simple_cmp("LT"))[0]),
            (std::vector<int32_t>{1, 2, 3, 0, 4, 5}));
  EXPECT_EQ(values<int32_t>(sort({x}, 0, simple_cmp("LT"))[0]),
            (std::vector<int32_t>{0, 1, 2, 3, 5, 4}));
  const auto e = sort({HostTensor(DType::F32, {0, 3})}, 0, simple_cmp("LT"));
  EXPECT_EQ(e[0].shape(), (Shape{0, 3}));
}

TEST(CpuSort, KeysCarryValuesStably) {
  const auto r = sort({tensor<int32_t>({2, 1, 2, 1}, {4}), tensor<float>({0, 1, 2, 3}, {4})}, 0,
                      simple_cmp("LT"));
  EXPECT_EQ(values<int32_t>(r[0]), (std::vector<int32_t>{1, 1, 2, 2}));
  EXPECT_EQ(values<float>(r[1]), (std::vector<float>{1, 3, 0, 2}));
}

TEST(CpuSort, TotalOrder) {
  const float neg_nan = -kNaN;
  const auto r = sort({tensor<float>({kNaN, neg_nan, 1, -0.f, 0.f, -kInf}, {6})}, 0,
                      simple_cmp("LT", "TOTALORDER"));
  const auto v = values<float>(r[0]);
  EXPECT_EQ(bits_of(v[0]), bits_of(neg_nan));
  EXPECT_EQ(v[1], -kInf);
  EXPECT_EQ(bits_of(v[2]), 0x80000000u);
  EXPECT_EQ(bits_of(v[3]), 0u);
  EXPECT_EQ(v[4], 1.f);
  EXPECT_EQ(bits_of(v[5]), bits_of(kNaN));
}

// jnp.sort's comparator: -0 becomes +0 and every NaN +NaN before a TOTALORDER compare; then a
// lexicographic compare over two keys (key 1 breaks ties of key 0).
TEST(CpuSort, JaxStyleComparator) {
  const float neg_nan = -kNaN;
  auto canon = [](RegionBuilder& r, Value* x) {
    Value* zero = r.compare("EQ", x, r.constant(0.f), "FLOAT");
    Value* y = r.select(zero, r.constant(0.f), x);
    Value* nan = r.compare("NE", x, x, "FLOAT");
    return r.select(nan, r.constant(kNaN), y);
  };
  const auto r = sort({tensor<float>({kNaN, -0.f, 1, 0.f, -kInf, neg_nan}, {6}),
                       tensor<int32_t>({0, 1, 2, 3, 4, 5}, {6})},
                      0, [&](RegionBuilder& b, std::vector<Value*>& p) {
                        b.ret({b.compare("LT", canon(b, p[0]), canon(b, p[1]), "TOTALORDER")});
                      });
  EXPECT_EQ(values<int32_t>(r[1]), (std::vector<int32_t>{4, 1, 3, 2, 0, 5}));
  const auto v = values<float>(r[0]);
  EXPECT_EQ(bits_of(v[1]), 0x80000000u);  // the elements themselves are not canonicalized
  EXPECT_EQ(bits_of(v[5]), bits_of(neg_nan));

  // Descending by key 0, then ascending by key 1.
  const auto two =
      sort({tensor<int32_t>({1, 2, 1, 2, 1}, {5}), tensor<int32_t>({9, 8, 7, 6, 5}, {5})}, 0,
           [](RegionBuilder& b, std::vector<Value*>& p) {
             Value* gt = b.compare("GT", p[0], p[1], "SIGNED");
             Value* eq = b.compare("EQ", p[0], p[1], "SIGNED");
             Value* lt1 = b.compare("LT", p[2], p[3], "SIGNED");
             b.ret({b.op("stablehlo.or", {gt, b.op("stablehlo.and", {eq, lt1}, DType::Bool)},
                         DType::Bool)});
           });
  EXPECT_EQ(values<int32_t>(two[0]), (std::vector<int32_t>{2, 2, 1, 1, 1}));
  EXPECT_EQ(values<int32_t>(two[1]), (std::vector<int32_t>{6, 8, 5, 7, 9}));
}

TEST(CpuSort, ManyRows) {
  const int64_t rows = 3000, cols = 50;
  std::vector<int64_t> v(rows * cols);
  for (int64_t i = 0; i < rows * cols; ++i) v[i] = (i * 2654435761LL) % 1000;
  auto expect = v;
  for (int64_t r = 0; r < rows; ++r)
    std::sort(expect.begin() + r * cols, expect.begin() + (r + 1) * cols);
  const auto r = sort({tensor(v, {rows, cols})}, 1, [](RegionBuilder& b, std::vector<Value*>& p) {
    // Not a single compare, so it runs on the scalar interpreter.
    Value* lt = b.compare("LT", p[0], p[1], "SIGNED");
    b.ret({b.op("stablehlo.and", {lt, b.compare("NE", p[0], p[1], "SIGNED")}, DType::Bool)});
  });
  EXPECT_EQ(values<int64_t>(r[0]), expect);
}

TEST(CpuReductionErrors, UnsupportedAttributes) {
  OneOp m;
  Value* x = m.arg(tensor<float>({1, 2}, {2}));
  Value* i = m.arg(scalar(0.f));
  auto& op = m.op("stablehlo.reduce", {x, i}, {Type::tensor({}, DType::F32)});
  op.set_attr("dimensions", Attribute::dense_array({3}));
  binary_region(op, "stablehlo.add", DType::F32);
  EXPECT_THROW(m.run(), UnsupportedError);
}

}  // namespace
}  // namespace cujax
