#include "backends/cuda/driver/library_search.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>

namespace cujax::cuda {

std::optional<std::string> setting_folder(const char* setting) {
  const char* v = setting ? std::getenv(setting) : nullptr;
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::vector<std::string> toolkit_library_dirs() {
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home)
    dirs.push_back(std::string(home) + "/lib64");
  if (dirs.empty() || dirs.front() != "/usr/local/cuda/lib64")
    dirs.push_back("/usr/local/cuda/lib64");
  return dirs;
}

LibrarySearch library_search(const std::string& soname, const char* setting,
                             const std::optional<std::string>& folder,
                             const std::vector<std::string>& dirs) {
  LibrarySearch s;
  auto add = [&](std::string path, const std::string& place) {
    s.candidates.push_back(std::move(path));
    s.places += (s.places.empty() ? "" : ", ") + place;
  };
  if (folder) add(*folder + "/" + soname, std::string(setting) + "=" + *folder);
  add(soname, "the loader's path");
  for (const auto& dir : dirs) add(dir + "/" + soname, dir);
  return s;
}

std::string loaded_path(void* handle) {
  link_map* map = nullptr;
  if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return "";
  return map->l_name;
}

}  // namespace cujax::cuda
