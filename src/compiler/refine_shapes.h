// Shape-polymorphic programs refined to the shapes of one call, as JAX's
// refine_polymorphic_shapes does before compiling: the arguments' dynamic dimensions (`?`) take
// the inputs' sizes, shapes propagate through the module (into the functions it calls, with the
// dimension variables JAX passes them as constants), the integer arithmetic on sizes folds, and
// the dynamic ops become static ones: get_dimension_size a constant, dynamic_broadcast_in_dim,
// dynamic_reshape, dynamic_iota, real_dynamic_slice, dynamic_pad and the custom calls
// stablehlo.dynamic_rng_bit_generator / stablehlo.dynamic_top_k their static forms. JAX's
// shape_assertion custom calls are checked and removed; a failed one is an error with JAX's
// message (its error_message with the values of its operands for {0}, {1}, ...).
#pragma once

#include <memory>
#include <vector>

#include "cujax/core/dynamic_shape.h"
#include "cujax/ir/ir.h"

namespace cujax::compiler {

// Whether a function of `module` has a dynamic dimension in its signature or body.
bool has_dynamic_shapes(const ir::Module& module);

// A copy of `module` whose @main takes arguments of `arg_shapes` and whose every type is static.
// Throws Error naming the argument when a shape does not fit @main's, the shape_assertion's
// message when one fails, and UnsupportedError naming the op for one it cannot refine.
std::unique_ptr<ir::Module> refine_polymorphic_shapes(const ir::Module& module,
                                                      const std::vector<Shape>& arg_shapes);

}  // namespace cujax::compiler
