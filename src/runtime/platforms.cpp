// The platforms a process may use, fixed on first use from set_platforms() or CUJAX_PLATFORMS,
// and the default backend chosen from them.
#include "runtime/platforms.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "cujax/core/error.h"
#include "cujax/devices.h"
#include "cujax/runtime/backend.h"

namespace cujax::runtime {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

struct Choice {
  std::vector<std::string> list;  // empty: none given (cuda when it starts, else cpu)
  std::string origin;             // "CUJAX_PLATFORMS=cuda,cpu", "--platform cpu"
  std::string error;              // why CUJAX_PLATFORMS cannot be used
};

// Function-local, so that a jit made during static initialization finds it constructed.
struct State {
  std::mutex mu;
  Choice chosen;
  bool set = false;   // by set_platforms, so the environment is not read
  bool used = false;  // read: from now on the choice cannot change
};
State& state() {
  static State s;
  return s;
}

Choice platform_from_environment() {
  Choice c;
  const char* v = std::getenv("CUJAX_PLATFORMS");
  if (!v || !*v) return c;
  c.origin = std::string("CUJAX_PLATFORMS=") + v;
  try {
    c.list = parse_platforms(v, c.origin);
  } catch (const Error& e) {
    c.error = e.what();
  }
  return c;
}

Choice current() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.set && !s.used) s.chosen = platform_from_environment();
  s.used = true;
  return s.chosen;
}

}  // namespace

const std::vector<std::string>& known_platforms() {
  static const std::vector<std::string> names{"cpu", "cuda"};
  return names;
}

std::vector<std::string> parse_platforms(std::string_view text, std::string_view origin) {
  const std::string where(origin);
  std::vector<std::string> out;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(text.find(',', begin), text.size());
    std::string_view name = text.substr(begin, end - begin);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name.empty())
      throw Error(where + ": an empty platform name (give cpu, cuda or a list such as cuda,cpu)");
    const auto& known = known_platforms();
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw Error(where + ": unknown platform '" + std::string(name) +
                  "' (known: " + joined(known) + ")");
    if (std::find(out.begin(), out.end(), name) != out.end())
      throw Error(where + ": platform '" + std::string(name) + "' is listed twice");
    out.emplace_back(name);
    if (end == text.size()) return out;
    begin = end + 1;
  }
}

std::string choose_platform(const std::vector<std::string>& platforms,
                            const std::function<std::string(std::string_view)>& unavailable,
                            std::string_view origin) {
  std::string reasons;
  for (const auto& p : platforms) {
    const std::string why = unavailable(p);
    if (why.empty()) return p;
    reasons += (reasons.empty() ? "" : "; ") + p + " cannot start: " + why;
  }
  throw Error(std::string(origin) + ": " + reasons + "; see `cujax doctor`");
}

void set_platforms(std::string_view platforms, std::string_view origin) {
  const std::vector<std::string> list = parse_platforms(platforms, origin);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.used) {
    if (s.chosen.error.empty() && s.chosen.list == list) return;
    throw Error(std::string(origin) + ": the platforms were already chosen (" +
                (s.chosen.origin.empty() ? "the default" : s.chosen.origin) +
                ") when a backend was first used; choose them before");
  }
  s.chosen = Choice{list, std::string(origin), ""};
  s.set = true;
}

std::string excluded_reason(std::string_view platform) {
  if (platform == "cpu") return "";
  const Choice c = current();
  if (!c.error.empty()) return c.error;
  if (c.list.empty() || std::find(c.list.begin(), c.list.end(), platform) != c.list.end())
    return "";
  return "left out by " + c.origin;
}

}  // namespace cujax::runtime

namespace cujax {

std::string default_backend() {
  struct Outcome {
    std::string platform, error;
  };
  static const Outcome outcome = [] {
    const runtime::Choice c = runtime::current();
    Outcome o;
    if (!c.error.empty()) {
      o.error = c.error;
      return o;
    }
    try {
      o.platform = runtime::choose_platform(
          c.list.empty() ? std::vector<std::string>{"cuda", "cpu"} : c.list,
          runtime::unavailable_reason, c.origin);
    } catch (const Error& e) {
      o.error = e.what();
    }
    return o;
  }();
  if (!outcome.error.empty()) throw Error(outcome.error);
  return outcome.platform;
}

void set_platforms(std::string_view platforms) {
  runtime::set_platforms(platforms, "set_platforms(\"" + std::string(platforms) + "\")");
}

}  // namespace cujax
