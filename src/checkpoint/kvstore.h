// The key-value view of an Orbax item folder: the zarr readers take their `.zarray`,
// `zarr.json` and chunk keys from a plain folder or from an OCDBT database alike.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cujax::checkpoint {

class KvStore {
 public:
  virtual ~KvStore() = default;
  // The value under `key` ("a/.zarray", "b.c/0"), or nullopt when there is none; throws Error
  // naming the file (and offset) when the key exists but cannot be read.
  virtual std::optional<std::string> get(const std::string& key) const = 0;
  // Every key, ascending.
  virtual std::vector<std::string> keys() const = 0;
  // Where `key` lives, for messages: a file path, or "<db> key 'k'".
  virtual std::string describe(const std::string& key) const = 0;
};

// The files under a folder, keyed by their '/'-joined relative paths.
class DirStore final : public KvStore {
 public:
  explicit DirStore(std::filesystem::path root) : root_(std::move(root)) {}
  std::optional<std::string> get(const std::string& key) const override;
  std::vector<std::string> keys() const override;
  std::string describe(const std::string& key) const override;

 private:
  std::filesystem::path root_;
};

// An OCDBT database when `dir` holds manifest.ocdbt, else the folder's files.
std::unique_ptr<KvStore> open_store(const std::filesystem::path& dir);

}  // namespace cujax::checkpoint
