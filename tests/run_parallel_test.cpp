// interpreter.run_parallel on the cpu backend: each collective run as the processes of a
// run_parallel grid must give the bits the same function gives under runtime::compile_spmd on
// as many virtual cpu devices (the SPMD runtime the project already checks against plain
// loops); plus the host ops (infeed, outfeed, send/recv) and the errors.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cujax/core/error.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/buffer.h"
#include "cujax/runtime/spmd.h"

using namespace cujax;
using runtime::get_backend;

namespace {

constexpr int kReplicas = 2, kPartitions = 3, kDevices = kReplicas * kPartitions;

struct UseSixDevices : ::testing::Environment {
  void SetUp() override { runtime::set_num_cpu_devices(kDevices); }
};
const auto* env = ::testing::AddGlobalTestEnvironment(new UseSixDevices);

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

// @f (one argument of `in`, one result of `out`, body `body` ending in %r) run two ways:
// compile_spmd over a kReplicas x kPartitions grid, and interpreter.run_parallel from @main with
// programs = that grid. Returns (spmd results, run_parallel results), one per device.
std::pair<std::vector<HostTensor>, std::vector<HostTensor>> both_ways(
    const std::string& in, const std::string& out, const std::string& body,
    const std::vector<HostTensor>& inputs) {
  const std::string f = "  func.func @f(%x: " + in + ") -> " + out + " {\n" + body +
                        "\n    return %r : " + out + "\n  }\n";
  const auto spmd_module = ir::parse_module(
      "module @m attributes {mhlo.num_partitions = " + std::to_string(kPartitions) +
      " : i32, mhlo.num_replicas = " + std::to_string(kReplicas) + " : i32} {\n" + f + "}\n");
  std::vector<int> ids;
  for (int d = 0; d < kDevices; ++d) ids.push_back(d);
  auto exe = runtime::compile_spmd(get_backend("cpu"), *spmd_module, ids, "f");
  std::vector<std::vector<HostTensor>> args;
  for (const HostTensor& t : inputs) args.push_back({t});
  std::vector<HostTensor> spmd;
  for (auto& r : exe->execute_on_host(args)) spmd.push_back(r.at(0));

  std::vector<std::string> params, names, results, ins(kDevices, in), outs(kDevices, out), rows;
  for (int d = 0; d < kDevices; ++d) {
    params.push_back("%a" + std::to_string(d) + ": " + in);
    names.push_back("%a" + std::to_string(d));
    results.push_back("%r#" + std::to_string(d));
  }
  for (int r = 0; r < kReplicas; ++r)
    rows.push_back("[" + join(std::vector<std::string>(kPartitions, "@f"), ", ") + "]");
  const std::string main = "  func.func @main(" + join(params, ", ") + ") -> (" + join(outs, ", ") +
                           ") {\n    %r:" + std::to_string(kDevices) +
                           " = \"interpreter.run_parallel\"(" + join(names, ", ") +
                           ") {programs = [" + join(rows, ", ") + "]} : (" + join(ins, ", ") +
                           ") -> (" + join(outs, ", ") + ")\n    return " + join(results, ", ") +
                           " : " + join(outs, ", ") + "\n  }\n";
  const auto module = ir::parse_module("module @m {\n" + f + main + "}\n");
  auto single = get_backend("cpu").compile(*module, "main");
  return {spmd, single->execute_on_host(inputs)};
}

std::vector<HostTensor> inputs(Shape shape) {
  std::vector<HostTensor> v;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int d = 0; d < kDevices; ++d) {
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = 0.37f * static_cast<float>(d * 17 + i) - 1.5f;
    v.push_back(HostTensor::from_vector(x, shape));
  }
  return v;
}

void expect_same(const std::pair<std::vector<HostTensor>, std::vector<HostTensor>>& r) {
  ASSERT_EQ(r.first.size(), static_cast<size_t>(kDevices));
  ASSERT_EQ(r.second.size(), static_cast<size_t>(kDevices));
  for (int d = 0; d < kDevices; ++d) {
    ASSERT_EQ(r.first[d].shape(), r.second[d].shape()) << "device " << d;
    ASSERT_EQ(r.first[d].dtype(), r.second[d].dtype()) << "device " << d;
    EXPECT_EQ(std::memcmp(r.first[d].data(), r.second[d].data(), r.first[d].nbytes()), 0)
        << "device " << d;
  }
}

std::string region(const std::string& op) {
  return "({\n    ^bb0(%p: tensor<f32>, %q: tensor<f32>):\n      %s = " + op +
         " %p, %q : tensor<f32>\n      stablehlo.return %s : tensor<f32>\n    })";
}

const std::string kChannel = "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>";

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    FAIL() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::vector<HostTensor> run_main(const std::string& text, const std::vector<HostTensor>& args) {
  const auto module = ir::parse_module(text);
  return get_backend("cpu").compile(*module, "main")->execute_on_host(args);
}

}  // namespace

TEST(RunParallel, AllReduceCrossReplica) {
  expect_same(both_ways("tensor<3xf32>", "tensor<3xf32>",
                        "    %r = \"stablehlo.all_reduce\"(%x) " + region("stablehlo.add") +
                            " {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : "
                            "(tensor<3xf32>) -> tensor<3xf32>",
                        inputs({3})));
}

