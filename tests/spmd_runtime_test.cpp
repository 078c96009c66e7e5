// The SPMD runtime on 8 virtual cpu devices: each collective of hand-written partitioned
// StableHLO against the values computed here with plain loops over the devices' inputs.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/distributed.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/buffer.h"
#include "cujax/runtime/spmd.h"
#include "data_parallel_module.h"

using namespace cujax;
using runtime::compile_spmd;
using runtime::get_backend;

namespace {

constexpr int kDevices = 8;

struct UseEightDevices : ::testing::Environment {
  void SetUp() override { runtime::set_num_cpu_devices(kDevices); }
};
const auto* env = ::testing::AddGlobalTestEnvironment(new UseEightDevices);

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

// A module for `replicas` x `partitions` devices whose @main takes `args` and returns `results`.
std::string module(const std::string& args, const std::string& results, const std::string& body,
                   int partitions = kDevices, int replicas = 1) {
  return "module @spmd attributes {mhlo.num_partitions = " + std::to_string(partitions) +
         " : i32, mhlo.num_replicas = " + std::to_string(replicas) +
         " : i32} {\n  func.func public @main(" + args + ") -> (" + results + ") {\n" + body +
         "\n  }\n}\n";
}

std::string region(const std::string& op, const std::string& t) {
  return "({\n    ^bb0(%a: tensor<" + t + ">, %b: tensor<" + t + ">):\n      %s = " + op +
         " %a, %b : tensor<" + t + ">\n      stablehlo.return %s : tensor<" + t + ">\n    })";
}

std::vector<std::vector<HostTensor>> run(const std::string& text,
                                         const std::vector<std::vector<HostTensor>>& args,
                                         std::vector<int> devices = iota(kDevices)) {
  auto m = ir::parse_module(text);
  auto exe = compile_spmd(get_backend("cpu"), *m, devices);
  return exe->execute_on_host(args);
}

template <class T>
HostTensor tensor(const std::vector<T>& v, Shape s) {
  return HostTensor::from_vector(v, std::move(s));
}

// Device d's input: n values of T derived from d, distinct across devices.
template <class T>
std::vector<T> values(int d, int n, std::function<T(int, int)> f) {
  std::vector<T> v(n);
  for (int i = 0; i < n; ++i) v[i] = f(d, i);
  return v;
}

template <class T>
void expect_bits(const HostTensor& t, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(t.size(), static_cast<int64_t>(want.size())) << what;
  EXPECT_EQ(std::memcmp(t.data(), want.data(), t.nbytes()), 0) << what;
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

const std::string kAllGroups = "dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>";
const std::string kAxisGroups = "dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>";
const std::string kChannel = "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>";

}  // namespace

TEST(CpuDevices, EightVirtualDevices) {
  EXPECT_EQ(runtime::num_cpu_devices(), kDevices);
  const auto devices = get_backend("cpu").devices();
  ASSERT_EQ(devices.size(), static_cast<size_t>(kDevices));
  for (int i = 0; i < kDevices; ++i) {
    EXPECT_EQ(devices[i].id, i);
    EXPECT_EQ(devices[i].kind, "cpu");
    int ran = -1;
    runtime::device_queue("cpu", i).enqueue([&ran, i] { ran = i; });
    runtime::device_queue("cpu", i).synchronize();
    EXPECT_EQ(ran, i);
  }
  expect_error([] { runtime::set_num_cpu_devices(4); }, "set_num_cpu_devices(4)");
  expect_error([] { runtime::set_num_cpu_devices(4); }, "already has 8 devices");
  runtime::set_num_cpu_devices(kDevices);  // the same count again is fine
}

TEST(AllReduce, SumF32OverAllDevices) {
  const std::string text = module(
      "%x: tensor<5xf32>", "tensor<5xf32>",
      "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel + ", replica_groups = " + kAllGroups +
          ", use_global_device_ids}> " + region("stablehlo.add", "f32") +
          " : (tensor<5xf32>) -> tensor<5xf32>\n    return %0 : tensor<5xf32>");
  auto f = [](int d, int i) { return 0.1f * static_cast<float>(d + 1) + 1e-3f * (i * i); };
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<float>(d, 5, f), {5})});
  const auto out = run(text, args);
  std::vector<float> want(5, 0.f);
  for (int d = 0; d < kDevices; ++d)  // in group order
    for (int i = 0; i < 5; ++i) want[i] += f(d, i);
  for (int d = 0; d < kDevices; ++d) expect_bits(out[d][0], want, "device " + std::to_string(d));
}

