// Tests of the StableHLO verifier: modules built in memory and, once the parser is there,
// parsed text and every conformance program.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/ir/ir.h"
#include "cujax/ir/verifier.h"
#include "ir_builder.h"

// The parser is written alongside the verifier; these tests use it once its source exists
// (the library globs src/*.cpp, so the file being there means it is linked in).
#if __has_include("ir/parser.cpp")
#define CUJAX_HAVE_PARSER 1
#include "cujax/ir/parser.h"
#else
#define CUJAX_HAVE_PARSER 0
#endif

namespace cujax::ir {
namespace {

using namespace testutil;

// ---------------------------------------------------------------------------------------------
// Element-wise ops

TEST(Verifier, AcceptsAValidModule) {
  Builder bld({T({2}), T({2})}, {T({2})});
  Value* s = bld.op("stablehlo.add", {bld.arg(0), bld.arg(1)}, {T({2})})->result();
  Value* p = bld.op("stablehlo.multiply", {s, bld.arg(1)}, {T({2})})->result();
  bld.ret({p});
  EXPECT_NO_THROW(verify(bld.m));
}

TEST(Verifier, ShapeMismatchNamesOperandAndTypes) {
  Builder bld({T({2}), T({3})}, {T({2})});
  Value* s = bld.op("stablehlo.add", {bld.arg(0), bld.arg(1)}, {T({2})}, 7, 10)->result();
  bld.ret({s});
  try {
    verify(bld.m);
    FAIL() << "expected a VerifyError";
  } catch (const VerifyError& e) {
    EXPECT_STREQ(e.what(),
                 "stablehlo.add at 7:10: operand 1 has type tensor<3xf32>, expected "
                 "tensor<2xf32> (same as operand 0)");
  }
}

TEST(Verifier, ResultTypeOfElementwiseOp) {
  Builder bld({T({2}), T({2})}, {T({2}, DType::F64)});
  Value* s = bld.op("stablehlo.subtract", {bld.arg(0), bld.arg(1)}, {T({2}, DType::F64)})->result();
  bld.ret({s});
  expect_error(bld.m, {"stablehlo.subtract", "result 0 has type tensor<2xf64>",
                       "expected tensor<2xf32> (same as operand 0)"});
}

TEST(Verifier, WrongDtypeForShift) {
  Builder bld({T({2}), T({2})}, {T({2})});
  Value* s = bld.op("stablehlo.shift_left", {bld.arg(0), bld.arg(1)}, {T({2})})->result();
  bld.ret({s});
  expect_error(bld.m, {"stablehlo.shift_left: operand 0 has type tensor<2xf32>",
                       "expected a tensor of integer type"});
}

TEST(Verifier, WrongDtypeForLogicalAndTranscendental) {
  {
    Builder bld({T({2}), T({2})}, {T({2})});
    bld.ret({bld.op("stablehlo.and", {bld.arg(0), bld.arg(1)}, {T({2})})->result()});
    expect_error(bld.m, {"stablehlo.and", "expected a tensor of integer or boolean type"});
  }
  {
    Builder bld({T({2}, DType::I32)}, {T({2}, DType::I32)});
    bld.ret({bld.op("stablehlo.sqrt", {bld.arg(0)}, {T({2}, DType::I32)})->result()});
    expect_error(bld.m, {"stablehlo.sqrt", "tensor<2xi32>", "floating-point or complex type"});
  }
  {
    Builder bld({T({2}, DType::Bool), T({2}, DType::Bool)}, {T({2}, DType::Bool)});
    bld.ret({bld.op("stablehlo.xor", {bld.arg(0), bld.arg(1)}, {T({2}, DType::Bool)})->result()});
    EXPECT_NO_THROW(verify(bld.m));
  }
}

TEST(Verifier, CompareGivesI1) {
  Builder bld({T({2}), T({2})}, {T({2})});
  Operation* c = bld.op("stablehlo.compare", {bld.arg(0), bld.arg(1)}, {T({2})});
  c->set_attr("comparison_direction", Attribute::enum_attr("comparison_direction", "LT"));
  bld.ret({c->result()});
  expect_error(bld.m,
               {"stablehlo.compare", "result 0 has type tensor<2xf32>", "expected tensor<2xi1>"});
}

TEST(Verifier, CompareTypeMustFitOperands) {
  Builder bld({T({2}), T({2})}, {T({2}, DType::Bool)});
  Operation* c = bld.op("stablehlo.compare", {bld.arg(0), bld.arg(1)}, {T({2}, DType::Bool)});
  c->set_attr("comparison_direction", Attribute::enum_attr("comparison_direction", "LT"));
  c->set_attr("compare_type", Attribute::enum_attr("comparison_type", "FLOAT"));
  bld.ret({c->result()});
  EXPECT_NO_THROW(verify(bld.m));
  c->set_attr("compare_type", Attribute::enum_attr("comparison_type", "SIGNED"));
  expect_error(bld.m, {"compare_type SIGNED", "tensor<2xf32>"});
  c->set_attr("comparison_direction", Attribute::enum_attr("comparison_direction", "XX"));
  expect_error(bld.m, {"comparison_direction", "XX"});
}

TEST(Verifier, SelectPredicateShape) {
  Builder bld({T({3}, DType::Bool), T({2}), T({2})}, {T({2})});
  bld.ret({bld.op("stablehlo.select", {bld.arg(0), bld.arg(1), bld.arg(2)}, {T({2})})->result()});
  expect_error(bld.m,
               {"stablehlo.select", "operand 0 has type tensor<3xi1>", "expected tensor<2xi1>"});
}

TEST(Verifier, SelectAcceptsScalarPredicate) {
  Builder bld({T({}, DType::Bool), T({2}), T({2})}, {T({2})});
  bld.ret({bld.op("stablehlo.select", {bld.arg(0), bld.arg(1), bld.arg(2)}, {T({2})})->result()});
  EXPECT_NO_THROW(verify(bld.m));
}

TEST(Verifier, Clamp) {
  Builder bld({T({}), T({4}), T({3})}, {T({4})});
  bld.ret({bld.op("stablehlo.clamp", {bld.arg(0), bld.arg(1), bld.arg(2)}, {T({4})})->result()});
  expect_error(bld.m, {"stablehlo.clamp", "operand 2 has type tensor<3xf32>"});
}

TEST(Verifier, BitcastConvertWidths) {
  {
    Builder bld({T({2, 3}, DType::F32)}, {T({2, 3}, DType::U32)});
    bld.ret({bld.op("stablehlo.bitcast_convert", {bld.arg(0)}, {T({2, 3}, DType::U32)})->result()});
    EXPECT_NO_THROW(verify(bld.m));
  }
  {
    Builder bld({T({2}, DType::F32)}, {T({2, 4}, DType::U8)});
    bld.ret({bld.op("stablehlo.bitcast_convert", {bld.arg(0)}, {T({2, 4}, DType::U8)})->result()});
    EXPECT_NO_THROW(verify(bld.m));
  }
  {
    Builder bld({T({3}, DType::F32)}, {T({}, DType::F64)});
    bld.ret({bld.op("stablehlo.bitcast_convert", {bld.arg(0)}, {T({}, DType::F64)})->result()});
    expect_error(bld.m, {"stablehlo.bitcast_convert", "tensor<3xf32>", "last dimension of 2"});
  }
  {
    Builder bld({T({2}, DType::F32)}, {T({2}, DType::F16)});
    bld.ret({bld.op("stablehlo.bitcast_convert", {bld.arg(0)}, {T({2}, DType::F16)})->result()});
    expect_error(bld.m, {"result 0 has type tensor<2xf16>", "expected tensor<2x2xf16>"});
  }
}

// ---------------------------------------------------------------------------------------------
// Shape ops

TEST(Verifier, TransposePermutation) {
  Builder bld({T({2, 3})}, {T({3, 2})});
  Operation* t = bld.op("stablehlo.transpose", {bld.arg(0)}, {T({3, 2})}, 4, 5);
  t->set_attr("permutation", Attribute::dense_array({1, 0}));
  bld.ret({t->result()});
  EXPECT_NO_THROW(verify(bld.m));
  t->set_attr("permutation", Attribute::dense_array({0, 0}));
  expect_error(bld.m, {"stablehlo.transpose at 4:5: permutation = [0, 0] is not a permutation",
                       "tensor<2x3xf32>"});
  t->set_attr("permutation", Attribute::dense_array({0, 1}));
  expect_error(bld.m, {"result 0 has type tensor<3x2xf32>", "expected tensor<2x3xf32>"});
  t->attributes.clear();
  expect_error(bld.m, {"missing attribute 'permutation'"});
}

TEST(Verifier, BroadcastInDim) {
  Builder bld({T({3})}, {T({2, 3})});
  Operation* b = bld.op("stablehlo.broadcast_in_dim", {bld.arg(0)}, {T({2, 3})});
  b->set_attr("broadcast_dimensions", Attribute::dense_array({1}));
  bld.ret({b->result()});
  EXPECT_NO_THROW(verify(bld.m));
  b->set_attr("broadcast_dimensions", Attribute::dense_array({0}));
  expect_error(bld.m, {"operand 0 dimension 0 has size 3, expected 1 or 2"});
  b->set_attr("broadcast_dimensions", Attribute::dense_array({2}));
  expect_error(bld.m, {"broadcast_dimensions = [2] has 2, out of range [0, 2)"});
  b->set_attr("broadcast_dimensions", Attribute::dense_array({0, 1}));
  expect_error(bld.m, {"broadcast_dimensions has 2 elements, expected 1"});
}

TEST(Verifier, ReshapeElementCount) {
  Builder bld({T({2, 3})}, {T({4})});
  bld.ret({bld.op("stablehlo.reshape", {bld.arg(0)}, {T({4})})->result()});
  expect_error(bld.m, {"stablehlo.reshape", "tensor<4xf32> with 4 elements, expected 6"});
}

TEST(Verifier, Slice) {
  Builder bld({T({10, 4})}, {T({3, 4})});
  Operation* s = bld.op("stablehlo.slice", {bld.arg(0)}, {T({3, 4})});
  s->set_attr("start_indices", Attribute::dense_array({1, 0}));
  s->set_attr("limit_indices", Attribute::dense_array({8, 4}));
  s->set_attr("strides", Attribute::dense_array({3, 1}));
  bld.ret({s->result()});
  EXPECT_NO_THROW(verify(bld.m));
  s->set_attr("limit_indices", Attribute::dense_array({11, 4}));
  expect_error(bld.m, {"dimension 0 slices [1, 11)"});
  s->set_attr("limit_indices", Attribute::dense_array({8, 4}));
  s->set_attr("strides", Attribute::dense_array({0, 1}));
  expect_error(bld.m, {"strides = [0, 1] has 0, expected > 0"});
  s->set_attr("strides", Attribute::dense_array({2, 1}));
  expect_error(bld.m, {"result 0 has type tensor<3x4xf32>, expected tensor<4x4xf32>"});
}

TEST(Verifier, Pad) {
  Builder bld({T({2, 3}), T({})}, {T({6, 4})});
  Operation* p = bld.op("stablehlo.pad", {bld.arg(0), bld.arg(1)}, {T({6, 4})});
  p->set_attr("edge_padding_low", Attribute::dense_array({1, 0}));
  p->set_attr("edge_padding_high", Attribute::dense_array({2, 1}));
  p->set_attr("interior_padding", Attribute::dense_array({1, 0}));
  bld.ret({p->result()});
  EXPECT_NO_THROW(verify(bld.m));
  p->set_attr("interior_padding", Attribute::dense_array({0, 0}));
  expect_error(bld.m,
               {"stablehlo.pad", "result 0 has type tensor<6x4xf32>", "expected tensor<5x4xf32>"});
}

TEST(Verifier, Concatenate) {
  Builder bld({T({3, 2}), T({1, 2})}, {T({4, 2})});
  Operation* c = bld.op("stablehlo.concatenate", {bld.arg(0), bld.arg(1)}, {T({4, 2})});
  c->set_attr("dimension", Attribute::integer_attr(0, DType::I64));
  bld.ret({c->result()});
  EXPECT_NO_THROW(verify(bld.m));
  c->set_attr("dimension", Attribute::integer_attr(1, DType::I64));
  expect_error(bld.m, {"operand 1 has type tensor<1x2xf32>", "except in dimension 1"});
  c->set_attr("dimension", Attribute::integer_attr(2, DType::I64));
  expect_error(bld.m, {"dimension = 2 is out of range"});
}

TEST(Verifier, IotaDimension) {
  Builder bld({}, {T({4}, DType::I32)});
  Operation* i = bld.op("stablehlo.iota", {}, {T({4}, DType::I32)});
  i->set_attr("iota_dimension", Attribute::integer_attr(0, DType::I64));
  bld.ret({i->result()});
  EXPECT_NO_THROW(verify(bld.m));
  i->set_attr("iota_dimension", Attribute::integer_attr(1, DType::I64));
  expect_error(bld.m, {"iota_dimension = 1 is out of range for result type tensor<4xi32>"});
}

TEST(Verifier, DynamicSliceAndUpdate) {
  Builder bld({T({5, 3}), T({}, DType::I64), T({}, DType::I64), T({2, 1})}, {T({2, 1}), T({5, 3})});
  Operation* s =
      bld.op("stablehlo.dynamic_slice", {bld.arg(0), bld.arg(1), bld.arg(2)}, {T({2, 1})});
  s->set_attr("slice_sizes", Attribute::dense_array({2, 1}));
  Operation* u = bld.op("stablehlo.dynamic_update_slice",
                        {bld.arg(0), bld.arg(3), bld.arg(1), bld.arg(2)}, {T({5, 3})});
  bld.ret({s->result(), u->result()});
  EXPECT_NO_THROW(verify(bld.m));
  s->set_attr("slice_sizes", Attribute::dense_array({6, 1}));
  expect_error(bld.m, {"slice_sizes = [6, 1] does not fit in operand 0, tensor<5x3xf32>"});
  s->set_attr("slice_sizes", Attribute::dense_array({2, 1}));
  u->operands[2] = bld.arg(3);
  expect_error(bld.m, {"stablehlo.dynamic_update_slice: operand 2 has type tensor<2x1xf32>",
                       "0-dimensional integer tensor"});
}

TEST(Verifier, Reverse) {
  Builder bld({T({3, 2})}, {T({3, 2})});
  Operation* r = bld.op("stablehlo.reverse", {bld.arg(0)}, {T({3, 2})});
  r->set_attr("dimensions", Attribute::dense_array({1, 1}));
  bld.ret({r->result()});
  expect_error(bld.m, {"dimensions = [1, 1] repeats 1"});
}

TEST(Verifier, ConstantAttributeType) {
  Builder bld({}, {T({3})});
  Operation* c = bld.op("stablehlo.constant", {}, {T({3})});
  c->set_attr("value", Attribute::dense_elements(HostTensor::from_vector<float>({1, 2}, {2})));
  bld.ret({c->result()});
  expect_error(bld.m, {"stablehlo.constant: attribute 'value' has type tensor<2xf32>, expected "
                       "tensor<3xf32> (the result type)"});
  c->set_attr("value", Attribute::dense_elements(HostTensor::from_vector<float>({1, 2, 3}, {3})));
  EXPECT_NO_THROW(verify(bld.m));
}

// ---------------------------------------------------------------------------------------------
// Ops with regions

Operation* make_reduce(Builder& bld, Value* in, Value* init, const Type& result) {
  Operation* r = bld.op("stablehlo.reduce", {in, init}, {result});
  r->set_attr("dimensions", Attribute::dense_array({1}));
  add_binary_body(r, "stablehlo.add", DType::F32);
  return r;
}

TEST(Verifier, ReduceShapesAndBody) {
  Builder bld({T({4, 3}), T({})}, {T({4})});
  Operation* r = make_reduce(bld, bld.arg(0), bld.arg(1), T({4}));
  bld.ret({r->result()});
  EXPECT_NO_THROW(verify(bld.m));
  r->set_attr("dimensions", Attribute::dense_array({0}));
  expect_error(bld.m, {"stablehlo.reduce",
                       "result 0 has type tensor<4xf32>, expected "
                       "tensor<3xf32> (input 0 reduced across [0])"});
  r->set_attr("dimensions", Attribute::dense_array({1}));
  r->regions.clear();
  add_binary_body(r, "stablehlo.add", DType::I32);
  expect_error(bld.m, {"region 'body' argument 0 has type tensor<i32>, expected tensor<f32>"});
}

TEST(Verifier, ReduceBodyMustReturn) {
  Builder bld({T({4, 3}), T({})}, {T({4})});
  Operation* r = bld.op("stablehlo.reduce", {bld.arg(0), bld.arg(1)}, {T({4})});
  r->set_attr("dimensions", Attribute::dense_array({1}));
  Block& blk = add_region(r, {T({}), T({})});
  blk.push_back(
      make_op("stablehlo.add", {blk.arguments[0].get(), blk.arguments[1].get()}, {T({})}));
  bld.ret({r->result()});
  expect_error(bld.m, {"region 'body' must end with stablehlo.return, found stablehlo.add"});
}

TEST(Verifier, ReduceWindow) {
  const Type i32 = T({}, DType::I32);
  Builder bld({T({3, 2}, DType::I32), i32}, {T({2, 2}, DType::I32)});
  Operation* r =
      bld.op("stablehlo.reduce_window", {bld.arg(0), bld.arg(1)}, {T({2, 2}, DType::I32)});
  r->set_attr("window_dimensions", Attribute::dense_array({2, 1}));
  r->set_attr("window_strides", Attribute::dense_array({4, 1}));
  r->set_attr("base_dilations", Attribute::dense_array({2, 1}));
  r->set_attr("window_dilations", Attribute::dense_array({3, 1}));
  r->set_attr("padding",
              Attribute::dense_elements(HostTensor::from_vector<int64_t>({2, 1, 0, 0}, {2, 2})));
  add_binary_body(r, "stablehlo.add", DType::I32);
  bld.ret({r->result()});
  EXPECT_NO_THROW(verify(bld.m));
  r->set_attr("window_strides", Attribute::dense_array({1, 1}));
  expect_error(bld.m, {"stablehlo.reduce_window", "expected tensor<5x2xi32>"});
  r->set_attr("window_strides", Attribute::dense_array({4, 1}));
  r->set_attr("padding",
              Attribute::dense_elements(HostTensor::from_vector<int64_t>({2, 1}, {1, 2})));
  expect_error(bld.m, {"attribute 'padding' has 2 values, expected 2x2"});
}

TEST(Verifier, SelectAndScatter) {
  Builder bld({T({4, 6}), T({2, 2}), T({})}, {T({4, 6})});
  Operation* s =
      bld.op("stablehlo.select_and_scatter", {bld.arg(0), bld.arg(1), bld.arg(2)}, {T({4, 6})});
  s->set_attr("window_dimensions", Attribute::dense_array({2, 3}));
  s->set_attr("window_strides", Attribute::dense_array({2, 3}));
  Block& sel = add_region(s, {T({}), T({})});
  Operation* ge = sel.push_back(make_op(
      "stablehlo.compare", {sel.arguments[0].get(), sel.arguments[1].get()}, {T({}, DType::Bool)}));
  ge->set_attr("comparison_direction", Attribute::enum_attr("comparison_direction", "GE"));
  sel.push_back(make_op("stablehlo.return", {ge->result()}, {}));
  add_binary_body(s, "stablehlo.add", DType::F32);
  bld.ret({s->result()});
  EXPECT_NO_THROW(verify(bld.m));
  s->set_attr("window_strides", Attribute::dense_array({1, 1}));
  expect_error(bld.m, {"operand 1 has type tensor<2x2xf32>, expected tensor<3x4xf32>"});
}

TEST(Verifier, SortComparator) {
  Builder bld({T({5}), T({5}, DType::I32)}, {T({5}), T({5}, DType::I32)});
  Operation* s = bld.op("stablehlo.sort", {bld.arg(0), bld.arg(1)}, {T({5}), T({5}, DType::I32)});
  s->set_attr("dimension", Attribute::integer_attr(0, DType::I64));
  Block& cmp = add_region(s, {T({}), T({}), T({}, DType::I32), T({}, DType::I32)});
  Operation* lt = cmp.push_back(make_op(
      "stablehlo.compare", {cmp.arguments[0].get(), cmp.arguments[1].get()}, {T({}, DType::Bool)}));
  lt->set_attr("comparison_direction", Attribute::enum_attr("comparison_direction", "LT"));
  cmp.push_back(make_op("stablehlo.return", {lt->result()}, {}));
  bld.ret({s->result(0), s->result(1)});
  EXPECT_NO_THROW(verify(bld.m));
  s->set_attr("dimension", Attribute::integer_attr(1, DType::I64));
  expect_error(bld.m, {"dimension = 1 is out of range"});
}

// while (i < n) i = i + 1, with n from the enclosing function.
TEST(Verifier, WhileRegionsAndOuterValues) {
  const Type i64 = T({}, DType::I64);
  Builder bld({i64, i64}, {i64});
  Operation* w = bld.op("stablehlo.while", {bld.arg(0)}, {i64});
  Block& cond = add_region(w, {i64});
  Operation* lt = cond.push_back(
      make_op("stablehlo.compare", {cond.arguments[0].get(), bld.arg(1)}, {T({}, DType::Bool)}));
  lt->set_attr("comparison_direction", Attribute::enum_attr("comparison_direction", "LT"));
  Operation* cond_ret = cond.push_back(make_op("stablehlo.return", {lt->result()}, {}));
  Block& body = add_region(w, {i64});
  Operation* inc =
      body.push_back(make_op("stablehlo.add", {body.arguments[0].get(), bld.arg(1)}, {i64}));
  body.push_back(make_op("stablehlo.return", {inc->result()}, {}));
  bld.ret({w->result()});
  EXPECT_NO_THROW(verify(bld.m));
  cond_ret->operands[0] = cond.arguments[0].get();
  expect_error(bld.m,
               {"stablehlo.while", "region 'cond' returns (tensor<i64>)", "expected (tensor<i1>)"});
}

TEST(Verifier, CaseBranches) {
  Builder bld({T({}, DType::I32), T({2})}, {T({2})});
  Operation* c = bld.op("stablehlo.case", {bld.arg(0)}, {T({2})});
  for (int i = 0; i < 2; ++i) {
    Block& br = add_region(c, {});
    br.push_back(make_op("stablehlo.return", {bld.arg(1)}, {}));
  }
  bld.ret({c->result()});
  EXPECT_NO_THROW(verify(bld.m));
  c->regions[1]->front().ops.back()->operands[0] = bld.arg(0);
  expect_error(bld.m, {"region 'branch 1' returns (tensor<i32>)", "expected (tensor<2xf32>)"});
}

// ---------------------------------------------------------------------------------------------
// Contractions, gather and scatter

AttrRef dot_dims(std::vector<int64_t> lb, std::vector<int64_t> rb, std::vector<int64_t> lc,
                 std::vector<int64_t> rc) {
  return Attribute::struct_attr("stablehlo.dot",
                                {{"lhs_batching_dimensions", Attribute::int_list(lb)},
                                 {"rhs_batching_dimensions", Attribute::int_list(rb)},
                                 {"lhs_contracting_dimensions", Attribute::int_list(lc)},
                                 {"rhs_contracting_dimensions", Attribute::int_list(rc)}});
}

TEST(Verifier, DotGeneralMatmul) {
  Builder bld({T({4, 3}), T({3, 6})}, {T({4, 6})});
  Operation* d = bld.op("stablehlo.dot_general", {bld.arg(0), bld.arg(1)}, {T({4, 6})});
  d->set_attr("dot_dimension_numbers", dot_dims({}, {}, {1}, {0}));
  bld.ret({d->result()});
  EXPECT_NO_THROW(verify(bld.m));
  d->set_attr("dot_dimension_numbers", dot_dims({}, {}, {0}, {0}));
  expect_error(bld.m, {"stablehlo.dot_general",
                       "contracting dimension 0 of lhs tensor<4x3xf32> "
                       "has size 4 but dimension 0 of rhs tensor<3x6xf32> has size 3"});
  d->set_attr("dot_dimension_numbers", dot_dims({}, {}, {1}, {0, 1}));
  expect_error(bld.m, {"lhs_contracting_dimensions = [1] and rhs_contracting_dimensions = [0, 1] "
                       "differ in length"});
  d->set_attr("dot_dimension_numbers", dot_dims({}, {}, {2}, {0}));
  expect_error(bld.m, {"lhs_contracting_dimensions = [2] has 2, out of range [0, 2)"});
  d->set_attr("dot_dimension_numbers", dot_dims({1}, {0}, {1}, {0}));
  expect_error(bld.m, {"lhs batching and contracting dimensions = [1, 1] repeats 1"});
}

TEST(Verifier, DotGeneralBatched) {
  Builder bld({T({2, 4, 3}), T({2, 3, 5})}, {T({2, 4, 5})});
  Operation* d = bld.op("stablehlo.dot_general", {bld.arg(0), bld.arg(1)}, {T({2, 4, 5})});
  d->set_attr("dot_dimension_numbers", dot_dims({0}, {0}, {2}, {1}));
  bld.ret({d->result()});
  EXPECT_NO_THROW(verify(bld.m));
  d->set_attr("dot_dimension_numbers", dot_dims({0}, {2}, {2}, {1}));
  expect_error(bld.m, {"batching dimension 0 of lhs tensor<2x4x3xf32> has size 2 but dimension 2 "
                       "of rhs tensor<2x3x5xf32> has size 5"});
  d->set_attr("dot_dimension_numbers", dot_dims({}, {}, {2}, {1}));
  expect_error(bld.m, {"result 0 has type tensor<2x4x5xf32>, expected tensor<2x4x2x5xf32>"});
}

TEST(Verifier, Convolution) {
  const DType i32 = DType::I32;
  Builder bld({T({1, 4, 4, 1}, i32), T({3, 3, 1, 1}, i32)}, {T({1, 2, 2, 1}, i32)});
  Operation* c = bld.op("stablehlo.convolution", {bld.arg(0), bld.arg(1)}, {T({1, 2, 2, 1}, i32)});
  c->set_attr("window_strides", Attribute::dense_array({4, 4}));
  c->set_attr("lhs_dilation", Attribute::dense_array({2, 2}));
  auto num = [](int64_t v) { return Attribute::integer_attr(v, std::nullopt); };
  c->set_attr("dimension_numbers",
              Attribute::struct_attr("stablehlo.conv",
                                     {{"input_batch_dimension", num(0)},
                                      {"input_feature_dimension", num(3)},
                                      {"input_spatial_dimensions", Attribute::int_list({1, 2})},
                                      {"kernel_input_feature_dimension", num(2)},
                                      {"kernel_output_feature_dimension", num(3)},
                                      {"kernel_spatial_dimensions", Attribute::int_list({0, 1})},
                                      {"output_batch_dimension", num(0)},
                                      {"output_feature_dimension", num(3)},
                                      {"output_spatial_dimensions", Attribute::int_list({1, 2})}}));
  c->set_attr("feature_group_count", Attribute::integer_attr(1, DType::I64));
  c->set_attr("batch_group_count", Attribute::integer_attr(1, DType::I64));
  bld.ret({c->result()});
  EXPECT_NO_THROW(verify(bld.m));
  c->set_attr("dimension_numbers",
              Attribute::opaque("#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>"));
  EXPECT_NO_THROW(verify(bld.m));
  c->set_attr("window_strides", Attribute::dense_array({1, 1}));
  expect_error(bld.m, {"stablehlo.convolution", "expected tensor<1x5x5x1xi32>"});
  c->set_attr("window_strides", Attribute::dense_array({4, 4}));
  c->set_attr("feature_group_count", Attribute::integer_attr(2, DType::I64));
  expect_error(bld.m, {"not a multiple of feature_group_count = 2"});
}

AttrRef gather_dims(std::vector<int64_t> offset, std::vector<int64_t> collapsed,
                    std::vector<int64_t> start_map, int64_t ivd) {
  return Attribute::struct_attr("stablehlo.gather",
                                {{"offset_dims", Attribute::int_list(offset)},
                                 {"collapsed_slice_dims", Attribute::int_list(collapsed)},
                                 {"start_index_map", Attribute::int_list(start_map)},
                                 {"index_vector_dim", Attribute::integer_attr(ivd, std::nullopt)}});
}

TEST(Verifier, Gather) {
  const DType i32 = DType::I32;
  Builder bld({T({3, 4, 2}, i32), T({2, 3, 2}, DType::I64)}, {T({2, 3, 2, 2}, i32)});
  Operation* g = bld.op("stablehlo.gather", {bld.arg(0), bld.arg(1)}, {T({2, 3, 2, 2}, i32)});
  g->set_attr("dimension_numbers", gather_dims({2, 3}, {0}, {1, 0}, 2));
  g->set_attr("slice_sizes", Attribute::dense_array({1, 2, 2}));
  bld.ret({g->result()});
  EXPECT_NO_THROW(verify(bld.m));
  g->set_attr("slice_sizes", Attribute::dense_array({1, 3, 2}));
  expect_error(bld.m, {"stablehlo.gather", "expected tensor<2x3x3x2xi32>"});
  g->set_attr("slice_sizes", Attribute::dense_array({2, 2, 2}));
  expect_error(bld.m, {"in a collapsed or batching dimension 0"});
  g->set_attr("slice_sizes", Attribute::dense_array({1, 2, 2}));
  g->set_attr("dimension_numbers", gather_dims({2, 3}, {0}, {1}, 2));
  expect_error(bld.m, {"start_index_map has 1 elements, expected 2"});
}

TEST(Verifier, Scatter) {
  const DType i32 = DType::I32;
  Builder bld({T({3, 4, 2}, i32), T({2, 3, 2}, DType::I64), T({2, 3, 2, 2}, i32)},
              {T({3, 4, 2}, i32)});
  Operation* s =
      bld.op("stablehlo.scatter", {bld.arg(0), bld.arg(1), bld.arg(2)}, {T({3, 4, 2}, i32)});
  s->set_attr(
      "scatter_dimension_numbers",
      Attribute::struct_attr("stablehlo.scatter",
                             {{"update_window_dims", Attribute::int_list({2, 3})},
                              {"inserted_window_dims", Attribute::int_list({0})},
                              {"scatter_dims_to_operand_dims", Attribute::int_list({1, 0})},
                              {"index_vector_dim", Attribute::integer_attr(2, std::nullopt)}}));
  add_binary_body(s, "stablehlo.add", i32);
  bld.ret({s->result()});
  EXPECT_NO_THROW(verify(bld.m));
  s->operands[2] = bld.arg(0);
  expect_error(bld.m,
               {"stablehlo.scatter", "update_window_dims = [2, 3] has 3, out of range [0, 3)"});
  s->operands[2] = bld.b->add_argument(T({2, 3, 2, 3}, i32));
  expect_error(bld.m,
               {"update window dimension 3 of tensor<2x3x2x3xi32> has size 3, larger than 2"});
  s->operands[2] = bld.b->add_argument(T({2, 4, 2, 2}, i32));
  expect_error(bld.m, {"update scatter dimension 1 of tensor<2x4x2x2xi32> has size 4, expected 3"});
  s->operands[2] = bld.b->add_argument(T({2, 3, 2, 2}, i32));
  s->results[0]->type = T({3, 4, 2}, DType::I64);
  expect_error(bld.m, {"region 'update_computation' argument 0 has type tensor<i32>, expected "
                       "tensor<i64>"});
}

TEST(Verifier, TriangularSolve) {
  Builder bld({T({2, 8, 8}), T({2, 10, 8})}, {T({2, 10, 8})});
  Operation* t = bld.op("stablehlo.triangular_solve", {bld.arg(0), bld.arg(1)}, {T({2, 10, 8})});
  t->set_attr("left_side", Attribute::boolean_attr(false));
  t->set_attr("lower", Attribute::boolean_attr(true));
  t->set_attr("unit_diagonal", Attribute::boolean_attr(false));
  t->set_attr("transpose_a", Attribute::enum_attr("transpose", "NO_TRANSPOSE"));
  bld.ret({t->result()});
  EXPECT_NO_THROW(verify(bld.m));
  t->set_attr("left_side", Attribute::boolean_attr(true));
  expect_error(bld.m, {"stablehlo.triangular_solve", "rows do not match"});
}

// ---------------------------------------------------------------------------------------------
// Collectives and other ops

AttrRef groups(std::vector<int64_t> ids, Shape shape) {
  return Attribute::dense_elements(HostTensor::from_vector<int64_t>(ids, std::move(shape)));
}

TEST(Verifier, Collectives) {
  Builder bld({T({2, 4})}, {T({4, 4}), T({2, 2}), T({2, 4})});
  Operation* g = bld.op("stablehlo.all_gather", {bld.arg(0)}, {T({4, 4})});
  g->set_attr("all_gather_dim", Attribute::integer_attr(0, DType::I64));
  g->set_attr("replica_groups", groups({0, 1}, {1, 2}));
  Operation* rs = bld.op("stablehlo.reduce_scatter", {bld.arg(0)}, {T({2, 2})});
  rs->set_attr("scatter_dimension", Attribute::integer_attr(1, DType::I64));
  rs->set_attr("replica_groups", groups({0, 1}, {1, 2}));
  add_binary_body(rs, "stablehlo.add", DType::F32);
  Operation* ar = bld.op("stablehlo.all_reduce", {bld.arg(0)}, {T({2, 4})});
  ar->set_attr("replica_groups", groups({0, 1}, {1, 2}));
  add_binary_body(ar, "stablehlo.add", DType::F32);
  bld.ret({g->result(), rs->result(), ar->result()});
  EXPECT_NO_THROW(verify(bld.m));
  g->set_attr("all_gather_dim", Attribute::integer_attr(1, DType::I64));
  expect_error(bld.m, {"stablehlo.all_gather", "expected tensor<2x8xf32>"});
  g->set_attr("all_gather_dim", Attribute::integer_attr(0, DType::I64));
  rs->set_attr("replica_groups", groups({0, 0}, {1, 2}));
  expect_error(bld.m, {"stablehlo.reduce_scatter", "replica_groups = [0, 0] repeats 0"});
}

TEST(Verifier, AllToAllAndIds) {
  Builder bld({T({4, 6})}, {T({2, 12}), T({}, DType::U32)});
  Operation* a = bld.op("stablehlo.all_to_all", {bld.arg(0)}, {T({2, 12})});
  a->set_attr("split_dimension", Attribute::integer_attr(0, DType::I64));
  a->set_attr("concat_dimension", Attribute::integer_attr(1, DType::I64));
  a->set_attr("split_count", Attribute::integer_attr(2, DType::I64));
  a->set_attr("replica_groups", groups({0, 1}, {1, 2}));
  Operation* id = bld.op("stablehlo.replica_id", {}, {T({}, DType::U32)});
  bld.ret({a->result(), id->result()});
  EXPECT_NO_THROW(verify(bld.m));
  a->set_attr("split_count", Attribute::integer_attr(4, DType::I64));
  expect_error(bld.m, {"stablehlo.all_to_all", "expected tensor<1x24xf32>"});
  a->set_attr("split_count", Attribute::integer_attr(2, DType::I64));
  id->results[0]->type = T({}, DType::I32);
  expect_error(bld.m, {"stablehlo.replica_id", "expected tensor<ui32>"});
}

TEST(Verifier, RngBitGeneratorAndBarrier) {
  const Type state = T({2}, DType::U64);
  Builder bld({state, T({3})}, {state, T({4, 4}, DType::U32), T({3})});
  Operation* r =
      bld.op("stablehlo.rng_bit_generator", {bld.arg(0)}, {state, T({4, 4}, DType::U32)});
  r->set_attr("rng_algorithm", Attribute::enum_attr("rng_algorithm", "THREE_FRY"));
  Operation* b = bld.op("stablehlo.optimization_barrier", {bld.arg(1)}, {T({3})});
  bld.ret({r->result(0), r->result(1), b->result()});
  EXPECT_NO_THROW(verify(bld.m));
  r->results[0]->type = T({3}, DType::U64);
  expect_error(bld.m, {"stablehlo.rng_bit_generator", "result 0 has type tensor<3xui64>"});
}

TEST(Verifier, UnknownOpsAndCustomCallsAreAccepted) {
  Builder bld({T({2})}, {T({7}, DType::I8)});
  Operation* u = bld.op("stablehlo.frobnicate", {bld.arg(0), bld.arg(0)}, {T({7}, DType::I8)});
  bld.op("stablehlo.custom_call", {bld.arg(0), u->result()}, {})
      ->set_attr("call_target_name", Attribute::string_attr("check.expect_close"));
  bld.op("mydialect.thing", {}, {Type::token()});
  bld.ret({u->result()});
  EXPECT_NO_THROW(verify(bld.m));
}

// ---------------------------------------------------------------------------------------------
// Functions, calls, returns and dominance

TEST(Verifier, CallsAndReturns) {
  Builder bld({T({2})}, {T({2})});
  Function& g = bld.m.add_function("helper");
  g.visibility = "private";
  g.result_types = {T({2})};
  Value* x = g.entry().add_argument(T({2}));
  g.entry().push_back(make_op("func.return", {x}, {}));
  Operation* call = bld.op("func.call", {bld.arg(0)}, {T({2})});
  call->set_attr("callee", Attribute::symbol("helper"));
  bld.ret({call->result()});
  EXPECT_NO_THROW(verify(bld.m));

  call->set_attr("callee", Attribute::symbol("nowhere"));
  expect_error(bld.m, {"func.call: calls @nowhere, which is not defined in the module"});
  call->set_attr("callee", Attribute::symbol("helper"));
  g.entry().arguments[0]->type = T({3});
  g.entry().ops.back()->operands[0] = g.entry().arguments[0].get();
  expect_error(bld.m, {"func.call: operand 0 has type tensor<2xf32>, expected tensor<3xf32> "
                       "(argument 0 of @helper)"});
}

TEST(Verifier, CallResultTypes) {
  Builder bld({}, {T({2})});
  Function& g = bld.m.add_function("inputs");
  g.result_types = {T({3})};
  Operation* c = g.entry().push_back(make_op("stablehlo.constant", {}, {T({3})}));
  c->set_attr("value", Attribute::dense_elements(HostTensor::from_vector<float>({1, 2, 3}, {3})));
  g.entry().push_back(make_op("func.return", {c->result()}, {}));
  Operation* call = bld.op("func.call", {}, {T({2})});
  call->set_attr("callee", Attribute::symbol("inputs"));
  bld.ret({call->result()});
  expect_error(bld.m, {"has result types (tensor<2xf32>), expected (tensor<3xf32>) "
                       "(the results of @inputs)"});
}

TEST(Verifier, WrongReturnType) {
  Builder bld({T({2})}, {T({3})});
  bld.ret({bld.arg(0)});
  expect_error(bld.m, {"func.return: operand 0 has type tensor<2xf32>, expected tensor<3xf32> "
                       "(result 0 of @main)"});
  bld.b->ops.clear();
  bld.ret({});
  expect_error(bld.m, {"func.return: returns 0 values (), expected 1 (tensor<3xf32>)"});
}

TEST(Verifier, FunctionMustEndWithReturn) {
  Builder bld({T({2})}, {T({2})});
  bld.op("stablehlo.negate", {bld.arg(0)}, {T({2})});
  expect_error(bld.m, {"function @main must end with func.return, found stablehlo.negate"});
}

TEST(Verifier, ReturnKindsAndPlacement) {
  {
    Builder bld({T({2})}, {T({2})});
    bld.op("stablehlo.return", {bld.arg(0)}, {}, 3, 5);
    expect_error(bld.m, {"stablehlo.return at 3:5: only allowed at the end of an op's region"});
  }
  {
    Builder bld({T({2})}, {T({2})});
    bld.ret({bld.arg(0)});
    bld.op("stablehlo.negate", {bld.arg(0)}, {T({2})});
    bld.ret({bld.arg(0)});
    expect_error(bld.m, {"func.return: must be the last op of its block"});
  }
}

TEST(Verifier, UseBeforeDefinition) {
  Builder bld({T({2})}, {T({2})});
  Operation* first = bld.op("stablehlo.negate", {nullptr}, {T({2})}, 3, 5);
  Operation* second = bld.op("stablehlo.abs", {bld.arg(0)}, {T({2})}, 4, 5);
  second->result()->name_hint = "1";
  first->operands[0] = second->result();
  bld.ret({first->result()});
  expect_error(bld.m, {"stablehlo.negate at 3:5: operand 0 (%1) is used before its definition by "
                       "stablehlo.abs at 4:5"});
}

TEST(Verifier, ValueFromAnotherRegion) {
  Builder bld({T({4, 3}), T({})}, {T({4}), T({4})});
  Operation* r1 = make_reduce(bld, bld.arg(0), bld.arg(1), T({4}));
  Operation* r2 = make_reduce(bld, bld.arg(0), bld.arg(1), T({4}));
  // The second reducer's add uses the first reducer's block argument.
  Block& body2 = r2->regions[0]->front();
  body2.ops.front()->operands[1] = r1->regions[0]->front().arguments[1].get();
  bld.ret({r1->result(), r2->result()});
  expect_error(bld.m, {"stablehlo.add: operand 1 is an argument of a block that does not enclose "
                       "this op"});
  body2.ops.front()->operands[1] = r1->regions[0]->front().ops.front()->result();
  expect_error(bld.m, {"in a region that does not enclose this op"});
}

TEST(Verifier, NullOperand) {
  Builder bld({T({2})}, {T({2})});
  Value* n = bld.op("stablehlo.negate", {nullptr}, {T({2})})->result();
  bld.ret({n});
  expect_error(bld.m, {"stablehlo.negate: operand 0 is missing"});
}

TEST(Verifier, DuplicateFunction) {
  Builder bld({}, {});
  bld.ret({});
  bld.m.add_function("main").entry().push_back(make_op("func.return", {}, {}));
  expect_error(bld.m, {"function @main is defined more than once"});
}

// ---------------------------------------------------------------------------------------------
// Parsed text

#if CUJAX_HAVE_PARSER

std::string verify_text(const std::string& text) {
  auto m = parse_module(text);
  try {
    verify(*m);
  } catch (const VerifyError& e) {
    return e.what();
  }
  return "";
}

TEST(VerifierParsed, MessagesCarryLineAndColumn) {
  const std::string text =
      R"(func.func @main(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %a : tensor<2xf32>
  %1 = "stablehlo.add"(%0, %b) : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}
)";
  const std::string msg = verify_text(text);
  EXPECT_NE(msg.find("stablehlo.add at 3:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("operand 1 has type tensor<3xf32>, expected tensor<2xf32>"), std::string::npos)
      << msg;
}

TEST(VerifierParsed, PrettyOpsVerify) {
  const std::string text = R"(module @jit_f {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3x4xf32>) -> (tensor<4x2xf32>) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %cst = stablehlo.constant dense<1.0> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<4x2xf32>
    %3 = stablehlo.add %1, %2 : tensor<4x2xf32>
    %4 = call @helper(%3) : (tensor<4x2xf32>) -> tensor<4x2xf32>
    return %4 : tensor<4x2xf32>
  }
  func.func private @helper(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
    %0 = stablehlo.negate %x : tensor<4x2xf32>
    return %0 : tensor<4x2xf32>
  }
}
)";
  EXPECT_EQ(verify_text(text), "");
}

