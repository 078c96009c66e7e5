// What JAX writes around a computation to say where its values live and how they are sharded,
// none of which changes a value on one device: `annotate_device_placement` (memory kinds
// `device`, `pinned_host`, `unpinned_host`), GSPMD's `Sharding` / `SPMDFullToShardShape` /
// `SPMDShardToFullShape` custom calls, Shardy's `xla.sdy.*` custom calls and `sdy.*` ops, and
// `mhlo.memory_kind` on arguments and results. Every backend runs this before compiling: host
// memory kinds map to host buffers, which on a cpu device (and for a value the cuda backend
// hands back to the host) hold the value unchanged. A kind cujax does not know is an error
// naming it, never dropped silently.
#pragma once

#include <memory>

#include "cujax/ir/ir.h"

namespace cujax::compiler {

// The memory kinds a JAX program may name: "device", "pinned_host", "unpinned_host".
bool is_known_memory_kind(std::string_view kind);

// Whether `module` holds an annotation op that lower_annotations removes. Throws
// UnsupportedError naming the function and argument or result for an unknown
// `mhlo.memory_kind`, and naming the op for an unknown `_xla_buffer_placement`.
bool has_annotations(const ir::Module& module);

// A copy of `module` with every annotation op replaced by the value it annotates (a Shardy
// manual computation by a call of its body, whose shards on one device are the whole values).
// Throws UnsupportedError naming the op where an annotation changes a shape (a shard of more
// than one device) or names an unknown memory kind.
std::unique_ptr<ir::Module> lower_annotations(const ir::Module& module);

}  // namespace cujax::compiler
