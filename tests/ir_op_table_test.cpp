// The op table (src/ir/op_table.h, op_attrs.h) against the VHLO table generated from StableHLO's
// VhloOps.td, and the verifier's checks that come from it alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "ir/bytecode/vhlo_attrs.h"
#include "ir/bytecode/vhlo_ops.h"
#include "ir/op_attrs.h"
#include "ir/op_table.h"
#include "ir_builder.h"

namespace cujax::ir {
namespace {

using namespace testutil;

// The op table and the VHLO table (from StableHLO's VhloOps.td) name the same ops: each row
// but stablehlo.trace (dropped from VHLO) has a VHLO version, and each VHLO op but func a row.
TEST(OpTable, NamesTheOpsVhloHas) {
  std::vector<std::string> seen;
  for (const ops::OpDef& d : ops::kOps) {
    const std::string name(d.name);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), name), 0) << name << " has two rows";
    seen.push_back(name);
    // The bytecode reader reads back what the writer writes.
    EXPECT_EQ(ops::from_vhlo_base(ops::vhlo_base(name), name == "func.return"), name);
    if (name == "stablehlo.trace") continue;
    const std::string base(ops::vhlo_base(name));
    EXPECT_NE(bytecode::find_vhlo_op(base + "_v1"), nullptr) << name << " has no VHLO op";
  }
  for (const char* v : {"batch_norm_grad_v1", "map_v1", "recv_v1", "collective_broadcast_v1",
                        "dynamic_conv_v1", "tuple_v1", "async_start_v1"}) {
    ASSERT_NE(bytecode::find_vhlo_op(v), nullptr) << v;
    const std::string base(v, std::string_view(v).rfind("_v"));
    EXPECT_NE(ops::find(ops::from_vhlo_base(base, false)), nullptr) << base << " has no row";
  }
  // Rows a pretty form prints are exactly those syntax::find gives.
  for (const ops::OpDef& d : ops::kOps)
    EXPECT_EQ(syntax::find(d.name) != nullptr, d.form != syntax::Form::Generic) << d.name;
}

// Ops without a type rule of their own still get the counts the table gives them.
TEST(OpTable, CountsOfOpsWithoutATypeRule) {
  {
    Builder bld({T({2, 2}), T({2, 2})}, {T({2, 2})});
    Value* d = bld.op("stablehlo.dot", {bld.arg(0), bld.arg(1), bld.arg(1)}, {T({2, 2})})->result();
    bld.ret({d});
    expect_error(bld.m, {"stablehlo.dot", "expects 2 operands, got 3"});
  }
  {
    Builder bld({T({2})}, {});
    bld.op("stablehlo.batch_norm_training", {bld.arg(0), bld.arg(0), bld.arg(0)}, {T({2})});
    bld.ret({});
    expect_error(bld.m, {"stablehlo.batch_norm_training", "expects 3 results, got 1"});
  }
  {  // one result per operand
    Builder bld({T({2}), T({3})}, {});
    bld.op("stablehlo.optimization_barrier", {bld.arg(0), bld.arg(1)}, {T({2})});
    bld.ret({});
    expect_error(bld.m, {"stablehlo.optimization_barrier", "has 1 results, expected 2"});
  }
  {  // at least one operand
    Builder bld({}, {});
    bld.op("stablehlo.concatenate", {}, {T({0})})
        ->set_attr("dimension", Attribute::integer_attr(0, DType::I64));
    bld.ret({});
    expect_error(bld.m, {"stablehlo.concatenate", "expects at least 1 operand, got 0"});
  }
  // The element type class of a plain element-wise op comes from its row.
  const ops::OpDef* shl = ops::find("stablehlo.shift_left");
  ASSERT_NE(shl, nullptr);
  ASSERT_TRUE(shl->kinds.has_value());
  EXPECT_EQ(*shl->kinds, ops::Kinds::Integer);
  Builder bld({T({2}), T({2})}, {T({2})});
  Value* s = bld.op("stablehlo.shift_left", {bld.arg(0), bld.arg(1)}, {T({2})})->result();
  bld.ret({s});
  expect_error(bld.m, {"stablehlo.shift_left", "expected a tensor of integer type"});
}

// Every attribute row names an op of the table, once, and an attribute VHLO gives some version
// of that op (StableHLO's own joined forms aside: VHLO spells dimension numbers, channel handles
// and dot algorithms field by field).
TEST(OpTable, AttributeRowsMatchVhlo) {
  const std::set<std::string> joined = {"dimension_numbers", "dot_dimension_numbers",
                                        "scatter_dimension_numbers", "channel_handle", "algorithm"};
  std::set<std::pair<std::string, std::string>> seen;
  size_t checked = 0;
  for (const ops::AttrDef& a : ops::attribute_rows()) {
    EXPECT_TRUE(seen.emplace(a.op, a.name).second) << a.op << " " << a.name << " has two rows";
    EXPECT_FALSE(a.required && a.default_value) << a.op << " " << a.name;
    if (a.op.empty()) continue;  // every op that takes it
    ASSERT_NE(ops::find(a.op), nullptr) << a.op << " (attribute " << a.name << ") has no op row";
    if (joined.count(std::string(a.name))) continue;
    const std::string base(ops::vhlo_base(a.op));
    bool found = false;
    for (int v = 1; v <= 3; ++v)
      if (const auto* info = bytecode::find_vhlo_op(base + "_v" + std::to_string(v)))
        for (const char* n : info->attributes) found |= a.name == n;
    EXPECT_TRUE(found) << a.op << " " << a.name << " is in no VHLO version of " << base;
    ++checked;
  }
  EXPECT_GT(checked, 100u);
}

