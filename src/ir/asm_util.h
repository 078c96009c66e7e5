// Helpers shared by the StableHLO text parser and printer: identifier rules, string escapes and
// the exact float <-> text conversions MLIR uses (so printed constants read back bit for bit).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cujax/core/dtype.h"
#include "cujax/core/half.h"
#include "cujax/core/narrow_types.h"

namespace cujax::ir::asm_util {

inline bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
inline bool is_hex_digit(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
inline int hex_value(char c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}
// MLIR bare-id: (letter | '_') (letter | digit | '_' | '$' | '.')*
inline bool is_ident_start(char c) {
  return is_letter(c) || c == '_';
}
inline bool is_ident_char(char c) {
  return is_letter(c) || is_digit(c) || c == '_' || c == '$' || c == '.';
}
inline bool is_bare_identifier(std::string_view s) {
  if (s.empty() || !is_ident_start(s[0])) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}
// SSA value suffix: digits, or (letter | [$._-]) (letter | digit | [$._-])*
inline bool is_value_id_char(char c) {
  return is_letter(c) || is_digit(c) || c == '$' || c == '.' || c == '_' || c == '-';
}

// "text" with MLIR's escapes: \" \\ and \XX for anything that is not printable ASCII.
inline std::string quote_string(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += '\\';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  out += '"';
  return out;
}

// ---- float bits -------------------------------------------------------------------------------

// Exponent and mantissa widths of the float types.
inline int float_exp_bits(DType t) {
  return t == DType::F16 ? 5 : t == DType::BF16 || t == DType::F32 ? 8 : 11;
}
inline int float_mant_bits(DType t) {
  return t == DType::F16 ? 10 : t == DType::BF16 ? 7 : t == DType::F32 ? 23 : 52;
}

// Bits of the value stored in an element of float type `t` (f16/bf16 in the low 16 bits).
// NaN payloads (signaling ones too) carry over exactly, as double_from_float_bits makes them.
inline uint64_t float_bits_from_double(double v, DType t) {
  if (is_narrow_float(t)) return narrow_float_from_double(t, v);
  uint64_t d;
  std::memcpy(&d, &v, 8);
  if (t == DType::F64) return d;
  if (v != v) {
    const int e = float_exp_bits(t), m = float_mant_bits(t);
    uint64_t mant = (d & ((uint64_t{1} << 52) - 1)) >> (52 - m);
    if (mant == 0) mant = uint64_t{1} << (m - 1);
    return ((d >> 63) << (e + m)) | (((uint64_t{1} << e) - 1) << m) | mant;
  }
  switch (t) {
    case DType::F16:
      return float16(v).bits;
    case DType::BF16:
      return bfloat16(v).bits;
    default: {
      const float f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    }
  }
}

// The exact value of a float element; NaNs keep sign and payload in the top mantissa bits.
inline double double_from_float_bits(uint64_t bits, DType t) {
  if (is_narrow_float(t)) return narrow_float_to_double(t, static_cast<uint8_t>(bits));
  double d;
  if (t == DType::F64) {
    std::memcpy(&d, &bits, 8);
    return d;
  }
  const int e = float_exp_bits(t), m = float_mant_bits(t);
  const uint64_t exp_max = (uint64_t{1} << e) - 1;
  const uint64_t mant = bits & ((uint64_t{1} << m) - 1);
  if (((bits >> m) & exp_max) == exp_max && mant != 0) {
    const uint64_t db =
        (((bits >> (e + m)) & 1) << 63) | (uint64_t{0x7ff} << 52) | (mant << (52 - m));
    std::memcpy(&d, &db, 8);
    return d;
  }
  switch (t) {
    case DType::F16:
      return static_cast<double>(
          static_cast<float>(float16::from_bits(static_cast<uint16_t>(bits))));
    case DType::BF16:
      return static_cast<double>(
          static_cast<float>(bfloat16::from_bits(static_cast<uint16_t>(bits))));
    default: {
      const uint32_t b = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b, 4);
      return static_cast<double>(f);
    }
  }
}

// Decimal text (digits, optional fraction and exponent, optional leading '-') rounded to the
// nearest value of float type `t`. Returns false when the text is not a number.
inline bool decimal_to_float_bits(std::string_view text, DType t, uint64_t* bits) {
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (t == DType::F32) {
    float f = 0;
    auto r = std::from_chars(first, last, f);
    // Out-of-range values round to infinity (or zero), as APFloat does.
    if (r.ptr != last || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range))
      return false;
    if (r.ec == std::errc::result_out_of_range) {
      double d = 0;
      auto r2 = std::from_chars(first, last, d);
      if (r2.ptr != last) return false;
      if (r2.ec == std::errc::result_out_of_range) {
        const bool neg = text[0] == '-';
        // Decide between overflow and underflow by the exponent sign.
        const size_t e = text.find_first_of("eE");
        const bool tiny = e != std::string_view::npos && e + 1 < text.size() && text[e + 1] == '-';
        d = tiny ? (neg ? -0.0 : 0.0) : (neg ? -HUGE_VAL : HUGE_VAL);
      }
      f = static_cast<float>(d);
    }
    uint32_t b;
    std::memcpy(&b, &f, 4);
    *bits = b;
    return true;
  }
  double d = 0;
  auto r = std::from_chars(first, last, d);
  if (r.ptr != last || (r.ec != std::errc() && r.ec != std::errc::result_out_of_range))
    return false;
  if (r.ec == std::errc::result_out_of_range) {
    const bool neg = text[0] == '-';
    const size_t e = text.find_first_of("eE");
    const bool tiny = e != std::string_view::npos && e + 1 < text.size() && text[e + 1] == '-';
    d = tiny ? (neg ? -0.0 : 0.0) : (neg ? -HUGE_VAL : HUGE_VAL);
  }
  *bits = float_bits_from_double(d, t);
  return true;
}

