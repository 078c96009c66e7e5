// nn.dot_product_attention(implementation="cudnn") without a GPU: each requirement's message,
// the custom calls in the lowered text, the cpu backend's reference kernels against the "xla"
// path (forward, backward; causal, bias, mask, sequence lengths, GQA), gradients against finite
// differences, vmap, the errors of a malformed call, and the graph the cuda backend gives cuDNN
// (its description's structure, and the description executed by an emulator against "xla").
#include <gtest/gtest.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compiler/sdpa_graph.h"
#include "cujax/core/half.h"
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

// The graph cuDNN runs, checked without cuDNN: sdpa_graph's description (the node list the cuda
// backend turns into descriptors) for the properties cuDNN's flash engines need, then executed
// by a small emulator of cuDNN's graph semantics (views by strides, broadcasting pointwise ops,
// reductions to divisors, batched matmuls with head broadcast and length overrides, reshapes as
// reinterpreted memory) against the "xla" path.
namespace g = compiler::sdpa_graph;

compiler::SdpaCall sdpa(bool backward, bool causal, bool bias, bool lengths, int64_t K,
                        DType t = DType::BF16) {
  compiler::SdpaCall c;
  c.backward = backward;
  c.with_stats = !backward;
  c.dtype = t;
  c.config.scale = 0.3;
  c.config.causal = causal;
  c.config.has_bias = bias;
  c.config.has_seq_lengths = lengths;
  c.dims = {2, 6, 4, 8, 5, K, 1, 4};  // B T N H S K bias_b bias_n: T != S names each axis
  c.config.groups = 4 / K;
  return c;
}

// Structural checks every description must pass; returns the first violation.
std::string structure_error(const g::Graph& graph) {
  std::map<int64_t, int> writes;
  std::set<int64_t> uids;
  for (const g::Tensor& t : graph.tensors) {
    if (!uids.insert(t.uid).second) return "tensor id " + std::to_string(t.uid) + " twice";
    if (t.dims.size() != 4 || t.strides.size() != 4) return "tensor " + std::to_string(t.uid);
    if (t.is_virtual != (t.uid >= g::kFirstVirtual)) return "virtual id " + std::to_string(t.uid);
  }
  for (const g::Op& op : graph.ops) {
    for (int64_t in : op.inputs) {
      if (!uids.count(in)) return op.name + " reads unknown id " + std::to_string(in);
      if (graph.tensor(in).is_virtual && !writes.count(in))
        return op.name + " reads " + std::to_string(in) + " before it is written";
    }
    if (!uids.count(op.output)) return op.name + " writes unknown id";
    if (graph.tensor(op.output).by_value) return op.name + " writes a by-value scalar";
    if (++writes[op.output] > 1) return op.name + " writes " + std::to_string(op.output) + " again";
    const g::Tensor& out = graph.tensor(op.output);
    const bool compare =
        op.kind == g::OpKind::kPointwise &&
        (op.pointwise == g::PointwiseMode::kCmpLt || op.pointwise == g::PointwiseMode::kCmpGe ||
         op.pointwise == g::PointwiseMode::kLogicalAnd);
    if (compare && (op.compute_type != g::DataType::kBoolean || out.type != g::DataType::kBoolean))
      return op.name + ": comparisons compute and write BOOLEAN";
    if (op.kind == g::OpKind::kPointwise && op.pointwise == g::PointwiseMode::kGenIndex &&
        (op.compute_type != g::DataType::kInt32 || out.type != g::DataType::kInt32))
      return op.name + ": indices compute and write INT32";
    if (op.kind == g::OpKind::kMatmul) {
      const auto &a = graph.tensor(op.inputs[0]).dims, &b = graph.tensor(op.inputs[1]).dims;
      const auto& c = out.dims;
      if (a[2] != c[2] || b[3] != c[3] || a[3] != b[2] || c[1] % a[1] || c[1] % b[1] ||
          a[0] != c[0] || b[0] != c[0])
        return op.name + ": operand dims do not multiply to its result";
    }
    if (op.kind == g::OpKind::kReduction)
      for (size_t d = 0; d < 4; ++d)
        if (graph.tensor(op.inputs[0]).dims[d] % out.dims[d]) return op.name + ": reduced dims";
  }
  for (const g::Tensor& t : graph.tensors)
    if (t.is_virtual && writes[t.uid] != 1)
      return "virtual " + std::to_string(t.uid) + " unwritten";
  return "";
}