TEST(VerifierParsed, BadPermutationHasPosition) {
  const std::string text = R"(func.func @main(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = stablehlo.transpose %a, dims = [1, 1] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
)";
  const std::string msg = verify_text(text);
  EXPECT_NE(msg.find("stablehlo.transpose at 2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("is not a permutation"), std::string::npos) << msg;
}

TEST(VerifierParsed, UndefinedCalleeHasPosition) {
  const std::string text = R"(func.func @main() -> tensor<2xf32> {
  %0 = call @missing() : () -> tensor<2xf32>
  return %0 : tensor<2xf32>
}
)";
  const std::string msg = verify_text(text);
  EXPECT_NE(msg.find("func.call at 2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("@missing, which is not defined"), std::string::npos) << msg;
}

TEST(VerifierParsed, WrongReturnTypeHasPosition) {
  const std::string text = R"(func.func @main(%a: tensor<2xi32>) -> tensor<2xf32> {
  return %a : tensor<2xi32>
}
)";
  const std::string msg = verify_text(text);
  EXPECT_NE(msg.find("func.return at 2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("operand 0 has type tensor<2xi32>, expected tensor<2xf32>"), std::string::npos)
      << msg;
}

// Each case: a program, then the position and message parts its error must have.
struct ParsedCase {
  const char* name;
  const char* text;
  std::vector<std::string> parts;
};

TEST(VerifierParsed, ComplexOpsReportPositionAndTypes) {
  const std::vector<ParsedCase> cases = {
      {"convolution result",
       R"(func.func @main(%a: tensor<1x1x16x1xf32>, %b: tensor<4x1x1x2xf32>) -> tensor<1x1x15x2xf32> {
  %0 = stablehlo.convolution(%a, %b) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {pad = [[1, 2], [0, 0]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x1x16x1xf32>, tensor<4x1x1x2xf32>) -> tensor<1x1x15x2xf32>
  return %0 : tensor<1x1x15x2xf32>
})",
       {"stablehlo.convolution at 2:", "result 0 has type tensor<1x1x15x2xf32>",
        "expected tensor<1x1x16x2xf32>"}},
      {"scatter body",
       R"(func.func @main(%a: tensor<1x125xbf16>, %i: tensor<1xi64>, %u: tensor<1xbf16>) -> tensor<1x125xbf16> {
  %0 = "stablehlo.scatter"(%a, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0], inserted_window_dims = [1], scatter_dims_to_operand_dims = [1]>, unique_indices = true}> ({
  ^bb0(%arg0: tensor<f32>, %arg1: tensor<f32>):
    %1 = stablehlo.add %arg0, %arg1 : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) : (tensor<1x125xbf16>, tensor<1xi64>, tensor<1xbf16>) -> tensor<1x125xbf16>
  return %0 : tensor<1x125xbf16>
})",
       {"stablehlo.scatter at 2:",
        "region 'update_computation' argument 0 has type tensor<f32>, expected tensor<bf16>"}},
      {"gather slice sizes",
       R"(func.func @main(%a: tensor<5xf32>, %i: tensor<2x1xi64>) -> tensor<2xf32> {
  %0 = "stablehlo.gather"(%a, %i) <{dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 2>}> : (tensor<5xf32>, tensor<2x1xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
})",
       {"stablehlo.gather at 2:", "slice_sizes = [2]", "collapsed or batching dimension 0"}},
      {"reduce result",
       R"(func.func @main(%a: tensor<4x3xf32>, %z: tensor<f32>) -> tensor<3xf32> {
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
})",
       {"stablehlo.reduce at 2:", "result 0 has type tensor<3xf32>", "expected tensor<4xf32>"}},
      {"dot_general dims",
       R"(func.func @main(%a: tensor<4x3xf32>, %b: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x3xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
})",
       {"stablehlo.dot_general at 2:", "contracting dimension 1 of lhs tensor<4x3xf32> has size 3",
        "dimension 0 of rhs tensor<4x6xf32> has size 4"}},
      {"while cond",
       R"(func.func @main(%n: tensor<i64>) -> tensor<i64> {
  %0 = stablehlo.while(%iterArg = %n) : tensor<i64>
   cond {
    stablehlo.return %iterArg : tensor<i64>
  } do {
    stablehlo.return %iterArg : tensor<i64>
  }
  return %0 : tensor<i64>
})",
       {"stablehlo.while at 2:", "region 'cond' returns (tensor<i64>)", "expected (tensor<i1>)"}},
      {"compare dtype",
       R"(func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xi1> {
  %0 = stablehlo.compare  LT, %a, %b,  SIGNED : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
})",
       {"stablehlo.compare at 2:",
        "compare_type SIGNED does not fit operands of type tensor<2xf32>"}},
      {"constant type",
       R"(func.func @main() -> tensor<3xf32> {
  %0 = "stablehlo.constant"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
})",
       {"stablehlo.constant at 2:",
        "attribute 'value' has type tensor<2xf32>, expected "
        "tensor<3xf32>"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string msg;
    try {
      msg = verify_text(c.text);
    } catch (const ParseError& e) {
      ADD_FAILURE() << "parse error: " << e.what();
      continue;
    }
    for (const auto& p : c.parts)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\nlacks: " << p;
  }
}

