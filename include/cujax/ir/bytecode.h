// Reads and writes StableHLO portable artifacts: MLIR bytecode (versions 0 to 6) of the
// versioned VHLO dialect, as `stablehlo-translate --serialize` and `jax.export` write them.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cujax/ir/ir.h"

namespace cujax::ir {

// True when `bytes` starts with MLIR bytecode's magic number "ML\xefR".
bool is_bytecode(std::string_view bytes);

// The producer string of a bytecode file ("StableHLO_v1.1.0"). Throws Error naming `name` when
// the header is not MLIR bytecode.
std::string bytecode_producer(std::string_view bytes, std::string_view name);

// The StableHLO version ("1.1.0") a portable artifact was written for, from its producer.
std::string portable_artifact_version(std::string_view bytes, std::string_view name);

// The module as StableHLO generic-syntax text, ready for parse_module. Throws Error naming `name`
// and the byte offset for malformed bytes, and naming the op and the producer for a VHLO op or a
// StableHLO version newer than cujax reads.
std::string bytecode_to_stablehlo_text(std::string_view bytes, std::string_view name);

// The module a portable artifact holds, the same ir::Module parse_module gives for its text.
std::unique_ptr<Module> read_bytecode(std::string_view bytes, std::string_view name);

// The StableHLO version write_bytecode targets by default: the oldest one JAX's current release
// still reads (StableHLO's minimum version, its compatibility window's far end: 0.9.0).
const char* default_portable_artifact_target();

// `module` as a portable artifact for StableHLO `target_version` ("1.1.0"): each op as the VHLO
// op version that StableHLO version has, every attribute spelled out, in the MLIR bytecode
// version StableHLO wrote for it, with producer "StableHLO_v<target>". Throws Error naming the
// op and the version for an op the target did not have yet (or an attribute its op version
// cannot hold), and for a target outside 0.9.0 to the newest version cujax knows.
std::string write_bytecode(const Module& module, std::string_view target_version);

}  // namespace cujax::ir
