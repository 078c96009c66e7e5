// The VHLO op table (generated from StableHLO's VhloOps.td into vhlo_ops.inc): which op versions
// exist, since and until which StableHLO version, and their attributes in declaration order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cujax::ir::bytecode {

struct VhloOpInfo {
  const char* name;         // "dot_general_v2"
  const char* min_version;  // "1.6.0"
  const char* max_version;  // "current" or the last version that has it
  std::vector<const char*> attributes;
};

// nullptr for an op name the table does not hold.
const VhloOpInfo* find_vhlo_op(std::string_view name);

// The newest StableHLO version whose VHLO ops the table describes ("1.20.0").
const char* newest_known_stablehlo_version();

// Compares dotted versions "1.10.3" < "1.11.0"; false for malformed text.
bool version_less(std::string_view a, std::string_view b);

}  // namespace cujax::ir::bytecode
