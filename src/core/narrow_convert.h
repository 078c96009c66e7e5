// Per-element conversions of the narrow element types (cujax/core/narrow_types.h says how they
// round), header-only and marked CUJAX_HD so that the cuda backend's convert kernels compute
// exactly what the CPU backend does: narrow_types.cpp's functions are these, and
// narrow_types_test checks every bit pattern of every format through them.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "cujax/core/half.h"
#include "cujax/core/narrow_types.h"

namespace cujax::narrow {

// The exact value of bit pattern `bits` of format `f`.
CUJAX_HD inline double decode(const NarrowFloatFormat& f, uint8_t bits) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (f.nan == NarrowNan::Unsigned) return bits == 0xFF ? kNaN : ::ldexp(1.0, bits - f.bias);
  const unsigned sign_bit = 1u << (f.exp_bits + f.mant_bits);
  const unsigned b = bits & ((sign_bit << 1) - 1);
  const bool negative = b & sign_bit;
  const unsigned mag = b & (sign_bit - 1);
  const unsigned exp = mag >> f.mant_bits;
  const unsigned mant = mag & ((1u << f.mant_bits) - 1);
  const unsigned exp_max = (1u << f.exp_bits) - 1;
  switch (f.nan) {
    case NarrowNan::Ieee:
      if (exp == exp_max) {
        const double v = mant ? kNaN : kInf;
        return negative ? -v : v;
      }
      break;
    case NarrowNan::AllOnes:
      if (mag == sign_bit - 1) return negative ? -kNaN : kNaN;
      break;
    case NarrowNan::NegZero:
      if (b == sign_bit) return kNaN;
      break;
    case NarrowNan::None:
    case NarrowNan::Unsigned:
      break;
  }
  const double v = exp == 0 ? ::ldexp(static_cast<double>(mant), 1 - f.bias - f.mant_bits)
                            : ::ldexp(static_cast<double>((1u << f.mant_bits) + mant),
                                      static_cast<int>(exp) - f.bias - f.mant_bits);
  return negative ? -v : v;
}

// `v` rounded to the nearest value of format `f`, ties to even, as ml_dtypes converts.
CUJAX_HD inline uint8_t encode(const NarrowFloatFormat& f, double v) {
  const unsigned sign_bit = f.nan == NarrowNan::Unsigned ? 0 : 1u << (f.exp_bits + f.mant_bits);
  const bool negative = (std::bit_cast<uint64_t>(v) >> 63) != 0;
  const unsigned sign = negative ? sign_bit : 0;
  const unsigned exp_max = (1u << f.exp_bits) - 1;
  const bool is_nan = v != v;
  if (is_nan) {
    switch (f.nan) {
      case NarrowNan::Ieee:
        return static_cast<uint8_t>(sign | (exp_max << f.mant_bits) | (1u << (f.mant_bits - 1)));
      case NarrowNan::AllOnes:
        return static_cast<uint8_t>(sign | (sign_bit - 1));
      case NarrowNan::NegZero:
        return static_cast<uint8_t>(sign_bit);
      case NarrowNan::None:  // ml_dtypes' quiet_NaN() is the -0 pattern, negated for -NaN
        return static_cast<uint8_t>(negative ? 0 : sign_bit);
      case NarrowNan::Unsigned:
        return 0xFF;
    }
  }
  // What an infinite or too large value becomes: ml_dtypes' infinity(), negated.
  unsigned overflow = 0xFF;
  switch (f.nan) {
    case NarrowNan::Ieee:
      overflow = sign | (exp_max << f.mant_bits);
      break;
    case NarrowNan::AllOnes:
      overflow = sign | (sign_bit - 1);
      break;
    case NarrowNan::NegZero:
      overflow = sign_bit;
      break;
    case NarrowNan::None:
      overflow = sign | f.max_finite;
      break;
    case NarrowNan::Unsigned:
      break;
  }
  const double a = negative ? -v : v;
  if (a > std::numeric_limits<double>::max()) return static_cast<uint8_t>(overflow);
  if (v == 0) {
    if (f.nan == NarrowNan::Unsigned) return 0xFF;
    return static_cast<uint8_t>(f.nan == NarrowNan::NegZero ? 0 : sign);
  }
  if (f.nan == NarrowNan::Unsigned && negative) return 0xFF;
  // |v| = m * 2^(e - 52) with m a 53-bit integer whose top bit is the leading one.
  int e2 = 0;
  const double fr = ::frexp(a, &e2);
  uint64_t m = static_cast<uint64_t>(::ldexp(fr, 53));
  // The biased exponent less one: the leading one of the rounded significand adds it back when
  // the two are summed below, and a carry out of rounding moves to the next binade by itself.
  const int base = (e2 - 1) + f.bias - 1;
  int shift = 52 - f.mant_bits + (base < 0 ? -base : 0);
  if (shift > 54) shift = 54;
  m += ((m >> shift) & 1) + (uint64_t{1} << (shift - 1)) - 1;  // round to nearest, ties to even
  const uint64_t mag = (m >> shift) + (static_cast<uint64_t>(base > 0 ? base : 0) << f.mant_bits);
  if (mag > f.max_finite) return static_cast<uint8_t>(overflow);
  if (f.nan == NarrowNan::NegZero && mag == 0) return 0;
  return static_cast<uint8_t>(sign | static_cast<unsigned>(mag));
}

// A narrow integer of `width` bits (`is_signed`: two's complement) as the element stores it.
struct IntFormat {
  int width;
  bool is_signed;
};

// The format of a narrow integer dtype (host code: where a kernel is chosen).
inline IntFormat int_format(DType t) {
  return {bit_width(t), is_signed_int(t)};
}

// The value of a stored element (its low `width` bits, sign-extended when signed).
CUJAX_HD inline int64_t to_int64(IntFormat f, uint8_t stored) {
  const uint64_t bits = stored & ((1u << f.width) - 1);
  if (!f.is_signed) return static_cast<int64_t>(bits);
  const uint64_t sign = uint64_t{1} << (f.width - 1);
  return static_cast<int64_t>((bits ^ sign) - sign);
}
// `v` wrapped to the width (two's complement, as XLA converts integers).
CUJAX_HD inline uint8_t from_int64(IntFormat f, int64_t v) {
  return static_cast<uint8_t>(to_int64(f, static_cast<uint8_t>(v)));
}
CUJAX_HD inline int64_t min_of(IntFormat f) {
  return f.is_signed ? -(int64_t{1} << (f.width - 1)) : 0;
}
CUJAX_HD inline int64_t max_of(IntFormat f) {
  return f.is_signed ? (int64_t{1} << (f.width - 1)) - 1 : (int64_t{1} << f.width) - 1;
}
// A float truncated toward zero and saturated to the type's range, NaN to 0, as XLA converts.
CUJAX_HD inline uint8_t from_float(IntFormat f, double v) {
  if (v != v) return 0;
  const double lo = static_cast<double>(min_of(f)), hi = static_cast<double>(max_of(f));
  const double c = v < lo ? lo : v > hi ? hi : v;
  return from_int64(f, static_cast<int64_t>(::trunc(c)));
}

}  // namespace cujax::narrow