const g::Op& op_named(const g::Graph& graph, const std::string& name) {
  for (const g::Op& op : graph.ops)
    if (op.name == name) return op;
  throw Error("no op " + name);
}
size_t position(const g::Graph& graph, const std::string& name) {
  return static_cast<size_t>(&op_named(graph, name) - graph.ops.data());
}

TEST(CudnnGraph, DescriptionsHaveTheStructureCudnnAccepts) {
  for (bool backward : {false, true})
    for (bool causal : {false, true})
      for (bool bias : {false, true})
        for (bool lengths : {false, true})
          for (int64_t K : {4, 2, 1}) {
            const compiler::SdpaCall c = sdpa(backward, causal, bias, lengths, K);
            SCOPED_TRACE(::testing::Message()
                         << "backward " << backward << " causal " << causal << " bias " << bias
                         << " lengths " << lengths << " K " << K);
            const g::Graph graph = g::describe(c);
            EXPECT_EQ(structure_error(graph), "");
            // Lengths bound both extents of every product that has them: T rows by q_len and
            // S rows by kv_len (T != S here, so the dims say which is which).
            for (const g::Op& op : graph.ops) {
              if (op.kind != g::OpKind::kMatmul) continue;
              const auto& a = graph.tensor(op.inputs[0]).dims;
              const auto& out = graph.tensor(op.output).dims;
              auto len = [&](int64_t extent) -> int64_t {
                return extent == c.dims.T ? g::kQLen : g::kKvLen;
              };
              if (!lengths) {
                EXPECT_EQ(op.m_override + op.n_override + op.k_override, 0) << op.name;
                continue;
              }
              EXPECT_EQ(op.m_override, len(out[2])) << op.name;
              const bool n_is_seq = out[3] == c.dims.T || out[3] == c.dims.S;
              EXPECT_EQ(op.n_override, n_is_seq ? len(out[3]) : 0) << op.name;
              const bool k_is_seq = !n_is_seq;
              EXPECT_EQ(op.k_override, k_is_seq ? len(a[3]) : 0) << op.name;
            }
            if (!backward) continue;
            // rowsum(dO * O): a real f32 (B, N, T, 1) tensor in the workspace.
            const g::Tensor& rowsum = graph.tensor(g::kRowSum);
            EXPECT_FALSE(rowsum.is_virtual);
            EXPECT_EQ(rowsum.type, g::DataType::kFloat);
            EXPECT_EQ(rowsum.dims, (std::vector<int64_t>{2, 4, 6, 1}));
            EXPECT_GE(rowsum.workspace_offset, 0);
            // exp stays f32; only P's transposed copy is in the io type.
            EXPECT_EQ(graph.tensor(op_named(graph, "exp").output).type, g::DataType::kFloat);
            EXPECT_EQ(graph.tensor(op_named(graph, "pt").output).type, g::DataType::kBFloat16);
            // The causal mask after the stats are subtracted, padding before.
            if (causal) {
              EXPECT_GT(position(graph, "causal_mask"), position(graph, "sub_stats"));
            }
            if (lengths) {
              EXPECT_LT(position(graph, "padding_mask"), position(graph, "sub_stats"));
            }
            // dQ through an f32 accumulator and an identity; K derived from K^T by a reshape.
            const g::Op& dq = op_named(graph, "dq");
            EXPECT_EQ(dq.pointwise, g::PointwiseMode::kIdentity);
            EXPECT_EQ(dq.inputs, std::vector<int64_t>{g::kDQAccum});
            EXPECT_EQ(graph.tensor(g::kDQAccum).type, g::DataType::kFloat);
            EXPECT_EQ(op_named(graph, "k").inputs, std::vector<int64_t>{g::kK});
            // GQA and MQA: dK and dV summed from N-head products.
            for (const char* name : {"pt_do", "dst_q"}) {
              const g::Op& mm = op_named(graph, name);
              if (K == 4) {
                EXPECT_TRUE(mm.output == g::kDV || mm.output == g::kDK) << name;
              } else {
                EXPECT_EQ(graph.tensor(mm.output).dims[1], 4) << name;
                EXPECT_EQ(op_named(graph, std::string(name) + "_heads").inputs,
                          std::vector<int64_t>{mm.output});
              }
            }
          }
  EXPECT_NE(g::known_bad_backward(91000), "");
  EXPECT_NE(g::known_bad_backward(91001).find("9.10.2 or newer"), std::string::npos);
  EXPECT_EQ(g::known_bad_backward(91002), "");
  EXPECT_EQ(g::known_bad_backward(91900), "");
}

