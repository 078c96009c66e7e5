#include "backends/cuda/cusolver.h"

#include <map>
#include <mutex>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/library.h"

namespace cujax::cuda {

namespace {

// Resolves `name` into `field`, whose type must be the header's declaration of it: the
// signatures above are checked against cuSOLVER's and cuSPARSE's own headers at compile time.
#define CUJAX_RESOLVE(lib, field, name)                                                      \
  do {                                                                                       \
    static_assert(std::is_same_v<std::remove_reference_t<decltype(field)>, decltype(&name)>, \
                  #name " has another signature");                                           \
    (lib).resolve(field, #name);                                                             \
  } while (0)

#define CUJAX_RESOLVE_SOLVER(lib, r, P, SY, EV, ORG)                   \
  do {                                                                 \
    CUJAX_RESOLVE(lib, r.potrf_bs, cusolverDn##P##potrf_bufferSize);   \
    CUJAX_RESOLVE(lib, r.potrf, cusolverDn##P##potrf);                 \
    CUJAX_RESOLVE(lib, r.getrf_bs, cusolverDn##P##getrf_bufferSize);   \
    CUJAX_RESOLVE(lib, r.getrf, cusolverDn##P##getrf);                 \
    CUJAX_RESOLVE(lib, r.geqrf_bs, cusolverDn##P##geqrf_bufferSize);   \
    CUJAX_RESOLVE(lib, r.geqrf, cusolverDn##P##geqrf);                 \
    CUJAX_RESOLVE(lib, r.orgqr_bs, cusolverDn##P##ORG##_bufferSize);   \
    CUJAX_RESOLVE(lib, r.orgqr, cusolverDn##P##ORG);                   \
    CUJAX_RESOLVE(lib, r.syevd_bs, cusolverDn##P##EV##_bufferSize);    \
    CUJAX_RESOLVE(lib, r.syevd, cusolverDn##P##EV);                    \
    CUJAX_RESOLVE(lib, r.sytrd_bs, cusolverDn##P##SY##_bufferSize);    \
    CUJAX_RESOLVE(lib, r.sytrd, cusolverDn##P##SY);                    \
    CUJAX_RESOLVE(lib, r.gesvd_bs, cusolverDn##P##gesvd_bufferSize);   \
    CUJAX_RESOLVE(lib, r.gesvd, cusolverDn##P##gesvd);                 \
    CUJAX_RESOLVE(lib, r.gesvdj_bs, cusolverDn##P##gesvdj_bufferSize); \
    CUJAX_RESOLVE(lib, r.gesvdj, cusolverDn##P##gesvdj);               \
  } while (0)

#define CUJAX_RESOLVE_GTSV2(lib, r, P)                                   \
  do {                                                                   \
    CUJAX_RESOLVE(lib, r.buffer_size, cusparse##P##gtsv2_bufferSizeExt); \
    CUJAX_RESOLVE(lib, r.solve, cusparse##P##gtsv2);                     \
  } while (0)

const char* const kFix = "add the CUDA toolkit's lib64 to LD_LIBRARY_PATH";

template <class Handle>
struct Handles {
  std::mutex mu;
  std::map<int, Handle> by_device;  // never destroyed: one per device for the process
};

}  // namespace

const SolverApi& solver_api() {
  static const SolverApi api = [] {
    Library lib("libcusolver.so." + std::to_string(CUSOLVER_VER_MAJOR),
                "cuSOLVER, needed for JAX's cusolver_*_ffi custom calls and stablehlo.cholesky",
                kFix);
    SolverApi a;
    CUJAX_RESOLVE(lib, a.create, cusolverDnCreate);
    CUJAX_RESOLVE(lib, a.set_stream, cusolverDnSetStream);
    CUJAX_RESOLVE(lib, a.create_gesvdj_info, cusolverDnCreateGesvdjInfo);
    CUJAX_RESOLVE_SOLVER(lib, a.s, S, sytrd, syevd, orgqr);
    CUJAX_RESOLVE_SOLVER(lib, a.d, D, sytrd, syevd, orgqr);
    CUJAX_RESOLVE_SOLVER(lib, a.c, C, hetrd, heevd, ungqr);
    CUJAX_RESOLVE_SOLVER(lib, a.z, Z, hetrd, heevd, ungqr);
    lib.check_resolved();
    a.path = lib.path();
    return a;
  }();
  return api;
}

const SparseApi& sparse_api() {
  static const SparseApi api = [] {
    Library lib("libcusparse.so." + std::to_string(CUSPARSE_VER_MAJOR),
                "cuSPARSE, needed for JAX's cusparse_gtsv2_ffi custom call", kFix);
    SparseApi a;
    CUJAX_RESOLVE(lib, a.create, cusparseCreate);
    CUJAX_RESOLVE(lib, a.set_stream, cusparseSetStream);
    CUJAX_RESOLVE_GTSV2(lib, a.s, S);
    CUJAX_RESOLVE_GTSV2(lib, a.d, D);
    CUJAX_RESOLVE_GTSV2(lib, a.c, C);
    CUJAX_RESOLVE_GTSV2(lib, a.z, Z);
    lib.check_resolved();
    a.path = lib.path();
    return a;
  }();
  return api;
}

void check_solver(cusolverStatus_t s, const char* call, const char* file, int line) {
  if (s != CUSOLVER_STATUS_SUCCESS)
    throw_cuda_error(call, "cusolverStatus_t " + std::to_string(static_cast<int>(s)), file, line);
}

void check_sparse(cusparseStatus_t s, const char* call, const char* file, int line) {
  if (s != CUSPARSE_STATUS_SUCCESS)
    throw_cuda_error(call, "cusparseStatus_t " + std::to_string(static_cast<int>(s)), file, line);
}

cusolverDnHandle_t solver_handle(Device& device) {
  static Handles<cusolverDnHandle_t> handles;
  const SolverApi& api = solver_api();
  std::lock_guard<std::mutex> lock(handles.mu);
  auto it = handles.by_device.find(device.ordinal());
  if (it == handles.by_device.end()) {
    device.activate();
    cusolverDnHandle_t h = nullptr;
    CUJAX_SOLVER_CHECK(api.create(&h));
    CUJAX_SOLVER_CHECK(api.set_stream(h, device.stream()));
    it = handles.by_device.emplace(device.ordinal(), h).first;
  }
  return it->second;
}

cusparseHandle_t sparse_handle(Device& device) {
  static Handles<cusparseHandle_t> handles;
  const SparseApi& api = sparse_api();
  std::lock_guard<std::mutex> lock(handles.mu);
  auto it = handles.by_device.find(device.ordinal());
  if (it == handles.by_device.end()) {
    device.activate();
    cusparseHandle_t h = nullptr;
    CUJAX_SPARSE_CHECK(api.create(&h));
    CUJAX_SPARSE_CHECK(api.set_stream(h, device.stream()));
    it = handles.by_device.emplace(device.ordinal(), h).first;
  }
  return it->second;
}

gesvdjInfo_t gesvdj_params(Device& device) {
  static Handles<gesvdjInfo_t> params;
  const SolverApi& api = solver_api();
  std::lock_guard<std::mutex> lock(params.mu);
  auto it = params.by_device.find(device.ordinal());
  if (it == params.by_device.end()) {
    gesvdjInfo_t p = nullptr;
    CUJAX_SOLVER_CHECK(api.create_gesvdj_info(&p));
    it = params.by_device.emplace(device.ordinal(), p).first;
  }
  return it->second;
}

}  // namespace cujax::cuda
