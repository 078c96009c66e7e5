// JAX's calling convention for ordered effects (calling convention version 9 on): @main takes
// one `!stablehlo.token` per ordered effect after the platform index and returns one per effect
// before its results. The caller creates the tokens and drops those returned; cujax's callers
// pass arrays only, so the module is given a @main that does both.
#pragma once

#include <memory>

#include "cujax/ir/ir.h"

namespace cujax::compiler {

// Whether @main takes or returns a token.
bool main_has_tokens(const ir::Module& module);

// `module` with @main renamed (private) and called by a new @main that takes its non-token
// arguments, passes a token made by `stablehlo.after_all` for each token argument and returns its
// non-token results (argument and result attributes kept). Unchanged when main_has_tokens is false.
std::unique_ptr<ir::Module> drop_main_tokens(std::unique_ptr<ir::Module> module);

}  // namespace cujax::compiler
