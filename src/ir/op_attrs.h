// The op table's attributes (the rest of each op's row is in op_table.h): for every StableHLO op,
// the attributes it takes, their kinds, which are required, and what an absent optional one
// means. The verifier checks presence and kinds from it; the bytecode reader and writer take
// StableHLO's defaults (which VHLO spells out) and the dense-array forms from it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "cujax/ir/ir.h"

namespace cujax::ir::ops {

enum class AttrKind {
  Unit,            // a unit attribute (a bool in VHLO)
  Bool,            // true / false
  Int,             // an integer
  Float,           // a float
  String,          // "text"
  Symbol,          // @name
  Enum,            // #stablehlo<kind VALUE>
  Struct,          // #stablehlo.<name><...> (dimension numbers, channel handles)
  Array,           // [...]
  Dict,            // {...}
  DenseI64Array,   // array<i64: ...> (a 1-D i64 tensor in VHLO)
  DenseBoolArray,  // array<i1: ...> (a 1-D i1 tensor in VHLO)
  I64Tensor,       // dense<...> : tensor<...xi64>
  Tensor,          // dense<...> of any element type
  Any,             // several forms (a string or a dictionary, ...)
};

// What an absent optional attribute stands for, in the form VHLO spells it out.
struct AttrDefault {
  enum class Kind {
    False,             // bool false
    Int,               // integer `value` (i64)
    EmptyString,       // ""
    EmptyArray,        // []
    EmptyDict,         // {}
    EmptyTensor,       // dense<> : tensor<0xi64>
    EmptyPairs,        // dense<> : tensor<0x2xi64>
    Enum,              // #vhlo<enum_kind enum_value>
    Ones,              // dense<1> : tensor<Nxi64>, N from `extent`
    ZeroPadding,       // dense<0> : tensor<Nx2xi64>
    FalseList,         // dense<false> : tensor<Nxi1>
    DefaultPrecision,  // [DEFAULT, DEFAULT] (any list of DEFAULT reads as the default)
    NoneType,          // a type attribute holding `none` (dot_general without an algorithm)
    DefaultAccuracy,   // result_accuracy<atol = 0, rtol = 0, ulps = 0, mode = DEFAULT>
  };
  // How long the lists of Ones, ZeroPadding and FalseList are.
  enum class Extent { None, SpatialDims, OperandRank };
  Kind kind;
  int64_t value = 0;
  const char* enum_kind = nullptr;
  const char* enum_value = nullptr;
  Extent extent = Extent::None;
};

struct AttrDef {
  std::string_view op;  // "stablehlo.compare"; empty: every op that takes it (result_accuracy)
  std::string_view name;
  AttrKind kind;
  bool required = false;
  std::optional<AttrDefault> default_value = std::nullopt;  // only for optional attributes
};

// Every attribute row, grouped by op.
std::span<const AttrDef> attribute_rows();

// The row of attribute `name` of op `op` ("stablehlo.convolution"), or nullptr.
const AttrDef* find_attribute(std::string_view op, std::string_view name);

// "a dense i64 array", for messages.
std::string_view describe(AttrKind kind);

// Whether `value` has kind `kind`. Opaque attributes (kept verbatim) pass any kind.
bool holds_kind(const Attribute& value, AttrKind kind);

}  // namespace cujax::ir::ops
