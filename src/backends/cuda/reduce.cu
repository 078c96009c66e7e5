// stablehlo.reduce with a single add/multiply/max/min/and/or/xor body, combining with the same
// functors (and the same compute types) as the CPU backend. Many results: one thread per result
// walks its reduced elements in row-major order. Few results with many elements each: one block
// per result, each thread combining a strided share, then a tree in shared memory (float sums
// then differ from the CPU's order by rounding only).
#include "backends/common/elementwise.h"
#include "backends/common/index.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace cujax::cuda {

namespace {

struct ReduceGeometry {
  int kept_rank = 0, red_rank = 0;
  int64_t kept_dims[index::kMaxRank];
  int64_t kept_strides[index::kMaxRank];  // in the input
  int64_t red_dims[index::kMaxRank];
  int64_t red_strides[index::kMaxRank];
  int64_t red_count = 1;
};

template <class F, class T>
__global__ void reduce_kernel(F f, const T* in, const T* init, T* out, ReduceGeometry g,
                              int64_t n) {
  using C = ew::compute_t<T, false>;
  for (int64_t o = thread_begin(); o < n; o += thread_stride()) {
    const int64_t base = index::strided_offset(o, g.kept_dims, g.kept_strides, g.kept_rank);
    C acc = ew::to_compute<C>(*init);
    for (int64_t r = 0; r < g.red_count; ++r) {
      const int64_t off = base + index::strided_offset(r, g.red_dims, g.red_strides, g.red_rank);
      acc = f(acc, ew::to_compute<C>(in[off]));
    }
    out[o] = ew::from_compute<T>(acc);
  }
}

template <class F, class T>
__global__ void reduce_block_kernel(F f, const T* in, const T* init, T* out, ReduceGeometry g) {
  using C = ew::compute_t<T, false>;
  __shared__ C partial[kBlock];
  __shared__ bool have[kBlock];  // reductions have no identity here: track empty shares
  const int64_t o = blockIdx.x;
  const int64_t base = index::strided_offset(o, g.kept_dims, g.kept_strides, g.kept_rank);
  C acc{};
  bool any = false;
  for (int64_t r = threadIdx.x; r < g.red_count; r += blockDim.x) {
    const C v = ew::to_compute<C>(
        in[base + index::strided_offset(r, g.red_dims, g.red_strides, g.red_rank)]);
    acc = any ? f(acc, v) : v;
    any = true;
  }
  partial[threadIdx.x] = acc;
  have[threadIdx.x] = any;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s && have[threadIdx.x + s]) {
      partial[threadIdx.x] = have[threadIdx.x] ? f(partial[threadIdx.x], partial[threadIdx.x + s])
                                               : partial[threadIdx.x + s];
      have[threadIdx.x] = true;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const C start = ew::to_compute<C>(*init);
    out[o] = ew::from_compute<T>(have[0] ? f(start, partial[0]) : start);
  }
}

// Below this many results with at least kLongReduction elements each, a block per result.
constexpr int64_t kFewResults = 1024;
constexpr int64_t kLongReduction = 2048;

template <class Fn>
void visit_reduce(ReduceOp op, Fn&& f) {
  switch (op) {
    case ReduceOp::Add:
      return f(ew::Add{});
    case ReduceOp::Multiply:
      return f(ew::Multiply{});
    case ReduceOp::Maximum:
      return f(ew::Maximum{});
    case ReduceOp::Minimum:
      return f(ew::Minimum{});
    case ReduceOp::And:
      return f(ew::And{});
    case ReduceOp::Or:
      return f(ew::Or{});
    case ReduceOp::Xor:
      return f(ew::Xor{});
  }
}

}  // namespace

bool supports_reduce(ReduceOp op, DType t) {
  bool ok = false;
  visit_reduce(op, [&](auto f) {
    visit_dtype(t,
                [&](auto tag) { ok = ew::supports<decltype(f), typename decltype(tag)::type>(); });
  });
  return ok;
}

void launch_reduce(ReduceOp op, DType t, const void* in, const void* init, void* out,
                   const int64_t* dims, const bool* reduced, int rank, cudaStream_t s) {
  int64_t strides[index::kMaxRank];
  index::row_major_strides(dims, rank, strides);
  ReduceGeometry g{};
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      g.red_dims[g.red_rank] = dims[d];
      g.red_strides[g.red_rank++] = strides[d];
      g.red_count *= dims[d];
    } else {
      g.kept_dims[g.kept_rank] = dims[d];
      g.kept_strides[g.kept_rank++] = strides[d];
    }
  }
  const int64_t n = index::num_elements(g.kept_dims, g.kept_rank);
  if (n == 0) return;
  visit_reduce(op, [&](auto f) {
    visit_dtype(t, [&](auto tag) {
      using F = decltype(f);
      using T = typename decltype(tag)::type;
      if constexpr (ew::supports<F, T>()) {
        if (n < kFewResults && g.red_count >= kLongReduction)
          reduce_block_kernel<<<static_cast<unsigned>(n), kBlock, 0, s>>>(
              f, static_cast<const T*>(in), static_cast<const T*>(init), static_cast<T*>(out), g);
        else
          reduce_kernel<<<grid_for(n), kBlock, 0, s>>>(f, static_cast<const T*>(in),
                                                       static_cast<const T*>(init),
                                                       static_cast<T*>(out), g, n);
        CUJAX_CUDA_CHECK_LAUNCH("reduce_kernel");
      } else {
        throw UnsupportedError("cuda reduce kernel: element type " + std::string(mlir_name(t)) +
                               " not supported");
      }
    });
  });
}

}  // namespace cujax::cuda
