// gather, scatter, dynamic_slice, dynamic_update_slice and clamp: one thread per element, with
// the index math of backends/common/gather_scatter.h and index.h that the CPU tests check.
//
// Scatter combines with atomics. Integer results do not depend on the order (wraparound add,
// max, and, ... are associative and commutative). Floating-point add, multiply and the like
// round in whatever order the atomics land, so results can differ between runs in the last
// bits, as XLA's GPU scatter does unless --xla_gpu_deterministic_ops is set.
#include "backends/common/elementwise.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/op_launch.h"

namespace cujax::cuda {

namespace {

template <int B>
__global__ void gather_kernel(plan::GatherPlan g, const void* operand, const void* indices,
                              void* out, int64_t n) {
  using U = typename bits_of<B>::type;
  for (int64_t r = thread_begin(); r < n; r += thread_stride())
    static_cast<U*>(out)[r] = static_cast<const U*>(operand)[plan::gather_source(g, indices, r)];
}

// Replaces element `off` of an array of `bytes`-byte elements by f(old) atomically; 1- and
// 2-byte elements go through the aligned 4-byte word that holds them (allocations are whole
// 8-byte words: Device::allocate).
template <class F>
__device__ void atomic_update(void* base, int64_t off, int bytes, F f) {
  if (bytes == 8) {
    auto* p = static_cast<unsigned long long*>(base) + off;
    unsigned long long old = *p, assumed;
    do {
      assumed = old;
      old = atomicCAS(p, assumed, static_cast<unsigned long long>(f(assumed)));
    } while (old != assumed);
  } else if (bytes == 4) {
    auto* p = static_cast<unsigned int*>(base) + off;
    unsigned int old = *p, assumed;
    do {
      assumed = old;
      old = atomicCAS(p, assumed, static_cast<unsigned int>(f(assumed)));
    } while (old != assumed);
  } else {
    const uintptr_t a = reinterpret_cast<uintptr_t>(static_cast<char*>(base) + off * bytes);
    auto* word = reinterpret_cast<unsigned int*>(a & ~uintptr_t{3});
    const unsigned shift = static_cast<unsigned>(a & 3) * 8;
    const unsigned mask = (bytes == 1 ? 0xFFu : 0xFFFFu) << shift;
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      const uint64_t cur = (assumed & mask) >> shift;
      const unsigned next = (assumed & ~mask) | ((static_cast<unsigned>(f(cur)) << shift) & mask);
      old = atomicCAS(word, assumed, next);
    } while (old != assumed);
  }
}

template <class T>
__device__ uint64_t combine(Combine c, uint64_t a_bits, uint64_t b_bits) {
  const T a = scalar_program::from_bits<T>(a_bits), b = scalar_program::from_bits<T>(b_bits);
  switch (c) {
    case Combine::Add:
      return scalar_program::detail::binary<ew::Add>(a, b);
    case Combine::Sub:
      return scalar_program::detail::binary<ew::Subtract>(a, b);
    case Combine::Mul:
      return scalar_program::detail::binary<ew::Multiply>(a, b);
    case Combine::Max:
      return scalar_program::detail::binary<ew::Maximum>(a, b);
    case Combine::Min:
      return scalar_program::detail::binary<ew::Minimum>(a, b);
    case Combine::And:
      return scalar_program::detail::binary<ew::And>(a, b);
    case Combine::Or:
      return scalar_program::detail::binary<ew::Or>(a, b);
    case Combine::Xor:
      return scalar_program::detail::binary<ew::Xor>(a, b);
    default:
      return b_bits;
  }
}

// Native atomics where they compute exactly what the functor does.
template <class T>
__device__ bool native_add(T* p, T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                std::is_same_v<T, int32_t> || std::is_same_v<T, uint32_t>) {
    atomicAdd(p, v);
    return true;
  } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, uint64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
    return true;
  } else {
    return false;
  }
}

