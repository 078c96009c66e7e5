#include "cli/conformance.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cujax/core/error.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/verifier.h"
#include "cujax/runtime/backend.h"

namespace cujax::cli {

namespace fs = std::filesystem;

FileResult run_conformance_file(const std::string& path, const std::string& platform) {
  FileResult result{path, ""};
  std::ifstream in(path, std::ios::binary);
  if (!in) return {path, "cannot open file"};
  std::ostringstream ss;
  ss << in.rdbuf();
  std::unique_ptr<ir::Module> module;
  try {
    module = ir::parse_module(ss.str());
  } catch (const ParseError& e) {
    return {path, std::string("parse error at ") + e.what()};
  } catch (const std::exception& e) {
    return {path, std::string("parse error: ") + e.what()};
  }
  try {
    ir::verify(*module);
  } catch (const std::exception& e) {
    return {path, std::string("verify error: ") + e.what()};
  }
  try {
    auto exe = runtime::get_backend(platform).compile(*module, "main");
    runtime::ExecuteOptions options;
    int checks = 0;
    options.on_check = [&](const runtime::CheckResult& c) {
      ++checks;
      if (!c.passed && result.reason.empty()) result.reason = "failed " + c.name + ": " + c.message;
    };
    exe->execute({}, options);  // conformance programs take no arguments
    if (checks == 0 && result.reason.empty()) result.reason = "program has no check.* calls";
  } catch (const UnsupportedError& e) {
    return {path, std::string("unsupported: ") + e.what()};
  } catch (const std::exception& e) {
    return {path, std::string("error: ") + e.what()};
  }
  return result;
}

namespace {

std::vector<std::string> expand(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    if (fs::is_directory(in)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(in))
        if (e.is_regular_file() && e.path().extension() == ".mlir")
          found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(in);
    }
  }
  return files;
}

struct Child {
  pid_t pid;
  int fd;
  std::string path;
  std::string output;
  std::chrono::steady_clock::time_point start;
  bool killed = false;
};

// Runs the file in a forked child so that a crash or a hang costs one file, not the run.
Child start_child(const std::string& path, const std::string& platform) {
  int fds[2];
  if (pipe(fds) != 0) throw Error("pipe failed: " + std::string(std::strerror(errno)));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork failed: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    close(fds[0]);
    const FileResult r = run_conformance_file(path, platform);
    const std::string msg = r.reason.empty() ? "PASS" : "FAIL " + r.reason;
    ssize_t off = 0;
    while (off < static_cast<ssize_t>(msg.size())) {
      const ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += n;
    }
    _exit(0);
  }
  close(fds[1]);
  return Child{pid, fds[0], path, "", std::chrono::steady_clock::now()};
}

std::string finish_child(Child& c) {
  close(c.fd);
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (c.killed) return "FAIL timed out";
  if (WIFSIGNALED(status))
    return "FAIL crashed with signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  if (c.output.empty()) return "FAIL child produced no result";
  return c.output;
}

// Starts `platform`'s backend in a forked child and throws its error, if any. The parent must
// not start it itself: CUDA cannot be used in a child forked after the parent initialised it.
void check_platform_in_child(const std::string& platform) {
  int fds[2];
  if (pipe(fds) != 0) throw Error("pipe failed: " + std::string(std::strerror(errno)));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork failed: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    close(fds[0]);
    std::string msg;
    try {
      runtime::get_backend(platform);
    } catch (const std::exception& e) {
      msg = e.what();
    }
    if (!msg.empty() && write(fds[1], msg.data(), msg.size()) < 0) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!msg.empty()) throw Error(msg);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw Error("starting the " + platform + " backend crashed");
}

}  // namespace

int run_conformance(const std::vector<std::string>& inputs, const ConformanceOptions& options) {
  check_platform_in_child(options.platform);
  const std::vector<std::string> files = expand(inputs);
  std::map<std::string, std::string> outcome;
  std::vector<Child> running;
  size_t next = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (next < files.size() || !running.empty()) {
    while (next < files.size() && static_cast<int>(running.size()) < std::max(1, options.jobs))
      running.push_back(start_child(files[next++], options.platform));
    std::vector<pollfd> pfds;
    for (const auto& c : running) pfds.push_back({c.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 100);
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = running.size(); i-- > 0;) {
      Child& c = running[i];
      bool done = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        const ssize_t n = read(c.fd, buf, sizeof buf);
        if (n > 0)
          c.output.append(buf, n);
        else
          done = true;
      }
      if (!done && now - c.start > std::chrono::seconds(options.timeout_seconds)) {
        kill(c.pid, SIGKILL);
        c.killed = true;
        done = true;
      }
      if (done) {
        outcome[c.path] = finish_child(c);
        running.erase(running.begin() + i);
      }
    }
  }
  int passed = 0, failed = 0;
  for (const auto& f : files) {
    const std::string& o = outcome[f];
    if (o == "PASS") {
      ++passed;
      if (options.verbose) std::printf("PASS %s\n", f.c_str());
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", f.c_str(), o.substr(5).c_str());
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double rate = files.empty() ? 1.0 : static_cast<double>(passed) / files.size();
  std::fprintf(stderr, "conformance on %s: %.1f%% passed in %.1f s\n", options.platform.c_str(),
               100.0 * rate, secs);
  std::printf("%d passed, %d failed\n", passed, failed);
  std::fflush(stdout);
  return rate >= options.min_pass_rate ? 0 : 1;
}

}  // namespace cujax::cli
