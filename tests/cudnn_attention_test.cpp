// nn.dot_product_attention(implementation="cudnn") without a GPU: each requirement's message,
// the custom calls in the lowered text, the cpu backend's reference kernels against the "xla"
// path (forward, backward; causal, bias, mask, sequence lengths, GQA), gradients against finite
// differences, vmap, and the errors of a malformed call.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cujax/export.h"
#include "cujax/grad.h"
#include "cujax/ir/parser.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/nn.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "cujax/runtime/backend.h"
#include "cujax/vmap.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;
using Opt = std::optional<Array>;

Array rand(uint32_t seed, const Shape& s, DType t) {
  return random::normal(random::PRNGKey(seed), s, t);
}

std::vector<double> f64(const Array& x) {
  return jnp::astype(x, DType::F64).to_vector<double>();
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    FAIL() << "no error, expected one containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(CudnnAttention, EachRequirementIsNamed) {
  const Array q = jnp::zeros({1, 4, 2, 64}, DType::BF16);
  nn::CudnnAttentionDevice h200{false, 90, 91900, ""};
  EXPECT_FALSE(nn::cudnn_attention_unmet(q, q, h200));
  auto unmet = [](const Array& x, const nn::CudnnAttentionDevice& d) {
    auto why = nn::cudnn_attention_unmet(x, x, d);
    return why ? *why : std::string("(met)");
  };
  EXPECT_NE(unmet(jnp::zeros({1, 4, 2, 64}), h200).find("float16 or bfloat16, got f32"),
            std::string::npos);
  EXPECT_NE(unmet(jnp::zeros({4, 2, 64}, DType::F16), h200).find("rank-4 inputs in the BTNH"),
            std::string::npos);
  EXPECT_NE(unmet(jnp::zeros({1, 4, 2, 12}, DType::F16), h200).find("multiple of 8"),
            std::string::npos);
  const Array h256 = jnp::zeros({1, 4, 2, 256}, DType::F16);
  EXPECT_EQ(unmet(h256, h200), "(met)");
  nn::CudnnAttentionDevice a100{false, 80, 91900, ""};
  EXPECT_NE(unmet(h256, a100).find("at most 128 (256 on compute capability 9.0), got 256"),
            std::string::npos);
  EXPECT_NE(unmet(jnp::zeros({1, 4, 2, 264}, DType::F16), h200).find("got 264"), std::string::npos);
  EXPECT_NE(unmet(q, {false, 75, 91900, ""}).find("compute capability >= 8.0, got 7.5"),
            std::string::npos);
  EXPECT_NE(unmet(q, {false, 90, 0, "libcudnn.so.9: cannot open"})
                .find("cuDNN is not detected (libcudnn.so.9: cannot open)"),
            std::string::npos);
  EXPECT_NE(unmet(q, {false, 90, 80907, ""}).find("needs cuDNN 9.0.0 or newer, found 8.9.7"),
            std::string::npos);
  // The cpu backend runs the reference kernels: no device requirement.
  EXPECT_TRUE(nn::cudnn_attention_device("cpu").reference);
  EXPECT_EQ(unmet(q, nn::cudnn_attention_device("cpu")), "(met)");
  expect_error(
      [] {
        const Array x = jnp::zeros({1, 4, 2, 64});
        nn::dot_product_attention(x, x, x, Opt{}, Opt{}, std::nullopt, false, std::string("cudnn"));
      },
      "implementation='cudnn' needs query, key and value in float16 or bfloat16, got f32");
  expect_error(
      [] {
        const Array x = jnp::zeros({1, 4, 2, 64}, DType::F16);
        nn::dot_product_attention(x, x, x, Opt{}, Opt{}, std::nullopt, false, std::nullopt,
                                  jnp::array(std::vector<int32_t>{4}, Shape{1}));
      },
      "both query_seq_lengths and key_value_seq_lengths");
}

Array attention(const Array& q, const Array& k, const Array& v, const Opt& bias, const Opt& mask,
                bool causal, const Opt& ql, const Opt& kl, const char* impl) {
  return nn::dot_product_attention(q, k, v, bias, mask, 0.3, causal, std::string(impl), ql, kl);
}

