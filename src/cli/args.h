// Command-line options of the `cujax` subcommands: `--name value` or `--name=value`, flags
// without a value, and positional arguments. Every problem is a UsageError, which main() prints
// as one line and turns into exit status 2.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/profiler.h"

namespace cujax::cli {

// Bad input from the user (options, files, sizes): exit status 2, as argparse.
class UsageError : public Error {
 public:
  using Error::Error;
};

class Args {
 public:
  // `options` take a value, `flags` do not; anything else starting with "--" is an error.
  Args(const std::vector<std::string>& args, const std::vector<std::string>& options,
       const std::vector<std::string>& flags = {});

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  bool flag(const std::string& name) const { return has(name); }
  std::string string(const std::string& name, const std::string& fallback) const;
  std::optional<std::string> optional_string(const std::string& name) const;
  // All values of an option given several times (--input a --input b).
  std::vector<std::string> all(const std::string& name) const;
  // Integers and numbers at least `min` (the error names the option and the bound).
  int64_t integer(const std::string& name, int64_t fallback, int64_t min) const;
  double number(const std::string& name, double fallback, double min) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::multimap<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// The backend a command runs on: `requested` (--platform, in CUJAX_PLATFORMS's forms: cpu,
// cuda or a list such as cuda,cpu) overrides the default backend. Call it before anything starts
// a backend. A platform that cannot start, or a bad name, is a UsageError saying why.
std::string use_platform(const std::optional<std::string>& requested);
inline std::string use_platform(const Args& args) {
  return use_platform(args.optional_string("platform"));
}

// --profile DIR: records a trace of the command from here to its end (profiler::start_trace),
// written under DIR when the object goes, even when the command fails; nothing without the
// option.
class ProfileOption {
 public:
  explicit ProfileOption(const Args& args);
  ~ProfileOption();
  ProfileOption(const ProfileOption&) = delete;
  ProfileOption& operator=(const ProfileOption&) = delete;

 private:
  std::optional<profiler::Trace> trace_;
};

}  // namespace cujax::cli
