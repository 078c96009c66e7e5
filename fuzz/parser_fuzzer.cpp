// libFuzzer target for the StableHLO text parser and printer.
//
// Any input may be rejected with a ParseError, but nothing else: no crash, no other exception, no
// hang, no leak. Whatever parses must print, the printed text must parse back to the same module
// (structurally: ops, wiring, types, attributes bit for bit, locations), and printing that again
// must give the same text (the printer's output is a fixed point).
//
//   cmake --preset fuzz && cmake --build build-fuzz --target parser_fuzzer
//   build-fuzz/fuzz/parser_fuzzer -max_len=4096 -max_total_time=600 corpus/ seeds/
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cujax/core/error.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/printer.h"
#include "ir/ir_equal.h"
#include "ir/parser_limits.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Splats may not expand to more than 64 MiB per input, far below libFuzzer's memory limit.
  cujax::ir::detail::set_splat_expansion_limit(uint64_t{64} << 20);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<cujax::ir::Module> module;
  try {
    module = cujax::ir::parse_module(text);
  } catch (const cujax::ParseError&) {
    return 0;
  }
  const std::string printed = cujax::ir::print_module(*module);
  std::unique_ptr<cujax::ir::Module> again;
  try {
    again = cujax::ir::parse_module(printed);
  } catch (const cujax::ParseError& e) {
    std::fprintf(stderr, "printed module does not parse: %s\n--- printed:\n%s\n", e.what(),
                 printed.c_str());
    std::abort();
  }
  cujax::ir::equal::Comparer same;
  if (!same.modules(*module, *again)) {
    std::fprintf(stderr, "printed module parses to a different module: %s\n--- printed:\n%s\n",
                 same.why.c_str(), printed.c_str());
    std::abort();
  }
  const std::string reprinted = cujax::ir::print_module(*again);
  if (reprinted != printed) {
    std::fprintf(stderr, "printing is not a fixed point\n--- first:\n%s\n--- second:\n%s\n",
                 printed.c_str(), reprinted.c_str());
    std::abort();
  }
  return 0;
}
