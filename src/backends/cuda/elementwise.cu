// Element-wise kernels: one grid-stride loop per (functor, element type), computing exactly what
// the CPU backend computes, because both use the functors of backends/common/elementwise.h.
#include <string>

#include "backends/common/elementwise.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace cujax::cuda {

namespace {

template <class F, class T>
__global__ void unary_kernel(F f, const T* in, T* out, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) out[i] = ew::apply(f, in[i]);
}

template <class F, class T>
__global__ void binary_kernel(F f, const T* a, const T* b, T* out, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) out[i] = ew::apply(f, a[i], b[i]);
}

template <ew::CompareDirection D, class T>
__global__ void compare_kernel(bool total_order, const T* a, const T* b, bool* out, int64_t n) {
  using C = ew::compute_t<T, false>;
  const ew::Compare<D> cmp;
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) {
    if constexpr (ew::is_float_v<T>) {
      if (total_order) {
        out[i] = cmp(ew::total_order_key(a[i]), ew::total_order_key(b[i]));
        continue;
      }
    }
    out[i] = cmp(ew::to_compute<C>(a[i]), ew::to_compute<C>(b[i]));
  }
}

template <class U>
__global__ void select_kernel(const bool* pred, bool pred_scalar, const U* t, const U* f, U* out,
                              int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride())
    out[i] = pred[pred_scalar ? 0 : i] ? t[i] : f[i];
}

// Calls f(Functor{}) for a unary op.
template <class Fn>
void visit_unary(UnaryOp op, Fn&& f) {
  switch (op) {
    case UnaryOp::Abs:
      return f(ew::Abs{});
    case UnaryOp::Negate:
      return f(ew::Negate{});
    case UnaryOp::Sign:
      return f(ew::Sign{});
    case UnaryOp::Not:
      return f(ew::Not{});
    case UnaryOp::Popcnt:
      return f(ew::Popcnt{});
    case UnaryOp::Clz:
      return f(ew::CountLeadingZeros{});
    case UnaryOp::Ceil:
      return f(ew::Ceil{});
    case UnaryOp::Floor:
      return f(ew::Floor{});
    case UnaryOp::RoundAfz:
      return f(ew::RoundNearestAfz{});
    case UnaryOp::RoundEven:
      return f(ew::RoundNearestEven{});
    case UnaryOp::Sqrt:
      return f(ew::Sqrt{});
    case UnaryOp::Rsqrt:
      return f(ew::Rsqrt{});
    case UnaryOp::Cbrt:
      return f(ew::Cbrt{});
    case UnaryOp::Exp:
      return f(ew::Exp{});
    case UnaryOp::Expm1:
      return f(ew::Expm1{});
    case UnaryOp::Log:
      return f(ew::Log{});
    case UnaryOp::Log1p:
      return f(ew::Log1p{});
    case UnaryOp::Logistic:
      return f(ew::Logistic{});
    case UnaryOp::Sin:
      return f(ew::Sin{});
    case UnaryOp::Cos:
      return f(ew::Cos{});
    case UnaryOp::Tan:
      return f(ew::Tan{});
    case UnaryOp::Tanh:
      return f(ew::Tanh{});
  }
}

template <class Fn>
void visit_binary(BinaryOp op, Fn&& f) {
  switch (op) {
    case BinaryOp::Add:
      return f(ew::Add{});
    case BinaryOp::Subtract:
      return f(ew::Subtract{});
    case BinaryOp::Multiply:
      return f(ew::Multiply{});
    case BinaryOp::Divide:
      return f(ew::Divide{});
    case BinaryOp::Remainder:
      return f(ew::Remainder{});
    case BinaryOp::Maximum:
      return f(ew::Maximum{});
    case BinaryOp::Minimum:
      return f(ew::Minimum{});
    case BinaryOp::Power:
      return f(ew::Power{});
    case BinaryOp::Atan2:
      return f(ew::Atan2{});
    case BinaryOp::And:
      return f(ew::And{});
    case BinaryOp::Or:
      return f(ew::Or{});
    case BinaryOp::Xor:
      return f(ew::Xor{});
    case BinaryOp::ShiftLeft:
      return f(ew::ShiftLeft{});
    case BinaryOp::ShiftRightLogical:
      return f(ew::ShiftRightLogical{});
    case BinaryOp::ShiftRightArithmetic:
      return f(ew::ShiftRightArithmetic{});
  }
}

}  // namespace

