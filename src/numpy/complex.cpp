// Complex numbers: real, imag, conj, angle and the dtype predicates.
#include <numbers>

#include "numpy/internal.h"

namespace cujax::numpy {

using detail::set_weak;

Array real(const ArrayLike& x) {
  Array a = detail::promoted_operand("real", x);
  if (!is_complex(a.dtype())) return a;
  return set_weak(lax::real(a), a.weak_type());
}

Array imag(const ArrayLike& x) {
  Array a = detail::promoted_operand("imag", x);
  if (!is_complex(a.dtype())) return set_weak(detail::full_as(a, 0), a.weak_type());
  return set_weak(lax::imag(a), a.weak_type());
}

Array conj(const ArrayLike& x) {
  Array a = detail::promoted_operand("conj", x);
  if (!is_complex(a.dtype())) return a;  // jnp.conj keeps a real dtype
  return set_weak(lax::conj(a), a.weak_type());
}

Array conjugate(const ArrayLike& x) {
  return conj(x);
}

Array angle(const ArrayLike& x, bool deg) {
  Array a = detail::promoted_operand("angle", x);
  Array re, im;
  if (is_complex(a.dtype())) {
    re = lax::real(a);
    im = lax::imag(a);
  } else {
    re = detail::convert(a, inexact_dtype(a.dtype()));
    im = detail::full_as(re, 0);
  }
  Array r = lax::atan2(im, re);
  if (deg) r = lax::mul(r, detail::full_as(r, 180 / std::numbers::pi));
  return set_weak(r, a.weak_type());
}

bool iscomplexobj(const ArrayLike& x) {
  return is_complex(x.dtype().dtype);
}

bool isrealobj(const ArrayLike& x) {
  return !iscomplexobj(x);
}

Array iscomplex(const ArrayLike& x) {
  Array a = detail::promoted_operand("iscomplex", x);
  if (!is_complex(a.dtype())) return lax::full(a.shape(), 0, DType::Bool);
  const Array im = lax::imag(a);
  return lax::ne(im, detail::full_as(im, 0));
}

Array isreal(const ArrayLike& x) {
  Array a = detail::promoted_operand("isreal", x);
  if (!is_complex(a.dtype())) return lax::full(a.shape(), 1, DType::Bool);
  const Array im = lax::imag(a);
  return lax::eq(im, detail::full_as(im, 0));
}

}  // namespace cujax::numpy
