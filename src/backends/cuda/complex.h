// Complex values (complex64, complex128) on the device: the element-wise arithmetic, parts and
// conversions of complex.cu, chosen once per op; fft is fft.h's, and the ops that only move
// elements (reshape, transpose, slices, ...) use the byte-moving kernels every type shares.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/program.h"
#include "cujax/ir/ir.h"

namespace cujax::cuda {

// A kernel for an element-wise op on complex values (add, subtract, multiply, divide, negate,
// real, imag, complex, abs, compare EQ/NE, convert between real and complex types, the
// functions of ComplexFunction and their chlo forms) or a
// reduce whose body is one add (a sum: the real and imaginary parts summed apart by the real
// reduce kernel, from zero, then the init value added), or an empty function where the host
// path must take it (other reductions, ...).
DeviceKernel complex_kernel(const ir::Operation& op, Device* device);

enum class ComplexOp {
  Add,
  AddScalar,  // out[i] = a[i] + b[0]
  Subtract,
  Multiply,
  Divide,
  Negate,
  Real,
  Imag,
  Abs,
  Make,
  Eq,
  Ne
};

// Element functions on complex values, computed in complex<double> and rounded once to the
// operand type, as the CPU backend computes complex64 ones (its complex128 ones in long double,
// which the device has not): the C++ library's functions (cuda::std's, with C99's branch cuts, as
// the CPU's C library), and the formulas both backends share (complex_math.h) for expm1, log1p,
// sign, maximum and minimum (by (real, imaginary)). Power, Maximum and Minimum read `b` too.
enum class ComplexFunction {
  Exp,
  Expm1,
  Log,
  Log1p,
  Sqrt,
  Rsqrt,
  Cbrt,
  Sign,
  Sin,
  Cos,
  Tan,
  Tanh,
  Logistic,
  Sinh,
  Cosh,
  Asin,
  Acos,
  Atan,
  Asinh,
  Acosh,
  Atanh,
  Power,
  Maximum,
  Minimum
};

// Launchers (complex.cu). `t` is the complex type; Real, Imag and Abs write its part type, Make
// reads two arrays of it, Eq and Ne write bools; Negate, Real, Imag and Abs read `a` only.
void launch_complex(ComplexOp op, DType t, const void* a, const void* b, void* out, int64_t n,
                    cudaStream_t s);
void launch_complex_function(ComplexFunction f, DType t, const void* a, const void* b, void* out,
                             int64_t n, cudaStream_t s);
// Between a real type (bool, integers, floats; not the narrow ones, which reach complex types
// through f32) and complex64/complex128, as the CPU backend converts: a real value becomes the
// real part, converted as a real convert to the part type; a complex one gives its real part,
// converted to the real type. And between the two complex types.
void launch_complex_convert(DType from, DType to, const void* in, void* out, int64_t n,
                            cudaStream_t s);
// c = a x b for `batch` row-major [m, k] x [k, n] products of complex type `t`, summed in order
// in the operand type as the CPU backend does (cplx::accumulate_product).
void launch_complex_dot(DType t, const void* a, const void* b, void* c, int64_t batch, int64_t m,
                        int64_t n, int64_t k, cudaStream_t s);

}  // namespace cujax::cuda
