#include "checkpoint/files.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "cujax/checkpoint.h"
#include "cujax/core/error.h"

namespace cujax::checkpoint::files {

namespace {

[[noreturn]] void fail(const std::string& what, const fs::path& path) {
  throw Error("checkpoint: " + what + " " + path.string() + ": " + std::strerror(errno));
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

void write_synced(const fs::path& path, std::string_view bytes) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail("cannot create", path);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot write", path);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) fail("cannot fsync", path);
  if (::close(fd.release()) != 0) fail("cannot close", path);
}

void sync_dir(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) fail("cannot open folder", dir);
  if (::fsync(fd.get()) != 0) fail("cannot fsync folder", dir);
}

std::string read(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail("cannot open", path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("cannot read", path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

int64_t now_nanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

fs::path tmp_sibling(const fs::path& final_path) {
  static std::atomic<int64_t> counter{0};
  fs::path p = final_path.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.string() + kTmpMarker + "-" + std::to_string(now_nanos()) + "-" +
         std::to_string(counter++);
}

bool is_tmp(const fs::path& path) {
  return path.filename().string().find(kTmpMarker) != std::string::npos;
}

void commit(const fs::path& tmp, const fs::path& final_path, bool replace) {
  fs::path parent = final_path.lexically_normal().parent_path();
  if (parent.empty()) parent = ".";
  if (fs::exists(final_path)) {
    if (!replace)
      throw Error("checkpoint: " + final_path.string() +
                  " already exists (save with force=true to replace it)");
    // RENAME_EXCHANGE swaps the two names at once: at every moment `final_path` is either the
    // old complete checkpoint or the new one.
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) != 0)
      fail("cannot exchange with", final_path);
    sync_dir(parent);
    std::error_code ec;
    fs::remove_all(tmp, ec);  // now the old contents
    return;
  }
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) fail("cannot rename into", final_path);
  sync_dir(parent);
}

}  // namespace cujax::checkpoint::files
