// CUDA's optional libraries (cuBLASLt, cuFFT, cuDNN, NCCL) loaded with dlopen on first use, so
// a CUDA build starts where they are missing and says what needs them. A library stays loaded
// for the rest of the process.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

namespace cujax::cuda {

struct LibraryOptions {
  // An environment setting naming the library's folder, tried first (CUJAX_CUDNN_DIR).
  const char* setting = nullptr;
  // Libraries it opens itself by soname (cuDNN's sub-libraries): loaded first from the folder
  // it is found in, so that they are the ones it gets.
  std::vector<std::string> companions;
};

class Library {
 public:
  // Opens `soname` from the places driver/library_search.h lists. Throws CudaError naming the
  // library, `needed_for`, every place searched with its loader error, and `fix` when none has
  // it.
  Library(std::string soname, const std::string& needed_for, const std::string& fix,
          const LibraryOptions& options = {});
  // Resolves `name` into `fn`; a missing one is remembered for check_resolved().
  template <class F>
  void resolve(F& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<F>>(symbol(name));
  }
  // Throws CudaError listing the entry points resolve() did not find.
  void check_resolved() const;
  // The file that loaded (or the soname when the loader does not say), and where it looked.
  const std::string& path() const { return path_; }
  const std::string& searched() const { return searched_; }

 private:
  void* symbol(const char* name);
  std::string soname_;
  void* handle_ = nullptr;
  std::string missing_;
  std::string path_;
  std::string searched_;
};

}  // namespace cujax::cuda
