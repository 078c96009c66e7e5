// jit: caching by signature, recompilation reasons, concretization errors, stages, donation,
// the transfer guard and the persistent cache.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <thread>

#include "cujax/ir/parser.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/numpy.h"
#include "cujax/runtime/backend.h"
#include "cujax/transfer_guard.h"

namespace cujax {
namespace {

namespace jnp = cujax::numpy;

JitOptions named(std::string name) {
  JitOptions o;
  o.name = std::move(name);
  return o;
}

Array f32(std::vector<float> v, Shape s) {
  return array(HostTensor::from_vector(v, std::move(s)));
}

TEST(Jit, CompilesOncePerSignature) {
  auto f = jit([](const Array& x, const Array& y) { return x * y + 1.0; });
  Array a = f32({1, 2, 3}, {3}), b = f32({4, 5, 6}, {3});
  EXPECT_EQ(f(a, b).to_vector<float>(), (std::vector<float>{5, 11, 19}));
  f(b, a);
  f(a, a);
  EXPECT_EQ(f.compile_count(), 1);
  EXPECT_EQ(f.cache_size(), 1u);
  Array c = f32({1, 2}, {2});
  EXPECT_EQ(f(c, c).to_vector<float>(), (std::vector<float>{2, 5}));
  EXPECT_EQ(f.compile_count(), 2);
  f(c, c);
  EXPECT_EQ(f.compile_count(), 2);
  // A new dtype is a new signature too.
  f(jnp::astype(c, DType::F64), jnp::astype(c, DType::F64));
  EXPECT_EQ(f.compile_count(), 3);
}

TEST(Jit, MissReasonNamesTheArgumentAndBothTypes) {
  JitOptions opts;
  opts.name = "scale";
  opts.arg_names = {"x"};
  auto f = jit([](const Array& x) { return x * 2.0; }, opts);
  set_explain_cache_misses(true);
  testing::internal::CaptureStderr();
  f(jnp::zeros({32, 128})).block_until_ready();
  f(jnp::zeros({17, 128})).block_until_ready();
  const std::string log = testing::internal::GetCapturedStderr();
  set_explain_cache_misses(false);
  EXPECT_NE(log.find("never seen function scale"), std::string::npos) << log;
  EXPECT_NE(log.find("argument x: f32[32,128] -> f32[17,128]"), std::string::npos) << log;
}

TEST(Jit, LogsCompilesWithTimes) {
  auto f = jit([](const Array& x) { return jnp::sin(x); }, named("sine"));
  set_log_compiles(true);
  testing::internal::CaptureStderr();
  f(jnp::zeros({4}));
  const std::string log = testing::internal::GetCapturedStderr();
  set_log_compiles(false);
  EXPECT_NE(log.find("Finished tracing sine in"), std::string::npos) << log;
  EXPECT_NE(log.find("Compiling sine with global shapes and types [f32[4]]"), std::string::npos)
      << log;
  EXPECT_NE(log.find("Finished compilation of sine in"), std::string::npos) << log;
}

TEST(Jit, BranchingOnATracerIsAConcretizationError) {
  auto f = jit([](const Array& x) {
    if (jnp::sum(x) > 0) return x;
    return -x;
  });
  try {
    f(f32({1, 2}, {2}));
    FAIL() << "no error";
  } catch (const ConcretizationError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("where"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cond"), std::string::npos) << msg;
    EXPECT_NE(msg.find("stablehlo.compare"), std::string::npos) << msg;
  }
  // Eagerly the same code runs: the value is concrete.
  auto g = [](const Array& x) {
    if (jnp::sum(x) > 0) return x;
    return -x;
  };
  EXPECT_EQ(g(f32({-1, -2}, {2})).to_vector<float>(), (std::vector<float>{1, 2}));
  auto h = jit([](const Array& x) { return x.item<float>(); });
  EXPECT_THROW(h(f32({1}, {})), ConcretizationError);
}

TEST(Jit, StaticArgumentsKeyTheCache) {
  auto f = jit([](const Array& x, int power) {
    Array y = x;
    for (int i = 1; i < power; ++i) y = y * x;
    return y;
  });
  Array x = f32({2, 3}, {2});
  EXPECT_EQ(f(x, 2).to_vector<float>(), (std::vector<float>{4, 9}));
  EXPECT_EQ(f(x, 3).to_vector<float>(), (std::vector<float>{8, 27}));
  f(x, 3);
  EXPECT_EQ(f.compile_count(), 2);
}

TEST(Jit, StaticArrayArgumentsAreConcreteWhileTracing) {
  JitOptions opts;
  opts.static_argnums = {1};
  auto f =
      jit([](const Array& x, const Array& flag) { return flag.item<bool>() ? x * 2.0 : x * 3.0; },
          opts);
  Array x = f32({1}, {1});
  EXPECT_EQ(f(x, jnp::array({true}, Shape{})).to_vector<float>(), (std::vector<float>{2}));
  EXPECT_EQ(f(x, jnp::array({false}, Shape{})).to_vector<float>(), (std::vector<float>{3}));
  EXPECT_EQ(f.compile_count(), 2);
}

struct Params {
  Array w;
  Array b;
};

}  // namespace
}  // namespace cujax

CUJAX_REGISTER_TREE(cujax::Params, w, b);

namespace cujax {
namespace {

TEST(Jit, TreesInAndOut) {
  auto f = jit([](const Params& p, const std::map<std::string, Array>& batch) {
    Array y = jnp::matmul(batch.at("x"), p.w) + p.b;
    return std::make_tuple(y, std::vector<Array>{jnp::sum(y), jnp::mean(y)});
  });
  Params p{f32({1, 0, 0, 1}, {2, 2}), f32({1, 1}, {2})};
  std::map<std::string, Array> batch{{"x", f32({1, 2, 3, 4}, {2, 2})}};
  auto [y, stats] = f(p, batch);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(stats[0].item<float>(), 14.0f);
  EXPECT_EQ(stats[1].item<float>(), 3.5f);
  EXPECT_EQ(tree_structure(p), "struct cujax::Params(w=*,b=*)");
}

// tree_map(f, tree, rest...) in jax.tree_util.tree_map's order (the reversed order does not
// compile: tests/compile_fail/tree_map_order.cpp).
TEST(Tree, MapTakesTheFunctionFirst) {
  const Params p{f32({1, 2, 3, 4}, {2, 2}), f32({5, 6}, {2})};
  const Params g{f32({10, 20, 30, 40}, {2, 2}), f32({50, 60}, {2})};
  const Params half = tree_map([](const Array& a) { return a * 0.5; }, p);
  EXPECT_EQ(half.w.to_vector<float>(), (std::vector<float>{0.5f, 1, 1.5f, 2}));
  EXPECT_EQ(half.b.to_vector<float>(), (std::vector<float>{2.5f, 3}));
  // Several trees: f gets the leaves at the same place in each.
  const Params sgd = tree_map([](const Array& a, const Array& b) { return a - 0.1 * b; }, p, g);
  EXPECT_EQ(sgd.w.to_vector<float>(), (p.w - 0.1 * g.w).to_vector<float>());
  EXPECT_EQ(sgd.b.to_vector<float>(), (p.b - 0.1 * g.b).to_vector<float>());
  const Params sum3 = tree_map(
      [](const Array& a, const Array& b, const Array& c) { return a + b + c; }, p, g, half);
  EXPECT_EQ(sum3.b.to_vector<float>(), (std::vector<float>{57.5f, 69}));
  // Static leaves and the structure stay; trees of another structure are refused.
  using Tree = std::tuple<Array, int, std::vector<Array>>;
  const Tree t{f32({1}, {1}), 7, {f32({2}, {1}), f32({3}, {1})}};
  const Tree doubled = tree_map([](const Array& a) { return a * 2.0; }, t);
  EXPECT_EQ(std::get<1>(doubled), 7);
  EXPECT_EQ(std::get<2>(doubled)[1].to_vector<float>(), (std::vector<float>{6}));
  const Tree shorter{f32({1}, {1}), 7, {f32({2}, {1})}};
  try {
    (void)tree_map([](const Array& a, const Array& b) { return a + b; }, t, shorter);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "tree_map: tree 1 has structure tuple3(*,s:7,list1(*)), but the first tree has "
              "tuple3(*,s:7,list2(*,*))");
  }
}

TEST(Jit, EagerAndJittedAgree) {
  auto fn = [](const Array& x, const Array& w) {
    return jnp::tanh(jnp::matmul(x, w)) * 0.5 + jnp::exp(-x * x);
  };
  Array x = f32({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, {2, 3});
  Array w = f32({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3});
  const auto eager = fn(x, w).to_vector<float>();
  const auto jitted = jit(fn)(x, w).to_vector<float>();
  ASSERT_EQ(eager.size(), jitted.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_NEAR(eager[i], jitted[i], 1e-6) << i;
}

// JAX keeps weak types through jit: jit(lambda x: x * 2)(3.0) is f32{weak}, so a following
// op with an f16 array stays f16, exactly as the eager x * 2 would.
TEST(Jit, OutputsKeepTheirWeakTypes) {
  auto f = jit([](const Array& x) { return x * 2.0; });
  Array eager = scalar(3.0) * 2.0;
  Array jitted = f(scalar(3.0));
  EXPECT_TRUE(eager.weak_type());
  EXPECT_EQ(jitted.weak_type(), eager.weak_type());
  Array h = jnp::astype(f32({1, 2}, {2}), DType::F16);
  EXPECT_EQ((jitted * h).dtype(), DType::F16);
  EXPECT_FALSE(f(f32({1}, {1})).weak_type());
  auto compiled = f.lower(ShapeDtype{{}, DType::F32, true}).compile();
  EXPECT_TRUE(compiled(scalar(3.0)).weak_type());
}

TEST(Stages, LowerCompileAndCall) {
  auto f = jit([](const Array& a, const Array& b) { return jnp::matmul(a, b); }, named("mm"));
  auto lowered = f.lower(ShapeDtype{{8, 16}, DType::F32}, ShapeDtype{{16, 4}, DType::F32});
  const std::string text = lowered.as_text();
  EXPECT_NE(text.find("module @jit_mm"), std::string::npos) << text;
  EXPECT_NE(text.find("stablehlo.dot_general"), std::string::npos) << text;
  EXPECT_NE(text.find("jax.result_info = \"result\""), std::string::npos) << text;
  auto reparsed = ir::parse_module(text);
  EXPECT_EQ(reparsed->lookup("main")->arg_types().size(), 2u);
  auto compiled = lowered.compile();
  EXPECT_EQ(compiled.cost_analysis().flops, 2.0 * 8 * 16 * 4);
  EXPECT_EQ(compiled.memory_analysis().argument_size_in_bytes, (8 * 16 + 16 * 4) * 4);
  EXPECT_EQ(compiled.memory_analysis().output_size_in_bytes, 8 * 4 * 4);
  const int64_t before = global_compile_count();
  Array out = compiled(jnp::ones({8, 16}), jnp::ones({16, 4}));
  EXPECT_EQ(out.shape(), (Shape{8, 4}));
  EXPECT_EQ(out.to_vector<float>()[0], 16.0f);
  EXPECT_EQ(global_compile_count(), before);  // no compilation when calling a Compiled
  try {
    compiled(jnp::ones({4, 16}), jnp::ones({16, 4}));
    FAIL() << "wrong shape accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32[4,16]"), std::string::npos) << e.what();
  }
}

TEST(Passes, FoldAndDeduplicate) {
  auto f = jit([](const Array& x) {
    Array two = jnp::ones({}) + jnp::ones({});  // folds to a constant
    return jnp::sin(x) * two + jnp::sin(x);     // the second sin is a common subexpression
  });
  auto compiled = f.lower(ShapeDtype{{4}, DType::F32}).compile();
  const std::string text = compiled.as_text();
  auto count = [&](const std::string& op) {
    size_t n = 0;
    for (size_t p = text.find(op); p != std::string::npos; p = text.find(op, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("stablehlo.sine"), 1u) << text;
  EXPECT_EQ(count("stablehlo.add"), 1u) << text;  // ones + ones became a constant
  Array y = compiled(f32({0, 1, 2, 3}, {4}));
  const auto v = y.to_vector<float>();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(v[i], 3 * std::sin(static_cast<float>(i)), 1e-6);
}

TEST(Async, DispatchReturnsBeforeTheResultIsReady) {
  auto f = jit([](const Array& x) { return jnp::matmul(x, x); });
  Array x = jnp::ones({384, 384});
  f(x).block_until_ready();  // compile outside the measurement
  const auto t0 = std::chrono::steady_clock::now();
  Array y = x;
  for (int i = 0; i < 20; ++i) y = f(x);
  const auto dispatched = std::chrono::steady_clock::now();
  y.block_until_ready();
  const auto done = std::chrono::steady_clock::now();
  EXPECT_TRUE(y.is_ready());
  // 20 matmuls of 384^3 take well over the time it takes to enqueue them.
  EXPECT_LT(dispatched - t0, done - t0);
}

class FailingExecutable final : public runtime::Executable {
 public:
  std::vector<runtime::DeviceBuffer> execute(std::vector<runtime::DeviceBuffer>,
                                             const runtime::ExecuteOptions&) override {
    throw RuntimeError("index out of range");
  }
  const runtime::Backend& backend() const override { return runtime::get_backend("cpu"); }
  int device() const override { return 0; }
};

TEST(Async, ErrorsSurfaceAtTheNextWaitNamingTheOp) {
  auto outs = trace::dispatch(std::make_shared<FailingExecutable>(), {},
                              {ShapeDtype{{2}, DType::F32}}, "stablehlo.gather");
  try {
    outs[0].block_until_ready();
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("stablehlo.gather: index out of range"), std::string::npos)
        << e.what();
  }
}

TEST(Donation, DonatedArgumentsAreDeleted) {
  JitOptions opts;
  opts.donate_argnums = {0};
  auto f = jit([](const Array& x) { return x + 1.0; }, opts);
  Array x = jnp::zeros({3});
  Array y = f(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_THROW(x.to_host(), Error);
  EXPECT_NE(f.lower(ShapeDtype{{3}, DType::F32}).as_text().find("jax.buffer_donor = true"),
            std::string::npos);
}

// The cpu backend's scatter writes into its operand when nothing else holds it (a donated
// argument, as the serving step's KV cache is) and copies it otherwise: an operand the program
// still reads afterwards, or a caller's argument that was not donated, keeps its values.
TEST(Donation, ScatterIntoAnOperandStillInUseLeavesItUnchanged) {
  // x[idx[j]] = (7, 8)[j], one stablehlo.scatter on x itself.
  const auto update = [](const Array& x, const Array& idx) {
    lax::ScatterDimensionNumbers d;
    d.inserted_window_dims = {0};
    d.scatter_dims_to_operand_dims = {0};
    return lax::scatter(x, idx, jnp::array(std::vector<float>{7, 8}, Shape{2}), d);
  };
  const Array idx = jnp::array(std::vector<int32_t>{3, 1}, Shape{2, 1});
  JitOptions opts;
  opts.donate_argnums = {0};
  auto donated = jit(update, opts);
  EXPECT_EQ(donated(jnp::arange(5, DType::F32), idx).to_vector<float>(),
            (std::vector<float>{0, 8, 2, 7, 4}));
  // The operand is read again after the scatter, and the argument is the caller's.
  auto both = jit([&](const Array& x, const Array& i) {
    return std::pair{update(x, i), x * 2.0f};
  });
  const Array x = jnp::arange(5, DType::F32);
  const auto [updated, doubled] = both(x, idx);
  EXPECT_EQ(updated.to_vector<float>(), (std::vector<float>{0, 8, 2, 7, 4}));
  EXPECT_EQ(doubled.to_vector<float>(), (std::vector<float>{0, 2, 4, 6, 8}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4}));
}

TEST(TransferGuard, CountsAndForbidsImplicitTransfers) {
  Array x = jnp::ones({2});
  const int64_t before = implicit_transfer_count();
  x.to_vector<float>();
  EXPECT_EQ(implicit_transfer_count(), before + 1);
  TransferGuardScope guard(TransferGuard::Disallow);
  try {
    x.to_vector<float>();
    FAIL() << "transfer allowed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Disallowed device-to-host transfer"), std::string::npos);
  }
}

TEST(PersistentCache, SecondProcessStyleCompileHitsTheCache) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("cujax_cache_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  set_compilation_cache_dir(dir.string());
  auto make = [] { return jit([](const Array& x) { return jnp::cos(x) * 3.0; }); };
  const int64_t hits = persistent_cache_hits();
  make()(jnp::ones({5})).block_until_ready();
  EXPECT_EQ(persistent_cache_hits(), hits);
  EXPECT_FALSE(std::filesystem::is_empty(dir));
  // A fresh jit object (as after a restart) finds the optimized program on disk.
  Array y = make()(jnp::ones({5}));
  EXPECT_EQ(persistent_cache_hits(), hits + 1);
  EXPECT_NEAR(y.to_vector<float>()[0], 3 * std::cos(1.0f), 1e-6);
  set_compilation_cache_dir("");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cujax
