// vmap: each rule family against the unrolled computation (f applied example by example and
// stacked), in_axes 0/1/not_mapped and out_axes 0/1, per-example gradients, grad of vmap,
// the size-mismatch error and compilation under jit.
#include <gtest/gtest.h>

#include <functional>

#include "cujax/control_flow.h"
#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/numpy.h"
#include "cujax/random.h"
#include "cujax/trace/trace.h"
#include "cujax/vmap.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;

Array rnd(const Shape& shape, uint32_t seed = 1) {
  std::vector<float> v(static_cast<size_t>(num_elements(shape)));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(-1.0 + 2.0 * ((s >> 8) / double(1u << 24)));
  }
  return array(HostTensor::from_vector(v, shape));
}

// Example i of x along `axis`.
Array example(const Array& x, int64_t i, int64_t axis = 0) {
  return lax::squeeze(lax::slice_in_dim(x, i, i + 1, 1, axis), {axis});
}

// The unrolled reference: fn(i) for every i, stacked along `axis`.
Array unrolled(int64_t n, const std::function<Array(int64_t)>& fn, int64_t axis = 0) {
  std::vector<Array> ys;
  for (int64_t i = 0; i < n; ++i) ys.push_back(fn(i));
  return jnp::stack(ys, axis);
}

void expect_close(const Array& got, const Array& want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  const auto g = jnp::astype(got, DType::F64).to_vector<double>();
  const auto w = jnp::astype(want, DType::F64).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol) << "at " << i;
}

TEST(Vmap, ElementwiseInAxesAndOutAxes) {
  auto f = [](const Array& x, const Array& y) { return jnp::sin(x) * y + 2.0; };
  const Array x = rnd({3, 4}, 1), y = rnd({3, 4}, 2), yt = rnd({4, 3}, 3), c = rnd({4}, 4);
  expect_close(vmap(f)(x, y),
               unrolled(3, [&](int64_t i) { return f(example(x, i), example(y, i)); }));
  expect_close(vmap(f, {0, 1})(x, yt),
               unrolled(3, [&](int64_t i) { return f(example(x, i), example(yt, i, 1)); }));
  expect_close(vmap(f, {0, not_mapped})(x, c),
               unrolled(3, [&](int64_t i) { return f(example(x, i), c); }));
  expect_close(vmap(f, {not_mapped, 1}, 1)(c, yt),
               unrolled(
                   3, [&](int64_t i) { return f(c, example(yt, i, 1)); }, 1));
}

TEST(Vmap, SelectClampCompareConvert) {
  auto f = [](const Array& x, const Array& t) {
    Array m = jnp::where(x > t, x, -x);
    return jnp::astype(jnp::clip(m, -0.5, 0.5) * 10.0, DType::I32);
  };
  const Array x = rnd({5, 3}, 5), t = rnd({5}, 6);
  expect_close(vmap(f)(x, t),
               unrolled(5, [&](int64_t i) { return f(example(x, i), example(t, i)); }));
}

TEST(Vmap, MatrixVectorEqualsMatmul) {
  const Array m = rnd({4, 3}, 7), vs = rnd({6, 3}, 8);
  auto mv = vmap([](const Array& a, const Array& v) { return jnp::dot(a, v); }, {not_mapped, 0});
  expect_close(mv(m, vs), jnp::matmul(vs, jnp::transpose(m)));
  // Both batched (a batching dimension) and the vector side unbatched with out_axes 1.
  const Array ms = rnd({6, 4, 3}, 9);
  auto both = vmap([](const Array& a, const Array& v) { return jnp::dot(a, v); });
  expect_close(both(ms, vs),
               unrolled(6, [&](int64_t i) { return jnp::dot(example(ms, i), example(vs, i)); }));
  const Array v = rnd({3}, 10);
  auto left =
      vmap([](const Array& a, const Array& w) { return jnp::dot(a, w); }, {1, not_mapped}, 1);
  const Array ms1 = rnd({4, 6, 3}, 11);
  expect_close(left(ms1, v), unrolled(
                                 6, [&](int64_t i) { return jnp::dot(example(ms1, i, 1), v); }, 1));
}

