// cuDNN's fused attention on a GPU (@cujax.cudnn_sdpa and its backward) against the cpu
// backend's reference kernels, which cudnn_attention_test checks against the "xla" path
// (compiled into cuda_test, label `gpu`). One test per case and direction, so that a graph cuDNN
// rejects fails its own test and hides no other: CudnnAttention.Forward* run the forward call
// alone, CudnnAttention.Gradient* the gradients of q, k and v (forward and backward calls).
// Relative error to the largest value under 1e-2. Without a usable device each test lowers and
// runs its program on the cpu backend, then SKIPs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/common/elementwise.h"
#include "cujax/core/error.h"
#include "cujax/grad.h"
#include "cujax/ir/parser.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/runtime/backend.h"
#include "host_compare.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using Opt = std::optional<Array>;

struct AttentionCase {
  bool causal, bias, lengths;
  int64_t K;  // key/value heads of N = 4 query heads
  DType dtype;
};

constexpr int64_t B = 2, T = 128, N = 4, H = 64;

// The case's program: the forward output on the valid query rows, or the gradients of
// sum(out * w) over them.
std::string lowered(const AttentionCase& c, bool gradients) {
  auto f = [c, gradients](const Array& q, const Array& k, const Array& v, const Array& w,
                          const Array& bias, const Array& lens) {
    const Opt b = c.bias ? Opt(bias) : Opt{};
    const Opt ql = c.lengths ? Opt(lax::slice(lens, {0}, {B})) : Opt{};
    const Opt kl = c.lengths ? Opt(lax::slice(lens, {B}, {2 * B})) : Opt{};
    const Array keep = c.lengths
                           ? jnp::astype(lax::lt(lax::broadcasted_iota(DType::I32, {B, T, N, H}, 1),
                                                 lax::broadcast_in_dim(*ql, {B, T, N, H}, {0})),
                                         DType::F32)
                           : jnp::ones({B, T, N, H});
    auto attn = [&](const Array& a, const Array& bb, const Array& d) {
      return jnp::astype(nn::dot_product_attention(a, bb, d, b, Opt{}, std::nullopt, c.causal,
                                                   std::string("cudnn"), ql, kl),
                         DType::F32);
    };
    if (!gradients) return std::vector<Array>{jnp::multiply(attn(q, k, v), keep)};
    auto loss = [&](const Array& a, const Array& bb, const Array& d) {
      return jnp::sum(jnp::multiply(jnp::multiply(attn(a, bb, d), w), keep));
    };
    const auto g = grad(loss, argnums<0, 1, 2>)(q, k, v);
    return std::vector<Array>{std::get<0>(g), std::get<1>(g), std::get<2>(g)};
  };
  const Shape qs{B, T, N, H}, ks{B, T, c.K, H};
  return jit(f)
      .lower(ShapeDtype{qs, c.dtype}, ShapeDtype{ks, c.dtype}, ShapeDtype{ks, c.dtype},
             ShapeDtype{qs, DType::F32}, ShapeDtype{{1, N, T, T}, c.dtype},
             ShapeDtype{{2 * B}, DType::I32})
      .as_text();
}

void check(const AttentionCase& c, bool gradients) {
  std::string text;
  try {
    text = lowered(c, gradients);
  } catch (const Error& e) {  // a machine whose cuDNN attention requirements fail
    GTEST_SKIP() << e.what();
  }
  auto module = ir::parse_module(text);
  std::mt19937 rng(77);
  auto normal = [&](DType t, Shape s) {
    HostTensor out(t, std::move(s));
    std::normal_distribution<double> nd(0.0, 1.0);
    visit_dtype(t, [&](auto tag) {
      using E = typename decltype(tag)::type;
      for (int64_t i = 0; i < out.size(); ++i)
        out.data_as<E>()[i] = ew::convert<E, double>(nd(rng));
    });
    return out;
  };
  const Shape qs{B, T, N, H}, ks{B, T, c.K, H};
  const std::vector<HostTensor> args{
      normal(c.dtype, qs),
      normal(c.dtype, ks),
      normal(c.dtype, ks),
      normal(DType::F32, qs),
      normal(c.dtype, {1, N, T, T}),
      HostTensor::from_vector(std::vector<int32_t>{100, 128, 77, 128}, {2 * B})};
  const auto cpu = runtime::get_backend("cpu").compile(*module)->execute_on_host(args);
  const std::string why = runtime::unavailable_reason("cuda");
  if (!why.empty()) GTEST_SKIP() << "no usable CUDA device: " << why;
  const auto gpu = runtime::get_backend("cuda").compile(*module)->execute_on_host(args);
  ASSERT_EQ(gpu.size(), cpu.size());
  const char* names[] = {"d_q", "d_k", "d_v"};
  for (size_t r = 0; r < cpu.size(); ++r) {
    double scale = 0;
    for (int64_t i = 0; i < cpu[r].size(); ++i)
      scale = std::max(scale, std::fabs(as_double(cpu[r], i)));
    expect_same(gpu[r], cpu[r], 0, 1e-2 * scale, gradients ? names[r] : "out");
  }
}

constexpr AttentionCase kFull{false, false, false, 4, DType::BF16};
constexpr AttentionCase kCausal{true, false, false, 4, DType::BF16};
constexpr AttentionCase kCausalF16{true, false, false, 4, DType::F16};
constexpr AttentionCase kBias{false, true, false, 4, DType::F16};
constexpr AttentionCase kLengths{true, false, true, 4, DType::BF16};
constexpr AttentionCase kGqa{true, false, false, 2, DType::BF16};
constexpr AttentionCase kMqa{false, false, false, 1, DType::F16};

TEST(CudnnAttention, ForwardFullBf16) {
  check(kFull, false);
}
TEST(CudnnAttention, ForwardCausalBf16) {
  check(kCausal, false);
}
TEST(CudnnAttention, ForwardCausalF16) {
  check(kCausalF16, false);
}
TEST(CudnnAttention, ForwardBiasF16) {
  check(kBias, false);
}
TEST(CudnnAttention, ForwardLengthsBf16) {
  check(kLengths, false);
}
TEST(CudnnAttention, ForwardGqaBf16) {
  check(kGqa, false);
}
TEST(CudnnAttention, ForwardMqaF16) {
  check(kMqa, false);
}
TEST(CudnnAttention, GradientFullBf16) {
  check(kFull, true);
}
TEST(CudnnAttention, GradientCausalBf16) {
  check(kCausal, true);
}
TEST(CudnnAttention, GradientCausalF16) {
  check(kCausalF16, true);
}
TEST(CudnnAttention, GradientBiasF16) {
  check(kBias, true);
}
TEST(CudnnAttention, GradientLengthsBf16) {
  check(kLengths, true);
}
TEST(CudnnAttention, GradientGqaBf16) {
  check(kGqa, true);
}
TEST(CudnnAttention, GradientMqaF16) {
  check(kMqa, true);
}

}  // namespace
}  // namespace cujax
