// Element-wise comparison of host tensors for the GPU tests in cuda_test (cuda_test.cpp,
// cuda_fusion_checks.cpp, cuda_cudnn_attention_checks.cpp): any element as a double, and a
// tolerance check that reports the first differing elements.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "backends/common/elementwise.h"
#include "cujax/core/host_tensor.h"

namespace cujax {

inline double as_double(const HostTensor& t, int64_t i) {
  return visit_dtype(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return ew::convert<double, T>(t.data_as<T>()[i]);
  });
}

// Same type and shape; integers and booleans bit for bit; floats within atol + rtol * |cpu|,
// NaN matching NaN.
inline void expect_same(const HostTensor& cuda, const HostTensor& cpu, double rtol, double atol,
                        const std::string& what) {
  ASSERT_EQ(cuda.type_string(), cpu.type_string()) << what;
  if (!is_float(cpu.dtype())) {
    ASSERT_EQ(std::memcmp(cuda.data(), cpu.data(), cpu.nbytes()), 0) << what << ": bits differ";
    return;
  }
  int bad = 0;
  for (int64_t i = 0; i < cpu.size() && bad < 5; ++i) {
    const double a = as_double(cuda, i), b = as_double(cpu, i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;
    if (std::fabs(a - b) <= atol + rtol * std::fabs(b)) continue;
    ADD_FAILURE() << what << ": element " << i << " cuda " << a << " cpu " << b;
    ++bad;
  }
}

}  // namespace cujax
