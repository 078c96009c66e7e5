// jax.nn.dot_product_attention: the XLA path (materialized logits) and cuDNN's requirements.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cujax/devices.h"
#include "cujax/lax.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/profiler.h"

namespace cujax::nn {

namespace {

namespace jnp = cujax::numpy;

std::string type_str(const Array& a) {
  return std::string(mlir_name(a.dtype())) + shape_to_string(a.shape());
}

[[noreturn]] void fail(const std::string& msg) {
  throw Error("nn.dot_product_attention: " + msg);
}

// -0.7 * finfo(dtype).max, as JAX's _get_large_negative: finite, so fully masked rows give a
// uniform softmax instead of NaN.
double large_negative(DType t) {
  switch (t) {
    case DType::F16:
      return -0.7 * 65504.0;
    case DType::BF16:
      return -0.7 * 3.3895313892515355e38;
    case DType::F64:
      return -0.7 * std::numeric_limits<double>::max();
    default:
      return -0.7 * static_cast<double>(std::numeric_limits<float>::max());
  }
}

// A bias or mask must be rank 4 and broadcast to the logits (B, N, T, S) dimension by dimension.
void check_broadcastable(const Array& t, const Shape& logits, const char* name) {
  if (t.ndim() != 4) fail(std::string(name) + " must have rank 4, got " + type_str(t));
  for (int i = 0; i < 4; ++i)
    if (t.shape()[i] != 1 && t.shape()[i] != logits[i])
      fail(std::string(name) + " of shape " + shape_to_string(t.shape()) +
           " does not broadcast to the logits (B, N, T, S) = " + shape_to_string(logits));
}

// What cuDNN's fused attention needs, as JAX checks it; throws naming the unmet requirement.
void check_cudnn(const Array& q, int64_t head_dim) {
  const DType t = q.dtype();
  if (t != DType::F16 && t != DType::BF16)
    fail("implementation='cudnn' needs query, key and value in float16 or bfloat16, got " +
         std::string(mlir_name(t)));
  if (head_dim % 8 != 0 || head_dim > 256)
    fail(
        "implementation='cudnn' needs a head dim that is a multiple of 8 and at most 128 (256 "
        "on compute capability >= 9.0), got " +
        std::to_string(head_dim));
  // The CUDA backend (and cuDNN with it) is not part of this build: every array is on the CPU.
  fail(
      "implementation='cudnn': cuDNN is not detected. It needs a CUDA device of compute "
      "capability >= 8.0; the inputs are on the cpu platform (use implementation='xla' or "
      "none)");
}

// The materialized logits as a trace event, with whether cuDNN's fused attention (which never
// materializes them) would apply, for the doctor's "attention-logits" finding.
void note_logits(const Shape& shape, DType logits_dtype, DType dtype, int64_t head_dim) {
  std::string fused;
  if (dtype != DType::F16 && dtype != DType::BF16)
    fused = std::string("no: the inputs are ") + std::string(mlir_name(dtype)) +
            " (cuDNN needs float16 or bfloat16)";
  else if (head_dim % 8 != 0 || head_dim > 256)
    fused = "no: head dim " + std::to_string(head_dim) + " (cuDNN needs a multiple of 8, <= 128)";
  else if (default_backend() != "cuda")
    fused = "no: the " + default_backend() +
            " platform (cuDNN needs a CUDA device of compute capability >= 8.0)";
  else
    fused = "yes: implementation='cudnn' on a device of compute capability >= 8.0";
  const int64_t bytes = num_elements(shape) * static_cast<int64_t>(size_of(logits_dtype));
  profiler::instant(
      "attention", "attention logits",
      json::Value::object({{"type", std::string(mlir_name(logits_dtype)) + shape_to_string(shape)},
                           {"bytes", bytes},
                           {"dtype", std::string(mlir_name(dtype))},
                           {"head_dim", head_dim},
                           {"fused_applies", fused}}));
}

}  // namespace

Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const std::optional<Array>& bias, const std::optional<Array>& mask,
                            std::optional<double> scale, bool is_causal,
                            const std::optional<std::string>& implementation) {
  if (implementation && *implementation != "xla" && *implementation != "cudnn")
    fail("implementation must be none, 'xla' or 'cudnn', got '" + *implementation + "'");
  if (!query.valid() || !key.valid() || !value.valid()) fail("uninitialized Array");
  // Rank 3 (T, N, H) inputs get a batch of one, as JAX's _ensure_4d.
  const int64_t rank = query.ndim();
  if (rank != 3 && rank != 4) fail("query must have rank 3 or 4, got " + type_str(query));
  if (key.ndim() != rank || value.ndim() != rank)
    fail("query, key and value must have one rank, got " + type_str(query) + ", " + type_str(key) +
         " and " + type_str(value));
  Array q = rank == 3 ? lax::expand_dims(query, {0}) : query;
  Array k = rank == 3 ? lax::expand_dims(key, {0}) : key;
  Array v = rank == 3 ? lax::expand_dims(value, {0}) : value;
  if (!is_float(q.dtype())) fail("needs floating-point inputs, got " + type_str(query));
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype())
    fail("query, key and value must have one dtype, got " + type_str(query) + ", " + type_str(key) +
         " and " + type_str(value));
  const int64_t B = k.shape()[0], S = k.shape()[1], K = k.shape()[2], H = k.shape()[3];
  if (v.shape() != k.shape())
    fail("value shape should be " + shape_to_string(k.shape()) + " (the key's), got " +
         shape_to_string(v.shape()));
  if (q.shape()[0] != B || q.shape()[3] != H)
    fail("query shape should be (" + std::to_string(B) + ", T, N, " + std::to_string(H) +
         ") to match the key " + shape_to_string(k.shape()) + ", got " +
         shape_to_string(q.shape()));
  const int64_t T = q.shape()[1], N = q.shape()[2];
  if (K == 0 || N % K != 0)
    fail("the number of query heads must be a multiple of key/value heads, got " +
         std::to_string(N) + " vs " + std::to_string(K));
  const int64_t G = N / K;
  const Shape logits_shape{B, N, T, S};
  if (bias) check_broadcastable(*bias, logits_shape, "bias");
  if (mask) {
    check_broadcastable(*mask, logits_shape, "mask");
    if (mask->dtype() != DType::Bool) fail("mask must be bool, got " + type_str(*mask));
  }
  if (implementation && *implementation == "cudnn") check_cudnn(q, H);

  // Logits in at least f32 (JAX: promote_types(query.dtype, float32)), laid out (B, N, T, S)
  // with query head n = k * G + g attending to key head k (grouped-query attention).
  const DType logits_dtype = q.dtype() == DType::F64 ? DType::F64 : DType::F32;
  const Array qg = lax::reshape(lax::transpose(lax::reshape(q, {B, T, K, G, H}), {0, 2, 3, 1, 4}),
                                {B, K, G * T, H});
  lax::DotDimensionNumbers qk;
  qk.lhs_contracting_dimensions = {3};
  qk.rhs_contracting_dimensions = {3};
  qk.lhs_batch_dimensions = {0, 1};
  qk.rhs_batch_dimensions = {0, 2};
  Array logits = lax::reshape(lax::dot_general(qg, k, qk, logits_dtype), logits_shape);
  if (profiler::active()) note_logits(logits_shape, logits_dtype, q.dtype(), H);
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(H));
  logits = lax::mul(logits, lax::full(logits_shape, s, logits_dtype));
  if (bias) logits = jnp::astype(jnp::add(logits, *bias), logits_dtype);

  std::optional<Array> combined = mask;
  if (is_causal) {
    // tril(ones(T, S)): query t attends to keys s <= t.
    const Array row = lax::broadcasted_iota(DType::I32, {1, 1, T, S}, 2);
    const Array col = lax::broadcasted_iota(DType::I32, {1, 1, T, S}, 3);
    const Array causal = lax::ge(row, col);
    combined = combined ? jnp::logical_and(*combined, causal) : causal;
  }
  if (combined)
    logits =
        jnp::where(*combined, logits, lax::full({}, large_negative(logits_dtype), logits_dtype));
  const Array probs = jnp::astype(softmax(logits, -1), v.dtype());

  lax::DotDimensionNumbers pv;
  pv.lhs_contracting_dimensions = {3};
  pv.rhs_contracting_dimensions = {1};
  pv.lhs_batch_dimensions = {0, 1};
  pv.rhs_batch_dimensions = {0, 2};
  const Array encoded = lax::dot_general(lax::reshape(probs, {B, K, G * T, S}), v, pv);
  Array out = lax::reshape(lax::transpose(lax::reshape(encoded, {B, K, G, T, H}), {0, 3, 1, 2, 4}),
                           {B, T, N, H});
  return rank == 3 ? lax::reshape(out, {T, N, H}) : out;
}

}  // namespace cujax::nn
