// A global mesh across processes, as multi-process JAX: each test forks N processes that meet
// over TCP at a coordinator on localhost (distributed::initialize), place arrays on a mesh of
// every process's devices and run jit on them. Each process checks its own shards against
// values it computes on one device; a process's failed expectation is its exit status.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <functional>
#include <thread>

#include "cujax/devices.h"
#include "cujax/distributed.h"
#include "cujax/grad.h"
#include "cujax/jit.h"
#include "cujax/numpy.h"
#include "cujax/runtime/spmd.h"
#include "cujax/sharding.h"
#include "free_port.h"

using namespace cujax;
namespace np = cujax::numpy;

namespace {

// Runs body(process) in `processes` forked children of `local` cpu devices each, joined into
// one process group; expects every child to exit 0 within a minute. The parent starts no
// threads, so forking it is safe.
void run_processes(int processes, int local, const std::function<void(int)>& body) {
  const int port = cujax::testutil::free_port();
  ASSERT_GT(port, 0);
  std::vector<pid_t> children;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int status = 0;
      try {
        runtime::set_num_cpu_devices(local);
        runtime::set_collective_timeout_seconds(30);
        distributed::initialize({"127.0.0.1:" + std::to_string(port), processes, i});
        body(i);
        distributed::shutdown();
        status = ::testing::Test::HasFailure() ? 1 : 0;
      } catch (const std::exception& e) {
        std::printf("process %d: %s\n", i, e.what());
        status = 2;
      }
      std::fflush(stdout);
      std::_Exit(status);
    }
    children.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (size_t i = 0; i < children.size(); ++i) {
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(children[i], &status, WNOHANG)) == 0 &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (done == 0) {
      ::kill(children[i], SIGKILL);
      ::waitpid(children[i], &status, 0);
      ADD_FAILURE() << "process " << i << " did not finish within 60 s";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "process " << i << " failed (status " << status << ")";
  }
}

// 0, 1, 2, ... in `shape`: every element tells where it came from.
Array iota(const Shape& shape) {
  std::vector<float> v(num_elements(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.01f - 0.3f;
  return array(v, shape);
}

void expect_near(const HostTensor& got, const HostTensor& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got.data_as<float>()[i], want.data_as<float>()[i], tol) << "element " << i;
}

// The slice of `whole` a shard holds.
HostTensor slice_of(const Array& whole, const Shard& s) {
  return host_slice(whole.to_host(), s.index);
}

}  // namespace

// 2 processes x 2 devices: a mesh over the 4 global devices, device_put keeps this process's
// shards, and fetching a value that spans the other process is an error naming the array.
TEST(MultiProcess, GlobalMeshAndAddressableShards) {
  run_processes(2, 2, [](int process) {
    EXPECT_EQ(distributed::global_device_ids(), (std::vector<int>{0, 1, 2, 3}));
    const Mesh mesh = make_mesh({4}, {"data"});
    EXPECT_EQ(mesh.devices(), (std::vector<int>{0, 1, 2, 3}));
    try {
      make_mesh({8}, {"data"});
      ADD_FAILURE() << "a mesh of 8 on 4 global devices";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("there are 4 (2 processes x 2)"), std::string::npos)
          << e.what();
    }

    const Array x = iota({8, 3});
    const Array xs = device_put(x, NamedSharding(mesh, P("data")));
    EXPECT_FALSE(is_fully_addressable(xs));
    EXPECT_EQ(sharding_of(xs).addressable_partitions(),
              (std::vector<int64_t>{2 * process, 2 * process + 1}));
    EXPECT_EQ(xs.devices().size(), 4u);  // the global array's devices
    const auto shards = addressable_shards(xs);
    ASSERT_EQ(shards.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      const int device = 2 * process + k;
      EXPECT_EQ(shards[k].device, device);
      EXPECT_EQ(shards[k].index[0], (std::pair<int64_t, int64_t>{2 * device, 2 * device + 2}));
      expect_near(shards[k].data.to_host(), slice_of(x, shards[k]), 0);
    }
    try {
      xs.to_host();
      ADD_FAILURE() << "fetched an array that spans the other process";
    } catch (const Error& e) {
      const std::string m = e.what();
      for (const std::string& part :
           {std::string("f32[8,3]"), std::string("non-addressable"),
            "process " + std::to_string(process) + " of 2",
            "cpu:" + std::to_string(2 * process) + ", cpu:" + std::to_string(2 * process + 1),
            std::string("process_allgather")})
        EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' not in: " << m;
    }
    // A replicated value is whole in each process; process_allgather assembles split ones.
    const Array r = device_put(x, NamedSharding(mesh, P()));
    EXPECT_FALSE(is_fully_addressable(r));
    expect_near(r.to_host(), x.to_host(), 0);
    expect_near(process_allgather(xs).to_host(), x.to_host(), 0);
    expect_near(process_allgather(x).to_host(), x.to_host(), 0);  // unsharded: itself
  });
}

