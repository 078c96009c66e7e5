// Compiled fusion kernels, cached in memory for the process and on disk across processes, so
// that a second start of the same program compiles nothing. The key is the SHA-256 of the
// generated source, the architecture, the NVRTC version and build_digest() (the embedded headers
// and options). Files live in $CUJAX_CACHE_DIR/kernels, else $XDG_CACHE_HOME/cujax/kernels, else
// ~/.cache/cujax/kernels, one <key>.cubin each, written atomically (a temporary file renamed).
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace cujax::cuda::codegen {

struct CacheStats {
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t compiles = 0;  // NVRTC runs through this cache
};

class KernelCache {
 public:
  // The process's cache (first use reads the directory from the environment).
  static KernelCache& process();

  // The cubin of `source` for `arch`: from memory, else from disk, else compiled with NVRTC
  // (and then written to disk). Safe to call from several threads; one compile per key.
  std::shared_ptr<const std::string> cubin(const std::string& source, const std::string& arch);

  // "" disables the disk cache.
  void set_directory(std::string dir);
  std::string directory() const;
  // Forgets the in-memory cubins (tests: what a new process would see).
  void clear_memory();
  CacheStats stats() const;

 private:
  KernelCache();
  mutable std::mutex mu_;
  std::string dir_;
  std::map<std::string, std::shared_future<std::shared_ptr<const std::string>>> entries_;
  CacheStats stats_;
};

// The default directory: see the top of this file ("" when no home is known).
std::string default_cache_directory();

}  // namespace cujax::cuda::codegen
