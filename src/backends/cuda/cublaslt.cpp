#include "backends/cuda/cublaslt.h"

#include <cublasLt.h>

#include <filesystem>
#include <mutex>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/library.h"

namespace cujax::cuda {

namespace {

// The cuBLASLt entry points used, resolved once from the soname of the toolkit built against.
struct Lt {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  cublasLtHandle_t handle = nullptr;
};

const Lt& lt() {
  static const Lt api = [] {
    Library lib("libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR),
                "cuBLASLt, needed for dot_general",
                "add the CUDA toolkit's lib64 to LD_LIBRARY_PATH");
    Lt a;
    lib.resolve(a.create, "cublasLtCreate");
    lib.resolve(a.desc_create, "cublasLtMatmulDescCreate");
    lib.resolve(a.desc_destroy, "cublasLtMatmulDescDestroy");
    lib.resolve(a.desc_set, "cublasLtMatmulDescSetAttribute");
    lib.resolve(a.layout_create, "cublasLtMatrixLayoutCreate");
    lib.resolve(a.layout_destroy, "cublasLtMatrixLayoutDestroy");
    lib.resolve(a.layout_set, "cublasLtMatrixLayoutSetAttribute");
    lib.resolve(a.pref_create, "cublasLtMatmulPreferenceCreate");
    lib.resolve(a.pref_destroy, "cublasLtMatmulPreferenceDestroy");
    lib.resolve(a.pref_set, "cublasLtMatmulPreferenceSetAttribute");
    lib.resolve(a.heuristic, "cublasLtMatmulAlgoGetHeuristic");
    lib.resolve(a.matmul, "cublasLtMatmul");
    lib.check_resolved();
    if (a.create(&a.handle) != CUBLAS_STATUS_SUCCESS) throw CudaError("cublasLtCreate failed");
    return a;
  }();
  return api;
}

void check_lt(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw_cuda_error(call, "cublasStatus_t " + std::to_string(static_cast<int>(s)), file, line);
}
#define CUJAX_LT_CHECK(call) check_lt((call), #call, __FILE__, __LINE__)

// Destroys cuBLASLt descriptors on every path out of cublaslt_matmul.
template <class T, class Destroy>
struct Owned {
  T value = nullptr;
  Destroy destroy;
  ~Owned() {
    if (value) destroy(value);
  }
};

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

}  // namespace

bool cublaslt_supports(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::F64;
}

void cublaslt_matmul(Device& device, DType t, const void* a, const void* b, void* c, int64_t batch,
                     int64_t m, int64_t n, int64_t k) {
  const Lt& api = lt();
  const cudaDataType_t type = t == DType::F16    ? CUDA_R_16F
                              : t == DType::BF16 ? CUDA_R_16BF
                              : t == DType::F32  ? CUDA_R_32F
                                                 : CUDA_R_64F;
  const bool f64 = t == DType::F64;
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;

  // Row-major C = A B is column-major C^T = B^T A^T: pass B as the first operand (n x k, ld n)
  // and A as the second (k x m, ld k); C^T is n x m with ld n.
  Owned<cublasLtMatmulDesc_t, decltype(api.desc_destroy)> desc{nullptr, api.desc_destroy};
  CUJAX_LT_CHECK(api.desc_create(&desc.value, compute, scale));
  auto layout = [&](Owned<cublasLtMatrixLayout_t, decltype(api.layout_destroy)>& l, int64_t rows,
                    int64_t cols) {
    CUJAX_LT_CHECK(api.layout_create(&l.value, type, static_cast<uint64_t>(rows),
                                     static_cast<uint64_t>(cols), rows));
    int32_t count = static_cast<int32_t>(batch);
    int64_t stride = rows * cols;
    CUJAX_LT_CHECK(
        api.layout_set(l.value, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    CUJAX_LT_CHECK(api.layout_set(l.value, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                  sizeof stride));
  };
  Owned<cublasLtMatrixLayout_t, decltype(api.layout_destroy)> la{nullptr, api.layout_destroy},
      lb{nullptr, api.layout_destroy}, lc{nullptr, api.layout_destroy};
  layout(la, n, k);  // B^T
  layout(lb, k, m);  // A^T
  layout(lc, n, m);  // C^T

  Owned<cublasLtMatmulPreference_t, decltype(api.pref_destroy)> pref{nullptr, api.pref_destroy};
  CUJAX_LT_CHECK(api.pref_create(&pref.value));
  size_t ws = kWorkspaceBytes;
  CUJAX_LT_CHECK(
      api.pref_set(pref.value, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CUJAX_LT_CHECK(api.heuristic(api.handle, desc.value, la.value, lb.value, lc.value, lc.value,
                               pref.value, 1, &result, &found));
  if (found == 0)
    throw CudaError("cuBLASLt has no algorithm for a " + std::string(mlir_name(t)) + " product " +
                    std::to_string(m) + "x" + std::to_string(k) + " by " + std::to_string(k) + "x" +
                    std::to_string(n));
  std::shared_ptr<void> workspace = device.allocate(ws);
  const double one64 = 1.0, zero64 = 0.0;
  const float one32 = 1.0f, zero32 = 0.0f;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  CUJAX_LT_CHECK(api.matmul(api.handle, desc.value, alpha, b, la.value, a, lb.value, beta, c,
                            lc.value, c, lc.value, &result.algo, workspace.get(), ws,
                            device.stream()));
}

}  // namespace cujax::cuda
