// cuSOLVER (dense) and cuSPARSE, loaded with dlopen on first use as cuBLASLt is (library.h): a
// CUDA build starts without them and says so when a linear-algebra call needs them. The entry
// points are the 32-bit legacy API per element type (S, D, C, Z), which JAX's own cuda kernels
// call, resolved once for the process; the handles are per device.
#pragma once

#include <cublas_api.h>
#include <cusolverDn.h>
#include <cusparse.h>

#include <string>
#include <vector>

#include "backends/cuda/device.h"

namespace cujax::cuda {

// One element type's cuSOLVER routines; T is float, double, cuComplex or cuDoubleComplex and R
// its real type. syevd/sytrd/orgqr are heevd/hetrd/ungqr for complex types.
template <class T, class R>
struct SolverRoutines {
  using scalar = T;
  using real = R;
  cusolverStatus_t (*potrf_bs)(cusolverDnHandle_t, cublasFillMode_t, int, T*, int, int*);
  cusolverStatus_t (*potrf)(cusolverDnHandle_t, cublasFillMode_t, int, T*, int, T*, int, int*);
  cusolverStatus_t (*getrf_bs)(cusolverDnHandle_t, int, int, T*, int, int*);
  cusolverStatus_t (*getrf)(cusolverDnHandle_t, int, int, T*, int, T*, int*, int*);
  cusolverStatus_t (*geqrf_bs)(cusolverDnHandle_t, int, int, T*, int, int*);
  cusolverStatus_t (*geqrf)(cusolverDnHandle_t, int, int, T*, int, T*, T*, int, int*);
  cusolverStatus_t (*orgqr_bs)(cusolverDnHandle_t, int, int, int, const T*, int, const T*, int*);
  cusolverStatus_t (*orgqr)(cusolverDnHandle_t, int, int, int, T*, int, const T*, T*, int, int*);
  cusolverStatus_t (*syevd_bs)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int,
                               const T*, int, const R*, int*);
  cusolverStatus_t (*syevd)(cusolverDnHandle_t, cusolverEigMode_t, cublasFillMode_t, int, T*, int,
                            R*, T*, int, int*);
  cusolverStatus_t (*sytrd_bs)(cusolverDnHandle_t, cublasFillMode_t, int, const T*, int, const R*,
                               const R*, const T*, int*);
  cusolverStatus_t (*sytrd)(cusolverDnHandle_t, cublasFillMode_t, int, T*, int, R*, R*, T*, T*, int,
                            int*);
  cusolverStatus_t (*gesvd_bs)(cusolverDnHandle_t, int, int, int*);
  cusolverStatus_t (*gesvd)(cusolverDnHandle_t, signed char, signed char, int, int, T*, int, R*, T*,
                            int, T*, int, T*, int, R*, int*);
  cusolverStatus_t (*gesvdj_bs)(cusolverDnHandle_t, cusolverEigMode_t, int, int, int, const T*, int,
                                const R*, const T*, int, const T*, int, int*, gesvdjInfo_t);
  cusolverStatus_t (*gesvdj)(cusolverDnHandle_t, cusolverEigMode_t, int, int, int, T*, int, R*, T*,
                             int, T*, int, T*, int, int*, gesvdjInfo_t);
};

struct SolverApi {
  decltype(&cusolverDnCreate) create = nullptr;
  decltype(&cusolverDnSetStream) set_stream = nullptr;
  decltype(&cusolverDnCreateGesvdjInfo) create_gesvdj_info = nullptr;
  SolverRoutines<float, float> s{};
  SolverRoutines<double, double> d{};
  SolverRoutines<cuComplex, float> c{};
  SolverRoutines<cuDoubleComplex, double> z{};
  std::string path;
};

// cuSPARSE's tridiagonal solver (gtsv2, pivoting) per element type.
template <class T>
struct Gtsv2Routines {
  using scalar = T;
  cusparseStatus_t (*buffer_size)(cusparseHandle_t, int, int, const T*, const T*, const T*,
                                  const T*, int, size_t*);
  cusparseStatus_t (*solve)(cusparseHandle_t, int, int, const T*, const T*, const T*, T*, int,
                            void*);
};

struct SparseApi {
  decltype(&cusparseCreate) create = nullptr;
  decltype(&cusparseSetStream) set_stream = nullptr;
  Gtsv2Routines<float> s{};
  Gtsv2Routines<double> d{};
  Gtsv2Routines<cuComplex> c{};
  Gtsv2Routines<cuDoubleComplex> z{};
  std::string path;
};

// The libraries loaded and every entry point above resolved (dlopen/dlsym only: no device is
// needed). Throws CudaError naming the library, where it looked and any missing symbol.
const SolverApi& solver_api();
const SparseApi& sparse_api();

// The device's handles, created on first use and bound to its stream.
cusolverDnHandle_t solver_handle(Device& device);
cusparseHandle_t sparse_handle(Device& device);
// gesvdj's parameters (cuSOLVER's defaults), one per device: its calls share them in stream
// order, and gesvdj may still use them after the call returns.
gesvdjInfo_t gesvdj_params(Device& device);

// Throws CudaError naming the call and the status unless it succeeded.
void check_solver(cusolverStatus_t s, const char* call, const char* file, int line);
void check_sparse(cusparseStatus_t s, const char* call, const char* file, int line);

}  // namespace cujax::cuda

#define CUJAX_SOLVER_CHECK(call) ::cujax::cuda::check_solver((call), #call, __FILE__, __LINE__)
#define CUJAX_SPARSE_CHECK(call) ::cujax::cuda::check_sparse((call), #call, __FILE__, __LINE__)
