#include "backends/cuda/cublaslt.h"

#include <cublasLt.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

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

cudaDataType_t data_type(DType t) {
  return t == DType::F16    ? CUDA_R_16F
         : t == DType::BF16 ? CUDA_R_16BF
         : t == DType::F32  ? CUDA_R_32F
                            : CUDA_R_64F;
}

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// Descriptors and algorithm of one product shape on one device; never destroyed (a program
// has a handful of shapes, and descriptors are a few hundred bytes).
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

Plan make_plan_or_throw(const Lt& api, const MatmulShape& s, Plan& p);

// A plan, or an exception with nothing left allocated.
Plan make_plan(const Lt& api, const MatmulShape& s) {
  Plan p;
  try {
    return make_plan_or_throw(api, s, p);
  } catch (...) {
    if (p.desc) api.desc_destroy(p.desc);
    for (cublasLtMatrixLayout_t l : {p.la, p.lb, p.lc})
      if (l) api.layout_destroy(l);
    throw;
  }
}

Plan make_plan_or_throw(const Lt& api, const MatmulShape& s, Plan& p) {
  const bool f64 = s.out == DType::F64;
  const cublasComputeType_t compute = f64      ? CUBLAS_COMPUTE_64F
                                      : s.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                               : CUBLAS_COMPUTE_32F;
  CUJAX_LT_CHECK(api.desc_create(&p.desc, compute, f64 ? CUDA_R_64F : CUDA_R_32F));
  // Row-major C = A B is column-major C^T = B^T A^T: pass B as the first operand (n x k, ld n)
  // and A as the second (k x m, ld k); C^T is n x m with ld n.
  auto layout = [&](cublasLtMatrixLayout_t* l, DType t, int64_t rows, int64_t cols) {
    CUJAX_LT_CHECK(api.layout_create(l, data_type(t), static_cast<uint64_t>(rows),
                                     static_cast<uint64_t>(cols), rows));
    int32_t count = static_cast<int32_t>(s.batch);
    int64_t stride = rows * cols;
    CUJAX_LT_CHECK(api.layout_set(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    CUJAX_LT_CHECK(
        api.layout_set(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  };
  layout(&p.la, s.in, s.n, s.k);   // B^T
  layout(&p.lb, s.in, s.k, s.m);   // A^T
  layout(&p.lc, s.out, s.n, s.m);  // C^T
  cublasLtMatmulPreference_t pref = nullptr;
  CUJAX_LT_CHECK(api.pref_create(&pref));
  size_t ws = kWorkspaceBytes;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st = api.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = api.heuristic(api.handle, p.desc, p.la, p.lb, p.lc, p.lc, pref, 1, &result, &found);
  api.pref_destroy(pref);
  CUJAX_LT_CHECK(st);
  if (found == 0)
    throw CudaError("cuBLASLt has no algorithm for a " + std::string(mlir_name(s.in)) + " -> " +
                    std::string(mlir_name(s.out)) + " product " + std::to_string(s.m) + "x" +
                    std::to_string(s.k) + " by " + std::to_string(s.k) + "x" + std::to_string(s.n));
  p.algo = result.algo;
  return p;
}

std::mutex& plans_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::pair<int, MatmulShape>, Plan>& plans() {
  static std::map<std::pair<int, MatmulShape>, Plan> m;
  return m;
}

}  // namespace

bool MatmulShape::operator<(const MatmulShape& o) const {
  return std::tie(in, out, batch, m, n, k, tf32) <
         std::tie(o.in, o.out, o.batch, o.m, o.n, o.k, o.tf32);
}

bool cublaslt_supports(DType in, DType out) {
  const bool half = in == DType::F16 || in == DType::BF16;
  return (in == out && (half || in == DType::F32 || in == DType::F64)) ||
         (half && out == DType::F32);
}

size_t cublaslt_plan_count() {
  std::lock_guard<std::mutex> lock(plans_mutex());
  return plans().size();
}

void cublaslt_matmul(Device& device, const MatmulShape& shape, const void* a, const void* b,
                     void* c) {
  const Lt& api = lt();
  const Plan* plan = nullptr;
  {
    std::lock_guard<std::mutex> lock(plans_mutex());
    const auto key = std::make_pair(device.ordinal(), shape);
    auto it = plans().find(key);
    if (it == plans().end()) it = plans().emplace(key, make_plan(api, shape)).first;
    plan = &it->second;  // map nodes stay put
  }
  const bool f64 = shape.out == DType::F64;
  const double one64 = 1.0, zero64 = 0.0;
  const float one32 = 1.0f, zero32 = 0.0f;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  CUJAX_LT_CHECK(api.matmul(api.handle, plan->desc, alpha, b, plan->la, a, plan->lb, beta, c,
                            plan->lc, c, plan->lc, &plan->algo, device.workspace(kWorkspaceBytes),
                            kWorkspaceBytes, device.stream()));
}

}  // namespace cujax::cuda
