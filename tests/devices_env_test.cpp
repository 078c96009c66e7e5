// The default backend and devices as the environment decides them, once per process: CTest runs
// each test here as its own process with CUJAX_PLATFORMS and CUJAX_NUM_CPU_DEVICES set
// (tests/CMakeLists.txt, devices_env.*). Run alone with another environment, a test skips, and
// CTest counts a skip as a failure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cujax/core/error.h"
#include "cujax/devices.h"
#include "cujax/jit.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/spmd.h"

using namespace cujax;

namespace {

// Skips unless CUJAX_PLATFORMS is `value` ("" for unset) and CUJAX_NUM_CPU_DEVICES is 3.
#define REQUIRE_ENVIRONMENT(value)                                            \
  do {                                                                        \
    const char* p = std::getenv("CUJAX_PLATFORMS");                           \
    const char* n = std::getenv("CUJAX_NUM_CPU_DEVICES");                     \
    if (std::string(p ? p : "") != (value) || std::string(n ? n : "") != "3") \
      GTEST_SKIP() << "run by CTest with CUJAX_PLATFORMS='" << (value)        \
                   << "' and CUJAX_NUM_CPU_DEVICES=3";                        \
  } while (0)

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool cuda_usable() {
  return runtime::unavailable_reason("cuda").empty();
}

// devices() and friends agree with the platform's backend: its three virtual cpu devices, or
// every GPU.
void expect_devices_of(const std::string& platform) {
  const auto described = runtime::get_backend(platform).devices();
  const std::vector<Device> all = devices();
  ASSERT_EQ(all.size(), described.size());
  if (platform == "cpu") {
    EXPECT_EQ(all.size(), 3u);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].platform, platform);
    EXPECT_EQ(all[i].id, static_cast<int>(i));
    EXPECT_EQ(all[i].device_kind, described[i].kind);
    EXPECT_EQ(all[i].process_index, 0);
  }
  EXPECT_EQ(local_devices(), all);
  EXPECT_EQ(device_count(), static_cast<int>(described.size()));
  EXPECT_EQ(local_device_count(), device_count());
  EXPECT_EQ(devices(platform), all);
}

}  // namespace

// Nothing chosen: cuda when it can start, else cpu; jit compiles for it.
TEST(DevicesEnv, Unset) {
  REQUIRE_ENVIRONMENT("");
  const std::string expected = cuda_usable() ? "cuda" : "cpu";
  EXPECT_EQ(default_backend(), expected);
  EXPECT_EQ(JitOptions{}.platform, expected);
  expect_devices_of(expected);
  EXPECT_EQ(devices("cpu").size(), 3u);
}

TEST(DevicesEnv, Cpu) {
  REQUIRE_ENVIRONMENT("cpu");
  EXPECT_EQ(default_backend(), "cpu");
  expect_devices_of("cpu");
  // cuda is left out even where it could start: not started at all, as with JAX_PLATFORMS.
  const std::string why = runtime::unavailable_reason("cuda");
  EXPECT_FALSE(why.empty());
#ifdef CUJAX_TEST_CUDA_BUILD
  EXPECT_EQ(why, "left out by CUJAX_PLATFORMS=cpu");
#endif
  const std::string e = error_of([] { devices("cuda"); });
  EXPECT_NE(e.find(why), std::string::npos) << e;
}

TEST(DevicesEnv, CudaThenCpu) {
  REQUIRE_ENVIRONMENT("cuda,cpu");
  const std::string expected = cuda_usable() ? "cuda" : "cpu";
  EXPECT_EQ(default_backend(), expected);
  expect_devices_of(expected);
}