TEST(AllReduce, SubgroupsOfAMeshAxisF64I32Bf16) {
  const std::vector<std::vector<int>> groups = {{0, 2, 4, 6}, {1, 3, 5, 7}};
  {  // f64 max
    const std::string text =
        module("%x: tensor<3xf64>", "tensor<3xf64>",
               "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel + ", replica_groups = " +
                   kAxisGroups + ", use_global_device_ids}> " + region("stablehlo.maximum", "f64") +
                   " : (tensor<3xf64>) -> tensor<3xf64>\n    return %0 : tensor<3xf64>");
    auto f = [](int d, int i) { return static_cast<double>((d * 7 + i * 3) % 5) - 0.5 * d; };
    std::vector<std::vector<HostTensor>> args;
    for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<double>(d, 3, f), {3})});
    const auto out = run(text, args);
    for (const auto& g : groups) {
      std::vector<double> want(3, -1e300);
      for (int d : g)
        for (int i = 0; i < 3; ++i) want[i] = std::max(want[i], f(d, i));
      for (int d : g) expect_bits(out[d][0], want, "f64 max, device " + std::to_string(d));
    }
  }
  {  // i32 multiply, 2-d operand
    const std::string text =
        module("%x: tensor<2x2xi32>", "tensor<2x2xi32>",
               "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel +
                   ", replica_groups = " + kAxisGroups + ", use_global_device_ids}> " +
                   region("stablehlo.multiply", "i32") +
                   " : (tensor<2x2xi32>) -> tensor<2x2xi32>\n    return %0 : tensor<2x2xi32>");
    auto f = [](int d, int i) { return (d + 2) * (i % 2 ? -1 : 1) + i; };
    std::vector<std::vector<HostTensor>> args;
    for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<int32_t>(d, 4, f), {2, 2})});
    const auto out = run(text, args);
    for (const auto& g : groups) {
      std::vector<int32_t> want(4, 1);
      for (int d : g)
        for (int i = 0; i < 4; ++i) want[i] *= f(d, i);
      for (int d : g) expect_bits(out[d][0], want, "i32 mul, device " + std::to_string(d));
    }
  }
  {  // bf16 add: rounded to bf16 after each member, in group order
    const std::string text =
        module("%x: tensor<4xbf16>", "tensor<4xbf16>",
               "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel + ", replica_groups = " +
                   kAxisGroups + ", use_global_device_ids}> " + region("stablehlo.add", "bf16") +
                   " : (tensor<4xbf16>) -> tensor<4xbf16>\n    return %0 : tensor<4xbf16>");
    auto f = [](int d, int i) { return bfloat16(1.0f + 0.37f * d + 0.011f * i); };
    std::vector<std::vector<HostTensor>> args;
    for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<bfloat16>(d, 4, f), {4})});
    const auto out = run(text, args);
    for (const auto& g : groups) {
      std::vector<bfloat16> want(4);
      for (int i = 0; i < 4; ++i) {
        want[i] = f(g[0], i);
        for (size_t k = 1; k < g.size(); ++k)
          want[i] = bfloat16(static_cast<float>(want[i]) + static_cast<float>(f(g[k], i)));
      }
      for (int d : g) expect_bits(out[d][0], want, "bf16 add, device " + std::to_string(d));
    }
  }
}

