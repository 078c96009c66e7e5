// Data movement kernels: the strided box copy behind transpose, slice, broadcast_in_dim,
// concatenate and pad (index math from backends/common/index.h), fill and iota.
#include <string>

#include "backends/common/elementwise.h"
#include "backends/common/index.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace cujax::cuda {

namespace {

template <class U>
__global__ void strided_copy_kernel(index::StridedCopy c, const U* src, U* dst, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride())
    index::strided_copy_elements(c, src, dst, i, i + 1);
}

template <class U>
__global__ void fill_kernel(const U* value, U* dst, int64_t n) {
  const U v = *value;
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) dst[i] = v;
}

struct Dims {
  int64_t d[index::kMaxRank];
};

template <class T>
__global__ void iota_kernel(T* out, Dims dims, int rank, int dim, int64_t n) {
  for (int64_t i = thread_begin(); i < n; i += thread_stride()) {
    int64_t idx[index::kMaxRank];
    index::unravel(i, dims.d, rank, idx);
    out[i] = ew::convert<T, int64_t>(idx[dim]);
  }
}

}  // namespace

void check_kernel_image(int device_ordinal) {
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, fill_kernel<uint8_t>);
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear it
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_ordinal);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_ordinal);
  throw CudaError("no kernel image for device " + std::to_string(device_ordinal) +
                  " (compute capability " + std::to_string(major) + "." + std::to_string(minor) +
                  "): this build has sm_80 and sm_90 code and compute_90 PTX (" +
                  cudaGetErrorName(e) + ")");
}

void launch_strided_copy(size_t element_bytes, const index::StridedCopy& c, const void* src,
                         void* dst, cudaStream_t s) {
  index::StridedCopy box = c;
  box.simplify();
  const int64_t n = box.num_elements();
  if (n == 0) return;
  visit_element_bytes(element_bytes, [&](auto bytes) {
    using U = typename bits_of<decltype(bytes)::value>::type;
    strided_copy_kernel<<<grid_for(n), kBlock, 0, s>>>(box, static_cast<const U*>(src),
                                                       static_cast<U*>(dst), n);
    CUJAX_CUDA_CHECK_LAUNCH("strided_copy_kernel");
  });
}

void launch_fill(size_t element_bytes, const void* value, void* dst, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  visit_element_bytes(element_bytes, [&](auto bytes) {
    using U = typename bits_of<decltype(bytes)::value>::type;
    fill_kernel<<<grid_for(n), kBlock, 0, s>>>(static_cast<const U*>(value), static_cast<U*>(dst),
                                               n);
    CUJAX_CUDA_CHECK_LAUNCH("fill_kernel");
  });
}

void launch_iota(DType t, void* out, const int64_t* dims, int rank, int dim, cudaStream_t s) {
  Dims d{};
  for (int i = 0; i < rank; ++i) d.d[i] = dims[i];
  const int64_t n = index::num_elements(dims, rank);
  if (n == 0) return;
  visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    iota_kernel<<<grid_for(n), kBlock, 0, s>>>(static_cast<T*>(out), d, rank, dim, n);
    CUJAX_CUDA_CHECK_LAUNCH("iota_kernel");
  });
}

}  // namespace cujax::cuda
