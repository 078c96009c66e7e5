// cujax::random and cujax::nn::initializers against values printed by JAX.
//
// Sources of the expected numbers (cited at each test):
//  [R123]  Random123's threefry known answers, as used by JAX's tests/random_lax_test.py
//          (testThreefry2x32; github.com/jax-ml/jax, main as of JAX 0.11), which cite
//          github.com/DEShawResearch/Random123-Boost/.../libs/random/test/test_threefry.cpp.
//  [DOCS]  The jax.random module page, https://docs.jax.dev/en/latest/jax.random.html (JAX 0.11,
//          partitionable threefry): random.uniform(random.key(0)) -> 0.947667, and after
//          `key, subkey = random.split(key)`, random.uniform(subkey) -> 0.00729382.
//  [DOCS-OLD] The same page before JAX 0.5 (original layout), e.g. the JAX 0.4.x docs
//          (mirrored in translation at developer.aliyun.com/article/1559758): 0.41845703 and
//          0.10536897.
//  [RT]    JAX's tests/random_test.py (github.com/jax-ml/jax, JAX 0.11): testPRNGValues (run
//          only with jax_threefry_partitionable=False), test_threefry_split_fold_in_symmetry
//          (only with it True) and test_prng_seeds_and_keys.
//  [CONF]  The StableHLO conformance programs ../shared/conformance/stablehlo-testdata/random_*
//          (JAX-generated, original threefry layout), whose @expected functions hold JAX's
//          outputs for PRNGKey(42).
//  [JAX-DRAWS] tests/fixtures/jax_random_draws.json: normal, uniform, categorical and
//          permutation draws that JAX printed for PRNGKey(0) and PRNGKey(42), written by
//          tools/jax_bridge/interop_check.py (scripts/gpu-check.sh, under $OUT/gpu-check/fixtures).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cujax/core/json.h"
#include "cujax/jit.h"
#include "cujax/lax.h"
#include "cujax/nn/initializers.h"
#include "cujax/random.h"

namespace jr = cujax::random;
namespace init = cujax::nn::initializers;
using cujax::Array;
using cujax::DType;
using cujax::Shape;

namespace {

std::vector<uint32_t> u32s(const Array& a) {
  return a.to_vector<uint32_t>();
}

double mean(const std::vector<float>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double variance(const std::vector<float>& v) {
  const double m = mean(v);
  double s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size());
}

std::pair<Array, Array> hash(uint32_t k1, uint32_t k2, uint32_t x1, uint32_t x2) {
  return jr::threefry2x32(cujax::lax::full({}, k1, DType::U32),
                          cujax::lax::full({}, k2, DType::U32), cujax::array(std::vector{x1}),
                          cujax::array(std::vector{x2}));
}

}  // namespace

// [R123] via JAX's testThreefry2x32.
TEST(Threefry, KnownAnswers) {
  auto [a0, a1] = hash(0, 0, 0, 0);
  EXPECT_EQ(u32s(a0)[0], 0x6b200159u);
  EXPECT_EQ(u32s(a1)[0], 0x99ba4efeu);
  auto [b0, b1] = hash(0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF);
  EXPECT_EQ(u32s(b0)[0], 0x1cb996fcu);
  EXPECT_EQ(u32s(b1)[0], 0xbb002be7u);
  auto [c0, c1] = hash(0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3);
  EXPECT_EQ(u32s(c0)[0], 0xc4923a9cu);
  EXPECT_EQ(u32s(c1)[0], 0x483df7a0u);
  // threefry_2x32(keypair, count) hashes the two halves of count as pairs.
  const Array out = jr::threefry_2x32(cujax::array(std::vector<uint32_t>{0x13198a2e, 0x03707344}),
                                      cujax::array(std::vector<uint32_t>{0x243f6a88, 0x85a308d3}));
  EXPECT_EQ(u32s(out), (std::vector<uint32_t>{0xc4923a9c, 0x483df7a0}));
}

