// The attribute rows of the op table (op_attrs.h), from StableHLO's StablehloOps.td (names, kinds,
// which are optional) and StablehloLegalizeToVhlo.cpp (what an absent one stands for).
#include "op_attrs.h"

#include <vector>

namespace cujax::ir::ops {
namespace {

using A = AttrKind;
using D = AttrDefault;
using DK = AttrDefault::Kind;
using DE = AttrDefault::Extent;

constexpr AttrDef req(std::string_view op, std::string_view name, AttrKind kind) {
  return {op, name, kind, true};
}
constexpr AttrDef opt(std::string_view op, std::string_view name, AttrKind kind) {
  return {op, name, kind, false};
}
AttrDef opt(std::string_view op, std::string_view name, AttrKind kind, D d) {
  return {op, name, kind, false, d};
}

const D kFalse{DK::False};
const D kEmptyString{DK::EmptyString};
const D kEmptyArray{DK::EmptyArray};
const D kEmptyTensor{DK::EmptyTensor};
const D kPrecision{DK::DefaultPrecision};
const D kSpatialOnes{DK::Ones, 0, nullptr, nullptr, DE::SpatialDims};
const D kRankOnes{DK::Ones, 0, nullptr, nullptr, DE::OperandRank};

// The attributes convolution and dynamic_conv share.
void add_convolution(std::vector<AttrDef>& r, std::string_view op) {
  r.push_back(opt(op, "window_strides", A::DenseI64Array, kSpatialOnes));
  r.push_back(
      opt(op, "padding", A::I64Tensor, D{DK::ZeroPadding, 0, nullptr, nullptr, DE::SpatialDims}));
  r.push_back(opt(op, "lhs_dilation", A::DenseI64Array, kSpatialOnes));
  r.push_back(opt(op, "rhs_dilation", A::DenseI64Array, kSpatialOnes));
  r.push_back(opt(op, "window_reversal", A::DenseBoolArray,
                  D{DK::FalseList, 0, nullptr, nullptr, DE::SpatialDims}));
  r.push_back(req(op, "dimension_numbers", A::Struct));
  r.push_back(req(op, "feature_group_count", A::Int));
  r.push_back(req(op, "batch_group_count", A::Int));
  r.push_back(opt(op, "precision_config", A::Array, kPrecision));
}

// The attributes the collectives share: replica groups, channel, global device ids.
void add_collective(std::vector<AttrDef>& r, std::string_view op, bool global_ids) {
  r.push_back(req(op, "replica_groups", A::I64Tensor));
  r.push_back(opt(op, "channel_handle", A::Struct));
  if (global_ids) r.push_back(opt(op, "use_global_device_ids", A::Unit, kFalse));
}

std::vector<AttrDef> make_rows() {
  std::vector<AttrDef> r = {
      // Element-wise. Transcendental ops take a result accuracy (StableHLO 1.9 on).
      opt("", "result_accuracy", A::Any, D{DK::DefaultAccuracy}),
      req("stablehlo.compare", "comparison_direction", A::Enum),
      opt("stablehlo.compare", "compare_type", A::Enum,
          D{DK::Enum, 0, "comparison_type", "NOTYPE"}),
      req("stablehlo.reduce_precision", "exponent_bits", A::Int),
      req("stablehlo.reduce_precision", "mantissa_bits", A::Int),
      // Shapes and data movement.
      req("stablehlo.constant", "value", A::Tensor),
      req("stablehlo.iota", "iota_dimension", A::Int),
      req("stablehlo.slice", "start_indices", A::DenseI64Array),
      req("stablehlo.slice", "limit_indices", A::DenseI64Array),
      req("stablehlo.slice", "strides", A::DenseI64Array),
      req("stablehlo.dynamic_slice", "slice_sizes", A::DenseI64Array),
      req("stablehlo.broadcast_in_dim", "broadcast_dimensions", A::DenseI64Array),
      req("stablehlo.broadcast", "broadcast_sizes", A::DenseI64Array),
      req("stablehlo.transpose", "permutation", A::DenseI64Array),
      req("stablehlo.reverse", "dimensions", A::DenseI64Array),
      req("stablehlo.dynamic_broadcast_in_dim", "broadcast_dimensions", A::DenseI64Array),
      opt("stablehlo.dynamic_broadcast_in_dim", "known_expanding_dimensions", A::DenseI64Array,
          kEmptyTensor),
      opt("stablehlo.dynamic_broadcast_in_dim", "known_nonexpanding_dimensions", A::DenseI64Array,
          kEmptyTensor),
      req("stablehlo.get_dimension_size", "dimension", A::Int),
      req("stablehlo.set_dimension_size", "dimension", A::Int),
      req("stablehlo.dynamic_iota", "iota_dimension", A::Int),
      req("stablehlo.concatenate", "dimension", A::Int),
      req("stablehlo.pad", "edge_padding_low", A::DenseI64Array),
      req("stablehlo.pad", "edge_padding_high", A::DenseI64Array),
      req("stablehlo.pad", "interior_padding", A::DenseI64Array),
      // Reductions, windows and sort.
      req("stablehlo.reduce", "dimensions", A::DenseI64Array),
      req("stablehlo.reduce_window", "window_dimensions", A::DenseI64Array),
      opt("stablehlo.reduce_window", "window_strides", A::DenseI64Array, kRankOnes),
      opt("stablehlo.reduce_window", "base_dilations", A::DenseI64Array, kRankOnes),
      opt("stablehlo.reduce_window", "window_dilations", A::DenseI64Array, kRankOnes),
      opt("stablehlo.reduce_window", "padding", A::I64Tensor,
          D{DK::ZeroPadding, 0, nullptr, nullptr, DE::OperandRank}),
      opt("stablehlo.select_and_scatter", "window_dimensions", A::DenseI64Array),
      opt("stablehlo.select_and_scatter", "window_strides", A::DenseI64Array, kRankOnes),
      opt("stablehlo.select_and_scatter", "padding", A::I64Tensor,
          D{DK::ZeroPadding, 0, nullptr, nullptr, DE::OperandRank}),
      opt("stablehlo.sort", "dimension", A::Int, D{DK::Int, -1}),
      opt("stablehlo.sort", "is_stable", A::Bool, kFalse),
      // Contractions and linear algebra.
      req("stablehlo.dot_general", "dot_dimension_numbers", A::Struct),
      opt("stablehlo.dot_general", "precision_config", A::Array, kPrecision),
      opt("stablehlo.dot_general", "algorithm", A::Struct),
      opt("stablehlo.dot", "precision_config", A::Array, kPrecision),
      req("stablehlo.einsum", "einsum_config", A::String),
      req("stablehlo.unary_einsum", "einsum_config", A::String),
      req("stablehlo.fft", "fft_type", A::Enum),
      req("stablehlo.fft", "fft_length", A::DenseI64Array),
      req("stablehlo.triangular_solve", "left_side", A::Bool),
      req("stablehlo.triangular_solve", "lower", A::Bool),
      req("stablehlo.triangular_solve", "unit_diagonal", A::Bool),
      req("stablehlo.triangular_solve", "transpose_a", A::Enum),
      opt("stablehlo.cholesky", "lower", A::Bool, kFalse),
      // Gather and scatter.
      req("stablehlo.gather", "dimension_numbers", A::Struct),
      req("stablehlo.gather", "slice_sizes", A::DenseI64Array),
      opt("stablehlo.gather", "indices_are_sorted", A::Bool, kFalse),
      req("stablehlo.dynamic_gather", "dimension_numbers", A::Struct),
      opt("stablehlo.dynamic_gather", "indices_are_sorted", A::Bool, kFalse),
      req("stablehlo.scatter", "scatter_dimension_numbers", A::Struct),
      opt("stablehlo.scatter", "indices_are_sorted", A::Bool, kFalse),
      opt("stablehlo.scatter", "unique_indices", A::Bool, kFalse),
      req("stablehlo.torch_index_select", "dim", A::Int),
      req("stablehlo.torch_index_select", "batch_dims", A::Int),
      // Control flow, calls and custom calls.
      req("stablehlo.custom_call", "call_target_name", A::String),
      opt("stablehlo.custom_call", "has_side_effect", A::Bool, kFalse),
      opt("stablehlo.custom_call", "backend_config", A::Any, kEmptyString),
      opt("stablehlo.custom_call", "api_version", A::Any,
          D{DK::Enum, 0, "custom_call_api_version", "API_VERSION_ORIGINAL"}),
      opt("stablehlo.custom_call", "called_computations", A::Array, kEmptyArray),
      opt("stablehlo.custom_call", "operand_layouts", A::Array, kEmptyArray),
      opt("stablehlo.custom_call", "result_layouts", A::Array, kEmptyArray),
      opt("stablehlo.custom_call", "output_operand_aliases", A::Array, kEmptyArray),
      req("stablehlo.composite", "name", A::String),
      opt("stablehlo.composite", "composite_attributes", A::Dict, D{DK::EmptyDict}),
      req("stablehlo.composite", "decomposition", A::Symbol),
      opt("stablehlo.composite", "version", A::Int, D{DK::Int, 0}),
      req("stablehlo.map", "dimensions", A::DenseI64Array),
      req("stablehlo.get_tuple_element", "index", A::Int),
      req("func.call", "callee", A::Symbol),
      // Collectives, tokens and random numbers.
      req("stablehlo.all_gather", "all_gather_dim", A::Int),
      req("stablehlo.reduce_scatter", "scatter_dimension", A::Int),
      req("stablehlo.all_to_all", "split_dimension", A::Int),
      req("stablehlo.all_to_all", "concat_dimension", A::Int),
      req("stablehlo.all_to_all", "split_count", A::Int),
      req("stablehlo.collective_permute", "source_target_pairs", A::I64Tensor),
      opt("stablehlo.collective_permute", "channel_handle", A::Struct),
      opt("stablehlo.infeed", "infeed_config", A::String, kEmptyString),
      opt("stablehlo.infeed", "layout", A::Array, kEmptyArray),
      opt("stablehlo.outfeed", "outfeed_config", A::String, kEmptyString),
      req("stablehlo.send", "channel_handle", A::Struct),
      opt("stablehlo.send", "is_host_transfer", A::Bool, kFalse),
      req("stablehlo.recv", "channel_handle", A::Struct),
      opt("stablehlo.recv", "is_host_transfer", A::Bool, kFalse),
      req("stablehlo.rng_bit_generator", "rng_algorithm", A::Enum),
      req("stablehlo.rng", "rng_distribution", A::Enum),
  };
  add_convolution(r, "stablehlo.convolution");
  add_convolution(r, "stablehlo.dynamic_conv");
  add_collective(r, "stablehlo.all_reduce", true);
  add_collective(r, "stablehlo.all_gather", true);
  add_collective(r, "stablehlo.reduce_scatter", true);
  add_collective(r, "stablehlo.all_to_all", false);
  add_collective(r, "stablehlo.collective_broadcast", false);
  add_collective(r, "stablehlo.collective_reduce", true);
  return r;
}

}  // namespace

std::span<const AttrDef> attribute_rows() {
  static const std::vector<AttrDef> rows = make_rows();
  return rows;
}

const AttrDef* find_attribute(std::string_view op, std::string_view name) {
  const AttrDef* any_op = nullptr;
  for (const AttrDef& d : attribute_rows()) {
    if (d.name != name) continue;
    if (d.op == op) return &d;
    if (d.op.empty()) any_op = &d;
  }
  return any_op;
}

std::string_view describe(AttrKind kind) {
  switch (kind) {
    case A::Unit:
      return "a unit attribute";
    case A::Bool:
      return "a boolean";
    case A::Int:
      return "an integer";
    case A::Float:
      return "a float";
    case A::String:
      return "a string";
    case A::Symbol:
      return "a symbol (@name)";
    case A::Enum:
      return "an enum";
    case A::Struct:
      return "a #stablehlo.<...> attribute";
    case A::Array:
      return "an array [...]";
    case A::Dict:
      return "a dictionary";
    case A::DenseI64Array:
      return "an i64 array";
    case A::DenseBoolArray:
      return "an i1 array";
    case A::I64Tensor:
      return "an i64 tensor (dense<...>)";
    case A::Tensor:
      return "a tensor (dense<...>)";
    case A::Any:
      return "any attribute";
  }
  return "?";
}

bool holds_kind(const Attribute& value, AttrKind kind) {
  using K = Attribute::Kind;
  const K k = value.kind;
  if (k == K::Opaque || kind == A::Any) return true;
  switch (kind) {
    case A::Unit:
      return k == K::Unit || k == K::Bool;
    case A::Bool:
      return k == K::Bool;
    case A::Int:
      return k == K::Integer;
    case A::Float:
      return k == K::Float;
    case A::String:
      return k == K::String;
    case A::Symbol:
      return k == K::Symbol;
    case A::Enum:
      return k == K::Enum;
    case A::Struct:
      return k == K::Struct;
    case A::Array:
      return k == K::Array;
    case A::Dict:
      return k == K::Dictionary;
    case A::DenseI64Array:
    case A::DenseBoolArray:
    case A::I64Tensor:
      // Older producers and the generic form write integer lists in each of these forms.
      return k == K::DenseArray || k == K::DenseElements || k == K::Array;
    case A::Tensor:
      return k == K::DenseElements;
    case A::Any:
      return true;
  }
  return false;
}

}  // namespace cujax::ir::ops
