#include "backends/cuda/library.h"

#include <dlfcn.h>

#include "backends/cuda/driver/driver.h"
#include "backends/cuda/driver/library_search.h"

namespace cujax::cuda {

Library::Library(std::string soname, const std::string& needed_for, const std::string& fix,
                 const LibraryOptions& options)
    : soname_(std::move(soname)) {
  const LibrarySearch search = library_search(
      soname_, options.setting, setting_folder(options.setting), toolkit_library_dirs());
  searched_ = search.places;
  std::string errors;
  for (const std::string& path : search.candidates) {
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos)
      for (const std::string& c : options.companions)
        dlopen((path.substr(0, slash + 1) + c).c_str(), RTLD_NOW | RTLD_GLOBAL);
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_) break;
    const char* why = dlerror();
    errors += "; " + path + ": " + (why ? why : "not found");
  }
  if (!handle_)
    throw CudaError("cannot load " + soname_ + " (" + needed_for + "), searched " + searched_ +
                    errors + "; " + fix);
  path_ = loaded_path(handle_);
  if (path_.empty()) path_ = soname_;
}

void* Library::symbol(const char* name) {
  void* p = dlsym(handle_, name);
  if (!p) missing_ += std::string(missing_.empty() ? "" : ", ") + name;
  return p;
}

void Library::check_resolved() const {
  if (!missing_.empty()) throw CudaError(path_ + " lacks " + missing_);
}

}  // namespace cujax::cuda
