// Devices as JAX has them (cujax/devices.h): the Device value, the platform list that
// CUJAX_PLATFORMS holds, and how the default backend is chosen from it, driven here with
// stand-in reasons so that a machine with a GPU is covered too. What the environment decides
// once per process is in devices_env_test.cpp, one process per setting.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "cujax/core/error.h"
#include "cujax/devices.h"
#include "cujax/runtime/backend.h"
#include "cujax/runtime/spmd.h"
#include "runtime/platforms.h"

using namespace cujax;

namespace {

// What `unavailable` answers on a machine where each platform has the given reason.
std::function<std::string(std::string_view)> machine(std::map<std::string, std::string> reasons) {
  return [reasons](std::string_view p) { return reasons.at(std::string(p)); };
}

const std::vector<std::string> kDefaultOrder{"cuda", "cpu"};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Device, PrintsAsJax) {
  const Device cpu{"cpu", 3, "cpu", 1, 1};
  const Device gpu{"cuda", 0, "NVIDIA H200", 0, 0};
  EXPECT_EQ(cpu.str(), "cpu:3");
  EXPECT_EQ(gpu.str(), "cuda:0");
  EXPECT_EQ(cpu.repr(), "CpuDevice(id=3)");
  EXPECT_EQ(gpu.repr(), "CudaDevice(id=0)");
  std::ostringstream os;
  os << gpu << " " << cpu;
  EXPECT_EQ(os.str(), "CudaDevice(id=0) CpuDevice(id=3)");
}

TEST(Device, ComparesByPlatformAndId) {
  const Device a{"cpu", 1, "cpu", 0, 1};
  EXPECT_EQ(a, (Device{"cpu", 1, "cpu", 0, 1}));
  EXPECT_NE(a, (Device{"cpu", 2, "cpu", 0, 2}));
  EXPECT_NE(a, (Device{"cuda", 1, "NVIDIA H200", 0, 1}));
  std::vector<Device> v{{"cuda", 0, "g", 0, 0}, {"cpu", 2, "cpu", 0, 2}, {"cpu", 0, "cpu", 0, 0}};
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v[0].str(), "cpu:0");
  EXPECT_EQ(v[1].str(), "cpu:2");
  EXPECT_EQ(v[2].str(), "cuda:0");
  EXPECT_LT(v[0], v[1]);
  EXPECT_GT(v[2], v[1]);
}

TEST(Platforms, ParsesAPriorityList) {
  EXPECT_EQ(runtime::parse_platforms("cpu", "X"), std::vector<std::string>{"cpu"});
  EXPECT_EQ(runtime::parse_platforms("cuda,cpu", "X"), (std::vector<std::string>{"cuda", "cpu"}));
  EXPECT_EQ(runtime::parse_platforms(" cpu , cuda", "X"),
            (std::vector<std::string>{"cpu", "cuda"}));
}

TEST(Platforms, BadListsNameTheProblem) {
  const std::string unknown =
      error_of([] { runtime::parse_platforms("cuda,tpu", "CUJAX_PLATFORMS=cuda,tpu"); });
  EXPECT_NE(unknown.find("CUJAX_PLATFORMS=cuda,tpu: unknown platform 'tpu'"), std::string::npos)
      << unknown;
  EXPECT_NE(unknown.find("(known: cpu, cuda)"), std::string::npos) << unknown;
  EXPECT_NE(error_of([] { runtime::parse_platforms("", "X"); }).find("empty platform name"),
            std::string::npos);
  EXPECT_NE(error_of([] { runtime::parse_platforms("cpu,,cuda", "X"); }).find("empty platform"),
            std::string::npos);
  EXPECT_NE(
      error_of([] { runtime::parse_platforms("cpu,cpu", "X"); }).find("'cpu' is listed twice"),
      std::string::npos);
  EXPECT_NE(error_of([] { runtime::parse_platforms("CUDA", "X"); }).find("unknown platform 'CUDA'"),
            std::string::npos);
}

TEST(Platforms, DefaultIsCudaWhenAGpuCanBeUsed) {
  const auto gpu = machine({{"cpu", ""}, {"cuda", ""}});
  const auto no_gpu = machine({{"cpu", ""}, {"cuda", "no libcuda.so.1: no NVIDIA driver"}});
  EXPECT_EQ(runtime::choose_platform(kDefaultOrder, gpu, ""), "cuda");
  EXPECT_EQ(runtime::choose_platform(kDefaultOrder, no_gpu, ""), "cpu");
  // A list puts its first platform that starts first.
  EXPECT_EQ(runtime::choose_platform({"cpu", "cuda"}, gpu, "X"), "cpu");
  EXPECT_EQ(runtime::choose_platform({"cpu"}, gpu, "X"), "cpu");
  EXPECT_EQ(runtime::choose_platform({"cuda"}, gpu, "X"), "cuda");
  EXPECT_EQ(runtime::choose_platform({"cuda", "cpu"}, no_gpu, "X"), "cpu");
}

TEST(Platforms, APlatformThatCannotStartSaysWhy) {
  const auto no_gpu = machine({{"cpu", ""}, {"cuda", "cuInit failed: CUDA_ERROR_NO_DEVICE"}});
  const std::string e =
      error_of([&] { runtime::choose_platform({"cuda"}, no_gpu, "CUJAX_PLATFORMS=cuda"); });
  EXPECT_EQ(e,
            "CUJAX_PLATFORMS=cuda: cuda cannot start: cuInit failed: CUDA_ERROR_NO_DEVICE; see "
            "`cujax doctor`");
}

TEST(Devices, CpuDevicesAreTheBackendsVirtualDevices) {
  const std::vector<Device> all = devices("cpu");
  const auto described = runtime::get_backend("cpu").devices();
  ASSERT_EQ(static_cast<int>(all.size()), runtime::num_cpu_devices());
  ASSERT_EQ(all.size(), described.size());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].platform, "cpu");
    EXPECT_EQ(all[i].id, described[i].id);
    EXPECT_EQ(all[i].device_kind, described[i].kind);
    EXPECT_EQ(all[i].process_index, 0);
    EXPECT_EQ(all[i].local_hardware_id, described[i].id);
  }
  EXPECT_EQ(local_devices("cpu"), all);
  EXPECT_EQ(device_count("cpu"), runtime::num_cpu_devices());
  EXPECT_EQ(local_device_count("cpu"), runtime::num_cpu_devices());
}

TEST(Devices, UnknownPlatformIsAnError) {
  const std::string e = error_of([] { devices("tpu"); });
  EXPECT_NE(e.find("unknown platform 'tpu'"), std::string::npos) << e;
}
