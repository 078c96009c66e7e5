// cujax::random: JAX's PRNG (jax.random with the default threefry2x32 implementation), written
// with cujax::lax so that every function runs eagerly and traces under jit, and gives the same
// numbers as JAX for the same key.
//
//   namespace jr = cujax::random;
//   Array key = jr::PRNGKey(0);                  // u32[2] = [0, 0]
//   auto [key1, subkey] = jr::split(key);        // key, subkey = jax.random.split(key)
//   Array x = jr::normal(subkey, {3, 4});
//   Array keys = jr::split(key, 8);              // u32[8,2]; keys[i] is the i-th key
//
// Keys are JAX's raw keys (what jax.random.PRNGKey returns, and jax.random.key_data of a typed
// jax.random.key): uint32 arrays whose last dimension is 2. `key(seed)` is the same as
// `PRNGKey(seed)`; there is no separate typed-key dtype.
//
// Bit layout. JAX has two layouts of the threefry counters, chosen by the flag
// jax_threefry_partitionable, which defaults to True since JAX 0.5.0 (and so in JAX 0.11):
//   - partitionable (the default here too): random_bits(key, shape) hashes the 64-bit row-major
//     index of each element, split into (hi, lo) 32-bit words, and xors the two output words
//     (32-bit), or concatenates them (64-bit: hi << 32 | lo), or truncates the xor (8/16-bit);
//     split(key, n)[i] = threefry2x32(key, (0, i)), so split(key, n)[i] == fold_in(key, i).
//   - original (set_threefry_partitionable(false)): the counters are iota(n) cut into two
//     halves that are hashed as pairs and the results concatenated (threefry_2x32 below), and
//     split(key, n) is threefry_2x32(key, iota(2n)) reshaped to (n, 2). The StableHLO
//     conformance programs random_* were generated with this layout.
// fold_in(key, d) = threefry_2x32(key, [0, d]) in both layouts. As in JAX, the flag is read when
// a function is traced: a jitted function keeps the layout it was compiled with.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <utility>

#include "cujax/array.h"
#include "cujax/tree.h"

namespace cujax::random {

// jax_threefry_partitionable (default true, as in JAX >= 0.5).
void set_threefry_partitionable(bool on);
bool threefry_partitionable();
// Sets the flag for a scope (as `with jax.threefry_partitionable(False):`).
class ThreefryPartitionableScope {
 public:
  explicit ThreefryPartitionableScope(bool on);
  ~ThreefryPartitionableScope();
  ThreefryPartitionableScope(const ThreefryPartitionableScope&) = delete;
  ThreefryPartitionableScope& operator=(const ThreefryPartitionableScope&) = delete;

