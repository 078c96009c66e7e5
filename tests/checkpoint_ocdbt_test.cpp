// Orbax's default checkpoint layout: TensorStore's OCDBT database holding zarr v2 or v3 arrays,
// read from the checkpoints Orbax itself wrote (../shared/interop/orbax, skipped when absent),
// their corrupted copies, and zarr v3 shards built here. The expected values come from the
// README's description of the tree ({"a": arange(8), "b": {"c": [1, 2, 3]}}), computed by loops.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zstd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "checkpoint/kvstore.h"
#include "checkpoint/ocdbt.h"
#include "checkpoint/zarr.h"
#include "cujax/checkpoint.h"
#include "cujax/core/json.h"

namespace cujax {
namespace {

namespace fs = std::filesystem;
using checkpoint::StandardCheckpointer;

fs::path orbax_dir() {
  const char* env = std::getenv("CUJAX_SHARED_DIR");
  const std::string shared = env && *env ? env : CUJAX_DEFAULT_SHARED_DIR;
  return fs::path(shared) / "interop" / "orbax";
}

#define REQUIRE_FIXTURES()            \
  if (!fs::is_directory(orbax_dir())) \
  GTEST_SKIP() << "no Orbax fixtures at " << orbax_dir() << " (set CUJAX_SHARED_DIR)"

// Checkpoint folders under `root`: those holding _METADATA, manifest.ocdbt or a state/ item.
std::vector<fs::path> checkpoints(const fs::path& root) {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path p = it->path();
    if (!it->is_directory()) continue;
    const std::string name = p.filename().string();
    if (name == "d" || name.rfind("ocdbt.process_", 0) == 0 || name == "array_metadatas" ||
        name == "state" || name == "metadata") {
      it.disable_recursion_pending();
      continue;
    }
    if (fs::exists(p / "_CHECKPOINT_METADATA") || fs::exists(p / "_METADATA") ||
        fs::exists(p / "manifest.ocdbt") || fs::exists(p / "state")) {
      out.push_back(p);
      it.disable_recursion_pending();
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, ShapeDtype>> readme_target() {
  return {{"a", ShapeDtype{{8}, DType::I32, false}}, {"b.c", ShapeDtype{{3}, DType::I32, false}}};
}

void expect_readme_values(const State& s, const fs::path& where) {
  ASSERT_EQ(s.size(), 2u) << where;
  const auto a = s.at("a").to_host().to_vector<int32_t>();
  const auto bc = s.at("b.c").to_host().to_vector<int32_t>();
  ASSERT_EQ(a.size(), 8u) << where;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(a[i], i) << where << " a[" << i << "]";
  ASSERT_EQ(bc.size(), 3u) << where;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(bc[i], i + 1) << where << " b.c[" << i << "]";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path copy_to_tmp(const fs::path& src, const std::string& name) {
  const fs::path dst =
      fs::temp_directory_path() / ("cujax_ocdbt_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  for (const auto& e : fs::recursive_directory_iterator(dst))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  fs::permissions(dst, fs::perms::owner_write, fs::perm_options::add);
  return dst;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Crc32c, KnownValues) {
  // The check value of CRC-32C (Castagnoli), and RFC 3720's 32 zero bytes.
  EXPECT_EQ(checkpoint::ocdbt::crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(checkpoint::ocdbt::crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(checkpoint::ocdbt::crc32c(std::string(32, '\xff')), 0x62A8AB43u);
}

TEST(OrbaxOcdbt, EveryRestorableFixtureRestoresToTheReadmeValues) {
  REQUIRE_FIXTURES();
  size_t restored = 0;
  for (const fs::path& dir : checkpoints(orbax_dir())) {
    if (dir.string().find("critical_metadata_alterations") != std::string::npos &&
        dir.string().find("non_critical") == std::string::npos)
      continue;
    SCOPED_TRACE(dir.string());
    StandardCheckpointer ckpt;
    State s;
    ASSERT_NO_THROW(s = ckpt.restore(dir.string(), readme_target()));
    expect_readme_values(s, dir);
    // Without a target: the stored names, shapes and dtypes.
    auto meta = ckpt.metadata(dir.string());
    std::sort(meta.begin(), meta.end(), [](auto& x, auto& y) { return x.first < y.first; });
    ASSERT_EQ(meta.size(), 2u);
    EXPECT_EQ(meta[0].first, "a");
    EXPECT_EQ(meta[0].second.shape, Shape{8});
    EXPECT_EQ(meta[1].first, "b.c");
    EXPECT_EQ(meta[1].second.dtype, DType::I32);
    ++restored;
  }
  EXPECT_GE(restored, 4u) << "v0 and v1 checkpoints with and without metadata";
}

TEST(OrbaxOcdbt, CriticalAlterationsFailNamingWhatIsMissing) {
  REQUIRE_FIXTURES();
  size_t checked = 0;
  for (const fs::path& dir : checkpoints(orbax_dir())) {
    const std::string parent = dir.parent_path().filename().string();
    if (parent != "critical_metadata_alterations") continue;
    // The variant's name says what was removed: missing_pytree_data_{dir,file}_<name>.
    const std::string variant = dir.filename().string();
    std::string removed;
    for (const char* p : {"missing_pytree_data_dir_", "missing_pytree_data_file_"})
      if (variant.rfind(p, 0) == 0) removed = variant.substr(std::strlen(p));
    ASSERT_FALSE(removed.empty()) << variant;
    ASSERT_FALSE(fs::exists(dir / removed)) << dir / removed;
    const std::string msg =
        error_of([&] { StandardCheckpointer().restore(dir.string(), readme_target()); });
    ASSERT_FALSE(msg.empty()) << dir << " restored although " << removed << " is missing";
    EXPECT_NE(msg.find((dir / removed).string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
    ++checked;
  }
  EXPECT_GE(checked, 2u);
}

TEST(OrbaxOcdbt, CheckpointManagerRestoresAStepInOcdbt) {
  REQUIRE_FIXTURES();
  const fs::path src = orbax_dir() /
                       "v0_checkpoints/direct_checkpoint/checkpoint_metadata_present/"
                       "pytree_checkpointable_has_metadata";
  if (!fs::is_directory(src)) GTEST_SKIP() << "no " << src;
  const fs::path run = copy_to_tmp(src, "manager_src");
  const fs::path root = run.string() + "_run";
  fs::remove_all(root);
  fs::create_directories(root / "7");
  fs::rename(run, root / "7" / "default");
  checkpoint::CheckpointManager mgr(root.string());
  ASSERT_EQ(mgr.latest_step(), std::optional<int64_t>(7));
  expect_readme_values(mgr.restore(7, readme_target()), root);
  fs::remove_all(root);
}

TEST(OrbaxOcdbt, VersionTreeListsEveryGenerationAndTheLatestIsRead) {
  REQUIRE_FIXTURES();
  size_t multi = 0;
  for (const auto& e : fs::recursive_directory_iterator(orbax_dir())) {
    if (e.path().filename() != "manifest.ocdbt") continue;
    const fs::path db_dir = e.path().parent_path();
    if (db_dir.string().find("critical_metadata_alterations") != std::string::npos &&
        db_dir.string().find("non_critical") == std::string::npos)
      continue;
    SCOPED_TRACE(db_dir.string());
    checkpoint::ocdbt::Database db(db_dir);
    const auto versions = db.versions();
    ASSERT_FALSE(versions.empty());
    for (size_t i = 1; i < versions.size(); ++i)
      EXPECT_LT(versions[i - 1].generation, versions[i].generation);
    EXPECT_EQ(versions.back().generation, db.latest().generation);
    EXPECT_EQ(db.keys().size(), db.latest().num_keys);
    // Each per-process database grows by one key per generation as Orbax writes its arrays:
    // the latest holds them all, an older one fewer.
    if (versions.size() > 1) {
      ++multi;
      EXPECT_LT(versions.front().num_keys, versions.back().num_keys);
    }
  }
  EXPECT_GT(multi, 0u) << "per-process databases hold several generations";
}

TEST(OrbaxOcdbt, CorruptedBytesAreReportedWithTheFileAndOffset) {
  REQUIRE_FIXTURES();
  const fs::path src = orbax_dir() /
                       "v0_checkpoints/direct_checkpoint/checkpoint_metadata_present/"
                       "pytree_checkpointable_has_metadata";
  if (!fs::is_directory(src)) GTEST_SKIP() << "no " << src;
  // Every byte of the manifest and of each data file, flipped in turn: an error naming the
  // file, never a crash or a wrong value.
  const fs::path tmp = copy_to_tmp(src, "corrupt");
  std::vector<fs::path> targets = {tmp / "manifest.ocdbt"};
  for (const auto& e : fs::directory_iterator(tmp / "d")) targets.push_back(e.path());
  size_t flips = 0;
  for (const fs::path& f : targets) {
    const std::string good = read_file(f);
    for (size_t i = 0; i < good.size(); ++i) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ 0x5a);
      std::ofstream(f, std::ios::binary | std::ios::trunc) << bad;
      const std::string msg =
          error_of([&] { StandardCheckpointer().restore(tmp.string(), readme_target()); });
      ASSERT_FALSE(msg.empty()) << "byte " << i << " of " << f << " flipped, yet it restored";
      EXPECT_NE(msg.find(f.string()), std::string::npos) << msg;
      ++flips;
    }
    // Truncated: every prefix length.
    for (size_t n = 0; n < good.size(); n += 7) {
      std::ofstream(f, std::ios::binary | std::ios::trunc) << good.substr(0, n);
      const std::string msg =
          error_of([&] { StandardCheckpointer().restore(tmp.string(), readme_target()); });
      ASSERT_FALSE(msg.empty()) << f << " truncated to " << n << " bytes, yet it restored";
    }
    std::ofstream(f, std::ios::binary | std::ios::trunc) << good;
  }
  EXPECT_GT(flips, 300u);
  expect_readme_values(StandardCheckpointer().restore(tmp.string(), readme_target()), tmp);
  const std::string m = read_file(tmp / "manifest.ocdbt");
  std::string bad = m;
  bad[m.size() - 1] ^= 1;
  std::ofstream(tmp / "manifest.ocdbt", std::ios::binary | std::ios::trunc) << bad;
  const std::string msg = error_of([&] { checkpoint::ocdbt::Database db(tmp); });
  EXPECT_NE(msg.find("CRC32C mismatch"), std::string::npos) << msg;
  fs::remove_all(tmp);
}

// A zarr v3 shard built here: 2x2 inner chunks of a [4, 6] int32 array with inner chunks
// [2, 3], stored out of order, one left empty (fill_value), index with a crc32c.
TEST(ZarrV3, ShardedChunkDecodesWithFillAndChecksum) {
  const Shape shard{4, 6}, inner{2, 3};
  json::Value codecs = json::parse(R"([{"name": "sharding_indexed", "configuration": {
      "chunk_shape": [2, 3],
      "codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                 {"name": "zstd", "configuration": {"level": 3, "checksum": false}}],
      "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                       {"name": "crc32c"}],
      "index_location": "end"}}])",
                                   "test");
  std::string body;
  std::vector<std::pair<uint64_t, uint64_t>> index(4, {UINT64_MAX, UINT64_MAX});
  for (int k : {3, 0, 1}) {  // chunk 2 (rows 2-3, cols 0-2) stays empty
    std::vector<int32_t> v(6);
    const int r0 = (k / 2) * 2, c0 = (k % 2) * 3;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) v[i * 3 + j] = (r0 + i) * 6 + (c0 + j);
    std::string frame(ZSTD_compressBound(24), '\0');
    frame.resize(ZSTD_compress(frame.data(), frame.size(), v.data(), 24, 3));
    index[k] = {body.size(), frame.size()};
    body += frame;
  }
  std::string idx(64, '\0');
  for (int k = 0; k < 4; ++k) {
    std::memcpy(&idx[16 * k], &index[k].first, 8);
    std::memcpy(&idx[16 * k + 8], &index[k].second, 8);
  }
  const uint32_t crc = checkpoint::ocdbt::crc32c(idx);
  idx.append(reinterpret_cast<const char*>(&crc), 4);
  const std::string shard_bytes = body + idx;
  const std::string out = checkpoint::zarr::decode_v3_chunk(shard_bytes, codecs, shard, DType::I32,
                                                            json::Value(-7), "shard");
  ASSERT_EQ(out.size(), 24u * 4);
  std::vector<int32_t> got(24);
  std::memcpy(got.data(), out.data(), out.size());
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 6; ++c)
      EXPECT_EQ(got[r * 6 + c], (r >= 2 && c < 3) ? -7 : r * 6 + c) << r << "," << c;

  // A damaged index fails its checksum; an offset past the shard is named.
  std::string bad = shard_bytes;
  bad[bad.size() - 10] ^= 1;
  EXPECT_NE(error_of([&] {
              checkpoint::zarr::decode_v3_chunk(bad, codecs, shard, DType::I32, json::Value(0),
                                                "s");
            }).find("crc32c checksum mismatch"),
            std::string::npos);
  std::string far = body;
  std::string idx2 = idx.substr(0, 64);
  const uint64_t big = 1 << 20;
  std::memcpy(&idx2[0], &big, 8);
  const uint32_t crc2 = checkpoint::ocdbt::crc32c(idx2);
  idx2.append(reinterpret_cast<const char*>(&crc2), 4);
  EXPECT_NE(error_of([&] {
              checkpoint::zarr::decode_v3_chunk(far + idx2, codecs, shard, DType::I32,
                                                json::Value(0), "s");
            }).find("runs past the shard"),
            std::string::npos);
}

// A CRC-32C computed bit by bit (the reader's is table-driven): an independent check.
uint32_t crc32c_bitwise(std::string_view s) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
  }
  return ~crc;
}

