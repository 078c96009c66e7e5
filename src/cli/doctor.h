#pragma once

#include <string>

namespace cujax::cli {

// `cujax doctor`: why a GPU is or is not used, and what to do.
int doctor_command();

// "default backend: cpu (cuda unavailable: <why>; see `cujax doctor`)", "default backend: cuda",
// or "default backend: none (<why>)"; `ok` says whether there is one.
std::string default_backend_line(bool& ok);

}  // namespace cujax::cli
