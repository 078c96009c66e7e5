#include "cli/stablehlo_translate.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/args.h"
#include "cujax/core/error.h"
#include "cujax/ir/bytecode.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"

namespace cujax::cli {

int stablehlo_translate_command(const std::vector<std::string>& argv) {
  const Args args({"stablehlo-translate",
                   "read a StableHLO portable artifact (MLIR bytecode of VHLO) (docs/export.md)",
                   {{"deserialize", "", "print the module as StableHLO text"},
                    {"print-stablehlo-version", "",
                     "print the StableHLO version the artifact was written for"}},
                   "FILE",
                   "a portable artifact (.mlirbc, .mlir.bc) or StableHLO text"},
                  argv);
  if (args.positional().size() != 1) throw UsageError("give one FILE");
  const bool deserialize = args.flag("deserialize");
  const bool version = args.flag("print-stablehlo-version");
  if (!deserialize && !version)
    throw UsageError("nothing to do: give --deserialize and/or --print-stablehlo-version");
  const std::string path = args.positional()[0];
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  const bool bytecode = ir::is_bytecode(bytes);
  if (version) {
    // The same line StableHLO's stablehlo-translate prints.
    if (bytecode)
      std::printf("// Reading portable artifact with StableHLO version: %s\n",
                  ir::portable_artifact_version(bytes, path).c_str());
    else
      std::printf("// Failed parsing StableHLO version from portable artifact\n");
  }
  if (deserialize) {
    const auto module = bytecode ? ir::read_bytecode(bytes, path) : ir::parse_module(bytes);
    std::fputs(ir::print_module(*module).c_str(), stdout);
  }
  return 0;
}

}  // namespace cujax::cli