// jit on a ("data", "model") mesh over 2 processes x 2 devices: outputs hold this process's
// shards, equal to the one-device result's slices; a reduction over everything is replicated
// and fetches; a data-parallel gradient is summed across the processes.
TEST(MultiProcess, JitOnGlobalMesh) {
  run_processes(2, 2, [](int process) {
    const Mesh mesh = make_mesh({2, 2}, {"data", "model"});
    const Array x = iota({8, 6}), w = np::transpose(iota({4, 6}));
    auto f = [](const Array& x, const Array& w) { return np::tanh(np::matmul(x, w)); };
    const Array want = jit(f)(x, w);
    const Array xs = device_put(x, NamedSharding(mesh, P("data", std::nullopt)));
    const Array ws = device_put(w, NamedSharding(mesh, P(std::nullopt, "model")));
    const Array y = jit(f)(xs, ws);
    EXPECT_EQ(y.sharding(),
              "NamedSharding(mesh=Mesh('data': 2, 'model': 2), spec=PartitionSpec('data', "
              "'model'))");
    const auto shards = addressable_shards(y);
    ASSERT_EQ(shards.size(), 2u);
    for (const Shard& s : shards) {
      EXPECT_EQ(s.index[0].first, 4 * process);  // this process's row of the mesh
      expect_near(s.data.to_host(), slice_of(want, s), 1e-6);
    }
    expect_near(process_allgather(y).to_host(), want.to_host(), 1e-6);

    auto total = jit([&](const Array& x, const Array& w) { return np::sum(f(x, w)); });
    const Array t = total(xs, ws);
    EXPECT_NEAR(t.item<float>(), total(x, w).item<float>(), 1e-5);

    // The training step's pattern: batch split over every device of both processes, the
    // gradient all_reduced across them and replicated.
    const Mesh flat = make_mesh({4}, {"data"});
    auto loss = [](const Array& w, const Array& x) {
      return np::mean(np::square(np::matmul(x, w)));
    };
    auto g = jit([&](const Array& w, const Array& x) { return grad(loss)(w, x); });
    const Array want_g = g(w, x);
    const Array got_g = g(device_put(w, NamedSharding(flat, P())),
                          device_put(x, NamedSharding(flat, P("data", std::nullopt))));
    EXPECT_EQ(got_g.sharding(), "NamedSharding(mesh=Mesh('data': 4), spec=PartitionSpec())");
    expect_near(got_g.to_host(), want_g.to_host(), 1e-5);
  });
}

// 3 processes x 1 device, split over "model": each process holds a third, and a value split
// over all three is gathered for everyone.
TEST(MultiProcess, ThreeProcessesOneDeviceEach) {
  run_processes(3, 1, [](int process) {
    const Mesh mesh = make_mesh({3}, {"model"});
    const Array x = iota({4, 6});
    auto f = jit([](const Array& a) { return np::exp(a) * 2.0f; });
    const Array y = f(device_put(x, NamedSharding(mesh, P(std::nullopt, "model"))));
    const auto shards = addressable_shards(y);
    ASSERT_EQ(shards.size(), 1u);
    EXPECT_EQ(shards[0].device, process);
    EXPECT_EQ(shards[0].index[1], (std::pair<int64_t, int64_t>{2 * process, 2 * process + 2}));
    const Array want = f(x);
    expect_near(shards[0].data.to_host(), slice_of(want, shards[0]), 1e-6);
    expect_near(process_allgather(y).to_host(), want.to_host(), 1e-6);
  });
}

// A barrier across the processes: the same name passes, different names are an error in each
// process, naming the other.
TEST(MultiProcess, SyncGlobalDevices) {
  run_processes(2, 1, [](int process) {
    sync_global_devices("start");
    try {
      sync_global_devices(process == 0 ? "save" : "evaluate");
      ADD_FAILURE() << "processes at barriers of different names went on";
    } catch (const Error& e) {
      const std::string want =
          "process(es) " + std::to_string(1 - process) + " reached a barrier of another name";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    sync_global_devices("end");
  });
}

// 2 processes x 3 devices: devices() lists all six in every process, each with the process that
// runs it (as collectives route them), and local_devices() this process's three.
TEST(MultiProcess, DevicesSpanTheProcesses) {
  run_processes(2, 3, [](int process) {
    const std::vector<Device> all = devices("cpu");
    ASSERT_EQ(all.size(), 6u);
    for (int id = 0; id < 6; ++id) {
      EXPECT_EQ(all[id].id, id);
      EXPECT_EQ(all[id].process_index, distributed::process_of_device(id));
      EXPECT_EQ(all[id].process_index, id / 3);
      EXPECT_EQ(all[id].local_hardware_id, id % 3);
    }
    const std::vector<Device> mine = local_devices("cpu");
    ASSERT_EQ(mine.size(), 3u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(mine[i], all[3 * process + i]);
    EXPECT_EQ(device_count("cpu"), 6);
    EXPECT_EQ(local_device_count("cpu"), 3);
    // The mesh make_mesh builds is over the same global ids.
    EXPECT_EQ(make_mesh({6}, {"data"}).devices(), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  });
}
