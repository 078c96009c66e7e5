// CUDA C++ for a fusion group (src/compiler/fusion.h): one kernel per group, shapes baked in as
// constants, named by a hash of its source so that identical groups (the same layer repeated)
// share one compiled kernel.
//
//   loop             one thread per V consecutive output elements (V * element size <= 16
//                    bytes): inputs and outputs of the group's size move as one wide access,
//                    smaller inputs are read through their broadcast index map.
//   row reduction    a warp per row (rows up to 1024 elements) or a block per row, or several
//                    blocks per row when rows are long and few; lanes read V consecutive
//                    elements, partials fold through warp shuffles (and shared memory across the
//                    warps of a block); lane 0 computes the epilogue.
//   column reduction 32 columns x 8 row strides per block, rows split over several blocks when
//                    there are few column blocks; the 8 partials of a column fold through shared
//                    memory and the first row of threads writes the epilogue.
//   A split reduction's blocks leave their partials in a scratch buffer; the last block of a
//   row (an atomic counter) folds them in a fixed order, so results are deterministic.
//
// Every value is computed by the shared functors of backends/common/elementwise.h in its own
// storage type (f16/bf16 in f32 arithmetic, rounded after each op as the CPU backend does), so a
// loop fusion gives the CPU backend's bits; reductions differ only by their summation order.
#pragma once

#include <string>
#include <vector>

#include "compiler/fusion.h"
#include "cujax/core/dtype.h"
#include "cujax/core/shape.h"
#include "cujax/ir/ir.h"

namespace cujax::cuda::codegen {

struct KernelParam {
  DType dtype = DType::F32;
  Shape shape;
  bool output = false;
};

struct FusionKernel {
  std::string name;         // "fusion_<16 hex digits of the source's SHA-256>"
  std::string source;       // a complete translation unit: the prelude include and one kernel
  std::string description;  // "row reduction of 5 ops: broadcast_in_dim, subtract, ..."
  compiler::FusionKind kind = compiler::FusionKind::Loop;
  std::vector<KernelParam> params;  // the group's inputs, then its outputs
  unsigned grid = 1, block = 256;   // one-dimensional launch
  // A reduction split over several blocks per row or column block takes two more arguments:
  // `scratch`, 2 x scratch_slots 8-byte words (partials and their flags), and `counters`,
  // `counters` unsigned ints that must be zero at launch.
  int64_t scratch_slots = 0;
  int64_t counters = 0;
};

// Throws UnsupportedError when the group holds an op the emitter does not know (a planner bug).
FusionKernel emit_fusion(const ir::Block& block, const compiler::FusionGroup& group);

// The C++ spelling of an element type in generated code ("float", "cujax::bfloat16", ...).
std::string c_type(DType t);

}  // namespace cujax::cuda::codegen
