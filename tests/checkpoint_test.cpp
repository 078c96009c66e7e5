// Orbax checkpoints: round trips of every dtype, the files Orbax reads (field by field),
// multi-chunk arrays built here with zstd, mismatch and corruption errors, atomicity under a
// failing write and under SIGKILL, and CheckpointManager retention and asynchronous saves.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cujax/checkpoint.h"
#include "cujax/core/json.h"
#include "cujax/numpy.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
using checkpoint::CheckpointManager;
using checkpoint::CheckpointManagerOptions;
using checkpoint::StandardCheckpointer;

fs::path fresh_dir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("cujax_ckpt_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

// Deterministic bytes for a tensor of `dtype` (bools as 0/1).
HostTensor pattern(DType dtype, Shape shape, uint32_t seed) {
  HostTensor t(dtype, std::move(shape));
  auto* b = static_cast<uint8_t*>(t.data());
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < t.nbytes(); ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = static_cast<uint8_t>(x >> 24);
  }
  if (dtype == DType::Bool)
    for (size_t i = 0; i < t.nbytes(); ++i) b[i] &= 1;
  return t;
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

std::vector<fs::path> tmp_folders(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".orbax-checkpoint-tmp") != std::string::npos)
      out.push_back(e.path());
  return out;
}

std::string zstd_frame(const void* data, size_t n) {
  std::string out(ZSTD_compressBound(n), '\0');
  const size_t m = ZSTD_compress(out.data(), out.size(), data, n, 3);
  out.resize(m);
  return out;
}

TEST(Checkpoint, RoundTripsEveryDtype) {
  const fs::path dir = fresh_dir("dtypes");
  State state;
  std::vector<HostTensor> values;
  uint32_t seed = 1;
  for (DType t : kAllDTypes) {
    values.push_back(pattern(t, {3, 4}, seed++));
    state.set("m." + std::string(numpy_name(t)), array(values.back()));
  }
  values.push_back(pattern(DType::F32, {}, seed++));  // rank 0
  state.set("scalar", array(values.back()));
  values.push_back(pattern(DType::BF16, {2, 0, 3}, seed++));  // no elements
  state.set("empty", array(values.back()));
  values.push_back(pattern(DType::F16, {2, 3, 4, 5}, seed++));
  state.set("layers.0.attn.query.kernel", array(values.back()));

  for (const bool ocdbt : {true, false}) {  // Orbax's default layout, then use_ocdbt=False
    const StandardCheckpointer ckpt(checkpoint::StandardCheckpointerOptions{.use_ocdbt = ocdbt});
    const std::string path = (dir / (ocdbt ? "ocdbt" : "zarr")).string();
    ckpt.save(path, state);
    EXPECT_EQ(fs::exists(fs::path(path) / "manifest.ocdbt"), ocdbt);
    const State restored = ckpt.restore(path, state);
    ASSERT_EQ(restored.size(), state.size());
    size_t i = 0;
    for (const auto& [p, a] : restored) {
      EXPECT_EQ(p, (state.begin() + static_cast<std::ptrdiff_t>(i))->first);
      EXPECT_TRUE(same_bytes(a.to_host(), values[i])) << p << (ocdbt ? " (ocdbt)" : " (zarr)");
      ++i;
    }
  }
  EXPECT_TRUE(tmp_folders(dir).empty());
}

// Orbax's use_ocdbt=False layout (the default one: checkpoint_ocdbt_test's OcdbtWriter.*).
StandardCheckpointer zarr_checkpointer() {
  return StandardCheckpointer(checkpoint::StandardCheckpointerOptions{.use_ocdbt = false});
}

