// The chlo dialect lowered to StableHLO, once for every backend: JAX emits chlo ops (chlo.erf,
// chlo.lgamma, chlo.top_k, ...) for functions that StableHLO has no op for, and the backends
// run only StableHLO. Each op becomes the element-wise expansion that XLA's chlo legalization
// uses (f16 and bf16 are computed in f32 and rounded once), so results agree with XLA's to the
// few ULP that the conformance checks allow.
#pragma once

#include <array>
#include <memory>

#include "cujax/ir/ir.h"

namespace cujax::compiler {

// The element-wise chlo ops: vmap batches them and the partitioner splits them as it does
// stablehlo's element-wise ops.
inline constexpr std::array<const char*, 17> kElementwiseChloOps = {
    "chlo.erf",        "chlo.erfc",      "chlo.erf_inv", "chlo.asin",      "chlo.acos",
    "chlo.atan",       "chlo.sinh",      "chlo.cosh",    "chlo.asinh",     "chlo.acosh",
    "chlo.atanh",      "chlo.lgamma",    "chlo.digamma", "chlo.polygamma", "chlo.zeta",
    "chlo.bessel_i1e", "chlo.next_after"};

// The element-wise chlo ops that stay in the program for complex operands: the CPU backend's
// complex kernels compute them in a wider type (the branch cuts of the C library's complex
// functions, which are the spec's), where an expansion into StableHLO ops would round at every
// step. No backend but the CPU one runs complex numbers.
inline constexpr std::array<const char*, 9> kComplexChloOps = {
    "chlo.tan",  "chlo.sinh",  "chlo.cosh",  "chlo.asin", "chlo.acos",
    "chlo.atan", "chlo.asinh", "chlo.acosh", "chlo.atanh"};

// Whether any function of `module` (nested regions included) holds a chlo op.
bool has_chlo(const ir::Module& module);

// A copy of `module` with every chlo op replaced by StableHLO ops (but those of
// kComplexChloOps on complex operands, kept as they are). Throws UnsupportedError
// naming the op (and its location) for a chlo op or element type that has no decomposition.
std::unique_ptr<ir::Module> decompose_chlo(const ir::Module& module);

}  // namespace cujax::compiler
