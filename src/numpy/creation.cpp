// Array creation: zeros, ones, full, arange, linspace, eye, array, astype.
#include <cmath>

#include "numpy/internal.h"

namespace cujax::numpy {

using detail::convert;
using detail::fail;
using detail::set_weak;

namespace {

void check_shape(const char* fn, const Shape& shape) {
  for (int64_t d : shape)
    if (d < 0)
      fail(fn, "negative dimension " + std::to_string(d) + " in shape " + shape_to_string(shape));
}

template <class F>
std::complex<double> complex_value(F v) {
  if constexpr (is_complex_v<F>)
    return {static_cast<double>(v.real()), static_cast<double>(v.imag())};
  else
    return {static_cast<double>(v), 0.0};
}

HostTensor convert_host(const HostTensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  HostTensor out(dtype, t.shape());
  visit_dtype_with_complex(t.dtype(), [&](auto from_tag) {
    using F = typename decltype(from_tag)::type;
    visit_dtype_with_complex(dtype, [&](auto to_tag) {
      using T = typename decltype(to_tag)::type;
      const F* src = t.data_as<F>();
      T* dst = out.data_as<T>();
      for (int64_t i = 0; i < t.size(); ++i) {
        if constexpr (is_complex_v<F> || is_complex_v<T>) {
          // Complex to real keeps the real part (NumPy's cast, JAX's convert_element_type).
          const std::complex<double> v = complex_value(src[i]);
          if constexpr (is_complex_v<T>)
            dst[i] = T(static_cast<typename T::value_type>(v.real()),
                       static_cast<typename T::value_type>(v.imag()));
          else if constexpr (std::is_same_v<T, bool>)
            dst[i] = v != 0.0;
          else
            dst[i] = static_cast<T>(v.real());
        } else if constexpr (std::is_same_v<T, bool>) {
          dst[i] = static_cast<double>(src[i]) != 0.0;
        } else if constexpr (std::is_integral_v<F> && std::is_integral_v<T>) {
          dst[i] = static_cast<T>(src[i]);
        } else {
          dst[i] = static_cast<T>(static_cast<double>(src[i]));
        }
      }
    });
  });
  return out;
}

template <class T>
Array from_list(std::initializer_list<T> values, std::optional<Shape> shape, DType default_dtype,
                std::optional<DType> dtype) {
  std::vector<T> v(values);
  Shape s = shape ? *shape : Shape{static_cast<int64_t>(v.size())};
  if (num_elements(s) != static_cast<int64_t>(v.size()))
    fail("array", std::to_string(v.size()) + " values do not fill shape " + shape_to_string(s));
  return cujax::array(convert_host(HostTensor::from_vector(v, s), dtype.value_or(default_dtype)));
}

}  // namespace

Array zeros(const Shape& shape, DType dtype) {
  check_shape("zeros", shape);
  return lax::full(shape, 0, dtype);
}

Array ones(const Shape& shape, DType dtype) {
  check_shape("ones", shape);
  return lax::full(shape, 1, dtype);
}

Array empty(const Shape& shape, DType dtype) {
  check_shape("empty", shape);
  return lax::full(shape, 0, dtype);
}

Array full(const Shape& shape, const ArrayLike& fill, std::optional<DType> dtype) {
  check_shape("full", shape);
  const WeakDType ft = fill.dtype();
  const DType t = dtype.value_or(ft.dtype);
  Array v = detail::to_dtype("full", fill, t);
  const Shape& fs = v.shape();
  bool ok = fs.size() <= shape.size();
  for (size_t i = 0; ok && i < fs.size(); ++i)
    ok = fs[i] == 1 || fs[i] == shape[shape.size() - fs.size() + i];
  if (!ok)
    fail("full", "fill value of shape " + shape_to_string(fs) + " cannot be broadcast to shape " +
                     shape_to_string(shape));
  v = detail::broadcast_to_shape(v, shape);
  return set_weak(v, !dtype && ft.weak_type);
}

Array zeros_like(const Array& x, std::optional<DType> dtype) {
  return set_weak(lax::full(x.shape(), 0, dtype.value_or(x.dtype())), !dtype && x.weak_type());
}

Array ones_like(const Array& x, std::optional<DType> dtype) {
  return set_weak(lax::full(x.shape(), 1, dtype.value_or(x.dtype())), !dtype && x.weak_type());
}

Array empty_like(const Array& x, std::optional<DType> dtype) {
  return zeros_like(x, dtype);
}

Array full_like(const Array& x, const ArrayLike& fill, std::optional<DType> dtype) {
  Array v = full(x.shape(), fill, dtype.value_or(x.dtype()));
  return set_weak(v, !dtype && x.weak_type());
}

Array arange(Scalar stop, std::optional<DType> dtype) {
  return arange(Scalar(0), stop, Scalar(1), dtype);
}

Array arange(Scalar start, Scalar stop, Scalar step, std::optional<DType> dtype) {
  const bool any_float = start.kind == Scalar::Kind::Float || stop.kind == Scalar::Kind::Float ||
                         step.kind == Scalar::Kind::Float;
  const DType t = dtype.value_or(any_float ? DType::F32 : DType::I32);
  const double a = start.as_double(), b = stop.as_double(), s = step.as_double();
  if (s == 0) fail("arange", "step must not be zero");
  if (t == DType::Bool) fail("arange", "bool is not supported");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((b - a) / s)));
  Array r = lax::iota(t, n);
  if (s != 1) r = lax::mul(r, lax::full({n}, s, t));
  if (a != 0) r = lax::add(r, lax::full({n}, a, t));
  return r;
}

