// The narrow element types (dtype.h's is_narrow: i2, i4, ui2, ui4, the f8/f6/f4 formats) lowered
// to wider ones, once for every backend. No backend has arithmetic kernels on them: each op that
// computes on narrow values runs on a wide type (i8/ui8 for the integers, f32 for the floats)
// between converts, so integers wrap to their width (two's complement, as XLA computes) and
// floats round once per op to their format, as ml_dtypes and the spec's interpreter do. The ops
// with a region compute their region the same way, so a reduction rounds at every step.
//
// What stays narrow: constants, bitcast_convert, the converts between a narrow type and
// f32/f64/i64 (every other convert goes through one of those), and the values that control flow,
// calls, custom calls and check ops pass along. Backends run those themselves (the cuda
// backend's constants and converts on the device, the rest on the host).
#pragma once

#include <memory>

#include "cujax/ir/ir.h"

namespace cujax::compiler {

// Whether an operand or result of `op` has a narrow element type (tokens aside).
bool touches_narrow(const ir::Operation& op);

// Whether any op of `module` (nested regions included) touches a narrow type.
bool has_narrow(const ir::Module& module);

// A copy of `module` with the narrow-typed computation lowered as described above.
std::unique_ptr<ir::Module> widen_narrow_types(const ir::Module& module);

// Whether the backends run a convert from `from` to `to` on narrow values themselves: between a
// narrow float and f32/f64, from f32/f64 to a narrow integer, between a narrow integer and
// another integer or i1 (and any convert without a narrow type). The pass writes every other
// convert as a chain of these.
bool is_native_convert(DType from, DType to);

// The type a narrow type computes in: i8/ui8 for i2, i4 / ui2, ui4, f32 for the floats; other
// types are their own.
DType wide_type_of(DType t);

}  // namespace cujax::compiler
