// Reading TensorStore's OCDBT key-value database, the store under Orbax's default checkpoint
// layout: manifest.ocdbt (single, or config-only with numbered manifest.<16 hex> files), the
// version tree, B+tree nodes and out-of-line values in data files (d/<hex>), each object framed
// by a magic number, its length, a format version, a compression method (none or zstd) and a
// CRC32C. Paths in data-file tables are relative to the database folder, so Orbax's top-level
// database that refers into ocdbt.process_N/d/ is read like any other. Every length and offset
// is checked against the file it points into; errors name the file and the byte offset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/kvstore.h"

namespace cujax::checkpoint::ocdbt {

inline constexpr uint32_t kManifestMagic = 0x0cdb3a2a;
inline constexpr uint32_t kVersionNodeMagic = 0x0cdb1234;
inline constexpr uint32_t kBtreeNodeMagic = 0x0cdb20de;

uint32_t crc32c(std::string_view bytes, uint32_t crc = 0);

struct Config {
  std::string uuid;  // 16 bytes
  bool numbered_manifest = false;
  uint64_t max_inline_value_bytes = 0;
  uint64_t max_decoded_node_bytes = 0;
  int version_tree_arity_log2 = 0;
  bool zstd = false;
  int32_t zstd_level = 0;
};

// One committed generation: its B+tree root and statistics.
struct Version {
  uint64_t generation = 0;
  int root_height = 0;
  std::string root_file;  // relative to the database folder; empty for an empty tree
  uint64_t root_offset = 0, root_length = 0;
  std::string root_base;  // the transitive path the root's own table is relative to
  uint64_t num_keys = 0, num_tree_bytes = 0, num_indirect_value_bytes = 0;
  uint64_t commit_time = 0;
};

class Database final : public KvStore {
 public:
  // Reads the manifest and the latest generation's B+tree (keys and value locations).
  explicit Database(std::filesystem::path dir);

  std::optional<std::string> get(const std::string& key) const override;
  std::vector<std::string> keys() const override;
  std::string describe(const std::string& key) const override;

  const Config& config() const { return config_; }
  const Version& latest() const { return latest_; }
  // Every generation the version tree holds (inline and in version nodes), ascending.
  std::vector<Version> versions() const;
  // The manifest file that was read (manifest.ocdbt or the newest manifest.<16 hex>).
  const std::filesystem::path& manifest_file() const { return manifest_file_; }

  // Where a value lives: inline in its leaf, or a range of a data file (relative to the
  // database folder). merge_databases copies these references, not the bytes.
  struct ValueRef {
    bool is_inline = true;
    std::string bytes;  // inline value
    std::string file;   // indirect value: data file, offset, length
    uint64_t offset = 0, length = 0;
  };
  const std::map<std::string, ValueRef>& entries() const { return entries_; }

 private:
  struct NodeRef {
    std::string file;
    uint64_t offset = 0, length = 0;
  };
  void read_manifest();
  void read_btree(const NodeRef& ref, const std::string& base, const std::string& prefix,
                  int height, size_t& budget);
  std::string read_range(const std::string& file, uint64_t offset, uint64_t length) const;

  std::filesystem::path dir_;
  std::filesystem::path manifest_file_;
  Config config_;
  Version latest_;
  std::vector<Version> inline_versions_;
  struct VersionNodeRef {
    NodeRef ref;
    std::string base;
    uint64_t generation = 0, num_generations = 0, commit_time = 0;
    int height = 0;
  };
  std::vector<VersionNodeRef> version_nodes_;
  std::map<std::string, ValueRef> entries_;
};

struct WriteOptions {  // Orbax's defaults
  uint64_t max_inline_value_bytes = 1024;
  uint64_t max_decoded_node_bytes = 100'000'000;
  int version_tree_arity_log2 = 4;
  int zstd_level = 0;
  // Keys per B+tree leaf; more keys than this make an interior root over several leaves.
  size_t max_leaf_entries = 4096;
};
// Writes a new database at `dir` holding `values` (one generation; values larger than the
// inline limit out of line in one data file), the manifest last, every file fsynced.
void write_database(const std::filesystem::path& dir,
                    const std::map<std::string, std::string>& values,
                    const WriteOptions& options = {});
// Orbax's top-level database over the per-process ones (`dir/<sub>` for each of `subdirs`,
// e.g. "ocdbt.process_0"): one generation holding every key of every process database, inline
// values copied and out-of-line ones referring to the process databases' data files, so no
// array bytes are copied. Throws Error naming a key that two process databases hold.
void merge_databases(const std::filesystem::path& dir, const std::vector<std::string>& subdirs,
                     const WriteOptions& options = {});

}  // namespace cujax::checkpoint::ocdbt
