// Element-wise kernels on complex values, with the formulas of backends/common/complex_math.h
// (which the CPU tests check against the CPU backend's).
#include <cuda/std/complex>

#include "backends/common/complex_math.h"
#include "backends/common/elementwise.h"
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

template <class R>
__global__ void complex_function_kernel(ComplexFunction f, const Stored<R>* a, const Stored<R>* b,
                                        Stored<R>* out, int64_t n) {
  using Z = ::cuda::std::complex<double>;
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) {
    const Stored<R> x = a[i];
    if (f == ComplexFunction::Maximum || f == ComplexFunction::Minimum) {
      out[i] = cplx::picks_first(load(x), load(b[i]), f == ComplexFunction::Maximum) ? x : b[i];
      continue;
    }
    const Z z(x.re, x.im);
    Z r;
    switch (f) {
      case ComplexFunction::Exp:
        r = ::cuda::std::exp(z);
        break;
      case ComplexFunction::Expm1: {
        const cplx::Parts p = cplx::expm1(load(x));
        r = Z(p.re, p.im);
        break;
      }
      case ComplexFunction::Log:
        r = ::cuda::std::log(z);
        break;
      case ComplexFunction::Log1p: {
        const cplx::Parts p = cplx::log1p(load(x));
        r = Z(p.re, p.im);
        break;
      }
      case ComplexFunction::Sqrt:
        r = ::cuda::std::sqrt(z);
        break;
      case ComplexFunction::Rsqrt:
        r = Z(1) / ::cuda::std::sqrt(z);
        break;
      case ComplexFunction::Cbrt:  // the principal cube root
        r = ::cuda::std::polar(::cbrt(::cuda::std::abs(z)), ::cuda::std::arg(z) / 3);
        break;
      case ComplexFunction::Sign: {
        const cplx::Parts p = cplx::sign(load(x));
        r = Z(p.re, p.im);
        break;
      }
      case ComplexFunction::Sin:
        r = ::cuda::std::sin(z);
        break;
      case ComplexFunction::Cos:
        r = ::cuda::std::cos(z);
        break;
      case ComplexFunction::Tan:
        r = ::cuda::std::tan(z);
        break;
      case ComplexFunction::Tanh:
        r = ::cuda::std::tanh(z);
        break;
      case ComplexFunction::Logistic:
        r = Z(1) / (Z(1) + ::cuda::std::exp(-z));
        break;
      case ComplexFunction::Sinh:
        r = ::cuda::std::sinh(z);
        break;
      case ComplexFunction::Cosh:
        r = ::cuda::std::cosh(z);
        break;
      case ComplexFunction::Asin:
        r = ::cuda::std::asin(z);
        break;
      case ComplexFunction::Acos:
        r = ::cuda::std::acos(z);
        break;
      case ComplexFunction::Atan:
        r = ::cuda::std::atan(z);
        break;
      case ComplexFunction::Asinh:
        r = ::cuda::std::asinh(z);
        break;
      case ComplexFunction::Acosh:
        r = ::cuda::std::acosh(z);
        break;
      case ComplexFunction::Atanh:
        r = ::cuda::std::atanh(z);
        break;
      case ComplexFunction::Power:
        r = ::cuda::std::pow(z, Z(b[i].re, b[i].im));
        break;
      default:
        break;
    }
    out[i] = {static_cast<R>(r.real()), static_cast<R>(r.imag())};
  }
}

// Between the two complex types: part by part.
template <class FR, class TR>
__global__ void complex_to_complex_kernel(const FR* in, TR* out, int64_t n) {
  for (int64_t i = thread_begin(); i < 2 * n; i += thread_stride()) out[i] = static_cast<TR>(in[i]);
}

// A real value of any type becomes the real part, converted as the real converts do.
template <class F, class R>
__global__ void real_to_complex_kernel(const F* in, R* out, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) {
    out[2 * i] = ew::convert<R>(in[i]);
    out[2 * i + 1] = R(0);
  }
}