// ---- float printing (a replica of llvm::APFloat::toString as MLIR uses it) --------------------

namespace detail {

// Little unsigned big integer, just enough for exact binary -> decimal conversion.
class BigUint {
 public:
  explicit BigUint(uint64_t v) {
    while (v) {
      limbs_.push_back(static_cast<uint32_t>(v));
      v >>= 32;
    }
  }
  bool is_zero() const { return limbs_.empty(); }
  void mul_small(uint32_t m) {
    uint64_t carry = 0;
    for (auto& l : limbs_) {
      const uint64_t x = static_cast<uint64_t>(l) * m + carry;
      l = static_cast<uint32_t>(x);
      carry = x >> 32;
    }
    if (carry) limbs_.push_back(static_cast<uint32_t>(carry));
  }
  void shl(int bits) {
    const int words = bits / 32, rest = bits % 32;
    if (rest) {
      uint32_t carry = 0;
      for (auto& l : limbs_) {
        const uint32_t next = l >> (32 - rest);
        l = (l << rest) | carry;
        carry = next;
      }
      if (carry) limbs_.push_back(carry);
    }
    if (words && !limbs_.empty()) limbs_.insert(limbs_.begin(), static_cast<size_t>(words), 0u);
  }
  // Divides in place, returns the remainder.
  uint32_t divmod_small(uint32_t d) {
    uint64_t rem = 0;
    for (size_t i = limbs_.size(); i-- > 0;) {
      const uint64_t cur = (rem << 32) | limbs_[i];
      limbs_[i] = static_cast<uint32_t>(cur / d);
      rem = cur % d;
    }
    trim();
    return static_cast<uint32_t>(rem);
  }
  unsigned active_bits() const {
    if (limbs_.empty()) return 0;
    return static_cast<unsigned>((limbs_.size() - 1) * 32) + (32 - __builtin_clz(limbs_.back()));
  }