TEST(AllReduce, GeneralRegionRunsInGroupOrder) {
  // r(a, b) = 2a + b is not commutative: the fold order is visible in the result.
  const std::string text = module(
      "%x: tensor<2xf32>", "tensor<2xf32>",
      "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel +
          ", replica_groups = " + "dense<[[3, 1, 2, 0], [4, 5, 6, 7]]> : tensor<2x4xi64>" +
          ", use_global_device_ids}> ({\n    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
          "      %t = stablehlo.add %a, %a : tensor<f32>\n"
          "      %s = stablehlo.add %t, %b : tensor<f32>\n"
          "      stablehlo.return %s : tensor<f32>\n    }) : (tensor<2xf32>) -> tensor<2xf32>\n"
          "    return %0 : tensor<2xf32>");
  auto f = [](int d, int i) { return static_cast<float>(d * 10 + i); };
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<float>(d, 2, f), {2})});
  const auto out = run(text, args);
  for (const std::vector<int>& g : {std::vector<int>{3, 1, 2, 0}, std::vector<int>{4, 5, 6, 7}}) {
    std::vector<float> want(2);
    for (int i = 0; i < 2; ++i) {
      want[i] = f(g[0], i);
      for (size_t k = 1; k < g.size(); ++k) want[i] = 2 * want[i] + f(g[k], i);
    }
    for (int d : g) expect_bits(out[d][0], want, "device " + std::to_string(d));
  }
}

TEST(AllGather, SubgroupsAlongDimension1) {
  const std::string text =
      module("%x: tensor<2x3xi32>", "tensor<2x12xi32>",
             "    %0 = \"stablehlo.all_gather\"(%x) <{all_gather_dim = 1 : i64, " + kChannel +
                 ", replica_groups = " + kAxisGroups +
                 ", use_global_device_ids}> : (tensor<2x3xi32>) -> tensor<2x12xi32>\n"
                 "    return %0 : tensor<2x12xi32>");
  auto f = [](int d, int i) { return d * 100 + i; };
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<int32_t>(d, 6, f), {2, 3})});
  const auto out = run(text, args);
  for (const std::vector<int>& g : {std::vector<int>{0, 2, 4, 6}, std::vector<int>{1, 3, 5, 7}}) {
    std::vector<int32_t> want;
    for (int row = 0; row < 2; ++row)
      for (int k : g)
        for (int c = 0; c < 3; ++c) want.push_back(f(k, row * 3 + c));
    for (int d : g) {
      EXPECT_EQ(out[d][0].shape(), (Shape{2, 12}));
      expect_bits(out[d][0], want, "device " + std::to_string(d));
    }
  }
}

TEST(ReduceScatter, SumF32) {
  const std::string text =
      module("%x: tensor<8x2xf32>", "tensor<2x2xf32>",
             "    %0 = \"stablehlo.reduce_scatter\"(%x) <{" + kChannel + ", replica_groups = " +
                 kAxisGroups + ", scatter_dimension = 0 : i64, use_global_device_ids}> " +
                 region("stablehlo.add", "f32") +
                 " : (tensor<8x2xf32>) -> tensor<2x2xf32>\n    return %0 : tensor<2x2xf32>");
  auto f = [](int d, int i) { return 0.25f * d + 0.5f * i; };
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<float>(d, 16, f), {8, 2})});
  const auto out = run(text, args);
  for (const std::vector<int>& g : {std::vector<int>{0, 2, 4, 6}, std::vector<int>{1, 3, 5, 7}}) {
    for (size_t rank = 0; rank < g.size(); ++rank) {
      std::vector<float> want(4, 0.f);
      for (int k : g)
        for (int i = 0; i < 4; ++i) want[i] += f(k, static_cast<int>(rank) * 4 + i);
      expect_bits(out[g[rank]][0], want, "device " + std::to_string(g[rank]));
    }
  }
}

