// Splits a loop over [0, n) across the CPU backend's worker threads.
#pragma once

#include <cstdint>
#include <functional>

namespace cujax::cpu {

// Runs body(begin, end) over chunks of at least `grain` iterations; runs inline when n is
// small or when already inside a parallel region.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

int num_threads();

// Whether a pool worker is polling for work now. Handing a chunk to one that sleeps waits for its
// wake-up (10-50 us on a VM, more when the cores are busy), longer than a small loop takes whole:
// such loops split only onto a worker that is awake.
bool worker_awake();

}  // namespace cujax::cpu