 private:
  void trim() {
    while (!limbs_.empty() && limbs_.back() == 0) limbs_.pop_back();
  }
  std::vector<uint32_t> limbs_;
};

// Digits are stored least significant first, as APFloat does.
inline void adjust_digits(std::string& buffer, int& exp, unsigned precision) {
  const unsigned n = static_cast<unsigned>(buffer.size());
  if (n <= precision) return;
  unsigned first = n - precision;
  if (buffer[first - 1] < '5') {
    while (first < n && buffer[first] == '0') ++first;
    exp += static_cast<int>(first);
    buffer.erase(0, first);
    return;
  }
  for (unsigned i = first; i != n; ++i) {
    if (buffer[i] == '9') {
      ++first;
    } else {
      ++buffer[i];
      break;
    }
  }
  if (first == n) {
    exp += static_cast<int>(first);
    buffer = "1";
    return;
  }
  exp += static_cast<int>(first);
  buffer.erase(0, first);
}

inline void adjust_significand(BigUint& sig, int& exp, unsigned precision) {
  const unsigned bits = sig.active_bits();
  const unsigned required = (precision * 196 + 58) / 59;
  if (bits <= required) return;
  unsigned tens = (bits - required) * 59 / 196;
  if (!tens) return;
  exp += static_cast<int>(tens);
  while (tens >= 9) {
    sig.divmod_small(1000000000u);
    tens -= 9;
  }
  uint32_t p = 1;
  while (tens--) p *= 10;
  if (p > 1) sig.divmod_small(p);
}

// APFloat::toString(str, format_precision, max_padding, truncate_zero) for a finite value.
inline std::string apfloat_to_string(bool negative, uint64_t significand, int exponent,
                                     int semantics_precision, unsigned format_precision,
                                     unsigned max_padding, bool truncate_zero) {
  std::string out;
  if (negative) out += '-';
  if (significand == 0) {
    if (!max_padding) {
      if (truncate_zero) {
        out += "0.0E+0";
      } else {
        out += "0.0";
        if (format_precision > 1) out.append(format_precision - 1, '0');
        out += "e+00";
      }
    } else {
      out += '0';
    }
    return out;
  }
  if (!format_precision) format_precision = 2 + semantics_precision * 59 / 196;
  int exp = exponent;
  const int tz = __builtin_ctzll(significand);
  significand >>= tz;
  exp += tz;
  BigUint sig(significand);
  if (exp > 0) {
    sig.shl(exp);
    exp = 0;
  } else if (exp < 0) {
    int texp = -exp;
    while (texp >= 13) {  // 5^13 < 2^32
      sig.mul_small(1220703125u);
      texp -= 13;
    }
    uint32_t p = 1;
    while (texp--) p *= 5;
    if (p > 1) sig.mul_small(p);
  }
  adjust_significand(sig, exp, format_precision);
  std::string buffer;  // least significant digit first
  bool in_trail = true;
  while (!sig.is_zero()) {
    const unsigned d = sig.divmod_small(10);
    if (in_trail && !d) {
      ++exp;
    } else {
      buffer.push_back(static_cast<char>('0' + d));
      in_trail = false;
    }
  }
  adjust_digits(buffer, exp, format_precision);
  const unsigned ndigits = static_cast<unsigned>(buffer.size());
  bool scientific;
  if (!max_padding) {
    scientific = true;
  } else if (exp >= 0) {
    scientific = static_cast<unsigned>(exp) > max_padding ||
                 ndigits + static_cast<unsigned>(exp) > format_precision;
  } else {
    const int msd = exp + static_cast<int>(ndigits - 1);
    scientific = msd >= 0 ? false : static_cast<unsigned>(-msd) > max_padding;
  }
  if (scientific) {
    exp += static_cast<int>(ndigits - 1);
    out += buffer[ndigits - 1];
    out += '.';
    if (ndigits == 1 && truncate_zero) {
      out += '0';
    } else {
      for (unsigned i = 1; i != ndigits; ++i) out += buffer[ndigits - 1 - i];
    }
    if (!truncate_zero && format_precision > ndigits - 1)
      out.append(format_precision - ndigits + 1, '0');
    out += truncate_zero ? 'E' : 'e';
    out += exp >= 0 ? '+' : '-';
    unsigned e = static_cast<unsigned>(exp >= 0 ? exp : -exp);
    std::string expbuf;
    do {
      expbuf.push_back(static_cast<char>('0' + e % 10));
      e /= 10;
    } while (e);
    if (!truncate_zero && expbuf.size() < 2) expbuf.push_back('0');
    for (size_t i = expbuf.size(); i-- > 0;) out += expbuf[i];
    return out;
  }
  if (exp >= 0) {
    for (unsigned i = 0; i != ndigits; ++i) out += buffer[ndigits - 1 - i];
    out.append(static_cast<size_t>(exp), '0');
    return out;
  }
  const int whole = exp + static_cast<int>(ndigits);
  unsigned i = 0;
  if (whole > 0) {
    for (; i != static_cast<unsigned>(whole); ++i) out += buffer[ndigits - i - 1];
    out += '.';
  } else {
    out += "0.";
    for (int z = 1; z != 1 - whole; ++z) out += '0';
  }
  for (; i != ndigits; ++i) out += buffer[ndigits - i - 1];
  return out;
}

struct FloatLayout {
  int exp_bits;
  int mant_bits;
};
inline FloatLayout layout_of(DType t) {
  switch (t) {
    case DType::F16:
      return {5, 10};
    case DType::BF16:
      return {8, 7};
    case DType::F32:
      return {8, 23};
    default:
      return {11, 52};
  }
}

}  // namespace detail

