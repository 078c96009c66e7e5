// Run by checkpoint_multiprocess_test.sh as 2 processes (over TCP at a coordinator address,
// and under `mpirun -np 2`): StandardCheckpointer{all_processes} saves one state from both, as
// Orbax's multi-process save lays it out (ocdbt.process_0/ and ocdbt.process_1/, process 0's
// top-level database over them). Process 0 then checks the layout and that the checkpoint
// restores bit for bit. Exit status 0 when every check holds, 1 otherwise, 77 when the build has
// no MPI and no coordinator was given. Usage: checkpoint_multiprocess OUT_DIR [--coordinator
// HOST:PORT --num-processes N --process-id I]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "checkpoint/ocdbt.h"
#include "cujax/checkpoint.h"
#include "cujax/distributed.h"
#include "cujax/sharding.h"

using namespace cujax;
namespace fs = std::filesystem;

namespace {

int failures = 0;
void check(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    ++failures;
  }
}

// The same pseudo-random bytes in every process.
HostTensor pattern(DType dtype, Shape shape, uint32_t seed) {
  HostTensor t(dtype, std::move(shape));
  auto* b = static_cast<uint8_t*>(t.data());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    b[i] = static_cast<uint8_t>(seed >> 24);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: checkpoint_multiprocess OUT_DIR [--coordinator ...]\n");
    return 2;
  }
  const fs::path out = argv[1];
  distributed::InitializeOptions options;
  for (int i = 2; i + 1 < argc; i += 2) {
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
    const int me = distributed::process_index();
    checkpoint::HostState state;
    // Kernels past the 1024-byte inline limit, one per process (entry i goes to process
    // i mod 2): out of line in each process's data file; small values inline, a scalar.
    state.entries.push_back({"layers.0.kernel", pattern(DType::F32, {32, 16}, 1), "cpu:0"});
    state.entries.push_back({"layers.1.kernel", pattern(DType::BF16, {16, 64}, 3), "cpu:0"});
    state.entries.push_back({"layers.0.bias", pattern(DType::F32, {16}, 2), "cpu:0"});
    state.entries.push_back({"layers.1.bias", pattern(DType::BF16, {64}, 4), "cpu:0"});
    state.entries.push_back({"step", pattern(DType::I32, {}, 5), "cpu:0"});
    const fs::path path = out / "multi";
    const checkpoint::StandardCheckpointer ckpt({.all_processes = true});
    ckpt.save(path.string(), state);
    // A second save over it: replaced by exchange, as one process's force=true does.
    ckpt.save(path.string(), state, /*force=*/true);
    if (me == 0) {
      for (const char* f :
           {"manifest.ocdbt", "ocdbt.process_0/manifest.ocdbt", "ocdbt.process_1/manifest.ocdbt",
            "array_metadatas/process_0", "array_metadatas/process_1", "_METADATA", "_sharding",
            "_CHECKPOINT_METADATA"})
        check(fs::is_regular_file(path / f), std::string("no ") + f);
      checkpoint::ocdbt::Database top(path), p0(path / "ocdbt.process_0"),
          p1(path / "ocdbt.process_1");
      check(top.keys().size() == p0.keys().size() + p1.keys().size(),
            "the top-level keys are not those of the two process databases");
      for (const auto* db : {&p0, &p1})
        for (const auto& k : db->keys())
          check(top.get(k) == db->get(k), "key " + k + " differs from its process database");
      bool into[2] = {false, false};
      for (const auto& [k, v] : top.entries()) {
        if (v.is_inline) continue;
        if (v.file.rfind("ocdbt.process_0/d/", 0) == 0) into[0] = true;
        if (v.file.rfind("ocdbt.process_1/d/", 0) == 0) into[1] = true;
      }
      check(into[0] && into[1], "the top-level database does not refer into both processes' d/");
      std::vector<std::pair<std::string, ShapeDtype>> target;
      for (const auto& e : state.entries)
        target.push_back({e.path, {e.value.shape(), e.value.dtype(), false}});
      const State back = checkpoint::StandardCheckpointer().restore(path.string(), target);
      for (const auto& e : state.entries) {
        const HostTensor got = back.at(e.path).to_host();
        check(got.nbytes() == e.value.nbytes() &&
                  std::memcmp(got.data(), e.value.data(), got.nbytes()) == 0,
              e.path + " did not restore bit for bit");
      }
      size_t tmp = 0;
      for (const auto& e : fs::directory_iterator(out))
        tmp += e.path().filename().string().find(checkpoint::kTmpMarker) != std::string::npos;
      check(tmp == 0, "a temporary folder was left behind");
      std::printf("checkpoint_multiprocess: %zu keys over 2 process databases, %d failure(s)\n",
                  top.keys().size(), failures);
    }
    sync_global_devices("checkpoint_multiprocess: checked");
    distributed::shutdown();
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
