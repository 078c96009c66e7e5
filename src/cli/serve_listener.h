// The connection layer of `cujax serve`: an httplib::Server whose connections are read by one
// poll thread, not by its workers. cpp-httplib gives each accepted connection a worker from a
// fixed pool, and the worker blocks reading the request, so a few clients that send half a
// request and wait hold every worker and a ready request waits for one (8 such clients made a
// normal request wait 10 s). Here the poll thread buffers each request until its head and its
// Content-Length body have arrived, within a deadline, and only a complete request goes to a
// worker, which runs httplib's own parsing, routing and response writing on the buffered bytes
// and hands the connection back for its next request (keep-alive). A connection costs its
// socket and buffer until its request is whole; the caps below bound those, and their errors
// (408, 411, 413, 431, 503) are answered by the poll thread itself.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace cujax::cli {

struct ListenerLimits {
  int workers = 8;                       // threads that run complete requests
  int max_connections = 512;             // open connections in all (at most 512)
  int max_connections_per_client = 128;  // from one remote address
  double request_timeout_s = 10;         // from a request's first byte to its last
  double idle_timeout_s = 5;             // a connection with no request under way
  double write_timeout_s = 5;            // a worker's wait for a client to take more bytes
  int max_requests_per_connection = 1000;
  size_t max_head = 16 * 1024;  // request line and headers
  size_t max_body = 64 * 1024;
};

struct ListenerStats {
  int64_t open = 0;       // connections now
  int64_t rejected = 0;   // 503: over a connection cap
  int64_t timed_out = 0;  // 408: a request not complete within request_timeout_s
};

// How the bytes a connection has buffered frame a request (what the poll thread acts on).
struct Framing {
  enum class State { Incomplete, Complete, Reject } state = State::Incomplete;
  int status = 0;       // Reject: the status to answer
  std::string message;  // Reject: why
  std::string path;     // the request line's target; "" before it has arrived
  // An "Expect: 100-continue" header's offset and length in the buffer, or npos.
  size_t expect_at = std::string::npos, expect_len = 0;
};
Framing frame_request(std::string_view buf, const ListenerLimits& limits);

class Listener : public httplib::Server {
 public:
  // error_body(status, path, message): the JSON body of an error the poll thread answers (path
  // is "" before the request line has arrived).
  Listener(ListenerLimits limits,
           std::function<std::string(int, const std::string&, const std::string&)> error_body);
  ~Listener() override;
  // Binds host:port (0: a free port), starts the poll thread and the workers; returns the port
  // and throws Error when it cannot bind.
  int start(const std::string& host, int port);
  // Stops accepting, closes idle connections, lets the workers finish what they run.
  void shutdown();
  ListenerStats stats() const;
  // Answers `request`, the bytes a client sent, as a connection would but with no socket: the
  // framing checks, then httplib's parsing, routing and handlers. Returns what the client
  // would read ("" while the request is not complete). For tests and the fuzzer.
  std::string answer(const std::string& request);

 private:
  using Clock = std::chrono::steady_clock;
  struct Conn {
    int fd = -1;
    std::string addr;
    int port = 0;
    std::string buf;  // bytes received and not yet parsed; they start at pos
    size_t pos = 0;
    bool started = false;  // part of a request has arrived
    bool closing = false;  // answered with an error; discarding input until EOF
    bool keep = true;      // a worker says whether the connection stays open
    int served = 0;
    Clock::time_point deadline;
  };
  class ConnStream;
  class MemoryStream;

  void poll_loop();
  void work_loop();
  void accept_all();
  // After new bytes: hands a complete request to a worker or answers an error; false when the
  // connection was removed from the poll set.
  bool on_data(Conn& c);
  std::string error_reply(int status, const std::string& path, const std::string& message) const;
  void answer_and_close(Conn& c, int status, const std::string& path, const std::string& message);
  void close_conn(Conn& c);
  void hand_back(Conn c);
  void wake();

  ListenerLimits limits_;
  std::function<std::string(int, const std::string&, const std::string&)> error_body_;
  int listen_fd_ = -1, wake_fd_ = -1;
  std::unordered_map<int, Conn> conns_;  // the poll thread's: idle, reading or closing
  std::map<std::string, int> per_client_;
  int at_workers_ = 0;
  Clock::time_point accept_pause_until_;

  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable work_cv_;
  std::deque<Conn> jobs_;
  std::vector<Conn> returned_;
  bool stopping_ = false, poll_done_ = false;
  ListenerStats stats_;

  std::thread poller_;
  std::vector<std::thread> workers_;
};

}  // namespace cujax::cli