bool supports_unary(UnaryOp op, DType t) {
  bool ok = false;
  visit_unary(op, [&](auto f) {
    visit_dtype(t,
                [&](auto tag) { ok = ew::supports<decltype(f), typename decltype(tag)::type>(); });
  });
  return ok;
}

bool supports_binary(BinaryOp op, DType t) {
  bool ok = false;
  visit_binary(op, [&](auto f) {
    visit_dtype(t,
                [&](auto tag) { ok = ew::supports<decltype(f), typename decltype(tag)::type>(); });
  });
  return ok;
}

void launch_unary(UnaryOp op, DType t, const void* in, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_unary(op, [&](auto f) {
    visit_dtype(t, [&](auto tag) {
      using F = decltype(f);
      using T = typename decltype(tag)::type;
      if constexpr (ew::supports<F, T>()) {
        unary_kernel<<<grid_for(n), kBlock, 0, s>>>(f, static_cast<const T*>(in),
                                                    static_cast<T*>(out), n);
        CUJAX_CUDA_CHECK_LAUNCH("unary_kernel");
      } else {
        throw UnsupportedError("cuda unary kernel: element type " + std::string(mlir_name(t)) +
                               " not supported");
      }
    });
  });
}

void launch_binary(BinaryOp op, DType t, const void* a, const void* b, void* out, int64_t n,
                   cudaStream_t s) {
  if (n == 0) return;
  visit_binary(op, [&](auto f) {
    visit_dtype(t, [&](auto tag) {
      using F = decltype(f);
      using T = typename decltype(tag)::type;
      if constexpr (ew::supports<F, T>()) {
        binary_kernel<<<grid_for(n), kBlock, 0, s>>>(
            f, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n);
        CUJAX_CUDA_CHECK_LAUNCH("binary_kernel");
      } else {
        throw UnsupportedError("cuda binary kernel: element type " + std::string(mlir_name(t)) +
                               " not supported");
      }
    });
  });
}

void launch_compare(CompareOp op, DType t, bool total_order, const void* a, const void* b,
                    bool* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    using D = ew::CompareDirection;
    switch (op) {
      case CompareOp::EQ:
        compare_kernel<D::EQ><<<grid_for(n), kBlock, 0, s>>>(total_order, pa, pb, out, n);
        break;
      case CompareOp::NE:
        compare_kernel<D::NE><<<grid_for(n), kBlock, 0, s>>>(total_order, pa, pb, out, n);
        break;
      case CompareOp::GE:
        compare_kernel<D::GE><<<grid_for(n), kBlock, 0, s>>>(total_order, pa, pb, out, n);
        break;
      case CompareOp::GT:
        compare_kernel<D::GT><<<grid_for(n), kBlock, 0, s>>>(total_order, pa, pb, out, n);
        break;
      case CompareOp::LE:
        compare_kernel<D::LE><<<grid_for(n), kBlock, 0, s>>>(total_order, pa, pb, out, n);
        break;
      case CompareOp::LT:
        compare_kernel<D::LT><<<grid_for(n), kBlock, 0, s>>>(total_order, pa, pb, out, n);
        break;
    }
    CUJAX_CUDA_CHECK_LAUNCH("compare_kernel");
  });
}

void launch_select(size_t element_bytes, const bool* pred, bool pred_scalar, const void* on_true,
                   const void* on_false, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_element_bytes(element_bytes, [&](auto bytes) {
    using U = typename bits_of<decltype(bytes)::value>::type;
    select_kernel<<<grid_for(n), kBlock, 0, s>>>(pred, pred_scalar, static_cast<const U*>(on_true),
                                                 static_cast<const U*>(on_false),
                                                 static_cast<U*>(out), n);
    CUJAX_CUDA_CHECK_LAUNCH("select_kernel");
  });
}

}  // namespace cujax::cuda