template <class T>
__global__ void scatter_kernel(Combine c, scalar_program::Program region, bool use_region,
                               plan::ScatterPlan p, const void* indices, const T* updates,
                               T* result, int64_t n) {
  for (int64_t u = thread_begin(); u < n; u += thread_stride()) {
    const int64_t t = plan::scatter_target(p, indices, u);
    if (t < 0) continue;
    const uint64_t v = scalar_program::to_bits(updates[u]);
    if (use_region) {
      atomic_update(result, t, sizeof(T), [&](uint64_t old) {
        const uint64_t args[2] = {old, v};
        uint64_t out = 0;
        region.run(args, &out);
        return out;
      });
    } else if (c == Combine::Assign) {
      result[t] = updates[u];
    } else if (!(c == Combine::Add && native_add(result + t, updates[u]))) {
      atomic_update(result, t, sizeof(T), [&](uint64_t old) { return combine<T>(c, old, v); });
    }
  }
}

// Assign with repeated indices: the update of the highest position wins each element.
__global__ void scatter_winners_kernel(plan::ScatterPlan p, const void* indices, long long* winners,
                                       int64_t n) {
  for (int64_t u = thread_begin(); u < n; u += thread_stride()) {
    int64_t pos = 0;
    const int64_t t = plan::scatter_target(p, indices, u, &pos);
    if (t >= 0) atomicMax(winners + t, static_cast<long long>(pos));
  }
}

template <int B>
__global__ void scatter_assign_winners_kernel(plan::ScatterPlan p, const void* indices,
                                              const long long* winners, const void* updates,
                                              void* result, int64_t n) {
  using U = typename bits_of<B>::type;
  for (int64_t u = thread_begin(); u < n; u += thread_stride()) {
    int64_t pos = 0;
    const int64_t t = plan::scatter_target(p, indices, u, &pos);
    if (t >= 0 && winners[t] == pos) static_cast<U*>(result)[t] = static_cast<const U*>(updates)[u];
  }
}

constexpr int kMaxSerialInputs = scalar_program::Program::kMaxResults;

struct SerialArgs {
  int n = 0;
  int bytes[kMaxSerialInputs] = {};
  const void* updates[kMaxSerialInputs] = {};
  void* results[kMaxSerialInputs] = {};
};

__global__ void scatter_serial_kernel(scalar_program::Program region, plan::ScatterPlan p,
                                      const void* indices, SerialArgs a, int64_t n) {
  uint64_t args[2 * kMaxSerialInputs], out[kMaxSerialInputs];
  for (int64_t u = 0; u < n; ++u) {
    const int64_t t = plan::scatter_target(p, indices, u);
    if (t < 0) continue;
    for (int k = 0; k < a.n; ++k) {
      args[k] = scalar_program::load(a.results[k], t, a.bytes[k]);
      args[a.n + k] = scalar_program::load(a.updates[k], u, a.bytes[k]);
    }
    region.run(args, out);
    for (int k = 0; k < a.n; ++k) scalar_program::store(a.results[k], t, a.bytes[k], out[k]);
  }
}

// The clamped start of each dimension of a dynamic window.
__device__ void window_starts(const DynamicWindow& w, int64_t* start) {
  for (int d = 0; d < w.rank; ++d)
    start[d] = index::clamp_start(plan::load_index(w.starts[d], w.index_type, 0), w.operand_dims[d],
                                  w.sizes[d]);
}

template <int B>
__global__ void dynamic_slice_kernel(DynamicWindow w, const void* operand, void* out, int64_t n) {
  using U = typename bits_of<B>::type;
  int64_t start[index::kMaxRank], strides[index::kMaxRank], idx[index::kMaxRank];
  window_starts(w, start);
  index::row_major_strides(w.operand_dims, w.rank, strides);
  for (int64_t r = thread_begin(); r < n; r += thread_stride()) {
    index::unravel(r, w.sizes, w.rank, idx);
    int64_t off = 0;
    for (int d = 0; d < w.rank; ++d) off += (start[d] + idx[d]) * strides[d];
    static_cast<U*>(out)[r] = static_cast<const U*>(operand)[off];
  }
}

