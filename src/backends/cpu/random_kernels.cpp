// stablehlo.rng_bit_generator, bit for bit as XLA's CPU and GPU backends produce it: XLA expands
// the op with RngBitGeneratorExpander (xla/hlo/transforms/expanders/rng_bit_generator_expander.cc)
// into the generators of xla/hlo/builder/lib/prng.cc, and both backends map DEFAULT to PHILOX.
//
//  - THREE_FRY: state = [key, counter]. Threefry-2x32 with 20 rounds; the counter (a u64 split
//    into two u32 words, low first) is `counter + linear index`. 64-bit outputs take one block
//    each (low word first); 32-bit and narrower outputs split the shape in two halves along one
//    dimension (the first even one, else the first largest one) and take the two words of one
//    block for neighbouring elements. The new state is [key, counter + blocks used].
//  - PHILOX: Philox-4x32 with 10 rounds, key = state[0]; the 128-bit counter is
//    (state[1], state[2]) for a 3-word state and (state[1], state[0]) for a 2-word one. One block
//    gives four 32-bit outputs or two 64-bit ones, in order. The new state is
//    [key, counter + blocks used] (only the low word of the counter for a 2-word state).
// Outputs narrower than 32 bits keep the low bits of a 32-bit output; float outputs receive the
// bits of an unsigned integer of their width.
#include <array>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/parallel.h"

namespace cujax::cpu {

namespace {

inline uint32_t rotl32(uint32_t v, int d) {
  return (v << d) | (v >> (32 - d));
}

// Threefry-2x32, 20 rounds (Salmon et al., SC 2011), as XLA's ThreeFry2x32.
std::array<uint32_t, 2> threefry2x32(uint32_t c0, uint32_t c1, uint32_t k0, uint32_t k1) {
  static constexpr int kRot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const uint32_t ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  uint32_t x0 = c0 + ks[0], x1 = c1 + ks[1];
  for (int i = 0; i < 5; ++i) {
    const int* rot = kRot + (i % 2) * 4;
    for (int r = 0; r < 4; ++r) {
      x0 += x1;
      x1 = rotl32(x1, rot[r]);
      x1 ^= x0;
    }
    x0 += ks[(i + 1) % 3];
    x1 += ks[(i + 2) % 3] + static_cast<uint32_t>(i + 1);
  }
  return {x0, x1};
}

// Philox-4x32, 10 rounds, as XLA's Philox4x32.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> x, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(x[0]) * 0xD2511F53u;
    const uint64_t p1 = static_cast<uint64_t>(x[2]) * 0xCD9E8D57u;
    x = {static_cast<uint32_t>(p1 >> 32) ^ x[1] ^ k0, static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ x[3] ^ k1, static_cast<uint32_t>(p0)};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return x;
}

enum class Algorithm { ThreeFry, Philox };

struct Split {                         // XLA's SplitShapeIntoHalves for 32-bit Threefry outputs
  int64_t pre = 1, len = 1, post = 1;  // output = [pre, len, post]
  int64_t half = 1;                    // ceil(len / 2)
};

Split split_in_halves(const Shape& shape) {
  Split s;
  if (shape.empty()) return s;  // a scalar takes the first word of one block
  int64_t dim = -1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] % 2 == 0) {
      dim = static_cast<int64_t>(i);
      break;
    }
  if (dim < 0)
    for (size_t i = 0; i < shape.size(); ++i)
      if (dim < 0 || shape[i] > shape[dim]) dim = static_cast<int64_t>(i);
  for (int64_t i = 0; i < dim; ++i) s.pre *= shape[i];
  for (size_t i = dim + 1; i < shape.size(); ++i) s.post *= shape[i];
  s.len = shape[dim];
  s.half = (s.len + 1) / 2;
  return s;
}

template <class U>
void store_word(std::byte* out, int64_t i, U v) {
  std::memcpy(out + i * static_cast<int64_t>(sizeof(U)), &v, sizeof(U));
}

// Writes `bits` (a u32 or u64 per element) into an output of `width` bytes per element.
inline void put(std::byte* out, int64_t i, size_t width, uint64_t bits) {
  switch (width) {
    case 1:
      store_word(out, i, static_cast<uint8_t>(bits));
      break;
    case 2:
      store_word(out, i, static_cast<uint16_t>(bits));
      break;
    case 4:
      store_word(out, i, static_cast<uint32_t>(bits));
      break;
    default:
      store_word(out, i, bits);
      break;
  }
}

