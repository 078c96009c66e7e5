// The element-wise ops whose result type is their operands' type, with their functors, and the
// comparison directions: the per-op kernels and the fuser (fusion.cpp) are both made from
// these lists, so an op added here is fusible too.
#pragma once

#include <optional>
#include <string_view>
#include <type_traits>

#include "backends/common/elementwise.h"

#define CUJAX_CPU_UNARY_OPS(X)                          \
  X("stablehlo.abs", Abs)                               \
  X("stablehlo.cbrt", Cbrt)                             \
  X("stablehlo.ceil", Ceil)                             \
  X("stablehlo.cosine", Cos)                            \
  X("stablehlo.count_leading_zeros", CountLeadingZeros) \
  X("stablehlo.exponential", Exp)                       \
  X("stablehlo.exponential_minus_one", Expm1)           \
  X("stablehlo.floor", Floor)                           \
  X("stablehlo.log", Log)                               \
  X("stablehlo.log_plus_one", Log1p)                    \
  X("stablehlo.logistic", Logistic)                     \
  X("stablehlo.negate", Negate)                         \
  X("stablehlo.not", Not)                               \
  X("stablehlo.popcnt", Popcnt)                         \
  X("stablehlo.round_nearest_afz", RoundNearestAfz)     \
  X("stablehlo.round_nearest_even", RoundNearestEven)   \
  X("stablehlo.rsqrt", Rsqrt)                           \
  X("stablehlo.sign", Sign)                             \
  X("stablehlo.sine", Sin)                              \
  X("stablehlo.sqrt", Sqrt)                             \
  X("stablehlo.tan", Tan)                               \
  X("stablehlo.tanh", Tanh)

#define CUJAX_CPU_BINARY_OPS(X)                               \
  X("stablehlo.add", Add)                                     \
  X("stablehlo.and", And)                                     \
  X("stablehlo.atan2", Atan2)                                 \
  X("stablehlo.divide", Divide)                               \
  X("stablehlo.maximum", Maximum)                             \
  X("stablehlo.minimum", Minimum)                             \
  X("stablehlo.multiply", Multiply)                           \
  X("stablehlo.or", Or)                                       \
  X("stablehlo.power", Power)                                 \
  X("stablehlo.remainder", Remainder)                         \
  X("stablehlo.shift_left", ShiftLeft)                        \
  X("stablehlo.shift_right_arithmetic", ShiftRightArithmetic) \
  X("stablehlo.shift_right_logical", ShiftRightLogical)       \
  X("stablehlo.subtract", Subtract)                           \
  X("stablehlo.xor", Xor)

namespace cujax::cpu {

// "EQ" -> CompareDirection::EQ; nullopt for an unknown name.
inline std::optional<ew::CompareDirection> parse_compare_direction(std::string_view d) {
  using D = ew::CompareDirection;
  if (d == "EQ") return D::EQ;
  if (d == "NE") return D::NE;
  if (d == "GE") return D::GE;
  if (d == "GT") return D::GT;
  if (d == "LE") return D::LE;
  if (d == "LT") return D::LT;
  return std::nullopt;
}

// Calls fn(std::integral_constant<CompareDirection, d>{}), so loops specialise on it.
template <class Fn>
void with_direction(ew::CompareDirection d, Fn&& fn) {
  using D = ew::CompareDirection;
  switch (d) {
    case D::EQ:
      return fn(std::integral_constant<D, D::EQ>{});
    case D::NE:
      return fn(std::integral_constant<D, D::NE>{});
    case D::GE:
      return fn(std::integral_constant<D, D::GE>{});
    case D::GT:
      return fn(std::integral_constant<D, D::GT>{});
    case D::LE:
      return fn(std::integral_constant<D, D::LE>{});
    case D::LT:
      return fn(std::integral_constant<D, D::LT>{});
  }
}

}  // namespace cujax::cpu
