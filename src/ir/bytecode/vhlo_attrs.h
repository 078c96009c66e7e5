// What StableHLO and VHLO hold differently, in the one place the reader (VHLO -> StableHLO) and
// the writer (StableHLO -> VHLO) learn it from: StableHLO's defaults for the attributes VHLO
// spells out (the reader drops them as VhloLegalizeToStablehlo's removeDefaults does, the writer
// spells them out as StablehloLegalizeToVhlo does), and the attributes StableHLO holds as dense
// arrays where VHLO holds 1-D tensors.
#pragma once

#include <cstdint>
#include <string_view>

namespace cujax::ir::bytecode {

struct VhloDefault {
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

// StableHLO's default of attribute `attr` of the VHLO op `op` (its name without the version:
// "convolution"); nullptr where StableHLO has none (the attribute is required, or joined into
// another, as the dimension numbers and channel handles are).
const VhloDefault* vhlo_default(std::string_view op, std::string_view attr);

// Whether StableHLO holds attribute `attr` of `op` as a dense i64 array (i1: window_reversal)
// where VHLO holds a 1-D tensor (VhloLegalizeToStablehlo's convertSpecial).
bool vhlo_dense_array_attr(std::string_view op, std::string_view attr);

}  // namespace cujax::ir::bytecode
