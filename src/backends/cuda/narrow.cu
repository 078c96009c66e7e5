// stablehlo.convert with a narrow operand or result, element by element as the CPU backend's
// narrow_kernels.cpp converts (the same core/narrow_convert.h functions).
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/narrow.h"
#include "core/narrow_convert.h"

namespace cujax::cuda {

namespace {

// One conversion per element: F maps an input element to an output element.
template <class To, class From, class F>
__global__ void map_kernel(const From* in, To* out, int64_t n, F f) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) out[i] = f(in[i]);
}

template <class To, class From, class F>
void launch_map(const void* in, void* out, int64_t n, F f, cudaStream_t s) {
  map_kernel<To, From>
      <<<grid_for(n), kBlock, 0, s>>>(static_cast<const From*>(in), static_cast<To*>(out), n, f);
  CUJAX_CUDA_CHECK_LAUNCH("narrow convert_kernel");
}

template <class T>
struct ToFloat {
  NarrowFloatFormat f;
  __device__ T operator()(uint8_t b) const { return static_cast<T>(narrow::decode(f, b)); }
};
template <class T>
struct FromFloat {
  NarrowFloatFormat f;
  __device__ uint8_t operator()(T v) const { return narrow::encode(f, static_cast<double>(v)); }
};
template <class T>
struct FloatToInt {
  narrow::IntFormat f;
  __device__ uint8_t operator()(T v) const { return narrow::from_float(f, static_cast<double>(v)); }
};
struct IntToInt {
  narrow::IntFormat from, to;
  __device__ uint8_t operator()(uint8_t b) const {
    return narrow::from_int64(to, narrow::to_int64(from, b));
  }
};
template <class T>
struct IntToWide {
  narrow::IntFormat f;
  __device__ T operator()(uint8_t b) const { return static_cast<T>(narrow::to_int64(f, b)); }
};
template <class T>
struct WideToInt {
  narrow::IntFormat f;
  __device__ uint8_t operator()(T v) const {
    return narrow::from_int64(f, static_cast<int64_t>(v));
  }
};

// Calls f(tag) for an integer or i1 type (the wide side of a narrow integer's convert).
template <class F>
void visit_integer(DType t, F&& f) {
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) f(tag);
  });
}

}  // namespace

void launch_narrow_convert(DType from, DType to, const void* in, void* out, int64_t n,
                           cudaStream_t s) {
  if (n == 0) return;
  if (from == to) {
    CUJAX_CUDA_CHECK(cudaMemcpyAsync(out, in, static_cast<size_t>(n), cudaMemcpyDeviceToDevice, s));
    return;
  }
  if (is_narrow_float(from)) {
    const NarrowFloatFormat f = narrow_float_format(from);
    if (to == DType::F32) return launch_map<float, uint8_t>(in, out, n, ToFloat<float>{f}, s);
    return launch_map<double, uint8_t>(in, out, n, ToFloat<double>{f}, s);
  }
  if (is_narrow_float(to)) {
    const NarrowFloatFormat f = narrow_float_format(to);
    if (from == DType::F32) return launch_map<uint8_t, float>(in, out, n, FromFloat<float>{f}, s);
    return launch_map<uint8_t, double>(in, out, n, FromFloat<double>{f}, s);
  }
  if (from == DType::F32)
    return launch_map<uint8_t, float>(in, out, n, FloatToInt<float>{narrow::int_format(to)}, s);
  if (from == DType::F64)
    return launch_map<uint8_t, double>(in, out, n, FloatToInt<double>{narrow::int_format(to)}, s);
  if (is_narrow_int(from) && is_narrow_int(to))
    return launch_map<uint8_t, uint8_t>(
        in, out, n, IntToInt{narrow::int_format(from), narrow::int_format(to)}, s);
  if (is_narrow_int(from))
    return visit_integer(to, [&](auto tag) {
      using T = typename decltype(tag)::type;
      launch_map<T, uint8_t>(in, out, n, IntToWide<T>{narrow::int_format(from)}, s);
    });
  visit_integer(from, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_map<uint8_t, T>(in, out, n, WideToInt<T>{narrow::int_format(to)}, s);
  });
}

}  // namespace cujax::cuda
