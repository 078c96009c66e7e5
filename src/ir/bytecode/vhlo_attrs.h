// What StableHLO and VHLO hold differently, in the one place the reader (VHLO -> StableHLO) and
// the writer (StableHLO -> VHLO) learn it from: StableHLO's defaults for the attributes VHLO
// spells out (the reader drops them as VhloLegalizeToStablehlo's removeDefaults does, the writer
// spells them out as StablehloLegalizeToVhlo does), and the attributes StableHLO holds as dense
// arrays where VHLO holds 1-D tensors. Both come from the op table's attribute rows
// (../op_attrs.h); only attributes VHLO has and StableHLO does not are listed here.
#pragma once

#include <string_view>

#include "../op_attrs.h"

namespace cujax::ir::bytecode {

using VhloDefault = ops::AttrDefault;

// StableHLO's default of attribute `attr` of the VHLO op `op` (its name without the version:
// "convolution"); nullptr where StableHLO has none (the attribute is required, or joined into
// another, as the dimension numbers and channel handles are).
const VhloDefault* vhlo_default(std::string_view op, std::string_view attr);

// Whether StableHLO holds attribute `attr` of `op` as a dense i64 array (i1: window_reversal)
// where VHLO holds a 1-D tensor (VhloLegalizeToStablehlo's convertSpecial).
bool vhlo_dense_array_attr(std::string_view op, std::string_view attr);

}  // namespace cujax::ir::bytecode
