// 16-bit floating-point storage types with exact, round-to-nearest-even conversions.
// Arithmetic happens in float: for +, -, *, / and sqrt, rounding the float result gives the
// correctly rounded 16-bit result, because float carries more than 2p+2 bits of precision.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#define CUJAX_HD __host__ __device__
#else
#define CUJAX_HD
#endif

namespace cujax {

namespace detail {

// Rounds a double to a binary format with E exponent and M mantissa bits (IEEE layout, no
// implicit-bit storage), round to nearest even, overflow to infinity, NaN kept quiet.
template <int E, int M>
CUJAX_HD constexpr uint32_t round_double_to_bits(double value) {
  const uint64_t bits = std::bit_cast<uint64_t>(value);
  const uint32_t sign = static_cast<uint32_t>(bits >> 63) << (E + M);
  const int exp = static_cast<int>((bits >> 52) & 0x7ff);
  const uint64_t mant = bits & ((uint64_t{1} << 52) - 1);
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr uint32_t exp_max = (1u << E) - 1;
  if (exp == 0x7ff) {
    if (mant == 0) return sign | (exp_max << M);
    return sign | (exp_max << M) | (1u << (M - 1)) | static_cast<uint32_t>(mant >> (52 - M));
  }
  if (exp == 0) return sign;  // double subnormals are far below the smallest 16-bit subnormal
  const uint64_t sig = (uint64_t{1} << 52) | mant;
  int target_exp = exp - 1023 + bias;
  const int shift = target_exp >= 1 ? 52 - M : 52 - M + (1 - target_exp);
  if (shift >= 64) return sign;
  uint64_t kept = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (kept & 1))) ++kept;
  if (target_exp < 1) return sign | static_cast<uint32_t>(kept);  // carry into the exponent is fine
  if (kept >> (M + 1)) {
    kept >>= 1;
    ++target_exp;
  }
  if (target_exp >= static_cast<int>(exp_max)) return sign | (exp_max << M);
  return sign | (static_cast<uint32_t>(target_exp) << M) |
         static_cast<uint32_t>(kept & ((uint64_t{1} << M) - 1));
}

// Exact decode of an (E, M) binary format into a double.
template <int E, int M>
CUJAX_HD constexpr double bits_to_double(uint32_t bits) {
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr uint32_t exp_max = (1u << E) - 1;
  const uint64_t sign = static_cast<uint64_t>((bits >> (E + M)) & 1) << 63;
  const uint32_t exp = (bits >> M) & exp_max;
  uint64_t mant = bits & ((1u << M) - 1);
  if (exp == exp_max) {
    return std::bit_cast<double>(sign | (uint64_t{0x7ff} << 52) | (mant << (52 - M)));
  }
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<double>(sign);
    int e = 1 - bias;  // normalize the subnormal
    while (!(mant & (1u << M))) {
      mant <<= 1;
      --e;
    }
    mant &= (1u << M) - 1;
    return std::bit_cast<double>(sign | (static_cast<uint64_t>(e + 1023) << 52) |
                                 (mant << (52 - M)));
  }
  return std::bit_cast<double>(sign | (static_cast<uint64_t>(int(exp) - bias + 1023) << 52) |
                               (mant << (52 - M)));
}

}  // namespace detail

// IEEE 754 binary16.
struct float16 {
  uint16_t bits = 0;

  constexpr float16() = default;
  CUJAX_HD constexpr explicit float16(double v)
      : bits(static_cast<uint16_t>(detail::round_double_to_bits<5, 10>(v))) {}
  CUJAX_HD constexpr explicit float16(float v) : float16(static_cast<double>(v)) {}
  CUJAX_HD constexpr explicit float16(int v) : float16(static_cast<double>(v)) {}
  CUJAX_HD constexpr operator float() const {
    return static_cast<float>(detail::bits_to_double<5, 10>(bits));
  }
  CUJAX_HD static constexpr float16 from_bits(uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
};

// bfloat16: the top half of an IEEE binary32.
struct bfloat16 {
  uint16_t bits = 0;

  constexpr bfloat16() = default;
  CUJAX_HD constexpr explicit bfloat16(double v)
      : bits(static_cast<uint16_t>(detail::round_double_to_bits<8, 7>(v))) {}
  CUJAX_HD constexpr explicit bfloat16(float v) : bits(from_float(v)) {}
  CUJAX_HD constexpr explicit bfloat16(int v) : bfloat16(static_cast<double>(v)) {}
  CUJAX_HD constexpr operator float() const {
    return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
  }
  CUJAX_HD static constexpr bfloat16 from_bits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }

 private:
  // Exact for float input: adding 0x7fff plus the lowest kept bit rounds to nearest even.
  CUJAX_HD static constexpr uint16_t from_float(float v) {
    const uint32_t u = std::bit_cast<uint32_t>(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
  }
};

}  // namespace cujax