 private:
  bool saved_;
};

// Keys. A 32-bit seed s gives [0, uint32(s)]; a 64-bit seed gives [hi, lo] of its bits (JAX's
// threefry_seed: seed >> 32 and seed & 0xFFFFFFFF, as with jax_enable_x64).
Array key_from_seed(uint32_t hi, uint32_t lo);
template <std::integral T>
Array PRNGKey(T seed) {
  if constexpr (sizeof(T) <= 4) {
    return key_from_seed(0, static_cast<uint32_t>(seed));
  } else {
    const auto bits = static_cast<uint64_t>(seed);
    return key_from_seed(static_cast<uint32_t>(bits >> 32), static_cast<uint32_t>(bits));
  }
}
// A scalar integer array seed (may be a tracer): 64-bit dtypes split into hi/lo words.
Array PRNGKey(const Array& seed);
template <std::integral T>
Array key(T seed) {
  return PRNGKey(seed);
}
inline Array key(const Array& seed) {
  return PRNGKey(seed);
}
// Raw keys are their own data (jax.random.key_data / wrap_key_data); checks the shape/dtype.
Array key_data(const Array& keys);
Array wrap_key_data(const Array& data);
// keys[i] of a u32[n,2] array of keys, as a u32[2] key.
Array key_at(const Array& keys, int64_t i);

// The threefry2x32 hash (jax._src.prng.threefry2x32_p): 20 rounds keyed by (k1, k2) on the
// counter words (x1, x2). k1, k2 are u32 scalars or of x1's shape; x1 and x2 agree in shape.
std::pair<Array, Array> threefry2x32(const Array& k1, const Array& k2, const Array& x1,
                                     const Array& x2);
// jax._src.prng.threefry_2x32(keypair, count): hashes a u32 array of counts (cut into two
// halves, padded with a 0 when odd) and returns u32 of count's shape.
Array threefry_2x32(const Array& keypair, const Array& count);
// jax._src.prng.iota_2x32_shape: the row-major index of each element of `shape` as 64 bits,
// split into (hi, lo) u32 arrays.
std::pair<Array, Array> iota_2x32_shape(const Shape& shape);

// N keys split from one (u32[N, 2]) with N known at compile time, so that they destructure as
// JAX's `k1, k2 = split(key)` does:
//   auto [k1, k2] = split(key);
//   auto [a, b, c] = split<3>(key);
// A Keys is the Array of the keys (keys[i] is the i-th; it passes where an Array is taken) and,
// in a tree (a jitted function's result), one Array leaf.
template <size_t N>
class Keys : public Array {
 public:
  Keys() = default;
  explicit Keys(Array keys) : Array(std::move(keys)) {}
  template <size_t I>
  Array get() const {
    static_assert(I < N, "random::Keys<N>::get<I>: I must be less than N");
    return key_at(*this, static_cast<int64_t>(I));
  }
};

// split(key): two keys; split<N>(key): N keys; split(key, num): u32[num, 2] (index it:
// split(key, 3)[i]); split(key, shape): u32[*shape, 2].
Array split(const Array& key, int64_t num);
Array split(const Array& key, const Shape& shape);
Keys<2> split(const Array& key);
template <size_t N>
Keys<N> split(const Array& key) {
  return Keys<N>(split(key, static_cast<int64_t>(N)));
}
Array fold_in(const Array& key, uint32_t data);
Array fold_in(const Array& key, const Array& data);  // an integer scalar

// Uniform random bits of `bit_width` (8, 16, 32, 64) as unsigned integers (jax.random.bits with
// an unsigned dtype; random_bits is JAX's internal name).
Array random_bits(const Array& key, int bit_width, const Shape& shape);
Array bits(const Array& key, const Shape& shape = {}, DType dtype = DType::U32);

// Samplers. Float dtypes: f16, bf16, f32, f64. Array bounds broadcast against `shape`.
Array uniform(const Array& key, const Shape& shape = {}, DType dtype = DType::F32,
              double minval = 0.0, double maxval = 1.0);
Array uniform(const Array& key, const Shape& shape, DType dtype, const Array& minval,
              const Array& maxval);
Array normal(const Array& key, const Shape& shape = {}, DType dtype = DType::F32);
// Values in the open interval (lower, upper); the shape defaults to the bounds' broadcast shape.
Array truncated_normal(const Array& key, double lower, double upper, const Shape& shape = {},
                       DType dtype = DType::F32);
Array truncated_normal(const Array& key, const Array& lower, const Array& upper,
                       std::optional<Shape> shape = std::nullopt, DType dtype = DType::F32);
// uniform(key, shape, dtype of p) < p; the shape defaults to p's.
Array bernoulli(const Array& key, double p = 0.5, const Shape& shape = {});
Array bernoulli(const Array& key, const Array& p, std::optional<Shape> shape = std::nullopt);
// -log(-log(uniform(key, shape, dtype, tiny, 1))) (JAX's mode="low").
Array gumbel(const Array& key, const Shape& shape = {}, DType dtype = DType::F32);
// argmax(gumbel + logits) along `axis`, as i32. `shape` (default: logits' shape without axis)
// must end with that batch shape; leading dimensions draw independent samples.
Array categorical(const Array& key, const Array& logits, int64_t axis = -1,
                  std::optional<Shape> shape = std::nullopt);
// Integers in [minval, maxval) (JAX's algorithm: two draws of nbits, combined modulo the span).
Array randint(const Array& key, const Shape& shape, int64_t minval, int64_t maxval,
              DType dtype = DType::I32);
Array randint(const Array& key, const Shape& shape, const Array& minval, const Array& maxval,
              DType dtype = DType::I32);
// A random permutation of arange(n) (i32), or of x along `axis` (all of x's other dimensions
// move together unless `independent`). JAX's sort-based shuffle.
Array permutation(const Array& key, int64_t n);
Array permutation(const Array& key, const Array& x, int64_t axis = 0, bool independent = false);

}  // namespace cujax::random

template <size_t N>
struct std::tuple_size<cujax::random::Keys<N>> : std::integral_constant<size_t, N> {};
template <size_t I, size_t N>
struct std::tuple_element<I, cujax::random::Keys<N>> {
  using type = cujax::Array;
};

template <size_t N>
struct cujax::TreeTraits<cujax::random::Keys<N>> {
  static void visit(cujax::random::Keys<N>& keys, cujax::TreeVisitor& vis) {
    vis.leaf(static_cast<cujax::Array&>(keys));
  }
};
