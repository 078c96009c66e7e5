// Complex numbers: complex, real, imag, conj, and the discrete Fourier transforms (fft).
#include "lax/util.h"

namespace cujax::lax {

using namespace detail;

namespace {

const char* fft_type_name(FftType t) {
  switch (t) {
    case FftType::FFT:
      return "FFT";
    case FftType::IFFT:
      return "IFFT";
    case FftType::RFFT:
      return "RFFT";
    case FftType::IRFFT:
      break;
  }
  return "IRFFT";
}

}  // namespace

Array complex(const Array& re, const Array& im) {
  check_valid("complex", re);
  check_valid("complex", im);
  if (re.shape() != im.shape() || re.dtype() != im.dtype())
    fail("complex", "operands must have the same shape and dtype, got " + type_str(re) + " and " +
                        type_str(im));
  if (re.dtype() != DType::F32 && re.dtype() != DType::F64)
    fail("complex", "operands must be f32 or f64, got " + type_str(re));
  return trace::bind1(spec("stablehlo.complex", re.shape(), to_complex(re.dtype())), {re, im});
}

Array real(const Array& x) {
  check_dtype("real", x, Kinds::Complex);
  return trace::bind1(spec("stablehlo.real", x.shape(), complex_component(x.dtype())), {x});
}

Array imag(const Array& x) {
  check_dtype("imag", x, Kinds::Complex);
  return trace::bind1(spec("stablehlo.imag", x.shape(), complex_component(x.dtype())), {x});
}

Array conj(const Array& x) {
  check_dtype("conj", x, Kinds::Inexact);
  if (!is_complex(x.dtype())) {
    const Array re = x.dtype() == DType::F64 ? x : convert_element_type(x, DType::F32);
    return complex(re, like(re, 0.0));
  }
  return complex(real(x), neg(imag(x)));
}

Array fft(const Array& x, FftType fft_type, const std::vector<int64_t>& fft_lengths) {
  check_dtype("fft", x, Kinds::Num);
  const std::string type = fft_type_name(fft_type);
  const size_t k = fft_lengths.size();
  if (k < 1 || k > 3 || static_cast<int64_t>(k) > x.ndim())
    fail("fft", type + " needs 1 to 3 fft_lengths, at most the operand's rank, got " +
                    list_str(fft_lengths) + " for " + type_str(x));
  for (int64_t n : fft_lengths)
    if (n < 0) fail("fft", "fft_lengths must not be negative, got " + list_str(fft_lengths));
  // As jax.lax.fft: RFFT takes a real operand (integers become f32), the others a complex one.
  Array a = x;
  if (fft_type == FftType::RFFT) {
    if (is_complex(x.dtype())) fail("fft", "RFFT needs a real operand, got " + type_str(x));
    if (x.dtype() != DType::F32 && x.dtype() != DType::F64) a = convert_element_type(x, DType::F32);
  } else if (!is_complex(x.dtype())) {
    a = convert_element_type(x, to_complex(x.dtype()));
  }
  const size_t lead = static_cast<size_t>(a.ndim()) - k;
  Shape out = a.shape();
  for (size_t i = 0; i < k; ++i) {
    const int64_t want =
        fft_type == FftType::IRFFT && i + 1 == k ? fft_lengths[i] / 2 + 1 : fft_lengths[i];
    if (a.shape()[lead + i] != want)
      fail("fft",
           type + " with fft_lengths " + list_str(fft_lengths) + " needs " +
               (fft_type == FftType::IRFFT ? "the last dimension n/2+1 and the others " : "") +
               "the trailing dimensions equal to fft_lengths, got " + type_str(a));
    out[lead + i] = fft_lengths[i];
  }
  DType out_dtype = a.dtype();
  if (fft_type == FftType::RFFT) {
    out.back() = fft_lengths.back() / 2 + 1;
    out_dtype = to_complex(a.dtype());
  } else if (fft_type == FftType::IRFFT) {
    out_dtype = complex_component(a.dtype());
  }
  return trace::bind1(spec("stablehlo.fft", out, out_dtype,
                           {{"fft_type", ir::Attribute::enum_attr("fft_type", type)},
                            {"fft_length", dense(fft_lengths)}}),
                      {a});
}

}  // namespace cujax::lax
