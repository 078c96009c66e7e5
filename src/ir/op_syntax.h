// The pretty (custom assembly) syntaxes StableHLO and func print ops in. Each op's form is in
// the op table (op_table.h), which the parser and the printer both read, so an op printed pretty
// always parses back.
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
  Generic,              // no pretty form: printed generically
};

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
