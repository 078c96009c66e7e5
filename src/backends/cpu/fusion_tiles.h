// The tile loops of the CPU backend's fused steps (fusion.cpp): element-wise ops over a tile,
// and row reductions over tiles of whole rows. Only fusion.cpp includes this: it is compiled
// with -ffp-contract=off, which the bit-identity of every build of these loops relies on.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backends/cpu/elementwise_ops.h"

namespace cujax::cpu::tiles {

// The tile loops are also built for AVX2 and picked at load time: wider vectors for the
// polynomial exp and tanh and for the arithmetic. fusion.cpp is compiled with
// -ffp-contract=off, so both builds round every operation alike and give identical bits.
// The precise unary ops (exp, tanh, ...: double-precision polynomials and a division per
// element) also get an AVX-512 build, which does twice the doubles per instruction (tanh's
// tile loop 30% faster); for the memory-bound rest it gained nothing.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CUJAX_TILE_LOOP __attribute__((target_clones("arch=x86-64-v3", "default")))
#define CUJAX_PRECISE_TILE_LOOP \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CUJAX_TILE_LOOP
#define CUJAX_PRECISE_TILE_LOOP
#endif

// out[0, n) = f(in[0][0, n), in[1][0, n), ...).
using TileFn = void (*)(const void* const* in, void* out, int64_t n);

struct TileOp {
  TileFn fn = nullptr;
  size_t arity = 0;
  bool precise = false;
};

// No __restrict: a group's output may be written into the memory of an input it reads (a
// donated or dead operand's), element for element.
template <class F, class T>
CUJAX_TILE_LOOP void unary_tile(const void* const* in, void* out, int64_t n) {
  const T* a = static_cast<const T*>(in[0]);
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ew::apply(F{}, a[i]);
}

template <class F, class T>
CUJAX_PRECISE_TILE_LOOP void precise_unary_tile(const void* const* in, void* out, int64_t n) {
  const T* a = static_cast<const T*>(in[0]);
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ew::apply(F{}, a[i]);
}

template <class F, class T>
CUJAX_TILE_LOOP void binary_tile(const void* const* in, void* out, int64_t n) {
  const T* a = static_cast<const T*>(in[0]);
  const T* b = static_cast<const T*>(in[1]);
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ew::apply(F{}, a[i], b[i]);
}

template <ew::CompareDirection D>
CUJAX_TILE_LOOP void compare_tile(const void* const* in, void* out, int64_t n) {
  const float* a = static_cast<const float*>(in[0]);
  const float* b = static_cast<const float*>(in[1]);
  bool* o = static_cast<bool*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ew::Compare<D>{}(a[i], b[i]);
}

template <class To, class From>
CUJAX_TILE_LOOP void convert_tile(const void* const* in, void* out, int64_t n) {
  const From* a = static_cast<const From*>(in[0]);
  To* o = static_cast<To*>(out);
  for (int64_t i = 0; i < n; ++i) o[i] = ew::convert<To>(a[i]);
}

template <class T>
CUJAX_TILE_LOOP void select_tile(const void* const* in, void* out, int64_t n) {
  // Bytes, not bool, and both sides loaded before the choice: the vectorizer has no vector type
  // for bool, and `p[i] ? t[i] : f[i]` loads one side conditionally; either kept it scalar.
  using E = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
  const uint8_t* p = static_cast<const uint8_t*>(in[0]);
  const E* t = static_cast<const E*>(in[1]);
  const E* f = static_cast<const E*>(in[2]);
  E* o = static_cast<E*>(out);
  for (int64_t i = 0; i < n; ++i) {
    const E a = t[i], b = f[i];
    o[i] = p[i] != 0 ? a : b;
  }
}

// Row reductions of f32: out[r] folds in[r * len, (r + 1) * len) in order from *init, exactly as
// the reduce kernel's contiguous-row path does (so the sums are the same bits).
using RowReduceFn = void (*)(const float* in, const float* init, float* out, int64_t rows,
                             int64_t len);

struct ReduceAdd {
  float operator()(float a, float b) const { return a + b; }
  template <class V>
  static void fold(V& acc, const V& x) {
    acc = acc + x;
  }
};
struct ReduceMul {
  float operator()(float a, float b) const { return a * b; }
  template <class V>
  static void fold(V& acc, const V& x) {
    acc = acc * x;
  }
};
// IEEE-754 maximum and minimum as the reduce kernel computes them: NaN propagates, -0 < +0.
struct ReduceMax {
  float operator()(float a, float b) const {
    if (a != a) return a;
    if (b != b) return b;
    if (a > b) return a;
    if (b > a) return b;
    return std::signbit(a) ? b : a;
  }
};
struct ReduceMin {
  float operator()(float a, float b) const {
    if (a != a) return a;
    if (b != b) return b;
    if (a < b) return a;
    if (b < a) return b;
    return std::signbit(a) ? a : b;
  }
};

// Eight floats, and the 8 x 8 transpose that turns eight rows' next eight elements into eight
// columns (element j of every row), in the unpack/shuffle/permute steps of an AVX transpose.
using Floats8 = float __attribute__((vector_size(32)));
using UnalignedFloats8 = float __attribute__((vector_size(32), aligned(4)));
using Lanes8 = int32_t __attribute__((vector_size(32)));

inline void transpose8(Floats8 (&v)[8]) {
  const Lanes8 lo = {0, 8, 1, 9, 4, 12, 5, 13}, hi = {2, 10, 3, 11, 6, 14, 7, 15};
  const Lanes8 even = {0, 1, 8, 9, 4, 5, 12, 13}, odd = {2, 3, 10, 11, 6, 7, 14, 15};
  const Lanes8 low = {0, 1, 2, 3, 8, 9, 10, 11}, high = {4, 5, 6, 7, 12, 13, 14, 15};
  Floats8 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = __builtin_shuffle(v[2 * k], v[2 * k + 1], lo);
    t[2 * k + 1] = __builtin_shuffle(v[2 * k], v[2 * k + 1], hi);
  }
  for (int k = 0; k < 2; ++k)
    for (int h = 0; h < 2; ++h) {
      u[4 * k + 2 * h] = __builtin_shuffle(t[4 * k + h], t[4 * k + h + 2], even);
      u[4 * k + 2 * h + 1] = __builtin_shuffle(t[4 * k + h], t[4 * k + h + 2], odd);
    }
  for (int j = 0; j < 4; ++j) {
    v[j] = __builtin_shuffle(u[j], u[j + 4], low);
    v[j + 4] = __builtin_shuffle(u[j], u[j + 4], high);
  }
}

