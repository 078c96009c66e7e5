// The tables of vhlo_attrs.h: the op table's attribute rows (../op_attrs.h) for what StableHLO
// and VHLO share, and here what VHLO alone spells out (StableHLO's StablehloLegalizeToVhlo.cpp
// and the DEFAULTS section of its stablehlo_legalize_to_vhlo tests): function attributes, the
// channel id VHLO splits from a channel handle, the fields of dimension numbers and dot
// algorithms VHLO holds as attributes of the op, and attributes newer than StableHLO's.
#include "vhlo_attrs.h"

#include <vector>

#include "../op_table.h"

namespace cujax::ir::bytecode {
namespace {

using K = VhloDefault::Kind;

struct Row {
  std::vector<std::string_view> ops;
  std::string_view attr;
  VhloDefault d;
};

const std::vector<Row>& vhlo_only_rows() {
  static const std::vector<std::string_view> collectives = {
      "all_gather",         "all_reduce",           "reduce_scatter",   "all_to_all",
      "collective_permute", "collective_broadcast", "collective_reduce"};
  static const std::vector<Row> r = {
      {{"func"}, "sym_visibility", {K::EmptyString}},
      {{"func"}, "arg_attrs", {K::EmptyArray}},
      {{"func"}, "res_attrs", {K::EmptyArray}},
      {collectives, "channel_id", {K::Int, 0}},
      {collectives, "has_dynamic_root", {K::False}},
      {{"custom_call"}, "result_tilings", {K::EmptyArray}},
      {{"dot_general"}, "lhs_precision_type", {K::NoneType}},
      {{"dot_general"}, "rhs_precision_type", {K::NoneType}},
      {{"dot_general"}, "accumulation_type", {K::NoneType}},
      {{"dot_general"}, "lhs_component_count", {K::NoneType}},
      {{"dot_general"}, "rhs_component_count", {K::NoneType}},
      {{"dot_general"}, "num_primitive_operations", {K::NoneType}},
      {{"dot_general"}, "allow_imprecise_accumulation", {K::NoneType}},
      {{"gather", "dynamic_gather"}, "operand_batching_dims", {K::EmptyTensor}},
      {{"gather", "dynamic_gather"}, "start_indices_batching_dims", {K::EmptyTensor}},
      {{"scatter"}, "input_batching_dims", {K::EmptyTensor}},
      {{"scatter"}, "scatter_indices_batching_dims", {K::EmptyTensor}},
      {{"recv", "send"}, "source_target_pairs", {K::EmptyPairs}},
  };
  return r;
}

// The op table's row of attribute `attr` of VHLO op `op`.
const ops::AttrDef* table_row(std::string_view op, std::string_view attr) {
  if (op == "func") return nullptr;
  return ops::find_attribute(ops::from_vhlo_base(op, false), attr);
}

}  // namespace

const VhloDefault* vhlo_default(std::string_view op, std::string_view attr) {
  for (const Row& row : vhlo_only_rows()) {
    if (row.attr != attr) continue;
    for (std::string_view o : row.ops)
      if (o == op) return &row.d;
  }
  const ops::AttrDef* d = table_row(op, attr);
  return d && d->default_value ? &*d->default_value : nullptr;
}

bool vhlo_dense_array_attr(std::string_view op, std::string_view attr) {
  const ops::AttrDef* d = table_row(op, attr);
  return d && (d->kind == ops::AttrKind::DenseI64Array || d->kind == ops::AttrKind::DenseBoolArray);
}

}  // namespace cujax::ir::bytecode
