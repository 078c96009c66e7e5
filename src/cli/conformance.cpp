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
#include <string_view>

#include "cujax/core/error.h"
#include "cujax/ir/parser.h"
#include "cujax/ir/verifier.h"
#include "cujax/runtime/backend.h"

namespace cujax::cli {

namespace fs = std::filesystem;

namespace {

// Horizontal whitespace runs as one space, none at the ends (FileCheck's default matching).
std::string squeeze(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The file's `// CHECK:` and `// CHECK-NEXT:` lines (the reference interpreter's tests check
// what interpreter.print writes with them) matched against the printed text, as FileCheck
// matches literal patterns: CHECK finds its pattern on the first line at or after the last
// match's, CHECK-NEXT on the line right after it. Returns "" when all match, else the reason.
std::string match_check_lines(const std::string& file_text, const std::string& printed) {
  std::vector<std::string> lines;
  {
    std::istringstream in(printed);
    for (std::string l; std::getline(in, l);) lines.push_back(squeeze(l));
  }
  std::istringstream in(file_text);
  size_t at = 0;  // the line after the last match
  bool matched_any = false;
  int lineno = 0;
  for (std::string l; std::getline(in, l);) {
    ++lineno;
    const size_t slash = l.find("//");
    if (slash == std::string::npos) continue;
    const std::string comment = squeeze(l.substr(slash + 2));
    if (comment.rfind("CHECK", 0) != 0) continue;
    const size_t colon = comment.find(':');
    const std::string directive = comment.substr(0, colon);
    if (colon == std::string::npos || (directive != "CHECK" && directive != "CHECK-NEXT"))
      return "line " + std::to_string(lineno) + ": FileCheck directive '" + directive +
             "' is not supported (only CHECK and CHECK-NEXT)";
    const std::string pattern = squeeze(comment.substr(colon + 1));
    if (pattern.find("{{") != std::string::npos || pattern.find("[[") != std::string::npos)
      return "line " + std::to_string(lineno) +
             ": FileCheck patterns with {{regex}} or [[var]] "
             "are not supported";
    const bool next = directive == "CHECK-NEXT";
    if (next && !matched_any)
      return "line " + std::to_string(lineno) + ": CHECK-NEXT without a CHECK before it";
    size_t i = at;
    const size_t end = next ? std::min(at + 1, lines.size()) : lines.size();
    while (i < end && lines[i].find(pattern) == std::string::npos) ++i;
    if (i >= end)
      return "line " + std::to_string(lineno) + ": " + directive + ": '" + pattern +
             "' not found in the printed output" +
             (next && at < lines.size() ? " (next line: '" + lines[at] + "')" : "");
    at = i + 1;
    matched_any = true;
  }
  return "";
}

bool has_check_lines(const std::string& file_text) {
  std::istringstream in(file_text);
  for (std::string l; std::getline(in, l);) {
    const size_t slash = l.find("//");
    if (slash != std::string::npos && squeeze(l.substr(slash + 2)).rfind("CHECK", 0) == 0)
      return true;
  }
  return false;
}

}  // namespace

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
    options.on_check = [&](const runtime::CheckResult& c) {
      if (!c.passed && result.reason.empty()) result.reason = "failed " + c.name + ": " + c.message;
    };
    std::string printed;
    options.on_print = [&](const std::string& text) { printed += text; };
    exe->execute({}, options);  // conformance programs take no arguments
    // A program without check ops passes by running (as the reference interpreter's lit tests
    // do); one that prints must print what its CHECK lines say. (Other files' CHECK lines check
    // the reference driver's own output, which cujax does not write.)
    if (result.reason.empty() && !printed.empty() && has_check_lines(ss.str())) {
      const std::string why = match_check_lines(ss.str(), printed);
      if (!why.empty()) result.reason = "printed output: " + why;
    }
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

using Clock = std::chrono::steady_clock;

// A forked process that runs the files the parent sends it, one at a time, so that a crash or
// a hang costs one file, not the run, and the backend (CUDA's context above all) starts once
// per worker rather than once per file. The parent writes "PATH\n"; the worker answers
// "PASS" or "FAIL reason", each ended by '\0'.
struct Worker {
  pid_t pid = -1;
  int to = -1;       // the parent's end of the paths pipe
  int from = -1;     // the parent's end of the results pipe
  std::string path;  // the file in progress; empty when idle
  std::string output;
  Clock::time_point start;
  bool alive() const { return pid > 0; }
};

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

[[noreturn]] void worker_main(int in, int out, const std::string& platform) {
  std::string pending;
  char buf[4096];
  for (;;) {
    size_t eol;
    while ((eol = pending.find('\n')) == std::string::npos) {
      const ssize_t n = read(in, buf, sizeof buf);
      if (n <= 0) _exit(0);  // the parent closed the pipe: no more files
      pending.append(buf, static_cast<size_t>(n));
    }
    const std::string path = pending.substr(0, eol);
    pending.erase(0, eol + 1);
    const FileResult r = run_conformance_file(path, platform);
    std::string msg = r.reason.empty() ? "PASS" : "FAIL " + r.reason;
    std::replace(msg.begin(), msg.end(), '\0', ' ');
    write_all(out, msg + '\0');
  }
}

void start_worker(Worker& w, const std::vector<Worker>& all, const std::string& platform) {
  int paths[2], results[2];
  if (pipe(paths) != 0 || pipe(results) != 0)
    throw Error("pipe failed: " + std::string(std::strerror(errno)));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw Error("fork failed: " + std::string(std::strerror(errno)));
  if (pid == 0) {
    // The other workers' pipe ends: a copy held here would keep them from seeing their end.
    for (const Worker& other : all)
      if (other.alive()) {
        close(other.to);
        close(other.from);
      }
    close(paths[1]);
    close(results[0]);
    worker_main(paths[0], results[1], platform);
  }
  close(paths[0]);
  close(results[1]);
  w = Worker{pid, paths[1], results[0], "", "", Clock::now()};
}

// Closes the worker's pipes and waits for it; returns how it ended when it was killed or died
// in the middle of a file.
std::string stop_worker(Worker& w, bool kill_it) {
  if (kill_it) kill(w.pid, SIGKILL);
  close(w.to);
  close(w.from);
  int status = 0;
  waitpid(w.pid, &status, 0);
  w.pid = -1;
  if (kill_it) return "FAIL timed out";
  if (WIFSIGNALED(status))
    return "FAIL crashed with signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "FAIL child produced no result";
}

// After a failure that was not a clean verdict on the program (a check that did not hold, an
// op not supported, a parse or verify error), the worker's state may be damaged (a CUDA error
// is sticky for its context): the next file gets a fresh worker.
bool keeps_worker(const std::string& outcome) {
  if (outcome == "PASS") return true;
  for (const char* clean : {"FAIL failed ", "FAIL unsupported: ", "FAIL parse error",
                            "FAIL verify error: ", "FAIL printed output: "})
    if (outcome.rfind(clean, 0) == 0) return true;
  return false;
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
  // A worker that died writes to a closed pipe: an error to handle, not a signal to die of.
  struct sigaction ignore {
  }, saved{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &saved);
  std::vector<Worker> workers(static_cast<size_t>(std::max(1, options.jobs)));
  size_t next = 0;
  const auto t0 = Clock::now();
  auto busy = [&] {
    return std::any_of(workers.begin(), workers.end(),
                       [](const Worker& w) { return !w.path.empty(); });
  };
  while (next < files.size() || busy()) {
    for (Worker& w : workers) {
      if (!w.path.empty() || next >= files.size()) continue;
      if (!w.alive()) start_worker(w, workers, options.platform);
      w.path = files[next++];
      w.output.clear();
      w.start = Clock::now();
      write_all(w.to, w.path + "\n");
    }
    std::vector<pollfd> pfds;
    std::vector<Worker*> polled;
    for (Worker& w : workers)
      if (!w.path.empty()) {
        pfds.push_back({w.from, POLLIN, 0});
        polled.push_back(&w);
      }
    poll(pfds.data(), pfds.size(), 100);
    const auto now = Clock::now();
    for (size_t i = 0; i < polled.size(); ++i) {
      Worker& w = *polled[i];
      std::string result;
      bool ended = false;
      if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char buf[4096];
        const ssize_t n = read(w.from, buf, sizeof buf);
        if (n > 0) {
          w.output.append(buf, static_cast<size_t>(n));
          const size_t end = w.output.find('\0');
          if (end != std::string::npos) result = w.output.substr(0, end);
        } else {
          ended = true;
        }
      }
      if (!result.empty()) {
        outcome[w.path] = result;
        w.path.clear();
        if (options.process_per_file || !keeps_worker(result)) stop_worker(w, false);
      } else if (ended) {
        outcome[w.path] = stop_worker(w, false);
        w.path.clear();
      } else if (now - w.start > std::chrono::seconds(options.timeout_seconds)) {
        outcome[w.path] = stop_worker(w, true);
        w.path.clear();
      }
    }
  }
  for (Worker& w : workers)
    if (w.alive()) stop_worker(w, false);  // idle: it exits when its paths pipe closes
  sigaction(SIGPIPE, &saved, nullptr);
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
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double rate = files.empty() ? 1.0 : static_cast<double>(passed) / files.size();
  std::fprintf(stderr, "conformance on %s: %.1f%% passed in %.1f s\n", options.platform.c_str(),
               100.0 * rate, secs);
  std::printf("%d passed, %d failed\n", passed, failed);
  std::fflush(stdout);
  return rate >= options.min_pass_rate ? 0 : 1;
}

}  // namespace cujax::cli