Kernel rng_bit_generator_kernel(const ir::Operation& op, Compiler&) {
  if (op.operands.size() != 1 || op.results.size() != 2)
    unsupported(op, "takes an initial state and returns (output_state, output)");
  Algorithm alg = Algorithm::Philox;  // DEFAULT is PHILOX on XLA's CPU and GPU backends
  if (const ir::Attribute* a = op.attr("rng_algorithm")) {
    if (a->kind != ir::Attribute::Kind::Enum) unsupported(op, "`rng_algorithm` must be an enum");
    if (a->enum_value == "THREE_FRY")
      alg = Algorithm::ThreeFry;
    else if (a->enum_value != "PHILOX" && a->enum_value != "DEFAULT")
      unsupported(op, "unknown rng_algorithm " + a->enum_value);
  }
  const ir::Type state_type = op.operands[0]->type;
  if (state_type.is_token || state_type.rank() != 1 || size_of(state_type.dtype) != 8 ||
      !is_integer(state_type.dtype))
    unsupported(op, "initial_state must be a 1-dimensional ui64 tensor, got " + state_type.str());
  const int64_t state_len = state_type.shape[0];
  if (alg == Algorithm::ThreeFry && state_len != 2)
    unsupported(op, "THREE_FRY needs a state of 2 words, got " + std::to_string(state_len));
  if (alg == Algorithm::Philox && state_len != 2 && state_len != 3)
    unsupported(op, "PHILOX needs a state of 2 or 3 words, got " + std::to_string(state_len));
  if (op.result(0)->type != state_type) unsupported(op, "output_state must have the state's type");
  const ir::Type out_type = op.result(1)->type;
  if (out_type.is_token || out_type.dtype == DType::Bool)
    unsupported(op, "output must be a tensor of integer or floating-point type");
  const Shape shape = out_type.shape;
  const DType dtype = out_type.dtype;
  const size_t width = size_of(dtype);
  const int64_t count = num_elements(shape);
  const std::string where = op.where();

  return [=](std::span<const HostTensor> in, ExecContext&) {
    if (in.empty() || in[0].dtype() != state_type.dtype || in[0].shape() != state_type.shape)
      throw RuntimeError(where + ": initial_state must be " + state_type.str());
    const uint64_t* state = in[0].data_as<uint64_t>();
    HostTensor new_state(state_type.dtype, state_type.shape);
    uint64_t* ns = new_state.data_as<uint64_t>();
    HostTensor out(dtype, shape);
    auto* dst = static_cast<std::byte*>(out.data());
    const uint64_t key = state[0];
    const uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
    ns[0] = key;
    if (alg == Algorithm::ThreeFry) {
      const uint64_t counter = state[1];
      auto block = [&](uint64_t i) {
        const uint64_t c = counter + i;
        return threefry2x32(static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), k0, k1);
      };
      if (width == 8) {
        parallel_for(count, 4096, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const auto x = block(i);
            put(dst, i, width, static_cast<uint64_t>(x[0]) | (static_cast<uint64_t>(x[1]) << 32));
          }
        });
        ns[1] = counter + static_cast<uint64_t>(count);
      } else {
        const Split s = split_in_halves(shape);
        // Element (p, j, q) takes word j % 2 of block (p * half + j / 2) * post + q.
        const int64_t blocks = s.pre * s.half * s.post;
        parallel_for(blocks, 4096, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const int64_t q = t % s.post, h = (t / s.post) % s.half, p = t / (s.post * s.half);
            const auto x = block(t);
            for (int64_t w = 0; w < 2; ++w) {
              const int64_t j = 2 * h + w;
              if (j < s.len) put(dst, (p * s.len + j) * s.post + q, width, x[w]);
            }
          }
        });
        ns[1] = counter + static_cast<uint64_t>(blocks);
      }
    } else {
      uint64_t lo = state[1], hi = state_len == 3 ? state[2] : state[0];
      const int64_t per_block = width == 8 ? 2 : 4;
      const int64_t blocks = (count + per_block - 1) / per_block;
      parallel_for(blocks, 4096, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const uint64_t clo = lo + static_cast<uint64_t>(i);
          const uint64_t chi = clo < lo ? hi + 1 : hi;
          const auto x = philox4x32({static_cast<uint32_t>(clo), static_cast<uint32_t>(clo >> 32),
                                     static_cast<uint32_t>(chi), static_cast<uint32_t>(chi >> 32)},
                                    k0, k1);
          for (int64_t m = 0; m < per_block; ++m) {
            const int64_t j = i * per_block + m;
            if (j >= count) break;
            const uint64_t bits = width == 8 ? (static_cast<uint64_t>(x[2 * m]) |
                                                (static_cast<uint64_t>(x[2 * m + 1]) << 32))
                                             : x[m];
            put(dst, j, width, bits);
          }
        }
      });
      const uint64_t nlo = lo + static_cast<uint64_t>(blocks);
      ns[1] = nlo;
      if (state_len == 3) ns[2] = nlo < lo ? hi + 1 : hi;
    }
    return std::vector<HostTensor>{new_state, out};
  };
}

}  // namespace

void register_random_kernels(KernelRegistry& r) {
  r.add("stablehlo.rng_bit_generator", rng_bit_generator_kernel);
}

}  // namespace cujax::cpu