TEST(Vmap, ShapeOps) {
  auto f = [](const Array& x) {
    Array a = jnp::reshape(jnp::transpose(x), {-1});
    Array b = jnp::concatenate({lax::slice(a, {1}, {5}), jnp::flip(a)});
    Array c = jnp::pad(b, {{1, 2}}, 3.0);
    return jnp::broadcast_to(c, {2, c.shape()[0]}) *
           jnp::expand_dims(jnp::array({1.0, 2.0}, std::nullopt, DType::F32), 1);
  };
  const Array x = rnd({4, 2, 3}, 12);
  expect_close(vmap(f)(x), unrolled(4, [&](int64_t i) { return f(example(x, i)); }));
  const Array x2 = rnd({2, 4, 3}, 13);
  expect_close(vmap(f, 1, 1)(x2), unrolled(
                                      4, [&](int64_t i) { return f(example(x2, i, 1)); }, 1));
}

TEST(Vmap, PadWithBatchedValue) {
  auto f = [](const Array& x, const Array& v) { return lax::pad(x, v, {{2, 1, 1}}); };
  const Array x = rnd({3, 4}, 14), v = rnd({3}, 15);
  expect_close(vmap(f)(x, v),
               unrolled(3, [&](int64_t i) { return f(example(x, i), example(v, i)); }));
}

TEST(Vmap, Reductions) {
  auto f = [](const Array& x) {
    const std::vector<Array> parts{jnp::sum(x, {0}), jnp::max(x, {0}),
                                   jnp::astype(jnp::argmax(x, 0), DType::F32),
                                   example(jnp::cumsum(x, 0), 0), example(jnp::sort(x, 0), 1)};
    return jnp::stack(parts);
  };
  const Array x = rnd({5, 4, 3}, 16);
  expect_close(vmap(f)(x), unrolled(5, [&](int64_t i) { return f(example(x, i)); }));
  expect_close(vmap(f, 2)(x), unrolled(3, [&](int64_t i) { return f(example(x, i, 2)); }));
}

TEST(Vmap, GatherAndScatter) {
  const Array xs = rnd({4, 6}, 17);
  const Array idx = jnp::array({1, 5, 0, 3, 2, 2, 4, 1}, Shape{4, 2}, DType::I32);
  auto take = [](const Array& x, const Array& i) { return jnp::take(x, i); };
  expect_close(vmap(take)(xs, idx),
               unrolled(4, [&](int64_t i) { return take(example(xs, i), example(idx, i)); }));
  const Array x = rnd({6}, 18);
  expect_close(vmap(take, {not_mapped, 0})(x, idx),
               unrolled(4, [&](int64_t i) { return take(x, example(idx, i)); }));
  const Array i0 = jnp::array({3, 1}, std::nullopt, DType::I32);
  expect_close(vmap(take, {0, not_mapped})(xs, i0),
               unrolled(4, [&](int64_t i) { return take(example(xs, i), i0); }));
  auto upd = [](const Array& x, const Array& i, const Array& u) { return jnp::at_add(x, {i}, u); };
  const Array us = rnd({4, 2}, 19);
  expect_close(vmap(upd)(xs, idx, us), unrolled(4, [&](int64_t i) {
                 return upd(example(xs, i), example(idx, i), example(us, i));
               }));
  expect_close(vmap(upd, {0, not_mapped, 0})(xs, i0, us),
               unrolled(4, [&](int64_t i) { return upd(example(xs, i), i0, example(us, i)); }));
}

