// jax.nn.dot_product_attention: the XLA path (materialized logits), and cuDNN's fused attention
// as a custom call (compiler/sdpa_call.h) after checking its requirements.
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "compiler/sdpa_call.h"
#include "cujax/devices.h"
#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/profiler.h"
#include "cujax/trace/trace.h"
#include "runtime/fused_attention.h"

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

std::string version_str(long v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

// Where an op on these inputs would run: their device, or the default backend under a trace.
std::string platform_of(const Array& q, const Array& k, const Array& v) {
  if (trace::current_trace()) return default_backend();
  return trace::placement_of({q, k, v}, {default_backend(), 0, false}, "dot_product_attention")
      .platform;
}

// implementation=None's choice, once per query and key type for the process.
void log_choice(const Array& q, const Array& k, bool cudnn, const std::optional<std::string>& why) {
  static std::mutex mu;
  static std::set<std::string> seen;
  const std::string key = type_str(q) + " " + type_str(k);
  std::lock_guard<std::mutex> lock(mu);
  if (!seen.insert(key).second) return;
  std::fprintf(stderr, "cujax: dot_product_attention %s: implementation %s%s\n", key.c_str(),
               cudnn ? "cudnn" : "xla", why ? (" (" + *why + ")").c_str() : "");
}

// The fused kernel as a custom call on 4-d inputs; `bias` already holds the boolean mask. Under
// a differentiated trace it also returns the softmax stats, which its VJP consumes.
Array cudnn_attention(const Array& q, const Array& k, const Array& v,
                      const std::optional<Array>& bias, const std::optional<Array>& q_lens,
                      const std::optional<Array>& kv_lens, double scale, bool causal) {
  compiler::SdpaConfig c;
  c.scale = scale;
  c.causal = causal;
  c.has_bias = bias.has_value();
  c.has_seq_lengths = q_lens.has_value();
  c.groups = q.shape()[2] / k.shape()[2];
  trace::OpSpec spec;
  spec.name = "stablehlo.custom_call";
  spec.attributes = {
      {"call_target_name", ir::Attribute::string_attr(std::string(compiler::kSdpaForward))},
      {"api_version", ir::Attribute::integer_attr(4, DType::I32)},
      {"backend_config", compiler::sdpa_backend_config(c)}};
  spec.result_types = {ir::Type::tensor(q.shape(), q.dtype())};
  if (trace::current_trace() && trace::AutodiffWindow::active())
    spec.result_types.push_back(
        ir::Type::tensor({q.shape()[0], q.shape()[2], q.shape()[1]}, DType::F32));
  std::vector<Array> in{q, k, v};
  if (bias) in.push_back(*bias);
  if (q_lens) in.insert(in.end(), {*q_lens, *kv_lens});
  return trace::bind(spec, in)[0];
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

namespace {
thread_local bool portable_attention = false;
}  // namespace

PortableAttention::PortableAttention() : previous_(portable_attention) {
  portable_attention = true;
}
PortableAttention::~PortableAttention() {
  portable_attention = previous_;
}
bool PortableAttention::active() {
  return portable_attention;
}

std::optional<std::string> cudnn_attention_unmet(const Array& q, const Array& k,
                                                 const CudnnAttentionDevice& device) {
  const DType t = q.dtype();
  if (t != DType::F16 && t != DType::BF16)
    return "needs query, key and value in float16 or bfloat16, got " + std::string(mlir_name(t));
  if (q.ndim() != 4 || k.ndim() != 4)
    return "needs rank-4 inputs in the BTNH layout, got " + type_str(q) + " and " + type_str(k);
  const int64_t H = q.shape()[3];
  const bool hopper = device.compute_capability == 90;
  if (H % 8 != 0 || H > (hopper || device.reference ? 256 : 128))
    return "needs a head dim that is a multiple of 8 and at most 128 (256 on compute capability "
           "9.0), got " +
           std::to_string(H);
  if (device.reference) return std::nullopt;
  if (device.compute_capability < 80)
    return "needs a CUDA device of compute capability >= 8.0, got " +
           std::to_string(device.compute_capability / 10) + "." +
           std::to_string(device.compute_capability % 10);
  if (device.cudnn_version == 0) return "cuDNN is not detected (" + device.cudnn_error + ")";
  if (device.cudnn_version < kMinCudnnAttentionVersion)
    return "needs cuDNN " + version_str(kMinCudnnAttentionVersion) + " or newer, found " +
           version_str(device.cudnn_version);
  return std::nullopt;
}

CudnnAttentionDevice cudnn_attention_device(const std::string& platform) {
  // The backend starts (and registers its probe) before it is asked.
  (void)runtime::get_backend(platform);
  const runtime::FusedAttentionSupport s = runtime::fused_attention_support(platform, 0);
  return {s.reference, s.compute_capability, s.cudnn_version, s.cudnn_error};
}

namespace {}  // namespace

Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const std::optional<Array>& bias, const std::optional<Array>& mask,
                            std::optional<double> scale, bool is_causal,
                            const std::optional<std::string>& implementation,
                            const std::optional<Array>& query_seq_lengths,
                            const std::optional<Array>& key_value_seq_lengths) {
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
  if (query_seq_lengths.has_value() != key_value_seq_lengths.has_value())
    fail("give both query_seq_lengths and key_value_seq_lengths, or neither");
  std::optional<Array> q_lens, kv_lens;
  if (query_seq_lengths) {
    for (const Array* l : {&*query_seq_lengths, &*key_value_seq_lengths})
      if (l->shape() != Shape{B} || !is_integer(l->dtype()))
        fail("sequence lengths must be integers of shape (" + std::to_string(B) + ",), got " +
             type_str(*l));
    q_lens = jnp::astype(*query_seq_lengths, DType::I32);
    kv_lens = jnp::astype(*key_value_seq_lengths, DType::I32);
  }

  bool use_cudnn = false;
  if (PortableAttention::active()) {
    // The "xla" form: no requirement to check.
  } else if (implementation && *implementation == "cudnn") {
    if (auto why = cudnn_attention_unmet(q, k, cudnn_attention_device(platform_of(q, k, v))))
      fail("implementation='cudnn' " + *why);
    use_cudnn = true;
  } else if (!implementation) {
    const std::string platform = platform_of(q, k, v);
    const CudnnAttentionDevice dev = cudnn_attention_device(platform);
    const auto why =
        dev.reference ? std::optional<std::string>("the " + platform + " backend runs the xla form")
                      : cudnn_attention_unmet(q, k, dev);
    use_cudnn = !why;
    if (log_compiles()) log_choice(q, k, use_cudnn, why);
  }
  const double s = scale ? *scale : 1.0 / std::sqrt(static_cast<double>(H));
  if (use_cudnn) {
    // cuDNN takes a boolean mask as an additive bias of the inputs' dtype (as JAX does).
    std::optional<Array> b;
    if (bias) b = jnp::astype(*bias, q.dtype());
    if (mask) {
      const Array m = jnp::where(*mask, lax::full({}, 0.0, q.dtype()),
                                 lax::full({}, large_negative(q.dtype()), q.dtype()));
      b = b ? jnp::add(*b, m) : m;
    }
    if (b) {
      // cuDNN broadcasts a bias over B and N only.
      const Shape& bs = b->shape();
      if (bs[2] != T || bs[3] != S)
        b = lax::broadcast_in_dim(*b, {bs[0], bs[1], T, S}, {0, 1, 2, 3});
    }
    const Array out = cudnn_attention(q, k, v, b, q_lens, kv_lens, s, is_causal);
    return rank == 3 ? lax::reshape(out, {T, N, H}) : out;
  }

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
  if (q_lens) {
    // Padding: query t < q_len[b] and key s < kv_len[b].
    const Array row = lax::broadcasted_iota(DType::I32, {B, 1, T, S}, 2);
    const Array col = lax::broadcasted_iota(DType::I32, {B, 1, T, S}, 3);
    const Array ql = lax::broadcast_in_dim(*q_lens, {B, 1, T, S}, {0});
    const Array kl = lax::broadcast_in_dim(*kv_lens, {B, 1, T, S}, {0});
    const Array pad = jnp::logical_and(lax::lt(row, ql), lax::lt(col, kl));
    combined = combined ? jnp::logical_and(*combined, pad) : pad;
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
