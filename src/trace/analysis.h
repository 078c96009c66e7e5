// Static cost and memory estimates of a traced module, under the names XLA's
// Compiled.cost_analysis() and memory_analysis() use.
#pragma once

#include "cujax/ir/ir.h"
#include "cujax/jit.h"
#include "cujax/profiler.h"

namespace cujax::trace {

// Counts each op once (a loop body once per loop, not per trip), following called functions.
CostAnalysis cost_analysis(const ir::Module& module);
// Sizes of @main's arguments and results; temporaries and the peak from the liveness of the
// values in @main's body, in program order.
MemoryAnalysis memory_analysis(const ir::Module& module);
// The same plan with the buffers live at its peak and the ops that produced them.
profiler::MemoryProfile memory_profile(const ir::Module& module, const std::string& platform);

}  // namespace cujax::trace
