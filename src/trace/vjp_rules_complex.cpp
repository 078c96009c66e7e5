// VJP rules of real, imag, complex and fft, following the transposes in jax/_src/lax/lax.py and
// jax/_src/lax/fft.py. JAX's convention: linear maps are transposed without conjugation (the
// pairing of cotangent and tangent is Re(sum(ct * t))), so that for a real-valued f of a
// complex z, grad(f)(z) = df/dx - i df/dy, and vjp(f)(1) of a holomorphic f is f'(z).
#include <string>

#include "trace/vjp_rules.h"

namespace cujax::trace::vjp {

using namespace cujax::lax;

namespace {

FftType fft_type_of(const ir::Operation& op) {
  const std::string t(op.enum_attr("fft_type"));
  if (t == "FFT") return FftType::FFT;
  if (t == "IFFT") return FftType::IFFT;
  if (t == "RFFT") return FftType::RFFT;
  if (t == "IRFFT") return FftType::IRFFT;
  throw Error("grad of stablehlo.fft: unknown fft_type " + t);
}

// The transpose of RFFT: RFFT is a real-to-complex conversion, a full FFT and a slice of the
// last dimension to n/2+1 entries, so its transpose pads the cotangent back to n with zeros,
// runs the FFT (the DFT matrix is symmetric) and keeps the real part.
Array rfft_transpose(const Array& g, const std::vector<int64_t>& lengths) {
  std::vector<PadConfig> pads(static_cast<size_t>(g.ndim()));
  pads.back().high = lengths.back() - g.shape().back();
  const Array padded = pad(g, full({}, 0.0, g.dtype()), pads);
  return real(fft(padded, FftType::FFT, lengths));
}

// The transpose of IRFFT: the RFFT of the cotangent divided by the number of points, with the
// entries that stand for two conjugate ones in the full spectrum (all but the first and, for
// an even length, the last) doubled, then conjugated (JAX's convention).
Array irfft_transpose(const Array& g, const std::vector<int64_t>& lengths) {
  const Array x = fft(g, FftType::RFFT, lengths);
  const int64_t n = x.shape().back(), last = lengths.back();
  double points = 1;
  for (int64_t l : lengths) points *= static_cast<double>(l);
  const Shape mask_shape{n};
  std::vector<Array> parts{full({1}, 1.0, x.dtype())};
  const int64_t doubled = n - 2 + last % 2;
  if (doubled > 0) parts.push_back(full({doubled}, 2.0, x.dtype()));
  if (last % 2 == 0 && n > 1) parts.push_back(full({1}, 1.0, x.dtype()));
  const Array mask = mul(concatenate(parts, 0), full(mask_shape, 1.0 / points, x.dtype()));
  const Array scaled = mul(x, broadcast_in_dim(mask, x.shape(), {x.ndim() - 1}));
  return conj(scaled);
}

}  // namespace

void register_complex_rules(Rules& r) {
  // real: t -> complex(t, 0); imag: t -> complex(0, -t); complex: t -> (real(t), -imag(t)).
  r["stablehlo.real"] = [](const VjpArgs& a) -> Cts {
    const Array& g = a.cts[0];
    return {complex(g, like(g, 0.0))};
  };
  r["stablehlo.imag"] = [](const VjpArgs& a) -> Cts {
    const Array& g = a.cts[0];
    return {complex(like(g, 0.0), neg(g))};
  };
  r["stablehlo.complex"] = [](const VjpArgs& a) -> Cts {
    const Array& g = a.cts[0];
    Cts out(2);
    if (a.needed[0]) out[0] = real(g);
    if (a.needed[1]) out[1] = neg(imag(g));
    return out;
  };
  r["stablehlo.fft"] = [](const VjpArgs& a) -> Cts {
    const FftType type = fft_type_of(a.op);
    const std::vector<int64_t> lengths = a.op.ints("fft_length");
    const Array& g = a.cts[0];
    switch (type) {
      case FftType::FFT:
      case FftType::IFFT:
        return {fft(g, type, lengths)};  // the (inverse) DFT matrix is symmetric
      case FftType::RFFT:
        return {rfft_transpose(g, lengths)};
      case FftType::IRFFT:
        break;
    }
    return {irfft_transpose(g, lengths)};
  };
}

}  // namespace cujax::trace::vjp