TEST(Vmap, DynamicSliceWithBatchedStarts) {
  const Array xs = rnd({4, 6}, 20);
  const Array starts = jnp::array({0, 3, 5, -1}, std::nullopt, DType::I32);
  auto ds = [](const Array& x, const Array& s) { return lax::dynamic_slice_in_dim(x, s, 2); };
  expect_close(vmap(ds)(xs, starts),
               unrolled(4, [&](int64_t i) { return ds(example(xs, i), example(starts, i)); }));
  const Array x = rnd({6}, 21);
  expect_close(vmap(ds, {not_mapped, 0})(x, starts),
               unrolled(4, [&](int64_t i) { return ds(x, example(starts, i)); }));
  const Array u = rnd({4, 2}, 22);
  auto dus = [](const Array& x, const Array& up, const Array& s) {
    return lax::dynamic_update_slice_in_dim(x, up, s, 0);
  };
  expect_close(vmap(dus)(xs, u, starts), unrolled(4, [&](int64_t i) {
                 return dus(example(xs, i), example(u, i), example(starts, i));
               }));
}

TEST(Vmap, PerExampleGradients) {
  auto loss = [](const Array& w, const Array& x, const Array& y) {
    return jnp::sum(jnp::square(jnp::tanh(jnp::dot(x, w)) - y));
  };
  const Array w = rnd({3, 2}, 23), xs = rnd({5, 3}, 24), ys = rnd({5, 2}, 25);
  const Array g = vmap(grad(loss), {not_mapped, 0, 0})(w, xs, ys);
  expect_close(
      g, unrolled(5, [&](int64_t i) { return grad(loss)(w, example(xs, i), example(ys, i)); }));
  // grad of a function containing vmap: the sum of the per-example gradients.
  auto total = [&](const Array& wt) {
    return jnp::sum(vmap(loss, {not_mapped, 0, 0})(wt, xs, ys));
  };
  expect_close(grad(total)(w), jnp::sum(g, {0}));
}