// A forward reference is a parse error at its line, or parses and fails to verify.
TEST(VerifierParsed, UseBeforeDefinition) {
  const std::string text = R"(func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %1 : tensor<2xf32>
  %1 = stablehlo.abs %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}
)";
  std::unique_ptr<Module> m;
  try {
    m = parse_module(text);
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 2) << e.what();  // the parser rejects the forward reference itself
    return;
  }

  const std::string msg = [&] {
    try {
      verify(*m);
    } catch (const VerifyError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(msg.find("stablehlo.negate at 2:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("operand 0 (%1) is used before its definition by stablehlo.abs at 3:"),
            std::string::npos)
      << msg;
}

#endif  // CUJAX_HAVE_PARSER

// ---------------------------------------------------------------------------------------------
// Every conformance program verifies.

std::filesystem::path conformance_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const std::string shared = env && *env ? env : CUJAX_DEFAULT_SHARED_DIR;
  return std::filesystem::path(shared) / "conformance" / "stablehlo-testdata";
}

TEST(VerifierConformance, EveryProgramVerifies) {
  const auto dir = conformance_dir();
  if (!std::filesystem::is_directory(dir))
    GTEST_SKIP() << "no conformance data at " << dir << " (set CUJAX_SHARED_DIR)";
#if !CUJAX_HAVE_PARSER
  GTEST_SKIP() << "the parser (src/ir/parser.cpp) is not built yet";
#else
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".mlir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "no .mlir files in " << dir;
  size_t passed = 0, parse_failures = 0;
  std::vector<std::string> failures;
  for (const auto& path : files) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::unique_ptr<Module> m;
    try {
      m = parse_module(ss.str());
    } catch (const Error&) {
      ++parse_failures;  // the parser's tests report these
      continue;
    }
    try {
      verify(*m);
      ++passed;
    } catch (const VerifyError& e) {
      failures.push_back(path.filename().string() + ": " + e.what());
    }
  }
  std::cout << "[ verifier ] " << passed << " of " << files.size() - parse_failures
            << " parsed conformance programs verify (" << parse_failures << " did not parse)\n";
  for (size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
  EXPECT_TRUE(failures.empty()) << failures.size() << " programs fail to verify";
#endif
}

// Ops whose result type the verifier derives from the operands and attributes: giving any of
// them a wrong result type in a conformance program must make the program fail to verify.
TEST(VerifierConformance, WrongResultTypesAreCaught) {
  const auto dir = conformance_dir();
  if (!std::filesystem::is_directory(dir))
    GTEST_SKIP() << "no conformance data at " << dir << " (set CUJAX_SHARED_DIR)";
#if !CUJAX_HAVE_PARSER
  GTEST_SKIP() << "the parser (src/ir/parser.cpp) is not built yet";
#else
  // Free result shapes (iota, broadcast_in_dim), or no rule (custom_call, rng_bit_generator).
  const std::vector<std::string> free_results = {"stablehlo.iota", "stablehlo.broadcast_in_dim",
                                                 "stablehlo.custom_call",
                                                 "stablehlo.rng_bit_generator"};
  size_t mutated = 0;
  std::vector<std::string> missed;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".mlir") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    std::unique_ptr<Module> m;
    try {
      m = parse_module(ss.str());
    } catch (const Error&) {
      continue;
    }
    std::vector<Operation*> ops;
    std::function<void(Block&)> walk = [&](Block& b) {
      for (auto& op : b.ops) {
        ops.push_back(op.get());
        for (auto& r : op->regions)
          for (auto& blk : r->blocks) walk(*blk);
      }
    };
    for (auto& f : m->functions)
      for (auto& blk : f->body.blocks) walk(*blk);
    for (Operation* op : ops) {
      if (op->results.empty() || !op->name.starts_with("stablehlo.") ||
          std::find(free_results.begin(), free_results.end(), op->name) != free_results.end())
        continue;
      Type& t = op->results[0]->type;
      if (t.is_token || (op->name == "stablehlo.reshape" && t.num_elements() == 0)) continue;
      const Type saved = t;
      t.shape.push_back(7);
      ++mutated;
      try {
        verify(*m);
        missed.push_back(e.path().filename().string() + ": " + op->where());
      } catch (const VerifyError&) {
      }
      t = saved;
    }
  }
  std::cout << "[ verifier ] " << mutated - missed.size() << " of " << mutated
            << " wrong result types caught\n";
  EXPECT_GT(mutated, 1000u);
  for (size_t i = 0; i < missed.size() && i < 20; ++i) ADD_FAILURE() << "not caught: " << missed[i];