TEST(Checkpoint, WritesOrbaxZarrLayout) {
  const fs::path dir = fresh_dir("layout") / "ckpt";
  State state;
  state.set("blocks.0.attn.query.kernel", array(pattern(DType::F32, {2, 3}, 7)));
  state.set("step", array(pattern(DType::I32, {}, 8)));
  state.set("emb", array(pattern(DType::BF16, {4}, 9)));
  zarr_checkpointer().save(dir.string(), state);

  // .zarray as REFERENCE.md gives it (Python's json.dumps spacing).
  EXPECT_EQ(read_text(dir / "blocks.0.attn.query.kernel.value" / ".zarray"),
            R"({"chunks": [2, 3], "compressor": {"id": "zstd", "level": 1}, )"
            R"("dimension_separator": ".", "dtype": "<f4", "fill_value": null, )"
            R"("filters": null, "order": "C", "shape": [2, 3], "zarr_format": 2})");
  const json::Value scalar = json::parse(read_text(dir / "step.value" / ".zarray"));
  EXPECT_TRUE(scalar.at("shape").as_array().empty());
  EXPECT_TRUE(scalar.at("chunks").as_array().empty());
  EXPECT_EQ(scalar.at("dtype").as_string(), "<i4");
  EXPECT_EQ(json::parse(read_text(dir / "emb.value" / ".zarray")).at("dtype").as_string(),
            "bfloat16");

  // Chunks are one zstd frame of the C-order little-endian bytes; rank 0 uses key "0".
  const std::string frame = read_text(dir / "blocks.0.attn.query.kernel.value" / "0.0");
  const HostTensor kernel = pattern(DType::F32, {2, 3}, 7);
  std::string raw(kernel.nbytes(), '\0');
  ASSERT_EQ(ZSTD_decompress(raw.data(), raw.size(), frame.data(), frame.size()), raw.size());
  EXPECT_EQ(std::memcmp(raw.data(), kernel.data(), raw.size()), 0);
  EXPECT_TRUE(fs::exists(dir / "step.value" / "0"));

  const json::Value meta = json::parse(read_text(dir / "_METADATA"));
  EXPECT_FALSE(meta.at("use_ocdbt").as_bool());
  EXPECT_FALSE(meta.at("use_zarr3").as_bool());
  EXPECT_TRUE(meta.at("store_array_data_equal_to_fill_value").as_bool());
  EXPECT_TRUE(meta.at("custom_metadata").is_null());
  const json::Value& tree = meta.at("tree_metadata");
  ASSERT_EQ(tree.as_object().size(), 3u);
  const json::Value& entry = tree.at("('blocks', '0', 'attn', 'query', 'kernel', 'value')");
  const std::vector<std::string> keys = {"blocks", "0", "attn", "query", "kernel", "value"};
  const auto& km = entry.at("key_metadata").as_array();
  ASSERT_EQ(km.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(km[i].at("key").as_string(), keys[i]);
    EXPECT_EQ(km[i].at("key_type").as_int(), 2);
  }
  EXPECT_EQ(entry.at("value_metadata").at("value_type").as_string(), "jax.Array");
  EXPECT_FALSE(entry.at("value_metadata").at("skip_deserialize").as_bool());
  EXPECT_NE(tree.get("('step', 'value')"), nullptr);

  // _sharding keys are base64url of the parameter names (values from Python's
  // base64.urlsafe_b64encode).
  const json::Value sharding = json::parse(read_text(dir / "_sharding"));
  const json::Value* s = sharding.get("YmxvY2tzLjAuYXR0bi5xdWVyeS5rZXJuZWwudmFsdWU=");
  ASSERT_NE(s, nullptr);
  const json::Value single = json::parse(s->as_string());
  EXPECT_EQ(single.at("sharding_type").as_string(), "SingleDeviceSharding");
  EXPECT_EQ(single.at("device_str").as_string(), "TFRT_CPU_0");
  EXPECT_NE(sharding.get("c3RlcC52YWx1ZQ=="), nullptr);

  const json::Value cm = json::parse(read_text(dir / "_CHECKPOINT_METADATA"));
  for (const char* k : {"item_handlers", "metrics", "performance_metrics", "init_timestamp_nsecs",
                        "commit_timestamp_nsecs", "custom_metadata"})
    EXPECT_NE(cm.get(k), nullptr) << k;
  EXPECT_LE(cm.at("init_timestamp_nsecs").as_int(), cm.at("commit_timestamp_nsecs").as_int());

  const auto md = StandardCheckpointer().metadata(dir.string());
  ASSERT_EQ(md.size(), 3u);
  EXPECT_EQ(md[0].first, "blocks.0.attn.query.kernel.value");
  EXPECT_EQ(md[0].second.shape, (Shape{2, 3}));
}

