// What exported.cpp needs of exported_jax.cpp: JAX's calling convention.
#pragma once

#include <string>

#include "cujax/jax_export.h"

namespace cujax::export_detail {

// Throws Error when a module exported for `nr_devices` devices communicates between them but is
// not partitioned over that many (mhlo.num_partitions), so that running it on one device would
// not give JAX's results.
void check_single_device(const std::string& name, const std::string& text, int nr_devices);

// The structure trace::flatten_arguments gives C++ arguments matching JAX's in_tree
// ((args...), {}): each positional argument's structure in turn.
std::string jax_args_structure(const jax_export::PyTreeDef& in_tree);

}  // namespace cujax::export_detail
