// Launch geometry shared by the kernels: grid-stride loops over n elements.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace cujax::cuda {

inline constexpr int kBlock = 256;

inline unsigned grid_for(int64_t n) {
  // Enough blocks to fill an H100 several times; the loop covers the rest.
  return static_cast<unsigned>(std::clamp<int64_t>((n + kBlock - 1) / kBlock, 1, 8192));
}

__device__ inline int64_t thread_begin() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t thread_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// An unsigned integer type of `Bytes` bytes, to move elements without knowing their dtype.
template <int Bytes>
struct bits_of;
template <>
struct bits_of<1> {
  using type = uint8_t;
};
template <>
struct bits_of<2> {
  using type = uint16_t;
};
template <>
struct bits_of<4> {
  using type = uint32_t;
};
template <>
struct bits_of<8> {
  using type = uint64_t;
};
// complex128
struct alignas(16) Bytes16 {
  uint64_t lo, hi;
};
template <>
struct bits_of<16> {
  using type = Bytes16;
};

// Calls f(std::integral_constant<int, B>) for element sizes 1, 2, 4, 8, 16.
template <class F>
void visit_element_bytes(size_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 16:
      return f(std::integral_constant<int, 16>{});
    default:
      return f(std::integral_constant<int, 8>{});
  }
}

}  // namespace cujax::cuda
