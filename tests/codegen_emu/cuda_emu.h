// The CUDA built-ins that generated fusion kernels use, emulated on the host, so that the same
// generated source compiled by the host compiler runs over an emulated thread grid
// (cuda_codegen_test.cpp). Each thread of a block is a fiber (ucontext) on one OS thread; the
// blocks of a grid run one after another. __syncthreads() parks a fiber until every live
// thread of its block arrives; __shfl_xor_sync() parks it until all 32 lanes of its warp have
// put their value, then reads its partner's, then waits again so that no lane overwrites a value
// still being read. A barrier or shuffle that cannot complete (divergence, exited lanes) is an
// error, not a hang. Force-included (-include) before the generated source.
#pragma once

#include <ucontext.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One block runs at a time on a thread, so a block's shared memory is a thread-local static.
#define __shared__ static thread_local

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace cujax_emu {

constexpr size_t kStackBytes = 64 * 1024;

enum class State { Runnable, AtBarrier, AtShuffle, Done };

struct Thread {
  ucontext_t context;
  State state = State::Runnable;
  dim3 index;
};

struct Block {
  std::vector<Thread> threads;
  std::vector<unsigned long long> slots;  // one shuffle value per thread
  ucontext_t scheduler;
  int current = -1;
  dim3 block_index, block_dim, grid_dim;
  const std::function<void()>* body = nullptr;
};

inline thread_local Block* g_block = nullptr;

inline Thread& self() {
  return g_block->threads[g_block->current];
}

inline void park(State s) {
  Thread& t = self();
  t.state = s;
  swapcontext(&t.context, &g_block->scheduler);
}

inline void fiber_main() {
  (*g_block->body)();
  self().state = State::Done;  // returning resumes the scheduler (uc_link)
}

inline void syncthreads() {
  park(State::AtBarrier);
}

template <class U>
U shfl_xor(U value, int lane_mask) {
  const int me = g_block->current;
  g_block->slots[me] = static_cast<unsigned long long>(value);
  park(State::AtShuffle);
  const int partner = (me & ~31) | ((me & 31) ^ lane_mask);
  const U got = static_cast<U>(g_block->slots[partner]);
  park(State::AtShuffle);
  return got;
}

inline void run_block(Block& b, std::vector<char>& stacks) {
  const size_t n = b.threads.size();
  for (size_t i = 0; i < n; ++i) {
    Thread& t = b.threads[i];
    t.state = State::Runnable;
    t.index = dim3{static_cast<unsigned>(i), 1, 1};
    getcontext(&t.context);
    t.context.uc_stack.ss_sp = stacks.data() + i * kStackBytes;
    t.context.uc_stack.ss_size = kStackBytes;
    t.context.uc_link = &b.scheduler;
    makecontext(&t.context, fiber_main, 0);
  }
  for (;;) {
    for (size_t i = 0; i < n; ++i) {
      if (b.threads[i].state != State::Runnable) continue;
      b.current = static_cast<int>(i);
      swapcontext(&b.scheduler, &b.threads[i].context);
    }
    size_t live = 0, at_barrier = 0;
    for (const Thread& t : b.threads) {
      live += t.state != State::Done;
      at_barrier += t.state == State::AtBarrier;
    }
    if (live == 0) return;
    bool released = false;
    if (at_barrier == live) {
      for (Thread& t : b.threads)
        if (t.state == State::AtBarrier) t.state = State::Runnable;
      released = true;
    }
    for (size_t w = 0; w * 32 < n; ++w) {
      size_t waiting = 0, lanes = 0;
      for (size_t i = w * 32; i < n && i < w * 32 + 32; ++i, ++lanes)
        waiting += b.threads[i].state == State::AtShuffle;
      if (waiting == 0) continue;
      if (waiting != 32 || lanes != 32)
        continue;  // not all lanes are there yet (checked below if nothing else can run)
      for (size_t i = w * 32; i < w * 32 + 32; ++i) b.threads[i].state = State::Runnable;
      released = true;
    }
    if (!released)
      throw std::runtime_error("emulated block " + std::to_string(b.block_index.x) +
                               ": threads wait at a barrier or shuffle that cannot complete");
  }
}

// Runs `body` (the kernel call) for every thread of a grid of `grid` x `block` threads.
inline void launch(unsigned grid, unsigned block, const std::function<void()>& body) {
  Block b;
  b.threads.resize(block);
  b.slots.resize(block);
  b.block_dim = dim3{block, 1, 1};
  b.grid_dim = dim3{grid, 1, 1};
  b.body = &body;
  std::vector<char> stacks(block * kStackBytes);
  Block* saved = g_block;
  g_block = &b;
  try {
    for (unsigned g = 0; g < grid; ++g) {
      b.block_index = dim3{g, 1, 1};
      run_block(b, stacks);
    }
  } catch (...) {
    g_block = saved;
    throw;
  }
  g_block = saved;
}

}  // namespace cujax_emu

#define threadIdx (::cujax_emu::self().index)
#define blockIdx (::cujax_emu::g_block->block_index)
#define blockDim (::cujax_emu::g_block->block_dim)
#define gridDim (::cujax_emu::g_block->grid_dim)

inline void __syncthreads() {
  cujax_emu::syncthreads();
}
inline unsigned __shfl_xor_sync(unsigned, unsigned v, int lane_mask) {
  return cujax_emu::shfl_xor(v, lane_mask);
}
inline unsigned long long __shfl_xor_sync(unsigned, unsigned long long v, int lane_mask) {
  return cujax_emu::shfl_xor(v, lane_mask);
}
// Blocks run one after another, so memory is always coherent and atomics need no lock.
inline void __threadfence() {}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
