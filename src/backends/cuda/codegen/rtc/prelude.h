// What generated fusion kernels (codegen/emitter.cpp) include: the element-wise functors and
// index helpers shared with the CPU backend, and the few device helpers below (wide loads and
// stores, reduction folds across a warp or a block). NVRTC gets this text embedded at build time;
// the codegen test compiles the same text with the host compiler over an emulated thread grid.
#ifndef CUJAX_RTC_PRELUDE_H
#define CUJAX_RTC_PRELUDE_H

#include "backends/common/elementwise.h"
#include "backends/common/index.h"

#if defined(__CUDACC__)
#define CUJAX_DEVICE __device__ __forceinline__
#else
#define CUJAX_DEVICE inline
#endif

namespace cujax::rtc {

// The unsigned integer with T's bytes: what shuffles and shared memory carry.
template <int N>
struct raw_type;
template <>
struct raw_type<1> {
  using type = unsigned char;
};
template <>
struct raw_type<2> {
  using type = unsigned short;
};
template <>
struct raw_type<4> {
  using type = unsigned int;
};
template <>
struct raw_type<8> {
  using type = unsigned long long;
};
template <class T>
using raw_t = typename raw_type<sizeof(T)>::type;

template <class T>
CUJAX_DEVICE raw_t<T> to_raw(T x) {
  return std::bit_cast<raw_t<T>>(x);
}
template <class T>
CUJAX_DEVICE T from_raw(raw_t<T> r) {
  return std::bit_cast<T>(r);
}

// V consecutive elements as one aligned access (V * sizeof(T) is at most 16 bytes).
template <class T, int V>
struct alignas(V * sizeof(T)) Pack {
  T v[V];
};

// dst[k] = src[base + k] for k < V and base + k < end: one wide load when the address allows.
template <int V, class T>
CUJAX_DEVICE void load(T* dst, const T* __restrict__ src, long long base, long long end) {
  const T* p = src + base;
  if (base + V <= end && reinterpret_cast<unsigned long long>(p) % sizeof(Pack<T, V>) == 0) {
    const Pack<T, V> pack = *reinterpret_cast<const Pack<T, V>*>(p);
    for (int k = 0; k < V; ++k) dst[k] = pack.v[k];
  } else {
    for (int k = 0; k < V; ++k)
      if (base + k < end) dst[k] = p[k];
  }
}

// dst[base + k] = src[k] for k < V and base + k < end.
template <int V, class T>
CUJAX_DEVICE void store(T* __restrict__ dst, const T* src, long long base, long long end) {
  T* p = dst + base;
  if (base + V <= end && reinterpret_cast<unsigned long long>(p) % sizeof(Pack<T, V>) == 0) {
    Pack<T, V> pack;
    for (int k = 0; k < V; ++k) pack.v[k] = src[k];
    *reinterpret_cast<Pack<T, V>*>(p) = pack;
  } else {
    for (int k = 0; k < V; ++k)
      if (base + k < end) p[k] = src[k];
  }
}

template <class T>
CUJAX_DEVICE T shfl_xor(T x, int lane_mask) {
  if constexpr (sizeof(T) == 8) {
    return from_raw<T>(__shfl_xor_sync(0xffffffffu, to_raw(x), lane_mask));
  } else {
    const unsigned r = __shfl_xor_sync(0xffffffffu, static_cast<unsigned>(to_raw(x)), lane_mask);
    return from_raw<T>(static_cast<raw_t<T>>(r));
  }
}

// clamp as the CPU backend computes it: minimum(maximum(x, lo), hi) in the compute type.
template <class T>
CUJAX_DEVICE T clamp(T lo, T x, T hi) {
  using C = ew::compute_t<T, false>;
  const C v = ew::Maximum{}(ew::to_compute<C>(x), ew::to_compute<C>(lo));
  return ew::from_compute<T>(ew::Minimum{}(v, ew::to_compute<C>(hi)));
}

// A reduction's partial result: the fold of the elements a thread (then a warp, then a block)
// has seen, rounded to T after each step as the CPU backend's reduce does. `has` is false until
// the first element, so the init value is applied once, at the end, whatever it is.
template <class F, class T>
struct Fold {
  T value{};
  bool has = false;

  CUJAX_DEVICE void add(T x) {
    value = has ? ew::apply(F{}, value, x) : x;
    has = true;
  }
  CUJAX_DEVICE void merge(T x, bool x_has) {
    if (x_has) add(x);
  }
  // Folds the partials of `width` neighbouring lanes (a power of two up to 32); every one of
  // them ends with the result.
  CUJAX_DEVICE void warp_merge(int width) {
    for (int m = width / 2; m > 0; m /= 2) {
      const T other = shfl_xor(value, m);
      const bool other_has = shfl_xor(has, m);
      merge(other, other_has);
    }
  }
  CUJAX_DEVICE T result(T init) const { return has ? ew::apply(F{}, init, value) : init; }
};

// Folds the partials of a whole block of kWarps warps; thread 0 ends with the result. `values`
// and `flags` are __shared__ arrays of kWarps elements.
template <int kWarps, class F, class T>
CUJAX_DEVICE void block_merge(Fold<F, T>& f, raw_t<T>* values, bool* flags) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  f.warp_merge(32);
  if (lane == 0) {
    values[warp] = to_raw(f.value);
    flags[warp] = f.has;
  }
  __syncthreads();
  Fold<F, T> g;
  if (warp == 0) {
    if (lane < kWarps) g.merge(from_raw<T>(values[lane]), flags[lane]);
    g.warp_merge(32);
  }
  f = g;
}

}  // namespace cujax::rtc

#endif  // CUJAX_RTC_PRELUDE_H
