#include "cujax/runtime/checks.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "cujax/core/narrow_types.h"

namespace cujax::runtime {

namespace {

std::string index_string(const Shape& shape, int64_t flat) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return shape_to_string(idx);
}

// Maps float bits onto integers that are ordered like the values, so ULP distance is a
// difference. +0 and -0 both map to 0.
int64_t ordered_bits(uint64_t bits, int width) {
  const uint64_t sign = uint64_t{1} << (width - 1);
  const int64_t magnitude = static_cast<int64_t>(bits & (sign - 1));
  return (bits & sign) ? -magnitude : magnitude;
}

uint64_t raw_bits(const HostTensor& t, int64_t i) {
  uint64_t v = 0;
  const size_t w = size_of(t.dtype());
  std::memcpy(&v, static_cast<const std::byte*>(t.data()) + i * w, w);
  return v;
}

double as_double(const HostTensor& t, int64_t i) {
  const DType dt = t.dtype();
  if (is_narrow_float(dt))
    return narrow_float_to_double(dt, static_cast<const uint8_t*>(t.data())[i]);
  if (is_narrow_int(dt))
    return static_cast<double>(narrow_int_to_int64(dt, static_cast<const uint8_t*>(t.data())[i]));
  return visit_dtype(t.dtype(), [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return static_cast<double>(t.data_as<T>()[i]);
  });
}

bool element_holds(CheckKind kind, const HostTensor& a, const HostTensor& b, int64_t i,
                   double tolerance) {
  const DType dt = a.dtype();
  if (kind == CheckKind::ExpectEq || !is_float(dt)) {
    if (is_float(dt)) {
      const double x = as_double(a, i), y = as_double(b, i);
      if (std::isnan(x) && std::isnan(y)) return true;
    }
    if (kind == CheckKind::ExpectAlmostEq)
      return std::fabs(as_double(a, i) - as_double(b, i)) <= tolerance;
    return raw_bits(a, i) == raw_bits(b, i);
  }
  const double x = as_double(a, i), y = as_double(b, i);
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (kind == CheckKind::ExpectAlmostEq) return x == y || std::fabs(x - y) <= tolerance;
  if (!std::isfinite(x) || !std::isfinite(y)) return raw_bits(a, i) == raw_bits(b, i);
  const int width = bit_width(dt);
  // E8M0FNU has no sign bit: its bits are ordered like its values.
  const bool unsigned_format =
      is_narrow_float(dt) && narrow_float_format(dt).nan == NarrowNan::Unsigned;
  const int64_t ulps =
      unsigned_format ? static_cast<int64_t>(raw_bits(a, i)) - static_cast<int64_t>(raw_bits(b, i))
                      : ordered_bits(raw_bits(a, i), width) - ordered_bits(raw_bits(b, i), width);
  return ulps <= 3 && ulps >= -3;
}

}  // namespace

std::optional<CheckKind> check_kind_from_name(std::string_view target) {
  if (target == "check.expect_eq" || target == "check.expect_eq_const") return CheckKind::ExpectEq;
  if (target == "check.expect_close") return CheckKind::ExpectClose;
  if (target == "check.expect_almost_eq" || target == "check.expect_almost_eq_const")
    return CheckKind::ExpectAlmostEq;
  return std::nullopt;
}

// A complex tensor as its real and imaginary parts: a minor dimension of 2 of the part type.
HostTensor complex_parts(const HostTensor& t) {
  Shape shape = t.shape();
  shape.push_back(2);
  return HostTensor::from_bytes(complex_component(t.dtype()), shape,
                                {static_cast<const std::byte*>(t.data()), t.nbytes()});
}

std::string format_element(const HostTensor& t, int64_t i) {
  if (is_complex(t.dtype())) {
    const HostTensor parts = complex_parts(t);
    return "(" + format_element(parts, 2 * i) + "," + format_element(parts, 2 * i + 1) + ")";
  }
  char buf[64];
  if (is_narrow_int(t.dtype())) return std::to_string(static_cast<int64_t>(as_double(t, i)));
  if (is_narrow_float(t.dtype())) {
    std::snprintf(buf, sizeof buf, "%.17g", as_double(t, i));
    return buf;
  }
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = t.data_as<T>()[i];
    if constexpr (std::is_same_v<T, bool>) {
      std::snprintf(buf, sizeof buf, "%s", v ? "true" : "false");
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    } else if constexpr (std::is_integral_v<T>) {
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v));
    } else {
      std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(v));
    }
  });
  return buf;
}

std::optional<std::string> check_values(CheckKind kind, const HostTensor& actual,
                                        const HostTensor& expected, double tolerance) {
  if (actual.dtype() != expected.dtype() || actual.shape() != expected.shape())
    return "type mismatch: got " + actual.type_string() + ", expected " + expected.type_string();
  if (is_complex(actual.dtype())) {  // each part is checked as a float
    const HostTensor a = complex_parts(actual), e = complex_parts(expected);
    for (int64_t i = 0; i < actual.size(); ++i) {
      if (!element_holds(kind, a, e, 2 * i, tolerance) ||
          !element_holds(kind, a, e, 2 * i + 1, tolerance))
        return "index " + index_string(actual.shape(), i) + ": got " + format_element(actual, i) +
               ", expected " + format_element(expected, i);
    }
    return std::nullopt;
  }
  for (int64_t i = 0; i < actual.size(); ++i) {
    if (!element_holds(kind, actual, expected, i, tolerance))
      return "index " + index_string(actual.shape(), i) + ": got " + format_element(actual, i) +
             ", expected " + format_element(expected, i);
  }
  return std::nullopt;
}

}  // namespace cujax::runtime
