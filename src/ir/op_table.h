// The StableHLO op table: every op the IR knows, described once. The text parser and printer
// read its pretty syntax, the verifier its operand and result counts and the element-type class
// of the plain element-wise ops; the bytecode maps each op to its VHLO versions by name
// (stablehlo.<op> <-> vhlo.<op>_vN, versions and attribute order in bytecode/vhlo_ops.inc).
// docs/conformance.md ("The op table") says how to add an op.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ir/op_syntax.h"

namespace cujax::ir::ops {

inline constexpr int kAny = -1;         // operands or results: any number
inline constexpr int kPerOperand = -2;  // results: one per operand

// Op families; the verifier's type rules are organised by them (verify_*.cpp).
enum class Family {
  Elementwise,
  Shape,        // shapes and data movement
  Reduction,    // reductions, windows and sort
  Contraction,  // dot, convolution, linear algebra
  GatherScatter,
  Control,     // control flow, calls, returns, custom calls
  Collective,  // collectives, tokens, ids, random numbers
};

// Element type classes the ops ask for.
enum class Kinds {
  Any,
  Integer,
  IntOrBool,
  IntOrFloat,
  SignedOrFloat,
  Float,
  FloatOrComplex,
  IntFloatOrComplex,
  SignedFloatOrComplex,
};

struct OpDef {
  std::string_view name;  // "stablehlo.add"
  Family family;
  syntax::Form form;              // Form::Generic: printed in the generic form
  int num_operands = kAny;        // a fixed count, or kAny
  int num_results = kAny;         // a fixed count, kAny or kPerOperand
  int min_operands = 0;           // when num_operands is kAny
  int num_regions = 0;            // a fixed count, or kAny; attributes are in op_attrs.h
  std::optional<Kinds> kinds;     // element-wise ops checked by operand kind alone
  bool same_type = true;          // type spec is custom<SameOperandsAndResultType>
  std::string_view keyword = {};  // "dims", "sizes", "algorithm", ...
  std::string_view attr = {};     // attribute the keyword fills
  std::string_view enum_name = {};

