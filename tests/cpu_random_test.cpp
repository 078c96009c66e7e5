// CPU backend: stablehlo.rng_bit_generator against published answers.
//
// Known-answer vectors are Random123's kat_vectors (D. E. Shaw Research, Random123 1.09,
// examples/kat_vectors; Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011):
//   threefry2x32 20 | ctr 00000000 00000000 | key 00000000 00000000 | 6b200159 99ba4efe
//   threefry2x32 20 | ctr ffffffff ffffffff | key ffffffff ffffffff | 1cb996fc bb002be7
//   threefry2x32 20 | ctr 243f6a88 85a308d3 | key 13198a2e 03707344 | c4923a9c 483df7a0
//   philox4x32 10 | ctr 0 0 0 0 | key 0 0 | 6627e8d5 e169c58d bc57ac4c 9b00dbd8
//   philox4x32 10 | ctr ffffffff x4 | key ffffffff x2 | 408f276d 41c83b0e a20bc7c6 6d5451fd
//   philox4x32 10 | ctr 243f6a88 85a308d3 13198a2e 03707344 | key a4093822 299f31d0
//                 | d16cfe09 94fdcceb 5001e420 24126ea1
// and the THREE_FRY example of the StableHLO specification (docs/spec.md, rng_bit_generator),
// whose values come from XLA. How state words map to keys and counters follows XLA's
// RngBitGeneratorExpander (see random_kernels.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"
#include "cujax/runtime/backend.h"