#endif
}

// Broken attributes and result types never crash the verifier or escape as anything but a
// VerifyError.
TEST(VerifierConformance, BrokenProgramsGiveVerifyErrors) {
  const auto dir = conformance_dir();
  if (!std::filesystem::is_directory(dir))
    GTEST_SKIP() << "no conformance data at " << dir << " (set CUJAX_SHARED_DIR)";
#if !CUJAX_HAVE_PARSER
  GTEST_SKIP() << "the parser (src/ir/parser.cpp) is not built yet";
#else
  const std::vector<AttrRef> bad_attrs = {
      Attribute::dense_array({}),
      Attribute::dense_array({-1, 5, 100}),
      Attribute::int_list({3}),
      Attribute::float_attr(1.5, DType::F32),
      Attribute::dense_elements(HostTensor::from_vector<float>({1, 2}, {2})),
      Attribute::struct_attr("stablehlo.gather", {{"index_vector_dim", Attribute::int_list({9})}}),
      Attribute::opaque("#stablehlo.conv<[b]x[o]->[f]>")};
  const std::vector<Type> bad_types = {Type::token(), T({}), T({0, 3}, DType::I8)};
  size_t runs = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".mlir") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    std::unique_ptr<Module> m;
    try {
      m = parse_module(ss.str());
    } catch (const Error&) {
      continue;
    }
    std::vector<Operation*> ops;
    std::function<void(Block&)> walk = [&](Block& b) {
      for (auto& op : b.ops) {
        ops.push_back(op.get());
        for (auto& r : op->regions)
          for (auto& blk : r->blocks) walk(*blk);
      }
    };
    for (auto& f : m->functions)
      for (auto& blk : f->body.blocks) walk(*blk);
    auto run = [&](const Operation& op, const std::string& what) {
      ++runs;
      try {
        verify(*m);
      } catch (const VerifyError&) {
      } catch (const std::exception& ex) {
        ADD_FAILURE() << e.path().filename() << ": " << op.where() << " with " << what
                      << " threw a non-VerifyError: " << ex.what();
      }
    };
    for (Operation* op : ops) {
      if (op->name == "stablehlo.constant") continue;  // big payloads, one simple rule
      for (auto& a : op->attributes) {
        const AttrRef saved = a.value;
        for (const auto& bad : bad_attrs) {
          a.value = bad;
          run(*op, "attribute " + a.name + " changed");
        }
        a.value = saved;
      }
      for (auto& r : op->results) {
        const Type saved = r->type;
        for (const auto& bad : bad_types) {
          r->type = bad;
          run(*op, "result type " + bad.str());
        }
        r->type = saved;
      }
    }
  }
  EXPECT_GT(runs, 10000u);
#endif
}

}  // namespace
}  // namespace cujax::ir
