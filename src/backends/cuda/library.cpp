#include "backends/cuda/library.h"

#include <dlfcn.h>

#include "backends/cuda/driver/driver.h"

namespace cujax::cuda {

Library::Library(std::string soname, const std::string& needed_for, const std::string& fix)
    : soname_(std::move(soname)) {
  handle_ = dlopen(soname_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_)
    handle_ = dlopen(("/usr/local/cuda/lib64/" + soname_).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    throw CudaError("cannot load " + soname_ + " (" + needed_for +
                    "): " + std::string(why ? why : "not found") + "; " + fix);
  }
}

void* Library::symbol(const char* name) {
  void* p = dlsym(handle_, name);
  if (!p) missing_ += std::string(missing_.empty() ? "" : ", ") + name;
  return p;
}

void Library::check_resolved() const {
  if (!missing_.empty()) throw CudaError(soname_ + " lacks " + missing_);
}

}  // namespace cujax::cuda