TEST(AllToAll, SplitsAndConcatenates) {
  // cross_partition over all 8: split dim 1 (8 columns) into 8, concatenate along dim 0.
  const std::string text =
      module("%x: tensor<2x8xf32>", "tensor<16x1xf32>",
             "    %0 = \"stablehlo.all_to_all\"(%x) <{" + kChannel +
                 ", concat_dimension = 0 : i64, replica_groups = " + kAllGroups +
                 ", split_count = 8 : i64, split_dimension = 1 : i64}> : (tensor<2x8xf32>) -> "
                 "tensor<16x1xf32>\n    return %0 : tensor<16x1xf32>");
  auto f = [](int d, int i) { return static_cast<float>(d * 1000 + i); };
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<float>(d, 16, f), {2, 8})});
  const auto out = run(text, args);
  for (int r = 0; r < kDevices; ++r) {
    std::vector<float> want;  // sender s's column r, both rows, for s in order
    for (int s = 0; s < kDevices; ++s)
      for (int row = 0; row < 2; ++row) want.push_back(f(s, row * 8 + r));
    expect_bits(out[r][0], want, "device " + std::to_string(r));
  }
}

TEST(CollectivePermute, RingWithAHole) {
  // d -> d+1 for d < 6; device 0 has no source and gets zeros; 7 sends nowhere.
  const std::string text = module(
      "%x: tensor<3xf64>", "tensor<3xf64>",
      "    %0 = \"stablehlo.collective_permute\"(%x) <{" + kChannel +
          ", source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, "
          "7]]> : tensor<7x2xi64>}> : (tensor<3xf64>) -> tensor<3xf64>\n"
          "    return %0 : tensor<3xf64>");
  auto f = [](int d, int i) { return d + 0.125 * i; };
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<double>(d, 3, f), {3})});
  const auto out = run(text, args);
  expect_bits(out[0][0], std::vector<double>(3, 0.0), "device 0");
  for (int d = 1; d < kDevices; ++d)
    expect_bits(out[d][0], values<double>(d - 1, 3, f), "device " + std::to_string(d));
}

TEST(CollectiveBroadcast, FromEachGroupsFirstMember) {
  const std::string text =
      module("%x: tensor<2xi32>", "tensor<2xi32>",
             "    %0 = \"stablehlo.collective_broadcast\"(%x) <{" + kChannel +
                 ", replica_groups = dense<[[6, 0, 2, 4], [1, 3, 5, 7]]> : tensor<2x4xi64>}> : "
                 "(tensor<2xi32>) -> tensor<2xi32>\n    return %0 : tensor<2xi32>");
  auto f = [](int d, int i) { return 10 * d + i; };
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({tensor(values<int32_t>(d, 2, f), {2})});
  const auto out = run(text, args);
  for (int d : {6, 0, 2, 4}) expect_bits(out[d][0], values<int32_t>(6, 2, f), "even");
  for (int d : {1, 3, 5, 7}) expect_bits(out[d][0], values<int32_t>(1, 2, f), "odd");
}

TEST(ProcessIds, PartitionAndReplicaIdOnATwoByFourGrid) {
  const std::string text = module("", "tensor<ui32>, tensor<ui32>",
                                  "    %0 = stablehlo.partition_id : tensor<ui32>\n"
                                  "    %1 = stablehlo.replica_id : tensor<ui32>\n"
                                  "    return %0, %1 : tensor<ui32>, tensor<ui32>",
                                  4, 2);
  const auto out = run(text, std::vector<std::vector<HostTensor>>(kDevices));
  for (int d = 0; d < kDevices; ++d) {
    EXPECT_EQ(out[d][0].to_vector<uint32_t>()[0], static_cast<uint32_t>(d % 4));
    EXPECT_EQ(out[d][1].to_vector<uint32_t>()[0], static_cast<uint32_t>(d / 4));
  }
}

