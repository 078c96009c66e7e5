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
                   "convert between StableHLO text and portable artifacts (MLIR bytecode of VHLO) "
                   "(docs/export.md)",
                   {{"deserialize", "", "print the module as StableHLO text"},
                    {"serialize", "", "write the module as a portable artifact"},
                    {"target", "V",
                     std::string("StableHLO version to serialize for (default ") +
                         ir::default_portable_artifact_target() + ")"},
                    {"o", "OUT", "write the output to OUT instead of stdout"},
                    {"print-stablehlo-version", "",
                     "print the StableHLO version the artifact was written for"}},
                   "FILE",
                   "a portable artifact (.mlirbc, .mlir.bc) or StableHLO text"},
                  argv);
  if (args.positional().size() != 1) throw UsageError("give one FILE");
  const bool deserialize = args.flag("deserialize");
  const bool serialize = args.flag("serialize");
  const bool version = args.flag("print-stablehlo-version");
  if (!deserialize && !version && !serialize)
    throw UsageError(
        "nothing to do: give --deserialize, --serialize and/or --print-stablehlo-version");
  if (deserialize && serialize) throw UsageError("give --deserialize or --serialize, not both");
  if (args.has("target") && !serialize) throw UsageError("--target goes with --serialize");
  const std::string path = args.positional()[0];
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  const bool bytecode = ir::is_bytecode(bytes);
  std::string out;
  if (version) {
    // The same line StableHLO's stablehlo-translate prints.
    if (bytecode)
      out += "// Reading portable artifact with StableHLO version: " +
             ir::portable_artifact_version(bytes, path) + "\n";
    else
      out += "// Failed parsing StableHLO version from portable artifact\n";
  }
  if (deserialize || serialize) {
    const auto module = bytecode ? ir::read_bytecode(bytes, path) : ir::parse_module(bytes);
    if (serialize)
      out += ir::write_bytecode(*module,
                                args.string("target", ir::default_portable_artifact_target()));
    else
      out += ir::print_module(*module);
  }
  if (args.has("o")) {
    const std::string out_path = args.string("o", "");
    std::ofstream o(out_path, std::ios::binary);
    o << out;
    if (!o) throw Error(out_path + ": cannot write: " + std::strerror(errno));
  } else {
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}

}  // namespace cujax::cli
