// numpy.fft: jnp.fft's transforms over lax::fft, frequencies and shifts.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "numpy/internal.h"

namespace cujax::numpy::fft {

using detail::fail;
using lax::FftType;

namespace {

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> v(static_cast<size_t>(std::max<int64_t>(end - begin, 0)));
  std::iota(v.begin(), v.end(), begin);
  return v;
}

// jnp.fft's _fft_core_nd: lax::fft takes at most 3 dimensions, so more are transformed in
// groups, the innermost first (the inverse transforms in the opposite order).
Array transform_nd(const Array& x, FftType type, const std::vector<int64_t>& s) {
  const int64_t k = static_cast<int64_t>(s.size());
  if (k <= 3) return lax::fft(x, type, s);
  const int64_t n = k == 4 ? 2 : 3;
  const int64_t rank = x.ndim();
  const std::vector<int64_t> src = range(rank - k, rank - n), dst = range(rank - k + n, rank);
  const std::vector<int64_t> inner(s.end() - n, s.end()), outer(s.begin(), s.end() - n);
  if (type == FftType::FFT || type == FftType::RFFT) {
    Array a = moveaxis(lax::fft(x, type, inner), src, dst);
    return moveaxis(transform_nd(a, FftType::FFT, outer), dst, src);
  }
  Array a = moveaxis(transform_nd(moveaxis(x, src, dst), FftType::IFFT, outer), dst, src);
  return lax::fft(a, type, inner);
}

// jnp.fft's _fft_core: promotes, moves the axes innermost, crops or zero-pads to `s`,
// transforms, scales for `norm` and moves the axes back.
Array fft_core(const std::string& fn, FftType type, const ArrayLike& a, const Sizes& s_in,
               const Sizes& axes_in, const std::string& norm) {
  if (norm != "backward" && norm != "ortho" && norm != "forward")
    fail("fft." + fn, "invalid norm value \"" + norm +
                          "\"; it should be \"backward\", \"ortho\" or \"forward\"");
  Array arr = a.to_array();
  const DType t = arr.dtype();
  if (type == FftType::RFFT) {
    if (is_complex(t))
      fail("fft." + fn,
           "needs a real input, got " + detail::dtype_str(t) + shape_to_string(arr.shape()));
    arr = detail::convert(arr, t == DType::F64 ? DType::F64 : DType::F32);
  } else if (!is_complex(t)) {
    arr = detail::convert(arr, to_complex(t));
  }
  if (s_in) {
    for (int64_t v : *s_in)
      if (v < 0) fail("fft." + fn, "sizes must not be negative, got " + shape_to_string(*s_in));
    if (axes_in && axes_in->size() != s_in->size())
      fail("fft." + fn, "s " + shape_to_string(*s_in) + " and axes " + shape_to_string(*axes_in) +
                            " have different lengths");
  }
  const int64_t rank = arr.ndim();
  std::vector<int64_t> axes;
  if (axes_in) {
    for (int64_t ax : *axes_in) axes.push_back(detail::normalize_axis("fft." + fn, ax, rank));
  } else {
    const int64_t k = s_in ? static_cast<int64_t>(s_in->size()) : rank;
    if (k > rank)
      fail("fft." + fn, "s " + shape_to_string(*s_in) + " has more entries than the input " +
                            shape_to_string(arr.shape()) + " has dimensions");
    axes = range(rank - k, rank);
  }
  {
    std::vector<int64_t> sorted = axes;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      fail("fft." + fn, "repeated axes are not supported, got " + shape_to_string(axes));
  }
  const int64_t k = static_cast<int64_t>(axes.size());
  if (k == 0) fail("fft." + fn, "needs at least one axis to transform");
  const std::vector<int64_t> inner = range(rank - k, rank);
  if (axes_in) arr = moveaxis(arr, axes, inner);

  std::vector<int64_t> s;
  if (s_in) {
    s = *s_in;
    Shape in_s = arr.shape();
    for (int64_t i = 0; i < k; ++i) in_s[rank - k + i] = s[i];
    if (type == FftType::IRFFT) in_s.back() = in_s.back() / 2 + 1;
    // Crop, then zero-pad, to in_s.
    Shape limit = arr.shape();
    std::vector<lax::PadConfig> pads(static_cast<size_t>(rank));
    bool crop = false, grow = false;
    for (int64_t d = 0; d < rank; ++d) {
      if (in_s[d] < limit[d]) {
        limit[d] = in_s[d];
        crop = true;
      }
      pads[d].high = in_s[d] - limit[d];
      grow = grow || pads[d].high > 0;
    }
    if (crop) arr = lax::slice(arr, std::vector<int64_t>(static_cast<size_t>(rank), 0), limit);
    if (grow) arr = lax::pad(arr, lax::full({}, 0, arr.dtype()), pads);
  } else {
    for (int64_t i = 0; i < k; ++i) s.push_back(arr.shape()[rank - k + i]);
    if (type == FftType::IRFFT) s.back() = std::max<int64_t>(0, 2 * (s.back() - 1));
  }

  Array out = transform_nd(arr, type, s);
  if (norm != "backward") {
    double points = 1;
    for (int64_t v : s) points *= static_cast<double>(v);
    const bool inverse = fn[0] == 'i';
    const double scale = norm == "ortho" ? (inverse ? std::sqrt(points) : 1 / std::sqrt(points))
                                         : (inverse ? points : 1 / points);
    out = lax::mul(out, detail::full_as(out, scale));
  }
  if (axes_in) out = moveaxis(out, inner, axes);
  return out;
}

Sizes one(std::optional<int64_t> n) {
  return n ? Sizes(std::vector<int64_t>{*n}) : std::nullopt;
}

Array shift(const Array& x, const Axes& axes, bool inverse) {
  Array r = x;
  for (int64_t ax :
       detail::normalize_axes(inverse ? "fft.ifftshift" : "fft.fftshift", axes, x.ndim())) {
    const int64_t n = x.shape()[ax];
    r = roll(r, inverse ? -(n / 2) : n / 2, ax);
  }
  return r;
}

Array frequencies(const std::vector<double>& k, double scale, DType dtype) {
  std::vector<double> v;
  for (double x : k) v.push_back(x * scale);
  return numpy::array(v, std::nullopt, dtype);
}

}  // namespace

