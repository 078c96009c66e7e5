// The fuzz targets: one per reader of untrusted bytes. Each fuzzer binary (fuzzer.cpp) and the
// regression test that replays the crashes found (tests/fuzz_regression_test.cpp) call them
// through run_one, so a saved input replays exactly as the fuzzer ran it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cujax::fuzz {

struct Target {
  const char* name;
  // Once per process, before the first input: builds what the inputs are fed into.
  void (*init)();
  // One input. Whatever cujax::Error it throws is a clean rejection; any other exception, an
  // abort on a broken invariant, a hang or a sanitizer report is a finding.
  void (*one)(std::string_view bytes);
  // Writes the seed corpus (valid inputs cujax itself produces) into `dir`.
  void (*seeds)(const std::string& dir);
};

const std::vector<Target>& targets();
// Throws std::invalid_argument for an unknown name.
const Target& target(std::string_view name);
// Runs `t.init` unless it has run in this process.
void prepare(const Target& t);
// prepare(t), then `t.one(bytes)`, swallowing cujax::Error only.
void run_one(const Target& t, std::string_view bytes);

}  // namespace cujax::fuzz
