// Shared helpers of the lax implementation: type strings for messages, checks, op specs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cujax/array.h"
#include "cujax/ir/ir.h"
#include "cujax/lax.h"
#include "cujax/trace/trace.h"

namespace cujax::lax::detail {

// "f32[2,3]"
std::string type_str(const Array& a);
std::string type_str(DType dtype, const Shape& shape);
std::string list_str(const std::vector<int64_t>& v);

inline bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// Throws Error("lax.<op>: <message>").
[[noreturn]] void fail(const std::string& op, const std::string& message);

void check_valid(const std::string& op, const Array& a);
// Canonicalizes a possibly negative axis against `rank`; throws naming the op when out of range.
int64_t canonical_axis(const std::string& op, int64_t axis, int64_t rank);
std::vector<int64_t> canonical_axes(const std::string& op, const std::vector<int64_t>& axes,
                                    int64_t rank);

enum class Kinds : unsigned {
  Bool = 1,
  Signed = 2,
  Unsigned = 4,
  Float = 8,  // real floating point
  Complex = 16,
  Int = Signed | Unsigned,
  RealNum = Int | Float,
  Num = RealNum | Complex,
  Inexact = Float | Complex,
  IntOrBool = Int | Bool,
  SignedOrFloat = Signed | Float,
  SignedOrInexact = Signed | Inexact,
  Real = RealNum | Bool,  // everything but complex (ordered types)
  Any = Num | Bool,
};
bool dtype_in(DType t, Kinds kinds);
// Throws "lax.<op>: <what> must be <kinds>, got f32[2]".
void check_dtype(const std::string& op, const Array& a, Kinds kinds, const std::string& what = "");

// One-result spec.
trace::OpSpec spec(std::string name, const Shape& shape, DType dtype,
                   std::vector<ir::NamedAttribute> attrs = {});

ir::AttrRef i64_attr(int64_t v);
ir::AttrRef dense(const std::vector<int64_t>& v);

// "FLOAT", "SIGNED" or "UNSIGNED" (bool compares as unsigned).
std::string compare_type(DType t);
Array compare(const std::string& op, const Array& x, const Array& y, const std::string& direction,
              bool total_order = false);

// A scalar constant of `dtype` holding `value` (±inf saturate to integer limits).
Array constant(double value, DType dtype);
// The extreme values (max identity = lowest, min identity = highest).
Array lowest(DType dtype);
Array highest(DType dtype);
// An all-ones bit pattern (the identity of bitwise and).
Array all_ones(DType dtype);

// A scalar broadcast to `shape` (identity for a rank-0 shape).
Array broadcast_scalar(const Array& s, const Shape& shape);
// A scalar constant like `x`: full(x.shape(), value, x.dtype()).
Array like(const Array& x, double value);

// Traces `computation` into `block` with scalar arguments of `arg_dtypes`, checking that it
// returns scalars of `result_dtypes`.
void trace_computation(const std::string& op, trace::TraceContext& tc, ir::Block& block,
                       const std::vector<DType>& arg_dtypes,
                       const std::vector<DType>& result_dtypes, const Computation& computation);

}  // namespace cujax::lax::detail
