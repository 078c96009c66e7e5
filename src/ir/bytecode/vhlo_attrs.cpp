// The tables of vhlo_attrs.h (StableHLO's StablehloLegalizeToVhlo.cpp and
// VhloLegalizeToStablehlo.cpp, and the DEFAULTS section of its stablehlo_legalize_to_vhlo tests).
#include "vhlo_attrs.h"

#include <vector>

namespace cujax::ir::bytecode {
namespace {

using K = VhloDefault::Kind;
using E = VhloDefault::Extent;

struct Row {
  std::vector<std::string_view> ops;  // empty: any op
  std::string_view attr;
  VhloDefault d;
};

const std::vector<Row>& rows() {
  static const std::vector<std::string_view> collectives = {
      "all_gather",         "all_reduce",           "reduce_scatter",   "all_to_all",
      "collective_permute", "collective_broadcast", "collective_reduce"};
  static const std::vector<Row> r = {
      {{"func"}, "sym_visibility", {K::EmptyString}},
      {{"func"}, "arg_attrs", {K::EmptyArray}},
      {{"func"}, "res_attrs", {K::EmptyArray}},
      {collectives, "channel_id", {K::Int, 0}},
      {collectives, "use_global_device_ids", {K::False}},
      {collectives, "has_dynamic_root", {K::False}},
      {{"cholesky"}, "lower", {K::False}},
      {{"compare"}, "compare_type", {K::Enum, 0, "comparison_type", "NOTYPE"}},
      {{"composite"}, "version", {K::Int, 0}},
      {{"composite"}, "composite_attributes", {K::EmptyDict}},
      {{"convolution", "dynamic_conv"},
       "window_strides",
       {K::Ones, 0, nullptr, nullptr, E::SpatialDims}},
      {{"convolution", "dynamic_conv"},
       "padding",
       {K::ZeroPadding, 0, nullptr, nullptr, E::SpatialDims}},
      {{"convolution", "dynamic_conv"},
       "lhs_dilation",
       {K::Ones, 0, nullptr, nullptr, E::SpatialDims}},
      {{"convolution", "dynamic_conv"},
       "rhs_dilation",
       {K::Ones, 0, nullptr, nullptr, E::SpatialDims}},
      {{"convolution", "dynamic_conv"},
       "window_reversal",
       {K::FalseList, 0, nullptr, nullptr, E::SpatialDims}},
      {{"convolution", "dynamic_conv", "dot_general", "dot"},
       "precision_config",
       {K::DefaultPrecision}},
      {{"custom_call"}, "has_side_effect", {K::False}},
      {{"custom_call"}, "backend_config", {K::EmptyString}},
      {{"custom_call"},
       "api_version",
       {K::Enum, 0, "custom_call_api_version", "API_VERSION_ORIGINAL"}},
      {{"custom_call"}, "called_computations", {K::EmptyArray}},
      {{"custom_call"}, "operand_layouts", {K::EmptyArray}},
      {{"custom_call"}, "result_layouts", {K::EmptyArray}},
      {{"custom_call"}, "output_operand_aliases", {K::EmptyArray}},
      {{"custom_call"}, "result_tilings", {K::EmptyArray}},
      {{"dot_general"}, "lhs_precision_type", {K::NoneType}},
      {{"dot_general"}, "rhs_precision_type", {K::NoneType}},
      {{"dot_general"}, "accumulation_type", {K::NoneType}},
      {{"dot_general"}, "lhs_component_count", {K::NoneType}},
      {{"dot_general"}, "rhs_component_count", {K::NoneType}},
      {{"dot_general"}, "num_primitive_operations", {K::NoneType}},
      {{"dot_general"}, "allow_imprecise_accumulation", {K::NoneType}},
      {{"dynamic_broadcast_in_dim"}, "known_expanding_dimensions", {K::EmptyTensor}},
      {{"dynamic_broadcast_in_dim"}, "known_nonexpanding_dimensions", {K::EmptyTensor}},
      {{"gather", "dynamic_gather"}, "indices_are_sorted", {K::False}},
      {{"gather", "dynamic_gather"}, "operand_batching_dims", {K::EmptyTensor}},
      {{"gather", "dynamic_gather"}, "start_indices_batching_dims", {K::EmptyTensor}},
      {{"scatter"}, "indices_are_sorted", {K::False}},
      {{"scatter"}, "unique_indices", {K::False}},
      {{"scatter"}, "input_batching_dims", {K::EmptyTensor}},
      {{"scatter"}, "scatter_indices_batching_dims", {K::EmptyTensor}},
      {{"infeed"}, "infeed_config", {K::EmptyString}},
      {{"infeed"}, "layout", {K::EmptyArray}},
      {{"outfeed"}, "outfeed_config", {K::EmptyString}},
      {{"recv", "send"}, "is_host_transfer", {K::False}},
      {{"recv", "send"}, "source_target_pairs", {K::EmptyPairs}},
      {{"reduce_window", "select_and_scatter"},
       "window_strides",
       {K::Ones, 0, nullptr, nullptr, E::OperandRank}},
      {{"reduce_window", "select_and_scatter"},
       "padding",
       {K::ZeroPadding, 0, nullptr, nullptr, E::OperandRank}},
      {{"reduce_window"}, "base_dilations", {K::Ones, 0, nullptr, nullptr, E::OperandRank}},
      {{"reduce_window"}, "window_dilations", {K::Ones, 0, nullptr, nullptr, E::OperandRank}},
      {{"sort"}, "dimension", {K::Int, -1}},
      {{"sort"}, "is_stable", {K::False}},
      {{}, "result_accuracy", {K::DefaultAccuracy}},
  };
  return r;
}

}  // namespace

const VhloDefault* vhlo_default(std::string_view op, std::string_view attr) {
  for (const Row& row : rows()) {
    if (row.attr != attr) continue;
    if (row.ops.empty()) return &row.d;
    for (std::string_view o : row.ops)
      if (o == op) return &row.d;
  }
  return nullptr;
}

bool vhlo_dense_array_attr(std::string_view op, std::string_view attr) {
  static const std::vector<std::pair<std::string_view, std::string_view>> k = {
      {"fft", "fft_length"},
      {"broadcast", "broadcast_sizes"},
      {"dynamic_slice", "slice_sizes"},
      {"reverse", "dimensions"},
      {"transpose", "permutation"},
      {"pad", "edge_padding_low"},
      {"pad", "edge_padding_high"},
      {"pad", "interior_padding"},
      {"slice", "start_indices"},
      {"slice", "limit_indices"},
      {"slice", "strides"},
      {"broadcast_in_dim", "broadcast_dimensions"},
      {"dynamic_broadcast_in_dim", "broadcast_dimensions"},
      {"dynamic_broadcast_in_dim", "known_expanding_dimensions"},
      {"dynamic_broadcast_in_dim", "known_nonexpanding_dimensions"},
      {"select_and_scatter", "window_dimensions"},
      {"select_and_scatter", "window_strides"},
      {"reduce_window", "window_dimensions"},
      {"reduce_window", "window_strides"},
      {"reduce_window", "base_dilations"},
      {"reduce_window", "window_dilations"},
      {"map", "dimensions"},
      {"reduce", "dimensions"},
      {"gather", "slice_sizes"},
      {"convolution", "lhs_dilation"},
      {"convolution", "rhs_dilation"},
      {"convolution", "window_strides"},
      {"convolution", "window_reversal"},
      {"dynamic_conv", "lhs_dilation"},
      {"dynamic_conv", "rhs_dilation"},
      {"dynamic_conv", "window_strides"},
      {"dynamic_conv", "window_reversal"},
  };
  for (const auto& [o, a] : k)
    if (o == op && a == attr) return true;
  return false;
}

}  // namespace cujax::ir::bytecode
