// stablehlo.rng_bit_generator on the device: one thread per generator block, with the
// generators and layouts of backends/common/rng_bit_generator.h that the cpu backend runs too.
// The state stays on the device: thread 0 writes the advanced state.
#include "backends/common/rng_bit_generator.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/op_launch.h"

namespace cujax::cuda {

namespace {

__global__ void rng_bit_generator_kernel(rng_bits::Plan p, const uint64_t* state,
                                         unsigned char* out, uint64_t* new_state) {
  if (thread_begin() == 0) rng_bits::advance_state(p, state, new_state);
  for (int64_t b = thread_begin(); b < p.blocks; b += thread_stride())
    rng_bits::generate_block(p, state, b, out);
}

}  // namespace

void launch_rng_bit_generator(const rng_bits::Plan& p, const void* state, void* out,
                              void* new_state, cudaStream_t s) {
  rng_bit_generator_kernel<<<grid_for(p.blocks), kBlock, 0, s>>>(
      p, static_cast<const uint64_t*>(state), static_cast<unsigned char*>(out),
      static_cast<uint64_t*>(new_state));
  CUJAX_CUDA_CHECK_LAUNCH("rng_bit_generator_kernel");
}

}  // namespace cujax::cuda
