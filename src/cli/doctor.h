#pragma once

#include <string>
#include <vector>

namespace cujax::cli {

// `cujax doctor`: why a GPU is or is not used, and what to do. `cujax doctor --trace DIR`: the
// performance report of a trace (--profile DIR, profiler::start_trace), with the pitfalls it
// shows; exit status 1 when it finds any.
int doctor_command(const std::vector<std::string>& argv);

// "default backend: cpu (cuda unavailable: <why>; see `cujax doctor`)", "default backend: cuda",
// or "default backend: none (<why>)"; `ok` says whether there is one.
std::string default_backend_line(bool& ok);

}  // namespace cujax::cli
