#include "cujax/core/narrow_types.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace cujax {

NarrowFloatFormat narrow_float_format(DType t) {
  switch (t) {
    case DType::F8E4M3FN:
      return {4, 3, 7, NarrowNan::AllOnes, 0x7E};
    case DType::F8E5M2:
      return {5, 2, 15, NarrowNan::Ieee, 0x7B};
    case DType::F8E4M3FNUZ:
      return {4, 3, 8, NarrowNan::NegZero, 0x7F};
    case DType::F8E5M2FNUZ:
      return {5, 2, 16, NarrowNan::NegZero, 0x7F};
    case DType::F8E4M3B11FNUZ:
      return {4, 3, 11, NarrowNan::NegZero, 0x7F};
    case DType::F8E3M4:
      return {3, 4, 3, NarrowNan::Ieee, 0x6F};
    case DType::F8E4M3:
      return {4, 3, 7, NarrowNan::Ieee, 0x77};
    case DType::F8E8M0FNU:
      return {8, 0, 127, NarrowNan::Unsigned, 0xFE};
    case DType::F6E2M3FN:
      return {2, 3, 1, NarrowNan::None, 0x1F};
    case DType::F6E3M2FN:
      return {3, 2, 3, NarrowNan::None, 0x1F};
    case DType::F4E2M1FN:
      return {2, 1, 1, NarrowNan::None, 0x07};
    default:
      throw Error("narrow_float_format: " + std::string(mlir_name(t)) +
                  " is not a narrow float type");
  }
}

double narrow_float_to_double(DType t, uint8_t bits) {
  const NarrowFloatFormat f = narrow_float_format(t);
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  if (f.nan == NarrowNan::Unsigned) return bits == 0xFF ? kNaN : std::ldexp(1.0, bits - f.bias);
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
        const double v = mant ? kNaN : std::numeric_limits<double>::infinity();
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
  const double v = exp == 0 ? std::ldexp(mant, 1 - f.bias - f.mant_bits)
                            : std::ldexp((1u << f.mant_bits) + mant,
                                         static_cast<int>(exp) - f.bias - f.mant_bits);
  return negative ? -v : v;
}

uint8_t narrow_float_from_double(DType t, double v) {
  const NarrowFloatFormat f = narrow_float_format(t);
  const unsigned sign_bit = f.nan == NarrowNan::Unsigned ? 0 : 1u << (f.exp_bits + f.mant_bits);
  const bool negative = std::signbit(v);
  const unsigned sign = negative ? sign_bit : 0;
  const unsigned exp_max = (1u << f.exp_bits) - 1;
  auto out = [](unsigned b) { return static_cast<uint8_t>(b); };
  // What an infinite or too large value becomes: ml_dtypes' infinity(), negated.
  auto overflow = [&]() -> uint8_t {
    switch (f.nan) {
      case NarrowNan::Ieee:
        return out(sign | (exp_max << f.mant_bits));
      case NarrowNan::AllOnes:
        return out(sign | (sign_bit - 1));
      case NarrowNan::NegZero:
        return out(sign_bit);
      case NarrowNan::None:
        return out(sign | f.max_finite);
      case NarrowNan::Unsigned:
        break;
    }
    return 0xFF;
  };
  if (std::isnan(v)) {
    switch (f.nan) {
      case NarrowNan::Ieee:
        return out(sign | (exp_max << f.mant_bits) | (1u << (f.mant_bits - 1)));
      case NarrowNan::AllOnes:
        return out(sign | (sign_bit - 1));
      case NarrowNan::NegZero:
        return out(sign_bit);
      case NarrowNan::None:  // ml_dtypes' quiet_NaN() is the -0 pattern, negated for -NaN
        return out(negative ? 0 : sign_bit);
      case NarrowNan::Unsigned:
        return 0xFF;
    }
  }
  if (std::isinf(v)) return overflow();
  if (v == 0) {
    if (f.nan == NarrowNan::Unsigned) return 0xFF;
    return out(f.nan == NarrowNan::NegZero ? 0 : sign);
  }
  if (f.nan == NarrowNan::Unsigned && negative) return 0xFF;
  // |v| = m * 2^(e - 52) with m a 53-bit integer whose top bit is the leading one.
  int e2 = 0;
  const double fr = std::frexp(std::fabs(v), &e2);
  uint64_t m = static_cast<uint64_t>(std::ldexp(fr, 53));
  // The biased exponent less one: the leading one of the rounded significand adds it back when
  // the two are summed below, and a carry out of rounding moves to the next binade by itself.
  const int base = (e2 - 1) + f.bias - 1;
  const int shift = std::min(52 - f.mant_bits + std::max(0, -base), 54);
  m += ((m >> shift) & 1) + (uint64_t{1} << (shift - 1)) - 1;  // round to nearest, ties to even
  const uint64_t mag = (m >> shift) + (static_cast<uint64_t>(std::max(0, base)) << f.mant_bits);
  if (mag > f.max_finite) return overflow();
  if (f.nan == NarrowNan::NegZero && mag == 0) return 0;
  return out(sign | static_cast<unsigned>(mag));
}

int64_t narrow_int_min(DType t) {
  return is_signed_int(t) ? -(int64_t{1} << (bit_width(t) - 1)) : 0;
}
int64_t narrow_int_max(DType t) {
  return is_signed_int(t) ? (int64_t{1} << (bit_width(t) - 1)) - 1
                          : (int64_t{1} << bit_width(t)) - 1;
}

int64_t narrow_int_to_int64(DType t, uint8_t stored) {
  const int w = bit_width(t);
  const uint64_t bits = stored & ((1u << w) - 1);
  if (!is_signed_int(t)) return static_cast<int64_t>(bits);
  const uint64_t sign = uint64_t{1} << (w - 1);
  return static_cast<int64_t>((bits ^ sign) - sign);
}

uint8_t narrow_int_from_int64(DType t, int64_t v) {
  return static_cast<uint8_t>(narrow_int_to_int64(t, static_cast<uint8_t>(v)));
}

}  // namespace cujax