TEST(RunParallel, AllReduceFlattenedIds) {
  expect_same(both_ways("tensor<3xf32>", "tensor<3xf32>",
                        "    %r = \"stablehlo.all_reduce\"(%x) " + region("stablehlo.maximum") +
                            " {replica_groups = dense<[[0, 3, 5], [1, 2, 4]]> : "
                            "tensor<2x3xi64>, " +
                            kChannel +
                            ", use_global_device_ids} : (tensor<3xf32>) -> tensor<3xf32>",
                        inputs({3})));
}

TEST(RunParallel, AllGatherCrossReplicaAndPartition) {
  expect_same(both_ways("tensor<2x2xf32>", "tensor<4x2xf32>",
                        "    %r = \"stablehlo.all_gather\"(%x) {all_gather_dim = 0 : i64, "
                        "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, " +
                            kChannel + "} : (tensor<2x2xf32>) -> tensor<4x2xf32>",
                        inputs({2, 2})));
}

TEST(RunParallel, ReduceScatterCrossReplicaAndPartition) {
  // With a channel and no use_global_device_ids: each replica group spans every partition.
  expect_same(both_ways("tensor<2x12xf32>", "tensor<2x2xf32>",
                        "    %r = \"stablehlo.reduce_scatter\"(%x) " + region("stablehlo.add") +
                            " {scatter_dimension = 1 : i64, replica_groups = dense<[[0, 1]]> : "
                            "tensor<1x2xi64>, " +
                            kChannel + "} : (tensor<2x12xf32>) -> tensor<2x2xf32>",
                        inputs({2, 12})));
}

TEST(RunParallel, AllToAllCrossPartition) {
  expect_same(both_ways("tensor<2x6xf32>", "tensor<6x2xf32>",
                        "    %r = \"stablehlo.all_to_all\"(%x) {split_dimension = 1 : i64, "
                        "concat_dimension = 0 : i64, split_count = 3 : i64, replica_groups = "
                        "dense<[[2, 0, 1]]> : tensor<1x3xi64>, " +
                            kChannel + "} : (tensor<2x6xf32>) -> tensor<6x2xf32>",
                        inputs({2, 6})));
}

TEST(RunParallel, CollectivePermute) {
  expect_same(both_ways("tensor<2xf32>", "tensor<2xf32>",
                        "    %r = \"stablehlo.collective_permute\"(%x) {source_target_pairs = "
                        "dense<[[0, 1]]> : tensor<1x2xi64>, " +
                            kChannel + "} : (tensor<2xf32>) -> tensor<2xf32>",
                        inputs({2})));
}

TEST(RunParallel, ReplicaAndPartitionIds) {
  // Each process returns replica_id * 10 + partition_id, as f32 next to its input.
  const std::string body =
      "    %i = stablehlo.replica_id : tensor<ui32>\n"
      "    %j = stablehlo.partition_id : tensor<ui32>\n"
      "    %ten = stablehlo.constant dense<10> : tensor<ui32>\n"
      "    %m = stablehlo.multiply %i, %ten : tensor<ui32>\n"
      "    %k = stablehlo.add %m, %j : tensor<ui32>\n"
      "    %c = stablehlo.convert %k : (tensor<ui32>) -> tensor<f32>\n"
      "    %r = stablehlo.add %c, %x : tensor<f32>";
  const auto r = both_ways("tensor<f32>", "tensor<f32>", body, inputs({}));
  expect_same(r);
  const auto in = inputs({});
  for (int d = 0; d < kDevices; ++d)
    EXPECT_EQ(
        *r.second[d].data_as<float>(),
        static_cast<float>((d / kPartitions) * 10 + d % kPartitions) + *in[d].data_as<float>())
        << "device " << d;
}

