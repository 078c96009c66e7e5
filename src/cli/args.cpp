#include "cli/args.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cujax/devices.h"
#include "runtime/platforms.h"

namespace cujax::cli {

namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

Args::Args(const std::vector<std::string>& args, const std::vector<std::string>& options,
           const std::vector<std::string>& flags) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (contains(flags, name)) {
      if (inline_value) throw UsageError("--" + name + " takes no value");
    } else if (contains(options, name)) {
      if (!inline_value) {
        if (i + 1 >= args.size()) throw UsageError("--" + name + " needs a value");
        value = args[++i];
      }
    } else {
      throw UsageError("unknown option --" + name);
    }
    values_.emplace(name, value);
  }
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
