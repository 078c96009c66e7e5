// Shardy (`sdy`) shardings as the SPMD partitioner's tile assignments. JAX writes a sharded
// program's shardings either as GSPMD `mhlo.sharding` strings or as Shardy shardings over named
// mesh axes: `sdy.sharding` argument/result attributes, `sdy.sharding_constraint` / `sdy.reshard`
// ops and `sdy.manual_computation` regions (the sdy dialect), or their round-trip form in
// exported modules (`xla.sdy.sharding` frontend attributes, the `xla.sdy.meshes` module
// attribute, `xla.sdy.*` custom calls). shardy_to_gspmd rewrites all of these into the GSPMD form
// the partitioner reads, so a Shardy program runs partitioned exactly as its GSPMD twin.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cujax/ir/ir.h"
#include "cujax/sharding.h"

namespace cujax::compiler {

// A Shardy mesh: named axes (major to minor) and the device of each mesh position (empty:
// position i is device i).
struct SdyMesh {
  std::vector<std::pair<std::string, int64_t>> axes;
  std::vector<int64_t> device_ids;
  int64_t size() const;
};

// Reads `<["x"=2, "y"=4], device_ids=[...]>` (with or without the `#sdy.mesh` prefix).
SdyMesh parse_sdy_mesh(std::string_view text);

// The meshes a module declares: `sdy.mesh @name = <...>` and the `xla.sdy.meshes` frontend
// attribute of the module.
std::map<std::string, SdyMesh> sdy_meshes(const ir::Module& module);

// The tile assignment of `#sdy.sharding<@mesh, [{"x"}, {}], replicated={"y"}>` (or its body
// `<@mesh, [...]>`) for a value of `rank` on `num_partitions` partitions. Throws naming the text
// for an unknown mesh or axis, a rank mismatch, unreduced axes, or a mesh whose size is not
// num_partitions.
HloSharding sdy_sharding_to_hlo(std::string_view text, const std::map<std::string, SdyMesh>& meshes,
                                int64_t rank, int64_t num_partitions);

// Whether `module` carries any Shardy sharding that shardy_to_gspmd rewrites.
bool has_shardy(const ir::Module& module);

// Rewrites @main's Shardy shardings into GSPMD's, in place: argument and result attributes
// become mhlo.sharding (where none is given), constraints and reshards @Sharding custom calls,
// and each manual computation (all of its mesh's non-trivial axes manual) its body inlined between
// @Sharding + @SPMDFullToShardShape and @Sharding{manual} + @SPMDShardToFullShape, as GSPMD
// writes shard_map.
void shardy_to_gspmd(ir::Module& module, int64_t num_partitions);

}  // namespace cujax::compiler
