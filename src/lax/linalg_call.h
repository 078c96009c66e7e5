// The custom calls of lax.linalg (private): how one is emitted, and helpers its lowering and
// its rules share.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "cujax/array.h"
#include "cujax/ir/ir.h"
#include "cujax/linalg.h"

namespace cujax::lax::linalg::detail {

struct CallSpec {
  std::string target;
  std::vector<std::pair<std::string, char>> config;  // mhlo.backend_config, as ui8 characters
  std::vector<std::pair<std::string, int32_t>> config_i32;  // and as i32 integers
  std::vector<std::pair<std::string, bool>> config_bool;    // and as bools (cuSOLVER's)
  std::vector<ir::Type> results;
  std::vector<bool> operand_matrix, result_matrix;  // column-major matrices (JAX's layouts)
  int alias_operand = -1;                           // the operand result 0 overwrites
  bool alias_each = false;                          // result i overwrites operand i, for all
  bool batch_attr = false;  // mhlo.frontend_attributes = {num_batch_dims = "..."}
  int64_t batch_dims = -1;  // its value; -1: operand 0's rank - 2
};
std::vector<Array> lapack_call(const CallSpec& c, const std::vector<Array>& operands);

// Whether to lower as JAX does on cuda (cusolver_*_ffi, cusparse_gtsv2_ffi,
// cu_lu_pivots_to_permutation) rather than to LAPACK's calls: lowering_platform() is "cuda".
bool lower_for_cuda();

// svd as JAX lowers it on cuda (linalg_cusolver.cpp): cusolver_gesvdj_ffi up to 1024 x 1024,
// else cusolver_gesvd_ffi.
SvdResult cusolver_svd(const Array& x, bool full_matrices, bool compute_uv);

// 's', 'd', 'c' or 'z'; throws naming `op` for other dtypes.
char type_prefix(const std::string& op, const Array& x);
// Throws naming `op` and x's type unless x is [..., m, n] (square: m == n) of a LAPACK dtype.
void check_matrix(const std::string& op, const Array& x, bool square);
// s's batch dimensions followed by `tail`.
Shape batch_of(const Shape& s, std::initializer_list<int64_t> tail);
// x where `ok` (x's batch shape), NaN elsewhere.
Array nan_unless(const Array& ok, const Array& x);
Array info_ok(const Array& info);
// The conjugate transpose of the last two dimensions.
Array adjoint(const Array& x);
// Solves A x = b (trans 0), A^T x = b (1) or A^H x = b (2) from A's LU factors lu [..., n, n]
// and row permutation [..., n] (A[permutation] = L U); b [..., n, k] with lu's batch.
Array lu_solve(const Array& lu, const Array& permutation, const Array& b, int trans);

}  // namespace cujax::lax::linalg::detail