// The framing TensorStore's spec gives every object, checked without the reader: magic (BE),
// length (LE) = the object's size, version 0, compression 1, one whole zstd frame, CRC32C (LE).
void expect_framed(std::string_view obj, uint32_t magic, const std::string& what) {
  ASSERT_GE(obj.size(), 18u) << what;
  uint32_t m = 0;
  for (int i = 0; i < 4; ++i) m = (m << 8) | static_cast<uint8_t>(obj[i]);
  EXPECT_EQ(m, magic) << what;
  uint64_t len = 0;
  std::memcpy(&len, obj.data() + 4, 8);
  EXPECT_EQ(len, obj.size()) << what;
  uint32_t crc = 0;
  std::memcpy(&crc, obj.data() + obj.size() - 4, 4);
  EXPECT_EQ(crc, crc32c_bitwise(obj.substr(0, obj.size() - 4))) << what;
  EXPECT_EQ(obj[12], 0) << what << ": format version";
  EXPECT_EQ(obj[13], 1) << what << ": zstd";
  const std::string_view z = obj.substr(14, obj.size() - 18);
  EXPECT_EQ(ZSTD_findFrameCompressedSize(z.data(), z.size()), z.size()) << what << ": one frame";
  const unsigned long long n = ZSTD_getFrameContentSize(z.data(), z.size());
  ASSERT_NE(n, ZSTD_CONTENTSIZE_ERROR) << what;
  if (n != ZSTD_CONTENTSIZE_UNKNOWN) {
    std::string out(n, '\0');
    EXPECT_EQ(ZSTD_decompress(out.data(), out.size(), z.data(), z.size()), n) << what;
  }
}