// The real part converts; the imaginary part is dropped.
template <class R, class T>
__global__ void complex_to_real_kernel(const R* in, T* out, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) out[i] = ew::convert<T>(in[2 * i]);
}

// c[b, i, j] = sum over p of a[b, i, p] * b[b, p, j], in the part type R, p in order.
template <class R>
__global__ void complex_dot_kernel(const Stored<R>* a, const Stored<R>* b, Stored<R>* c,
                                   int64_t batch, int64_t m, int64_t n, int64_t k) {
  const int64_t total = batch * m * n;
  for (int64_t e = thread_begin(); e < total; e += thread_stride()) {
    const int64_t j = e % n, i = (e / n) % m, bb = e / (m * n);
    const Stored<R>* ar = a + (bb * m + i) * k;
    const Stored<R>* bc = b + bb * k * n + j;
    R re = 0, im = 0;
    for (int64_t p = 0; p < k; ++p) {
      const Stored<R> x = ar[p], y = bc[p * n];
      cplx::accumulate_product(re, im, x.re, x.im, y.re, y.im);
    }
    c[e] = {re, im};
  }
}

// Calls f(float or double) for the part type of a complex type.
template <class F>
void visit_part(DType t, F&& f) {
  if (t == DType::C64)
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

void launch_complex_function(ComplexFunction f, DType t, const void* a, const void* b, void* out,
                             int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_part(t, [&](auto part) {
    using R = decltype(part);
    complex_function_kernel<R><<<grid_for(n), kBlock, 0, s>>>(f, static_cast<const Stored<R>*>(a),
                                                              static_cast<const Stored<R>*>(b),
                                                              static_cast<Stored<R>*>(out), n);
  });
  CUJAX_CUDA_CHECK_LAUNCH("complex_function_kernel");
}

void launch_complex_convert(DType from, DType to, const void* in, void* out, int64_t n,
                            cudaStream_t s) {
  if (n == 0) return;
  if (is_complex(from) && is_complex(to)) {
    visit_part(from, [&](auto f) {
      visit_part(to, [&](auto t) {
        using FR = decltype(f);
        using TR = decltype(t);
        complex_to_complex_kernel<FR, TR><<<grid_for(2 * n), kBlock, 0, s>>>(
            static_cast<const FR*>(in), static_cast<TR*>(out), n);
      });
    });
  } else if (is_complex(to)) {
    visit_dtype(from, [&](auto ft) {
      using F = typename decltype(ft)::type;
      visit_part(to, [&](auto t) {
        using R = decltype(t);
        real_to_complex_kernel<F, R>
            <<<grid_for(n), kBlock, 0, s>>>(static_cast<const F*>(in), static_cast<R*>(out), n);
      });
    });
  } else {
    visit_part(from, [&](auto f) {
      using R = decltype(f);
      visit_dtype(to, [&](auto tt) {
        using T = typename decltype(tt)::type;
        complex_to_real_kernel<R, T>
            <<<grid_for(n), kBlock, 0, s>>>(static_cast<const R*>(in), static_cast<T*>(out), n);
      });
    });
  }
  CUJAX_CUDA_CHECK_LAUNCH("complex convert kernel");
}

void launch_complex_dot(DType t, const void* a, const void* b, void* c, int64_t batch, int64_t m,
                        int64_t n, int64_t k, cudaStream_t s) {
  const int64_t total = batch * m * n;
  if (total == 0) return;
  visit_part(t, [&](auto part) {
    using R = decltype(part);
    complex_dot_kernel<R><<<grid_for(total), kBlock, 0, s>>>(
        static_cast<const Stored<R>*>(a), static_cast<const Stored<R>*>(b),
        static_cast<Stored<R>*>(c), batch, m, n, k);
  });
  CUJAX_CUDA_CHECK_LAUNCH("complex_dot_kernel");
}

}  // namespace cujax::cuda