TEST(GroupModes, CrossReplicaAndCrossReplicaAndPartition) {
  // 2 replicas x 4 partitions: device = replica * 4 + partition.
  auto sum_text = [](const std::string& attrs) {
    return module("%x: tensor<i32>", "tensor<i32>",
                  "    %0 = \"stablehlo.all_reduce\"(%x) <{" + attrs + "}> " +
                      region("stablehlo.add", "i32") +
                      " : (tensor<i32>) -> tensor<i32>\n    return %0 : tensor<i32>",
                  4, 2);
  };
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({tensor(std::vector<int32_t>{1 << d}, {})});
  // cross_replica: no channel; replicas {0,1} of each partition p meet: devices p and 4 + p.
  auto out = run(sum_text("replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>"), args);
  for (int d = 0; d < kDevices; ++d)
    EXPECT_EQ(out[d][0].to_vector<int32_t>()[0], (1 << (d % 4)) + (1 << (d % 4 + 4))) << d;
  // cross_replica_and_partition: a channel without use_global_device_ids: groups of replicas
  // {0} and {1}, each with all partitions.
  out = run(sum_text(kChannel + ", replica_groups = dense<[[0], [1]]> : tensor<2x1xi64>"), args);
  for (int d = 0; d < kDevices; ++d)
    EXPECT_EQ(out[d][0].to_vector<int32_t>()[0], d < 4 ? 0x0f : 0xf0) << d;
  // Empty replica_groups: every replica, so all 8 devices with a channel.
  out = run(sum_text(kChannel + ", replica_groups = dense<> : tensor<0x0xi64>"), args);
  for (int d = 0; d < kDevices; ++d) EXPECT_EQ(out[d][0].to_vector<int32_t>()[0], 0xff) << d;
}

TEST(Errors, MismatchedShapesAcrossMembers) {
  const std::string text = module(
      "%x: tensor<4xf32>", "tensor<4xf32>",
      "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel + ", replica_groups = " + kAllGroups +
          ", use_global_device_ids}> " + region("stablehlo.add", "f32") +
          " : (tensor<4xf32>) -> tensor<4xf32>\n    return %0 : tensor<4xf32>");
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({HostTensor(DType::F32, {d == 3 ? 5 : 4})});
  expect_error([&] { run(text, args); }, "stablehlo.all_reduce");
  expect_error([&] { run(text, args); }, "f32[5] on device 3 but f32[4] on device 0");
}

TEST(Errors, DeviceInTwoGroupsAndUnknownDevice) {
  auto text = [](const std::string& groups) {
    return module("%x: tensor<4xf32>", "tensor<4xf32>",
                  "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel + ", replica_groups = " +
                      groups + ", use_global_device_ids}> " + region("stablehlo.add", "f32") +
                      " : (tensor<4xf32>) -> tensor<4xf32>\n    return %0 : tensor<4xf32>");
  };
  const std::vector<std::vector<HostTensor>> none;
  expect_error([&] { run(text("dense<[[0, 1, 2, 3], [3, 4, 5, 6]]> : tensor<2x4xi64>"), none); },
               "device 3 is in two process groups");
  expect_error([&] { run(text("dense<[[0, 1, 2, 9]]> : tensor<1x4xi64>"), none); },
               "replica_groups name device 9, but the program has 8");
  expect_error(
      [&] {
        auto m = ir::parse_module(text(kAllGroups));
        compile_spmd(get_backend("cpu"), *m, {0, 1, 2, 3, 4, 5, 6, 8});
      },
      "device cpu:8 does not exist");
  expect_error(
      [&] {
        auto m = ir::parse_module(text(kAllGroups));
        compile_spmd(get_backend("cpu"), *m, {0, 1, 2, 3});
      },
      "mhlo.num_partitions = 8 devices, but 4 device ids");
}

TEST(Errors, AFailingDeviceStopsTheOthersAndIsNamed) {
  // Device 2 gets no arguments and fails before the all_reduce; the other 7 stop waiting at
  // once (no timeout) and its error is the one reported.
  const std::string text = module(
      "%x: tensor<4xf32>", "tensor<4xf32>",
      "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel + ", replica_groups = " + kAllGroups +
          ", use_global_device_ids}> " + region("stablehlo.add", "f32") +
          " : (tensor<4xf32>) -> tensor<4xf32>\n    return %0 : tensor<4xf32>");
  std::vector<std::vector<HostTensor>> args(kDevices, {HostTensor(DType::F32, {4})});
  args[2].clear();
  const auto start = std::chrono::steady_clock::now();
  expect_error([&] { run(text, args); }, "device cpu:2: program expects 1 arguments");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);
  expect_error([&] { run(text, std::vector<std::vector<HostTensor>>(3)); },
               "got arguments for 3 devices, this process runs 8");
}

