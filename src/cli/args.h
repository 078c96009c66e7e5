// Command-line options of the `cujax` subcommands, parsed by CLI11: `--name value` or
// `--name=value`, flags without a value, positional arguments, and `--help` per subcommand.
// Every problem is a UsageError, which main() prints as one line and turns into exit status 2.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/profiler.h"

namespace cujax::cli {

// Bad input from the user (options, files, sizes): exit status 2, as argparse.
class UsageError : public Error {
 public:
  using Error::Error;
};

// One option of a subcommand: `--name VALUE` (`-n VALUE` for a one-letter name), or a flag when
// `value` is empty. `value` names the value in --help ("N", "DIR").
struct Option {
  std::string name;
  std::string value;
  std::string help;
};

// What a subcommand accepts and what its --help says.
struct Command {
  std::string name;     // as typed after `cujax`: "train", "bench serve"
  std::string summary;  // --help's first line
  std::vector<Option> options;
  std::string positional = {};  // e.g. "FILE" when it takes positional arguments
  std::string positional_help = {};
};

// The options every computing command shares.
Option platform_option();
Option profile_option();

// --help or -h: main() prints text() to stdout and exits 0.
class HelpRequested : public std::exception {
 public:
  explicit HelpRequested(std::string text) : text_(std::move(text)) {}
  const char* what() const noexcept override { return text_.c_str(); }

 private:
  std::string text_;
};

class Args {
 public:
  // Anything not in `command.options` is an error, and so is a positional argument where
  // `command.positional` is empty.
  Args(const Command& command, const std::vector<std::string>& args);

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