// [RT] test_prng_seeds_and_keys: 32-bit seeds give [0, seed]; 64-bit seeds [hi, lo] (its x64
// expectations).
TEST(Keys, Seeds) {
  EXPECT_EQ(u32s(jr::PRNGKey(0)), (std::vector<uint32_t>{0, 0}));
  EXPECT_EQ(u32s(jr::PRNGKey(1)), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(u32s(jr::PRNGKey(int32_t{-2})), (std::vector<uint32_t>{0, 4294967294u}));
  EXPECT_EQ(u32s(jr::PRNGKey(uint32_t{2})), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(u32s(jr::PRNGKey(int64_t{3})), (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(u32s(jr::PRNGKey(int64_t{-3})), (std::vector<uint32_t>{4294967295u, 4294967293u}));
  EXPECT_EQ(u32s(jr::PRNGKey(int64_t{2147483647} + 100)), (std::vector<uint32_t>{0, 2147483747u}));
  EXPECT_EQ(u32s(jr::PRNGKey(int64_t{-2147483648} - 101)),
            (std::vector<uint32_t>{4294967295u, 2147483547u}));
  // From arrays, eagerly and under jit.
  EXPECT_EQ(u32s(jr::PRNGKey(cujax::scalar(-3.0, DType::I64))),
            (std::vector<uint32_t>{4294967295u, 4294967293u}));
  EXPECT_EQ(u32s(jr::PRNGKey(cujax::scalar(-2.0, DType::I32))),
            (std::vector<uint32_t>{0, 4294967294u}));
  auto jitted = cujax::jit([](const Array& s) { return jr::PRNGKey(s); });
  EXPECT_EQ(u32s(jitted(cujax::scalar(-3.0, DType::I64))),
            (std::vector<uint32_t>{4294967295u, 4294967293u}));
  EXPECT_EQ(u32s(jr::key(42)), (std::vector<uint32_t>{0, 42}));
}

TEST(Keys, PartitionableIsTheDefault) {
  EXPECT_TRUE(jr::threefry_partitionable());
  {
    jr::ThreefryPartitionableScope off(false);
    EXPECT_FALSE(jr::threefry_partitionable());
  }
  EXPECT_TRUE(jr::threefry_partitionable());
}

// [DOCS] (partitionable, JAX 0.11's default).
TEST(Partitionable, DocsUniform) {
  const Array key = jr::key(0);
  EXPECT_FLOAT_EQ(jr::uniform(key).item<float>(), 0.947667f);
  const Array keys = jr::split(key);
  EXPECT_FLOAT_EQ(jr::uniform(jr::key_at(keys, 1)).item<float>(), 0.00729382f);
}

// [RT] test_threefry_split_fold_in_symmetry: with partitionable threefry, split(key, 3)[i] ==
// fold_in(key, i).
TEST(Partitionable, SplitFoldInSymmetry) {
  const Array key = jr::PRNGKey(72);
  const Array keys = jr::split(key, 3);
  ASSERT_EQ(keys.shape(), (Shape{3, 2}));
  for (uint32_t i = 0; i < 3; ++i)
    EXPECT_EQ(u32s(jr::fold_in(key, i)), u32s(jr::key_at(keys, i))) << i;
}

// Keys from split destructure as JAX's `key, subkey = random.split(key)` and index as
// split(key, 3)[i]; the results are the rows of the u32[n, 2] array ([DOCS] and [RT] above).
TEST(Partitionable, SplitKeysDestructureAndIndex) {
  const Array key = jr::key(0);
  auto [next, subkey] = jr::split(key);
  EXPECT_FLOAT_EQ(jr::uniform(subkey).item<float>(), 0.00729382f);
  const Array keys = jr::split(key, 2);
  EXPECT_EQ(u32s(next), u32s(jr::key_at(keys, 0)));
  EXPECT_EQ(u32s(subkey), u32s(jr::key_at(keys, 1)));
  // split(key) is still the u32[2, 2] array where an Array is wanted.
  const Array pair = jr::split(key);
  EXPECT_EQ(u32s(pair), u32s(keys));
  EXPECT_EQ(jr::split(key).shape(), (Shape{2, 2}));
  // split(key, 3)[i] == fold_in(key, i) ([RT] test_threefry_split_fold_in_symmetry).
  const Array k72 = jr::PRNGKey(72);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(u32s(jr::split(k72, 3)[i]), u32s(jr::fold_in(k72, static_cast<uint32_t>(i)))) << i;
  auto [a, b, c] = jr::split<3>(k72);
  EXPECT_EQ(u32s(a), u32s(jr::fold_in(k72, 0u)));
  EXPECT_EQ(u32s(b), u32s(jr::fold_in(k72, 1u)));
  EXPECT_EQ(u32s(c), u32s(jr::fold_in(k72, 2u)));
  // Through jit: the keys are one array leaf of the result.
  auto split_jit = cujax::jit([](const Array& k) { return jr::split(k); });
  auto [j1, j2] = split_jit(key);
  EXPECT_EQ(u32s(j1), u32s(next));
  EXPECT_EQ(u32s(j2), u32s(subkey));
}

// The partitionable bits are xor of the two hash words of the element's (hi, lo) index.
TEST(Partitionable, BitsLayout) {
  const Array key = jr::PRNGKey(7);
  const Array b = jr::bits(key, {2, 3});
  ASSERT_EQ(b.shape(), (Shape{2, 3}));
  const auto v = u32s(b);
  for (uint32_t i = 0; i < 6; ++i) {
    auto [h0, h1] = hash(0, 7, 0, i);
    EXPECT_EQ(v[i], u32s(h0)[0] ^ u32s(h1)[0]) << i;
  }
  const auto wide = jr::bits(key, {3}, DType::U64).to_vector<uint64_t>();
  for (uint32_t i = 0; i < 3; ++i) {
    auto [h0, h1] = hash(0, 7, 0, i);
    EXPECT_EQ(wide[i], (uint64_t{u32s(h0)[0]} << 32) | u32s(h1)[0]);
  }
  const auto narrow = jr::bits(key, {2, 3}, DType::U8).to_vector<uint8_t>();
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(narrow[i], static_cast<uint8_t>(v[i]));
  // split is fold-like: key i hashes (0, i).
  const auto split4 = u32s(jr::split(key, 4));
  for (uint32_t i = 0; i < 4; ++i) {
    auto [h0, h1] = hash(0, 7, 0, i);
    EXPECT_EQ(split4[2 * i], u32s(h0)[0]);
    EXPECT_EQ(split4[2 * i + 1], u32s(h1)[0]);
  }
  auto [hi, lo] = jr::iota_2x32_shape({3, 4});
  EXPECT_EQ(u32s(hi), std::vector<uint32_t>(12, 0));
  std::vector<uint32_t> iota(12);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(u32s(lo), iota);
}

// [RT] testPRNGValues (jax_threefry_partitionable=False).
TEST(Original, PRNGValues) {
  jr::ThreefryPartitionableScope off(false);
  const Array k = jr::PRNGKey(0);
  EXPECT_EQ(u32s(jr::split(k, 4)),
            (std::vector<uint32_t>{2285895361u, 1501764800u, 1518642379u, 4090693311u, 433833334u,
                                   4221794875u, 839183663u, 3740430601u}));
  EXPECT_EQ(u32s(jr::fold_in(k, 4)), (std::vector<uint32_t>{2285895361u, 433833334u}));
  const Array r = jr::randint(k, {3, 3}, 0, 8, DType::I32);
  EXPECT_EQ(r.dtype(), DType::I32);
  EXPECT_EQ(r.to_vector<int32_t>(), (std::vector<int32_t>{2, 1, 3, 6, 1, 5, 6, 3, 4}));
}

// fold_in does not depend on the layout: the same key as in [RT] testPRNGValues.
TEST(Partitionable, FoldInSameAsOriginal) {
  EXPECT_EQ(u32s(jr::fold_in(jr::PRNGKey(0), 4)), (std::vector<uint32_t>{2285895361u, 433833334u}));
}

// [DOCS-OLD].
TEST(Original, DocsUniform) {
  jr::ThreefryPartitionableScope off(false);
  const Array key = jr::key(0);
  EXPECT_FLOAT_EQ(jr::uniform(key).item<float>(), 0.41845703f);
  EXPECT_FLOAT_EQ(jr::uniform(jr::key_at(jr::split(key), 1)).item<float>(), 0.10536897f);
}

// [DOCS-OLD-NORMAL] The "Pseudorandom numbers" tutorial before JAX 0.5
// (jax.readthedocs.io/en/latest/random-numbers.html, as copied in
// github.com/GALVINLAI/lai_PSR_RCBCD): key = PRNGKey(12); three times
// `new_key, subkey = split(key); normal(subkey)`, printing 0.735927939414978, 1.810187578201294,
// 0.11553369462490082.
TEST(Original, DocsNormalDraws) {
  jr::ThreefryPartitionableScope off(false);
  Array key = jr::PRNGKey(12);
  const double expected[] = {0.735927939414978, 1.810187578201294, 0.11553369462490082};
  for (double e : expected) {
    auto [new_key, subkey] = jr::split(key);
    EXPECT_NEAR(jr::normal(subkey).item<float>(), e, 2e-7 * (1 + std::abs(e)));
    key = new_key;
  }
}

// [CONF] random_split_.mlir: split(PRNGKey(42)).
TEST(Original, ConformanceSplit) {
  jr::ThreefryPartitionableScope off(false);
  EXPECT_EQ(u32s(jr::split(jr::PRNGKey(42))),
            (std::vector<uint32_t>{2465931498u, 3679230171u, 255383827u, 267815257u}));
}

// [CONF] random_randint_.mlir: randint(PRNGKey(42), (32,), -5, 5, int8).
TEST(Original, ConformanceRandint) {
  jr::ThreefryPartitionableScope off(false);
  const Array r = jr::randint(jr::PRNGKey(42), {32}, -5, 5, DType::I8);
  EXPECT_EQ(r.dtype(), DType::I8);
  const std::vector<int8_t> expected{2, 2,  2, -1, 1, 0, 2, -3, -1, 1, 3, -2, -4, 1,  -1, -1,
                                     4, -5, 3, 3,  2, 3, 3, -5, 2,  4, 2, -5, 4,  -1, -4, -2};
  EXPECT_EQ(r.to_vector<int8_t>(), expected);
}

// [CONF] random_categorical_{float32,float64}_{5_4,8}.mlir: categorical(PRNGKey(42), logits).
TEST(Original, ConformanceCategorical) {
  jr::ThreefryPartitionableScope off(false);
  const Array key = jr::PRNGKey(42);
  const Array l32 = cujax::array(
      std::vector<float>{2.10989404f,  -2.28597355f,  -0.533994138f, -1.92554164f,  -2.63784266f,
                         -3.37571621f, 2.09938264f,   -0.706916034f, -0.851517975f, 0.113367178f,
                         -2.97590661f, -0.724755585f, 3.47338867f,   1.82082677f,   0.105628729f,
                         1.65527248f,  0.510045648f,  -1.52526939f,  -0.752171576f, 6.12547112f},
      Shape{5, 4});
  EXPECT_EQ(jr::categorical(key, l32).to_vector<int32_t>(), (std::vector<int32_t>{0, 2, 1, 0, 3}));
  const Array v32 =
      cujax::array(std::vector<float>{5.61341476f, -3.17508101f, 2.33323073f, 0.483267874f,
                                      1.09662056f, -0.71605432f, 5.598730e+00f, 3.95920396f});
  EXPECT_EQ(jr::categorical(key, v32).item<int32_t>(), 0);
  const Array l64 = cujax::array(
      std::vector<double>{
          2.6044160679950643,  2.9321362344077575,  -3.2103477133467098, -1.8187160634972799,
          2.1577879203212329,  0.94549340118604897, -1.2300833153827209, 6.037781617043855,
          2.6481661417030908,  0.76780148062618547, 0.25212015749028915, -2.0297729471187482,
          -8.2722376135920346, 2.0099702230233962,  3.0598081711609653,  -1.2354732207389678,
          -3.2511804161164988, 1.7202350343151254,  3.8548454509404677,  -0.67754275745650916},
      Shape{5, 4});
  EXPECT_EQ(jr::categorical(key, l64).to_vector<int32_t>(), (std::vector<int32_t>{1, 3, 0, 2, 2}));
  const Array v64 = cujax::array(std::vector<double>{
      -7.1183656526382366, -0.96955133078721589, -1.6736512891996449, 7.2285932197100164,
      -7.3226303506590709, -0.12728901223196259, 2.9544739110238858, -3.466593325644622});
  EXPECT_EQ(jr::categorical(key, v64).item<int32_t>(), 3);
}

// The original layout's bits for 8/16/64 bits are views of the 32-bit stream.
TEST(Original, BitsViewProperty) {
  jr::ThreefryPartitionableScope off(false);
  const Array key = jr::PRNGKey(1701);
  const auto b32 = u32s(jr::bits(key, {10}));
  const auto b8 = jr::bits(key, {40}, DType::U8).to_vector<uint8_t>();
  const auto b16 = jr::bits(key, {20}, DType::U16).to_vector<uint16_t>();
  for (size_t i = 0; i < 10; ++i) {
    uint32_t from8 = 0, from16 = 0;
    for (int j = 0; j < 4; ++j) from8 |= uint32_t{b8[4 * i + j]} << (8 * j);
    for (int j = 0; j < 2; ++j) from16 |= uint32_t{b16[2 * i + j]} << (16 * j);
    EXPECT_EQ(from8, b32[i]);
    EXPECT_EQ(from16, b32[i]);
  }
}

TEST(Samplers, Determinism) {
  const Array key = jr::PRNGKey(123);
  EXPECT_EQ(jr::normal(key, {64}).to_vector<float>(), jr::normal(key, {64}).to_vector<float>());
  EXPECT_NE(jr::normal(key, {64}).to_vector<float>(),
            jr::normal(jr::fold_in(key, 1), {64}).to_vector<float>());
}

TEST(Samplers, JitMatchesEager) {
  const Array key = jr::PRNGKey(5);
  auto f = cujax::jit([](const Array& k) {
    return std::vector<Array>{jr::bits(k, {257}),    jr::uniform(k, {3, 5}),
                              jr::normal(k, {17}),   jr::randint(k, {9}, -3, 11),
                              jr::split(k, 3),       jr::truncated_normal(k, -2.0, 2.0, {33}),
                              jr::permutation(k, 10)};
  });
  const std::vector<Array> jitted = f(key);
  EXPECT_EQ(u32s(jitted[0]), u32s(jr::bits(key, {257})));
  EXPECT_EQ(jitted[1].to_vector<float>(), jr::uniform(key, {3, 5}).to_vector<float>());
  EXPECT_EQ(jitted[2].to_vector<float>(), jr::normal(key, {17}).to_vector<float>());
  EXPECT_EQ(jitted[3].to_vector<int32_t>(), jr::randint(key, {9}, -3, 11).to_vector<int32_t>());
  EXPECT_EQ(u32s(jitted[4]), u32s(jr::split(key, 3)));
  EXPECT_EQ(jitted[5].to_vector<float>(),
            jr::truncated_normal(key, -2.0, 2.0, {33}).to_vector<float>());
  EXPECT_EQ(jitted[6].to_vector<int32_t>(), jr::permutation(key, 10).to_vector<int32_t>());
  // The program is JAX's threefry: only element-wise integer ops, no rng op.
  const std::string text = f.lower(cujax::ShapeDtype{{2}, DType::U32}).as_text();
  EXPECT_NE(text.find("stablehlo.shift_right_logical"), std::string::npos);
  EXPECT_EQ(text.find("rng"), std::string::npos);
}

TEST(Samplers, UniformRangeAndMoments) {
  const Array key = jr::PRNGKey(0);
  const auto u = jr::uniform(key, {100000}).to_vector<float>();
  for (float x : u) ASSERT_TRUE(x >= 0.0f && x < 1.0f) << x;
  EXPECT_NEAR(mean(u), 0.5, 0.005);
  EXPECT_NEAR(variance(u), 1.0 / 12, 0.002);
  const auto w = jr::uniform(key, {10000}, DType::F32, -3.0, 5.0).to_vector<float>();
  for (float x : w) ASSERT_TRUE(x >= -3.0f && x < 5.0f) << x;
  EXPECT_NEAR(mean(w), 1.0, 0.1);
  // Array bounds broadcast against the shape.
  const Array lo = cujax::array(std::vector<float>{0, 10, 20});
  const Array hi = cujax::array(std::vector<float>{1, 11, 21});
  const auto b = jr::uniform(key, {4, 3}, DType::F32, lo, hi).to_vector<float>();
  for (size_t i = 0; i < b.size(); ++i) {
    const float base = 10.0f * static_cast<float>(i % 3);
    EXPECT_TRUE(b[i] >= base && b[i] < base + 1) << b[i];
  }
}

TEST(Samplers, UniformOtherDtypes) {
  const Array key = jr::PRNGKey(3);
  const auto d = jr::uniform(key, {1000}, DType::F64).to_vector<double>();
  for (double x : d) ASSERT_TRUE(x >= 0.0 && x < 1.0);
  EXPECT_NEAR(std::accumulate(d.begin(), d.end(), 0.0) / 1000, 0.5, 0.05);
  // f64 uses the 64-bit stream: its top 52 bits are the mantissa.
  const auto b64 = jr::bits(key, {1000}, DType::U64).to_vector<uint64_t>();
  for (size_t i = 0; i < 8; ++i)
    EXPECT_EQ(d[i], std::ldexp(static_cast<double>(b64[i] >> 12), -52)) << i;
  for (DType t : {DType::F16, DType::BF16}) {
    const Array h = jr::uniform(key, {1000}, t);
    EXPECT_EQ(h.dtype(), t);
    const auto f = cujax::lax::convert_element_type(h, DType::F32).to_vector<float>();
    for (float x : f) ASSERT_TRUE(x >= 0.0f && x < 1.0f);
    EXPECT_NEAR(mean(f), 0.5, 0.05);
  }
}

TEST(Samplers, NormalMoments) {
  const auto n = jr::normal(jr::PRNGKey(0), {100000}).to_vector<float>();
  for (float x : n) ASSERT_TRUE(std::isfinite(x));
  EXPECT_NEAR(mean(n), 0.0, 0.01);
  EXPECT_NEAR(variance(n), 1.0, 0.015);
  // Roughly 68.3% within one standard deviation.
  const double within = static_cast<double>(
      std::count_if(n.begin(), n.end(), [](float x) { return std::abs(x) < 1; }));
  EXPECT_NEAR(within / n.size(), 0.6827, 0.005);
}

TEST(Samplers, TruncatedNormal) {
  const auto t = jr::truncated_normal(jr::PRNGKey(1), -2.0, 2.0, {100000}).to_vector<float>();
  for (float x : t) ASSERT_TRUE(x > -2.0f && x < 2.0f) << x;
  EXPECT_NEAR(mean(t), 0.0, 0.01);
  // The variance of a standard normal truncated to (-2, 2): 0.87962566103423978^2.
  EXPECT_NEAR(variance(t), 0.87962566103423978 * 0.87962566103423978, 0.01);
  const auto one_sided = jr::truncated_normal(jr::PRNGKey(2), 0.0, 1.0, {1000}).to_vector<float>();
  for (float x : one_sided) ASSERT_TRUE(x > 0.0f && x < 1.0f) << x;
  // Shape from the bounds.
  const Array lo = cujax::array(std::vector<float>{-1, 0});
  const Array hi = cujax::array(std::vector<float>{0, 1});
  const Array s = jr::truncated_normal(jr::PRNGKey(2), lo, hi);
  EXPECT_EQ(s.shape(), (Shape{2}));
  const auto sv = s.to_vector<float>();
  EXPECT_TRUE(sv[0] > -1 && sv[0] < 0);
  EXPECT_TRUE(sv[1] > 0 && sv[1] < 1);
}

TEST(Samplers, Bernoulli) {
  const Array b = jr::bernoulli(jr::PRNGKey(4), 0.3, {100000});
  EXPECT_EQ(b.dtype(), DType::Bool);
  const auto v = b.to_vector<bool>();
  EXPECT_NEAR(static_cast<double>(std::count(v.begin(), v.end(), true)) / v.size(), 0.3, 0.01);
  // p as an array: the shape defaults to p's; p = 0 never and p = 1 always.
  const auto e =
      jr::bernoulli(jr::PRNGKey(4), cujax::array(std::vector<float>{0, 1})).to_vector<bool>();
  EXPECT_EQ(e, (std::vector<bool>{false, true}));
  // bernoulli(key, p) == uniform(key) < p.
  const auto u = jr::uniform(jr::PRNGKey(4), {100}).to_vector<float>();
  const auto c = jr::bernoulli(jr::PRNGKey(4), 0.5, {100}).to_vector<bool>();
  for (size_t i = 0; i < u.size(); ++i) EXPECT_EQ(c[i], u[i] < 0.5f);
}

TEST(Samplers, Randint) {
  const Array r = jr::randint(jr::PRNGKey(9), {100000}, -3, 7);
  EXPECT_EQ(r.dtype(), DType::I32);
  std::vector<int> counts(10, 0);
  for (int32_t x : r.to_vector<int32_t>()) {
    ASSERT_TRUE(x >= -3 && x < 7) << x;
    ++counts[x + 3];
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 500);
  // maxval <= minval returns minval; maxval beyond the dtype covers all of it.
  for (int32_t x : jr::randint(jr::PRNGKey(9), {50}, 4, 4).to_vector<int32_t>()) EXPECT_EQ(x, 4);
  const auto u8 = jr::randint(jr::PRNGKey(9), {5000}, 0, 256, DType::U8).to_vector<uint8_t>();
  EXPECT_EQ(*std::max_element(u8.begin(), u8.end()), 255);
  EXPECT_EQ(*std::min_element(u8.begin(), u8.end()), 0);
}

TEST(Samplers, Permutation) {
  const Array key = jr::PRNGKey(11);
  const auto p = jr::permutation(key, 1000).to_vector<int32_t>();
  std::vector<int32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(p, iota);
  // Rows of a matrix move together.
  const Array x = cujax::lax::reshape(cujax::lax::iota(DType::I32, 12), {4, 3});
  const auto rows = jr::permutation(key, x).to_vector<int32_t>();
  std::set<int32_t> firsts;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(rows[3 * r] % 3, 0);
    EXPECT_EQ(rows[3 * r + 1], rows[3 * r] + 1);
    EXPECT_EQ(rows[3 * r + 2], rows[3 * r] + 2);
    firsts.insert(rows[3 * r]);
  }
  EXPECT_EQ(firsts.size(), 4u);
  // A one-element array needs no rounds.
  EXPECT_EQ(jr::permutation(key, 1).to_vector<int32_t>(), (std::vector<int32_t>{0}));
}

TEST(Samplers, CategoricalFrequencies) {
  const Array logits =
      cujax::array(std::vector<float>{std::log(0.2f), std::log(0.5f), std::log(0.3f)});
  const Array s = jr::categorical(jr::PRNGKey(8), logits, -1, Shape{30000});
  EXPECT_EQ(s.shape(), (Shape{30000}));
  std::vector<int> counts(3, 0);
  for (int32_t x : s.to_vector<int32_t>()) ++counts.at(x);
  EXPECT_NEAR(counts[0] / 30000.0, 0.2, 0.01);
  EXPECT_NEAR(counts[1] / 30000.0, 0.5, 0.01);
  EXPECT_NEAR(counts[2] / 30000.0, 0.3, 0.01);
  // Batched logits along axis 0.
  const Array batched = cujax::lax::broadcast_in_dim(logits, {3, 4}, {0});
  EXPECT_EQ(jr::categorical(jr::PRNGKey(8), batched, 0).shape(), (Shape{4}));
}

TEST(Keys, Errors) {
  EXPECT_THROW(jr::uniform(cujax::array(std::vector<float>{0, 0})), cujax::Error);
  EXPECT_THROW(jr::uniform(jr::PRNGKey(0), {}, DType::I32), cujax::Error);
  EXPECT_THROW(jr::bits(jr::PRNGKey(0), {3}, DType::I8), cujax::Error);
  EXPECT_THROW(jr::uniform(jr::PRNGKey(0), {3}, DType::F32, cujax::array(std::vector<float>{0, 1}),
                           cujax::lax::full({}, 1, DType::F32)),
               cujax::Error);
}

TEST(Initializers, ComputeFans) {
  EXPECT_EQ(init::compute_fans({784, 128}), (std::pair<double, double>{784, 128}));
  // A conv kernel HWIO: the receptive field multiplies both.
  EXPECT_EQ(init::compute_fans({3, 3, 16, 32}), (std::pair<double, double>{144, 288}));
  // Flax's MultiHeadAttention query kernel (in, heads, head_dim) with in_axis=-3,
  // out_axis=(-2, -1): DenseGeneral-style.
  EXPECT_EQ(init::compute_fans({64, 4, 16}, {-3}, {-2, -1}), (std::pair<double, double>{64, 64}));
  EXPECT_EQ(init::compute_fans({5, 3, 4}, {-2}, {-1}, {0}), (std::pair<double, double>{3, 4}));
  EXPECT_THROW(init::compute_fans({5}), cujax::Error);
}

TEST(Initializers, ConstantOnes) {
  const Array key = jr::PRNGKey(0);
  EXPECT_EQ(init::zeros()(key, {2, 3}).to_vector<float>(), std::vector<float>(6, 0));
  EXPECT_EQ(init::ones()(key, {4}).to_vector<float>(), std::vector<float>(4, 1));
  EXPECT_EQ(init::ones()(key, {2}, DType::BF16).dtype(), DType::BF16);
  EXPECT_EQ(init::constant(0.5)(key, {2}).to_vector<float>(), std::vector<float>(2, 0.5f));
}

TEST(Initializers, LecunNormal) {
  const Array key = jr::PRNGKey(0);
  const Array w = init::lecun_normal()(key, {784, 128});
  EXPECT_EQ(w.shape(), (Shape{784, 128}));
  EXPECT_EQ(w.dtype(), DType::F32);
  // Exactly truncated_normal(key, -2, 2) * sqrt(1 / fan_in) / 0.87962566103423978, in f32.
  const float stddev = std::sqrt(1.0f / 784.0f) / 0.87962566103423978f;
  const auto t = jr::truncated_normal(key, -2.0, 2.0, {784, 128}).to_vector<float>();
  const auto v = w.to_vector<float>();
  for (size_t i = 0; i < 100; ++i) EXPECT_EQ(v[i], t[i] * stddev) << i;
  // Its variance is 1 / fan_in.
  EXPECT_NEAR(variance(v) * 784, 1.0, 0.03);
  for (float x : v) ASSERT_LT(std::abs(x), 2 * stddev);
}

TEST(Initializers, XavierUniformAndNormal) {
  const Array key = jr::PRNGKey(1);
  const auto v = init::xavier_uniform()(key, {200, 300}).to_vector<float>();
  const double limit = std::sqrt(6.0 / (200 + 300));
  for (float x : v) ASSERT_TRUE(x >= -limit - 1e-6 && x < limit + 1e-6) << x;
  EXPECT_NEAR(variance(v), 2.0 / 500, 2e-4);
  // normal(stddev=1e-2) is normal(key) * 0.01.
  const auto n = init::normal()(key, {10}).to_vector<float>();
  const auto z = jr::normal(key, {10}).to_vector<float>();
  for (size_t i = 0; i < n.size(); ++i) EXPECT_EQ(n[i], z[i] * 0.01f);
  // he_normal's variance is 2 / fan_in; glorot_normal uses fan_avg.
  EXPECT_NEAR(variance(init::he_normal()(key, {500, 100}).to_vector<float>()) * 500 / 2, 1.0, 0.05);
  EXPECT_NEAR(variance(init::glorot_normal()(key, {300, 100}).to_vector<float>()) * 200, 1.0, 0.05);
  EXPECT_THROW(init::variance_scaling(1.0, "fan_median", "normal"), cujax::Error);
  EXPECT_THROW(init::variance_scaling(1.0, "fan_in", "cauchy"), cujax::Error);
}

// jax_threefry_partitionable changes the traced program, so it keys jit's cache: flipping it
// compiles again and gives that layout's bits (the eager ones), flipping it back hits the cache.
TEST(Keys, PartitionableKeysTheJitCache) {
  const Array key = jr::PRNGKey(3);
  auto f = cujax::jit([](const Array& k) { return jr::bits(k, {6}); });
  const auto on = u32s(f(key));
  EXPECT_EQ(f.compile_count(), 1);
  std::vector<uint32_t> off, off_eager;
  {
    jr::ThreefryPartitionableScope scope(false);
    off = u32s(f(key));
    off_eager = u32s(jr::bits(key, {6}));
  }
  EXPECT_EQ(f.compile_count(), 2);
  EXPECT_EQ(off, off_eager);
  EXPECT_NE(on, off);
  EXPECT_EQ(on, u32s(jr::bits(key, {6})));
  EXPECT_EQ(u32s(f(key)), on);
  EXPECT_EQ(f.compile_count(), 2);
}

// A repeated jitted call skips building its signature, but not past a flipped setting: the
// counter layout changes what random functions trace, so the function compiles again and gives
// each layout's numbers.
TEST(Jit, RepeatedCallsNoticeAChangedThreefrySetting) {
  auto f = cujax::jit([](const Array& key) { return jr::bits(key, {4}); });
  const Array key = jr::PRNGKey(7);
  const auto on = u32s(f(key));
  EXPECT_EQ(u32s(f(key)), on);
  EXPECT_EQ(f.compile_count(), 1);
  {
    jr::ThreefryPartitionableScope off(false);
    const auto off_bits = u32s(f(key));
    EXPECT_EQ(f.compile_count(), 2);
    EXPECT_EQ(off_bits, u32s(jr::bits(key, {4})));
    EXPECT_NE(off_bits, on);
  }
  EXPECT_EQ(u32s(f(key)), on);
  EXPECT_EQ(f.compile_count(), 2);
}

// [JAX-DRAWS]: the same keys give JAX's draws.
TEST(JaxDraws, SameKeysSameDraws) {
  const std::string path = CUJAX_SOURCE_DIR "/tests/fixtures/jax_random_draws.json";
  std::ifstream in(path);
  if (!in)
    GTEST_SKIP() << "no " << path << ": tools/jax_bridge/interop_check.py writes it on a machine "
                 << "with JAX (scripts/gpu-check.sh), to commit";
  std::stringstream text;
  text << in.rdbuf();
  const cujax::json::Value doc = cujax::json::parse(text.str(), path);
  jr::ThreefryPartitionableScope layout(doc.at("threefry_partitionable").as_bool());
  int compared = 0;
  for (const cujax::json::Value& d : doc.at("draws").as_array()) {
    const std::string sampler = d.at("sampler").as_string();
    const Array key = jr::PRNGKey(d.at("seed").as_int());
    std::vector<double> want;
    for (const auto& v : d.at("values").as_array()) want.push_back(v.as_double());
    const auto n = static_cast<int64_t>(want.size());
    std::vector<double> got;
    auto floats = [&](const Array& a) {
      for (float x : a.to_vector<float>()) got.push_back(x);
    };
    auto ints = [&](const Array& a) {
      for (int32_t x : a.to_vector<int32_t>()) got.push_back(x);
    };
    if (sampler == "normal") {
      floats(jr::normal(key, {n}));
    } else if (sampler == "uniform") {
      floats(jr::uniform(key, {n}));
    } else if (sampler == "categorical") {
      std::vector<float> logits;
      for (const auto& v : d.at("logits").as_array()) logits.push_back(v.as_double());
      ints(jr::categorical(key, cujax::array(logits), -1, Shape{n}));
    } else if (sampler == "permutation") {
      ints(jr::permutation(key, d.at("n").as_int()));
    } else {
      FAIL() << path << ": unknown sampler " << sampler;
    }
    ASSERT_EQ(got.size(), want.size()) << sampler;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 2e-6 * std::max(1.0, std::abs(want[i])))
          << sampler << " of PRNGKey(" << d.at("seed").as_int() << ") [" << i << "]";
    ++compared;
  }
  EXPECT_GE(compared, 8);
}
