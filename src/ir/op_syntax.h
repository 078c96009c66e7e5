// The pretty (custom assembly) syntaxes of the ops that StableHLO and func print that way. The
// parser and the printer both read this table, so an op printed pretty always parses back.
#pragma once

#include <string_view>

namespace cujax::ir::syntax {

enum class Form {
  Elementwise,   // operands attr-dict `:` custom<SameOperandsAndResultType>
  Functional,    // operands attr-dict `:` functional-type(operands, results)
  Compare,       // DIR, %lhs, %rhs(, TYPE)? attr-dict : functional-type
  Constant,      // attr-dict dense<...> : tensor<...>
  Iota,          // dim = N attr-dict : type
  Slice,         // %x [start:limit(:stride)?, ...] attr-dict : functional-type
  DynamicSlice,  // %x, %i, ..., sizes = [...] attr-dict : functional-type
  DimsList,      // %x, (%y,)? keyword = [...] attr-dict : type spec
  DimValue,      // %x, (%y,)? dim = N attr-dict : functional-type
  Concatenate,   // %a, %b, ..., dim = N attr-dict : functional-type
  Pad,           // %x, %v, low = [...], high = [...], interior = [...] ...
  DotGeneral,    // %a, %b, batching_dims = [..] x [..], contracting_dims = ..., precision = ...
  Dot,           // %a, %b(, precision = [...])?
  Convolution,   // (%a, %b) dim_numbers = ..., window = {...} attr-dict : functional-type
  Reduce,        // (%x init: %i), ... applies op | reducer(...) {...}
  While,         // (%iterArg = %x, ...) : types cond {...} do {...}
  Select,        // %p, %t, %f attr-dict : pred-type, type | functional-type
  CustomCall,    // @target(operands) attr-dict : functional-type
  Call,          // @callee(operands) attr-dict : functional-type
  Return,        // operands attr-dict (: types)?
  OptimizationBarrier,  // attr-dict (operands : types | ())
  ReducePrecision,      // %x, format = eXmY attr-dict : type spec
  EnumKeyword,          // operands, keyword = ENUM attr-dict : functional-type
  Fft,                  // %x, type = FFT, length = [...] attr-dict : functional-type
  Einsum,               // operands, config = "..." attr-dict : functional-type
  Cholesky,             // %a(, lower = true)? attr-dict : type spec
  Trace,                // %x, "tag" attr-dict : type
  TypeOnly,             // attr-dict : type
  Composite,            // "name" operands attr-dict : functional-type
};

struct OpSyntax {
  std::string_view name;
  Form form;
  int num_operands = -1;          // -1: any number
  bool same_type = true;          // type spec is custom<SameOperandsAndResultType>
  std::string_view keyword = {};  // "dims", "sizes", "algorithm", ...
  std::string_view attr = {};     // attribute the keyword fills
  std::string_view enum_name = {};
};

inline constexpr OpSyntax kOps[] = {
    // Unary element-wise.
    {"stablehlo.abs", Form::Elementwise, 1},
    {"stablehlo.cbrt", Form::Elementwise, 1},
    {"stablehlo.ceil", Form::Elementwise, 1},
    {"stablehlo.convert", Form::Elementwise, 1},
    {"stablehlo.count_leading_zeros", Form::Elementwise, 1},
    {"stablehlo.cosine", Form::Elementwise, 1},
    {"stablehlo.exponential", Form::Elementwise, 1},
    {"stablehlo.exponential_minus_one", Form::Elementwise, 1},
    {"stablehlo.floor", Form::Elementwise, 1},
    {"stablehlo.imag", Form::Elementwise, 1},
    {"stablehlo.log", Form::Elementwise, 1},
    {"stablehlo.log_plus_one", Form::Elementwise, 1},
    {"stablehlo.logistic", Form::Elementwise, 1},
    {"stablehlo.not", Form::Elementwise, 1},
    {"stablehlo.negate", Form::Elementwise, 1},
    {"stablehlo.popcnt", Form::Elementwise, 1},
    {"stablehlo.real", Form::Elementwise, 1},
    {"stablehlo.round_nearest_afz", Form::Elementwise, 1},
    {"stablehlo.round_nearest_even", Form::Elementwise, 1},
    {"stablehlo.rsqrt", Form::Elementwise, 1},
    {"stablehlo.sign", Form::Elementwise, 1},
    {"stablehlo.sine", Form::Elementwise, 1},
    {"stablehlo.sqrt", Form::Elementwise, 1},
    {"stablehlo.tan", Form::Elementwise, 1},
    {"stablehlo.tanh", Form::Elementwise, 1},
    {"stablehlo.uniform_dequantize", Form::Elementwise, 1},
    {"stablehlo.uniform_quantize", Form::Elementwise, 1},
    // Binary element-wise.
    {"stablehlo.add", Form::Elementwise, 2},
    {"stablehlo.and", Form::Elementwise, 2},
    {"stablehlo.atan2", Form::Elementwise, 2},
    {"stablehlo.complex", Form::Elementwise, 2},
    {"stablehlo.divide", Form::Elementwise, 2},
    {"stablehlo.maximum", Form::Elementwise, 2},
    {"stablehlo.minimum", Form::Elementwise, 2},
    {"stablehlo.multiply", Form::Elementwise, 2},
    {"stablehlo.or", Form::Elementwise, 2},
    {"stablehlo.power", Form::Elementwise, 2},
    {"stablehlo.remainder", Form::Elementwise, 2},
    {"stablehlo.shift_left", Form::Elementwise, 2},
    {"stablehlo.shift_right_arithmetic", Form::Elementwise, 2},
    {"stablehlo.shift_right_logical", Form::Elementwise, 2},
    {"stablehlo.subtract", Form::Elementwise, 2},
    {"stablehlo.xor", Form::Elementwise, 2},
    {"stablehlo.clamp", Form::Elementwise, 3},
    {"stablehlo.after_all", Form::Elementwise, -1},
    // operands : functional-type
    {"stablehlo.is_finite", Form::Functional, 1},
    {"stablehlo.reshape", Form::Functional, 1},
    {"stablehlo.bitcast_convert", Form::Functional, 1},
    {"stablehlo.dynamic_update_slice", Form::Functional, -1},
    {"stablehlo.dynamic_reshape", Form::Functional, 2},
    {"stablehlo.real_dynamic_slice", Form::Functional, 4},
    {"stablehlo.dynamic_pad", Form::Functional, 5},
    // Custom forms.
    {"stablehlo.compare", Form::Compare, 2},
    {"stablehlo.constant", Form::Constant, 0},
    {"stablehlo.iota", Form::Iota, 0},
    {"stablehlo.slice", Form::Slice, 1},
    {"stablehlo.dynamic_slice", Form::DynamicSlice, -1},
    {"stablehlo.broadcast_in_dim", Form::DimsList, 1, false, "dims", "broadcast_dimensions"},
    {"stablehlo.broadcast", Form::DimsList, 1, false, "sizes", "broadcast_sizes"},
    {"stablehlo.transpose", Form::DimsList, 1, false, "dims", "permutation"},
    {"stablehlo.reverse", Form::DimsList, 1, true, "dims", "dimensions"},
    {"stablehlo.dynamic_broadcast_in_dim", Form::DimsList, 2, false, "dims",
     "broadcast_dimensions"},
    {"stablehlo.get_dimension_size", Form::DimValue, 1, false, "dim", "dimension"},
    {"stablehlo.set_dimension_size", Form::DimValue, 2, false, "dim", "dimension"},
    {"stablehlo.dynamic_iota", Form::DimValue, 1, false, "dim", "iota_dimension"},
    {"stablehlo.concatenate", Form::Concatenate, -1},
    {"stablehlo.pad", Form::Pad, 2},
    {"stablehlo.dot_general", Form::DotGeneral, 2},
    {"stablehlo.dot", Form::Dot, 2},
    {"stablehlo.convolution", Form::Convolution, 2},
    {"stablehlo.reduce", Form::Reduce, -1},
    {"stablehlo.while", Form::While, -1},
    {"stablehlo.select", Form::Select, 3},
    {"stablehlo.custom_call", Form::CustomCall, -1},
    {"func.call", Form::Call, -1},
    {"stablehlo.return", Form::Return, -1},
    {"func.return", Form::Return, -1},
    {"stablehlo.optimization_barrier", Form::OptimizationBarrier, -1},
    {"stablehlo.reduce_precision", Form::ReducePrecision, 1},
    {"stablehlo.rng_bit_generator", Form::EnumKeyword, 1, false, "algorithm", "rng_algorithm",
     "rng_algorithm"},
    {"stablehlo.rng", Form::EnumKeyword, 3, false, "distribution", "rng_distribution",
     "rng_distribution"},
    {"stablehlo.fft", Form::Fft, 1},
    {"stablehlo.einsum", Form::Einsum, 2},
    {"stablehlo.unary_einsum", Form::Einsum, 1},
    {"stablehlo.cholesky", Form::Cholesky, 1},
    {"stablehlo.trace", Form::Trace, 1},
    {"stablehlo.create_token", Form::TypeOnly, 0},
    {"stablehlo.replica_id", Form::TypeOnly, 0},
    {"stablehlo.partition_id", Form::TypeOnly, 0},
    {"stablehlo.composite", Form::Composite, -1},
};

inline const OpSyntax* find(std::string_view name) {
  for (const auto& s : kOps)
    if (s.name == name) return &s;
  return nullptr;
}

// Values the pretty `compare` form accepts (the generic form keeps any identifier).
inline constexpr std::string_view kComparisonDirections[] = {"EQ", "NE", "GE", "GT", "LE", "LT"};
inline constexpr std::string_view kComparisonTypes[] = {"NOTYPE", "FLOAT", "TOTALORDER", "SIGNED",
                                                        "UNSIGNED"};
template <size_t N>
bool one_of(const std::string_view (&values)[N], std::string_view v) {
  for (auto x : values)
    if (x == v) return true;
  return false;
}

// Ops the compact `reduce ... applies <op>` form accepts: commutative binary StableHLO ops.
inline bool is_compact_reducer(std::string_view name) {
  return name == "stablehlo.add" || name == "stablehlo.multiply" || name == "stablehlo.maximum" ||
         name == "stablehlo.minimum" || name == "stablehlo.and" || name == "stablehlo.or" ||
         name == "stablehlo.xor";
}

}  // namespace cujax::ir::syntax
