// Splits a loop over [0, n) across the CPU backend's worker threads.
#pragma once

#include <cstdint>
#include <functional>

namespace cujax::cpu {

// Runs body(begin, end) over chunks of at least `grain` iterations; runs inline when n is
// small or when already inside a parallel region.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

int num_threads();

}  // namespace cujax::cpu
