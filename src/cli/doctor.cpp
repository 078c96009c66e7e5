#include "cli/doctor.h"

#include <cstdio>

#include "backends/cuda/driver/doctor.h"

namespace cujax::cli {

int doctor_command() {
  const cuda::Diagnosis d = cuda::diagnose(cuda::system_environment());
  std::fputs(cuda::format_diagnosis(d).c_str(), stdout);
  return 0;
}

}  // namespace cujax::cli
