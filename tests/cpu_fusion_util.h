// What the CPU fusion tests share: random inputs, a program run with fusion on or off, the
// bit-for-bit comparison of the two, and the plan the fuser makes of a program's @main.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/fusion.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/backend.h"

namespace cujax::testutil {

inline HostTensor random_f32(const Shape& shape, uint32_t seed, float scale = 2.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(num_elements(shape)));
  for (float& x : v) x = normal(gen);
  return HostTensor::from_vector(v, shape);
}

inline std::vector<HostTensor> run(const std::string& text, const std::vector<HostTensor>& args,
                                   bool fused) {
  cpu::set_fusion_enabled(fused);
  auto module = ir::parse_module(text);
  auto exe = runtime::get_backend("cpu").compile(*module, "main");
  auto out = exe->execute_on_host(args);
  cpu::set_fusion_enabled(true);
  return out;
}

inline void expect_bit_identical(const std::vector<HostTensor>& a,
                                 const std::vector<HostTensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].type_string(), b[i].type_string()) << "result " << i;
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].nbytes()), 0) << "result " << i;
  }
}

inline cpu::FusionPlan plan_of(const std::string& text) {
  auto module = ir::parse_module(text);
  const ir::Block& block = module->lookup("main")->body.front();
  return cpu::plan_fusion(block, block.ops.size() - 1);
}

}  // namespace cujax::testutil