TEST(Vmap, InconsistentSizes) {
  auto f = [](const Array& a, const Array& b) { return a + jnp::sum(b); };
  try {
    vmap(f, {0, 1})(rnd({3}), rnd({2, 4}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vmap got inconsistent sizes for array axes to be mapped: "
                                         "arg0 axis 0 has size 3, arg1 axis 1 has size 4"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(vmap(f, {not_mapped, not_mapped})(rnd({3}), rnd({3})), Error);
  EXPECT_THROW(vmap(f, {0, 2})(rnd({3}), rnd({3, 4})), Error);
}

TEST(Vmap, InsideJitCompilesOncePerShape) {
  auto g = jit([](const Array& m, const Array& vs) {
    return vmap([](const Array& a, const Array& v) { return jnp::dot(a, v); }, {not_mapped, 0})(m,
                                                                                                vs);
  });
  const Array m = rnd({4, 3}, 26);
  expect_close(g(m, rnd({5, 3}, 27)), jnp::matmul(rnd({5, 3}, 27), jnp::transpose(m)));
  g(m, rnd({5, 3}, 28));
  EXPECT_EQ(g.compile_count(), 1);
  g(m, rnd({7, 3}, 29));
  EXPECT_EQ(g.compile_count(), 2);
}

TEST(Vmap, TupleOutputsAndTreeLeafAxes) {
  auto f = [](const std::vector<Array>& p, const Array& x) {
    return std::make_pair(p[0] * x, jnp::sum(p[1] * x));
  };
  const std::vector<Array> p{rnd({3, 4}, 30), rnd({4}, 31)};
  const Array xs = rnd({3, 4}, 32);
  auto [a, b] = vmap(f, {leaf_axes({0, not_mapped}), 0}, {1, 0})(p, xs);
  expect_close(a, unrolled(
                      3,
                      [&](int64_t i) {
                        return f({example(p[0], i), p[1]}, example(xs, i)).first;
                      },
                      1));
  expect_close(b, unrolled(3, [&](int64_t i) {
                 return f({example(p[0], i), p[1]}, example(xs, i)).second;
               }));
}

TEST(Vmap, RandomOverKeys) {
  const Array keys = random::split(random::PRNGKey(0), 4);
  auto draw = [](const Array& k) { return random::uniform(k, {3}); };
  expect_close(vmap(draw)(keys),
               unrolled(4, [&](int64_t i) { return draw(random::key_at(keys, i)); }));
}

TEST(Vmap, StopGradientUnderGradOfVmap) {
  auto f = [](const Array& w, const Array& x) { return jnp::sum(stop_gradient(w * x) + w * x); };
  const Array w = rnd({3}, 33), xs = rnd({4, 3}, 34);
  // d/dw sum_i (sg(w x_i) + w x_i) = sum_i x_i: the stop_gradient half contributes nothing.
  auto total = [&](const Array& wt) { return jnp::sum(vmap(f, {not_mapped, 0})(wt, xs)); };
  expect_close(grad(total)(w), jnp::sum(xs, {0}));
}

}  // namespace
}  // namespace cujax

namespace cujax {
namespace {

TEST(Vmap, Convolution) {
  auto conv = [](const Array& x, const Array& k) {
    return lax::conv_general_dilated(x, k, {2, 1}, {{1, 0}, {1, 1}}, {}, {1, 2}, {}, 2);
  };
  const Array xs = rnd({3, 2, 4, 6, 5}, 31), ks = rnd({3, 4, 2, 2, 2}, 32);
  const Array x = example(xs, 0), k = example(ks, 0);
  // lhs batched (along axis 1), rhs batched, both batched (feature groups).
  const Array xs1 = jnp::moveaxis(xs, 0, 1);
  expect_close(vmap(conv, {1, not_mapped})(xs1, k),
               unrolled(3, [&](int64_t i) { return conv(example(xs, i), k); }));
  const Array k2s = rnd({3, 3, 4, 2, 2}, 35);
  expect_close(vmap(
                   [](const Array& a, const Array& b) {
                     return lax::conv_general_dilated(a, b, {1, 1}, {{0, 1}, {1, 0}});
                   },
                   {not_mapped, 0})(x, k2s),
               unrolled(3, [&](int64_t i) {
                 return lax::conv_general_dilated(x, example(k2s, i), {1, 1}, {{0, 1}, {1, 0}});
               }));
  expect_close(vmap(conv)(xs, ks),
               unrolled(3, [&](int64_t i) { return conv(example(xs, i), example(ks, i)); }));
}

// select_and_scatter (as in JAX-exported max-pool gradients), recorded directly.
Array select_and_scatter_add(const Array& operand, const Array& source) {
  trace::OpSpec s;
  s.name = "stablehlo.select_and_scatter";
  s.attributes = {{"window_dimensions", ir::Attribute::dense_array({2, 3}, DType::I64)},
                  {"window_strides", ir::Attribute::dense_array({2, 2}, DType::I64)}};
  s.result_types = {trace::ir_type(operand.aval())};
  const ShapeDtype e{{}, operand.dtype(), false};
  auto region = [e](bool select) {
    return [e, select](trace::TraceContext& tc, ir::Block& block) {
      tc.trace_region(block, {e, e}, [select](const std::vector<Array>& v) {
        return std::vector<Array>{select ? lax::ge(v[0], v[1]) : lax::add(v[0], v[1])};
      });
    };
  };
  s.regions = {region(true), region(false)};
  return trace::bind1(s, {operand, source, lax::full({}, 0.0, operand.dtype())});
}

TEST(Vmap, SelectAndScatter) {
  const Array xs = rnd({4, 6, 7}, 33), srcs = rnd({4, 3, 3}, 34);
  expect_close(vmap(select_and_scatter_add)(xs, srcs), unrolled(4, [&](int64_t i) {
                 return select_and_scatter_add(example(xs, i), example(srcs, i));
               }));
  const Array src = example(srcs, 1);
  expect_close(vmap(select_and_scatter_add, {0, not_mapped})(xs, src),
               unrolled(4, [&](int64_t i) { return select_and_scatter_add(example(xs, i), src); }));
}

}  // namespace
}  // namespace cujax

namespace cujax {
namespace {

// A loop body closing over a mapped argument is batched rather than kept with the unbatched
// stand-in: the carry becomes batched through the body (the fixpoint).
TEST(Vmap, LoopCapturingMappedValue) {
  auto f = [](const Array& x) {
    return lax::fori_loop(
        0, 3,
        [&](const Array& i, const Array& c) { return c * 0.5 + x * jnp::astype(i, DType::F32); },
        lax::full({2}, 1.0, DType::F32));
  };
  const Array xs = rnd({4, 2}, 36);
  expect_close(vmap(f)(xs), unrolled(4, [&](int64_t i) { return f(example(xs, i)); }));
  // Nested loops, the inner one closing over the mapped value and the outer carry.
  auto g = [](const Array& x) {
    return lax::fori_loop(
        0, 2,
        [&](const Array&, const Array& c) {
          return lax::fori_loop(
              0, 3, [&](const Array&, const Array& d) { return jnp::sin(d + c * x); }, c);
        },
        x);
  };
  expect_close(vmap(g)(xs), unrolled(4, [&](int64_t i) { return g(example(xs, i)); }));
}

// Per-lane iteration counts: the predicate is batched, so the loop runs until every lane is
// done and finished lanes keep their values.
TEST(Vmap, WhileWithBatchedPredicate) {
  auto f = [](const Array& n, const Array& x) {
    const std::vector<Array> out = lax::while_loop(
        [&](const std::vector<Array>& v) { return lax::lt(v[0], n); },
        [&](const std::vector<Array>& v) {
          return std::vector<Array>{v[0] + 1, v[1] * 1.5 + jnp::astype(v[0], DType::F32)};
        },
        std::vector<Array>{lax::full({}, 0, DType::I32), x});
    return std::make_pair(out[0], out[1]);
  };
  const Array ns = array(HostTensor::from_vector(std::vector<int32_t>{0, 3, 1, 5}, {4}));
  const Array xs = rnd({4, 3}, 37);
  auto [is, ys] = vmap(f)(ns, xs);
  EXPECT_EQ(is.to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 1, 5}));
  expect_close(ys,
               unrolled(4, [&](int64_t i) { return f(example(ns, i), example(xs, i)).second; }));
  // x shared: it becomes batched because the lanes stop at different steps; under jit too.
  const Array x = example(xs, 2);
  auto [is2, ys2] = jit(vmap(f, {0, not_mapped}))(ns, x);
  EXPECT_EQ(is2.to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 1, 5}));
  expect_close(ys2, unrolled(4, [&](int64_t i) { return f(example(ns, i), x).second; }));
  // The predicate depending on the batched carry (halving until below a per-lane bound).
  auto h = [](const Array& v) {
    return lax::while_loop(
        [](const Array& a) { return lax::gt(jnp::sum(jnp::abs(a)), scalar(0.1, DType::F32)); },
        [](const Array& a) { return a * 0.5; }, v);
  };
  const Array vs = rnd({5, 3}, 38) * 4.0;
  expect_close(vmap(h)(vs), unrolled(5, [&](int64_t i) { return h(example(vs, i)); }));
}

