// CUDA's optional libraries (cuBLASLt, NCCL) loaded with dlopen on first use, so a CUDA build
// starts where they are missing and says what needs them. A library stays loaded for the rest
// of the process.
#pragma once

#include <string>
#include <type_traits>

namespace cujax::cuda {

class Library {
 public:
  // Opens `soname` from the loader's path, then the toolkit's lib64. Throws CudaError naming
  // the library, `needed_for` and `fix` when neither has it.
  Library(std::string soname, const std::string& needed_for, const std::string& fix);
  // Resolves `name` into `fn`; a missing one is remembered for check_resolved().
  template <class F>
  void resolve(F& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<F>>(symbol(name));
  }
  // Throws CudaError listing the entry points resolve() did not find.
  void check_resolved() const;

 private:
  void* symbol(const char* name);
  std::string soname_;
  void* handle_ = nullptr;
  std::string missing_;
};

}  // namespace cujax::cuda