TEST(Errors, DeadlockGuardNamesWhoArrived) {
  // Only partition 0 takes the branch with the all_reduce: it waits for the others forever.
  const std::string text =
      module("%x: tensor<2xf32>", "tensor<2xf32>",
             "    %p = stablehlo.partition_id : tensor<ui32>\n"
             "    %one = stablehlo.constant dense<1> : tensor<ui32>\n"
             "    %m = stablehlo.minimum %p, %one : tensor<ui32>\n"
             "    %i = stablehlo.convert %m : (tensor<ui32>) -> tensor<i32>\n"
             "    %0 = \"stablehlo.case\"(%i) ({\n"
             "      %r = \"stablehlo.all_reduce\"(%x) <{" +
                 kChannel + ", replica_groups = " + kAllGroups + ", use_global_device_ids}> " +
                 region("stablehlo.add", "f32") +
                 " : (tensor<2xf32>) -> tensor<2xf32>\n"
                 "      stablehlo.return %r : tensor<2xf32>\n"
                 "    }, {\n      stablehlo.return %x : tensor<2xf32>\n"
                 "    }) : (tensor<i32>) -> tensor<2xf32>\n    return %0 : tensor<2xf32>");
  std::vector<std::vector<HostTensor>> args(kDevices, {HostTensor(DType::F32, {2})});
  runtime::set_collective_timeout_seconds(0.5);
  expect_error([&] { run(text, args); }, "stablehlo.all_reduce");
  expect_error([&] { run(text, args); }, "devices {0} arrived, still waiting for {1,2,3,4,5,6,7}");
  runtime::set_collective_timeout_seconds(300);
}

TEST(Errors, CollectiveOutsideSpmdNeedsCompileSpmd) {
  const std::string text = module(
      "%x: tensor<4xf32>", "tensor<4xf32>",
      "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel + ", replica_groups = " + kAllGroups +
          ", use_global_device_ids}> " + region("stablehlo.add", "f32") +
          " : (tensor<4xf32>) -> tensor<4xf32>\n    return %0 : tensor<4xf32>");
  auto m = ir::parse_module(text);
  auto exe = get_backend("cpu").compile(*m, "main");
  const HostTensor x(DType::F32, {4});
  expect_error([&] { exe->execute_on_host({&x, 1}); }, "run the program with runtime::compile_spmd");
}

TEST(AllReduce, ManySmallOnesInALoopTimed) {
  // 1000 scalar all_reduces in a while loop: the rendezvous' latency, and the instances of one
  // op in a loop matched by their execution count.
  const std::string text =
      module("%x: tensor<f32>", "tensor<f32>",
             "    %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
             "    %0:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<f32>\n"
             "     cond {\n"
             "      %n = stablehlo.constant dense<1000> : tensor<i32>\n"
             "      %lt = stablehlo.compare  LT, %i, %n,  SIGNED : (tensor<i32>, tensor<i32>) -> "
             "tensor<i1>\n"
             "      stablehlo.return %lt : tensor<i1>\n"
             "    } do {\n"
             "      %one = stablehlo.constant dense<1> : tensor<i32>\n"
             "      %i2 = stablehlo.add %i, %one : tensor<i32>\n"
             "      %r = \"stablehlo.all_reduce\"(%v) <{" +
                 kChannel + ", replica_groups = " + kAllGroups + ", use_global_device_ids}> " +
                 region("stablehlo.maximum", "f32") +
                 " : (tensor<f32>) -> tensor<f32>\n"
                 "      %h = stablehlo.constant dense<0.5> : tensor<f32>\n"
                 "      %v2 = stablehlo.add %r, %h : tensor<f32>\n"
                 "      stablehlo.return %i2, %v2 : tensor<i32>, tensor<f32>\n"
                 "    }\n"
                 "    return %0#1 : tensor<f32>");
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d) args.push_back({tensor(std::vector<float>{1.0f * d}, {})});
  auto m = ir::parse_module(text);
  auto exe = compile_spmd(get_backend("cpu"), *m, iota(kDevices));
  const auto out = exe->execute_on_host(args);
  // max over devices then +0.5, 1000 times, starting from max = 7.
  for (int d = 0; d < kDevices; ++d) EXPECT_EQ(out[d][0].data_as<float>()[0], 7.0f + 500.0f);
  std::printf("1000 scalar all_reduces across %d devices: %.1f us each\n", kDevices,
              exe->last_stats().seconds / 1000 * 1e6);
}