// Executes a description as cuDNN defines its ops, in double (io-typed tensors rounded).
class GraphEmulator {
 public:
  explicit GraphEmulator(const g::Graph& graph) : graph_(graph) {}
  std::vector<double>& buffer(int64_t uid) {
    auto it = mem_.find(uid);
    if (it != mem_.end()) return it->second;
    const g::Tensor& t = graph_.tensor(uid);
    int64_t size = 1;
    for (size_t d = 0; d < 4; ++d) size += (t.dims[d] - 1) * t.strides[d];
    return mem_[uid] = std::vector<double>(static_cast<size_t>(size), 0.0);
  }
  void run() {
    for (const g::Op& op : graph_.ops) step(op);
  }

 private:
  using Index = std::array<int64_t, 4>;
  double at(int64_t uid, Index i) {
    const g::Tensor& t = graph_.tensor(uid);
    int64_t off = 0;
    for (size_t d = 0; d < 4; ++d) off += (t.dims[d] == 1 ? 0 : i[d]) * t.strides[d];
    return buffer(uid)[static_cast<size_t>(off)];
  }
  void put(int64_t uid, Index i, double v) {
    const g::Tensor& t = graph_.tensor(uid);
    if (t.type == g::DataType::kBFloat16) v = static_cast<float>(bfloat16(v));
    if (t.type == g::DataType::kHalf) v = static_cast<float>(float16(v));
    int64_t off = 0;
    for (size_t d = 0; d < 4; ++d) off += i[d] * t.strides[d];
    buffer(uid)[static_cast<size_t>(off)] = v;
  }
  template <class F>
  void each(const std::vector<int64_t>& dims, F f) {
    Index i{};
    for (i[0] = 0; i[0] < dims[0]; ++i[0])
      for (i[1] = 0; i[1] < dims[1]; ++i[1])
        for (i[2] = 0; i[2] < dims[2]; ++i[2])
          for (i[3] = 0; i[3] < dims[3]; ++i[3]) f(i);
  }
  int64_t bound(int64_t uid, int64_t b, int64_t extent) {
    return uid ? std::min<int64_t>(extent, static_cast<int64_t>(at(uid, {b, 0, 0, 0}))) : extent;
  }
  void step(const g::Op& op) {
    const g::Tensor& out = graph_.tensor(op.output);
    switch (op.kind) {
      case g::OpKind::kPointwise:
        each(out.dims, [&](Index i) {
          auto in = [&](size_t k) { return at(op.inputs[k], i); };
          double v = 0;
          switch (op.pointwise) {
            case g::PointwiseMode::kAdd:
              v = in(0) + in(1);
              break;
            case g::PointwiseMode::kSub:
              v = in(0) - in(1);
              break;
            case g::PointwiseMode::kMul:
              v = in(0) * in(1);
              break;
            case g::PointwiseMode::kDiv:
              v = in(0) / in(1);
              break;
            case g::PointwiseMode::kExp:
              v = std::exp(in(0));
              break;
            case g::PointwiseMode::kLog:
              v = std::log(in(0));
              break;
            case g::PointwiseMode::kIdentity:
              v = in(0);
              break;
            case g::PointwiseMode::kGenIndex:
              v = static_cast<double>(i[op.axis]);
              break;
            case g::PointwiseMode::kCmpLt:
              v = in(0) < in(1);
              break;
            case g::PointwiseMode::kCmpGe:
              v = in(0) >= in(1);
              break;
            case g::PointwiseMode::kLogicalAnd:
              v = in(0) != 0 && in(1) != 0;
              break;
            case g::PointwiseMode::kBinarySelect:
              v = in(2) != 0 ? in(0) : in(1);
              break;
          }
          put(op.output, i, v);
        });
        break;
      case g::OpKind::kReduction: {
        const g::Tensor& x = graph_.tensor(op.inputs[0]);
        std::map<Index, double> acc;
        each(x.dims, [&](Index i) {
          Index o;
          for (size_t d = 0; d < 4; ++d) o[d] = i[d] / (x.dims[d] / out.dims[d]);
          const double v = at(op.inputs[0], i);
          auto [it, fresh] = acc.emplace(o, v);
          if (!fresh)
            it->second =
                op.reduction == g::ReductionMode::kMax ? std::max(it->second, v) : it->second + v;
        });
        for (const auto& [o, v] : acc) put(op.output, o, v);
        break;
      }
      case g::OpKind::kMatmul: {
        const g::Tensor &a = graph_.tensor(op.inputs[0]), &b = graph_.tensor(op.inputs[1]);
        each(out.dims, [&](Index i) {
          const int64_t m = bound(op.m_override, i[0], out.dims[2]),
                        n = bound(op.n_override, i[0], out.dims[3]),
                        k = bound(op.k_override, i[0], a.dims[3]);
          if (i[2] >= m || i[3] >= n) return;  // left as it was: unwritten
          double sum = 0;
          for (int64_t j = 0; j < k; ++j)
            sum += at(op.inputs[0], {i[0], i[1] / (out.dims[1] / a.dims[1]), i[2], j}) *
                   at(op.inputs[1], {i[0], i[1] / (out.dims[1] / b.dims[1]), j, i[3]});
          put(op.output, i, sum);
        });
        break;
      }
      case g::OpKind::kReshape: {  // the same memory seen through other dims and strides
        const std::vector<double> x = buffer(op.inputs[0]);
        each(out.dims, [&](Index i) {
          int64_t off = 0;
          for (size_t d = 0; d < 4; ++d) off += i[d] * out.strides[d];
          put(op.output, i, x[static_cast<size_t>(off)]);
        });
        break;
      }
    }
  }
  const g::Graph& graph_;
  std::map<int64_t, std::vector<double>> mem_;
};