TEST(OcdbtWriter, DefaultSaveIsOrbaxsLayoutAndRestoresBitForBit) {
  checkpoint::HostState st;
  auto fill = [](HostTensor t, uint32_t seed) {  // pseudo-random bytes: zstd cannot shrink them
    auto* p = static_cast<unsigned char*>(t.data());
    for (size_t i = 0; i < t.nbytes(); ++i) {
      seed = seed * 1103515245u + 12345u;
      p[i] = static_cast<unsigned char>(seed >> 16);
    }
    return t;
  };
  st.entries.push_back({"layers.0.kernel", fill(HostTensor(DType::F32, {40, 30}), 1), "cpu:0"});
  st.entries.push_back({"layers.0.bias", fill(HostTensor(DType::BF16, {30}), 2), "cpu:0"});
  st.entries.push_back({"step", fill(HostTensor(DType::I32, {}), 3), "cpu:0"});
  st.entries.push_back({"empty", HostTensor(DType::F32, {0, 3}), "cpu:0"});
  const fs::path dir =
      fs::temp_directory_path() / ("cujax_ocdbt_write_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  StandardCheckpointer().save(dir.string(), st);  // no options: Orbax's default layout
  // The files Orbax's StandardCheckpointer writes for one process (the fixtures' list).
  for (const char* f : {"manifest.ocdbt", "ocdbt.process_0/manifest.ocdbt", "_METADATA",
                        "_sharding", "_CHECKPOINT_METADATA", "array_metadatas/process_0"})
    EXPECT_TRUE(fs::is_regular_file(dir / f)) << f;
  EXPECT_FALSE(fs::exists(dir / "layers.0.kernel.value")) << "no zarr folders in OCDBT";
  const json::Value meta = json::parse(read_file(dir / "_METADATA"));
  EXPECT_TRUE(meta.at("use_ocdbt").as_bool());
  const json::Value am = json::parse(read_file(dir / "array_metadatas" / "process_0"));
  ASSERT_EQ(am.at("array_metadatas").as_array().size(), st.entries.size());
  const json::Value& first = am.at("array_metadatas").as_array()[0].at("array_metadata");
  EXPECT_EQ(first.at("param_name").as_string(), "layers.0.kernel.value");
  EXPECT_EQ(first.at("write_shape").as_array().size(), 2u);
  EXPECT_EQ(first.at("write_shape").as_array()[0].as_int(), 40);

  // The top-level database holds the process database's keys and values; the kernel's chunk
  // (4800 random bytes, past the 1024-byte inline limit) stays in ocdbt.process_0/d/, which the
  // top-level one refers to: its own data file holds only the B+tree.
  checkpoint::ocdbt::Database top(dir), process(dir / "ocdbt.process_0");
  ASSERT_EQ(top.keys(), process.keys());
  for (const auto& k : top.keys()) EXPECT_EQ(top.get(k), process.get(k)) << k;
  const auto& chunk = top.entries().at("layers.0.kernel.value/0.0");
  ASSERT_FALSE(chunk.is_inline);
  EXPECT_EQ(chunk.file.rfind("ocdbt.process_0/d/", 0), 0u) << chunk.file;
  EXPECT_LT(fs::file_size(dir / top.latest().root_file), 4800u);

  std::vector<std::pair<std::string, ShapeDtype>> target;
  for (const auto& e : st.entries)
    target.push_back({e.path, {e.value.shape(), e.value.dtype(), false}});
  const State back = StandardCheckpointer().restore(dir.string(), target);
  for (const auto& e : st.entries) {
    const HostTensor got = back.at(e.path).to_host();
    ASSERT_EQ(got.nbytes(), e.value.nbytes()) << e.path;
    EXPECT_EQ(std::memcmp(got.data(), e.value.data(), e.value.nbytes()), 0) << e.path;
  }
  // The framing of the manifest and of the root node, checked without the reader.
  expect_framed(read_file(dir / "manifest.ocdbt"), checkpoint::ocdbt::kManifestMagic, "manifest");
  checkpoint::ocdbt::Database db(dir);
  const auto& v = db.latest();
  EXPECT_EQ(v.generation, 1u);
  EXPECT_EQ(v.num_keys, db.keys().size());
  EXPECT_EQ(db.keys().size(), 7u) << "4 .zarray and 3 chunks (the empty array has none)";
  const std::string data = read_file(dir / v.root_file);
  ASSERT_LE(v.root_offset + v.root_length, data.size());
  expect_framed(std::string_view(data).substr(v.root_offset, v.root_length),
                checkpoint::ocdbt::kBtreeNodeMagic, "root node");
  // The kernel chunk (4800 random bytes) is past the 1024-byte inline limit: out of line.
  EXPECT_NE(db.describe("layers.0.kernel.value/0.0").find(" at byte "), std::string::npos);
  fs::remove_all(dir);
}

// An uncompressed object (compression 0) framed by hand, with the bitwise CRC.
std::string frame_uncompressed(uint32_t magic, const std::string& body) {
  std::string out;
  for (int i = 3; i >= 0; --i) out += static_cast<char>((magic >> (8 * i)) & 0xff);
  const uint64_t len = 4 + 8 + 2 + body.size() + 4;
  out.append(reinterpret_cast<const char*>(&len), 8);
  out += '\0';  // format version
  out += '\0';  // uncompressed
  out += body;
  const uint32_t crc = crc32c_bitwise(out);
  out.append(reinterpret_cast<const char*>(&crc), 4);
  return out;
}

TEST(OcdbtReader, NumberedManifestAndUncompressedObjects) {
  // A database written here, then rewritten by hand into the numbered-manifest form:
  // manifest.ocdbt holds the configuration only (manifest kind 1), manifest.<16 hex> the rest,
  // both uncompressed.
  std::map<std::string, std::string> values = {
      {"a/.zarray", "{}"}, {"a/0", std::string(3000, 'x')}, {"b/0", "small"}};
  const fs::path dir =
      fs::temp_directory_path() / ("cujax_ocdbt_numbered_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  checkpoint::ocdbt::write_database(dir, values);
  const std::string m = read_file(dir / "manifest.ocdbt");
  const std::string_view z = std::string_view(m).substr(14, m.size() - 18);
  std::string body(ZSTD_getFrameContentSize(z.data(), z.size()), '\0');
  ASSERT_EQ(ZSTD_decompress(body.data(), body.size(), z.data(), z.size()), body.size());
  // The configuration: uuid[16], kind, two varints, arity, compression (1), zstd level (4 bytes).
  size_t pos = 17;
  for (int v = 0; v < 2; ++v)
    while (static_cast<uint8_t>(body[pos++]) & 0x80) {
    }
  pos += 1;
  ASSERT_EQ(body[pos], 1) << "zstd configured";
  pos += 1 + 4;
  std::string config = body.substr(0, pos);
  config[16] = 1;  // numbered
  std::ofstream(dir / "manifest.ocdbt", std::ios::binary | std::ios::trunc)
      << frame_uncompressed(checkpoint::ocdbt::kManifestMagic, config);
  std::ofstream(dir / "manifest.0000000000000001", std::ios::binary)
      << frame_uncompressed(checkpoint::ocdbt::kManifestMagic, body);
  checkpoint::ocdbt::Database db(dir);
  EXPECT_TRUE(db.config().numbered_manifest);
  EXPECT_EQ(db.manifest_file().filename(), "manifest.0000000000000001");
  ASSERT_EQ(db.keys().size(), values.size());
  for (const auto& [k, v] : values) EXPECT_EQ(db.get(k), v) << k;
  // Without its numbered file the config-only manifest says what is missing.
  fs::remove(dir / "manifest.0000000000000001");
  std::string msg;
  try {
    checkpoint::ocdbt::Database again(dir);
  } catch (const std::exception& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("no manifest.<16 hex digits> file"), std::string::npos) << msg;
  fs::remove_all(dir);
}

TEST(OcdbtReader, InteriorNodesOverSeveralLeaves) {
  // 50 keys with long shared prefixes, 7 per leaf: an interior root over 8 leaves, each leaf's
  // common prefix held by the root (subtree_common_prefix_length), some values out of line.
  std::map<std::string, std::string> values;
  for (int i = 0; i < 50; ++i) {
    const std::string name =
        "params.layers_" + std::to_string(i % 10) + ".mlp.w" + std::to_string(i);
    values[name + "/.zarray"] = "{\"i\": " + std::to_string(i) + "}";
    if (i % 3 == 0) values[name + "/0.0"] = std::string(1500 + i, static_cast<char>('a' + i % 26));
  }
  const fs::path dir =
      fs::temp_directory_path() / ("cujax_ocdbt_interior_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  checkpoint::ocdbt::WriteOptions opts;
  opts.max_leaf_entries = 7;
  checkpoint::ocdbt::write_database(dir, values, opts);
  checkpoint::ocdbt::Database db(dir);
  EXPECT_EQ(db.latest().root_height, 1);
  EXPECT_EQ(db.latest().num_keys, values.size());
  const auto keys = db.keys();
  ASSERT_EQ(keys.size(), values.size());
  for (const auto& [k, v] : values) EXPECT_EQ(db.get(k), v) << k;
  const std::string data = read_file(dir / db.latest().root_file);
  expect_framed(std::string_view(data).substr(db.latest().root_offset, db.latest().root_length),
                checkpoint::ocdbt::kBtreeNodeMagic, "interior root");
  // The root node is checked: a flip in its magic or its CRC is an error naming the file.
  for (size_t at : {size_t(db.latest().root_offset + 2), data.size() - 2}) {
    std::string bad = data;
    bad[at] ^= 0x10;
    std::ofstream(dir / db.latest().root_file, std::ios::binary | std::ios::trunc) << bad;
    std::string msg;
    try {
      checkpoint::ocdbt::Database broken(dir);
    } catch (const std::exception& e) {
      msg = e.what();
    }
    EXPECT_NE(msg.find(db.latest().root_file), std::string::npos) << "byte " << at << ": " << msg;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cujax
