// cujax::nn: activation functions and friends under jax.nn's names, written with cujax::lax
// (so they work eagerly and under jit, and lower to the same StableHLO JAX gives). Inputs are
// floating-point arrays unless noted; results keep the input's dtype.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cujax/array.h"

namespace cujax::nn {

Array relu(const Array& x);  // max(x, 0)
// approximate: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); exact: x (1 + erf(x/sqrt 2)) / 2.
Array gelu(const Array& x, bool approximate = true);
Array sigmoid(const Array& x);  // logistic
Array silu(const Array& x);     // x * sigmoid(x)
// exp(x - max) / sum(exp(x - max)) along `axis` (or `axes`).
Array softmax(const Array& x, int64_t axis = -1);
Array softmax(const Array& x, const std::vector<int64_t>& axes);
// x - max - log(sum(exp(x - max))) along `axis` (or `axes`).
Array log_softmax(const Array& x, int64_t axis = -1);
Array log_softmax(const Array& x, const std::vector<int64_t>& axes);
// log(sum(exp(x))) over `axes`, computed as max + log(sum(exp(x - max))) so that large inputs do
// not overflow; a non-finite max is replaced by 0 in the shift, as in JAX.
Array logsumexp(const Array& x, const std::vector<int64_t>& axes, bool keepdims = false);
// indices[..., None] == arange(num_classes), as `dtype`; out-of-range indices give all zeros.
Array one_hot(const Array& indices, int64_t num_classes, DType dtype = DType::F32);

// jax.nn.dot_product_attention: softmax(scale * q k^T + bias, masked) v in JAX's layouts:
// query (B, T, N, H), key and value (B, S, K, H) with N a multiple of K (grouped-query
// attention: query head n uses key head n / (N / K)); rank-3 inputs drop B. `bias` and `mask`
// (bool, true = attend) are rank 4 and broadcast to the logits (B, N, T, S); `scale` defaults
// to 1 / sqrt(H); `is_causal` lets query t attend to keys s <= t; `query_seq_lengths` and
// `key_value_seq_lengths` (i32 (B,), both or neither) mask positions t >= q_len[b] and
// s >= kv_len[b] (the output at padded query positions is unspecified). Masked logits become
// -0.7 * finfo.max (finite, as JAX).
// `implementation`: "xla" materializes the logits in at least f32 and takes the softmax there
// (f16/bf16 inputs are cast back after it). "cudnn" checks cuDNN's requirements (see
// cudnn_attention_unmet), throws naming the first unmet one, and records the fused kernel as a
// custom call (@cujax.cudnn_sdpa, its VJP @cujax.cudnn_sdpa_bwd on the forward's softmax
// stats) that the cuda backend runs with cuDNN and the cpu backend with a reference kernel; the
// bias then gets no gradient. None picks "cudnn" where the default backend runs it with cuDNN
// and every requirement holds, else "xla".
Array dot_product_attention(const Array& query, const Array& key, const Array& value,
                            const std::optional<Array>& bias = std::nullopt,
                            const std::optional<Array>& mask = std::nullopt,
                            std::optional<double> scale = std::nullopt, bool is_causal = false,
                            const std::optional<std::string>& implementation = std::nullopt,
                            const std::optional<Array>& query_seq_lengths = std::nullopt,
                            const std::optional<Array>& key_value_seq_lengths = std::nullopt);

// While alive, dot_product_attention on this thread records the "xla" form where it would record
// cuDNN's custom call, so that a traced program is plain StableHLO that runs under XLA
// (export_ with ExportOptions::portable).
class PortableAttention {
 public:
  PortableAttention();
  ~PortableAttention();
  PortableAttention(const PortableAttention&) = delete;
  PortableAttention& operator=(const PortableAttention&) = delete;
  static bool active();

 private:
  bool previous_;
};

// What a device offers cuDNN's fused attention: a backend's fused_attention_support().
struct CudnnAttentionDevice {
  bool reference = false;      // the backend runs the reference kernels (cpu): no requirement
  int compute_capability = 0;  // 90 for 9.0
  long cudnn_version = 0;      // 91900 for 9.19.0; 0 when cuDNN did not load
  std::string cudnn_error;     // why cuDNN did not load
};
// The oldest cuDNN whose graph API cujax's attention graphs use.
inline constexpr long kMinCudnnAttentionVersion = 90000;
// The first unmet requirement of implementation="cudnn" for these (4-d) inputs on `device`, or
// nullopt: query, key and value in float16 or bfloat16, rank 4 (BTNH), a head dim that is a
// multiple of 8 and at most 128 (256 on compute capability 9.0), compute capability >= 8.0,
// cuDNN loaded and at least kMinCudnnAttentionVersion (the version found is named).
std::optional<std::string> cudnn_attention_unmet(const Array& query, const Array& key,
                                                 const CudnnAttentionDevice& device);
// What `platform`'s device 0 offers (the cpu backend: reference).
CudnnAttentionDevice cudnn_attention_device(const std::string& platform);

}  // namespace cujax::nn