TEST(CudnnGraph, EmulatedGraphsMatchXla) {
  const std::vector<Case> cases = {
      {"full", false, false, false, false, 4, DType::F16},
      {"causal", true, false, false, false, 4, DType::BF16},
      {"bias", false, true, false, false, 4, DType::F16},
      {"lengths", true, false, false, true, 4, DType::F16},
      {"gqa", true, true, false, false, 2, DType::BF16},
      {"mqa lengths", false, false, false, true, 1, DType::F16},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.name);
    compiler::SdpaCall c = sdpa(false, cs.causal, cs.bias, cs.lengths, cs.K, cs.dtype);
    const auto& d = c.dims;
    const Array q = rand(21, {d.B, d.T, d.N, d.H}, cs.dtype),
                k = rand(22, {d.B, d.S, d.K, d.H}, cs.dtype),
                v = rand(23, {d.B, d.S, d.K, d.H}, cs.dtype),
                w = rand(24, {d.B, d.T, d.N, d.H}, DType::F32),
                bias_x = rand(25, {d.bias_b, d.bias_n, d.T, d.S}, cs.dtype);
    const Opt bias = cs.bias ? Opt(bias_x) : Opt{};
    const std::vector<int32_t> q_len{4, 6}, kv_len{5, 2};
    const Opt ql = cs.lengths ? Opt(jnp::array(q_len, Shape{d.B})) : Opt{};
    const Opt kl = cs.lengths ? Opt(jnp::array(kv_len, Shape{d.B})) : Opt{};
    auto xla = [&](const Array& a, const Array& b, const Array& e) {
      return nn::dot_product_attention(a, b, e, bias, Opt{}, 0.3, cs.causal, std::string("xla"), ql,
                                       kl);
    };
    // dO = w on the valid query rows: every gradient is specified.
    const Array keep =
        ql ? jnp::astype(jnp::less(lax::broadcasted_iota(DType::I32, {d.B, d.T, d.N, d.H}, 1),
                                   lax::broadcast_in_dim(*ql, {d.B, d.T, d.N, d.H}, {0})),
                         DType::F32)
           : jnp::ones({d.B, d.T, d.N, d.H});
    const Array dout = jnp::multiply(w, keep);
    auto loss = [&](const Array& a, const Array& b, const Array& e) {
      return jnp::sum(jnp::multiply(jnp::astype(xla(a, b, e), DType::F32), dout));
    };
    const auto [dq, dk, dv] = grad(loss, argnums<0, 1, 2>)(q, k, v);

    const g::Graph fwd = g::describe(c);
    GraphEmulator ef(fwd);
    auto feed = [&](GraphEmulator& em, const g::Graph& graph) {
      std::map<int64_t, std::vector<double>> inputs{{g::kQ, f64(q)},
                                                    {g::kK, f64(k)},
                                                    {g::kV, f64(v)},
                                                    {g::kBias, f64(bias_x)},
                                                    {g::kScale, {0.3}},
                                                    {g::kMaskFill, {-0.7 * FLT_MAX}},
                                                    {g::kOne, {1.0}},
                                                    {g::kQLen, {q_len.begin(), q_len.end()}},
                                                    {g::kKvLen, {kv_len.begin(), kv_len.end()}}};
      for (const g::Tensor& t : graph.tensors)
        if (auto it = inputs.find(t.uid); it != inputs.end()) em.buffer(t.uid) = it->second;
    };
    feed(ef, fwd);
    ef.run();
    const std::vector<double> out = ef.buffer(g::kO), stats = ef.buffer(g::kStats);
    const int64_t inner = d.N * d.H;
    expect_close(valid(out, ql, d.B, d.T, inner), valid(f64(xla(q, k, v)), ql, d.B, d.T, inner),
                 cs.dtype == DType::BF16 ? 2e-2 : 5e-3, "emulated output");

    c.backward = true;
    c.with_stats = false;
    const g::Graph bwd = g::describe(c);
    GraphEmulator eb(bwd);
    feed(eb, bwd);
    eb.buffer(g::kO) = out;
    eb.buffer(g::kStats) = stats;
    eb.buffer(g::kDO) = f64(dout);
    eb.run();
    const double tol = cs.dtype == DType::BF16 ? 4e-2 : 1e-2;
    expect_close(eb.buffer(g::kDQ), f64(dq), tol, "emulated d_query");
    expect_close(eb.buffer(g::kDK), f64(dk), tol, "emulated d_key");
    expect_close(eb.buffer(g::kDV), f64(dv), tol, "emulated d_value");
  }
}

}  // namespace
}  // namespace cujax
