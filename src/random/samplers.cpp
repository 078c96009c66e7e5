// Samplers, following jax/_src/random.py (JAX 0.11): each turns random_bits into values with the
// same lax ops JAX uses, so the same key gives the same numbers.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cujax/lax.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "random/internal.h"

namespace cujax::random {

namespace {

using detail::broadcast_to;
using detail::fail;

int mantissa_bits(DType t) {
  switch (t) {
    case DType::F16:
      return 10;
    case DType::BF16:
      return 7;
    case DType::F32:
      return 23;
    case DType::F64:
      return 52;
    default:
      return -1;
  }
}

void check_float(const std::string& fn, DType t) {
  if (!is_float(t))
    fail(fn,
         "dtype argument to `" + fn + "` must be a float dtype, got " + std::string(numpy_name(t)));
}

// The bits of 1.0 in a float dtype.
double one_bits(DType t) {
  switch (t) {
    case DType::F16:
      return 0x3C00;
    case DType::BF16:
      return 0x3F80;
    case DType::F32:
      return 0x3F800000;
    default:
      return static_cast<double>(uint64_t{0x3FF0000000000000});
  }
}

// jnp.finfo(dtype).tiny: the smallest normal number.
double tiny(DType t) {
  switch (t) {
    case DType::F16:
      return std::ldexp(1.0, -14);
    case DType::F64:
      return std::ldexp(1.0, -1022);
    default:
      return std::ldexp(1.0, -126);  // f32, bf16
  }
}

// np.nextafter(-1, 0) in dtype: -(1 - 2^-(nmant + 1)).
double next_above_minus_one(DType t) {
  return -(1.0 - std::ldexp(1.0, -(mantissa_bits(t) + 1)));
}

Shape broadcast_shapes(const std::string& fn, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(fn, "shapes " + shape_to_string(a) + " and " + shape_to_string(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t canonical_axis(const std::string& fn, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    fail(fn, "axis " + std::to_string(axis) + " is out of bounds for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

// jax.random._shuffle: sorts by fresh 32-bit keys, enough rounds to make collisions unlikely.
Array shuffle(Array key, Array x, int64_t axis) {
  const double size = static_cast<double>(std::max<int64_t>(1, x.size()));
  const int rounds = static_cast<int>(std::ceil(3 * std::log(size) / std::log(4294967295.0)));
  for (int i = 0; i < rounds; ++i) {
    const Array keys = split(key);
    key = key_at(keys, 0);
    const Array sort_keys = random_bits(key_at(keys, 1), 32, x.shape());
    x = lax::sort_key_val(sort_keys, x, axis).second;
  }
  return x;
}

}  // namespace

Array uniform(const Array& key, const Shape& shape, DType dtype, double minval, double maxval) {
  check_float("uniform", dtype);
  return uniform(key, shape, dtype, lax::full({}, minval, dtype), lax::full({}, maxval, dtype));
}

Array uniform(const Array& key, const Shape& shape, DType dtype, const Array& minval,
              const Array& maxval) {
  check_float("uniform", dtype);
  detail::check_key("uniform", key);
  const Array mn = broadcast_to("uniform", lax::convert_element_type(minval, dtype), shape);
  const Array mx = broadcast_to("uniform", lax::convert_element_type(maxval, dtype), shape);
  const int nbits = bit_width(dtype), nmant = mantissa_bits(dtype);
  const int rng_bits = nmant < 8 ? 8 : nbits;
  const DType uint = detail::uint_dtype(nbits);
  Array bits = random_bits(key, rng_bits, shape);
  if (rng_bits != nbits) bits = lax::convert_element_type(bits, uint);
  // Random mantissa bits under the exponent of 1.0 give a float in [1, 2); shift and scale.
  const Array float_bits =
      lax::bitwise_or(lax::shift_right_logical(bits, lax::full(shape, rng_bits - nmant, uint)),
                      lax::full(shape, one_bits(dtype), uint));
  const Array floats =
      lax::sub(lax::bitcast_convert_type(float_bits, dtype), lax::full(shape, 1.0, dtype));
  return lax::max(mn, lax::add(lax::mul(floats, lax::sub(mx, mn)), mn));
}

Array normal(const Array& key, const Shape& shape, DType dtype) {
  check_float("normal", dtype);
  const Array u = uniform(key, shape, dtype, next_above_minus_one(dtype), 1.0);
  return lax::mul(lax::full(shape, std::sqrt(2.0), dtype), lax::erf_inv(u));
}

Array truncated_normal(const Array& key, double lower, double upper, const Shape& shape,
                       DType dtype) {
  check_float("truncated_normal", dtype);
  return truncated_normal(key, lax::full({}, lower, dtype), lax::full({}, upper, dtype), shape,
                          dtype);
}

Array truncated_normal(const Array& key, const Array& lower, const Array& upper,
                       std::optional<Shape> shape, DType dtype) {
  check_float("truncated_normal", dtype);
  const Shape out_shape =
      shape ? *shape : broadcast_shapes("truncated_normal", lower.shape(), upper.shape());
  const Array lo = lax::convert_element_type(lower, dtype);
  const Array hi = lax::convert_element_type(upper, dtype);
  const double sqrt2 = std::sqrt(2.0);
  const Array a = lax::erf(lax::div(lo, lax::full(lo.shape(), sqrt2, dtype)));
  const Array b = lax::erf(lax::div(hi, lax::full(hi.shape(), sqrt2, dtype)));
  const Array u = uniform(key, out_shape, dtype, a, b);
  const Array out = lax::mul(lax::full(out_shape, sqrt2, dtype), lax::erf_inv(u));
  // Clamp to the open interval (lower, upper): rounding (or u == a) may reach the bounds.
  const Array lo_open =
      broadcast_to("truncated_normal", detail::nextafter(lax::stop_gradient(lo), true), out_shape);
  const Array hi_open =
      broadcast_to("truncated_normal", detail::nextafter(lax::stop_gradient(hi), false), out_shape);
  return lax::min(hi_open, lax::max(lo_open, out));
}

Array bernoulli(const Array& key, double p, const Shape& shape) {
  return bernoulli(key, lax::full({}, p, DType::F32), shape);
}

Array bernoulli(const Array& key, const Array& p, std::optional<Shape> shape) {
  const Array pf = is_float(p.dtype()) ? p : lax::convert_element_type(p, DType::F32);
  const Shape out_shape = shape ? *shape : pf.shape();
  const Array u = uniform(key, out_shape, pf.dtype());
  return lax::lt(u, broadcast_to("bernoulli", pf, out_shape));
}

Array gumbel(const Array& key, const Shape& shape, DType dtype) {
  check_float("gumbel", dtype);
  const Array u = uniform(key, shape, dtype, tiny(dtype), 1.0);
  return lax::neg(lax::log(lax::neg(lax::log(u))));
}

Array categorical(const Array& key, const Array& logits, int64_t axis, std::optional<Shape> shape) {
  if (!logits.valid() || !is_float(logits.dtype()))
    fail("categorical", "logits must be a floating-point array");
  const int64_t a = canonical_axis("categorical", axis, logits.ndim());
  Shape batch = logits.shape();
  batch.erase(batch.begin() + a);
  const Shape s = shape ? *shape : batch;
  const bool ends_with_batch =
      s.size() >= batch.size() && std::equal(batch.begin(), batch.end(), s.end() - batch.size());
  if (!ends_with_batch)
    fail("categorical", "shape " + shape_to_string(s) +
                            " is not compatible with the batch shape of the logits " +
                            shape_to_string(batch));
  const int64_t prefix = static_cast<int64_t>(s.size() - batch.size());
  Shape full(s.begin(), s.begin() + prefix);
  Shape logits_shape(s.begin() + prefix, s.end());
  logits_shape.insert(logits_shape.begin() + a, logits.shape()[a]);
  full.insert(full.end(), logits_shape.begin(), logits_shape.end());
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < logits.ndim(); ++i) dims.push_back(prefix + i);
  const Array g = gumbel(key, full, logits.dtype());
  return lax::argmax(lax::add(g, lax::broadcast_in_dim(logits, full, dims)), prefix + a,
                     DType::I32);
}

Array randint(const Array& key, const Shape& shape, int64_t minval, int64_t maxval, DType dtype) {
  return randint(key, shape, array(HostTensor::from_vector<int64_t>({minval}, {})),
                 array(HostTensor::from_vector<int64_t>({maxval}, {})), dtype);
}

Array randint(const Array& key, const Shape& shape, const Array& minval, const Array& maxval,
              DType dtype) {
  if (!is_integer(dtype))
    fail("randint", "randint only accepts integer dtypes, got " + std::string(numpy_name(dtype)));
  if (!is_integer(minval.dtype()) || !is_integer(maxval.dtype()))
    fail("randint", "minval and maxval must be integers");
  const int nbits = bit_width(dtype);
  const DType udt = detail::uint_dtype(nbits);
  // _convert_and_clip_integer: clip to the dtype's range, then convert; remember where maxval
  // was above the dtype's maximum (randint(key, shape, 0, 256, uint8) covers all of uint8).
  Array mn, mx, out_of_range;
  if (nbits == 64) {
    mn = lax::convert_element_type(minval, dtype);
    mx = lax::convert_element_type(maxval, dtype);
    out_of_range = lax::full(shape, 0, DType::Bool);
  } else {
    const double dmin = is_signed_int(dtype) ? -std::ldexp(1.0, nbits - 1) : 0.0;
    const double dmax =
        is_signed_int(dtype) ? std::ldexp(1.0, nbits - 1) - 1 : std::ldexp(1.0, nbits) - 1;
    auto clip = [&](const Array& v) {
      const Array w = lax::convert_element_type(v, DType::I64);
      return lax::convert_element_type(
          lax::clamp(lax::full({}, dmin, DType::I64), w, lax::full({}, dmax, DType::I64)), dtype);
    };
    const Array mx64 = lax::convert_element_type(maxval, DType::I64);
    out_of_range =
        broadcast_to("randint", lax::gt(mx64, lax::full(mx64.shape(), dmax, DType::I64)), shape);
    mn = clip(minval);
    mx = clip(maxval);
  }
  mn = broadcast_to("randint", mn, shape);
  mx = broadcast_to("randint", mx, shape);

  // Twice the bits the dtype needs, to reduce the bias of the modulo.
  const Array keys = split(key);
  const Array higher = random_bits(key_at(keys, 0), nbits, shape);
  const Array lower = random_bits(key_at(keys, 1), nbits, shape);

  Array span = lax::convert_element_type(lax::sub(mx, mn), udt);
  // span = 1 when maxval <= minval, so that minval is returned.
  span = lax::select(lax::le(mx, mn), lax::full(shape, 1, udt), span);
  // One more when maxval was out of range (wraps to 0 at the full range: remainders vanish).
  span = lax::select(lax::bitwise_and(out_of_range, lax::gt(mx, mn)),
                     lax::add(span, lax::full(shape, 1, udt)), span);
  // multiplier = 2^nbits % span, as ((2^(nbits/2) % span)^2) % span to avoid overflow.
  Array multiplier = lax::rem(lax::full(shape, std::ldexp(1.0, nbits / 2), udt), span);
  multiplier = lax::rem(lax::mul(multiplier, multiplier), span);
  Array offset = lax::add(lax::mul(lax::rem(higher, span), multiplier), lax::rem(lower, span));
  offset = lax::rem(offset, span);
  return lax::add(mn, lax::convert_element_type(offset, dtype));
}

Array permutation(const Array& key, int64_t n) {
  detail::check_key("permutation", key);
  if (n < 0) fail("permutation", "n must be non-negative");
  return shuffle(key, lax::iota(DType::I32, n), 0);
}

Array permutation(const Array& key, const Array& x, int64_t axis, bool independent) {
  detail::check_key("permutation", key);
  if (!x.valid() || x.ndim() == 0)
    fail("permutation", "x must be an integer or at least 1-dimensional");
  const int64_t a = canonical_axis("permutation", axis, x.ndim());
  if (independent || x.ndim() == 1) return shuffle(key, x, a);
  const Array ind = shuffle(key, lax::iota(DType::I32, x.shape()[a]), 0);
  return numpy::take(x, ind, a);
}

}  // namespace cujax::random
