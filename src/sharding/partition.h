// The SPMD partitioner: rewrites a module whose @main carries mhlo.sharding attributes (on
// arguments, results and custom_call @Sharding ops; Shardy's #sdy.sharding ones are converted to
// those first, compiler::shardy_to_gspmd) into one program that every partition runs on its local
// shards, with collectives where a value's sharding changes. Manual regions (shard_map, between
// @SPMDFullToShardShape and @SPMDShardToFullShape) run as written on each partition's shards.
#pragma once

#include "cujax/ir/ir.h"
#include "cujax/sharding.h"

namespace cujax::sharding {

// The module's "mhlo.num_partitions", or 0 when it has none (not a sharded program).
int64_t num_partitions(const ir::Module& module);

// Sets mhlo.num_partitions = n and mhlo.num_replicas = 1.
void set_num_partitions(ir::Module& module, int64_t n);

struct PartitionResult {
  std::vector<HloSharding> in;   // per argument of @main
  std::vector<HloSharding> out;  // per result of @main
};
// Partitions @main in place (global shapes become local ones); returns the shardings of its
// arguments and results.
PartitionResult partition(ir::Module& module);

}  // namespace cujax::sharding