TEST(CudnnAttention, LowersToTheCustomCalls) {
  auto loss = [](const Array& q, const Array& k, const Array& v) {
    return jnp::sum(jnp::astype(
        nn::dot_product_attention(q, k, v, Opt{}, Opt{}, std::nullopt, true, std::string("cudnn")),
        DType::F32));
  };
  const ShapeDtype qs{{2, 16, 4, 64}, DType::BF16}, ks{{2, 16, 2, 64}, DType::BF16};
  const std::string fwd = jit(loss).lower(qs, ks, ks).as_text();
  EXPECT_NE(fwd.find("stablehlo.custom_call @cujax.cudnn_sdpa("), std::string::npos) << fwd;
  EXPECT_NE(fwd.find("mask_type = \"causal\""), std::string::npos) << fwd;
  EXPECT_NE(fwd.find("groups = 2"), std::string::npos) << fwd;
  EXPECT_NE(fwd.find("layout = \"BTNH\""), std::string::npos) << fwd;
  EXPECT_EQ(fwd.find("cudnn_sdpa_bwd"), std::string::npos) << fwd;
  // Differentiated: the forward also returns the stats, which the backward call consumes.
  const std::string bwd = jit(grad(loss, argnums<0, 1, 2>)).lower(qs, ks, ks).as_text();
  EXPECT_NE(bwd.find("@cujax.cudnn_sdpa_bwd("), std::string::npos) << bwd;
  EXPECT_NE(bwd.find("tensor<2x4x16xf32>"), std::string::npos) << bwd;
  // The printed form parses back.
  EXPECT_NO_THROW(ir::parse_module(bwd));
  // implementation=None on the cpu backend records the "xla" form, and says why when compile
  // logging is on.
  set_log_compiles(true);
  testing::internal::CaptureStderr();
  const std::string none = jit([](const Array& q, const Array& k, const Array& v) {
                             return nn::dot_product_attention(q, k, v);
                           })
                               .lower(qs, ks, ks)
                               .as_text();
  const std::string log = testing::internal::GetCapturedStderr();
  set_log_compiles(false);
  EXPECT_EQ(none.find("custom_call"), std::string::npos) << none;
  EXPECT_NE(log.find("dot_product_attention bf16[2,16,4,64] bf16[2,16,2,64]: implementation "
                     "xla (the cpu backend runs the xla form)"),
            std::string::npos)
      << log;
}

struct Case {
  const char* name;
  bool causal, bias, mask, lengths;
  int64_t K;  // key/value heads (of 4 query heads)
  DType dtype;
};

// Query positions past the query length are unspecified: compared where t < q_len[b].
std::vector<double> valid(const std::vector<double>& x, const Opt& ql, int64_t B, int64_t T,
                          int64_t inner) {
  if (!ql) return x;
  const auto lens = ql->to_vector<int32_t>();
  std::vector<double> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < lens[b]; ++t)
      for (int64_t i = 0; i < inner; ++i) out.push_back(x[(b * T + t) * inner + i]);
  return out;
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double rel,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  double scale = 0;
  for (double x : b) scale = std::max(scale, std::abs(x));
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], rel * scale + 1e-3) << what << " at " << i;
}

