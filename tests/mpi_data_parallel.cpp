// Run by mpi_data_parallel.sh under `mpirun -np 2` (or as 2 processes meeting over TCP at a
// coordinator address): data-parallel training of linear regression
// across the processes (each with CUJAX_NUM_CPU_DEVICES local devices, one slice of the batch
// per device), whose parameters must match the single-process full-batch run. Exit status 0
// on a match, 1 on a mismatch, 77 when the build has no MPI.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "cujax/distributed.h"
#include "cujax/ir/parser.h"
#include "cujax/runtime/spmd.h"
#include "data_parallel_module.h"

using namespace cujax;

namespace {

// all_gather, collective_permute (a ring), all_to_all and an all_reduce over strided groups
// across every device of every process, checked against values computed here; returns false on a
// mismatch.
bool check_collectives(int rank, int local, int devices) {
  const std::string D = std::to_string(devices);
  std::string ids, ring;
  for (int d = 0; d < devices; ++d) {
    ids += (d ? ", " : "") + std::to_string(d);
    ring += std::string(d ? ", " : "") + "[" + std::to_string(d) + ", " +
            std::to_string((d + 1) % devices) + "]";
  }
  // Groups of devices with the same local index: each spans every process, and a process's
  // local devices are in different groups, which meet at the same time.
  std::string strided;
  for (int l = 0; l < local; ++l) {
    strided += std::string(l ? ", " : "") + "[";
    for (int p = 0; p < devices / local; ++p)
      strided += (p ? ", " : "") + std::to_string(p * local + l);
    strided += "]";
  }
  const std::string groups_type =
      "tensor<" + std::to_string(local) + "x" + std::to_string(devices / local) + "xi64>";
  const std::string channel = "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>";
  const std::string G = "tensor<" + std::to_string(2 * devices) + "xi32>";  // gathered
  const std::string M = "tensor<" + D + "x2xi32>";
  const std::string text =
      "module @c attributes {mhlo.num_partitions = " + D +
      " : i32, mhlo.num_replicas = 1 : i32} {\n"
      "  func.func public @main(%x: tensor<2xi32>) -> (" +
      G + ", tensor<2xi32>, " + G +
      ", tensor<2xi32>) {\n"
      "    %0 = \"stablehlo.all_gather\"(%x) <{all_gather_dim = 0 : i64, " +
      channel + ", replica_groups = dense<[[" + ids + "]]> : tensor<1x" + D +
      "xi64>, use_global_device_ids}> : (tensor<2xi32>) -> " + G + "\n" +
      "    %1 = \"stablehlo.collective_permute\"(%x) <{" + channel +
      ", source_target_pairs = dense<[" + ring + "]> : tensor<" + D +
      "x2xi64>}> : (tensor<2xi32>) -> tensor<2xi32>\n" +
      "    %b = stablehlo.broadcast_in_dim %x, dims = [1] : (tensor<2xi32>) -> " + M + "\n" +
      "    %2 = \"stablehlo.all_to_all\"(%b) <{" + channel +
      ", concat_dimension = 0 : i64, replica_groups = dense<[[" + ids + "]]> : tensor<1x" + D +
      "xi64>, split_count = " + D + " : i64, split_dimension = 0 : i64}> : (" + M + ") -> " + M +
      "\n" + "    %3 = stablehlo.reshape %2 : (" + M + ") -> " + G + "\n" +
      "    %4 = \"stablehlo.all_reduce\"(%x) <{" + channel + ", replica_groups = dense<[" +
      strided + "]> : " + groups_type +
      ", use_global_device_ids}> ({\n"
      "    ^bb0(%a: tensor<i32>, %b2: tensor<i32>):\n"
      "      %s = stablehlo.add %a, %b2 : tensor<i32>\n"
      "      stablehlo.return %s : tensor<i32>\n"
      "    }) : (tensor<2xi32>) -> tensor<2xi32>\n"
      "    return %0, %1, %3, %4 : " +
      G + ", tensor<2xi32>, " + G +
      ", tensor<2xi32>\n"
      "  }\n}\n";
  auto m = ir::parse_module(text);
  auto exe =
      runtime::compile_spmd(runtime::get_backend("cpu"), *m, distributed::global_device_ids());
  auto value = [](int d, int i) { return 100 * d + i; };
  std::vector<std::vector<HostTensor>> args;
  for (int l = 0; l < local; ++l) {
    const int d = rank * local + l;
    args.push_back({HostTensor::from_vector(std::vector<int32_t>{value(d, 0), value(d, 1)}, {2})});
  }
  const auto out = exe->execute_on_host(args);
  for (int l = 0; l < local; ++l) {
    const int d = rank * local + l;
    std::vector<int32_t> gathered;
    for (int s = 0; s < devices; ++s) gathered.insert(gathered.end(), {value(s, 0), value(s, 1)});
    const int src = (d + devices - 1) % devices;
    const std::vector<int32_t> permuted = {value(src, 0), value(src, 1)};
    std::vector<int32_t> reduced = {0, 0};
    for (int s = l; s < devices; s += local)
      for (int i = 0; i < 2; ++i) reduced[i] += value(s, i);
    if (out[l][0].to_vector<int32_t>() != gathered || out[l][1].to_vector<int32_t>() != permuted ||
        out[l][2].to_vector<int32_t>() != gathered || out[l][3].to_vector<int32_t>() != reduced) {
      std::printf("process %d: collectives across processes give wrong values on device %d\n", rank,
                  d);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // --coordinator HOST:PORT --num-processes N --process-id I: TCP instead of MPI.
  distributed::InitializeOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--coordinator") options.coordinator_address = argv[i + 1];
    if (flag == "--num-processes") options.num_processes = std::atoi(argv[i + 1]);
    if (flag == "--process-id") options.process_id = std::atoi(argv[i + 1]);
  }
  if (options.coordinator_address.empty() && !distributed::built_with_mpi()) {
    std::printf("built without MPI: skipped\n");
    return 77;
  }
  try {
    distributed::initialize(options);
    const int rank = distributed::process_index();
    const int local = distributed::local_device_count();
    const int devices = distributed::process_count() * local;
    const int per_device = 4, steps = 5;
    const int global_batch = devices * per_device;
    const auto& cpu = runtime::get_backend("cpu");
    auto spmd_module = ir::parse_module(dp_test::data_parallel_step(devices, per_device));
    auto spmd = runtime::compile_spmd(cpu, *spmd_module, distributed::global_device_ids());
    auto ref_module = ir::parse_module(dp_test::data_parallel_step(1, global_batch));
    auto ref = cpu.compile(*ref_module, "main");

    HostTensor w = HostTensor::from_vector(std::vector<float>{0, 0, 0}, {3});
    HostTensor b = HostTensor::from_vector(std::vector<float>{0}, {});
    HostTensor rw = w, rb = b;
    const HostTensor full_x = dp_test::batch_x(0, global_batch);
    const HostTensor full_y = dp_test::batch_y(0, global_batch);
    float loss = 0, ref_loss = 0;
    for (int step = 0; step < steps; ++step) {
      std::vector<std::vector<HostTensor>> args;
      for (int l = 0; l < local; ++l) {
        const int d = rank * local + l;  // this process's devices own consecutive slices
        args.push_back({w, b, dp_test::batch_x(d * per_device, per_device),
                        dp_test::batch_y(d * per_device, per_device)});
      }
      const auto out = spmd->execute_on_host(args);
      for (int l = 1; l < local; ++l)
        for (int k = 0; k < 3; ++k)
          if (std::memcmp(out[l][k].data(), out[0][k].data(), out[0][k].nbytes()) != 0) {
            std::printf("process %d: local devices disagree on result %d\n", rank, k);
            return 1;
          }
      w = out[0][0];
      b = out[0][1];
      loss = out[0][2].data_as<float>()[0];
      const HostTensor ref_args[] = {rw, rb, full_x, full_y};
      const auto r = ref->execute_on_host(ref_args);
      rw = r[0];
      rb = r[1];
      ref_loss = r[2].data_as<float>()[0];
    }
    // Same math, other summation order (per-device partial sums, then the all_reduce).
    const double tol = 1e-5;
    double worst = std::fabs(b.data_as<float>()[0] - rb.data_as<float>()[0]);
    for (int k = 0; k < 3; ++k)
      worst = std::max<double>(worst, std::fabs(w.data_as<float>()[k] - rw.data_as<float>()[k]));
    std::printf(
        "process %d of %d (%d local devices): after %d steps w = (%.6f, %.6f, %.6f) b = %.6f "
        "loss %.6f; full batch: w = (%.6f, %.6f, %.6f) b = %.6f loss %.6f; max diff %.2e\n",
        rank, distributed::process_count(), local, steps, w.data_as<float>()[0],
        w.data_as<float>()[1], w.data_as<float>()[2], b.data_as<float>()[0], loss,
        rw.data_as<float>()[0], rw.data_as<float>()[1], rw.data_as<float>()[2],
        rb.data_as<float>()[0], ref_loss, worst);
    const bool collectives_ok = check_collectives(rank, local, devices);
    std::printf(
        "process %d: all_gather, collective_permute, all_to_all, strided all_reduce across "
        "processes: %s\n",
        rank, collectives_ok ? "ok" : "WRONG");
    const bool ok = collectives_ok && worst <= tol && std::fabs(loss - ref_loss) <= tol &&
                    distributed::process_count() > 1 && rw.data_as<float>()[0] > 0.1f;
    distributed::shutdown();
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}