// An array as tensorstore writes it: chunks of `chunks`, edge chunks padded to full size with
// junk, under dimension separator `sep`.
void write_chunked(const fs::path& dir, const std::vector<float>& values, Shape shape, Shape chunks,
                   const std::string& sep, bool compress) {
  fs::create_directories(dir);
  const std::string comp = compress ? R"({"id": "zstd", "level": 3})" : "null";
  write_text(dir / ".zarray", R"({"chunks": [)" + std::to_string(chunks[0]) + ", " +
                                  std::to_string(chunks[1]) + R"(], "compressor": )" + comp +
                                  R"(, "dimension_separator": ")" + sep +
                                  R"(", "dtype": "<f4", "fill_value": null, "filters": null, )"
                                  R"("order": "C", "shape": [)" +
                                  std::to_string(shape[0]) + ", " + std::to_string(shape[1]) +
                                  R"(], "zarr_format": 2})");
  for (int64_t ci = 0; ci * chunks[0] < shape[0]; ++ci) {
    for (int64_t cj = 0; cj * chunks[1] < shape[1]; ++cj) {
      std::vector<float> chunk(static_cast<size_t>(chunks[0] * chunks[1]), -999.0f);
      for (int64_t i = 0; i < chunks[0]; ++i)
        for (int64_t j = 0; j < chunks[1]; ++j) {
          const int64_t r = ci * chunks[0] + i, c = cj * chunks[1] + j;
          if (r < shape[0] && c < shape[1])
            chunk[static_cast<size_t>(i * chunks[1] + j)] =
                values[static_cast<size_t>(r * shape[1] + c)];
        }
      const std::string bytes =
          compress ? zstd_frame(chunk.data(), chunk.size() * 4)
                   : std::string(reinterpret_cast<char*>(chunk.data()), chunk.size() * 4);
      fs::path file = dir;
      if (sep == "/") {
        fs::create_directories(dir / std::to_string(ci));
        file /= std::to_string(ci);
        file /= std::to_string(cj);
      } else {
        file /= std::to_string(ci) + "." + std::to_string(cj);
      }
      write_text(file, bytes);
    }
  }
}

TEST(Checkpoint, ReadsMultiChunkArraysAsOrbaxWritesThem) {
  const fs::path dir = fresh_dir("chunks");
  std::vector<float> w(5 * 7), b(4 * 6);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) w[static_cast<size_t>(i * 7 + j)] = static_cast<float>(i * 10 + j);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j)
      b[static_cast<size_t>(i * 6 + j)] = static_cast<float>(-i - j * 0.5);
  write_chunked(dir / "net.w.value", w, {5, 7}, {2, 3}, ".", true);  // NNX naming
  write_chunked(dir / "net.b", b, {4, 6}, {3, 4}, "/", false);       // plain pytree, raw
  // One entry with key_metadata, one with only its tuple key.
  write_text(dir / "_METADATA",
             R"J({"tree_metadata": {"('net', 'w', 'value')": {"key_metadata": [)J"
             R"J({"key": "net", "key_type": 2}, {"key": "w", "key_type": 2}, )J"
             R"J({"key": "value", "key_type": 2}], "value_metadata": {"value_type": "jax.Array", )J"
             R"J("skip_deserialize": false}}, "('net', 'b')": {"value_metadata": )J"
             R"J({"value_type": "np.ndarray", "skip_deserialize": false}}}, "use_ocdbt": false, )J"
             R"J("use_zarr3": false})J");
  State target;
  target.set("net.w", array(HostTensor(DType::F32, {5, 7})));
  target.set("net.b", array(HostTensor(DType::F32, {4, 6})));
  const State got = StandardCheckpointer().restore(dir.string(), target);
  EXPECT_EQ(got.at("net.w").to_vector<float>(), w);
  EXPECT_EQ(got.at("net.b").to_vector<float>(), b);
}