TEST(CudnnAttention, ReferenceKernelsMatchXla) {
  const std::vector<Case> cases = {
      {"full", false, false, false, false, 4, DType::F16},
      {"causal", true, false, false, false, 4, DType::BF16},
      {"bias", false, true, false, false, 4, DType::F16},
      {"mask", false, false, true, false, 4, DType::F16},
      {"lengths", true, false, false, true, 4, DType::F16},
      {"gqa", true, true, false, false, 2, DType::BF16},
      {"mqa", false, false, false, true, 1, DType::F16},
  };
  const int64_t B = 2, T = 8, S = 8, N = 4, H = 16;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Array q = rand(1, {B, T, N, H}, c.dtype), k = rand(2, {B, S, c.K, H}, c.dtype),
                v = rand(3, {B, S, c.K, H}, c.dtype), w = rand(4, {B, T, N, H}, DType::F32);
    const Opt bias = c.bias ? Opt(rand(5, {1, N, T, S}, c.dtype)) : Opt{};
    const Opt mask =
        c.mask
            ? Opt(jnp::greater(rand(6, {B, 1, T, S}, DType::F32), jnp::full({}, -0.8, DType::F32)))
            : Opt{};
    const Opt ql = c.lengths ? Opt(jnp::array(std::vector<int32_t>{5, 8}, Shape{B})) : Opt{};
    const Opt kl = c.lengths ? Opt(jnp::array(std::vector<int32_t>{6, 3}, Shape{B})) : Opt{};
    const double tol = c.dtype == DType::BF16 ? 2e-2 : 5e-3;
    auto out = [&](const char* impl) {
      return valid(f64(attention(q, k, v, bias, mask, c.causal, ql, kl, impl)), ql, B, T, N * H);
    };
    expect_close(out("cudnn"), out("xla"), tol, "output");
    // The loss sees only the valid query rows, so every gradient is specified.
    const Array keep =
        ql ? jnp::astype(jnp::less(lax::broadcasted_iota(DType::I32, {B, T, N, H}, 1),
                                   lax::broadcast_in_dim(*ql, {B, T, N, H}, {0})),
                         DType::F32)
           : jnp::ones({B, T, N, H});
    auto grads = [&](const char* impl) {
      auto loss = [&](const Array& a, const Array& b, const Array& d) {
        return jnp::sum(jnp::multiply(
            jnp::multiply(
                jnp::astype(attention(a, b, d, bias, mask, c.causal, ql, kl, impl), DType::F32), w),
            keep));
      };
      return grad(loss, argnums<0, 1, 2>)(q, k, v);
    };
    const auto gc = grads("cudnn"), gx = grads("xla");
    expect_close(f64(std::get<0>(gc)), f64(std::get<0>(gx)), 2 * tol, "d_query");
    expect_close(f64(std::get<1>(gc)), f64(std::get<1>(gx)), 2 * tol, "d_key");
    expect_close(f64(std::get<2>(gc)), f64(std::get<2>(gx)), 2 * tol, "d_value");
  }
}

TEST(CudnnAttention, GradAgainstFiniteDifferences) {
  // f16 inputs: steps large enough for f16's resolution, a loose tolerance.
  const int64_t B = 1, T = 4, N = 2, H = 8;
  const Array q = rand(7, {B, T, N, H}, DType::F16), k = rand(8, {B, T, 1, H}, DType::F16),
              v = rand(9, {B, T, 1, H}, DType::F16), w = rand(10, {B, T, N, H}, DType::F32);
  auto loss = [&](const Array& a, const Array& b, const Array& d) {
    return jnp::sum(jnp::multiply(
        jnp::astype(attention(a, b, d, Opt{}, Opt{}, true, Opt{}, Opt{}, "cudnn"), DType::F32), w));
  };
  const auto g = grad(loss, argnums<0, 1, 2>)(q, k, v);
  const std::vector<Array> args{q, k, v};
  const std::vector<std::vector<double>> gs{f64(std::get<0>(g)), f64(std::get<1>(g)),
                                            f64(std::get<2>(g))};
  const double eps = 0.125;  // exact in f16 around values of magnitude < 4
  for (size_t which = 0; which < 3; ++which) {
    const auto x = f64(args[which]);
    for (size_t i = 0; i < x.size(); i += 3) {
      auto at = [&](double d) {
        auto xs = x;
        xs[i] += d;
        std::vector<Array> a = args;
        a[which] = jnp::astype(jnp::array(xs, args[which].shape()), DType::F16);
        return static_cast<double>(loss(a[0], a[1], a[2]).item<float>());
      };
      EXPECT_NEAR(gs[which][i], (at(eps) - at(-eps)) / (2 * eps),
                  0.05 + 0.05 * std::abs(gs[which][i]))
          << which << " " << i;
    }
  }
}

TEST(CudnnAttention, VmapFoldsIntoTheBatch) {
  const Array q = rand(11, {3, 2, 8, 4, 16}, DType::F16),
              k = rand(12, {3, 2, 8, 2, 16}, DType::F16);
  const Array bias = rand(13, {1, 4, 8, 8}, DType::F16);
  auto f = [&](const Array& a, const Array& b) {
    return attention(a, b, b, bias, Opt{}, true, Opt{}, Opt{}, "cudnn");
  };
  const Array batched = vmap(f, 0)(q, k);
  for (int64_t i = 0; i < 3; ++i)
    expect_close(f64(jnp::at(batched, {i})), f64(f(jnp::at(q, {i}), jnp::at(k, {i}))), 1e-3,
                 "vmap element " + std::to_string(i));
}

