// `cujax stablehlo-test`: runs StableHLO test programs and their check.* assertions.
#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

struct ConformanceOptions {
  std::string platform = "cpu";
  int jobs = 1;
  int timeout_seconds = 60;
  double min_pass_rate = 1.0;  // exit status 0 when at least this fraction passes
  bool verbose = false;
  // A fresh process for every file (the backend starts once per file) instead of one worker
  // per job running many files.
  bool process_per_file = false;
};

// Outcome of one file: empty reason means it passed.
struct FileResult {
  std::string path;
  std::string reason;
};

// Runs one program in this process: parse, verify, compile, execute, evaluate checks.
FileResult run_conformance_file(const std::string& path, const std::string& platform);

// Expands folders into their *.mlir files (sorted) and runs them in `jobs` worker processes,
// each running file after file with a time limit per file; a worker that hangs, crashes or hits
// an error that may leave its backend damaged is replaced. Prints one line per failure and a
// closing "N passed, M failed". Returns the exit code.
int run_conformance(const std::vector<std::string>& inputs, const ConformanceOptions& options);

}  // namespace cujax::cli