TEST(Vmap, ScanAndPerExampleGradOfScan) {
  const Array w = rnd({3}, 39);
  auto f = [&](const Array& c0, const Array& xs) {
    return lax::scan(
        [&](const Array& c, const Array& x) {
          const Array n = jnp::tanh(c * w + x);
          return std::make_pair(n, jnp::sum(n * x));
        },
        c0, xs);
  };
  const Array c0s = rnd({4, 3}, 40), xss = rnd({4, 5, 3}, 41);
  auto [cs, ys] = vmap(f)(c0s, xss);
  expect_close(cs,
               unrolled(4, [&](int64_t i) { return f(example(c0s, i), example(xss, i)).first; }));
  expect_close(ys,
               unrolled(4, [&](int64_t i) { return f(example(c0s, i), example(xss, i)).second; }));
  // xs mapped along axis 1, the initial carry shared.
  const Array c0 = example(c0s, 0), xs1 = jnp::moveaxis(xss, 0, 1);
  expect_close(vmap(f, {not_mapped, 1})(c0, xs1).second,
               unrolled(4, [&](int64_t i) { return f(c0, example(xss, i)).second; }));
  // Per-example gradients: grad's backward scans batched.
  auto loss = [&](const Array& c, const Array& xs) { return jnp::sum(f(c, xs).second); };
  expect_close(vmap(grad(loss))(c0s, xss), unrolled(4, [&](int64_t i) {
                 return grad(loss)(example(c0s, i), example(xss, i));
               }));
  // grad of vmap: the batched scan is still a scan, so it is reverse-differentiable; the loss is
  // a sum over examples, so row i of its gradient is example i's.
  auto total = [&](const Array& c, const Array& x) { return jnp::sum(vmap(f)(c, x).second); };
  const auto [gc, gx] = grad(total, argnums<0, 1>)(c0s, xss);
  expect_close(
      gc, unrolled(4, [&](int64_t i) { return grad(loss)(example(c0s, i), example(xss, i)); }));
  expect_close(gx, unrolled(4, [&](int64_t i) {
                 return grad(loss, argnums<1>)(example(c0s, i), example(xss, i));
               }));
}

