// The driver loader and `cujax doctor`'s diagnosis, on simulated machines: a fake libcuda whose
// entry points the test controls, so every branch runs without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "backends/cuda/driver/doctor.h"
#include "backends/cuda/driver/driver.h"
#include "backends/cuda/driver/library_search.h"

namespace cujax::cuda {
namespace {

// State of the fake driver.
struct FakeGpu {
  CUresult init_result = CUDA_SUCCESS;
  int version = 13000;
  int count = 1;
  int cc_major = 9, cc_minor = 0;
  size_t memory = size_t{80} << 30;
  size_t cudnn_version = 91900;
};
FakeGpu g_fake;

CUresult fake_init(unsigned) {
  return g_fake.init_result;
}
CUresult fake_version(int* v) {
  *v = g_fake.version;
  return CUDA_SUCCESS;
}
CUresult fake_count(int* c) {
  *c = g_fake.count;
  return CUDA_SUCCESS;
}
CUresult fake_get(CUdevice* d, int ordinal) {
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult fake_name(char* name, int len, CUdevice) {
  std::strncpy(name, "NVIDIA Fake H100", static_cast<size_t>(len));
  return CUDA_SUCCESS;
}
CUresult fake_attribute(int* v, int attribute, CUdevice) {
  if (attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    *v = g_fake.cc_major;
  else if (attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    *v = g_fake.cc_minor;
  else if (attribute == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    *v = 132;
  else
    return 1;  // CUDA_ERROR_INVALID_VALUE
  return CUDA_SUCCESS;
}
CUresult fake_total_mem(size_t* bytes, CUdevice) {
  *bytes = g_fake.memory;
  return CUDA_SUCCESS;
}
CUresult fake_error_name(CUresult r, const char** name) {
  static const std::map<CUresult, const char*> names = {
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
      {CUDA_ERROR_INSUFFICIENT_DRIVER, "CUDA_ERROR_INSUFFICIENT_DRIVER"},
      {1, "CUDA_ERROR_INVALID_VALUE"}};
  auto it = names.find(r);
  if (it == names.end()) return 1;
  *name = it->second;
  return CUDA_SUCCESS;
}
size_t fake_cublaslt_version() {
  return 130100;
}
size_t fake_cudnn_version() {
  return g_fake.cudnn_version;
}

// A loader that finds the sonames in `present`, each resolving the fake symbols.
Loader fake_loader(std::vector<std::string> present, bool broken_driver = false) {
  static int handle;
  Loader l;
  l.open = [present](const std::string& soname) -> void* {
    for (const auto& p : present)
      if (soname == p) return &handle;
    return nullptr;
  };
  l.symbol = [broken_driver](void*, const char* s) -> void* {
    const std::map<std::string, void*> symbols = {
        {"cuInit", reinterpret_cast<void*>(&fake_init)},
        {"cuDriverGetVersion", reinterpret_cast<void*>(&fake_version)},
        {"cuDeviceGetCount", reinterpret_cast<void*>(&fake_count)},
        {"cuDeviceGet", reinterpret_cast<void*>(&fake_get)},
        {"cuDeviceGetName", reinterpret_cast<void*>(&fake_name)},
        {"cuDeviceGetAttribute", reinterpret_cast<void*>(&fake_attribute)},
        {"cuDeviceTotalMem_v2", reinterpret_cast<void*>(&fake_total_mem)},
        {"cuGetErrorName", reinterpret_cast<void*>(&fake_error_name)},
        {"cublasLtGetVersion", reinterpret_cast<void*>(&fake_cublaslt_version)},
        {"cudnnGetVersion", reinterpret_cast<void*>(&fake_cudnn_version)},
    };
    if (broken_driver && std::string(s) == "cuDeviceTotalMem_v2") return nullptr;
    auto it = symbols.find(s);
    return it == symbols.end() ? nullptr : it->second;
  };
  l.last_error = [] { return std::string("libcuda.so.1: cannot open shared object file"); };
  return l;
}

class DriverTest : public ::testing::Test {
 protected:
  void SetUp() override { g_fake = FakeGpu{}; }
};

TEST_F(DriverTest, NoLibcudaSaysNoDriver) {
  auto d = Driver::load(fake_loader({}), 13000, {});
  EXPECT_FALSE(d->loaded());
  EXPECT_FALSE(d->usable());
  EXPECT_EQ(d->reason(),
            "no libcuda.so.1: no NVIDIA driver installed (libcuda.so.1: cannot open shared object "
            "file)");
}

TEST_F(DriverTest, MissingSymbolNamesIt) {
  auto d = Driver::load(fake_loader({"libcuda.so.1"}, true), 13000, {"/dev/nvidia0"});
  EXPECT_FALSE(d->loaded());
  EXPECT_NE(d->reason().find("lacks cuDeviceTotalMem_v2"), std::string::npos) << d->reason();
}

TEST_F(DriverTest, NoDeviceWithoutNodesPointsAtTheContainer) {
  g_fake.init_result = CUDA_ERROR_NO_DEVICE;
  auto d = Driver::load(fake_loader({"libcuda.so.1"}), 13000, {});
  EXPECT_TRUE(d->loaded());
  EXPECT_FALSE(d->usable());
  EXPECT_EQ(d->reason(),
            "cuInit failed: CUDA_ERROR_NO_DEVICE (no /dev/nvidia* device nodes: a container "
            "started without GPU access?)");
}

TEST_F(DriverTest, OldDriverIsRejectedWithBothVersions) {
  g_fake.version = 12040;
  auto d = Driver::load(fake_loader({"libcuda.so.1"}), 13000, {"/dev/nvidia0"});
  EXPECT_FALSE(d->usable());
  EXPECT_EQ(d->reason(),
            "driver supports CUDA 12.4, this build needs CUDA 13.0: update the NVIDIA driver");
}

TEST_F(DriverTest, EnumeratesDevices) {
  g_fake.count = 2;
  auto d = Driver::load(fake_loader({"libcuda.so.1"}), 13000, {"/dev/nvidia0"});
  ASSERT_TRUE(d->usable()) << d->reason();
  EXPECT_EQ(d->version(), 13000);
  ASSERT_EQ(d->devices().size(), 2u);
  EXPECT_EQ(d->devices()[1].ordinal, 1);
  EXPECT_EQ(d->devices()[1].name, "NVIDIA Fake H100");
  EXPECT_EQ(d->devices()[1].compute_capability(), 90);
  EXPECT_EQ(d->devices()[1].sm_count, 132);
  EXPECT_EQ(d->devices()[1].memory_bytes, int64_t{80} << 30);
}

TEST_F(DriverTest, CheckNamesCallErrorAndLine) {
  auto d = Driver::load(fake_loader({"libcuda.so.1"}), 0, {"/dev/nvidia0"});
  try {
    CUJAX_CU_CHECK(*d, d->api().cuDeviceGetAttribute(nullptr, 12345, 0));
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find("d->api().cuDeviceGetAttribute(nullptr, 12345, 0) failed: "
                        "CUDA_ERROR_INVALID_VALUE at cuda_driver_test.cpp:"),
              0u)
        << what;
  }
  EXPECT_EQ(d->error_name(999), "CUresult 999");
}

TEST(DriverVersion, Strings) {
  EXPECT_EQ(version_string(13000), "13.0");
  EXPECT_EQ(version_string(12040), "12.4");
  EXPECT_EQ(required_driver_version(13020), 13000);
  EXPECT_EQ(required_driver_version(0), 0);
}

Environment fake_env(std::vector<std::string> present, std::vector<std::string> nodes,
                     int toolkit) {
  Environment env;
  env.loader = fake_loader(std::move(present));
  env.device_nodes = std::move(nodes);
  env.toolkit_version = toolkit;
  return env;
}

TEST_F(DriverTest, DoctorWithoutDriverInContainer) {
  const Diagnosis d = diagnose(fake_env({}, {}, 13000));
  EXPECT_FALSE(d.gpu_used);
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_NE(d.problems[0].what.find("no libcuda.so.1"), std::string::npos);
  EXPECT_NE(d.problems[0].fix.find("--gpus all"), std::string::npos);
  const std::string text = format_diagnosis(d);
  EXPECT_NE(text.find("build                 CUDA 13.0 (sm_80, sm_90 + PTX)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("device nodes          none"), std::string::npos) << text;
  EXPECT_NE(text.find("cuBLASLt              not found (libcublasLt.so.13)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU not used: no libcuda.so.1"), std::string::npos) << text;
}

TEST_F(DriverTest, DoctorHiddenByCudaVisibleDevices) {
  g_fake.init_result = CUDA_ERROR_NO_DEVICE;
  Environment env = fake_env({"libcuda.so.1"}, {"/dev/nvidia0", "/dev/nvidiactl"}, 13000);
  env.cuda_visible_devices = "";
  const Diagnosis d = diagnose(env);
  ASSERT_EQ(d.problems.size(), 1u);
  EXPECT_EQ(d.problems[0].what,
            "cuInit failed: CUDA_ERROR_NO_DEVICE (CUDA_VISIBLE_DEVICES may "
            "hide every device)");
  EXPECT_EQ(d.problems[0].fix,
            "CUDA_VISIBLE_DEVICES='' hides every GPU: unset it or list device "
            "ids");
}

TEST_F(DriverTest, DoctorOldGpuHasNoKernels) {
  g_fake.cc_major = 7;
  g_fake.cc_minor = 5;
  const Diagnosis d = diagnose(
      fake_env({"libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13"}, {"/dev/nvidia0"}, 13000));
  EXPECT_FALSE(d.gpu_used);
  ASSERT_EQ(d.problems.size(), 1u) << format_diagnosis(d);
  EXPECT_NE(d.problems[0].what.find("compute capability 7.5"), std::string::npos);
  EXPECT_NE(format_diagnosis(d).find("bf16 no, fused attention no, kernels none"),
            std::string::npos)
      << format_diagnosis(d);
}

TEST_F(DriverTest, DoctorFusedAttentionNeedsCudnn) {
  const Diagnosis d = diagnose(
      fake_env({"libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13"}, {"/dev/nvidia0"}, 13000));
  EXPECT_TRUE(d.gpu_used);
  const std::string text = format_diagnosis(d);
  EXPECT_NE(text.find("cuDNN                 not found (libcudnn.so.9)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("cuDNN searched        the loader's path\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bf16 yes, fused attention no (cuDNN not found), kernels sm_90"),
            std::string::npos)
      << text;
  LibraryStatus cudnn{"cuDNN", "libcudnn.so.9", true, "8.9.7", ""};
  EXPECT_EQ(fused_attention(90, &cudnn), "no (cuDNN 8.9.7 is older than 9.0.0)");
  cudnn.version = "";
  EXPECT_EQ(fused_attention(90, &cudnn), "no (cuDNN version unknown)");
  cudnn.version = "9.1.0";
  EXPECT_EQ(fused_attention(80, &cudnn), "yes");
  EXPECT_EQ(fused_attention(75, &cudnn), "no");
}

TEST_F(DriverTest, DoctorHealthyGpu) {
  const Diagnosis d =
      diagnose(fake_env({"libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13", "libcudnn.so.9"},
                        {"/dev/nvidia0"}, 13000));
  EXPECT_TRUE(d.gpu_used);
  EXPECT_TRUE(d.problems.empty()) << format_diagnosis(d);
  const std::string text = format_diagnosis(d);
  EXPECT_NE(text.find("cuBLASLt              libcublasLt.so.13, version 13.1.0"), std::string::npos)
      << text;
  EXPECT_NE(text.find("compatibility         runtime needs a CUDA 13.0+ driver: ok"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cuDNN                 libcudnn.so.9, version 9.19.0"), std::string::npos)
      << text;
  EXPECT_NE(text.find("NVIDIA Fake H100, 80.0 GiB, compute capability 9.0, 132 SMs, bf16 yes, "
                      "fused attention yes, kernels sm_90"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU used: the cuda backend runs on 1 device(s)"), std::string::npos);
}

TEST_F(DriverTest, DoctorCpuOnlyBuildWithGpuSaysRebuild) {
  const Diagnosis d = diagnose(fake_env({"libcuda.so.1"}, {"/dev/nvidia0"}, 0));
  EXPECT_FALSE(d.gpu_used);
  ASSERT_EQ(d.problems.size(), 1u) << format_diagnosis(d);
  EXPECT_NE(d.problems[0].fix.find("cmake --preset default"), std::string::npos);
  EXPECT_EQ(d.verdict, "GPU not used: this is a CPU-only build");
}

// This machine, whatever it has: the report is complete and consistent with the driver.
TEST(DoctorSystem, ReportsThisMachine) {
  const Diagnosis d = diagnose(system_environment());
  const std::string text = format_diagnosis(d);
  EXPECT_NE(text.find("build "), std::string::npos);
  EXPECT_NE(text.find("driver "), std::string::npos);
  bool runnable = false;
  for (const DeviceInfo& dev : d.driver->devices())
    runnable |= dev.compute_capability() >= kMinComputeCapability;
  EXPECT_EQ(d.gpu_used, d.cuda_build && d.driver->usable() && runnable) << text;
  if (!d.driver->usable()) {
    EXPECT_FALSE(d.driver->reason().empty());
  }
}

// cuDNN is looked for in CUJAX_CUDNN_DIR's folder first (pip's nvidia-cudnn wheel installs it
// outside the loader's path), then the loader's path, then the toolkit's folders; the doctor
// names the file that loaded and every place searched.
TEST_F(DriverTest, DoctorFindsCudnnThroughItsSetting) {
  Environment env = fake_env({"libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13",
                              "/opt/pip/nvidia/cudnn/lib/libcudnn.so.9"},
                             {"/dev/nvidia0"}, 13000);
  env.library_dirs = {"/usr/local/cuda/lib64"};
  const std::string text_without = format_diagnosis(diagnose(env));
  EXPECT_NE(text_without.find("cuDNN                 not found (libcudnn.so.9)"), std::string::npos)
      << text_without;
  EXPECT_NE(text_without.find("cuDNN searched        the loader's path, /usr/local/cuda/lib64"),
            std::string::npos)
      << text_without;
  env.cudnn_dir = "/opt/pip/nvidia/cudnn/lib";
  const Diagnosis d = diagnose(env);
  const std::string text = format_diagnosis(d);
  EXPECT_TRUE(d.problems.empty()) << text;
  EXPECT_NE(text.find("cuDNN                 /opt/pip/nvidia/cudnn/lib/libcudnn.so.9, version "
                      "9.19.0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cuDNN searched        CUJAX_CUDNN_DIR=/opt/pip/nvidia/cudnn/lib, the "
                      "loader's path, /usr/local/cuda/lib64"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fused attention yes"), std::string::npos) << text;
}

TEST_F(DriverTest, DoctorRefusesCudnnWithKnownBackwardBugs) {
  g_fake.cudnn_version = 91001;
  const Diagnosis d =
      diagnose(fake_env({"libcuda.so.1", "libcublasLt.so.13", "libcublas.so.13", "libcudnn.so.9"},
                        {"/dev/nvidia0"}, 13000));
  const std::string text = format_diagnosis(d);
  ASSERT_EQ(d.problems.size(), 1u) << text;
  EXPECT_NE(d.problems[0].what.find("cuDNN 9.10.1"), std::string::npos) << text;
  EXPECT_NE(d.problems[0].fix.find("9.10.2 or newer"), std::string::npos) << text;
  EXPECT_NE(text.find("fused attention forward only (see problems)"), std::string::npos) << text;
  EXPECT_TRUE(d.gpu_used);
  EXPECT_EQ(version_code("9.10.1"), 91001);
  EXPECT_EQ(version_code("9.10"), 0);
  EXPECT_EQ(version_code("9.x.1"), 0);
}

TEST(LibrarySearch, SettingFirstThenLoaderThenToolkit) {
  const LibrarySearch s =
      library_search("libcudnn.so.9", kCudnnDirSetting, std::string("/a/lib"), {"/cuda/lib64"});
  EXPECT_EQ(s.candidates, (std::vector<std::string>{"/a/lib/libcudnn.so.9", "libcudnn.so.9",
                                                    "/cuda/lib64/libcudnn.so.9"}));
  EXPECT_EQ(s.places, "CUJAX_CUDNN_DIR=/a/lib, the loader's path, /cuda/lib64");
  const LibrarySearch plain = library_search("libnccl.so.2", nullptr, std::nullopt, {});
  EXPECT_EQ(plain.candidates, std::vector<std::string>{"libnccl.so.2"});
  EXPECT_EQ(plain.places, "the loader's path");
}

}  // namespace
}  // namespace cujax::cuda