// A shape from untrusted metadata cannot make a reader allocate more than the machine has:
// load_any (no target to check against) refuses it naming the file.
TEST(Checkpoint, ArrayLargerThanMemoryIsRefusedBeforeAllocating) {
  const fs::path dir = fresh_dir("huge");
  write_chunked(dir / "w", std::vector<float>(4, 1.0f), {2, 2}, {2, 2}, ".", false);
  write_text(dir / "_METADATA",
             R"J({"tree_metadata": {"('w',)": {"value_metadata": {"value_type": "np.ndarray", )J"
             R"J("skip_deserialize": false}}}, "use_ocdbt": false, "use_zarr3": false})J");
  EXPECT_EQ(checkpoint::load_any(dir.string()).leaves.at(0).value.size(), 4);
  // 2^20 x 2^20 f32: 4 TiB, within the readers' 2^40-element bound.
  write_text(dir / "w" / ".zarray",
             R"({"chunks": [2, 2], "compressor": null, "dimension_separator": ".", )"
             R"("dtype": "<f4", "fill_value": 0.0, "filters": null, "order": "C", )"
             R"("shape": [1048576, 1048576], "zarr_format": 2})");
  try {
    checkpoint::load_any(dir.string());
    FAIL() << "a 4 TiB array was read";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find((dir / "w" / ".zarray").string()), std::string::npos) << what;
    EXPECT_NE(what.find("more than this machine's memory"), std::string::npos) << what;
  }
}

TEST(Checkpoint, RestoreListsEveryMismatch) {
  const fs::path dir = fresh_dir("mismatch") / "ckpt";
  State saved;
  saved.set("a", array(HostTensor(DType::F32, {2})));
  saved.set("b", array(HostTensor(DType::I32, {3})));
  saved.set("c", array(HostTensor(DType::F32, {4})));
  StandardCheckpointer().save(dir.string(), saved);
  State target;
  target.set("a", array(HostTensor(DType::F32, {3})));
  target.set("b", array(HostTensor(DType::F32, {3})));
  target.set("d", array(HostTensor(DType::F32, {1})));
  try {
    StandardCheckpointer().restore(dir.string(), target);
    FAIL() << "restore accepted a mismatched target";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("4 mismatches"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'a': shape [2] in the checkpoint, [3] in the target"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("'b': dtype int32 in the checkpoint, float32 in the target"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("missing parameter 'd'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("extra parameter 'c.value' in the checkpoint (float32[4])"),
              std::string::npos)
        << msg;
  }
}

TEST(Checkpoint, CorruptChunkNamesTheFile) {
  const fs::path dir = fresh_dir("corrupt") / "ckpt";
  State state;
  state.set("w", array(pattern(DType::F32, {64, 64}, 3)));
  zarr_checkpointer().save(dir.string(), state);
  const fs::path chunk = dir / "w.value" / "0.0";
  const std::string frame = read_text(chunk);

  write_text(chunk, frame.substr(0, frame.size() / 2));  // truncated
  try {
    StandardCheckpointer().restore(dir.string(), state);
    FAIL() << "truncated chunk accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(chunk.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("zstd error"), std::string::npos) << e.what();
  }

  const std::vector<float> small(100, 1.0f);  // a valid frame of the wrong size
  write_text(chunk, zstd_frame(small.data(), small.size() * 4));
  try {
    StandardCheckpointer().restore(dir.string(), state);
    FAIL() << "short chunk accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(chunk.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("decompressed to 400 bytes, expected 16384"),
              std::string::npos)
        << e.what();
  }

  fs::remove(chunk);
  EXPECT_THROW(StandardCheckpointer().restore(dir.string(), state), Error);
  fs::remove(dir / "_METADATA");
  try {
    StandardCheckpointer().restore(dir.string(), state);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no _METADATA"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, SaveRefusesToOverwriteAndReplacesAtomicallyWithForce) {
  const fs::path dir = fresh_dir("force") / "ckpt";
  State v1, v2;
  v1.set("w", array(pattern(DType::F32, {8}, 1)));
  v2.set("w", array(pattern(DType::F32, {8}, 2)));
  StandardCheckpointer().save(dir.string(), v1);
  EXPECT_THROW(StandardCheckpointer().save(dir.string(), v2), Error);
  EXPECT_TRUE(same_bytes(StandardCheckpointer().restore(dir.string(), v1).at("w").to_host(),
                         v1.at("w").to_host()));
  StandardCheckpointer().save(dir.string(), v2, /*force=*/true);
  EXPECT_TRUE(same_bytes(StandardCheckpointer().restore(dir.string(), v1).at("w").to_host(),
                         v2.at("w").to_host()));
  EXPECT_TRUE(tmp_folders(dir.parent_path()).empty());
}

