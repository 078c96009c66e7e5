// Values of the narrow element types (dtype.h's is_narrow): the integers i2, i4, ui2, ui4 and the
// 8-, 6- and 4-bit float formats of StableHLO and ml_dtypes. Each element is one byte: an integer
// holds its value (i2/i4 sign-extended), a float its bit pattern in the low bits.
//
// Conversions from wider values follow ml_dtypes (its float8.h / mxfloat.h ConvertImpl without
// saturation): round to nearest, ties to even; a value beyond the largest finite one becomes
// infinity where the format has one, NaN where it has a NaN but no infinity (the FN, FNUZ and
// E8M0FNU formats), and the largest finite value in the f6/f4 formats, which have neither. NaN
// becomes the format's quiet NaN (f6/f4: ml_dtypes' choice, the pattern of -0, or of +0 for a
// negative NaN). FNUZ formats have no -0: a negative zero becomes +0. E8M0FNU has no sign and no
// zero: zero and negative values become its NaN.
#pragma once

#include <cstdint>

#include "cujax/core/dtype.h"

namespace cujax {

// How a narrow float format spends its special bit patterns.
enum class NarrowNan {
  Ieee,     // exponent all ones: infinity (mantissa 0) or NaN (E5M2, E4M3, E3M4)
  AllOnes,  // S.1111.111 is NaN, no infinity (E4M3FN)
  NegZero,  // 0x80 is NaN, no infinity, no -0 (the FNUZ formats)
  None,     // every pattern is finite (the f6 and f4 formats)
  Unsigned  // 2^(bits - 127), 0xFF is NaN, no sign, no zero (E8M0FNU)
};

struct NarrowFloatFormat {
  int exp_bits;
  int mant_bits;
  int bias;
  NarrowNan nan;
  uint8_t max_finite;  // bit pattern of the largest finite value

  // Bits per element, the sign included.
  int width() const { return (nan == NarrowNan::Unsigned ? 0 : 1) + exp_bits + mant_bits; }
};

// The format of a narrow float dtype; throws Error for other dtypes.
NarrowFloatFormat narrow_float_format(DType t);

// The exact value of bit pattern `bits` (NaNs keep their sign where the format has one).
double narrow_float_to_double(DType t, uint8_t bits);
// `v` rounded to the nearest value of format `t`, as ml_dtypes rounds (see above).
uint8_t narrow_float_from_double(DType t, double v);

// The value of a narrow integer element (its low bit_width(t) bits, sign-extended for i2/i4).
int64_t narrow_int_to_int64(DType t, uint8_t stored);
// `v` wrapped to the width of narrow integer type `t` (two's complement, as XLA converts), as
// the element stores it.
uint8_t narrow_int_from_int64(DType t, int64_t v);
// The range of a narrow integer type.
int64_t narrow_int_min(DType t);
int64_t narrow_int_max(DType t);

}  // namespace cujax
