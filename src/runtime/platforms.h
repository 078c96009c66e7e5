// Which platforms a process may use and which is its default (cujax/devices.h), as pieces that
// the registry and the command line share and tests can drive without the environment.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace cujax::runtime {

// Every platform cujax has a backend for, built into this binary or not: cpu, cuda.
const std::vector<std::string>& known_platforms();

// The platforms of a list such as "cuda,cpu", in priority order (spaces around names are
// ignored). `origin` ("CUJAX_PLATFORMS=tpu") starts every error. Throws Error for an empty list
// or entry, a repeated name, or an unknown name (listing the known ones).
std::vector<std::string> parse_platforms(std::string_view text, std::string_view origin);

// The first of `platforms` that can start, `unavailable(p)` being why p cannot (empty when it
// can). Throws Error naming each platform's reason when none can.
std::string choose_platform(const std::vector<std::string>& platforms,
                            const std::function<std::string(std::string_view)>& unavailable,
                            std::string_view origin);

// set_platforms with the option or call to name in errors ("--platform").
void set_platforms(std::string_view platforms, std::string_view origin);

// Why the chosen platforms keep `platform` from starting ("not in CUJAX_PLATFORMS=cpu"), or the
// error in CUJAX_PLATFORMS itself; empty when they allow it. `cpu` is always allowed. Reading
// the choice fixes it.
std::string excluded_reason(std::string_view platform);

}  // namespace cujax::runtime