// "0x7FC00000": the bits of a float element, as MLIR prints non-finite values.
inline std::string hex_float_bits(uint64_t bits) {
  static const char* kHex = "0123456789ABCDEF";
  std::string digits;
  do {
    digits.push_back(kHex[bits & 15]);
    bits >>= 4;
  } while (bits);
  return "0x" + std::string(digits.rbegin(), digits.rend());
}

// Text for a float element exactly as MLIR prints it: "1.000000e+00" when six digits read back
// to the same value, otherwise enough digits to round-trip, otherwise hex bits.
inline std::string format_float(uint64_t bits, DType t) {
  if (is_narrow_float(t)) {
    // Non-finite values as their bits; finite ones as the shortest of MLIR's two forms that
    // reads back to the same bits.
    const double v = narrow_float_to_double(t, static_cast<uint8_t>(bits));
    if (!std::isfinite(v)) return hex_float_bits(bits);
    const int precision = narrow_float_format(t).mant_bits + 1;
    uint64_t significand = 0;
    int exponent = 0;
    if (v != 0) {
      int e = 0;
      const double fr = std::frexp(std::fabs(v), &e);
      significand = static_cast<uint64_t>(std::ldexp(fr, precision));
      exponent = e - precision;
    }
    auto reads_back = [&](const std::string& s) {
      uint64_t b = 0;
      return decimal_to_float_bits(s, t, &b) && b == bits;
    };
    for (const std::string& s :
         {detail::apfloat_to_string(std::signbit(v), significand, exponent, precision, 6, 0, false),
          detail::apfloat_to_string(std::signbit(v), significand, exponent, precision, 0, 3, true)})
      if (reads_back(s)) return s;
    return hex_float_bits(bits);
  }
  const detail::FloatLayout l = detail::layout_of(t);
  const int width = 1 + l.exp_bits + l.mant_bits;
  bits &= width == 64 ? ~uint64_t{0} : ((uint64_t{1} << width) - 1);
  const bool negative = (bits >> (width - 1)) & 1;
  const uint64_t exp_field = (bits >> l.mant_bits) & ((uint64_t{1} << l.exp_bits) - 1);
  const uint64_t mant = bits & ((uint64_t{1} << l.mant_bits) - 1);
  const uint64_t exp_max = (uint64_t{1} << l.exp_bits) - 1;
  if (exp_field == exp_max) return hex_float_bits(bits);
  const int bias = (1 << (l.exp_bits - 1)) - 1;
  uint64_t significand;
  int exponent;  // value = significand * 2^exponent
  if (exp_field == 0) {
    significand = mant;
    exponent = 1 - bias - l.mant_bits;
  } else {
    significand = mant | (uint64_t{1} << l.mant_bits);
    exponent = static_cast<int>(exp_field) - bias - l.mant_bits;
  }
  const int precision = l.mant_bits + 1;
  auto reads_back = [&](const std::string& s) {
    uint64_t b = 0;
    return decimal_to_float_bits(s, t, &b) && b == bits;
  };
  std::string s =
      detail::apfloat_to_string(negative, significand, exponent, precision, 6, 0, false);
  if (reads_back(s)) return s;
  s = detail::apfloat_to_string(negative, significand, exponent, precision, 0, 3, true);
  if (s.find('.') != std::string::npos && reads_back(s)) return s;
  return hex_float_bits(bits);
}

}  // namespace cujax::ir::asm_util
