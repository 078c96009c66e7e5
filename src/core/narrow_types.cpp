#include "cujax/core/narrow_types.h"

#include <string>

#include "core/narrow_convert.h"

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
  return narrow::decode(narrow_float_format(t), bits);
}

uint8_t narrow_float_from_double(DType t, double v) {
  return narrow::encode(narrow_float_format(t), v);
}

int64_t narrow_int_min(DType t) {
  return narrow::min_of(narrow::int_format(t));
}
int64_t narrow_int_max(DType t) {
  return narrow::max_of(narrow::int_format(t));
}

int64_t narrow_int_to_int64(DType t, uint8_t stored) {
  return narrow::to_int64(narrow::int_format(t), stored);
}

uint8_t narrow_int_from_int64(DType t, int64_t v) {
  return narrow::from_int64(narrow::int_format(t), v);
}

}  // namespace cujax
