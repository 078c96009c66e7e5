// Quantized tensors (`!quant.uniform`, ir::QuantizedType) lowered to their stored integers, once
// for every backend, before chlo decomposition and narrow-type widening. No backend has kernels
// on quantized values:
// - uniform_quantize becomes the spec's arithmetic in the expressed type: x / scale + zero point,
//   clamped to the storage range, rounded to nearest even, converted to the storage type (a
//   quantized operand is dequantized first);
// - uniform_dequantize becomes (q - zero point) * scale, the difference taken in i64 (exact,
//   where the spec's difference in the storage type could wrap) and the product in the
//   expressed type;
// - any other op on quantized values computes on what they stand for: its quantized operands
//   dequantized, its quantized results quantized (the spec's dequantize-op-quantize);
// - bitcast_convert, constants and the ops that pass values along (control flow, calls, custom
//   calls, returns) keep the stored integers.
// Per-axis parameters are broadcast along the quantization dimension. Ops with a computing
// region (reduce, sort, scatter, ...) on quantized values are rejected with an error naming the
// op.
#pragma once

#include <memory>

#include "cujax/ir/ir.h"

namespace cujax::compiler {

// Whether any value of `module` (nested regions and signatures included) has a quantized type.
bool has_quantized(const ir::Module& module);

// A copy of `module` with every quantized type replaced by its storage type and the computation
// on quantized values written out as described above.
std::unique_ptr<ir::Module> lower_quantized_types(const ir::Module& module);

}  // namespace cujax::compiler
