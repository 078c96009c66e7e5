// The reference kernels of cuDNN's fused attention custom calls (compiler/sdpa_call.h): naive
// attention in f32 with the same output and stats (log-sum-exp per row) as the cuDNN graphs,
// and the backward from them, so a program that calls cuDNN attention runs anywhere. Masked
// logits are -0.7 * FLT_MAX, as the "xla" path sets them, so fully masked rows agree with it.
#include <cfloat>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "compiler/sdpa_call.h"

namespace cujax::cpu {

namespace {

std::vector<float> to_f32(const HostTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.size()));
  visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = t.data_as<T>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(p[i]);
  });
  return out;
}

HostTensor from_f32(const std::vector<float>& v, DType dtype, Shape shape) {
  HostTensor t(dtype, std::move(shape));
  visit_dtype(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data_as<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
  });
  return t;
}

float round_to(float x, DType dtype) {
  return dtype == DType::BF16 ? static_cast<float>(bfloat16(x)) : static_cast<float>(float16(x));
}

constexpr float kMasked = -0.7f * FLT_MAX;

// The inputs of one call in f32, and the masked, scaled logits of one row.
struct Inputs {
  compiler::SdpaCall call;
  std::vector<float> q, k, v, bias;
  std::vector<int32_t> q_lens, kv_lens;

  Inputs(const compiler::SdpaCall& c, std::span<const HostTensor> in) : call(c) {
    q = to_f32(in[0]), k = to_f32(in[1]), v = to_f32(in[2]);
    size_t at = 3;
    if (c.config.has_bias) bias = to_f32(in[at++]);
    if (c.config.has_seq_lengths) {
      q_lens = in[at].to_vector<int32_t>();
      kv_lens = in[at + 1].to_vector<int32_t>();
    }
  }
  const compiler::SdpaDims& d() const { return call.dims; }
  size_t qi(int64_t b, int64_t t, int64_t n) const {
    return static_cast<size_t>(((b * d().T + t) * d().N + n) * d().H);
  }
  size_t ki(int64_t b, int64_t s, int64_t kh) const {
    return static_cast<size_t>(((b * d().S + s) * d().K + kh) * d().H);
  }
  bool masked(int64_t b, int64_t t, int64_t s) const {
    if (call.config.causal && s > t) return true;
    return !q_lens.empty() && (t >= q_lens[b] || s >= kv_lens[b]);
  }
  void logits(int64_t b, int64_t n, int64_t t, std::vector<float>& row) const {
    const int64_t kh = n / call.config.groups, H = d().H;
    const float* qp = &q[qi(b, t, n)];
    for (int64_t s = 0; s < d().S; ++s) {
      const float* kp = &k[ki(b, s, kh)];
      float acc = 0;
      for (int64_t h = 0; h < H; ++h) acc += qp[h] * kp[h];
      acc *= static_cast<float>(call.config.scale);
      if (!bias.empty()) {
        const int64_t bb = d().bias_b == 1 ? 0 : b, bn = d().bias_n == 1 ? 0 : n;
        acc += bias[static_cast<size_t>(((bb * d().bias_n + bn) * d().T + t) * d().S + s)];
      }
      row[s] = masked(b, t, s) ? kMasked : acc;
    }
  }
};

std::vector<HostTensor> forward(const compiler::SdpaCall& call, std::span<const HostTensor> in) {
  const Inputs x(call, in);
  const auto& d = call.dims;
  std::vector<float> out(x.q.size(), 0.f), stats(static_cast<size_t>(d.B * d.N * d.T));
  std::vector<float> row(static_cast<size_t>(d.S));
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t n = 0; n < d.N; ++n)
      for (int64_t t = 0; t < d.T; ++t) {
        x.logits(b, n, t, row);
        float m = -FLT_MAX;
        for (float l : row) m = std::max(m, l);
        float sum = 0;
        for (float& l : row) sum += (l = std::exp(l - m));
        stats[static_cast<size_t>((b * d.N + n) * d.T + t)] = m + std::log(sum);
        float* o = &out[x.qi(b, t, n)];
        const int64_t kh = n / call.config.groups;
        for (int64_t s = 0; s < d.S; ++s) {
          // The probabilities in the inputs' dtype, as the "xla" path casts them.
          const float p = round_to(row[s] / sum, call.dtype);
          const float* vp = &x.v[x.ki(b, s, kh)];
          for (int64_t h = 0; h < d.H; ++h) o[h] += p * vp[h];
        }
      }
  std::vector<HostTensor> r{from_f32(out, call.dtype, in[0].shape())};
  if (call.with_stats) r.push_back(from_f32(stats, DType::F32, {d.B, d.N, d.T}));
  return r;
}

std::vector<HostTensor> backward(const compiler::SdpaCall& call, std::span<const HostTensor> in) {
  const Inputs x(call, in);
  const auto& d = call.dims;
  const size_t at = 3 + (call.config.has_bias ? 1 : 0) + (call.config.has_seq_lengths ? 2 : 0);
  const std::vector<float> out = to_f32(in[at]), stats = to_f32(in[at + 1]),
                           dout = to_f32(in[at + 2]);
  std::vector<float> dq(x.q.size(), 0.f), dk(x.k.size(), 0.f), dv(x.v.size(), 0.f);
  std::vector<float> row(static_cast<size_t>(d.S));
  const float scale = static_cast<float>(call.config.scale);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t n = 0; n < d.N; ++n)
      for (int64_t t = 0; t < d.T; ++t) {
        x.logits(b, n, t, row);
        const float lse = stats[static_cast<size_t>((b * d.N + n) * d.T + t)];
        const size_t i = x.qi(b, t, n);
        float delta = 0;  // row sum of d_out * out
        for (int64_t h = 0; h < d.H; ++h) delta += dout[i + h] * out[i + h];
        const int64_t kh = n / call.config.groups;
        for (int64_t s = 0; s < d.S; ++s) {
          const float p = std::exp(row[s] - lse);
          const size_t j = x.ki(b, s, kh);
          float dp = 0;
          for (int64_t h = 0; h < d.H; ++h) {
            dv[j + h] += p * dout[i + h];
            dp += dout[i + h] * x.v[j + h];
          }
          // Masked logits are constants: no gradient flows through them.
          if (x.masked(b, t, s)) continue;
          const float ds = p * (dp - delta) * scale;
          for (int64_t h = 0; h < d.H; ++h) {
            dq[i + h] += ds * x.k[j + h];
            dk[j + h] += ds * x.q[i + h];
          }
        }
      }
  return {from_f32(dq, call.dtype, in[0].shape()), from_f32(dk, call.dtype, in[1].shape()),
          from_f32(dv, call.dtype, in[2].shape())};
}

}  // namespace

Kernel sdpa_kernel(const ir::Operation& op, Compiler&) {
  const compiler::SdpaCall call = compiler::sdpa_call(op);
  return [call](std::span<const HostTensor> in, ExecContext&) {
    return call.backward ? backward(call, in) : forward(call, in);
  };
}

}  // namespace cujax::cpu