TEST(AllReduce, OneMillionF32AcrossEightDevicesTimed) {
  const int n = 1 << 20;
  const std::string t = "tensor<" + std::to_string(n) + "xf32>";
  const std::string text = module(
      "%x: " + t, t,
      "    %0 = \"stablehlo.all_reduce\"(%x) <{" + kChannel + ", replica_groups = " + kAllGroups +
          ", use_global_device_ids}> " + region("stablehlo.add", "f32") + " : (" + t + ") -> " + t +
          "\n    return %0 : " + t);
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d)
    args.push_back({tensor(
        values<float>(d, n, [](int d, int i) { return static_cast<float>((d + 1) * (i % 7)); }),
        {n})});
  auto m = ir::parse_module(text);
  auto exe = compile_spmd(get_backend("cpu"), *m, iota(kDevices));
  exe->execute_on_host(args);  // warm up
  double best = 1e9, collective = 0;
  std::vector<std::vector<HostTensor>> out;
  for (int rep = 0; rep < 5; ++rep) {
    out = exe->execute_on_host(args);
    if (exe->last_stats().seconds < best) {
      best = exe->last_stats().seconds;
      collective = exe->last_stats().collective_seconds;
    }
  }
  std::printf(
      "all_reduce of %d f32 across %d devices: %.2f ms per execute (%.2f ms in the "
      "collective per device)\n",
      n, kDevices, best * 1e3, collective * 1e3);
  EXPECT_GT(collective, 0);
  EXPECT_LE(collective, best);
  for (int d = 0; d < kDevices; ++d) {
    const float* p = out[d][0].data_as<float>();
    for (int i : {0, 1, 6, 100, n - 1}) ASSERT_EQ(p[i], 36.0f * (i % 7)) << d << " " << i;
  }
}

TEST(DataParallel, EightDevicesMatchTheFullBatchRun) {
  // The step of mpi_data_parallel on 8 virtual devices of one process, against one device
  // running the whole batch: the same SGD up to the summation order (tolerance 1e-5).
  const int per_device = 4, steps = 5;
  auto spmd_module = ir::parse_module(dp_test::data_parallel_step(kDevices, per_device));
  auto spmd = compile_spmd(get_backend("cpu"), *spmd_module, iota(kDevices));
  auto ref_module = ir::parse_module(dp_test::data_parallel_step(1, kDevices * per_device));
  auto ref = get_backend("cpu").compile(*ref_module, "main");
  HostTensor w = HostTensor(DType::F32, {3}), b = HostTensor(DType::F32, {});
  HostTensor rw = w, rb = b;
  const HostTensor x = dp_test::batch_x(0, kDevices * per_device);
  const HostTensor y = dp_test::batch_y(0, kDevices * per_device);
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<HostTensor>> args;
    for (int d = 0; d < kDevices; ++d)
      args.push_back({w, b, dp_test::batch_x(d * per_device, per_device),
                      dp_test::batch_y(d * per_device, per_device)});
    const auto out = spmd->execute_on_host(args);
    for (int d = 1; d < kDevices; ++d) expect_bits(out[d][0], out[0][0].to_vector<float>(), "w");
    w = out[0][0];
    b = out[0][1];
    const HostTensor ref_args[] = {rw, rb, x, y};
    const auto r = ref->execute_on_host(ref_args);
    rw = r[0];
    rb = r[1];
    EXPECT_NEAR(out[0][2].data_as<float>()[0], r[2].data_as<float>()[0], 1e-5) << step;
  }
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(w.data_as<float>()[k], rw.data_as<float>()[k], 1e-5);
  EXPECT_NEAR(b.data_as<float>()[0], rb.data_as<float>()[0], 1e-5);
  EXPECT_GT(std::fabs(rw.data_as<float>()[0]), 0.1f);  // training moved the parameters
}