// cond / switch with a batched index select per lane; with a shared index each branch is
// batched.
TEST(Vmap, CondAndSwitch) {
  auto f = [](const Array& x) {
    return lax::cond(
        lax::gt(jnp::sum(x), scalar(0.0, DType::F32)),
        [](const Array& v) { return jnp::sin(v) * 2.0; }, [](const Array& v) { return v - 1.0; },
        x);
  };
  const Array xs = rnd({6, 3}, 42);
  expect_close(vmap(f)(xs), unrolled(6, [&](int64_t i) { return f(example(xs, i)); }));
  std::vector<std::function<Array(const Array&)>> branches{
      [](const Array& v) { return v + 1.0; }, [](const Array& v) { return v * 3.0; },
      [](const Array& v) { return jnp::cos(v); }};
  auto g = [&](const Array& i, const Array& x) { return lax::switch_(i, branches, x); };
  const Array is = array(HostTensor::from_vector(std::vector<int32_t>{2, 0, -1, 1, 7, 1}, {6}));
  expect_close(vmap(g)(is, xs),
               unrolled(6, [&](int64_t i) { return g(example(is, i), example(xs, i)); }));
  const Array x = example(xs, 3);
  expect_close(jit(vmap(g, {0, not_mapped}))(is, x),
               unrolled(6, [&](int64_t i) { return g(example(is, i), x); }));
  // Shared index, branches closing over the mapped value; under grad of vmap.
  auto h = [&](const Array& p, const Array& v) {
    return lax::cond(
        p, [&](const Array& s) { return s * v; }, [&](const Array& s) { return s + jnp::sin(v); },
        lax::full({3}, 2.0, DType::F32));
  };
  for (bool p : {true, false}) {
    const Array pa = scalar(p);
    expect_close(vmap(h, {not_mapped, 0})(pa, xs),
                 unrolled(6, [&](int64_t i) { return h(pa, example(xs, i)); }));
    auto total = [&](const Array& v) { return jnp::sum(vmap(h, {not_mapped, 0})(pa, v)); };
    expect_close(grad(total)(xs), p ? jnp::full_like(xs, 2.0) : jnp::cos(xs));
  }
}

}  // namespace
}  // namespace cujax
