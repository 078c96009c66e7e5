// Keys, the threefry2x32 hash, split, fold_in and random bits, following jax/_src/prng.py
// (JAX 0.11) in both counter layouts of jax_threefry_partitionable.
#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/random.h"
#include "random/internal.h"

namespace cujax::random {

namespace {

std::atomic<bool> g_partitionable{true};
// The flag picks the counter layout that random functions trace, so it keys jit's cache.
const bool g_registered =
    (trace::register_trace_setting("jax_threefry_partitionable",
                                   [] { return std::string(g_partitionable ? "true" : "false"); }),
     true);

Array u32(double v, const Shape& shape = {}) {
  return lax::full(shape, v, DType::U32);
}

Array bcast(const Array& x, const Shape& shape) {
  return x.shape() == shape ? x : lax::broadcast_in_dim(x, shape, {});
}

// (x << d) | (x >> (32 - d)), as jax._src.prng.rotate_left.
Array rotate_left(const Array& x, uint32_t d) {
  return lax::bitwise_or(lax::shift_left(x, u32(d, x.shape())),
                         lax::shift_right_logical(x, u32(32 - d, x.shape())));
}

// The unrolled lowering of threefry2x32_p (jax._src.prng._threefry2x32_lowering with
// use_rolled_loops=False); the CPU lowering rolls the same rounds into a fori_loop.
std::vector<Array> threefry_rounds(const Array& k1, const Array& k2, const Array& x1,
                                   const Array& x2) {
  const Shape& shape = x1.shape();
  static constexpr uint32_t kRotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const Array ks[3] = {k1, k2,
                       lax::bitwise_xor(lax::bitwise_xor(k1, k2), u32(0x1BD11BDA, k1.shape()))};
  Array x[2] = {lax::add(x1, bcast(ks[0], shape)), lax::add(x2, bcast(ks[1], shape))};
  for (int i = 0; i < 5; ++i) {
    for (uint32_t r : kRotations[i % 2]) {
      x[0] = lax::add(x[0], x[1]);
      x[1] = rotate_left(x[1], r);
      x[1] = lax::bitwise_xor(x[0], x[1]);
    }
    x[0] = lax::add(x[0], bcast(ks[(i + 1) % 3], shape));
    x[1] = lax::add(lax::add(x[1], bcast(ks[(i + 2) % 3], shape)), u32(i + 1, shape));
  }
  return {x[0], x[1]};
}

// Eagerly, the hash runs as one compiled program per shape; under a trace it is inlined.
const auto& threefry_jit() {
  static const auto f = [] {
    JitOptions options;
    options.name = "threefry2x32";
    return jit(threefry_rounds, options);
  }();
  return f;
}

Array key_word(const Array& key, int64_t i) {
  return lax::reshape(lax::slice(key, {i}, {i + 1}), {});
}

Array split_original(const Array& key, const Shape& shape) {
  const int64_t num = num_elements(shape);
  Shape out = shape;
  out.push_back(2);
  return lax::reshape(threefry_2x32(key, lax::iota(DType::U32, num * 2)), out);
}

Array split_foldlike(const Array& key, const Shape& shape) {
  auto [c1, c2] = iota_2x32_shape(shape);
  auto [b1, b2] = threefry2x32(key_word(key, 0), key_word(key, 1), c1, c2);
  Shape out = shape;
  out.push_back(1);
  return lax::concatenate({lax::reshape(b1, out), lax::reshape(b2, out)},
                          static_cast<int64_t>(shape.size()));
}

Array random_bits_partitionable(const Array& key, int bit_width, const Shape& shape) {
  auto [c1, c2] = iota_2x32_shape(shape);
  auto [b1, b2] = threefry2x32(key_word(key, 0), key_word(key, 1), c1, c2);
  if (bit_width == 64) {
    const Array hi = lax::convert_element_type(b1, DType::U64);
    const Array lo = lax::convert_element_type(b2, DType::U64);
    return lax::bitwise_or(lax::shift_left(hi, lax::full(shape, 32, DType::U64)), lo);
  }
  const Array x = lax::bitwise_xor(b1, b2);
  if (bit_width == 32) return x;
  return lax::convert_element_type(x, detail::uint_dtype(bit_width));
}

Array random_bits_original(const Array& key, int bit_width, const Shape& shape) {
  const int64_t size = num_elements(shape);
  int64_t max_count = bit_width * size / 32;
  if (bit_width * size % 32) ++max_count;
  if (max_count >= int64_t{0xFFFFFFFF})
    detail::fail("random_bits",
                 "more than 2^32 - 1 words with jax_threefry_partitionable off are not supported");
  Array bits = threefry_2x32(key, lax::iota(DType::U32, max_count));
  const DType dtype = detail::uint_dtype(bit_width);
  if (bit_width == 64) {
    const Array hi = lax::convert_element_type(lax::slice(bits, {0}, {size}), dtype);
    const Array lo = lax::convert_element_type(lax::slice(bits, {size}, {2 * size}), dtype);
    bits = lax::bitwise_or(lax::shift_left(hi, lax::full({size}, 32, dtype)), lo);
  } else if (bit_width == 8 || bit_width == 16) {
    // bits.view(dtype)[:size]
    const int64_t per = 32 / bit_width;
    const Shape grid{per, max_count};
    const Array words = lax::broadcast_in_dim(bits, grid, {1});
    const Array shifts = lax::mul(u32(bit_width, grid), lax::broadcasted_iota(DType::U32, grid, 0));
    const double mask = bit_width == 8 ? 0xFF : 0xFFFF;
    Array parts = lax::bitwise_and(u32(mask, grid), lax::shift_right_logical(words, shifts));
    parts = lax::reshape(lax::transpose(parts, {1, 0}), {max_count * per});
    bits = lax::slice(lax::convert_element_type(parts, dtype), {0}, {size});
  }
  return lax::reshape(bits, shape);
}

}  // namespace

namespace detail {

void fail(const std::string& fn, const std::string& msg) {
  throw Error("random." + fn + ": " + msg);
}

void check_key(const std::string& fn, const Array& key) {
  if (!key.valid()) fail(fn, "uninitialized key");
  if (key.dtype() != DType::U32 || key.shape() != Shape{2})
    fail(fn, "expected a single raw key of type ui32[2], got " + key.aval().str() +
                 " (use key_at or vmap for arrays of keys)");
}

Array broadcast_to(const std::string& fn, const Array& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t r = x.ndim(), n = static_cast<int64_t>(shape.size());
  bool ok = r <= n;
  std::vector<int64_t> dims;
  for (int64_t i = 0; ok && i < r; ++i) {
    const int64_t d = x.shape()[i];
    const int64_t target = shape[n - r + i];
    ok = d == 1 || d == target;
    dims.push_back(n - r + i);
  }
  if (!ok)
    fail(fn, "parameter of shape " + shape_to_string(x.shape()) +
                 " is not broadcast-compatible with shape " + shape_to_string(shape));
  return lax::broadcast_in_dim(x, shape, dims);
}

DType uint_dtype(int bits) {
  switch (bits) {
    case 8:
      return DType::U8;
    case 16:
      return DType::U16;
    case 32:
      return DType::U32;
    case 64:
      return DType::U64;
    default:
      fail("random_bits", "bit width must be 8, 16, 32 or 64, got " + std::to_string(bits));
  }
}

Array nextafter(const Array& x, bool up) {
  const DType ut = uint_dtype(bit_width(x.dtype()));
  const Shape& s = x.shape();
  const Array bits = lax::bitcast_convert_type(x, ut);
  const Array one = lax::full(s, 1, ut);
  const Array zero_f = lax::full(s, 0, x.dtype());
  const Array is_pos = lax::gt(x, zero_f);
  const Array away = lax::add(bits, one);  // away from zero
  const Array toward = lax::sub(bits, one);
  // Up: positive values move away from zero, negative ones toward it; down: the reverse.
  Array r = up ? lax::select(is_pos, away, toward) : lax::select(is_pos, toward, away);
  // From +-0: the smallest denormal of the direction's sign.
  const double sign_bit = static_cast<double>(uint64_t{1} << (bit_width(x.dtype()) - 1));
  const Array tiny = up ? one : lax::bitwise_or(lax::full(s, sign_bit, ut), one);
  r = lax::select(lax::eq(x, zero_f), tiny, r);
  Array out = lax::bitcast_convert_type(r, x.dtype());
  // NaN stays NaN; the infinity in the direction of travel stays.
  const Array target = lax::full(
      s, up ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity(),
      x.dtype());
  const Array keep = lax::bitwise_or(lax::ne(x, x), lax::eq(x, target));
  return lax::select(keep, x, out);
}

}  // namespace detail

void set_threefry_partitionable(bool on) {
  g_partitionable = on;
  trace::trace_setting_changed();
}
bool threefry_partitionable() {
  return g_partitionable;
}
ThreefryPartitionableScope::ThreefryPartitionableScope(bool on) : saved_(g_partitionable) {
  g_partitionable = on;
  trace::trace_setting_changed();
}
ThreefryPartitionableScope::~ThreefryPartitionableScope() {
  g_partitionable = saved_;
  trace::trace_setting_changed();
}

Array key_from_seed(uint32_t hi, uint32_t lo) {
  return array(std::vector<uint32_t>{hi, lo});
}

Array PRNGKey(const Array& seed) {
  if (!seed.valid() || seed.ndim() != 0)
    detail::fail("PRNGKey", "the seed must be a scalar, got " +
                                (seed.valid() ? seed.aval().str() : std::string("nothing")));
  if (!is_integer(seed.dtype()))
    detail::fail("PRNGKey", "the seed must be an integer, got " + seed.aval().str());
  Array hi;
  if (bit_width(seed.dtype()) == 64) {
    hi = lax::convert_element_type(lax::shift_right_logical(seed, lax::full({}, 32, seed.dtype())),
                                   DType::U32);
  } else {
    hi = u32(0);
  }
  const Array lo = lax::convert_element_type(seed, DType::U32);
  return lax::concatenate({lax::reshape(hi, {1}), lax::reshape(lo, {1})}, 0);
}

Array key_data(const Array& keys) {
  if (!keys.valid() || keys.dtype() != DType::U32 || keys.ndim() < 1 || keys.shape().back() != 2)
    detail::fail("key_data", "expected raw keys of type ui32[..., 2]");
  return keys;
}

Array wrap_key_data(const Array& data) {
  return key_data(data);
}

Array key_at(const Array& keys, int64_t i) {
  if (!keys.valid() || keys.dtype() != DType::U32 || keys.ndim() != 2 || keys.shape()[1] != 2)
    detail::fail("key_at", "expected keys of type ui32[n, 2]");
  const int64_t n = keys.shape()[0];
  if (i < 0) i += n;
  if (i < 0 || i >= n)
    detail::fail("key_at",
                 "index " + std::to_string(i) + " out of range for " + std::to_string(n) + " keys");
  return lax::reshape(lax::slice(keys, {i, 0}, {i + 1, 2}), {2});
}

std::pair<Array, Array> threefry2x32(const Array& k1, const Array& k2, const Array& x1,
                                     const Array& x2) {
  for (const Array* a : {&k1, &k2, &x1, &x2})
    if (!a->valid() || a->dtype() != DType::U32)
      detail::fail("threefry2x32", "arguments must be ui32 arrays");
  if (x1.shape() != x2.shape())
    detail::fail("threefry2x32", "counts of different shapes " + shape_to_string(x1.shape()) +
                                     " and " + shape_to_string(x2.shape()));
  for (const Array* k : {&k1, &k2})
    if (k->ndim() != 0 && k->shape() != x1.shape())
      detail::fail("threefry2x32", "key words must be scalars or of the counts' shape");
  if (k1.shape() != k2.shape()) detail::fail("threefry2x32", "key words differ in shape");
  if (x1.size() == 0) return {x1, x2};
  std::vector<Array> out = threefry_jit()(k1, k2, x1, x2);
  return {out[0], out[1]};
}

Array threefry_2x32(const Array& keypair, const Array& count) {
  detail::check_key("threefry_2x32", keypair);
  if (!count.valid() || count.dtype() != DType::U32)
    detail::fail("threefry_2x32", "count must be a ui32 array");
  const int64_t n = count.size();
  if (n == 0) return count;
  Array flat = lax::reshape(count, {n});
  const bool odd = n % 2;
  if (odd) flat = lax::concatenate({flat, u32(0, {1})}, 0);
  const int64_t half = (n + odd) / 2;
  auto [y0, y1] = threefry2x32(key_word(keypair, 0), key_word(keypair, 1),
                               lax::slice(flat, {0}, {half}), lax::slice(flat, {half}, {2 * half}));
  Array out = lax::concatenate({y0, y1}, 0);
  if (odd) out = lax::slice(out, {0}, {n});
  return lax::reshape(out, count.shape());
}

std::pair<Array, Array> iota_2x32_shape(const Shape& shape) {
  if (shape.empty()) return {u32(0), u32(0)};
  // Row-major strides, as jax._src.prng.bcast_iotas_to_reshaped_iota.
  const size_t rank = shape.size();
  std::vector<uint64_t> strides(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) strides[d - 1] = strides[d] * shape[d];
  Array counts;
  for (size_t d = 0; d < rank; ++d) {
    const Array term = lax::mul(lax::full(shape, static_cast<double>(strides[d]), DType::U64),
                                lax::broadcasted_iota(DType::U64, shape, static_cast<int64_t>(d)));
    counts = d == 0 ? term : lax::add(counts, term);
  }
  const Array shifted = lax::shift_right_logical(counts, lax::full(shape, 32, DType::U64));
  return {lax::convert_element_type(shifted, DType::U32),
          lax::convert_element_type(counts, DType::U32)};
}

Keys<2> split(const Array& key) {
  return split<2>(key);
}

Array split(const Array& key, int64_t num) {
  if (num < 0) detail::fail("split", "num must be non-negative, got " + std::to_string(num));
  return split(key, Shape{num});
}

Array split(const Array& key, const Shape& shape) {
  detail::check_key("split", key);
  return threefry_partitionable() ? split_foldlike(key, shape) : split_original(key, shape);
}

Array fold_in(const Array& key, uint32_t data) {
  return fold_in(key, lax::full({}, data, DType::U32));
}

Array fold_in(const Array& key, const Array& data) {
  detail::check_key("fold_in", key);
  if (!data.valid() || data.ndim() != 0 || !is_integer(data.dtype()))
    detail::fail("fold_in", "data must be an integer scalar");
  // threefry_2x32(key, threefry_seed(uint32(data))) = hash of the counts [0, data].
  return threefry_2x32(key, PRNGKey(lax::convert_element_type(data, DType::U32)));
}

Array random_bits(const Array& key, int bit_width, const Shape& shape) {
  detail::check_key("random_bits", key);
  detail::uint_dtype(bit_width);  // validates
  for (int64_t d : shape)
    if (d < 0) detail::fail("random_bits", "negative dimension in " + shape_to_string(shape));
  return threefry_partitionable() ? random_bits_partitionable(key, bit_width, shape)
                                  : random_bits_original(key, bit_width, shape);
}

Array bits(const Array& key, const Shape& shape, DType dtype) {
  if (!is_unsigned_int(dtype))
    detail::fail("bits", "dtype argument to `bits` must be an unsigned int dtype, got " +
                             std::string(numpy_name(dtype)));
  return random_bits(key, bit_width(dtype), shape);
}

}  // namespace cujax::random