TEST(Checkpoint, FailedSaveLeavesPreviousCheckpointIntact) {
  const fs::path root = fresh_dir("failed");
  const fs::path path = root / "ckpt";
  State v1;
  v1.set("w", array(pattern(DType::F32, {256}, 1)));
  StandardCheckpointer().save(path.string(), v1);

  // A bad State path fails before any byte is written.
  State bad;
  bad.set("ok", array(pattern(DType::F32, {4}, 2)));
  bad.set("a/../../x", array(pattern(DType::F32, {4}, 3)));
  EXPECT_THROW(StandardCheckpointer().save(path.string(), bad, true), Error);

  // A write that fails midway (the per-file size limit is hit by the second, larger parameter)
  // in a child process: the disk-full case, which also stops root.
  checkpoint::HostState big;
  for (int i = 0; i < 4; ++i)
    big.entries.push_back({"p" + std::to_string(i),
                           pattern(DType::F32, {i == 0 ? 1024 : 256 * 1024}, 10 + i), "cpu:0"});
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{512 * 1024, 512 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    try {
      StandardCheckpointer().save(path.string(), big, /*force=*/true);
    } catch (const Error& e) {
      ::_exit(std::string(e.what()).find("cannot write") != std::string::npos ? 0 : 3);
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's save did not fail with a write error";

  EXPECT_TRUE(same_bytes(StandardCheckpointer().restore(path.string(), v1).at("w").to_host(),
                         v1.at("w").to_host()));
  EXPECT_TRUE(tmp_folders(root).empty());  // the failed save removed its folder
}

TEST(Checkpoint, ManagerStepLayoutAndMetrics) {
  const fs::path dir = fresh_dir("manager_layout");
  State s;
  s.set("w", array(pattern(DType::F32, {3}, 1)));
  CheckpointManager mgr(dir.string());
  EXPECT_FALSE(mgr.latest_step().has_value());
  EXPECT_TRUE(mgr.save(10, s, {{"loss", 0.25}}));
  EXPECT_TRUE(fs::exists(dir / "10" / "default" / "_METADATA"));
  EXPECT_TRUE(fs::exists(dir / "10" / "default" / "manifest.ocdbt"));
  EXPECT_TRUE(fs::exists(dir / "10" / "default" / "ocdbt.process_0" / "manifest.ocdbt"));
  const json::Value cm = json::parse(read_text(dir / "10" / "_CHECKPOINT_METADATA"));
  EXPECT_EQ(cm.at("item_handlers").at("default").as_string(),
            "orbax.checkpoint._src.handlers.standard_checkpoint_handler.StandardCheckpointHandler");
  EXPECT_EQ(cm.at("metrics").at("loss").as_double(), 0.25);
  EXPECT_EQ(mgr.metrics(10).at("loss"), 0.25);
  EXPECT_EQ(mgr.latest_step(), 10);
  EXPECT_THROW(mgr.save(10, s), Error);  // steps are written once
  EXPECT_TRUE(same_bytes(mgr.restore(10, s).at("w").to_host(), s.at("w").to_host()));
  EXPECT_THROW(mgr.restore(11, s), Error);
}

TEST(Checkpoint, ManagerKeepsLastNAndBest) {
  const fs::path dir = fresh_dir("manager_keep");
  CheckpointManagerOptions opts;
  opts.max_to_keep = 2;
  opts.best_fn = [](const std::map<std::string, double>& m) { return m.at("loss"); };
  opts.best_mode = "min";
  opts.keep_best = 1;
  CheckpointManager mgr(dir.string(), opts);
  const double losses[] = {0.5, 0.1, 0.4, 0.3, 0.6};
  for (int step = 1; step <= 5; ++step) {
    State s;
    s.set("w", array(pattern(DType::F32, {4}, static_cast<uint32_t>(step))));
    mgr.save(step, s, {{"loss", losses[step - 1]}});
  }
  EXPECT_EQ(mgr.all_steps(), (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(mgr.best_step(), 2);
  State target;
  target.set("w", array(HostTensor(DType::F32, {4})));
  EXPECT_TRUE(same_bytes(mgr.restore(2, target).at("w").to_host(), pattern(DType::F32, {4}, 2)));

  CheckpointManagerOptions plain;
  plain.max_to_keep = 3;
  plain.save_interval_steps = 2;
  CheckpointManager mgr2((dir / "plain").string(), plain);
  int saved = 0;
  for (int step = 0; step < 10; ++step) saved += mgr2.save(step, target) ? 1 : 0;
  EXPECT_EQ(saved, 5);
  EXPECT_EQ(mgr2.all_steps(), (std::vector<int64_t>{4, 6, 8}));
}

TEST(Checkpoint, ManagerDeletesAStepAndSavesItAgain) {
  const fs::path dir = fresh_dir("manager_delete");
  CheckpointManagerOptions opts;
  opts.enable_async_checkpointing = true;
  CheckpointManager mgr(dir.string(), opts);
  State a, b;
  a.set("w", array(pattern(DType::F32, {4}, 1)));
  b.set("w", array(pattern(DType::F32, {4}, 2)));
  mgr.save(1, a);
  mgr.save(2, a);
  mgr.delete_step(2);  // waits for the pending saves first
  EXPECT_EQ(mgr.all_steps(), (std::vector<int64_t>{1}));
  EXPECT_TRUE(tmp_folders(dir).empty());
  try {
    mgr.delete_step(3);
    ADD_FAILURE() << "deleting a missing step did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no step 3 to delete in " + dir.string()),
              std::string::npos)
        << e.what();
  }
  mgr.save(2, b);  // the step can be saved again, with other values
  mgr.wait_until_finished();
  EXPECT_TRUE(same_bytes(mgr.restore(2, a).at("w").to_host(), pattern(DType::F32, {4}, 2)));
}

// A run saved in the zarr v2 layout goes on in OCDBT (cujax train --resume reads either).
TEST(Checkpoint, ManagerRestoresStepsOfEitherLayout) {
  const fs::path dir = fresh_dir("manager_layouts");
  State s1, s2;
  s1.set("w", array(pattern(DType::F32, {300}, 1)));
  s2.set("w", array(pattern(DType::F32, {300}, 2)));
  CheckpointManagerOptions zarr;
  zarr.use_ocdbt = false;
  CheckpointManager(dir.string(), zarr).save(1, s1);
  EXPECT_TRUE(fs::exists(dir / "1" / "default" / "w.value" / ".zarray"));
  CheckpointManager mgr(dir.string());
  mgr.save(2, s2);
  EXPECT_TRUE(fs::exists(dir / "2" / "default" / "manifest.ocdbt"));
  EXPECT_TRUE(same_bytes(mgr.restore(1, s1).at("w").to_host(), s1.at("w").to_host()));
  EXPECT_TRUE(same_bytes(mgr.restore(2, s1).at("w").to_host(), s2.at("w").to_host()));
}

TEST(Checkpoint, AsyncSaveThenRestore) {
  const fs::path dir = fresh_dir("async");
  CheckpointManagerOptions opts;
  opts.enable_async_checkpointing = true;
  opts.max_to_keep = 2;
  std::vector<State> states;
  {
    CheckpointManager mgr(dir.string(), opts);
    for (int step = 0; step < 4; ++step) {
      State s;
      s.set("layers.0.w", array(pattern(DType::BF16, {64, 64}, 100 + step)));
      s.set("step", array(HostTensor::from_vector(std::vector<int32_t>{step}, {})));
      states.push_back(s);
      EXPECT_TRUE(mgr.save(step, s));
    }
    mgr.wait_until_finished();
    EXPECT_EQ(mgr.all_steps(), (std::vector<int64_t>{2, 3}));
    const State r = mgr.restore(3, states[3]);
    EXPECT_TRUE(same_bytes(r.at("layers.0.w").to_host(), states[3].at("layers.0.w").to_host()));
    EXPECT_EQ(r.at("step").item<int32_t>(), 3);
    EXPECT_TRUE(mgr.save(4, states[0]));  // the destructor waits for this one
  }
  CheckpointManager again(dir.string(), opts);
  EXPECT_EQ(again.latest_step(), 4);
  EXPECT_TRUE(same_bytes(again.restore(4, states[0]).at("layers.0.w").to_host(),
                         states[0].at("layers.0.w").to_host()));
}

TEST(Checkpoint, KilledSaveLeavesEarlierStepsRestorable) {
  const fs::path dir = fresh_dir("killed");
  State small;
  small.set("w", array(pattern(DType::F32, {16}, 1)));
  {
    CheckpointManager mgr(dir.string());
    mgr.save(1, small);
    mgr.save(2, small);
  }
  checkpoint::HostState big;
  for (int i = 0; i < 48; ++i)
    big.entries.push_back(
        {"p" + std::to_string(i), pattern(DType::F32, {512 * 1024}, 50 + i), "cpu:0"});
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      CheckpointManager mgr(dir.string());
      mgr.save(3, std::move(big));
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  // Kill the child once its temporary step folder holds a parameter.
  bool seen = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    for (const auto& t : tmp_folders(dir)) {
      std::error_code ec;
      if (fs::exists(t / "default" / "ocdbt.process_0" / "d", ec)) seen = true;
    }
    if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(seen) << "the child's save never started";
  ASSERT_TRUE(WIFSIGNALED(status)) << "the save finished before the kill";

  EXPECT_FALSE(tmp_folders(dir).empty());
  CheckpointManager mgr(dir.string());  // resumes: removes what the killed save left
  EXPECT_TRUE(tmp_folders(dir).empty());
  EXPECT_EQ(mgr.all_steps(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(mgr.latest_step(), 2);
  EXPECT_TRUE(same_bytes(mgr.restore(2, small).at("w").to_host(), small.at("w").to_host()));
  mgr.save(3, small);
  EXPECT_EQ(mgr.latest_step(), 3);
}

}  // namespace
// A checkpoint written by real Orbax (tools/jax_bridge/interop_check.py on the GPU machine, in
// $OUT/gpu-check/fixtures, committed to tests/fixtures/orbax-<layout>): a tree whose values the
// test recomputes. "zarr" is use_ocdbt=False, "ocdbt" Orbax's default layout.
void restore_orbax_fixture(const std::string& layout) {
  const fs::path path = fs::path(CUJAX_SOURCE_DIR) / "tests" / "fixtures" / ("orbax-" + layout);
  if (!fs::is_directory(path))
    GTEST_SKIP() << "no " << path << ": tools/jax_bridge/interop_check.py writes it with Orbax "
                 << "on a machine with JAX (scripts/gpu-check.sh), to commit";
  State target;
  target.set("dense.kernel", numpy::zeros({3, 4}, DType::F32));
  target.set("dense.bias", numpy::zeros({4}, DType::F32));
  target.set("embed", numpy::zeros({2, 3}, DType::BF16));
  target.set("count", numpy::zeros({}, DType::I32));
  const State got = StandardCheckpointer().restore(path.string(), target);
  std::vector<float> kernel(12), bias(4), embed(6);
  for (int i = 0; i < 12; ++i) kernel[i] = i / 8.0f;
  for (int i = 0; i < 4; ++i) bias[i] = i - 2.0f;
  for (int i = 0; i < 6; ++i) embed[i] = i / 4.0f;  // exact in bfloat16
  EXPECT_EQ(got.at("dense.kernel").to_vector<float>(), kernel);
  EXPECT_EQ(got.at("dense.bias").to_vector<float>(), bias);
  EXPECT_EQ(numpy::astype(got.at("embed"), DType::F32).to_vector<float>(), embed);
  EXPECT_EQ(got.at("count").item<int32_t>(), 7);
}

TEST(OrbaxFixture, RestoresZarrLayout) {
  restore_orbax_fixture("zarr");
}

TEST(OrbaxFixture, RestoresOcdbtLayout) {
  restore_orbax_fixture("ocdbt");
}

}  // namespace cujax