template <int B>
__global__ void dynamic_update_slice_kernel(DynamicWindow w, const void* update, void* result,
                                            int64_t n) {
  using U = typename bits_of<B>::type;
  int64_t start[index::kMaxRank], strides[index::kMaxRank], idx[index::kMaxRank];
  window_starts(w, start);
  index::row_major_strides(w.operand_dims, w.rank, strides);
  for (int64_t r = thread_begin(); r < n; r += thread_stride()) {
    index::unravel(r, w.sizes, w.rank, idx);
    int64_t off = 0;
    for (int d = 0; d < w.rank; ++d) off += (start[d] + idx[d]) * strides[d];
    static_cast<U*>(result)[off] = static_cast<const U*>(update)[r];
  }
}

// The window of source element s: the offset its select region picks (-1: only padding).
__global__ void select_kernel(scalar_program::Program select, plan::Window w, const void* operand,
                              int bytes, int64_t* selected) {
  int64_t oi[index::kMaxRank];
  for (int64_t s = thread_begin(); s < w.num_out; s += thread_stride()) {
    index::unravel(s, w.out_dims, w.rank, oi);
    int64_t best = -1;
    uint64_t args[2], keep = 0;
    for (int64_t e = 0; e < w.window_size; ++e) {
      const int64_t off = plan::window_source(w, oi, e);
      if (off < 0) continue;
      const uint64_t v = scalar_program::load(operand, off, bytes);
      if (best >= 0) {
        args[1] = v;
        select.run(args, &keep);
        if (keep & 1) continue;
      }
      best = off;
      args[0] = v;
    }
    selected[s] = best;
  }
}

template <class T>
__global__ void scatter_selected_kernel(Combine c, scalar_program::Program region, bool use_region,
                                        const int64_t* selected, const T* source, T* result,
                                        int64_t n) {
  for (int64_t s = thread_begin(); s < n; s += thread_stride()) {
    const int64_t t = selected[s];
    if (t < 0) continue;
    const uint64_t v = scalar_program::to_bits(source[s]);
    if (use_region) {
      atomic_update(result, t, sizeof(T), [&](uint64_t old) {
        const uint64_t args[2] = {old, v};
        uint64_t out = 0;
        region.run(args, &out);
        return out;
      });
    } else if (!(c == Combine::Add && native_add(result + t, source[s]))) {
      atomic_update(result, t, sizeof(T), [&](uint64_t old) { return combine<T>(c, old, v); });
    }
  }
}

template <class T>
__global__ void clamp_kernel(const T* lo, int64_t lo_step, const T* x, const T* hi, int64_t hi_step,
                             T* out, int64_t n) {
  using C = ew::compute_t<T, false>;
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) {
    const C v = ew::Maximum{}(ew::to_compute<C>(x[i]), ew::to_compute<C>(lo[i * lo_step]));
    out[i] = ew::from_compute<T>(ew::Minimum{}(v, ew::to_compute<C>(hi[i * hi_step])));
  }
}

}  // namespace

void launch_gather(size_t element_bytes, const plan::GatherPlan& g, const void* operand,
                   const void* indices, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_element_bytes(element_bytes, [&](auto b) {
    gather_kernel<decltype(b)::value><<<grid_for(n), kBlock, 0, s>>>(g, operand, indices, out, n);
  });
  CUJAX_CUDA_CHECK_LAUNCH("gather_kernel");
}

void launch_scatter(DType t, Combine c, const scalar_program::Program* region, const plan::ScatterPlan& p,
                    const void* indices, const void* updates, void* result, int64_t n_updates,
                    int64_t* winners, int64_t n_results, cudaStream_t s) {
  if (n_updates == 0 || n_results == 0) return;
  if (c == Combine::Assign && winners) {
    CUJAX_CUDA_CHECK(
        cudaMemsetAsync(winners, 0xFF, static_cast<size_t>(n_results) * sizeof(int64_t), s));
    auto* w = reinterpret_cast<long long*>(winners);
    scatter_winners_kernel<<<grid_for(n_updates), kBlock, 0, s>>>(p, indices, w, n_updates);
    CUJAX_CUDA_CHECK_LAUNCH("scatter_winners_kernel");
    visit_element_bytes(size_of(t), [&](auto b) {
      scatter_assign_winners_kernel<decltype(b)::value>
          <<<grid_for(n_updates), kBlock, 0, s>>>(p, indices, w, updates, result, n_updates);
    });
    CUJAX_CUDA_CHECK_LAUNCH("scatter_assign_winners_kernel");
    return;
  }
  const scalar_program::Program none{};
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_kernel<T><<<grid_for(n_updates), kBlock, 0, s>>>(
        c, region ? *region : none, region != nullptr, p, indices, static_cast<const T*>(updates),
        static_cast<T*>(result), n_updates);
  });
  CUJAX_CUDA_CHECK_LAUNCH("scatter_kernel");
}

