#pragma once

namespace cujax::cli {

// `cujax doctor`: why a GPU is or is not used, and what to do.
int doctor_command();

}  // namespace cujax::cli