Array linspace(double start, double stop, int64_t num, bool endpoint, DType dtype) {
  if (num < 0) fail("linspace", "number of samples, " + std::to_string(num) + ", must be >= 0");
  const DType ct = is_float(dtype) && size_of(dtype) >= 4 ? dtype : DType::F32;
  Array out;
  if (num == 0) {
    out = lax::full({0}, 0, ct);
  } else if (num == 1) {
    out = lax::full({1}, start, ct);
  } else {
    const double div = static_cast<double>(endpoint ? num - 1 : num);
    Array t = lax::div(lax::iota(ct, num), lax::full({num}, div, ct));
    Array one_minus_t = lax::sub(lax::full({num}, 1, ct), t);
    out = lax::add(lax::mul(lax::full({num}, start, ct), one_minus_t),
                   lax::mul(lax::full({num}, stop, ct), t));
  }
  if (is_integer(dtype)) out = lax::floor(out);
  return convert(out, dtype);
}

Array eye(int64_t n, std::optional<int64_t> m, int64_t k, DType dtype) {
  const int64_t cols = m.value_or(n);
  check_shape("eye", {n, cols});
  Array r = lax::broadcasted_iota(DType::I64, {n, cols}, 0);
  Array c = lax::broadcasted_iota(DType::I64, {n, cols}, 1);
  Array mask = lax::eq(lax::sub(c, r), lax::full({n, cols}, static_cast<double>(k), DType::I64));
  return convert(mask, dtype);
}

Array identity(int64_t n, DType dtype) {
  return eye(n, n, 0, dtype);
}

Array array(std::initializer_list<double> values, std::optional<Shape> shape,
            std::optional<DType> dtype) {
  return from_list(values, std::move(shape), DType::F32, dtype);
}

Array array(std::initializer_list<int> values, std::optional<Shape> shape,
            std::optional<DType> dtype) {
  return from_list(values, std::move(shape), DType::I32, dtype);
}

Array array(std::initializer_list<bool> values, std::optional<Shape> shape,
            std::optional<DType> dtype) {
  return from_list(values, std::move(shape), DType::Bool, dtype);
}

Array array(std::initializer_list<std::complex<double>> values, std::optional<Shape> shape,
            std::optional<DType> dtype) {
  return from_list(values, std::move(shape), DType::C64, dtype);
}

Array array(const HostTensor& values, std::optional<DType> dtype) {
  return cujax::array(dtype ? convert_host(values, *dtype) : values);
}

Array asarray(const ArrayLike& x, std::optional<DType> dtype) {
  if (x.is_scalar()) return x.to_array(dtype, "numpy.asarray");
  return dtype ? astype(x.array(), *dtype) : x.array();
}

Array astype(const Array& x, DType dtype) {
  return set_weak(convert(x, dtype), false);
}

Array copy(const Array& x) {
  return x;  // arrays are immutable
}

}  // namespace cujax::numpy
