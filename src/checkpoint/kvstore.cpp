#include "checkpoint/kvstore.h"

#include <algorithm>

#include "checkpoint/files.h"
#include "checkpoint/ocdbt.h"

namespace cujax::checkpoint {

namespace fs = std::filesystem;

std::optional<std::string> DirStore::get(const std::string& key) const {
  const fs::path p = root_ / key;
  if (!fs::is_regular_file(p)) return std::nullopt;
  return files::read(p);
}

std::vector<std::string> DirStore::keys() const {
  std::vector<std::string> out;
  if (!fs::is_directory(root_)) return out;
  for (const auto& e : fs::recursive_directory_iterator(root_))
    if (e.is_regular_file()) out.push_back(e.path().lexically_relative(root_).generic_string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string DirStore::describe(const std::string& key) const {
  return (root_ / key).string();
}

std::unique_ptr<KvStore> open_store(const fs::path& dir) {
  if (fs::exists(dir / "manifest.ocdbt")) return std::make_unique<ocdbt::Database>(dir);
  return std::make_unique<DirStore>(dir);
}

}  // namespace cujax::checkpoint