Array fft(const ArrayLike& a, std::optional<int64_t> n, int64_t axis, const std::string& norm) {
  return fft_core("fft", FftType::FFT, a, one(n), std::vector<int64_t>{axis}, norm);
}
Array ifft(const ArrayLike& a, std::optional<int64_t> n, int64_t axis, const std::string& norm) {
  return fft_core("ifft", FftType::IFFT, a, one(n), std::vector<int64_t>{axis}, norm);
}
Array rfft(const ArrayLike& a, std::optional<int64_t> n, int64_t axis, const std::string& norm) {
  return fft_core("rfft", FftType::RFFT, a, one(n), std::vector<int64_t>{axis}, norm);
}
Array irfft(const ArrayLike& a, std::optional<int64_t> n, int64_t axis, const std::string& norm) {
  return fft_core("irfft", FftType::IRFFT, a, one(n), std::vector<int64_t>{axis}, norm);
}

Array fftn(const ArrayLike& a, const Sizes& s, const Sizes& axes, const std::string& norm) {
  return fft_core("fftn", FftType::FFT, a, s, axes, norm);
}
Array ifftn(const ArrayLike& a, const Sizes& s, const Sizes& axes, const std::string& norm) {
  return fft_core("ifftn", FftType::IFFT, a, s, axes, norm);
}
Array rfftn(const ArrayLike& a, const Sizes& s, const Sizes& axes, const std::string& norm) {
  return fft_core("rfftn", FftType::RFFT, a, s, axes, norm);
}
Array irfftn(const ArrayLike& a, const Sizes& s, const Sizes& axes, const std::string& norm) {
  return fft_core("irfftn", FftType::IRFFT, a, s, axes, norm);
}

Array fft2(const ArrayLike& a, const Sizes& s, const std::vector<int64_t>& axes,
           const std::string& norm) {
  return fft_core("fft2", FftType::FFT, a, s, axes, norm);
}
Array ifft2(const ArrayLike& a, const Sizes& s, const std::vector<int64_t>& axes,
            const std::string& norm) {
  return fft_core("ifft2", FftType::IFFT, a, s, axes, norm);
}
Array rfft2(const ArrayLike& a, const Sizes& s, const std::vector<int64_t>& axes,
            const std::string& norm) {
  return fft_core("rfft2", FftType::RFFT, a, s, axes, norm);
}
Array irfft2(const ArrayLike& a, const Sizes& s, const std::vector<int64_t>& axes,
             const std::string& norm) {
  return fft_core("irfft2", FftType::IRFFT, a, s, axes, norm);
}

Array fftfreq(int64_t n, double d, DType dtype) {
  if (n <= 0) fail("fft.fftfreq", "n must be positive, got " + std::to_string(n));
  std::vector<double> k;
  for (int64_t i = 0; i < n; ++i) k.push_back(static_cast<double>(i < (n + 1) / 2 ? i : i - n));
  return frequencies(k, 1 / (d * static_cast<double>(n)), dtype);
}

Array rfftfreq(int64_t n, double d, DType dtype) {
  if (n <= 0) fail("fft.rfftfreq", "n must be positive, got " + std::to_string(n));
  std::vector<double> k;
  for (int64_t i = 0; i <= n / 2; ++i) k.push_back(static_cast<double>(i));
  return frequencies(k, 1 / (d * static_cast<double>(n)), dtype);
}

Array fftshift(const Array& x, const Axes& axes) {
  return shift(x, axes, false);
}
Array ifftshift(const Array& x, const Axes& axes) {
  return shift(x, axes, true);
}

}  // namespace cujax::numpy::fft
