// stablehlo.reduce with a region the scalar interpreter runs (several inputs, as in the
// argmax/argmin pattern JAX emits: a (value, index) pair compared and selected). Many results:
// one thread per result folds its elements in row-major order from the init values, as the CPU
// backend does. Few results over long rows: one block per result, each thread folding a strided
// share, then a tree in shared memory; the spec leaves the grouping to the implementation, and
// the argmax regions pick the lower index on ties, so their results do not change.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/op_launch.h"

namespace cujax::cuda {

namespace {

constexpr int kMaxInputs = scalar_program::Program::kMaxResults;

struct RegionReduceArgs {
  int n = 0;
  int bytes[kMaxInputs] = {};
  const void* inputs[kMaxInputs] = {};
  const void* inits[kMaxInputs] = {};
  void* outs[kMaxInputs] = {};
  int kept_rank = 0, red_rank = 0;
  int64_t kept_dims[index::kMaxRank] = {};
  int64_t kept_strides[index::kMaxRank] = {};
  int64_t red_dims[index::kMaxRank] = {};
  int64_t red_strides[index::kMaxRank] = {};
  int64_t red_count = 1;
};

__global__ void region_reduce_kernel(scalar_program::Program region, RegionReduceArgs a, int64_t n_out) {
  uint64_t args[2 * kMaxInputs], acc[kMaxInputs];
  for (int64_t o = thread_begin(); o < n_out; o += thread_stride()) {
    const int64_t base = index::strided_offset(o, a.kept_dims, a.kept_strides, a.kept_rank);
    for (int k = 0; k < a.n; ++k) acc[k] = scalar_program::load(a.inits[k], 0, a.bytes[k]);
    for (int64_t r = 0; r < a.red_count; ++r) {
      const int64_t off = base + index::strided_offset(r, a.red_dims, a.red_strides, a.red_rank);
      for (int k = 0; k < a.n; ++k) {
        args[k] = acc[k];
        args[a.n + k] = scalar_program::load(a.inputs[k], off, a.bytes[k]);
      }
      region.run(args, acc);
    }
    for (int k = 0; k < a.n; ++k) scalar_program::store(a.outs[k], o, a.bytes[k], acc[k]);
  }
}

__global__ void region_reduce_block_kernel(scalar_program::Program region, RegionReduceArgs a) {
  __shared__ uint64_t partial[kMaxInputs][kBlock];
  __shared__ bool have[kBlock];
  uint64_t args[2 * kMaxInputs], acc[kMaxInputs] = {};
  const int64_t o = blockIdx.x;
  const int64_t base = index::strided_offset(o, a.kept_dims, a.kept_strides, a.kept_rank);
  bool any = false;
  for (int64_t r = threadIdx.x; r < a.red_count; r += blockDim.x) {
    const int64_t off = base + index::strided_offset(r, a.red_dims, a.red_strides, a.red_rank);
    if (!any) {
      for (int k = 0; k < a.n; ++k) acc[k] = scalar_program::load(a.inputs[k], off, a.bytes[k]);
      any = true;
      continue;
    }
    for (int k = 0; k < a.n; ++k) {
      args[k] = acc[k];
      args[a.n + k] = scalar_program::load(a.inputs[k], off, a.bytes[k]);
    }
    region.run(args, acc);
  }
  for (int k = 0; k < a.n; ++k) partial[k][threadIdx.x] = acc[k];
  have[threadIdx.x] = any;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s && have[threadIdx.x + s]) {
      if (have[threadIdx.x]) {
        for (int k = 0; k < a.n; ++k) {
          args[k] = partial[k][threadIdx.x];
          args[a.n + k] = partial[k][threadIdx.x + s];
        }
        region.run(args, acc);
        for (int k = 0; k < a.n; ++k) partial[k][threadIdx.x] = acc[k];
      } else {
        for (int k = 0; k < a.n; ++k) partial[k][threadIdx.x] = partial[k][threadIdx.x + s];
      }
      have[threadIdx.x] = true;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    for (int k = 0; k < a.n; ++k) acc[k] = scalar_program::load(a.inits[k], 0, a.bytes[k]);
    if (have[0]) {
      for (int k = 0; k < a.n; ++k) {
        args[k] = acc[k];
        args[a.n + k] = partial[k][0];
      }
      region.run(args, acc);
    }
    for (int k = 0; k < a.n; ++k) scalar_program::store(a.outs[k], o, a.bytes[k], acc[k]);
  }
}

__global__ void reduce_window_kernel(scalar_program::Program region, RegionReduceArgs a, plan::Window w) {
  uint64_t args[2 * kMaxInputs], acc[kMaxInputs], init[kMaxInputs];
  int64_t oi[index::kMaxRank];
  for (int k = 0; k < a.n; ++k) init[k] = scalar_program::load(a.inits[k], 0, a.bytes[k]);
  for (int64_t o = thread_begin(); o < w.num_out; o += thread_stride()) {
    index::unravel(o, w.out_dims, w.rank, oi);
    for (int k = 0; k < a.n; ++k) acc[k] = init[k];
    for (int64_t e = 0; e < w.window_size; ++e) {
      const int64_t off = plan::window_source(w, oi, e);
      for (int k = 0; k < a.n; ++k) {
        args[k] = acc[k];
        args[a.n + k] = off >= 0 ? scalar_program::load(a.inputs[k], off, a.bytes[k]) : init[k];
      }
      region.run(args, acc);
    }
    for (int k = 0; k < a.n; ++k) scalar_program::store(a.outs[k], o, a.bytes[k], acc[k]);
  }
}

constexpr int64_t kFewResults = 1024;
constexpr int64_t kLongReduction = 2048;

}  // namespace