  constexpr OpDef at_least(int n) const {
    OpDef d = *this;
    d.min_operands = n;
    return d;
  }
  constexpr OpDef with_regions(int n) const {
    OpDef d = *this;
    d.num_regions = n;
    return d;
  }
  constexpr OpDef of(Kinds k) const {
    OpDef d = *this;
    d.kinds = k;
    return d;
  }
  // The pretty `op %x, keyword = ...` forms: which attribute the keyword fills.
  constexpr OpDef keyed(bool same, std::string_view kw, std::string_view a,
                        std::string_view e = {}) const {
    OpDef d = *this;
    d.same_type = same;
    d.keyword = kw;
    d.attr = a;
    d.enum_name = e;
    return d;
  }
};

constexpr OpDef op(std::string_view name, Family family, syntax::Form form, int operands,
                   int results) {
  OpDef d{};
  d.name = name;
  d.family = family;
  d.form = form;
  d.num_operands = operands;
  d.num_results = results;
  return d;
}

namespace detail {
using F = syntax::Form;
using K = Kinds;
constexpr OpDef ew(std::string_view name, int operands, Kinds k) {
  return op(name, Family::Elementwise, F::Elementwise, operands, 1).of(k);
}
}  // namespace detail

// clang-format off
inline constexpr OpDef kOps[] = {
    // Element-wise (verify_elementwise.cpp).
    op("stablehlo.abs", Family::Elementwise, detail::F::Elementwise, 1, 1),
    detail::ew("stablehlo.cbrt", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.ceil", 1, detail::K::Float),
    op("stablehlo.convert", Family::Elementwise, detail::F::Elementwise, 1, 1),
    detail::ew("stablehlo.count_leading_zeros", 1, detail::K::Integer),
    detail::ew("stablehlo.cosine", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.exponential", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.exponential_minus_one", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.floor", 1, detail::K::Float),
    op("stablehlo.imag", Family::Elementwise, detail::F::Elementwise, 1, 1),
    detail::ew("stablehlo.log", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.log_plus_one", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.logistic", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.not", 1, detail::K::IntOrBool),
    detail::ew("stablehlo.negate", 1, detail::K::IntFloatOrComplex),
    detail::ew("stablehlo.popcnt", 1, detail::K::Integer),
    op("stablehlo.real", Family::Elementwise, detail::F::Elementwise, 1, 1),
    detail::ew("stablehlo.round_nearest_afz", 1, detail::K::Float),
    detail::ew("stablehlo.round_nearest_even", 1, detail::K::Float),
    detail::ew("stablehlo.rsqrt", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.sign", 1, detail::K::SignedFloatOrComplex),
    detail::ew("stablehlo.sine", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.sqrt", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.tan", 1, detail::K::FloatOrComplex),
    detail::ew("stablehlo.tanh", 1, detail::K::FloatOrComplex),
    op("stablehlo.uniform_dequantize", Family::Elementwise, detail::F::Elementwise, 1, 1),
    op("stablehlo.uniform_quantize", Family::Elementwise, detail::F::Elementwise, 1, 1),
    detail::ew("stablehlo.add", 2, detail::K::Any),
    detail::ew("stablehlo.and", 2, detail::K::IntOrBool),
    detail::ew("stablehlo.atan2", 2, detail::K::FloatOrComplex),
    op("stablehlo.complex", Family::Elementwise, detail::F::Elementwise, 2, 1),
    detail::ew("stablehlo.divide", 2, detail::K::IntFloatOrComplex),
    detail::ew("stablehlo.maximum", 2, detail::K::Any),
    detail::ew("stablehlo.minimum", 2, detail::K::Any),
    detail::ew("stablehlo.multiply", 2, detail::K::Any),
    detail::ew("stablehlo.or", 2, detail::K::IntOrBool),
    detail::ew("stablehlo.power", 2, detail::K::IntFloatOrComplex),
    detail::ew("stablehlo.remainder", 2, detail::K::IntOrFloat),
    detail::ew("stablehlo.shift_left", 2, detail::K::Integer),
    detail::ew("stablehlo.shift_right_arithmetic", 2, detail::K::Integer),
    detail::ew("stablehlo.shift_right_logical", 2, detail::K::Integer),
    detail::ew("stablehlo.subtract", 2, detail::K::IntFloatOrComplex),
    detail::ew("stablehlo.xor", 2, detail::K::IntOrBool),
    op("stablehlo.clamp", Family::Elementwise, detail::F::Elementwise, 3, 1),
    op("stablehlo.is_finite", Family::Elementwise, detail::F::Functional, 1, 1),
    op("stablehlo.bitcast_convert", Family::Elementwise, detail::F::Functional, 1, 1),
    op("stablehlo.compare", Family::Elementwise, detail::F::Compare, 2, 1),
    op("stablehlo.select", Family::Elementwise, detail::F::Select, 3, 1),
    op("stablehlo.reduce_precision", Family::Elementwise, detail::F::ReducePrecision, 1, 1),
    // Shapes and data movement (verify_shape.cpp).
    op("stablehlo.constant", Family::Shape, detail::F::Constant, 0, 1),
    op("stablehlo.iota", Family::Shape, detail::F::Iota, 0, 1),
    op("stablehlo.reshape", Family::Shape, detail::F::Functional, 1, 1),
    op("stablehlo.dynamic_reshape", Family::Shape, detail::F::Functional, 2, 1),
    op("stablehlo.slice", Family::Shape, detail::F::Slice, 1, 1),
    op("stablehlo.dynamic_slice", Family::Shape, detail::F::DynamicSlice, kAny, 1).at_least(1),
    op("stablehlo.dynamic_update_slice", Family::Shape, detail::F::Functional, kAny, 1)
        .at_least(2),
    op("stablehlo.real_dynamic_slice", Family::Shape, detail::F::Functional, 4, 1),
    op("stablehlo.broadcast_in_dim", Family::Shape, detail::F::DimsList, 1, 1)
        .keyed(false, "dims", "broadcast_dimensions"),
    op("stablehlo.broadcast", Family::Shape, detail::F::DimsList, 1, 1)
        .keyed(false, "sizes", "broadcast_sizes"),
    op("stablehlo.transpose", Family::Shape, detail::F::DimsList, 1, 1)
        .keyed(false, "dims", "permutation"),
    op("stablehlo.reverse", Family::Shape, detail::F::DimsList, 1, 1)
        .keyed(true, "dims", "dimensions"),
    op("stablehlo.dynamic_broadcast_in_dim", Family::Shape, detail::F::DimsList, 2, 1)
        .keyed(false, "dims", "broadcast_dimensions"),
    op("stablehlo.get_dimension_size", Family::Shape, detail::F::DimValue, 1, 1)
        .keyed(false, "dim", "dimension"),
    op("stablehlo.set_dimension_size", Family::Shape, detail::F::DimValue, 2, 1)
        .keyed(false, "dim", "dimension"),
    op("stablehlo.dynamic_iota", Family::Shape, detail::F::DimValue, 1, 1)
        .keyed(false, "dim", "iota_dimension"),
    op("stablehlo.concatenate", Family::Shape, detail::F::Concatenate, kAny, 1).at_least(1),
    op("stablehlo.pad", Family::Shape, detail::F::Pad, 2, 1),
    op("stablehlo.dynamic_pad", Family::Shape, detail::F::Functional, 5, 1),
    // Reductions, windows and sort (verify_reduction.cpp).
    op("stablehlo.reduce", Family::Reduction, detail::F::Reduce, kAny, kAny).with_regions(1),
    op("stablehlo.reduce_window", Family::Reduction, detail::F::Generic, kAny, kAny)
        .with_regions(1),
    op("stablehlo.select_and_scatter", Family::Reduction, detail::F::Generic, 3, 1).with_regions(2),
    op("stablehlo.sort", Family::Reduction, detail::F::Generic, kAny, kPerOperand)
        .at_least(1)
        .with_regions(1),
    // Contractions and linear algebra (verify_contraction.cpp).
    op("stablehlo.dot_general", Family::Contraction, detail::F::DotGeneral, 2, 1),
    op("stablehlo.dot", Family::Contraction, detail::F::Dot, 2, 1),
    op("stablehlo.convolution", Family::Contraction, detail::F::Convolution, 2, 1),
    op("stablehlo.einsum", Family::Contraction, detail::F::Einsum, 2, 1),
    op("stablehlo.unary_einsum", Family::Contraction, detail::F::Einsum, 1, 1),
    op("stablehlo.fft", Family::Contraction, detail::F::Fft, 1, 1),
    op("stablehlo.triangular_solve", Family::Contraction, detail::F::Generic, 2, 1),
    op("stablehlo.cholesky", Family::Contraction, detail::F::Cholesky, 1, 1),
    op("stablehlo.batch_norm_grad", Family::Contraction, detail::F::Generic, 5, 3),
    op("stablehlo.batch_norm_inference", Family::Contraction, detail::F::Generic, 5, 1),
    op("stablehlo.batch_norm_training", Family::Contraction, detail::F::Generic, 3, 3),
    op("stablehlo.dynamic_conv", Family::Contraction, detail::F::Generic, 3, 1),
    // Gather and scatter (verify_gather.cpp).
    op("stablehlo.gather", Family::GatherScatter, detail::F::Generic, 2, 1),
    op("stablehlo.scatter", Family::GatherScatter, detail::F::Generic, kAny, kAny).with_regions(1),
    op("stablehlo.dynamic_gather", Family::GatherScatter, detail::F::Generic, 3, 1),
    op("stablehlo.torch_index_select", Family::GatherScatter, detail::F::Generic, 2, 1),
    // Control flow, calls and returns (verify_control.cpp).
    op("stablehlo.while", Family::Control, detail::F::While, kAny, kPerOperand).with_regions(2),
    op("stablehlo.case", Family::Control, detail::F::Generic, 1, kAny).with_regions(kAny),
    op("stablehlo.if", Family::Control, detail::F::Generic, 1, kAny).with_regions(2),
    op("stablehlo.optimization_barrier", Family::Control, detail::F::OptimizationBarrier, kAny,
       kPerOperand),
    op("stablehlo.custom_call", Family::Control, detail::F::CustomCall, kAny, kAny),
    op("stablehlo.composite", Family::Control, detail::F::Composite, kAny, kAny),
    op("stablehlo.map", Family::Control, detail::F::Generic, kAny, 1).with_regions(1),
    op("stablehlo.tuple", Family::Control, detail::F::Generic, kAny, 1),
    op("stablehlo.get_tuple_element", Family::Control, detail::F::Generic, 1, 1),
    op("stablehlo.async_start", Family::Control, detail::F::Generic, kAny, kAny)
        .with_regions(kAny),
    op("stablehlo.async_done", Family::Control, detail::F::Generic, kAny, kAny)
        .with_regions(kAny),
    op("stablehlo.trace", Family::Control, detail::F::Trace, 1, kAny)  // not in VHLO
        .with_regions(kAny),
    op("func.call", Family::Control, detail::F::Call, kAny, kAny),
    op("stablehlo.return", Family::Control, detail::F::Return, kAny, kAny),
    op("func.return", Family::Control, detail::F::Return, kAny, kAny),
    // Collectives, tokens, ids and random numbers (verify_control.cpp).
    op("stablehlo.all_reduce", Family::Collective, detail::F::Generic, kAny, kPerOperand)
        .at_least(1)
        .with_regions(1),
    op("stablehlo.all_gather", Family::Collective, detail::F::Generic, kAny, kPerOperand)
        .at_least(1),
    op("stablehlo.reduce_scatter", Family::Collective, detail::F::Generic, 1, 1).with_regions(1),
    op("stablehlo.collective_permute", Family::Collective, detail::F::Generic, 1, 1),
    op("stablehlo.all_to_all", Family::Collective, detail::F::Generic, kAny, kPerOperand)
        .at_least(1),
    op("stablehlo.collective_broadcast", Family::Collective, detail::F::Generic, kAny, kAny),
    op("stablehlo.collective_reduce", Family::Collective, detail::F::Generic, kAny, kAny)
        .with_regions(kAny),
    op("stablehlo.infeed", Family::Collective, detail::F::Generic, 1, kAny),
    op("stablehlo.outfeed", Family::Collective, detail::F::Generic, kAny, 1).at_least(1),
    op("stablehlo.send", Family::Collective, detail::F::Generic, kAny, 1).at_least(1),
    op("stablehlo.recv", Family::Collective, detail::F::Generic, 1, kAny),
    op("stablehlo.after_all", Family::Collective, detail::F::Elementwise, kAny, 1),
    op("stablehlo.create_token", Family::Collective, detail::F::TypeOnly, 0, 1),
    op("stablehlo.replica_id", Family::Collective, detail::F::TypeOnly, 0, 1),
    op("stablehlo.partition_id", Family::Collective, detail::F::TypeOnly, 0, 1),
    op("stablehlo.rng_bit_generator", Family::Collective, detail::F::EnumKeyword, 1, 2)
        .keyed(false, "algorithm", "rng_algorithm", "rng_algorithm"),
    op("stablehlo.rng", Family::Collective, detail::F::EnumKeyword, 3, 1)
        .keyed(false, "distribution", "rng_distribution", "rng_distribution"),
};
// clang-format on

// The row of op `name`; nullptr for an op the table does not describe.
constexpr const OpDef* find(std::string_view name) {
  for (const auto& d : kOps)
    if (d.name == name) return &d;
  return nullptr;
}

// The VHLO name (without its _vN) of op `name`, how the bytecode writer finds its versions in
// bytecode/vhlo_ops.inc: stablehlo.<op> is vhlo.<op>_vN, func.return and stablehlo.return are
// vhlo.return_v1, func.call is vhlo.call_v1; empty for an op of another dialect.
constexpr std::string_view vhlo_base(std::string_view name) {
  if (name == "func.return" || name == "stablehlo.return") return "return";
  if (name == "func.call") return "call";
  if (name.starts_with("stablehlo.")) return name.substr(10);
  return {};
}

// The op the bytecode reader makes of VHLO's `base`, vhlo_base's inverse (vhlo.return is
// func.return in a function's body, stablehlo.return in an op's region).
inline std::string from_vhlo_base(std::string_view base, bool in_func_body) {
  if (base == "return") return in_func_body ? "func.return" : "stablehlo.return";
  if (base == "call") return "func.call";
  return "stablehlo." + std::string(base);
}

}  // namespace cujax::ir::ops

namespace cujax::ir::syntax {

using OpSyntax = ops::OpDef;

// The pretty syntax of op `name`; nullptr for an op printed in the generic form.
constexpr const OpSyntax* find(std::string_view name) {
  const ops::OpDef* d = ops::find(name);
  return d && d->form != Form::Generic ? d : nullptr;
}

}  // namespace cujax::ir::syntax
