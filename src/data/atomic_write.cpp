#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "cujax/core/error.h"
#include "cujax/metrics_log.h"

namespace cujax::metrics_log {

void write_file_atomic(const std::string& path, std::string_view contents) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.filename().empty()) throw Error("cannot write '" + path + "': not a file name");
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Hidden and in the same folder: rename() is atomic only within one file system.
  std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    throw Error("cannot write '" + path + "': cannot create a temporary file in '" + dir.string() +
                "': " + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("cannot write '" + path + "': " + what + ": " + std::strerror(err));
  };
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) fail("fchmod");  // mkstemp makes the file 0600
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write '" + path + "': close: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write '" + path + "': rename: " + std::strerror(err));
  }
  // The rename itself survives a crash once the folder is synced.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace cujax::metrics_log