namespace cujax {
namespace {

struct RngResult {
  std::vector<uint64_t> state;
  HostTensor bits;
};

RngResult rng(const std::string& algorithm, const std::vector<uint64_t>& state, Shape shape,
              DType dtype) {
  ir::Module m;
  ir::Function& f = m.add_function("main");
  const int64_t n = static_cast<int64_t>(state.size());
  ir::Value* s = f.entry().add_argument(ir::Type::tensor({n}, DType::U64));
  auto op = ir::make_op("stablehlo.rng_bit_generator", {s},
                        {ir::Type::tensor({n}, DType::U64), ir::Type::tensor(shape, dtype)});
  op->set_attr("rng_algorithm", ir::Attribute::enum_attr("rng_algorithm", algorithm));
  ir::Operation* o = f.entry().push_back(std::move(op));
  f.result_types = {o->result(0)->type, o->result(1)->type};
  f.entry().push_back(ir::make_op("func.return", {o->result(0), o->result(1)}, {}));
  const std::vector<HostTensor> args{HostTensor::from_vector(state, {n})};
  auto out = runtime::get_backend("cpu").compile(m)->execute_on_host(args);
  return {out.at(0).to_vector<uint64_t>(), out.at(1)};
}

uint64_t u64(uint32_t lo, uint32_t hi) {
  return lo | (static_cast<uint64_t>(hi) << 32);
}

TEST(CpuRngBitGenerator, SpecThreeFryExample) {
  const auto r = rng("THREE_FRY", {1, 2}, {2, 2}, DType::U64);
  EXPECT_EQ(r.state, (std::vector<uint64_t>{1, 6}));
  EXPECT_EQ(r.bits.to_vector<uint64_t>(),
            (std::vector<uint64_t>{9236835810183407956ull, 16087790271692313299ull,
                                   18212823393184779219ull, 2658481902456610144ull}));
}

// State [key, counter]; a 64-bit output is one Threefry block (low word first).
TEST(CpuRngBitGenerator, ThreeFryKnownAnswers) {
  EXPECT_EQ(rng("THREE_FRY", {0, 0}, {1}, DType::U64).bits.to_vector<uint64_t>()[0],
            u64(0x6b200159, 0x99ba4efe));
  EXPECT_EQ(rng("THREE_FRY", {~0ull, ~0ull}, {}, DType::U64).bits.to_vector<uint64_t>()[0],
            u64(0x1cb996fc, 0xbb002be7));
  const auto r =
      rng("THREE_FRY", {u64(0x13198a2e, 0x03707344), u64(0x243f6a88, 0x85a308d3)}, {1}, DType::U64);
  EXPECT_EQ(r.bits.to_vector<uint64_t>()[0], u64(0xc4923a9c, 0x483df7a0));
  EXPECT_EQ(r.state[1], u64(0x243f6a88, 0x85a308d3) + 1);
}

TEST(CpuRngBitGenerator, ThreeFry32BitLayout) {
  // [2]: split along dimension 0 into one block; its two words fill the two elements.
  auto r = rng("THREE_FRY", {0, 0}, {2}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(), (std::vector<uint32_t>{0x6b200159, 0x99ba4efe}));
  EXPECT_EQ(r.state, (std::vector<uint64_t>{0, 1}));
  // 64-bit outputs of counters 0, 1, 2 give the blocks the 32-bit layouts below use.
  const auto blocks = rng("THREE_FRY", {0, 0}, {3}, DType::U64).bits.to_vector<uint64_t>();
  auto w = [&](int c, int word) { return static_cast<uint32_t>(blocks[c] >> (32 * word)); };
  // [3] (odd): blocks 0 and 1, the last word unused.
  r = rng("THREE_FRY", {0, 0}, {3}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(), (std::vector<uint32_t>{w(0, 0), w(0, 1), w(1, 0)}));
  EXPECT_EQ(r.state[1], 2u);
  // [2, 3]: split along dimension 0: element (j, q) is word j of block q.
  r = rng("THREE_FRY", {0, 0}, {2, 3}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(),
            (std::vector<uint32_t>{w(0, 0), w(1, 0), w(2, 0), w(0, 1), w(1, 1), w(2, 1)}));
  EXPECT_EQ(r.state[1], 3u);
  // [3, 2]: split along dimension 1: element (p, j) is word j of block p.
  r = rng("THREE_FRY", {0, 0}, {3, 2}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(),
            (std::vector<uint32_t>{w(0, 0), w(0, 1), w(1, 0), w(1, 1), w(2, 0), w(2, 1)}));
  // A scalar takes the first word of one block.
  r = rng("THREE_FRY", {0, 0}, {}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(), (std::vector<uint32_t>{0x6b200159}));
  EXPECT_EQ(r.state[1], 1u);
  // Narrow outputs keep the low bits of the 32-bit words.
  EXPECT_EQ(rng("THREE_FRY", {0, 0}, {2}, DType::U8).bits.to_vector<uint8_t>(),
            (std::vector<uint8_t>{0x59, 0xfe}));
  EXPECT_EQ(rng("THREE_FRY", {0, 0}, {2}, DType::U16).bits.to_vector<uint16_t>(),
            (std::vector<uint16_t>{0x0159, 0x4efe}));
  EXPECT_EQ(rng("THREE_FRY", {0, 0}, {2}, DType::I32).bits.to_vector<int32_t>(),
            (std::vector<int32_t>{0x6b200159, static_cast<int32_t>(0x99ba4efeu)}));
}

// State [key, counter_low, counter_high]; one block gives four 32-bit outputs.
TEST(CpuRngBitGenerator, PhiloxKnownAnswers) {
  auto r = rng("PHILOX", {0, 0, 0}, {4}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(),
            (std::vector<uint32_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(r.state, (std::vector<uint64_t>{0, 1, 0}));
  r = rng("PHILOX", {~0ull, ~0ull, ~0ull}, {2, 2}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(),
            (std::vector<uint32_t>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(r.state, (std::vector<uint64_t>{~0ull, 0, 0}));  // the counter carries and wraps
  r = rng("PHILOX",
          {u64(0xa4093822, 0x299f31d0), u64(0x243f6a88, 0x85a308d3), u64(0x13198a2e, 0x03707344)},
          {4}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(),
            (std::vector<uint32_t>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(CpuRngBitGenerator, PhiloxLayouts) {
  // 64-bit outputs take two per block.
  auto r = rng("PHILOX", {0, 0, 0}, {2}, DType::U64);
  EXPECT_EQ(r.bits.to_vector<uint64_t>(),
            (std::vector<uint64_t>{u64(0x6627e8d5, 0xe169c58d), u64(0xbc57ac4c, 0x9b00dbd8)}));
  EXPECT_EQ(r.state[1], 1u);
  // Outputs beyond one block use the next counters: 6 u32 = 2 blocks.
  const auto four = rng("PHILOX", {5, 7, 0}, {8}, DType::U32).bits.to_vector<uint32_t>();
  r = rng("PHILOX", {5, 7, 0}, {6}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(), std::vector<uint32_t>(four.begin(), four.begin() + 6));
  EXPECT_EQ(r.state, (std::vector<uint64_t>{5, 9, 0}));
  EXPECT_EQ(rng("PHILOX", {5, 8, 0}, {4}, DType::U32).bits.to_vector<uint32_t>(),
            std::vector<uint32_t>(four.begin() + 4, four.end()));
  // A 2-word state [key, c] uses counter (low c, high key) and returns [key, c + blocks].
  r = rng("PHILOX", {0, 0}, {4}, DType::U32);
  EXPECT_EQ(r.bits.to_vector<uint32_t>(),
            (std::vector<uint32_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(r.state, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(
      rng("PHILOX", {9, 4}, {5}, DType::U32).bits.to_vector<uint32_t>(),
      std::vector<uint32_t>(rng("PHILOX", {9, 4, 9}, {5}, DType::U32).bits.to_vector<uint32_t>()));
  // Narrow outputs keep the low 16 bits.
  EXPECT_EQ(rng("PHILOX", {0, 0, 0}, {2}, DType::U16).bits.to_vector<uint16_t>(),
            (std::vector<uint16_t>{0xe8d5, 0xc58d}));
}

TEST(CpuRngBitGenerator, DefaultIsPhilox) {
  const auto d = rng("DEFAULT", {3, 4, 5}, {7}, DType::U32);
  const auto p = rng("PHILOX", {3, 4, 5}, {7}, DType::U32);
  EXPECT_EQ(d.bits.to_vector<uint32_t>(), p.bits.to_vector<uint32_t>());
  EXPECT_EQ(d.state, p.state);
}

TEST(CpuRngBitGenerator, FloatOutputsHoldTheBits) {
  const auto r = rng("PHILOX", {0, 0, 0}, {1}, DType::F32);
  uint32_t b;
  std::memcpy(&b, r.bits.data(), 4);
  EXPECT_EQ(b, 0x6627e8d5u);
}

TEST(CpuRngBitGenerator, EmptyOutputKeepsCounter) {
  EXPECT_EQ(rng("THREE_FRY", {1, 2}, {0, 3}, DType::U64).state, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(rng("THREE_FRY", {1, 2}, {0}, DType::U32).state, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(rng("PHILOX", {1, 2, 3}, {0}, DType::U32).state, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(CpuRngBitGenerator, LargeOutputsAreConsistent) {
  // The blocks of a large output equal those of small requests at the same counters.
  const auto big = rng("THREE_FRY", {11, 100}, {100000}, DType::U64).bits.to_vector<uint64_t>();
  EXPECT_EQ(big[99999],
            rng("THREE_FRY", {11, 100 + 99999}, {1}, DType::U64).bits.to_vector<uint64_t>()[0]);
  const auto p = rng("PHILOX", {11, 100, 0}, {100000}, DType::U32).bits.to_vector<uint32_t>();
  const auto tail = rng("PHILOX", {11, 100 + 24999, 0}, {4}, DType::U32).bits.to_vector<uint32_t>();
  EXPECT_EQ(std::vector<uint32_t>(p.end() - 4, p.end()), tail);
}

TEST(CpuRngBitGenerator, RejectsBadStates) {
  EXPECT_THROW(rng("THREE_FRY", {1, 2, 3}, {2}, DType::U32), UnsupportedError);
  EXPECT_THROW(rng("PHILOX", {1}, {2}, DType::U32), UnsupportedError);
  EXPECT_THROW(rng("THREE_FRY", {1, 2}, {2}, DType::Bool), UnsupportedError);
}

}  // namespace
}  // namespace cujax