// Folds eight rows at once, lane r of one vector accumulating row r: each block of eight
// elements per row is transposed into eight columns, which are folded in order, so every row
// still folds its elements in ascending order (the same bits) with one vector operation per
// column instead of eight scalar ones.
template <class Op>
CUJAX_TILE_LOOP void reduce_rows(const float* in, const float* init, float* out, int64_t rows,
                                 int64_t len) {
  constexpr int64_t kRows = 8;
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int64_t count = std::min(kRows, rows - r0);
    const float* q[kRows];
    Floats8 acc;
    for (int64_t r = 0; r < kRows; ++r) {
      // A short last group repeats its last row rather than branching in the loop.
      q[r] = in + (r0 + std::min(r, count - 1)) * len;
      acc[r] = *init;
    }
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
      Floats8 v[8];
#pragma GCC unroll 8
      for (int64_t r = 0; r < kRows; ++r)
        v[r] = *reinterpret_cast<const UnalignedFloats8*>(q[r] + i);
      transpose8(v);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) Op::fold(acc, v[j]);
    }
    float tail[kRows];
    for (int64_t r = 0; r < kRows; ++r) tail[r] = acc[r];
    for (; i < len; ++i)
      for (int64_t r = 0; r < kRows; ++r) tail[r] = Op{}(tail[r], q[r][i]);
    for (int64_t r = 0; r < count; ++r) out[r0 + r] = tail[r];
  }
}

// Maximum and minimum rows without the branches of ReduceMax/ReduceMin, so the loop vectorizes:
// as integers, these keys order non-NaN floats as IEEE maximum and minimum do (-0 < +0), and
// that order is total, so the extreme key does not depend on the order of the fold. A row with
// a NaN (or a NaN init) folds in order instead, which keeps the first NaN as the reduce does.
inline int32_t order_key(int32_t bits) {
  return bits ^ ((bits >> 31) & 0x7fffffff);
}

template <class Op, bool kMax>
CUJAX_TILE_LOOP void extreme_rows(const float* in, const float* init, float* out, int64_t rows,
                                  int64_t len) {
  const int32_t init_bits = std::bit_cast<int32_t>(*init);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* q = reinterpret_cast<const int32_t*>(in + r * len);
    int32_t key = order_key(init_bits);
    int32_t nan = (init_bits & 0x7fffffff) > 0x7f800000;
    for (int64_t i = 0; i < len; ++i) {
      const int32_t k = order_key(q[i]);
      key = kMax ? std::max(key, k) : std::min(key, k);
      nan |= (q[i] & 0x7fffffff) > 0x7f800000;
    }
    if (nan) {
      float acc = *init;
      for (int64_t i = 0; i < len; ++i) acc = Op{}(acc, in[r * len + i]);
      out[r] = acc;
    } else {
      out[r] = std::bit_cast<float>(order_key(key));  // the key map is its own inverse
    }
  }
}

}  // namespace cujax::cpu::tiles
