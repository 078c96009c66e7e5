// Where cujax looks for a CUDA library, the same for `cujax doctor` and for the cuda backend's
// loaders: the folder a setting names (CUJAX_CUDNN_DIR for cuDNN, which pip installs outside
// the loader's path), the loader's own path (LD_LIBRARY_PATH, ld.so.cache, RUNPATH), then the
// toolkit's library folders.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace cujax::cuda {

inline constexpr const char* kCudnnDirSetting = "CUJAX_CUDNN_DIR";

// The folder an environment setting names (CUJAX_CUDNN_DIR); nullopt when unset or empty.
std::optional<std::string> setting_folder(const char* setting);
// $CUDA_HOME/lib64 (when set), then /usr/local/cuda/lib64.
std::vector<std::string> toolkit_library_dirs();

struct LibrarySearch {
  std::vector<std::string> candidates;  // paths (or the bare soname) for dlopen, in order
  std::string places;  // the same in words: "CUJAX_CUDNN_DIR=/x, the loader's path, /usr/..."
};
// The candidates for `soname`: `setting`'s folder first when `folder` holds a value, then the
// bare soname, then each of `dirs`.
LibrarySearch library_search(const std::string& soname, const char* setting,
                             const std::optional<std::string>& folder,
                             const std::vector<std::string>& dirs);

// The file a dlopen handle was loaded from, or empty when the loader does not say.
std::string loaded_path(void* handle);

}  // namespace cujax::cuda
