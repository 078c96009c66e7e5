// Replays what the fuzzers found (tests/fixtures/fuzz/<target>/) through the same entries the
// fuzzers call (fuzz/targets.cpp), without libFuzzer: each must now be a clean cujax::Error or
// an accepted input, not a crash, another exception or a broken invariant (which aborts). The
// committed seed corpora (fuzz/corpus/<target>/) must still be accepted outright, so the seeds
// keep reaching past the readers' first checks as the formats change.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "targets.h"

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

const fs::path kSource = CUJAX_SOURCE_DIR;

}  // namespace

TEST(FuzzRegression, FoundInputsAreCleanErrors) {
  size_t replayed = 0;
  for (const auto& t : cujax::fuzz::targets()) {
    for (const fs::path& input : files_in(kSource / "tests/fixtures/fuzz" / t.name)) {
      SCOPED_TRACE(input.string());
      EXPECT_NO_THROW(cujax::fuzz::run_one(t, read_file(input)));
      ++replayed;
    }
  }
  EXPECT_GT(replayed, 0u) << "no inputs under tests/fixtures/fuzz";
}

TEST(FuzzRegression, SeedCorporaAreAccepted) {
  for (const auto& t : cujax::fuzz::targets()) {
    const std::vector<fs::path> seeds = files_in(kSource / "fuzz/corpus" / t.name);
    EXPECT_FALSE(seeds.empty()) << "fuzz/corpus/" << t.name << " has no seeds";
    for (const fs::path& seed : seeds) {
      SCOPED_TRACE(seed.string());
      cujax::fuzz::prepare(t);
      EXPECT_NO_THROW(t.one(read_file(seed)));
    }
  }
}

// The checkpoint formats' seeds as the targets write them today (cujax's own writers, and the
// interop fixtures when ../shared is present) are accepted too.
TEST(FuzzRegression, CheckpointSeedsWrittenNowAreAccepted) {
  const fs::path dir =
      fs::temp_directory_path() / ("cujax_fuzz_seeds_" + std::to_string(::getpid()));
  for (const char* name : {"checkpoint", "ocdbt", "zarr3", "msgpack", "safetensors"}) {
    const auto& t = cujax::fuzz::target(name);
    cujax::fuzz::prepare(t);
    fs::remove_all(dir);
    fs::create_directories(dir);
    t.seeds(dir.string());
    const std::vector<fs::path> seeds = files_in(dir);
    EXPECT_FALSE(seeds.empty()) << name;
    for (const fs::path& seed : seeds) {
      SCOPED_TRACE(seed.string());
      EXPECT_NO_THROW(t.one(read_file(seed)));
    }
  }
  fs::remove_all(dir);
}
