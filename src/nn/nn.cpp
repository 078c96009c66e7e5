#include "cujax/nn.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "cujax/lax.h"

namespace cujax::nn {

namespace {

void check_float(const char* op, const Array& x) {
  if (!x.valid()) throw Error(std::string("nn.") + op + ": uninitialized Array");
  if (!is_float(x.dtype()))
    throw Error(std::string("nn.") + op + ": needs a floating-point array, got " +
                std::string(mlir_name(x.dtype())) + shape_to_string(x.shape()));
}

Array like(const Array& x, double v) {
  return lax::full(x.shape(), v, x.dtype());
}

std::vector<int64_t> canonical(const char* op, const Array& x, const std::vector<int64_t>& axes) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    if (a < -x.ndim() || a >= x.ndim())
      throw Error(std::string("nn.") + op + ": axis " + std::to_string(a) +
                  " is out of range for rank " + std::to_string(x.ndim()));
    const int64_t c = a < 0 ? a + x.ndim() : a;
    if (std::find(out.begin(), out.end(), c) != out.end())
      throw Error(std::string("nn.") + op + ": repeated axis " + std::to_string(a));
    out.push_back(c);
  }
  return out;
}

// The dimensions of x that survive reducing `axes`, for broadcasting a reduced value back.
std::vector<int64_t> kept_dims(const Array& x, const std::vector<int64_t>& axes) {
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < x.ndim(); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) kept.push_back(i);
  return kept;
}

// A reduced array broadcast back to x's shape (keepdims, then broadcasting).
Array expand_back(const Array& reduced, const Array& x, const std::vector<int64_t>& axes) {
  return lax::broadcast_in_dim(reduced, x.shape(), kept_dims(x, axes));
}

}  // namespace

Array relu(const Array& x) {
  if (!x.valid()) throw Error("nn.relu: uninitialized Array");
  return lax::max(x, like(x, 0.0));
}

Array gelu(const Array& x, bool approximate) {
  check_float("gelu", x);
  if (approximate) {
    const double sqrt_2_over_pi = std::sqrt(2.0 / std::numbers::pi);
    const Array x3 = lax::mul(lax::mul(x, x), x);
    const Array inner =
        lax::mul(like(x, sqrt_2_over_pi), lax::add(x, lax::mul(like(x, 0.044715), x3)));
    const Array cdf = lax::mul(like(x, 0.5), lax::add(like(x, 1.0), lax::tanh(inner)));
    return lax::mul(x, cdf);
  }
  const Array e = lax::erf(lax::div(x, like(x, std::numbers::sqrt2)));
  return lax::div(lax::mul(x, lax::add(e, like(x, 1.0))), like(x, 2.0));
}

Array sigmoid(const Array& x) {
  check_float("sigmoid", x);
  return lax::logistic(x);
}

Array silu(const Array& x) {
  check_float("silu", x);
  return lax::mul(x, lax::logistic(x));
}

Array softmax(const Array& x, const std::vector<int64_t>& axes) {
  check_float("softmax", x);
  const auto ax = canonical("softmax", x, axes);
  // The shift by the maximum only keeps exp in range; as in JAX it carries no gradient (the
  // result does not depend on it), which saves the backward pass a pass through the maximum.
  const Array m = lax::stop_gradient(expand_back(lax::reduce_max(x, ax), x, ax));
  const Array unnormalized = lax::exp(lax::sub(x, m));
  const Array total = expand_back(lax::reduce_sum(unnormalized, ax), x, ax);
  return lax::div(unnormalized, total);
}

Array softmax(const Array& x, int64_t axis) {
  return softmax(x, std::vector<int64_t>{axis});
}

Array log_softmax(const Array& x, const std::vector<int64_t>& axes) {
  check_float("log_softmax", x);
  const auto ax = canonical("log_softmax", x, axes);
  const Array shifted = lax::sub(x, lax::stop_gradient(expand_back(lax::reduce_max(x, ax), x, ax)));
  const Array lse = lax::log(lax::reduce_sum(lax::exp(shifted), ax));
  return lax::sub(shifted, expand_back(lse, x, ax));
}

Array log_softmax(const Array& x, int64_t axis) {
  return log_softmax(x, std::vector<int64_t>{axis});
}

Array logsumexp(const Array& x, const std::vector<int64_t>& axes, bool keepdims) {
  check_float("logsumexp", x);
  const auto ax = canonical("logsumexp", x, axes);
  Array m = lax::reduce_max(x, ax);
  m = lax::select(lax::is_finite(m), m, like(m, 0.0));
  const Array shifted = lax::sub(x, expand_back(m, x, ax));
  Array out = lax::add(lax::log(lax::reduce_sum(lax::exp(shifted), ax)), m);
  if (keepdims) {
    Shape shape = x.shape();
    for (int64_t a : ax) shape[a] = 1;
    out = lax::reshape(out, shape);
  }
  return out;
}

Array one_hot(const Array& indices, int64_t num_classes, DType dtype) {
  if (!indices.valid()) throw Error("nn.one_hot: uninitialized Array");
  if (!is_integer(indices.dtype()))
    throw Error("nn.one_hot: indices must be integers, got " +
                std::string(mlir_name(indices.dtype())) + shape_to_string(indices.shape()));
  if (num_classes < 0)
    throw Error("nn.one_hot: num_classes must be >= 0, got " + std::to_string(num_classes));
  Shape shape = indices.shape();
  shape.push_back(num_classes);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < indices.ndim(); ++i) dims.push_back(i);
  const Array lhs = lax::broadcast_in_dim(indices, shape, dims);
  const Array rhs = lax::broadcasted_iota(indices.dtype(), shape, indices.ndim());
  return lax::convert_element_type(lax::eq(lhs, rhs), dtype);
}

}  // namespace cujax::nn
