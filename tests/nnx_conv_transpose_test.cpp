// nnx::ConvTranspose and lax::conv_transpose against a direct scatter loop for every padding
// mode (SAME, VALID, CIRCULAR, explicit, int) with and without transpose_kernel, and against the
// gradient of nnx::Conv (the transpose of a convolution is its VJP in the input).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "cujax/grad.h"
#include "cujax/nnx.h"
#include "cujax/numpy.h"
#include "cujax/random.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;

std::vector<double> f64(const Array& a) {
  return jnp::astype(a, DType::F64).to_vector<double>();
}

void expect_close(const std::vector<double>& x, const std::vector<double>& y, double tol,
                  const std::string& what) {
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol) << what << " at " << i;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

Array normal(uint32_t seed, const Shape& shape, DType dtype = DType::F32) {
  return random::normal(random::PRNGKey(seed), shape, dtype);
}

// What the loop needs: strides, kernel dilation, the (low, high) padding of the stride-dilated
// input, and for CIRCULAR the period and the shift of the wrap.
struct ConvTRef {
  std::vector<int64_t> strides, dil;
  std::vector<std::pair<int64_t, int64_t>> pads;
  bool transpose_kernel = false;
  bool circular = false;
};

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = i % dims[d];
    i /= dims[d];
  }
  return idx;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t c = 1;
  for (int64_t e : v) c *= e;
  return c;
}

// The transposed convolution as a scatter: input position i sends x[i] * w[kk] to output
// i * stride + low - kk * dilation. Its kernel is (k..., in, out), or (k..., out, in) flipped
// with transpose_kernel. CIRCULAR: VALID, then the outputs wrap onto the period input * stride
// after Flax's shift (the odd pad on the low side, on the high side with transpose_kernel).
std::vector<double> conv_transpose_loop(const std::vector<double>& x, const Shape& xs,
                                        const std::vector<double>& k, const Shape& ks,
                                        const ConvTRef& r, Shape& out_shape) {
  const size_t n = ks.size() - 2;
  const int64_t B = xs[0], Cin = xs[n + 1];
  const int64_t Cout = r.transpose_kernel ? ks[n] : ks[n + 1];
  std::vector<int64_t> S(n), K(n), O(n), shift(n, 0);
  for (size_t d = 0; d < n; ++d) {
    S[d] = xs[d + 1];
    K[d] = ks[d];
    const int64_t keff = (K[d] - 1) * r.dil[d] + 1;
    const int64_t full = (S[d] - 1) * r.strides[d] + 1 + r.pads[d].first + r.pads[d].second;
    O[d] = full - keff + 1;
    if (r.circular) {
      const int64_t period = S[d] * r.strides[d];
      const int64_t diff = ((period - O[d]) % (2 * period) + 2 * period) % (2 * period);
      shift[d] = r.transpose_kernel ? diff / 2 : (diff + 1) / 2;
      O[d] = period;
    }
  }
  out_shape = {B};
  out_shape.insert(out_shape.end(), O.begin(), O.end());
  out_shape.push_back(Cout);
  std::vector<double> out(static_cast<size_t>(product(out_shape)), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t ii = 0; ii < product(S); ++ii) {
      const auto i = unravel(ii, S);
      for (int64_t ki = 0; ki < product(K); ++ki) {
        const auto kk = unravel(ki, K);
        int64_t flat = b;
        bool inside = true;
        for (size_t d = 0; d < n && inside; ++d) {
          int64_t o = i[d] * r.strides[d] + r.pads[d].first - kk[d] * r.dil[d];
          if (r.circular) o = ((o + shift[d]) % O[d] + O[d]) % O[d];
          inside = o >= 0 && o < O[d];
          flat = flat * O[d] + o;
        }
        if (!inside) continue;
        // The flipped kernel position for transpose_kernel.
        int64_t kflip = 0;
        for (size_t d = 0; d < n; ++d) kflip = kflip * K[d] + (K[d] - 1 - kk[d]);
        for (int64_t ci = 0; ci < Cin; ++ci)
          for (int64_t co = 0; co < Cout; ++co) {
            const double w = r.transpose_kernel ? k[(kflip * Cout + co) * Cin + ci]
                                                : k[(ki * Cin + ci) * Cout + co];
            out[flat * Cout + co] += x[(b * product(S) + ii) * Cin + ci] * w;
          }
      }
    }
  return out;
}