TEST(Concurrency, DevicesRunHeavyKernelsAtOnceLikeOneDevice) {
  // Matrix products (BLAS and parallel_for), reductions and sorts on all 8 devices at the same
  // time give the bits one device gives alone: kernels share no mutable state.
  const std::string text = module(
      "%x: tensor<96x96xf32>", "tensor<96x96xf32>, tensor<96xf32>, tensor<96x96xf32>",
      "    %0 = stablehlo.dot_general %x, %x, contracting_dims = [1] x [0] : (tensor<96x96xf32>, "
      "tensor<96x96xf32>) -> tensor<96x96xf32>\n"
      "    %z = stablehlo.constant dense<0.0> : tensor<f32>\n"
      "    %1 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [1] : "
      "(tensor<96x96xf32>, tensor<f32>) -> tensor<96xf32>\n"
      "    %2 = \"stablehlo.sort\"(%0) <{dimension = 1 : i64, is_stable = true}> ({\n"
      "    ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
      "      %c = stablehlo.compare  LT, %a, %b,  FLOAT : (tensor<f32>, tensor<f32>) -> "
      "tensor<i1>\n"
      "      stablehlo.return %c : tensor<i1>\n"
      "    }) : (tensor<96x96xf32>) -> tensor<96x96xf32>\n"
      "    return %0, %1, %2 : tensor<96x96xf32>, tensor<96xf32>, tensor<96x96xf32>");
  auto f = [](int d, int i) { return static_cast<float>(((i * 31 + d * 17) % 101) - 50) / 64; };
  std::vector<std::vector<HostTensor>> args;
  for (int d = 0; d < kDevices; ++d)
    args.push_back({tensor(values<float>(d, 96 * 96, f), {96, 96})});
  auto m = ir::parse_module(text);
  auto spmd = compile_spmd(get_backend("cpu"), *m, iota(kDevices));
  auto single = get_backend("cpu").compile(*m, "main");
  for (int rep = 0; rep < 3; ++rep) {
    const auto out = spmd->execute_on_host(args);
    for (int d = 0; d < kDevices; ++d) {
      const auto want = single->execute_on_host(args[d]);
      for (size_t k = 0; k < want.size(); ++k)
        expect_bits(out[d][k], want[k].to_vector<float>(),
                    "device " + std::to_string(d) + " result " + std::to_string(k));
    }
  }
}

TEST(Distributed, OneProcessWithoutMpirun) {
  EXPECT_FALSE(distributed::is_initialized());
  EXPECT_EQ(distributed::process_count(), 1);
  EXPECT_EQ(distributed::process_index(), 0);
  EXPECT_EQ(distributed::local_device_count(), kDevices);
  EXPECT_EQ(distributed::global_device_ids(), iota(kDevices));
  EXPECT_EQ(distributed::process_of_device(7), 0);
  distributed::InitializeOptions with_coordinator;
  with_coordinator.coordinator_address = "127.0.0.1:0";  // any free port
  expect_error([&] { distributed::initialize(with_coordinator); },
               "num_processes and process_id are needed");
  with_coordinator.coordinator_address = "nocolon";
  with_coordinator.num_processes = 1;
  with_coordinator.process_id = 0;
  expect_error([&] { distributed::initialize(with_coordinator); }, "'nocolon' is not host:port");
  EXPECT_FALSE(distributed::is_initialized());
  with_coordinator.coordinator_address = "127.0.0.1:0";  // a coordinator of one process
  distributed::initialize(with_coordinator);
  EXPECT_EQ(distributed::process_count(), 1);
  distributed::shutdown();
  distributed::initialize();  // not under mpirun: a single process, without MPI
  EXPECT_TRUE(distributed::is_initialized());
  EXPECT_EQ(distributed::process_count(), 1);
  expect_error([] { distributed::initialize(); }, "already initialized");
  distributed::shutdown();
  EXPECT_FALSE(distributed::is_initialized());
}