TEST(CudnnAttention, MalformedCallsAreRejected) {
  auto f = [](const Array& q) {
    return nn::dot_product_attention(q, q, q, Opt{}, Opt{}, std::nullopt, false,
                                     std::string("cudnn"));
  };
  const std::string text = jit(f).lower(ShapeDtype{{1, 8, 2, 16}, DType::F16}).as_text();
  auto compile_with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << t;
    t.replace(at, from.size(), to);
    runtime::get_backend("cpu").compile(*ir::parse_module(t));
  };
  // The generic form cuda_bench writes by hand parses and compiles.
  const std::string ty = "tensor<1x8x2x16xbf16>";
  const std::string generic =
      "func.func @main(%q: " + ty + ") -> " + ty +
      " {\n  %0 = \"stablehlo.custom_call\"(%q, %q, %q) {call_target_name = "
      "\"cujax.cudnn_sdpa\", api_version = 4 : i32, backend_config = {causal = true, "
      "dropout_rate = 0.0 : f64, groups = 1 : i64, has_bias = false, has_seq_lengths = false, "
      "layout = \"BTNH\", mask_type = \"causal\", scale = 0.25 : f64}} : (" +
      ty + ", " + ty + ", " + ty + ") -> " + ty + "\n  return %0 : " + ty + "\n}\n";
  EXPECT_NO_THROW(runtime::get_backend("cpu").compile(*ir::parse_module(generic)));
  expect_error([&] { compile_with("dropout_rate = 0.000000e+00", "dropout_rate = 1.000000e-01"); },
               "dropout is not supported");
  expect_error([&] { compile_with("layout = \"BTNH\"", "layout = \"BNTH\""); },
               "layout 'BNTH' is not supported");
  expect_error([&] { compile_with("groups = 1", "groups = 3"); }, "query heads per key head");
}

TEST(CudnnAttention, ExportRecordsOrLowersTheCustomCall) {
  auto f = jit([](const Array& q, const Array& k) {
    return nn::dot_product_attention(q, k, k, Opt{}, Opt{}, std::nullopt, true,
                                     std::string("cudnn"));
  });
  const ShapeDtype qs{{1, 8, 4, 16}, DType::F16}, ks{{1, 8, 2, 16}, DType::F16};
  const Exported plain = export_(f, qs, ks);
  EXPECT_EQ(plain.cujax_custom_calls(), std::vector<std::string>{"cujax.cudnn_sdpa"});
  // The header (the third line) names it for readers that do not parse the module.
  const std::string bytes = plain.serialize();
  const size_t h = bytes.find('\n', bytes.find('\n') + 1) + 1;
  const std::string header = bytes.substr(h, bytes.find('\n', h) - h);
  EXPECT_NE(header.find("\"cujax_custom_calls\""), std::string::npos) << header;
  EXPECT_NE(header.find("\"cujax.cudnn_sdpa\""), std::string::npos) << header;
  const Exported loaded = Exported::deserialize(plain.serialize());
  EXPECT_EQ(loaded.cujax_custom_calls(), std::vector<std::string>{"cujax.cudnn_sdpa"});
  ExportOptions options;
  options.portable = true;
  const Exported portable = export_(f, options, qs, ks);
  EXPECT_TRUE(portable.cujax_custom_calls().empty());
  EXPECT_EQ(portable.serialize().find("cujax_custom_calls"), std::string::npos);
  EXPECT_EQ(portable.mlir_module().find("custom_call"), std::string::npos)
      << portable.mlir_module();
  const Array q = rand(14, {1, 8, 4, 16}, DType::F16), k = rand(15, {1, 8, 2, 16}, DType::F16);
  expect_close(f64(plain.call_flat({q, k})[0]), f64(portable.call_flat({q, k})[0]), 5e-3,
               "plain vs portable");
}

}  // namespace
}  // namespace cujax