void check(const nnx::ConvTransposeOptions& o, const Shape& x_shape, int64_t in, int64_t out,
           const std::vector<int64_t>& ks, const ConvTRef& ref, const std::string& what) {
  nnx::Rngs rngs(3);
  nnx::ConvTransposeOptions opts = o;
  opts.bias_init = nn::initializers::normal(1.0);
  nnx::ConvTranspose conv(in, out, ks, rngs, opts);
  Shape want_k = ks;
  want_k.push_back(o.transpose_kernel ? out : in);
  want_k.push_back(o.transpose_kernel ? in : out);
  ASSERT_EQ(conv.kernel->value.shape(), want_k) << what;
  ASSERT_EQ(conv.bias->value.shape(), (Shape{out})) << what;
  const Array x = normal(7, x_shape);
  const Array y = conv(x);
  Shape shape;
  std::vector<double> want =
      conv_transpose_loop(f64(x), x_shape, f64(conv.kernel->value), want_k, ref, shape);
  const auto bias = f64(conv.bias->value);
  for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % out];
  ASSERT_EQ(y.shape(), shape) << what;
  expect_close(f64(y), want, 1e-4, what);
}

TEST(NnxConvTranspose, EveryPaddingModeAgainstAScatterLoop) {
  const Shape xs = {2, 4, 3, 3};
  const std::vector<int64_t> ks = {3, 2};
  for (bool tk : {false, true}) {
    const std::string t = tk ? " transpose_kernel" : "";
    nnx::ConvTransposeOptions o;
    o.transpose_kernel = tk;
    o.strides = {2, 1};
    // JAX's conv_transpose pads, by hand: SAME k=3 s=2 -> (2, 1), k=2 s=1 -> (1, 0): outputs
    // 4 * 2 and 3; VALID k=3 s=2 -> (2, 2), k=2 s=1 -> (1, 1): outputs 4 * 2 + 1 and 3 + 1.
    o.padding = std::string("SAME");
    check(o, xs, 3, 5, ks, {{2, 1}, {1, 1}, {{2, 1}, {1, 0}}, tk}, "SAME" + t);
    o.padding = std::string("VALID");
    check(o, xs, 3, 5, ks, {{2, 1}, {1, 1}, {{2, 2}, {1, 1}}, tk}, "VALID" + t);
    o.padding = std::string("CIRCULAR");  // VALID, wrapped onto (8, 3)
    check(o, xs, 3, 5, ks, {{2, 1}, {1, 1}, {{2, 2}, {1, 1}}, tk, true}, "CIRCULAR" + t);
    // Strides above k - 1: SAME k=3 s=3 -> (2, 2), k=2 s=3 -> (1, 2).
    o.strides = {3};
    o.padding = std::string("SAME");
    check(o, xs, 3, 5, ks, {{3, 3}, {1, 1}, {{2, 2}, {1, 2}}, tk}, "SAME stride 3" + t);
    o.padding = std::string("CIRCULAR");  // VALID k=3 s=3 -> (2, 2), k=2 s=3 -> (1, 2)
    check(o, xs, 3, 5, ks, {{3, 3}, {1, 1}, {{2, 2}, {1, 2}}, tk, true}, "CIRCULAR stride 3" + t);
    // Explicit pairs pad the stride-dilated input as given; an int p is (p, p).
    o.strides = {2, 1};
    o.kernel_dilation = {2, 1};
    o.padding = lax::Padding{{2, 0}, {1, 3}};
    check(o, xs, 3, 5, ks, {{2, 1}, {2, 1}, {{2, 0}, {1, 3}}, tk}, "explicit" + t);
    o.padding = int64_t{1};
    check(o, xs, 3, 5, ks, {{2, 1}, {2, 1}, {{1, 1}, {1, 1}}, tk}, "int" + t);
    // SAME with the dilated kernel (extent 5, s=2 -> (3, 2)).
    o.padding = std::string("SAME");
    check(o, xs, 3, 5, ks, {{2, 1}, {2, 1}, {{3, 2}, {1, 0}}, tk}, "SAME dilated" + t);
  }
}

