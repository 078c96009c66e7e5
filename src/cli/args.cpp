#include "cli/args.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

#include "cujax/devices.h"
#include "runtime/platforms.h"

namespace cujax::cli {

Option platform_option() {
  return {"platform", "P",
          "backend to run on: cpu, cuda or a list such as cuda,cpu (default: cuda "
          "when this build has CUDA and a GPU can be used, else cpu)"};
}

Option profile_option() {
  return {"profile", "DIR", "record a trace of the command under DIR/plugins/profile/"};
}

Args::Args(const Command& command, const std::vector<std::string>& args) {
  CLI::App app(command.summary, "cujax " + command.name);
  app.set_help_flag("-h,--help", "print this help and exit");
  app.get_formatter()->column_width(32);
  // Unknown arguments are collected, not thrown, so that the errors below stay ours.
  app.allow_extras();
  std::vector<std::pair<std::string, CLI::Option*>> declared;
  for (const Option& o : command.options) {
    const std::string spelled = (o.name.size() == 1 ? "-" : "--") + o.name;
    CLI::Option* opt = o.value.empty() ? app.add_flag(spelled)->description(o.help)
                                       : app.add_option(spelled, o.help)->type_name(o.value);
    // Each occurrence takes one value; all are kept (the last wins where one is read).
    declared.emplace_back(o.name, opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll));
  }
  CLI::Option* positional = nullptr;
  if (!command.positional.empty())
    positional = app.add_option(command.positional, command.positional_help)
                     ->expected(1, -1)
                     ->allow_extra_args()
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    throw HelpRequested(app.help());
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  for (const std::string& extra : app.remaining()) {
    if (extra == "--") continue;
    if (extra.size() > 1 && extra[0] == '-')
      throw UsageError("unknown option " + extra.substr(0, extra.find('=')));
    throw UsageError("unexpected argument '" + extra + "'");
  }
  for (const auto& [name, opt] : declared) {
    if (opt->get_expected_min() == 0) {  // a flag: --name, or --name=true|false
      bool given = false;
      try {
        given = opt->count() > 0 && opt->as<bool>();
      } catch (const CLI::Error&) {
        throw UsageError("--" + name + " takes no value");
      }
      if (given) values_.emplace(name, "");
      continue;
    }
    for (const std::string& v : opt->results()) values_.emplace(name, v);
  }
  if (positional) positional_ = positional->results();
}

std::string Args::string(const std::string& name, const std::string& fallback) const {
  return optional_string(name).value_or(fallback);
}

std::optional<std::string> Args::optional_string(const std::string& name) const {
  auto [first, last] = values_.equal_range(name);
  if (first == last) return std::nullopt;
  return std::prev(last)->second;  // the last one wins, as argparse
}

std::vector<std::string> Args::all(const std::string& name) const {
  std::vector<std::string> out;
  auto [first, last] = values_.equal_range(name);
  for (auto it = first; it != last; ++it) out.push_back(it->second);
  return out;
}

int64_t Args::integer(const std::string& name, int64_t fallback, int64_t min) const {
  const auto s = optional_string(name);
  if (!s) return fallback;
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(*s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s->size())
    throw UsageError("--" + name + " must be an integer, got '" + *s + "'");
  if (v < min)
    throw UsageError("--" + name + " must be at least " + std::to_string(min) + ", got " + *s);
  return v;
}

double Args::number(const std::string& name, double fallback, double min) const {
  const auto s = optional_string(name);
  if (!s) return fallback;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(*s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s->size() || !std::isfinite(v))
    throw UsageError("--" + name + " must be a number, got '" + *s + "'");
  if (v < min) {
    char bound[32];
    std::snprintf(bound, sizeof bound, "%g", min);
    throw UsageError("--" + name + " must be at least " + bound + ", got " + *s);
  }
  return v;
}

ProfileOption::ProfileOption(const Args& args) {
  if (const auto dir = args.optional_string("profile")) {
    if (dir->empty()) throw UsageError("--profile needs a directory");
    trace_.emplace(*dir);
  }
}

ProfileOption::~ProfileOption() {
  if (!trace_) return;
  try {
    const std::string file = trace_->stop();
    std::fprintf(stderr, "cujax: wrote the trace %s (open it in https://ui.perfetto.dev)\n",
                 file.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cujax: --profile: %s\n", e.what());
  }
}

std::string use_platform(const std::optional<std::string>& requested) {
  try {
    if (requested) runtime::set_platforms(*requested, "--platform " + *requested);
    return default_backend();
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
}

}  // namespace cujax::cli