// cuda alone where it cannot start: every use of the default says why.
TEST(DevicesEnv, CudaOnly) {
  REQUIRE_ENVIRONMENT("cuda");
  if (cuda_usable()) {
    EXPECT_EQ(default_backend(), "cuda");
    expect_devices_of("cuda");
    return;
  }
  const std::string why = runtime::unavailable_reason("cuda");
  const std::string expected =
      "CUJAX_PLATFORMS=cuda: cuda cannot start: " + why + "; see `cujax doctor`";
  EXPECT_EQ(error_of([] { default_backend(); }), expected);
  EXPECT_EQ(error_of([] { devices(); }), expected);
  EXPECT_EQ(error_of([] { device_count(); }), expected);
  EXPECT_EQ(error_of([] { JitOptions options; }), expected);
  // cpu stays, for the host-side work that needs it.
  EXPECT_EQ(devices("cpu").size(), 3u);
}

TEST(DevicesEnv, Unknown) {
  REQUIRE_ENVIRONMENT("cuda,tpu");
  const std::string e = error_of([] { default_backend(); });
  EXPECT_EQ(e, "CUJAX_PLATFORMS=cuda,tpu: unknown platform 'tpu' (known: cpu, cuda)");
  EXPECT_EQ(error_of([] { local_devices(); }), e);
  // Nothing but cpu starts while the setting is wrong.
#ifdef CUJAX_TEST_CUDA_BUILD
  EXPECT_EQ(runtime::unavailable_reason("cuda"), e);
#endif
  EXPECT_EQ(devices("cpu").size(), 3u);
}

// set_platforms overrides the environment until the platforms are first used.
TEST(DevicesEnv, SetPlatformsOverridesTheEnvironment) {
  REQUIRE_ENVIRONMENT("cuda");
  const std::string bad = error_of([] { set_platforms("tpu"); });
  EXPECT_NE(bad.find("set_platforms(\"tpu\"): unknown platform 'tpu'"), std::string::npos) << bad;
  set_platforms("cuda,cpu");
  set_platforms("cpu");  // the last call before first use wins
  EXPECT_EQ(default_backend(), "cpu");
  expect_devices_of("cpu");
  set_platforms("cpu");  // the same choice again is fine
  const std::string late = error_of([] { set_platforms("cuda,cpu"); });
  EXPECT_NE(late.find("already chosen (set_platforms(\"cpu\"))"), std::string::npos) << late;
  EXPECT_EQ(default_backend(), "cpu");
}

// A device count set in code that differs from the environment's is an error naming both.
TEST(DevicesEnv, SetNumCpuDevicesConflicts) {
  REQUIRE_ENVIRONMENT("cpu");
  EXPECT_EQ(error_of([] { runtime::set_num_cpu_devices(4); }),
            "set_num_cpu_devices(4) conflicts with CUJAX_NUM_CPU_DEVICES=3 in the environment: set "
            "the cpu device count in one place");
  runtime::set_num_cpu_devices(3);  // agreeing with it is fine
  EXPECT_EQ(device_count("cpu"), 3);
  EXPECT_EQ(error_of([] { runtime::set_num_cpu_devices(5); }),
            "set_num_cpu_devices(5): the cpu backend already has 3 devices, from "
            "set_num_cpu_devices(3) (set the count once, before the devices are first used)");
}

// CUJAX_NUM_CPU_DEVICES=3 with XLA_FLAGS=--xla_force_host_platform_device_count=5.
TEST(DevicesEnv, CountSetTwiceInTheEnvironment) {
  REQUIRE_ENVIRONMENT("cpu");
  const char* flags = std::getenv("XLA_FLAGS");
  if (std::string(flags ? flags : "") != "--xla_force_host_platform_device_count=5")
    GTEST_SKIP() << "run by CTest with XLA_FLAGS=--xla_force_host_platform_device_count=5";
  const std::string expected =
      "the cpu device count is set twice, to different values: CUJAX_NUM_CPU_DEVICES=3 and "
      "XLA_FLAGS=--xla_force_host_platform_device_count=5; keep one of them";
  EXPECT_EQ(error_of([] { runtime::num_cpu_devices(); }), expected);
  EXPECT_EQ(error_of([] { runtime::set_num_cpu_devices(3); }), expected);
}