TEST(NnxConvTranspose, OneAndThreeSpatialDimsAndBatchDims) {
  nnx::ConvTransposeOptions o;
  o.strides = {2};
  check(o, {3, 5, 2}, 2, 4, {4}, {{2}, {1}, {{2, 2}}, false}, "1-d SAME k=4 s=2");
  o.padding = std::string("CIRCULAR");
  check(o, {3, 5, 2}, 2, 4, {4}, {{2}, {1}, {{3, 3}}, false, true}, "1-d CIRCULAR k=4 s=2");
  o.strides = {1, 2, 1};
  o.padding = std::string("VALID");
  check(o, {1, 3, 2, 2, 2}, 2, 3, {2, 2, 3}, {{1, 2, 1}, {1, 1, 1}, {{1, 1}, {1, 1}, {2, 2}}},
        "3-d VALID");
  // Batch dimensions are flattened and restored; none is allowed.
  nnx::Rngs rngs(1);
  nnx::ConvTransposeOptions strided;
  strided.strides = {2};
  nnx::ConvTranspose conv(3, 2, {3, 3}, rngs, strided);
  const Array x = normal(2, {2, 3, 4, 4, 3});
  const Array y = conv(x);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 8, 8, 2}));
  const Array one = conv(jnp::reshape(x, {6, 4, 4, 3}));
  expect_close(f64(jnp::reshape(y, {6, 8, 8, 2})), f64(one), 1e-6, "batch dims");
  const Array single = conv(jnp::reshape(jnp::reshape(x, {6, 4, 4, 3})[0], {4, 4, 3}));
  expect_close(f64(single), f64(jnp::reshape(one[0], {8, 8, 2})), 1e-6, "no batch dim");
  EXPECT_EQ(nnx::count(conv), 3 * 3 * 3 * 2 + 2);
  EXPECT_NE(message_of([&] {
              conv(jnp::ones({2, 4, 4, 2}));
            }).find("nnx.ConvTranspose: input f32[2,4,4,2]"),
            std::string::npos);
  nnx::ConvTransposeOptions causal;
  causal.padding = std::string("CAUSAL");
  EXPECT_NE(message_of([&] {
              nnx::ConvTranspose c(2, 2, {3}, rngs, causal);
            }).find("padding must be SAME, VALID, CIRCULAR"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              lax::conv_transpose(jnp::ones({1, 4, 2}), jnp::ones({3, 2, 2}), {1}, "FULL");
            }).find("conv_transpose: padding must be SAME, VALID"),
            std::string::npos);
}

// With transpose_kernel and the same kernel as a Conv, the layer is that Conv's transpose: the
// VJP of Conv in its input, computed by autodiff. It holds for VALID (when the Conv covers its
// input exactly) and for CIRCULAR with odd kernels at these strides.
TEST(NnxConvTranspose, TransposeKernelIsTheGradientOfConv) {
  struct Case {
    std::string padding;
    int64_t k, s, size;
  };
  for (const Case& c : std::vector<Case>{{"VALID", 3, 2, 9},
                                         {"VALID", 4, 2, 8},
                                         {"VALID", 3, 1, 6},
                                         {"CIRCULAR", 3, 1, 6},
                                         {"CIRCULAR", 3, 2, 8},
                                         {"CIRCULAR", 5, 2, 8}}) {
    const std::string what = c.padding + " k=" + std::to_string(c.k) + " s=" + std::to_string(c.s);
    nnx::Rngs rngs(5);
    nnx::ConvOptions co;
    co.strides = {c.s};
    co.padding = c.padding;
    co.use_bias = false;
    co.param_dtype = DType::F64;
    nnx::Conv conv(3, 4, {c.k, c.k}, rngs, co);
    nnx::ConvTransposeOptions to;
    to.strides = {c.s};
    to.padding = c.padding;
    to.use_bias = false;
    to.transpose_kernel = true;
    to.param_dtype = DType::F64;
    nnx::ConvTranspose convt(4, 3, {c.k, c.k}, rngs, to);
    ASSERT_EQ(convt.kernel->value.shape(), conv.kernel->value.shape()) << what;
    convt.kernel->value = conv.kernel->value;
    const Array x = normal(8, {2, c.size, c.size, 3}, DType::F64);
    auto [y, vjp_fn] = cujax::vjp([&](const Array& in) { return conv(in); }, x);
    const Array ct = normal(9, y.shape(), DType::F64);
    const Array want = std::get<0>(vjp_fn(ct));
    const Array got = convt(ct);
    ASSERT_EQ(got.shape(), x.shape()) << what;
    expect_close(f64(got), f64(want), 1e-9, what);
  }
}

}  // namespace
}  // namespace cujax