void launch_reduce_region(const scalar_program::Program& region, int n, const DType* types,
                          const void* const* inputs, const void* const* inits, void* const* outs,
                          const int64_t* dims, const bool* reduced, int rank, cudaStream_t s) {
  if (n > kMaxInputs) throw UnsupportedError("reduce: too many inputs for cuda");
  RegionReduceArgs a;
  a.n = n;
  for (int k = 0; k < n; ++k) {
    a.bytes[k] = static_cast<int>(size_of(types[k]));
    a.inputs[k] = inputs[k];
    a.inits[k] = inits[k];
    a.outs[k] = outs[k];
  }
  int64_t strides[index::kMaxRank];
  index::row_major_strides(dims, rank, strides);
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      a.red_dims[a.red_rank] = dims[d];
      a.red_strides[a.red_rank++] = strides[d];
      a.red_count *= dims[d];
    } else {
      a.kept_dims[a.kept_rank] = dims[d];
      a.kept_strides[a.kept_rank++] = strides[d];
    }
  }
  const int64_t n_out = index::num_elements(a.kept_dims, a.kept_rank);
  if (n_out == 0) return;
  if (n_out < kFewResults && a.red_count >= kLongReduction)
    region_reduce_block_kernel<<<static_cast<unsigned>(n_out), kBlock, 0, s>>>(region, a);
  else
    region_reduce_kernel<<<grid_for(n_out), kBlock, 0, s>>>(region, a, n_out);
  CUJAX_CUDA_CHECK_LAUNCH("region_reduce_kernel");
}

void launch_reduce_window(const scalar_program::Program& region, int n, const DType* types,
                          const void* const* inputs, const void* const* inits, void* const* outs,
                          const plan::Window& w, cudaStream_t s) {
  if (n > kMaxInputs) throw UnsupportedError("reduce_window: too many inputs for cuda");
  if (w.num_out == 0) return;
  RegionReduceArgs a;
  a.n = n;
  for (int k = 0; k < n; ++k) {
    a.bytes[k] = static_cast<int>(size_of(types[k]));
    a.inputs[k] = inputs[k];
    a.inits[k] = inits[k];
    a.outs[k] = outs[k];
  }
  reduce_window_kernel<<<grid_for(w.num_out), kBlock, 0, s>>>(region, a, w);
  CUJAX_CUDA_CHECK_LAUNCH("reduce_window_kernel");
}

}  // namespace cujax::cuda