TEST(RunParallel, InfeedSendRecvOutfeed) {
  // Process 0 reads the infeed queue and sends its two values on channels 1 and 2; process 1
  // receives them in the other order and returns their difference.
  const std::string text = R"(module @m {
  func.func @q0() -> tensor<2xf32> {
    %c = stablehlo.constant dense<[1.5, 2.5]> : tensor<2xf32>
    return %c : tensor<2xf32>
  }
  func.func @q1() -> tensor<2xf32> {
    %c = stablehlo.constant dense<[10.0, 20.0]> : tensor<2xf32>
    return %c : tensor<2xf32>
  }
  func.func @sender(%t: !stablehlo.token) -> !stablehlo.token {
    %a:2 = "stablehlo.infeed"(%t) : (!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)
    %b:2 = "stablehlo.infeed"(%a#1) : (!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)
    %s1 = "stablehlo.send"(%a#0, %b#1) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 2>, is_host_transfer = true} : (tensor<2xf32>, !stablehlo.token) -> !stablehlo.token
    %s2 = "stablehlo.send"(%b#0, %s1) {channel_handle = #stablehlo.channel_handle<handle = 2, type = 2>, is_host_transfer = true} : (tensor<2xf32>, !stablehlo.token) -> !stablehlo.token
    %o = "stablehlo.outfeed"(%b#0, %s2) : (tensor<2xf32>, !stablehlo.token) -> !stablehlo.token
    return %o : !stablehlo.token
  }
  func.func @receiver(%t: !stablehlo.token) -> tensor<2xf32> {
    %y:2 = "stablehlo.recv"(%t) {channel_handle = #stablehlo.channel_handle<handle = 2, type = 3>, is_host_transfer = true} : (!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)
    %x:2 = "stablehlo.recv"(%y#1) {channel_handle = #stablehlo.channel_handle<handle = 1, type = 3>, is_host_transfer = true} : (!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)
    %d = stablehlo.subtract %y#0, %x#0 : tensor<2xf32>
    return %d : tensor<2xf32>
  }
  func.func @main() -> tensor<2xf32> {
    %t = stablehlo.after_all : !stablehlo.token
    %r:2 = "interpreter.run_parallel"(%t, %t) {infeed = [@q0, @q1], programs = [[@sender], [@receiver]]} : (!stablehlo.token, !stablehlo.token) -> (!stablehlo.token, tensor<2xf32>)
    return %r#1 : tensor<2xf32>
  }
})";
  const auto r = run_main(text, {});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].data_as<float>()[0], 10.0f - 1.5f);
  EXPECT_EQ(r[0].data_as<float>()[1], 20.0f - 2.5f);
}

TEST(RunParallel, Errors) {
  // A recv whose send never comes stops at the collective timeout, naming its channel.
  const double timeout = runtime::collective_timeout_seconds();
  runtime::set_collective_timeout_seconds(0.2);
  expect_error(
      [] {
        run_main(R"(module @m {
  func.func @r(%t: !stablehlo.token) -> tensor<2xf32> {
    %y:2 = "stablehlo.recv"(%t) {channel_handle = #stablehlo.channel_handle<handle = 7, type = 3>, is_host_transfer = true} : (!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)
    return %y#0 : tensor<2xf32>
  }
  func.func @main() -> tensor<2xf32> {
    %t = stablehlo.after_all : !stablehlo.token
    %r = "interpreter.run_parallel"(%t) {programs = [[@r]]} : (!stablehlo.token) -> tensor<2xf32>
    return %r : tensor<2xf32>
  }
})",
                 {});
      },
      "nothing was sent on channel 7");
  runtime::set_collective_timeout_seconds(timeout);
  // Infeed outside run_parallel has no queue.
  expect_error(
      [] {
        run_main(R"(module @m {
  func.func @main() -> tensor<2xf32> {
    %t = stablehlo.after_all : !stablehlo.token
    %a:2 = "stablehlo.infeed"(%t) : (!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)
    return %a#0 : tensor<2xf32>
  }
})",
                 {});
      },
      "stablehlo.infeed at 4:5: runs only in a process of interpreter.run_parallel");
  // Ragged grids and wrong operand counts are refused when compiling.
  const std::string f =
      "  func.func @f(%x: tensor<f32>) -> tensor<f32> {\n    return %x : tensor<f32>\n  }\n";
  expect_error(
      [&] {
        run_main(
            "module @m {\n" + f +
                "  func.func @main(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>) {\n"
                "    %r:3 = \"interpreter.run_parallel\"(%a, %b, %c) {programs = [[@f, @f], "
                "[@f]]} : (tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, "
                "tensor<f32>, tensor<f32>)\n    return\n  }\n}\n",
            {HostTensor(DType::F32, {}), HostTensor(DType::F32, {}), HostTensor(DType::F32, {})});
      },
      "the rows of programs have different lengths");
  expect_error(
      [&] {
        run_main("module @m {\n" + f +
                     "  func.func @main(%a: tensor<f32>) {\n"
                     "    %r:2 = \"interpreter.run_parallel\"(%a) {programs = [[@f], [@f]]} : "
                     "(tensor<f32>) -> (tensor<f32>, tensor<f32>)\n    return\n  }\n}\n",
                 {HostTensor(DType::F32, {})});
      },
      "its 2 processes take 2 arguments and return 2 results, but the op has 1 operands");
  // A failing process stops the others waiting in a collective; the error names it.
  expect_error(
      [] {
        run_main(R"(module @m {
  func.func @ok(%x: tensor<2xf32>) -> tensor<2xf32> {
    %r = "stablehlo.all_reduce"(%x) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf32>
    return %r : tensor<2xf32>
  }
  func.func @bad(%x: tensor<2xf32>) -> tensor<2xf32> {
    %t = stablehlo.after_all : !stablehlo.token
    %a:2 = "stablehlo.infeed"(%t) : (!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)
    return %a#0 : tensor<2xf32>
  }
  func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
    %r:2 = "interpreter.run_parallel"(%a, %b) {programs = [[@ok], [@bad]]} : (tensor<2xf32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)
    return %r#0 : tensor<2xf32>
  }
})",
                 {HostTensor(DType::F32, {2}), HostTensor(DType::F32, {2})});
      },
      "process 1: stablehlo.infeed at 12:5: the infeed queue holds 0 values");
}
