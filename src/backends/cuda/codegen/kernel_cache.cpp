#include "backends/cuda/codegen/kernel_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "backends/cuda/codegen/nvrtc.h"
#include "cujax/core/error.h"
#include "cujax/core/sha256.h"
#include "cujax/metrics_log.h"

namespace cujax::cuda::codegen {

namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string default_cache_directory() {
  if (const char* d = std::getenv("CUJAX_CACHE_DIR"); d && *d)
    return (fs::path(d) / "kernels").string();
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return (fs::path(d) / "cujax" / "kernels").string();
  if (const char* d = std::getenv("HOME"); d && *d)
    return (fs::path(d) / ".cache" / "cujax" / "kernels").string();
  return "";
}

KernelCache::KernelCache() : dir_(default_cache_directory()) {}

KernelCache& KernelCache::process() {
  static KernelCache cache;
  return cache;
}

void KernelCache::set_directory(std::string dir) {
  std::lock_guard<std::mutex> lock(mu_);
  dir_ = std::move(dir);
}

std::string KernelCache::directory() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dir_;
}

void KernelCache::clear_memory() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
}

CacheStats KernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::shared_ptr<const std::string> KernelCache::cubin(const std::string& source,
                                                      const std::string& arch) {
  const std::string key =
      sha256_hex(arch + '\n' + nvrtc_version() + '\n' + build_digest() + '\n' + source);
  std::promise<std::shared_ptr<const std::string>> promise;
  std::shared_future<std::shared_ptr<const std::string>> known;
  std::string dir;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      ++stats_.memory_hits;
      known = it->second;
    } else {
      entries_[key] = promise.get_future().share();
      dir = dir_;
    }
  }
  if (known.valid()) return known.get();  // waits while another thread compiles it
  try {
    const fs::path file = dir.empty() ? fs::path() : fs::path(dir) / (key + ".cubin");
    std::string image = dir.empty() ? "" : read_file(file);
    const bool from_disk = !image.empty();
    if (!from_disk) {
      image = compile_cubin(source, arch);
      if (!dir.empty()) {
        std::error_code ec;
        fs::create_directories(dir, ec);
        try {
          metrics_log::write_file_atomic(file.string(), image);
        } catch (const Error& e) {
          static std::once_flag once;
          std::call_once(
              once, [&] { std::cerr << "cujax: kernel cache not written (" << e.what() << ")\n"; });
        }
      }
    }
    auto result = std::make_shared<const std::string>(std::move(image));
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++(from_disk ? stats_.disk_hits : stats_.compiles);
    }
    promise.set_value(result);
    return result;
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      entries_.erase(key);
    }
    promise.set_exception(std::current_exception());
    throw;
  }
}

}  // namespace cujax::cuda::codegen