// The bytecode's defaults and dense-array forms are the table's.
TEST(OpTable, BytecodeReadsDefaultsFromTheTable) {
  const ops::AttrDef* row = ops::find_attribute("stablehlo.compare", "compare_type");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(bytecode::vhlo_default("compare", "compare_type"), &*row->default_value);
  EXPECT_EQ(bytecode::vhlo_default("compare", "comparison_direction"), nullptr);  // required
  const ops::AttrDef* acc = ops::find_attribute("stablehlo.exponential", "result_accuracy");
  ASSERT_NE(acc, nullptr);
  EXPECT_EQ(acc->default_value->kind, ops::AttrDefault::Kind::DefaultAccuracy);
  EXPECT_TRUE(bytecode::vhlo_dense_array_attr("transpose", "permutation"));
  EXPECT_TRUE(bytecode::vhlo_dense_array_attr("convolution", "window_reversal"));
  EXPECT_FALSE(bytecode::vhlo_dense_array_attr("convolution", "padding"));
  EXPECT_FALSE(bytecode::vhlo_dense_array_attr("concatenate", "dimension"));
  // VHLO-only attributes keep their own defaults.
  ASSERT_NE(bytecode::vhlo_default("all_reduce", "channel_id"), nullptr);
  EXPECT_EQ(bytecode::vhlo_default("func", "sym_visibility")->kind,
            ops::AttrDefault::Kind::EmptyString);
}

// Ops without a rule for an attribute still get its presence and kind checked from the table,
// and their region count.
TEST(OpTable, VerifierChecksAttributesAndRegions) {
  {
    Builder bld({T({2}), T({2})}, {T({2}, DType::Bool)});
    Operation* c = bld.op("stablehlo.compare", {bld.arg(0), bld.arg(1)}, {T({2}, DType::Bool)});
    bld.ret({c->result()});
    expect_error(bld.m, {"stablehlo.compare", "missing attribute 'comparison_direction'"});
    c->set_attr("comparison_direction", Attribute::string_attr("LT"));
    expect_error(bld.m, {"stablehlo.compare", "attribute 'comparison_direction' must be an enum"});
    c->set_attr("comparison_direction", Attribute::enum_attr("comparison_direction", "LT"));
    EXPECT_NO_THROW(verify(bld.m));
    // Attributes the table does not name are the producer's.
    c->set_attr("mhlo.sharding", Attribute::string_attr("{replicated}"));
    EXPECT_NO_THROW(verify(bld.m));
  }
  {
    Builder bld({T({2, 3}), T({})}, {T({2})});
    Operation* r = bld.op("stablehlo.reduce", {bld.arg(0), bld.arg(1)}, {T({2})});
    r->set_attr("dimensions", Attribute::dense_array({1}));
    bld.ret({r->result()});
    expect_error(bld.m, {"stablehlo.reduce", "has 0 regions, expected 1"});
  }
  {
    Builder bld({T({2})}, {T({2})});
    Operation* n = bld.op("stablehlo.negate", {bld.arg(0)}, {T({2})});
    add_binary_body(n, "stablehlo.add", DType::F32);
    bld.ret({n->result()});
    expect_error(bld.m, {"stablehlo.negate", "has 1 region, expected 0"});
  }
  {
    Builder bld({T({4})}, {T({4})});
    Operation* s = bld.op("stablehlo.sort", {bld.arg(0)}, {T({4})});
    Block& cmp = add_region(s, {T({}), T({})});
    Operation* lt =
        cmp.push_back(make_op("stablehlo.compare", {cmp.arguments[0].get(), cmp.arguments[1].get()},
                              {T({}, DType::Bool)}));
    lt->set_attr("comparison_direction", Attribute::enum_attr("comparison_direction", "LT"));
    cmp.push_back(make_op("stablehlo.return", {lt->result()}, {}));
    bld.ret({s->result()});
    EXPECT_NO_THROW(verify(bld.m));  // dimension and is_stable are optional
    s->set_attr("is_stable", Attribute::integer_attr(1, DType::I64));
    expect_error(bld.m, {"stablehlo.sort", "attribute 'is_stable' must be a boolean"});
  }
}

}  // namespace
}  // namespace cujax::ir
