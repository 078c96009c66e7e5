// stablehlo.rng_bit_generator, bit for bit as XLA's CPU and GPU backends produce it. XLA expands
// the op with RngBitGeneratorExpander (xla/hlo/transforms/expanders/rng_bit_generator_expander.cc)
// into the generators of xla/hlo/builder/lib/prng.cc, and both backends map DEFAULT to PHILOX.
//
//  - THREE_FRY: state = [key, counter]. Threefry-2x32 with 20 rounds; the counter (a u64 split
//    into two u32 words, low first) is `counter + block index`. 64-bit outputs take one block
//    each (low word first); 32-bit and narrower outputs split the shape in two halves along one
//    dimension (the first even one, else the first largest one) and take the two words of one
//    block for neighbouring elements. The new state is [key, counter + blocks used].
//  - PHILOX: Philox-4x32 with 10 rounds, key = state[0]; the 128-bit counter is
//    (state[1], state[2]) for a 3-word state and (state[1], state[0]) for a 2-word one. One block
//    gives four 32-bit outputs or two 64-bit ones, in order. The new state is
//    [key, counter + blocks used] (only the low word of the counter for a 2-word state).
// Outputs narrower than 32 bits keep the low bits of a 32-bit output; float outputs receive the
// bits of an unsigned integer of their width.
//
// The generators and the per-block stores are __host__ __device__: the cpu kernel runs them over
// all blocks and the cuda kernel runs one block per thread, so the device kernel's arithmetic
// and indexing are the ones the cpu tests check.
#pragma once

#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define CUJAX_RNG_HD __host__ __device__
#else
#define CUJAX_RNG_HD
#endif

namespace cujax {
namespace ir {
struct Operation;
}

namespace rng_bits {

enum class Algorithm { ThreeFry, Philox };

struct Words2 {
  uint32_t w[2];
};
struct Words4 {
  uint32_t w[4];
};

CUJAX_RNG_HD inline uint32_t rotl32(uint32_t v, int d) {
  return (v << d) | (v >> (32 - d));
}

// Threefry-2x32, 20 rounds (Salmon et al., SC 2011), as XLA's ThreeFry2x32.
CUJAX_RNG_HD inline Words2 threefry2x32(uint32_t c0, uint32_t c1, uint32_t k0, uint32_t k1) {
  const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  uint32_t x0 = c0 + ks[0], x1 = c1 + ks[1];
  for (int i = 0; i < 5; ++i) {
    for (int r = 0; r < 4; ++r) {
      x0 += x1;
      x1 = rotl32(x1, rot[(i % 2) * 4 + r]);
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + static_cast<uint32_t>(i + 1);
  }
  return {{x0, x1}};
}

// Philox-4x32, 10 rounds, as XLA's Philox4x32.
CUJAX_RNG_HD inline Words4 philox4x32(Words4 x, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(x.w[0]) * 0xD2511F53u;
    const uint64_t p1 = static_cast<uint64_t>(x.w[2]) * 0xCD9E8D57u;
    x = {{static_cast<uint32_t>(p1 >> 32) ^ x.w[1] ^ k0, static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ x.w[3] ^ k1, static_cast<uint32_t>(p0)}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return x;
}

// What the op's attributes and types fix: the generator, the output's layout over blocks and
// the number of blocks.
struct Plan {
  Algorithm algorithm = Algorithm::Philox;
  int state_words = 2;
  int width = 4;      // bytes per output element
  int64_t count = 0;  // output elements
  // 32-bit and narrower THREE_FRY outputs as [pre, len, post], blocks over [pre, half, post].
  int64_t pre = 1, len = 1, post = 1, half = 1;
  int64_t blocks = 0;
};

// Checks the op (state type, algorithm, output type) and plans it; throws Error naming the op.
Plan plan(const ir::Operation& op);

// Writes `bits` into element i of an output of `width` bytes per element.
CUJAX_RNG_HD inline void put(unsigned char* out, int64_t i, int width, uint64_t bits) {
  switch (width) {
    case 1: {
      const uint8_t v = static_cast<uint8_t>(bits);
      memcpy(out + i, &v, 1);
      break;
    }
    case 2: {
      const uint16_t v = static_cast<uint16_t>(bits);
      memcpy(out + 2 * i, &v, 2);
      break;
    }
    case 4: {
      const uint32_t v = static_cast<uint32_t>(bits);
      memcpy(out + 4 * i, &v, 4);
      break;
    }
    default:
      memcpy(out + 8 * i, &bits, 8);
      break;
  }
}

// Generates block b (0 <= b < p.blocks) from `state` and stores the elements it gives.
CUJAX_RNG_HD inline void generate_block(const Plan& p, const uint64_t* state, int64_t b,
                                        unsigned char* out) {
  const uint64_t key = state[0];
  const uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  if (p.algorithm == Algorithm::ThreeFry) {
    const uint64_t c = state[1] + static_cast<uint64_t>(b);
    const Words2 x = threefry2x32(static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), k0, k1);
    if (p.width == 8) {
      put(out, b, 8, static_cast<uint64_t>(x.w[0]) | (static_cast<uint64_t>(x.w[1]) << 32));
      return;
    }
    // Block (q, h, r) of [pre, half, post] gives elements (q, 2h, r) and (q, 2h + 1, r).
    const int64_t r = b % p.post, h = (b / p.post) % p.half, q = b / (p.post * p.half);
    for (int w = 0; w < 2; ++w) {
      const int64_t j = 2 * h + w;
      if (j < p.len) put(out, (q * p.len + j) * p.post + r, p.width, x.w[w]);
    }
    return;
  }
  const uint64_t lo = state[1], hi = p.state_words == 3 ? state[2] : state[0];
  const uint64_t clo = lo + static_cast<uint64_t>(b);
  const uint64_t chi = clo < lo ? hi + 1 : hi;
  const Words4 x = philox4x32({{static_cast<uint32_t>(clo), static_cast<uint32_t>(clo >> 32),
                                static_cast<uint32_t>(chi), static_cast<uint32_t>(chi >> 32)}},
                              k0, k1);
  const int per_block = p.width == 8 ? 2 : 4;
  for (int m = 0; m < per_block; ++m) {
    const int64_t j = b * per_block + m;
    if (j >= p.count) break;
    const uint64_t bits =
        p.width == 8
            ? (static_cast<uint64_t>(x.w[2 * m]) | (static_cast<uint64_t>(x.w[2 * m + 1]) << 32))
            : x.w[m];
    put(out, j, p.width, bits);
  }
}

// The output state: the key and the counter advanced by the blocks used.
CUJAX_RNG_HD inline void advance_state(const Plan& p, const uint64_t* state, uint64_t* out) {
  out[0] = state[0];
  const uint64_t lo = state[1];
  const uint64_t nlo = lo + static_cast<uint64_t>(p.blocks);
  out[1] = nlo;
  if (p.state_words == 3) out[2] = nlo < lo ? state[2] + 1 : state[2];
}

}  // namespace rng_bits
}  // namespace cujax
