// JAX's linear-algebra custom calls on the CPU backend (linalg_kernels.cpp): the call, as the
// factories of each family (lapack_factor_kernels.cpp, lapack_eigen_kernels.cpp) see it.
//
// A family's body works on the buffers in the layouts the call names (operand_layouts,
// result_layouts; row-major where absent), as XLA hands them to JAX's kernels: a matrix
// operand of logical shape [..., rows, cols] is, with JAX's layouts, `batch` column-major
// rows x cols matrices one after the other.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/kernels.h"
#include "cujax/core/error.h"
#include "cujax/core/host_tensor.h"
#include "cujax/ir/ir.h"

namespace cujax::cpu {

// The kernel of JAX's linear-algebra custom calls (lapack_*_ffi, cusolver_*_ffi, cu_*,
// cusparse_gtsv2_ffi), or nullopt when `op` calls another target. custom_call's factory asks
// this first.
std::optional<Kernel> linalg_custom_call_kernel(const ir::Operation& op);

// dot_general and dot (dot_kernels.cpp), convolution (convolution_kernels.cpp) and
// triangular_solve (triangular_solve_kernels.cpp); register_linalg_kernels (kernels.h) adds
// them and stablehlo.cholesky.
void register_dot_kernels(KernelRegistry& r);
void register_convolution_kernels(KernelRegistry& r);
void register_triangular_solve_kernels(KernelRegistry& r);

struct LinalgCall {
  std::string where;         // the op, for messages
  std::string target;        // call_target_name
  std::string family;        // "potrf", "getrf", ..., "gesvdj", "pivots_to_permutation", "threefry"
  bool cuda = false;         // a cuSOLVER/cuSPARSE/cu_* target (its own conventions)
  DType dtype = DType::F32;  // operand 0's element type
  std::vector<Shape> operands;
  std::vector<ir::Type> results;
  const ir::Attribute* config = nullptr;  // mhlo.backend_config (a dictionary), or nullptr

  // A backend_config field: an integer (a character code such as 'L' = 76) or a bool.
  int64_t int_field(const char* name, int64_t fallback) const;
  bool bool_field(const char* name, bool fallback) const;
  // Throws UnsupportedError naming the op and target unless `ok`.
  void require(bool ok, const std::string& message) const;
  // Checks result i's element type and shape.
  void require_result(size_t i, DType dtype, const Shape& shape) const;
};

// in: the operands, out: the results, allocated (zeros) in their shapes; both in the call's
// layouts. A body writes every result.
using LinalgBody = std::function<void(std::vector<HostTensor>& in, std::vector<HostTensor>& out)>;

// The family's body, or an empty function when the family is not this file's.
LinalgBody lapack_factor_body(const LinalgCall& call);
LinalgBody lapack_eigen_body(const LinalgCall& call);

// [batch, rows, cols] of a shape of rank >= 2.
struct MatrixDims {
  int64_t batch = 1, rows = 0, cols = 0;
};
MatrixDims matrix_dims(const Shape& shape);
// The leading (batch) dimensions of a shape, with `extra` appended.
Shape batch_shape(const Shape& shape, std::initializer_list<int64_t> extra = {});

}  // namespace cujax::cpu