void launch_scatter_serial(int n_inputs, const DType* types, const scalar_program::Program& region,
                           const plan::ScatterPlan& p, const void* indices,
                           const void* const* updates, void* const* results, int64_t n_updates,
                           cudaStream_t s) {
  if (n_updates == 0) return;
  if (n_inputs > kMaxSerialInputs) throw UnsupportedError("scatter: too many inputs for cuda");
  SerialArgs a;
  a.n = n_inputs;
  for (int k = 0; k < n_inputs; ++k) {
    a.bytes[k] = static_cast<int>(size_of(types[k]));
    a.updates[k] = updates[k];
    a.results[k] = results[k];
  }
  scatter_serial_kernel<<<1, 1, 0, s>>>(region, p, indices, a, n_updates);
  CUJAX_CUDA_CHECK_LAUNCH("scatter_serial_kernel");
}

void launch_dynamic_slice(size_t element_bytes, const DynamicWindow& w, const void* operand,
                          void* out, cudaStream_t s) {
  const int64_t n = index::num_elements(w.sizes, w.rank);
  if (n == 0) return;
  visit_element_bytes(element_bytes, [&](auto b) {
    dynamic_slice_kernel<decltype(b)::value><<<grid_for(n), kBlock, 0, s>>>(w, operand, out, n);
  });
  CUJAX_CUDA_CHECK_LAUNCH("dynamic_slice_kernel");
}

void launch_dynamic_update_slice(size_t element_bytes, const DynamicWindow& w, const void* update,
                                 void* result, cudaStream_t s) {
  const int64_t n = index::num_elements(w.sizes, w.rank);
  if (n == 0) return;
  visit_element_bytes(element_bytes, [&](auto b) {
    dynamic_update_slice_kernel<decltype(b)::value>
        <<<grid_for(n), kBlock, 0, s>>>(w, update, result, n);
  });
  CUJAX_CUDA_CHECK_LAUNCH("dynamic_update_slice_kernel");
}

void launch_select_and_scatter(DType t, const scalar_program::Program& select, Combine combine,
                               const scalar_program::Program* scatter, const plan::Window& w,
                               const void* operand, const void* source, void* result,
                               int64_t* selected, cudaStream_t s) {
  if (w.num_out == 0) return;
  select_kernel<<<grid_for(w.num_out), kBlock, 0, s>>>(select, w, operand,
                                                       static_cast<int>(size_of(t)), selected);
  CUJAX_CUDA_CHECK_LAUNCH("select_kernel");
  const scalar_program::Program none{};
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_selected_kernel<T><<<grid_for(w.num_out), kBlock, 0, s>>>(
        combine, scatter ? *scatter : none, scatter != nullptr, selected,
        static_cast<const T*>(source), static_cast<T*>(result), w.num_out);
  });
  CUJAX_CUDA_CHECK_LAUNCH("scatter_selected_kernel");
}

void launch_clamp(DType t, const void* lo, bool lo_scalar, const void* x, const void* hi,
                  bool hi_scalar, void* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    clamp_kernel<T><<<grid_for(n), kBlock, 0, s>>>(
        static_cast<const T*>(lo), lo_scalar ? 0 : 1, static_cast<const T*>(x),
        static_cast<const T*>(hi), hi_scalar ? 0 : 1, static_cast<T*>(out), n);
  });
  CUJAX_CUDA_CHECK_LAUNCH("clamp_kernel");
}

}  // namespace cujax::cuda
