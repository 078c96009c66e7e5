// Tests of the StableHLO text parser and printer: every pretty form, generic == pretty, dense
// constants of every dtype, locations, unknown attributes, errors with positions, and the round
// trip over the conformance programs.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unordered_map>

#include "cujax/core/error.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "ir/asm_util.h"
#include "ir/ir_equal.h"
#include "ir/parser_limits.h"

namespace cujax::ir {
namespace {

using Kind = Attribute::Kind;

::testing::AssertionResult SameModule(const Module& a, const Module& b) {
  equal::Comparer c;
  if (c.modules(a, b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << c.why;
}

// ---- helpers
// --------------------------------------------------------------------------------------

std::string wrap(const std::string& body, const std::string& args = "",
                 const std::string& results = "") {
  return "module @m {\n  func.func public @main(" + args + ")" +
         (results.empty() ? "" : " -> " + results) + " {\n" + body + "\n  }\n}\n";
}

const Operation* find_op(const Region& r, std::string_view name) {
  for (const auto& b : r.blocks)
    for (const auto& op : b->ops) {
      if (op->name == name) return op.get();
      for (const auto& sub : op->regions)
        if (const Operation* o = find_op(*sub, name)) return o;
    }
  return nullptr;
}

const Operation& op_named(const Module& m, std::string_view name) {
  for (const auto& f : m.functions)
    if (const Operation* o = find_op(f->body, name)) return *o;
  throw Error("no op " + std::string(name));
}

// Parses, prints, parses again: the result must be the same module and a printing fixed point.
std::unique_ptr<Module> round_trip(const std::string& text) {
  auto m = parse_module(text);
  const std::string printed = print_module(*m);
  auto m2 = parse_module(printed);
  EXPECT_TRUE(SameModule(*m, *m2)) << printed;
  EXPECT_EQ(print_module(*m2), printed);
  return m;
}

ParseError parse_error(const std::string& text) {
  try {
    parse_module(text);
  } catch (const ParseError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ParseError for:\n" << text;
  return ParseError(0, 0, "no error");
}

std::vector<int64_t> ints_of(const Operation& op, std::string_view name) {
  return op.ints(name);
}

const std::string kArgs2 = "%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>";

// ---- pretty forms
// -----------------------------------------------------------------------------------

TEST(ParserPretty, CompareAttributes) {
  auto m = round_trip(wrap(
      "    %0 = stablehlo.compare  LT, %arg0, %arg1,  SIGNED : (tensor<2x3xi32>, tensor<2x3xi32>) "
      "-> tensor<2x3xi1>\n    return %0 : tensor<2x3xi1>",
      "%arg0: tensor<2x3xi32>, %arg1: tensor<2x3xi32>", "tensor<2x3xi1>"));
  const Operation& op = op_named(*m, "stablehlo.compare");
  ASSERT_EQ(op.attributes.size(), 2u);
  EXPECT_EQ(op.attributes[0].name, "compare_type");
  EXPECT_EQ(op.attributes[0].value->kind, Kind::Enum);
  EXPECT_EQ(op.attributes[0].value->text, "comparison_type");
  EXPECT_EQ(op.attributes[0].value->enum_value, "SIGNED");
  EXPECT_EQ(op.attributes[1].name, "comparison_direction");
  EXPECT_EQ(op.attributes[1].value->text, "comparison_direction");
  EXPECT_EQ(op.enum_attr("comparison_direction"), "LT");
  EXPECT_EQ(op.result(0)->type, Type::tensor({2, 3}, DType::Bool));
  EXPECT_EQ(op_named(*m, "func.return").operands[0], op.result(0));
}

TEST(ParserPretty, DotGeneral) {
  auto m = round_trip(wrap(
      "    %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = "
      "[2] x [1], precision = [DEFAULT, HIGHEST] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> "
      "tensor<2x3x5xf32>\n    %1 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [2] x "
      "[1] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x2x5xf32>",
      "%arg0: tensor<2x3x4xf32>, %arg1: tensor<2x4x5xf32>"));
  const Operation& op = op_named(*m, "stablehlo.dot_general");
  const Attribute* dn = op.attr("dot_dimension_numbers");
  ASSERT_TRUE(dn);
  EXPECT_EQ(dn->kind, Kind::Struct);
  EXPECT_EQ(dn->text, "stablehlo.dot");
  ASSERT_EQ(dn->fields.size(), 4u);
  EXPECT_EQ(dn->fields[0].name, "lhs_batching_dimensions");
  EXPECT_EQ(dn->fields[1].name, "rhs_batching_dimensions");
  EXPECT_EQ(dn->fields[2].name, "lhs_contracting_dimensions");
  EXPECT_EQ(dn->fields[3].name, "rhs_contracting_dimensions");
  EXPECT_EQ(as_ints(*dn->field("lhs_contracting_dimensions")), std::vector<int64_t>{2});
  EXPECT_EQ(as_ints(*dn->field("rhs_contracting_dimensions")), std::vector<int64_t>{1});
  EXPECT_FALSE(dn->field("lhs_batching_dimensions")->elements[0]->dtype.has_value());
  const Attribute* pc = op.attr("precision_config");
  ASSERT_TRUE(pc);
  ASSERT_EQ(pc->elements.size(), 2u);
  EXPECT_EQ(pc->elements[0]->kind, Kind::Enum);
  EXPECT_EQ(pc->elements[0]->text, "precision");
  EXPECT_EQ(pc->elements[0]->enum_value, "DEFAULT");
  EXPECT_EQ(pc->elements[1]->enum_value, "HIGHEST");
  // Without batching dims the struct omits them, as MLIR does.
  const Operation& op2 = *m->functions[0]->entry().ops[1];
  EXPECT_EQ(op2.attr("dot_dimension_numbers")->fields.size(), 2u);
  EXPECT_EQ(op2.attr("precision_config"), nullptr);
}

TEST(ParserPretty, DimsAttributes) {
  auto m = round_trip(wrap(
      "    %0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 2] : (tensor<2x3xf32>) -> "
      "tensor<2x4x3xf32>\n"
      "    %1 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>\n"
      "    %2 = stablehlo.reverse %arg0, dims = [0] : tensor<2x3xf32>\n"
      "    %3 = stablehlo.iota dim = 1 : tensor<2x3xi32>\n"
      "    %4 = stablehlo.concatenate %arg0, %arg1, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) "
      "-> tensor<4x3xf32>\n"
      "    %5 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<2x3xf32>) -> tensor<2x3xf32>",
      kArgs2));
  const Operation& b = op_named(*m, "stablehlo.broadcast_in_dim");
  const Attribute* bd = b.attr("broadcast_dimensions");
  ASSERT_TRUE(bd);
  EXPECT_EQ(bd->kind, Kind::DenseArray);
  EXPECT_EQ(bd->dtype, DType::I64);
  EXPECT_EQ(bd->ints, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(ints_of(op_named(*m, "stablehlo.transpose"), "permutation"),
            (std::vector<int64_t>{1, 0}));
  const Operation& rev = op_named(*m, "stablehlo.reverse");
  EXPECT_EQ(rev.attr("dimensions")->kind, Kind::DenseArray);
  EXPECT_EQ(ints_of(rev, "dimensions"), std::vector<int64_t>{0});
  EXPECT_EQ(rev.result(0)->type, Type::tensor({2, 3}, DType::F32));
  const Attribute* iota = op_named(*m, "stablehlo.iota").attr("iota_dimension");
  EXPECT_EQ(iota->kind, Kind::Integer);
  EXPECT_EQ(iota->integer, 1);
  EXPECT_EQ(iota->dtype, DType::I64);
  const Attribute* cat = op_named(*m, "stablehlo.concatenate").attr("dimension");
  EXPECT_EQ(cat->integer, 0);
  EXPECT_EQ(cat->dtype, DType::I64);
  EXPECT_TRUE(m->functions[0]->entry().ops[5]->attr("broadcast_dimensions")->ints.empty());
}

TEST(ParserPretty, SlicePadDynamicSlice) {
  auto m = round_trip(
      wrap("    %0 = stablehlo.slice %arg0 [0:1, 2:4:2] : (tensor<2x5xf32>) -> tensor<1x1xf32>\n"
           "    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
           "    %1 = stablehlo.pad %arg0, %cst, low = [1, 0], high = [2, 1], interior = [1, 0] : "
           "(tensor<2x5xf32>, tensor<f32>) -> tensor<6x6xf32>\n"
           "    %c = stablehlo.constant dense<1> : tensor<i64>\n"
           "    %2 = stablehlo.dynamic_slice %arg0, %c, %c, sizes = [1, 2] : (tensor<2x5xf32>, "
           "tensor<i64>, tensor<i64>) -> tensor<1x2xf32>\n"
           "    %3 = stablehlo.dynamic_update_slice %arg0, %2, %c, %c : (tensor<2x5xf32>, "
           "tensor<1x2xf32>, tensor<i64>, tensor<i64>) -> tensor<2x5xf32>",
           "%arg0: tensor<2x5xf32>"));
  const Operation& s = op_named(*m, "stablehlo.slice");
  EXPECT_EQ(s.attr("start_indices")->kind, Kind::DenseArray);
  EXPECT_EQ(ints_of(s, "start_indices"), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(ints_of(s, "limit_indices"), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(ints_of(s, "strides"), (std::vector<int64_t>{1, 2}));
  const Operation& p = op_named(*m, "stablehlo.pad");
  EXPECT_EQ(ints_of(p, "edge_padding_low"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ints_of(p, "edge_padding_high"), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(ints_of(p, "interior_padding"), (std::vector<int64_t>{1, 0}));
  const Operation& d = op_named(*m, "stablehlo.dynamic_slice");
  EXPECT_EQ(d.operands.size(), 3u);
  EXPECT_EQ(ints_of(d, "slice_sizes"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(op_named(*m, "stablehlo.dynamic_update_slice").operands.size(), 4u);
}

TEST(ParserPretty, CompactReduce) {
  auto m = round_trip(wrap(
      "    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
      "    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.add across dimensions = [1] "
      ": (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>",
      "%arg0: tensor<2x3xf32>"));
  const Operation& r = op_named(*m, "stablehlo.reduce");
  EXPECT_EQ(r.operands.size(), 2u);
  EXPECT_EQ(r.attr("dimensions")->kind, Kind::DenseArray);
  EXPECT_EQ(ints_of(r, "dimensions"), std::vector<int64_t>{1});
  ASSERT_EQ(r.regions.size(), 1u);
  const Block& b = r.regions[0]->front();
  ASSERT_EQ(b.arguments.size(), 2u);
  EXPECT_EQ(b.arguments[0]->type, Type::tensor({}, DType::F32));
  ASSERT_EQ(b.ops.size(), 2u);
  EXPECT_EQ(b.ops[0]->name, "stablehlo.add");
  EXPECT_EQ(b.ops[0]->operands[0], b.arguments[0].get());
  EXPECT_EQ(b.ops[0]->operands[1], b.arguments[1].get());
  EXPECT_EQ(b.ops[1]->name, "stablehlo.return");
  EXPECT_EQ(b.ops[1]->operands[0], b.ops[0]->result(0));
  // The generic spelling of the same op is the same Operation, and prints compact again.
  auto g = parse_module(
      wrap("    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
           "    %0 = \"stablehlo.reduce\"(%arg0, %cst) <{dimensions = array<i64: 1>}> ({\n"
           "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
           "      %1 = \"stablehlo.add\"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>\n"
           "      \"stablehlo.return\"(%1) : (tensor<f32>) -> ()\n"
           "    }) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>",
           "%arg0: tensor<2x3xf32>"));
  EXPECT_TRUE(SameModule(*m, *g));
  EXPECT_NE(print_module(*g).find("applies stablehlo.add across dimensions = [1]"),
            std::string::npos);
}

TEST(ParserPretty, LongReduceBlockArgumentOrder) {
  const std::string text = wrap(
      "    %c = stablehlo.constant dense<false> : tensor<i1>\n"
      "    %c_0 = stablehlo.constant dense<0> : tensor<i32>\n"
      "    %0:2 = stablehlo.reduce(%arg0 init: %c), (%arg1 init: %c_0) across dimensions = [0] : "
      "(tensor<15xi1>, tensor<15xi32>, tensor<i1>, tensor<i32>) -> (tensor<i1>, tensor<i32>)\n"
      "     reducer(%arg2: tensor<i1>, %arg4: tensor<i1>) (%arg3: tensor<i32>, %arg5: tensor<i32>) "
      " {\n"
      "      %1 = stablehlo.or %arg2, %arg4 : tensor<i1>\n"
      "      %2 = stablehlo.add %arg3, %arg5 : tensor<i32>\n"
      "      stablehlo.return %1, %2 : tensor<i1>, tensor<i32>\n"
      "    }\n"
      "    return %0#0, %0#1 : tensor<i1>, tensor<i32>",
      "%arg0: tensor<15xi1>, %arg1: tensor<15xi32>", "(tensor<i1>, tensor<i32>)");
  auto m = round_trip(text);
  const Operation& r = op_named(*m, "stablehlo.reduce");
  EXPECT_EQ(r.num_results(), 2u);
  const Block& b = r.regions[0]->front();
  ASSERT_EQ(b.arguments.size(), 4u);
  // Block arguments: the first of each pair, then the second of each pair.
  EXPECT_EQ(b.arguments[0]->name_hint, "arg2");
  EXPECT_EQ(b.arguments[1]->name_hint, "arg3");
  EXPECT_EQ(b.arguments[2]->name_hint, "arg4");
  EXPECT_EQ(b.arguments[3]->name_hint, "arg5");
  EXPECT_EQ(b.arguments[1]->type, Type::tensor({}, DType::I32));
  EXPECT_EQ(b.ops[0]->operands[1], b.arguments[2].get());
  const Operation& ret = op_named(*m, "func.return");
  EXPECT_EQ(ret.operands[1], r.result(1));
  EXPECT_EQ(print_module(*m), text);
}

TEST(ParserPretty, While) {
  const std::string text = wrap(
      "    %c = stablehlo.constant dense<0> : tensor<i64>\n"
      "    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>\n"
      "    %0:2 = stablehlo.while(%iterArg = %c, %iterArg_0 = %cst) : tensor<i64>, tensor<f32>\n"
      "     cond {\n"
      "      %c_1 = stablehlo.constant dense<5> : tensor<i64>\n"
      "      %1 = stablehlo.compare  LT, %iterArg, %c_1,  SIGNED : (tensor<i64>, tensor<i64>) -> "
      "tensor<i1>\n"
      "      stablehlo.return %1 : tensor<i1>\n"
      "    } do {\n"
      "      %c_1 = stablehlo.constant dense<1> : tensor<i64>\n"
      "      %1 = stablehlo.add %iterArg, %c_1 : tensor<i64>\n"
      "      stablehlo.return %1, %iterArg_0 : tensor<i64>, tensor<f32>\n"
      "    }\n"
      "    return %0#1 : tensor<f32>",
      "", "tensor<f32>");
  auto m = round_trip(text);
  const Operation& w = op_named(*m, "stablehlo.while");
  ASSERT_EQ(w.regions.size(), 2u);
  EXPECT_EQ(w.num_results(), 2u);
  for (const auto& r : w.regions) {
    ASSERT_EQ(r->front().arguments.size(), 2u);
    EXPECT_EQ(r->front().arguments[0]->name_hint, "iterArg");
    EXPECT_EQ(r->front().arguments[1]->name_hint, "iterArg_0");
    EXPECT_EQ(r->front().arguments[1]->type, Type::tensor({}, DType::F32));
  }
  const Operation& cmp = op_named(*m, "stablehlo.compare");
  EXPECT_EQ(cmp.operands[0], w.regions[0]->front().arguments[0].get());
  const Operation& ret = *w.regions[1]->front().ops.back();
  EXPECT_EQ(ret.operands[1], w.regions[1]->front().arguments[1].get());
  EXPECT_EQ(print_module(*m), text);
}

TEST(ParserPretty, Convolution) {
  auto m = round_trip(wrap(
      "    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, "
      "0, "
      "1, f], window = {stride = [2, 1], pad = [[1, 2], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = "
      "[1, 2], reverse = [false, true]} {batch_group_count = 1 : i64, feature_group_count = 1 : "
      "i64} : (tensor<1x8x8x3xf32>, tensor<3x3x3x4xf32>) -> tensor<1x5x4x4xf32>",
      "%arg0: tensor<1x8x8x3xf32>, %arg1: tensor<3x3x3x4xf32>"));
  const Operation& c = op_named(*m, "stablehlo.convolution");
  const Attribute* dn = c.attr("dimension_numbers");
  ASSERT_TRUE(dn);
  EXPECT_EQ(dn->kind, Kind::Struct);
  EXPECT_EQ(dn->text, "stablehlo.conv");
  EXPECT_EQ(dn->field("input_batch_dimension")->integer, 0);
  EXPECT_EQ(dn->field("input_feature_dimension")->integer, 3);
  EXPECT_EQ(as_ints(*dn->field("input_spatial_dimensions")), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(dn->field("kernel_input_feature_dimension")->integer, 2);
  EXPECT_EQ(dn->field("kernel_output_feature_dimension")->integer, 3);
  EXPECT_EQ(as_ints(*dn->field("kernel_spatial_dimensions")), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(dn->field("output_batch_dimension")->integer, 0);
  EXPECT_EQ(dn->field("output_feature_dimension")->integer, 3);
  EXPECT_EQ(as_ints(*dn->field("output_spatial_dimensions")), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ints_of(c, "window_strides"), (std::vector<int64_t>{2, 1}));
  const Attribute* pad = c.attr("padding");
  EXPECT_EQ(pad->kind, Kind::DenseElements);
  EXPECT_EQ(pad->tensor.shape(), (Shape{2, 2}));
  EXPECT_EQ(pad->tensor.dtype(), DType::I64);
  EXPECT_EQ(as_ints(*pad), (std::vector<int64_t>{1, 2, 0, 0}));
  EXPECT_EQ(ints_of(c, "lhs_dilation"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(ints_of(c, "rhs_dilation"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.attr("window_reversal")->dtype, DType::Bool);
  EXPECT_EQ(c.attr("window_reversal")->ints, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c.int_attr("feature_group_count"), 1);
  // Generic spelling with the #stablehlo.conv attribute.
  auto g = parse_module(wrap(
      "    %0 = \"stablehlo.convolution\"(%arg0, %arg1) <{batch_group_count = 1 : i64, "
      "dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, "
      "feature_group_count = 1 : i64, lhs_dilation = array<i64: 1, 1>, padding = dense<[[1, 2], "
      "[0, 0]]> : tensor<2x2xi64>, rhs_dilation = array<i64: 1, 2>, window_reversal = array<i1: "
      "false, true>, window_strides = array<i64: 2, 1>}> : (tensor<1x8x8x3xf32>, "
      "tensor<3x3x3x4xf32>) -> tensor<1x5x4x4xf32>",
      "%arg0: tensor<1x8x8x3xf32>, %arg1: tensor<3x3x3x4xf32>"));
  EXPECT_TRUE(SameModule(*m, *g));
  // A raw (non-compact) spelling of the same dimension numbers.
  auto r = parse_module(wrap(
      "    %0 = \"stablehlo.convolution\"(%arg0, %arg1) <{batch_group_count = 1 : i64, "
      "dimension_numbers = #stablehlo.conv<raw input_batch_dimension = 0, input_feature_dimension "
      "= 3, input_spatial_dimensions = [1, 2], kernel_input_feature_dimension = 2, "
      "kernel_output_feature_dimension = 3, kernel_spatial_dimensions = [0, 1], "
      "output_batch_dimension = 0, output_feature_dimension = 3, output_spatial_dimensions = [1, "
      "2]>, feature_group_count = 1 : i64, lhs_dilation = array<i64: 1, 1>, padding = dense<[[1, "
      "2], [0, 0]]> : tensor<2x2xi64>, rhs_dilation = array<i64: 1, 2>, window_reversal = "
      "array<i1: false, true>, window_strides = array<i64: 2, 1>}> : (tensor<1x8x8x3xf32>, "
      "tensor<3x3x3x4xf32>) -> tensor<1x5x4x4xf32>",
      "%arg0: tensor<1x8x8x3xf32>, %arg1: tensor<3x3x3x4xf32>"));
  EXPECT_TRUE(SameModule(*m, *r));
}

TEST(ParserPretty, CallsReturnsAndCustomCall) {
  const std::string text =
      "module @jit_main attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main() -> (tensor<2xf32> {jax.result_info = \"\", mhlo.layout_mode = "
      "\"default\"}) {\n"
      "    %0 = call @inputs() : () -> tensor<2xf32>\n"
      "    %1 = func.call @inputs() : () -> tensor<2xf32>\n"
      "    stablehlo.custom_call @check.expect_close(%0, %1) {has_side_effect = true} : "
      "(tensor<2xf32>, tensor<2xf32>) -> ()\n"
      "    %2 = stablehlo.custom_call @\"weird name\"(%0) {api_version = 2 : i32, backend_config = "
      "\"cfg\"} : (tensor<2xf32>) -> tensor<2xf32>\n"
      "    return %2 : tensor<2xf32>\n"
      "  }\n"
      "  func.func private @inputs() -> (tensor<2xf32> {mhlo.layout_mode = \"default\"}) {\n"
      "    %cst = stablehlo.constant dense<[1.000000e+00, 2.500000e+00]> : tensor<2xf32>\n"
      "    return %cst : tensor<2xf32>\n"
      "  }\n"
      "  func.func private @decl(tensor<f32>) -> tensor<f32>\n"
      "}\n";
  auto m = round_trip(text);
  // At function level MLIR drops the default dialect: `func.call` prints as `call`.
  std::string canonical = text;
  canonical.replace(canonical.find("func.call @inputs"), 9, "call");
  EXPECT_EQ(print_module(*m), canonical);
  const Block& b = m->functions[0]->entry();
  EXPECT_EQ(b.ops[0]->name, "func.call");
  EXPECT_EQ(b.ops[0]->attr("callee")->kind, Kind::Symbol);
  EXPECT_EQ(b.ops[0]->attr("callee")->text, "inputs");
  EXPECT_EQ(b.ops[1]->name, "func.call");
  const Operation& cc = *b.ops[2];
  EXPECT_EQ(cc.name, "stablehlo.custom_call");
  EXPECT_EQ(cc.attr("call_target_name")->kind, Kind::String);
  EXPECT_EQ(cc.attr("call_target_name")->text, "check.expect_close");
  EXPECT_TRUE(cc.attr("has_side_effect")->boolean);
  EXPECT_EQ(cc.num_results(), 0u);
  EXPECT_EQ(b.ops[3]->attr("call_target_name")->text, "weird name");
  EXPECT_EQ(b.ops[3]->attr("api_version")->dtype, DType::I32);
  EXPECT_EQ(b.ops[4]->name, "func.return");
  EXPECT_EQ(m->functions[0]->visibility, "public");
  ASSERT_EQ(m->functions[0]->result_attrs.size(), 1u);
  EXPECT_EQ(m->functions[0]->result_attrs[0][0].name, "jax.result_info");
  EXPECT_EQ(m->attributes[0].value->dtype, DType::I32);
  const Function& decl = *m->functions[2];
  EXPECT_EQ(decl.arg_types(), std::vector<Type>{Type::tensor({}, DType::F32)});
  EXPECT_TRUE(decl.entry().ops.empty());
}

TEST(ParserPretty, ElementwiseSelectClampAndTypes) {
  auto m = round_trip(wrap(
      "    %0 = stablehlo.add %arg0, %arg1 : tensor<2x3xf32>\n"
      "    %1 = stablehlo.convert %0 : (tensor<2x3xf32>) -> tensor<2x3xbf16>\n"
      "    %2 = stablehlo.convert %0 : tensor<2x3xf32>\n"
      "    %3 = stablehlo.bitcast_convert %0 : (tensor<2x3xf32>) -> tensor<2x3xi32>\n"
      "    %4 = stablehlo.reshape %0 : (tensor<2x3xf32>) -> tensor<6xf32>\n"
      "    %5 = stablehlo.compare  GT, %0, %arg1,  FLOAT : (tensor<2x3xf32>, tensor<2x3xf32>) -> "
      "tensor<2x3xi1>\n"
      "    %6 = stablehlo.select %5, %0, %arg1 : tensor<2x3xi1>, tensor<2x3xf32>\n"
      "    %7 = stablehlo.select %5, %0, %arg1 : (tensor<2x3xi1>, tensor<2x3xf32>, "
      "tensor<2x3xf32>) -> tensor<2x3xf32>\n"
      "    %8 = stablehlo.clamp %0, %arg1, %0 : tensor<2x3xf32>\n"
      "    %9 = stablehlo.is_finite %0 : (tensor<2x3xf32>) -> tensor<2x3xi1>\n"
      "    %10 = stablehlo.reduce_precision %0, format = e5m10 : tensor<2x3xf32>\n"
      "    %11 = stablehlo.negate %0 {mhlo.frontend_attributes = {a = \"b\"}} : tensor<2x3xf32>\n"
      "    %12:2 = stablehlo.optimization_barrier %0, %5 : tensor<2x3xf32>, tensor<2x3xi1>\n"
      "    %13 = stablehlo.popcnt %3 : tensor<2x3xi32>",
      kArgs2));
  const Block& b = m->functions[0]->entry();
  EXPECT_EQ(b.ops[1]->result(0)->type.dtype, DType::BF16);
  EXPECT_EQ(b.ops[6]->operands.size(), 3u);
  EXPECT_EQ(b.ops[6]->result(0)->type, Type::tensor({2, 3}, DType::F32));
  const Operation& rp = op_named(*m, "stablehlo.reduce_precision");
  EXPECT_EQ(rp.attr("exponent_bits")->integer, 5);
  EXPECT_EQ(rp.attr("exponent_bits")->dtype, DType::I32);
  EXPECT_EQ(rp.attr("mantissa_bits")->integer, 10);
  EXPECT_EQ(b.ops[11]->attr("mhlo.frontend_attributes")->kind, Kind::Dictionary);
  EXPECT_EQ(b.ops[12]->num_results(), 2u);
  EXPECT_EQ(b.ops[12]->result(1)->type.dtype, DType::Bool);
  // Functional type and single type spell the same op.
  auto a = parse_module(wrap("    %0 = stablehlo.add %arg0, %arg1 : tensor<2x3xf32>", kArgs2));
  auto f = parse_module(wrap(
      "    %0 = stablehlo.add %arg0, %arg1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>",
      kArgs2));
  EXPECT_TRUE(SameModule(*a, *f));
}

TEST(ParserPretty, RngCaseAndCollectives) {
  auto m = round_trip(wrap(
      "    %0:2 = stablehlo.rng_bit_generator %arg0, algorithm =  DEFAULT : (tensor<2xui64>) -> "
      "(tensor<2xui64>, tensor<4xui32>)\n"
      "    %c = stablehlo.constant dense<1> : tensor<i32>\n"
      "    %1 = \"stablehlo.case\"(%c) ({\n"
      "      stablehlo.return %0#1 : tensor<4xui32>\n"
      "    }, {\n"
      "      %3 = stablehlo.add %0#1, %0#1 : tensor<4xui32>\n"
      "      stablehlo.return %3 : tensor<4xui32>\n"
      "    }) : (tensor<i32>) -> tensor<4xui32>\n"
      "    %2 = \"stablehlo.all_reduce\"(%1) <{channel_handle = #stablehlo.channel_handle<handle = "
      "1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> "
      "({\n"
      "    ^bb0(%arg1: tensor<ui32>, %arg2: tensor<ui32>):\n"
      "      %3 = stablehlo.add %arg1, %arg2 : tensor<ui32>\n"
      "      stablehlo.return %3 : tensor<ui32>\n"
      "    }) : (tensor<4xui32>) -> tensor<4xui32>\n"
      "    %3 = \"stablehlo.all_gather\"(%2) <{all_gather_dim = 0 : i64, replica_groups = "
      "dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<4xui32>) -> tensor<8xui32>",
      "%arg0: tensor<2xui64>"));
  const Operation& rng = op_named(*m, "stablehlo.rng_bit_generator");
  // StableHLO names the two results; the enum keyword prints with two spaces, as MLIR does.
  EXPECT_NE(print_module(*m).find("%output_state, %output = stablehlo.rng_bit_generator %arg0, "
                                  "algorithm =  DEFAULT : (tensor<2xui64>)"),
            std::string::npos);
  EXPECT_EQ(rng.attr("rng_algorithm")->text, "rng_algorithm");
  EXPECT_EQ(rng.attr("rng_algorithm")->enum_value, "DEFAULT");
  const Operation& c = op_named(*m, "stablehlo.case");
  ASSERT_EQ(c.regions.size(), 2u);
  EXPECT_EQ(c.regions[0]->front().ops[0]->name, "stablehlo.return");
  EXPECT_EQ(c.regions[0]->front().ops[0]->operands[0], rng.result(1));
  const Operation& ar = op_named(*m, "stablehlo.all_reduce");
  EXPECT_EQ(ar.attr("channel_handle")->kind, Kind::Struct);
  EXPECT_EQ(ar.attr("channel_handle")->field("handle")->integer, 1);
  EXPECT_EQ(ar.attr("use_global_device_ids")->kind, Kind::Unit);
  EXPECT_EQ(ar.attr("replica_groups")->tensor.shape(), (Shape{1, 2}));
  EXPECT_EQ(ar.regions[0]->front().arguments.size(), 2u);
}

// ---- generic form == pretty form
// ------------------------------------------------------------------

TEST(ParserGeneric, CompareDotBroadcastMatchPretty) {
  auto pretty = parse_module(
      wrap("    %0 = stablehlo.compare  LT, %arg0, %arg1,  FLOAT : (tensor<2x3xf32>, "
           "tensor<2x3xf32>) -> "
           "tensor<2x3xi1>\n"
           "    %1 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [1], precision = "
           "[DEFAULT, DEFAULT] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>\n"
           "    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 2] : (tensor<2x2xf32>) -> "
           "tensor<2x4x2xf32>\n"
           "    %3 = stablehlo.slice %arg0 [0:2, 1:3:2] : (tensor<2x3xf32>) -> tensor<2x1xf32>\n"
           "    %4 = stablehlo.iota dim = 0 : tensor<4xi32>",
           kArgs2));
  auto generic = parse_module(wrap(
      "    %0 = \"stablehlo.compare\"(%arg0, %arg1) <{compare_type = #stablehlo<comparison_type "
      "FLOAT>, comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<2x3xf32>, "
      "tensor<2x3xf32>) -> tensor<2x3xi1>\n"
      "    %1 = \"stablehlo.dot_general\"(%arg0, %arg1) <{dot_dimension_numbers = "
      "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>, "
      "precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : "
      "(tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>\n"
      "    %2 = \"stablehlo.broadcast_in_dim\"(%1) <{broadcast_dimensions = array<i64: 0, 2>}> : "
      "(tensor<2x2xf32>) -> tensor<2x4x2xf32>\n"
      "    %3 = \"stablehlo.slice\"(%arg0) <{limit_indices = array<i64: 2, 3>, start_indices = "
      "array<i64: 0, 1>, strides = array<i64: 1, 2>}> : (tensor<2x3xf32>) -> tensor<2x1xf32>\n"
      "    %4 = \"stablehlo.iota\"() <{iota_dimension = 0 : i64}> : () -> tensor<4xi32>",
      kArgs2));
  EXPECT_TRUE(SameModule(*pretty, *generic));
  // Attribute order in the text does not matter: ops keep their attributes sorted by name.
  EXPECT_EQ(print_module(*pretty), print_module(*generic));
}

TEST(ParserGeneric, WhileMatchesPretty) {
  auto pretty = parse_module(wrap(
      "    %c = stablehlo.constant dense<0> : tensor<i64>\n"
      "    %0 = stablehlo.while(%iterArg = %c) : tensor<i64>\n"
      "     cond {\n"
      "      %1 = stablehlo.compare  LT, %iterArg, %iterArg,  SIGNED : (tensor<i64>, tensor<i64>) "
      "-> tensor<i1>\n"
      "      stablehlo.return %1 : tensor<i1>\n"
      "    } do {\n"
      "      stablehlo.return %iterArg : tensor<i64>\n"
      "    }"));
  auto generic = parse_module(wrap(
      "    %c = \"stablehlo.constant\"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>\n"
      "    %0 = \"stablehlo.while\"(%c) ({\n"
      "    ^bb0(%x: tensor<i64>):\n"
      "      %1 = \"stablehlo.compare\"(%x, %x) <{comparison_direction = "
      "#stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type SIGNED>}> : "
      "(tensor<i64>, tensor<i64>) -> tensor<i1>\n"
      "      \"stablehlo.return\"(%1) : (tensor<i1>) -> ()\n"
      "    }, {\n"
      "    ^bb0(%y: tensor<i64>):\n"
      "      \"stablehlo.return\"(%y) : (tensor<i64>) -> ()\n"
      "    }) : (tensor<i64>) -> tensor<i64>"));
  EXPECT_TRUE(SameModule(*pretty, *generic));
  EXPECT_EQ(print_module(*pretty), print_module(*generic));
}

TEST(ParserGeneric, UnknownOpsAndAttributesAreKept) {
  const std::string text = wrap(
      "    %0:2 = \"mydialect.frob\"(%arg0) <{level = 3 : i64}> ({\n"
      "    ^bb0(%arg1: tensor<2x3xf32>):\n"
      "      \"mydialect.yield\"(%arg1) : (tensor<2x3xf32>) -> ()\n"
      "    }) {extra = #mydialect.thing<[1, 2] -> \"x\">, jax.buffer_donor = true, layout = "
      "affine_map<(d0) -> (d0)>, mhlo.sharding = \"{replicated}\", ref = #alias, "
      "tf.aliasing_output "
      "= 0 : i32} : (tensor<2x3xf32>) -> (tensor<f32>, tensor<i32>)\n"
      "    %1 = chlo.erf %arg0 : tensor<2x3xf32> -> tensor<2x3xf32>\n"
      "    %2:2 = chlo.top_k(%arg0, k = 1) : tensor<2x3xf32> -> (tensor<2x1xf32>, tensor<2x1xi32>)",
      "%arg0: tensor<2x3xf32> {jax.buffer_donor = true, mhlo.layout_mode = \"default\"}");
  auto m = round_trip(text);
  const Operation& op = op_named(*m, "mydialect.frob");
  EXPECT_EQ(op.num_results(), 2u);
  EXPECT_EQ(op.regions.size(), 1u);
  EXPECT_EQ(op.attr("extra")->kind, Kind::Opaque);
  EXPECT_EQ(op.attr("extra")->text, "#mydialect.thing<[1, 2] -> \"x\">");
  EXPECT_EQ(op.attr("layout")->text, "affine_map<(d0) -> (d0)>");
  EXPECT_EQ(op.attr("ref")->text, "#alias");
  EXPECT_EQ(op.attr("mhlo.sharding")->text, "{replicated}");
  EXPECT_EQ(op.attr("tf.aliasing_output")->dtype, DType::I32);
  EXPECT_EQ(op.attr("level")->integer, 3);
  EXPECT_TRUE(m->functions[0]->arg_attrs[0][0].value->boolean);
  // Unknown dialect ops in a simple pretty form are kept too (and print generic).
  EXPECT_EQ(op_named(*m, "chlo.erf").operands.size(), 1u);
  EXPECT_EQ(op_named(*m, "chlo.erf").result(0)->type, Type::tensor({2, 3}, DType::F32));
  auto u = round_trip(wrap("    %0 = chlo.erf %arg0 : tensor<2x3xf32>", "%arg0: tensor<2x3xf32>"));
  EXPECT_EQ(op_named(*u, "chlo.erf").operands.size(), 1u);
  // chlo ops print in JAX's form.
  EXPECT_NE(print_module(*u).find("chlo.erf %arg0 : tensor<2x3xf32> -> tensor<2x3xf32>"),
            std::string::npos);
  const Operation& top_k = op_named(*m, "chlo.top_k");
  EXPECT_EQ(top_k.int_attr("k"), 1);
  EXPECT_EQ(top_k.result(1)->type, Type::tensor({2, 1}, DType::I32));
  EXPECT_NE(print_module(*m).find("chlo.top_k(%arg0, k = 1) : tensor<2x3xf32> -> (tensor<2x1xf32>, "
                                  "tensor<2x1xi32>)"),
            std::string::npos);
}

TEST(ParserGeneric, ChloScanPrettyAndGenericAgree) {
  const std::string pretty = wrap(
      "    %0:2 = chlo.scan(%arg0) inits(%arg1) dimension=0 {\n"
      "    ^bb0(%a: tensor<i32>, %c: tensor<i32>):\n"
      "      %1 = stablehlo.add %a, %c : tensor<i32>\n"
      "      stablehlo.return %1, %1 : tensor<i32>, tensor<i32>\n"
      "    } : (tensor<4xi32>, tensor<i32>) -> (tensor<4xi32>, tensor<i32>)",
      "%arg0: tensor<4xi32>, %arg1: tensor<i32>");
  auto m = round_trip(pretty);
  const Operation& scan = op_named(*m, "chlo.scan");
  EXPECT_EQ(scan.int_attr("dimension"), 0);
  EXPECT_EQ(scan.ints("operandSegmentSizes"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(scan.regions.size(), 1u);
  EXPECT_EQ(scan.num_results(), 2u);
}

// Found by the fuzzer: an op whose attributes the pretty form cannot spell must print generic.
TEST(ParserGeneric, OutOfRangeEnumsPrintGeneric) {
  auto m = round_trip(wrap(
      "    %0 = \"stablehlo.compare\"(%arg0, %arg0) <{comparison_direction = "
      "#stablehlo<comparison_direction LTt>, compare_type = #stablehlo<comparison_type SIGNED>}> : "
      "(tensor<f32>, tensor<f32>) -> tensor<i1>\n"
      "    %1 = \"stablehlo.compare\"(%arg0, %arg0) <{comparison_direction = "
      "#stablehlo<comparison_direction LT>, compare_type = #stablehlo<comparison_type ODD>}> : "
      "(tensor<f32>, tensor<f32>) -> tensor<i1>",
      "%arg0: tensor<f32>"));
  const std::string p = print_module(*m);
  EXPECT_NE(p.find("%0 = \"stablehlo.compare\""), std::string::npos) << p;
  EXPECT_NE(p.find("%1 = \"stablehlo.compare\""), std::string::npos) << p;
}

// ---- dense constants
// ------------------------------------------------------------------------------

template <class T>
std::vector<T> constant_values(const std::string& literal_and_type) {
  auto m = parse_module(wrap("    %0 = stablehlo.constant " + literal_and_type));
  const Attribute* v = op_named(*m, "stablehlo.constant").attr("value");
  EXPECT_EQ(v->kind, Kind::DenseElements);
  EXPECT_EQ(v->tensor.dtype(), dtype_of<T>());
  // Printing and parsing back gives the same bytes.
  auto again = parse_module(print_module(*m));
  EXPECT_TRUE(SameModule(*m, *again)) << print_module(*m);
  return v->tensor.to_vector<T>();
}

TEST(ParserDense, IntegersOfEveryWidth) {
  EXPECT_EQ(constant_values<bool>("dense<[true, false, true]> : tensor<3xi1>"),
            (std::vector<bool>{true, false, true}));
  EXPECT_EQ(constant_values<int8_t>("dense<[-128, 127, 255]> : tensor<3xi8>"),
            (std::vector<int8_t>{-128, 127, -1}));
  EXPECT_EQ(constant_values<uint8_t>("dense<[0, 255]> : tensor<2xui8>"),
            (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(constant_values<int16_t>("dense<[-32768, 32767]> : tensor<2xi16>"),
            (std::vector<int16_t>{-32768, 32767}));
  EXPECT_EQ(constant_values<uint16_t>("dense<65535> : tensor<ui16>"),
            (std::vector<uint16_t>{65535}));
  EXPECT_EQ(constant_values<int32_t>("dense<[[-2147483648, 1], [2, 3]]> : tensor<2x2xi32>"),
            (std::vector<int32_t>{INT32_MIN, 1, 2, 3}));
  EXPECT_EQ(constant_values<uint32_t>("dense<[4294967295, 0x10]> : tensor<2xui32>"),
            (std::vector<uint32_t>{4294967295u, 16}));
  EXPECT_EQ(constant_values<int64_t>("dense<[-9223372036854775808, 9223372036854775807]> : "
                                     "tensor<2xi64>"),
            (std::vector<int64_t>{INT64_MIN, INT64_MAX}));
  EXPECT_EQ(constant_values<uint64_t>("dense<18446744073709551615> : tensor<1xui64>"),
            (std::vector<uint64_t>{UINT64_MAX}));
}

TEST(ParserDense, FloatsOfEveryWidth) {
  auto f32 = constant_values<float>(
      "dense<[1.000000e+00, -0.0311810765, 0x7FC00000, 0xFF800000, -0.000000e+00, 3.40282347E+38]> "
      ": tensor<6xf32>");
  ASSERT_EQ(f32.size(), 6u);
  EXPECT_EQ(f32[0], 1.0f);
  EXPECT_EQ(f32[1], -0.0311810765f);
  EXPECT_TRUE(std::isnan(f32[2]));
  EXPECT_EQ(std::bit_cast<uint32_t>(f32[2]), 0x7FC00000u);
  EXPECT_EQ(f32[3], -INFINITY);
  EXPECT_TRUE(std::signbit(f32[4]));
  EXPECT_EQ(f32[5], 3.40282347e+38f);
  auto f64 = constant_values<double>(
      "dense<[-0.10103910117943558, -1.300025009986248E-8, 0xFFF0000000000000]> : tensor<3xf64>");
  EXPECT_EQ(f64[0], -0.10103910117943558);
  EXPECT_EQ(f64[1], -1.300025009986248E-8);
  EXPECT_EQ(f64[2], -INFINITY);
  auto f16 = constant_values<float16>(
      "dense<[1.500000e+00, 0x7C00, -2.000000e+00, 6.5504E+4]> : "
      "tensor<4xf16>");
  EXPECT_EQ(f16[0].bits, float16(1.5).bits);
  EXPECT_EQ(f16[1].bits, 0x7C00);
  EXPECT_EQ(static_cast<float>(f16[2]), -2.0f);
  EXPECT_EQ(static_cast<float>(f16[3]), 65504.0f);
  auto bf16 = constant_values<bfloat16>("dense<[-1.820310e+00, 0xFF80, 3]> : tensor<3xbf16>");
  EXPECT_EQ(bf16[0].bits, bfloat16(-1.8203125).bits);
  EXPECT_EQ(bf16[1].bits, 0xFF80);
  EXPECT_EQ(static_cast<float>(bf16[2]), 3.0f);
}

TEST(ParserDense, SplatsExpand) {
  auto v = constant_values<int32_t>("dense<7> : tensor<3x4xi32>");
  EXPECT_EQ(v, std::vector<int32_t>(12, 7));
  auto z = constant_values<float>("dense<0.000000e+00> : tensor<2x3xf32>");
  EXPECT_EQ(z, std::vector<float>(6, 0.0f));
  auto b = constant_values<bool>("dense<true> : tensor<5xi1>");
  EXPECT_EQ(b, std::vector<bool>(5, true));
  auto n = constant_values<float>("dense<0x7FC00000> : tensor<3xf32>");
  for (float x : n) EXPECT_EQ(std::bit_cast<uint32_t>(x), 0x7FC00000u);
  auto e = constant_values<float>("dense<> : tensor<2x0x3xf32>");
  EXPECT_TRUE(e.empty());
}

TEST(ParserDense, HexBlobs) {
  // Little-endian raw bytes, row-major.
  auto v = constant_values<int32_t>("dense<\"0x0100000002000000FFFFFFFF\"> : tensor<3xi32>");
  EXPECT_EQ(v, (std::vector<int32_t>{1, 2, -1}));
  // One element's bytes is a splat.
  auto s = constant_values<float>("dense<\"0x0000803F\"> : tensor<2x2xf32>");
  EXPECT_EQ(s, std::vector<float>(4, 1.0f));
  // i1 uses one byte per element.
  auto b = constant_values<bool>("dense<\"0x00010100\"> : tensor<2x2xi1>");
  EXPECT_EQ(b, (std::vector<bool>{false, true, true, false}));
  auto h = constant_values<bfloat16>("dense<\"0x803F0040\"> : tensor<2xbf16>");
  EXPECT_EQ(static_cast<float>(h[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(h[1]), 2.0f);
}

TEST(ParserDense, PrintingStyle) {
  // Small constants print as decimal lists, large ones as hex blobs, all-equal ones as splats.
  std::string small = "[";
  for (int i = 0; i < 100; ++i) small += (i ? ", " : "") + std::to_string(i);
  small += "]";
  auto m = parse_module(wrap("    %0 = stablehlo.constant dense<" + small +
                             "> : tensor<100xi32>\n"
                             "    %1 = stablehlo.iota dim = 0 : tensor<101xi32>"));
  const std::string p = print_module(*m);
  EXPECT_NE(p.find("dense<" + small + "> : tensor<100xi32>"), std::string::npos);
  std::string big = "[";
  for (int i = 0; i < 101; ++i) big += (i ? ", " : "") + std::to_string(i);
  big += "]";
  auto m2 = parse_module(wrap("    %0 = stablehlo.constant dense<" + big + "> : tensor<101xi8>"));
  const std::string p2 = print_module(*m2);
  EXPECT_NE(p2.find("dense<\"0x000102030405"), std::string::npos) << p2;
  auto m3 = parse_module(wrap("    %0 = stablehlo.constant dense<[3, 3, 3]> : tensor<3xi8>"));
  EXPECT_NE(print_module(*m3).find("dense<3> : tensor<3xi8>"), std::string::npos);
  EXPECT_NE(print_module(*m3).find("%c = stablehlo.constant"), std::string::npos);
}

TEST(ParserDense, ArrayAndDenseAttributes) {
  auto m = round_trip(wrap(
      "    \"stablehlo.foo\"() {a = array<i64: 1, -2>, b = array<i1: true, false>, c = "
      "array<i64>, d = dense<[[1, 2], [0, 0]]> : tensor<2x2xi64>, e = array<f32: 1.5, -0.25>, f = "
      "1.000000e+00 : f16, g = -3 : i8, h = 0x7FC00000 : f32, i = 2.5, j = 18446744073709551615 : "
      "ui64, k = 0x7F800001 : f32, l = 0x7C01 : f16, n = array<bf16: 0xFF81, 1.0>} : () -> ()"));
  const Operation& op = op_named(*m, "stablehlo.foo");
  // Signaling NaNs keep their bits through the double that holds them.
  EXPECT_EQ(print_attribute(*op.attr("k")), "0x7F800001 : f32");
  EXPECT_EQ(print_attribute(*op.attr("l")), "0x7C01 : f16");
  EXPECT_EQ(print_attribute(*op.attr("n")), "array<bf16: 0xFF81, 1.000000e+00>");
  EXPECT_EQ(op.attr("a")->ints, (std::vector<int64_t>{1, -2}));
  EXPECT_EQ(op.attr("a")->dtype, DType::I64);
  EXPECT_EQ(op.attr("b")->dtype, DType::Bool);
  EXPECT_EQ(op.attr("b")->ints, (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(op.attr("c")->ints.empty());
  EXPECT_EQ(as_ints(*op.attr("d")), (std::vector<int64_t>{1, 2, 0, 0}));
  EXPECT_EQ(op.attr("d")->tensor.shape(), (Shape{2, 2}));
  EXPECT_EQ(op.attr("e")->floats, (std::vector<double>{1.5, -0.25}));
  EXPECT_EQ(op.attr("f")->kind, Kind::Float);
  EXPECT_EQ(op.attr("f")->dtype, DType::F16);
  EXPECT_EQ(op.attr("f")->floating, 1.0);
  EXPECT_EQ(op.attr("g")->integer, -3);
  EXPECT_TRUE(std::isnan(op.attr("h")->floating));
  EXPECT_EQ(op.attr("i")->floating, 2.5);
  EXPECT_EQ(static_cast<uint64_t>(op.attr("j")->integer), UINT64_MAX);
}

// ---- locations and names ------------------------------------------------------------------------

TEST(ParserLoc, LocationsAreKept) {
  const std::string text =
      "#loc = loc(unknown)\n"
      "module @m {\n"
      "  func.func public @main(%arg0: tensor<f32> {mhlo.layout_mode = \"default\"} "
      "loc(\"x\")) -> tensor<f32> {\n"
      "    %0 = stablehlo.sine %arg0 : tensor<f32> loc(#loc2)\n"
      "    %1 = \"stablehlo.sort\"(%0) <{dimension = 0 : i64}> ({\n"
      "    ^bb0(%arg1: tensor<f32> loc(\"a\"), %arg2: tensor<f32> loc(fused[\"b\", \"c\"])):\n"
      "      %2 = stablehlo.compare  LT, %arg1, %arg2,  FLOAT : (tensor<f32>, tensor<f32>) -> "
      "tensor<i1> loc(callsite(#loc3 at #loc4))\n"
      "      stablehlo.return %2 : tensor<i1>\n"
      "    }) : (tensor<f32>) -> tensor<f32> loc(\"sort\"(#loc2))\n"
      "    return %1 : tensor<f32> loc(#loc)\n"
      "  } loc(#loc)\n"
      "} loc(#loc)\n"
      "#loc2 = loc(\"/tmp/x.py\":3:4 to 5:6)\n"
      "#loc3 = loc(\"jit(f)/sin\"(#loc2))\n"
      "#loc4 = loc(unknown)\n";
  auto m = round_trip(text);
  const Function& f = *m->functions[0];
  EXPECT_EQ(f.entry().arguments[0]->loc, "loc(\"x\")");
  EXPECT_EQ(f.loc, "loc(#loc)");
  EXPECT_EQ(m->loc, "loc(#loc)");
  EXPECT_EQ(f.entry().ops[0]->loc, "loc(#loc2)");
  const Operation& sort = op_named(*m, "stablehlo.sort");
  EXPECT_EQ(sort.loc, "loc(\"sort\"(#loc2))");
  EXPECT_EQ(sort.regions[0]->front().arguments[1]->loc, "loc(fused[\"b\", \"c\"])");
  EXPECT_EQ(op_named(*m, "stablehlo.compare").loc, "loc(callsite(#loc3 at #loc4))");
  ASSERT_EQ(m->aliases.size(), 4u);
  EXPECT_EQ(m->aliases[0], "#loc = loc(unknown)");
  EXPECT_EQ(m->aliases[1], "#loc2 = loc(\"/tmp/x.py\":3:4 to 5:6)");
  // Location aliases print after the module, where MLIR allows them.
  const std::string p = print_module(*m);
  EXPECT_NE(p.find("} loc(#loc)\n#loc = loc(unknown)\n#loc2"), std::string::npos) << p;
}

TEST(ParserLoc, CompactReduceKeepsItsLocation) {
  auto m = round_trip(wrap(
      "    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
      "    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = "
      "[0] : (tensor<3xf32>, tensor<f32>) -> tensor<f32> loc(\"r\")",
      "%arg0: tensor<3xf32>"));
  const Operation& r = op_named(*m, "stablehlo.reduce");
  EXPECT_EQ(r.loc, "loc(\"r\")");
  EXPECT_EQ(r.regions[0]->front().ops[0]->loc, "loc(\"r\")");
}

TEST(ParserNames, ValueNamesAndResultGroups) {
  auto m = round_trip(
      wrap("    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>\n"
           "    %a, %b:2 = \"test.three\"(%cst_3) : (tensor<f32>) -> (tensor<f32>, tensor<f32>, "
           "tensor<f32>)\n"
           "    %0 = stablehlo.add %b#1, %a : tensor<f32>\n"
           "    %x.y-z$ = stablehlo.add %0, %b : tensor<f32>"));
  const Block& blk = m->functions[0]->entry();
  EXPECT_EQ(blk.ops[0]->result(0)->name_hint, "cst_3");
  EXPECT_EQ(blk.ops[1]->result(0)->name_hint, "a");
  EXPECT_EQ(blk.ops[1]->result(2)->name_hint, "b");
  EXPECT_EQ(blk.ops[2]->operands[0], blk.ops[1]->result(2));
  EXPECT_EQ(blk.ops[2]->operands[1], blk.ops[1]->result(0));
  EXPECT_EQ(blk.ops[3]->operands[1], blk.ops[1]->result(1));
  EXPECT_EQ(blk.ops[3]->result(0)->name_hint, "x.y-z$");
  EXPECT_EQ(blk.ops[2]->line, 5);
  EXPECT_EQ(blk.ops[2]->column, 5);
}

// ---- errors
// ---------------------------------------------------------------------------------------

TEST(ParserErrors, TruncatedInput) {
  const std::string text =
      wrap("    %0 = stablehlo.add %arg0, %arg0 : tensor<f32>", "%arg0: tensor<f32>");
  // Cut in the middle of the op, then at the end of a line.
  ParseError e = parse_error(text.substr(0, text.find("tensor<f32>\n")));
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 39);
  EXPECT_NE(std::string(e.what()).find("expected type"), std::string::npos) << e.what();
  ParseError e2 = parse_error(text.substr(0, text.find("  }")));
  EXPECT_EQ(e2.line(), 4);
  EXPECT_EQ(e2.column(), 1);
  EXPECT_NE(std::string(e2.what()).find("end of input"), std::string::npos) << e2.what();
  // Every prefix of a real program is rejected with a ParseError (and nothing else).
  const std::string full =
      "module @jit_main {\n  func.func public @main() -> (tensor<2xf32> {jax.result_info = "
      "\"\"}) {\n    %cst = stablehlo.constant dense<[1.000000e+00, 2.000000e+00]> : "
      "tensor<2xf32>\n    %0 = stablehlo.reduce(%cst init: %cst) applies stablehlo.add across "
      "dimensions = [0] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>\n    return %0 : "
      "tensor<2xf32>\n  }\n}\n";
  for (size_t n = 1; n + 2 < full.size(); ++n) {
    try {
      parse_module(full.substr(0, n));
      ADD_FAILURE() << "prefix of length " << n << " parsed";
    } catch (const ParseError&) {
    }
  }
}

TEST(ParserErrors, UnknownType) {
  ParseError e = parse_error(
      wrap("    %0 = stablehlo.add %arg0, %arg0 : tensor<2xq7>", "%arg0: tensor<2xf32>"));
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 48);
  EXPECT_NE(std::string(e.what()).find("unknown element type 'q7'"), std::string::npos) << e.what();
  ParseError c = parse_error(wrap("    %0 = stablehlo.constant dense<1> : tensor<2xq7>"));
  EXPECT_NE(std::string(c.what()).find("'q7'"), std::string::npos) << c.what();
  EXPECT_NE(std::string(parse_error(wrap("", "%arg0: tuple<tensor<f32>>")).what()).find("tuple"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error(wrap("", "%arg0: tensor<*xf32>")).what()).find("unranked"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error(wrap("", "%arg0: tensor<?f32>")).what()).find("after '?'"),
            std::string::npos);
  const std::string q =
      parse_error(wrap("", "%arg0: tensor<2x!quant.calibrated<f32<-1.0:1.0>>>")).what();
  EXPECT_NE(q.find("only !quant.uniform"), std::string::npos) << q;
}

TEST(ParserErrors, DenseShapeMismatch) {
  ParseError e = parse_error(wrap("    %0 = stablehlo.constant dense<[1, 2, 3]> : tensor<2xi32>"));
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 42);  // the third element
  EXPECT_NE(std::string(e.what()).find("too many elements"), std::string::npos) << e.what();
  ParseError f =
      parse_error(wrap("    %0 = stablehlo.constant dense<[[1, 2], [3]]> : tensor<2x2xi32>"));
  EXPECT_EQ(f.line(), 3);
  EXPECT_EQ(f.column(), 44);  // the short inner list
  EXPECT_NE(std::string(f.what()).find("1 elements in dimension 1"), std::string::npos) << f.what();
  ParseError g =
      parse_error(wrap("    %0 = stablehlo.constant dense<[1, 2, 3, 4]> : tensor<2x2xi32>"));
  EXPECT_NE(std::string(g.what()).find("expected '['"), std::string::npos) << g.what();
  ParseError h = parse_error(wrap("    %0 = stablehlo.constant dense<\"0x0102\"> : tensor<3xi8>"));
  EXPECT_NE(std::string(h.what()).find("2 bytes"), std::string::npos) << h.what();
}

TEST(ParserErrors, UndefinedValue) {
  ParseError e =
      parse_error(wrap("    %0 = stablehlo.add %arg0, %9 : tensor<f32>\n"
                       "    return %0 : tensor<f32>",
                       "%arg0: tensor<f32>"));
  EXPECT_EQ(e.line(), 3);
  EXPECT_EQ(e.column(), 31);
  EXPECT_NE(std::string(e.what()).find("'%9'"), std::string::npos) << e.what();
  // A value from a sibling region is not visible.
  ParseError s = parse_error(wrap(
      "    %0 = \"stablehlo.case\"(%arg0) ({\n      %1 = stablehlo.constant dense<1> : "
      "tensor<i32>\n"
      "      stablehlo.return %1 : tensor<i32>\n    }, {\n      stablehlo.return %1 : tensor<i32>\n"
      "    }) : (tensor<i32>) -> tensor<i32>",
      "%arg0: tensor<i32>"));
  EXPECT_EQ(s.line(), 7);
  EXPECT_NE(std::string(s.what()).find("'%1'"), std::string::npos);
}

TEST(ParserErrors, OtherProblems) {
  auto msg = [](const std::string& body, const std::string& args = "%arg0: tensor<f32>") {
    return std::string(parse_error(wrap(body, args)).what());
  };
  EXPECT_NE(msg("    %0:2 = stablehlo.add %arg0, %arg0 : tensor<f32>").find("defines 2 result"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = stablehlo.add %arg0, %arg0 : tensor<f32>\n"
                "    %0 = stablehlo.add %arg0, %arg0 : tensor<f32>")
                .find("redefinition"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = stablehlo.constant dense<1.5> : tensor<i32>").find("floating-point"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = stablehlo.constant dense<256> : tensor<ui8>").find("out of range"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = stablehlo.constant dense<1.2.3> : tensor<f32>").find("expected '>'"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = stablehlo.constant dense<12abc> : tensor<f32>").find("malformed"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = stablehlo.add %arg0 : tensor<f32>").find("takes 2 operands"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = stablehlo.add %arg0, %arg0 : tensor<i32>").find("has type tensor<f32>"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = stablehlo.compare  XX, %arg0, %arg0 : (tensor<f32>, tensor<f32>) -> "
                "tensor<i1>")
                .find("comparison direction"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = frobnicate %arg0").find("unknown operation 'frobnicate'"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = \"x.y\"() {a = 1, a = 2} : () -> ()").find("duplicate"),
            std::string::npos);
  EXPECT_NE(msg("", "%arg0: tensor<4611686018427387904x4xf32>").find("too large"),
            std::string::npos);
  EXPECT_NE(msg("    %0 = stablehlo.constant dense<0> : tensor<2x0x-1xi32>").find("element type"),
            std::string::npos);
  EXPECT_NE(std::string(parse_error("module {\n} trailing").what()).find("expected 'module'"),
            std::string::npos);
}

TEST(ParserErrors, DeepNestingIsRejectedNotACrash) {
  std::string body;
  for (int i = 0; i < 1000; ++i) body += "%" + std::to_string(i) + " = \"x.y\"() ({\n";
  ParseError e = parse_error(wrap(body));
  EXPECT_NE(std::string(e.what()).find("too deep"), std::string::npos) << e.what();
  ParseError a =
      parse_error(wrap("    \"x.y\"() {a = " + std::string(100000, '[') + "} : () -> ()"));
  EXPECT_NE(std::string(a.what()).find("too deep"), std::string::npos);
  ParseError d = parse_error(
      wrap("    %0 = stablehlo.constant dense<" + std::string(5000, '[') + "> : tensor<1xf32>"));
  EXPECT_EQ(d.line(), 3);
}

TEST(ParserErrors, SplatBudget) {
  const uint64_t old = detail::splat_expansion_limit();
  detail::set_splat_expansion_limit(1 << 20);
  ParseError e = parse_error(wrap("    %0 = stablehlo.constant dense<0> : tensor<1000000xi32>"));
  EXPECT_NE(std::string(e.what()).find("over the limit"), std::string::npos) << e.what();
  EXPECT_NO_THROW(parse_module(wrap("    %0 = stablehlo.constant dense<0> : tensor<1000xi32>")));
  detail::set_splat_expansion_limit(old);
}

// ---- printing
// ------------------------------------------------------------------------------------

TEST(ParserPrinter, TypesAndAttributes) {
  EXPECT_EQ(print_type(Type::tensor({2, 3}, DType::F32)), "tensor<2x3xf32>");
  EXPECT_EQ(print_type(Type::tensor({}, DType::U8)), "tensor<ui8>");
  EXPECT_EQ(print_type(Type::token()), "!stablehlo.token");
  EXPECT_EQ(print_attribute(*Attribute::integer_attr(3, DType::I64)), "3 : i64");
  EXPECT_EQ(print_attribute(*Attribute::integer_attr(3, std::nullopt)), "3");
  EXPECT_EQ(print_attribute(*Attribute::float_attr(1.0, DType::F32)), "1.000000e+00 : f32");
  EXPECT_EQ(print_attribute(*Attribute::float_attr(NAN, DType::F32)), "0x7FC00000 : f32");
  EXPECT_EQ(print_attribute(*Attribute::string_attr("a\"b\n")), "\"a\\\"b\\0A\"");
  EXPECT_EQ(print_attribute(*Attribute::enum_attr("precision", "HIGH")),
            "#stablehlo<precision HIGH>");
  EXPECT_EQ(print_attribute(*Attribute::dense_array({1, 2})), "array<i64: 1, 2>");
  EXPECT_EQ(print_attribute(*Attribute::dense_array({}, DType::I64)), "array<i64>");
  EXPECT_EQ(print_attribute(
                *Attribute::dense_elements(HostTensor::from_vector<int64_t>({1, 2, 0, 0}, {2, 2}))),
            "dense<[[1, 2], [0, 0]]> : tensor<2x2xi64>");
  EXPECT_EQ(
      print_attribute(*Attribute::struct_attr(
          "stablehlo.gather", {{"offset_dims", Attribute::int_list({1})},
                               {"index_vector_dim", Attribute::integer_attr(1, std::nullopt)}})),
      "#stablehlo.gather<offset_dims = [1], index_vector_dim = 1>");
  EXPECT_EQ(print_attribute(*Attribute::symbol("f")), "@f");
}

TEST(ParserPrinter, ProgrammaticModuleUsesJaxStyle) {
  Module m;
  m.name = "jit_f";
  Function& f = m.add_function("main");
  f.visibility = "public";
  Block& b = f.entry();
  Value* x = b.add_argument(Type::tensor({3}, DType::F32));
  f.arg_attrs.emplace_back();
  auto c = make_op("stablehlo.constant", {}, {Type::tensor({3}, DType::F32)});
  c->set_attr("value", Attribute::dense_elements(HostTensor::from_vector<float>({1, 2, 3}, {3})));
  Value* cv = b.push_back(std::move(c))->result(0);
  auto add = make_op("stablehlo.add", {x, cv}, {Type::tensor({3}, DType::F32)});
  Value* s = b.push_back(std::move(add))->result(0);
  b.push_back(make_op("func.return", {s}, {}));
  f.result_types = {Type::tensor({3}, DType::F32)};
  f.result_attrs = {{{"jax.result_info", Attribute::string_attr("result")}}};
  EXPECT_EQ(print_module(m),
            "module @jit_f {\n"
            "  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32> {jax.result_info = "
            "\"result\"}) {\n"
            "    %cst = stablehlo.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : "
            "tensor<3xf32>\n"
            "    %0 = stablehlo.add %arg0, %cst : tensor<3xf32>\n"
            "    return %0 : tensor<3xf32>\n"
            "  }\n"
            "}\n");
  // An op whose attributes do not fit its pretty form prints generic, and reads back the same.
  auto m2 = parse_module(
      wrap("    %0 = \"stablehlo.broadcast_in_dim\"(%arg0) <{broadcast_dimensions = dense<0> : "
           "tensor<1xi64>}> : (tensor<3xf32>) -> tensor<3xf32>",
           "%arg0: tensor<3xf32>"));
  const std::string p2 = print_module(*m2);
  EXPECT_NE(p2.find("\"stablehlo.broadcast_in_dim\"(%arg0) <{broadcast_dimensions = dense<0> : "
                    "tensor<1xi64>}>"),
            std::string::npos)
      << p2;
  EXPECT_TRUE(SameModule(*m2, *parse_module(p2)));
}

// Every float of every width prints as text that reads back to the same bits.
TEST(ParserPrinter, FloatsRoundTripExactly) {
  using asm_util::decimal_to_float_bits;
  using asm_util::format_float;
  auto check = [](uint64_t bits, DType t) {
    const std::string s = format_float(bits, t);
    uint64_t back = 0;
    if (s.rfind("0x", 0) == 0) {
      back = std::stoull(s.substr(2), nullptr, 16);
    } else {
      ASSERT_NE(s.find('.'), std::string::npos) << s;
      ASSERT_TRUE(decimal_to_float_bits(s, t, &back)) << s;
    }
    ASSERT_EQ(back, bits) << s << " for " << mlir_name(t);
  };
  for (uint64_t b = 0; b < 0x10000; ++b) {
    check(b, DType::F16);
    check(b, DType::BF16);
  }
  std::mt19937_64 rng(42);
  for (int i = 0; i < 50000; ++i) check(rng() & 0xffffffffu, DType::F32);
  for (int i = 0; i < 20000; ++i) check(rng(), DType::F64);
  EXPECT_EQ(format_float(0x3F800000, DType::F32), "1.000000e+00");
  EXPECT_EQ(format_float(std::bit_cast<uint32_t>(-0.0311810765f), DType::F32), "-0.0311810765");
  EXPECT_EQ(format_float(std::bit_cast<uint64_t>(-1.300025009986248E-8), DType::F64),
            "-1.300025009986248E-8");
  EXPECT_EQ(format_float(bfloat16(-1.8203125).bits, DType::BF16), "-1.820310e+00");
  // APFloat truncates extra digits before rounding: 1 - 2^-24 prints with 8 digits, not 9.
  EXPECT_EQ(format_float(std::bit_cast<uint32_t>(0.99999988f), DType::F32), "0.99999988");
  EXPECT_EQ(format_float(0x7FC00000, DType::F32), "0x7FC00000");
}

// ---- conformance round trip ---------------------------------------------------------------------

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The text without the leading `// RUN:` comment lines and blank lines.
std::string without_header(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    const std::string_view line(text.data() + pos,
                                (end == std::string::npos ? text.size() : end) - pos);
    if (!(line.empty() || line.substr(0, 2) == "//")) break;
    pos = end == std::string::npos ? text.size() : end + 1;
  }
  return text.substr(pos);
}

TEST(ParserConformance, RoundTripsEveryProgram) {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const std::filesystem::path dir =
      std::filesystem::path(env && *env ? env : CUJAX_DEFAULT_SHARED_DIR) / "conformance" /
      "stablehlo-testdata";
  if (!std::filesystem::is_directory(dir))
    GTEST_SKIP() << "conformance programs not found at " << dir
                 << " (set CUJAX_SHARED_DIR to the folder that holds conformance/)";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".mlir") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  double parse_seconds = 0;
  size_t bytes = 0, exact = 0, reported = 0;
  for (const auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    const std::string text = read_file(path);
    bytes += text.size();
    std::unique_ptr<Module> m;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      m = parse_module(text);
    } catch (const ParseError& e) {
      ADD_FAILURE() << path.filename() << ": " << e.what();
      continue;
    }
    parse_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string printed = print_module(*m);
    std::unique_ptr<Module> again;
    try {
      again = parse_module(printed);
    } catch (const ParseError& e) {
      ADD_FAILURE() << "printed text does not parse: " << e.what();
      continue;
    }
    EXPECT_TRUE(SameModule(*m, *again));
    EXPECT_EQ(print_module(*again), printed);
    if (printed == without_header(text)) {
      ++exact;
    } else if (reported++ < 3) {
      const std::string want = without_header(text);
      size_t i = 0;
      while (i < want.size() && i < printed.size() && want[i] == printed[i]) ++i;
      const size_t line = want.rfind('\n', i) == std::string::npos ? 0 : want.rfind('\n', i) + 1;
      ADD_FAILURE() << "printed text differs from the source at byte " << i
                    << ":\n  source:  " << want.substr(line, want.find('\n', line) - line)
                    << "\n  printed: " << printed.substr(line, printed.find('\n', line) - line);
    }
  }
  std::printf("[ parser   ] %zu programs, %.1f MB parsed in %.3f s; %zu print back byte for byte\n",
              files.size(), bytes / 1e6, parse_seconds, exact);
  EXPECT_EQ(exact, files.size());
#ifdef NDEBUG
  EXPECT_LT(parse_seconds, 5.0);
#endif
}

}  // namespace
}  // namespace cujax::ir
