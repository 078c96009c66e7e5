// Element-wise kernels on complex values, with the formulas of backends/common/complex_math.h
// (which the CPU tests check against the CPU backend's).
#include "backends/common/complex_math.h"
#include "backends/cuda/complex.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"

namespace cujax::cuda {

namespace {

// A complex element as stored (std::complex<R>'s layout: real part, then imaginary part).
template <class R>
struct alignas(2 * sizeof(R)) Stored {
  R re, im;
};

template <class R>
__device__ cplx::Parts load(Stored<R> v) {
  return {static_cast<double>(v.re), static_cast<double>(v.im)};
}
template <class R>
__device__ Stored<R> store(cplx::Parts p) {
  return {static_cast<R>(p.re), static_cast<R>(p.im)};
}

template <class R>
__global__ void complex_kernel(ComplexOp op, const Stored<R>* a, const Stored<R>* b, void* out,
                               int64_t n) {
  auto* c = static_cast<Stored<R>*>(out);
  auto* part = static_cast<R*>(out);
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) {
    const Stored<R> x = a[i];
    switch (op) {
      case ComplexOp::Add:
        c[i] = {x.re + b[i].re, x.im + b[i].im};
        break;
      case ComplexOp::AddScalar:
        c[i] = {x.re + b[0].re, x.im + b[0].im};
        break;
      case ComplexOp::Subtract:
        c[i] = {x.re - b[i].re, x.im - b[i].im};
        break;
      case ComplexOp::Multiply:
        c[i] = store<R>(cplx::multiply(load(x), load(b[i])));
        break;
      case ComplexOp::Divide:
        c[i] = store<R>(cplx::divide(load(x), load(b[i])));
        break;
      case ComplexOp::Negate:
        c[i] = {-x.re, -x.im};
        break;
      case ComplexOp::Real:
        part[i] = x.re;
        break;
      case ComplexOp::Imag:
        part[i] = x.im;
        break;
      case ComplexOp::Abs:
        part[i] = static_cast<R>(cplx::magnitude(load(x)));
        break;
      case ComplexOp::Make:  // a and b hold the parts
        c[i] = {reinterpret_cast<const R*>(a)[i], reinterpret_cast<const R*>(b)[i]};
        break;
      case ComplexOp::Eq:
      case ComplexOp::Ne: {
        const bool equal = x.re == b[i].re && x.im == b[i].im;
        static_cast<bool*>(out)[i] = equal == (op == ComplexOp::Eq);
        break;
      }
    }
  }
}

// FR, TR: the part (or real) types of the operand and result; FC, TC: whether they are complex.
template <class FR, class TR, bool FC, bool TC>
__global__ void complex_convert_kernel(const FR* in, TR* out, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) {
    const FR re = in[FC ? 2 * i : i];
    if constexpr (TC) {
      out[2 * i] = static_cast<TR>(re);
      out[2 * i + 1] = FC ? static_cast<TR>(in[2 * i + 1]) : TR(0);
    } else {
      out[i] = static_cast<TR>(re);
    }
  }
}

template <class FR, class TR, bool FC, bool TC>
void launch_convert_as(const void* in, void* out, int64_t n, cudaStream_t s) {
  complex_convert_kernel<FR, TR, FC, TC>
      <<<grid_for(n), kBlock, 0, s>>>(static_cast<const FR*>(in), static_cast<TR*>(out), n);
  CUJAX_CUDA_CHECK_LAUNCH("complex_convert_kernel");
}

// Calls f(float or double) for the part type of a complex type, or the type itself.
template <class F>
void visit_part(DType t, F&& f) {
  if (t == DType::C64 || t == DType::F32)
    f(float{});
  else
    f(double{});
}

}  // namespace

void launch_complex(ComplexOp op, DType t, const void* a, const void* b, void* out, int64_t n,
                    cudaStream_t s) {
  if (n == 0) return;
  if (t == DType::C64)
    complex_kernel<float><<<grid_for(n), kBlock, 0, s>>>(
        op, static_cast<const Stored<float>*>(a), static_cast<const Stored<float>*>(b), out, n);
  else
    complex_kernel<double><<<grid_for(n), kBlock, 0, s>>>(
        op, static_cast<const Stored<double>*>(a), static_cast<const Stored<double>*>(b), out, n);
  CUJAX_CUDA_CHECK_LAUNCH("complex_kernel");
}

void launch_complex_convert(DType from, DType to, const void* in, void* out, int64_t n,
                            cudaStream_t s) {
  if (n == 0) return;
  const bool fc = is_complex(from), tc = is_complex(to);
  visit_part(from, [&](auto f) {
    visit_part(to, [&](auto t) {
      using FR = decltype(f);
      using TR = decltype(t);
      if (fc && tc) launch_convert_as<FR, TR, true, true>(in, out, n, s);
      if (fc && !tc) launch_convert_as<FR, TR, true, false>(in, out, n, s);
      if (!fc && tc) launch_convert_as<FR, TR, false, true>(in, out, n, s);
    });
  });
}

}  // namespace cujax::cuda
