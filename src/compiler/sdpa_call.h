// The custom calls of cuDNN's fused attention (nn::dot_product_attention with
// implementation="cudnn"): their names, their backend_config and the shapes of their operands,
// read the same way by the cpu reference kernels, the cuda backend and the trace's VJP and
// batching rules.
//
//   forward  @cujax.cudnn_sdpa(q, k, v, [bias], [q_lens, kv_lens]) -> (out, [stats])
//   backward @cujax.cudnn_sdpa_bwd(q, k, v, [bias], [q_lens, kv_lens], out, stats, d_out)
//            -> (d_q, d_k, d_v)
//
// q (B, T, N, H), k and v (B, S, K, H) with N = groups * K (BTNH, JAX's layout); bias
// (B or 1, N or 1, T, S) of q's dtype; q_lens, kv_lens (B,) i32; out like q; stats (B, N, T)
// f32, the log-sum-exp of each row of the masked, scaled logits. Positions t >= q_lens[b] or
// s >= kv_lens[b], and s > t when causal, are masked.
#pragma once

#include <string>
#include <string_view>

#include "cujax/ir/ir.h"

namespace cujax::compiler {

inline constexpr std::string_view kSdpaForward = "cujax.cudnn_sdpa";
inline constexpr std::string_view kSdpaBackward = "cujax.cudnn_sdpa_bwd";

struct SdpaConfig {
  double scale = 1;
  bool causal = false;  // mask_type "causal" (else "none")
  bool has_bias = false;
  bool has_seq_lengths = false;
  double dropout_rate = 0;  // always 0: rejected (sdpa_call says why)
  int64_t groups = 1;       // query heads per key/value head: 1 is MHA, N is MQA
  std::string layout = "BTNH";
};

struct SdpaDims {
  int64_t B = 0, T = 0, N = 0, H = 0, S = 0, K = 0;
  int64_t bias_b = 0, bias_n = 0;  // the bias's B and N extents (1 when broadcast)
};

struct SdpaCall {
  SdpaConfig config;
  SdpaDims dims;
  bool backward = false;
  bool with_stats = false;  // forward only: the stats result is present
  DType dtype = DType::BF16;
};

// The dictionary the forward and backward calls carry as backend_config.
ir::AttrRef sdpa_backend_config(const SdpaConfig& config);
// The call's target when `op` is one of the two custom calls, else empty.
std::string_view sdpa_target(const ir::Operation& op);
// Reads the backend_config and checks operands and results; throws UnsupportedError naming the
// op and what is wrong (a dropout rate, a layout other than BTNH, mismatched shapes, ...).
SdpaCall sdpa_call(const ir::Operation& op);

// 2 * B * N * T * S * H * 2 (two products), halved when causal: the FLOPs of the forward.
double sdpa_forward_flops(const SdpaDims& d, bool causal);

}  // namespace cujax::compiler
