// The connection layer of `cujax serve` (serve_listener.h).
#include "cli/serve_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "cujax/core/error.h"

namespace cujax::cli {

namespace {

constexpr int kMaxClosing = 64;  // answered connections waiting for their client's EOF

int millis(double seconds) {
  return static_cast<int>(seconds * 1000);
}

// Waits up to `timeout_ms` for `events` on fd.
bool wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & events);
}

// Whether the peer has not closed its end (a pending byte or nothing to read yet).
bool alive(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return true;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return false;
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

const char* reason(int status) {
  switch (status) {
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return "Bad Request";
  }
}

}  // namespace

// The stream a worker's httplib::Server::process_request reads and writes: the buffered bytes
// first, then the socket (non-blocking, so every wait is bounded by a timeout).
class Listener::ConnStream : public httplib::Stream {
 public:
  ConnStream(Conn& c, int timeout_ms) : c_(c), timeout_ms_(timeout_ms) {}
  bool is_readable() const override {
    return c_.pos < c_.buf.size() || wait_for(c_.fd, POLLIN, timeout_ms_);
  }
  bool is_writable() const override {
    // A streamed reply asks before every chunk: one poll answers both questions when there is
    // room to write and the client has sent nothing (no EOF pending).
    pollfd p{c_.fd, POLLOUT | POLLIN, 0};
    if (::poll(&p, 1, 0) == 1 && p.revents == POLLOUT) return true;
    return wait_for(c_.fd, POLLOUT, timeout_ms_) && alive(c_.fd);
  }
  ssize_t read(char* ptr, size_t size) override {
    if (c_.pos < c_.buf.size()) {
      const size_t n = std::min(size, c_.buf.size() - c_.pos);
      std::memcpy(ptr, c_.buf.data() + c_.pos, n);
      c_.pos += n;
      return static_cast<ssize_t>(n);
    }
    // A complete request is in the buffer; this is only reached past it, by a broken client.
    if (!wait_for(c_.fd, POLLIN, timeout_ms_)) return -1;
    return ::recv(c_.fd, ptr, size, 0);
  }
  ssize_t write(const char* ptr, size_t size) override {
    // The socket is non-blocking: wait only when its buffer is full.
    const ssize_t n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
    if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return n;
    if (!wait_for(c_.fd, POLLOUT, timeout_ms_)) return -1;
    return ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.addr;
    port = c_.port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    ip.clear();
    port = 0;
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return;
    char host[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
      port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
      port = ntohs(in->sin6_port);
    }
    ip = host;
  }
  socket_t socket() const override { return c_.fd; }

 private:
  Conn& c_;
  int timeout_ms_;
};

// The stream of Listener::answer: reads the request's bytes, keeps what is written.
class Listener::MemoryStream : public httplib::Stream {
 public:
  explicit MemoryStream(std::string_view in) : in_(in) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - pos_);
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return n == 0 ? -1 : static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out_.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 0;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = "127.0.0.1";
    port = 0;
  }
  socket_t socket() const override { return INVALID_SOCKET; }
  const std::string& written() const { return out_; }

 private:
  std::string_view in_;
  size_t pos_ = 0;
  std::string out_;
};

Listener::Listener(
    ListenerLimits limits,
    std::function<std::string(int, const std::string&, const std::string&)> error_body)
    : limits_(limits), error_body_(std::move(error_body)) {
  // httplib without CPPHTTPLIB_USE_POLL answers 500 on a socket at or above FD_SETSIZE.
  limits_.max_connections = std::clamp(limits_.max_connections, 1, 512);
  limits_.max_connections_per_client =
      std::clamp(limits_.max_connections_per_client, 1, limits_.max_connections);
  limits_.workers = std::max(limits_.workers, 1);
  set_payload_max_length(limits_.max_body);
  // httplib's default also sets SO_REUSEPORT, with which a second server on the same port
  // binds too and the kernel splits the connections between them.
  set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // What httplib's Keep-Alive header announces.
  set_keep_alive_timeout(static_cast<time_t>(limits_.idle_timeout_s));
  set_keep_alive_max_count(static_cast<size_t>(limits_.max_requests_per_connection));
}

Listener::~Listener() {
  shutdown();
}

int Listener::start(const std::string& host, int port) {
  int bound = port;
  if (port == 0)
    bound = bind_to_any_port(host);
  else if (!bind_to_port(host, port))
    bound = -1;
  if (bound < 0) throw Error("cannot listen on " + host + ":" + std::to_string(port));
  listen_fd_ = svr_sock_;
  // httplib listens with a backlog of 5: a burst of connections past it has its SYNs dropped
  // and retried a second later, whatever the poll thread does. Listening again sets the
  // backlog (Linux).
  ::listen(listen_fd_, SOMAXCONN);
  ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw Error("cujax serve: eventfd: " + std::string(std::strerror(errno)));
  poller_ = std::thread([this] { poll_loop(); });
  for (int i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { work_loop(); });
  return bound;
}

void Listener::shutdown() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (!poller_.joinable()) return;
  wake();
  poller_.join();
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
  ::close(wake_fd_);
}

ListenerStats Listener::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Listener::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void Listener::close_conn(Conn& c) {
  if (!c.closing && --per_client_[c.addr] == 0) per_client_.erase(c.addr);
  ::close(c.fd);
}

std::string Listener::error_reply(int status, const std::string& path,
                                  const std::string& message) const {
  const std::string body = error_body_(status, path, message);
  return "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n" + (status == 503 ? "Retry-After: 1\r\n" : "") + "\r\n" + body;
}

void Listener::answer_and_close(Conn& c, int status, const std::string& path,
                                const std::string& message) {
  const std::string reply = error_reply(status, path, message);
  // A fresh or idle socket's buffer takes this much at once; a client that reads nothing
  // loses the reply, which is all it is owed.
  [[maybe_unused]] const ssize_t n = ::send(c.fd, reply.data(), reply.size(), MSG_NOSIGNAL);
  // Close only after the client's EOF (or a second): closing with its unread bytes pending
  // would reset the connection and could discard the reply before the client reads it.
  ::shutdown(c.fd, SHUT_WR);
  if (--per_client_[c.addr] == 0) per_client_.erase(c.addr);
  c.closing = true;
  c.buf.clear();
  c.pos = 0;
  c.deadline = Clock::now() + std::chrono::seconds(1);
}

Framing frame_request(std::string_view buf, const ListenerLimits& limits) {
  Framing f;
  const size_t head_end = buf.find("\r\n\r\n");
  const size_t line_end = buf.find("\r\n");
  if (line_end != std::string_view::npos) {
    const std::string_view line = buf.substr(0, line_end);
    const size_t a = line.find(' '), b = line.find(' ', a + 1);
    if (a != std::string_view::npos) f.path = std::string(line.substr(a + 1, b - a - 1));
  }
  const auto reject = [&](int status, std::string message) {
    f.state = Framing::State::Reject;
    f.status = status;
    f.message = std::move(message);
    return f;
  };
  const std::string head_too_long =
      "the request line and headers are over " + std::to_string(limits.max_head / 1024) + " KiB";
  if (head_end == std::string_view::npos) {
    if (buf.size() > limits.max_head) return reject(431, head_too_long);
    return f;
  }
  if (head_end > limits.max_head) return reject(431, head_too_long);
  // The headers that frame the body.
  int64_t length = 0;
  for (size_t at = line_end + 2; at < head_end + 2;) {
    const size_t end = buf.find("\r\n", at);
    const std::string_view header = buf.substr(at, end - at);
    const size_t colon = header.find(':');
    const std::string_view name = trim(header.substr(0, colon));
    const std::string_view value =
        colon == std::string_view::npos ? std::string_view() : trim(header.substr(colon + 1));
    if (iequals(name, "Content-Length")) {
      if (value.empty() || value.size() > 18 ||
          !std::all_of(value.begin(), value.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        return reject(400, "Content-Length is not a number");
      length = std::stoll(std::string(value));
    } else if (iequals(name, "Transfer-Encoding")) {
      return reject(411, "send the body with a Content-Length, not Transfer-Encoding");
    } else if (iequals(name, "Expect") && iequals(value, "100-continue")) {
      f.expect_at = at;
      f.expect_len = end + 2 - at;
    }
    at = end + 2;
  }
  if (static_cast<uint64_t>(length) > limits.max_body)
    return reject(413, "the body is over " + std::to_string(limits.max_body / 1024) + " KiB");
  const size_t have = buf.size() - (head_end + 4);
  if (have >= static_cast<size_t>(length)) f.state = Framing::State::Complete;
  return f;
}

bool Listener::on_data(Conn& c) {
  const Framing f = frame_request(std::string_view(c.buf).substr(c.pos), limits_);
  if (f.state == Framing::State::Reject) {
    answer_and_close(c, f.status, f.path, f.message);
    return true;
  }
  if (f.state == Framing::State::Incomplete) {
    if (f.expect_at != std::string::npos) {
      // The client waits for this before it sends the body; the header goes, so that httplib
      // does not answer it a second time.
      const std::string go = "HTTP/1.1 100 Continue\r\n\r\n";
      [[maybe_unused]] const ssize_t n = ::send(c.fd, go.data(), go.size(), MSG_NOSIGNAL);
      c.buf.erase(c.pos + f.expect_at, f.expect_len);
    }
    return true;
  }
  // Complete: a worker runs it.
  const int fd = c.fd;
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(c));
  }
  work_cv_.notify_one();
  ++at_workers_;
  conns_.erase(fd);
  return false;
}

std::string Listener::answer(const std::string& request) {
  const Framing f = frame_request(request, limits_);
  if (f.state == Framing::State::Incomplete) return "";
  if (f.state == Framing::State::Reject) return error_reply(f.status, f.path, f.message);
  MemoryStream strm(request);
  bool closed = false;
  process_request(strm, /*close_connection=*/true, closed, nullptr);
  return strm.written();
}

void Listener::accept_all() {
  for (;;) {
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    const int fd =
        ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE)  // out of descriptors: poll the rest for a while
        accept_pause_until_ = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Conn c;
    c.fd = fd;
    char host[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
      ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
      c.port = ntohs(in->sin_port);
    } else if (a.ss_family == AF_INET6) {
      const auto* in = reinterpret_cast<const sockaddr_in6*>(&a);
      ::inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
      c.port = ntohs(in->sin6_port);
    }
    c.addr = host;
    c.deadline = Clock::now() + std::chrono::milliseconds(millis(limits_.idle_timeout_s));
    int open = at_workers_, closing = 0;
    for (const auto& [_, x] : conns_) (x.closing ? closing : open) += 1;
    const int from_client = per_client_[c.addr]++;
    if (open >= limits_.max_connections || from_client >= limits_.max_connections_per_client) {
      {
        std::lock_guard lock(mutex_);
        ++stats_.rejected;
      }
      if (closing >= kMaxClosing) {
        close_conn(c);
        continue;
      }
      answer_and_close(c, 503, "",
                       open >= limits_.max_connections
                           ? "the server has " + std::to_string(open) +
                                 " connections open, its limit (--max-connections); retry later"
                           : "this client address has " + std::to_string(from_client) +
                                 " connections open, the limit per client; retry later");
    }
    conns_.emplace(fd, std::move(c));
  }
}

void Listener::hand_back(Conn c) {
  {
    std::lock_guard lock(mutex_);
    if (!poll_done_) {
      returned_.push_back(std::move(c));
      c.fd = -1;
    }
  }
  if (c.fd >= 0)
    ::close(c.fd);  // the poll thread is gone: the server is stopping
  else
    wake();
}

void Listener::work_loop() {
  for (;;) {
    Conn c;
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return !jobs_.empty() || poll_done_; });
      if (jobs_.empty()) return;
      c = std::move(jobs_.front());
      jobs_.pop_front();
    }
    bool stopping;
    {
      std::lock_guard lock(mutex_);
      stopping = stopping_;
    }
    ConnStream strm(c, millis(limits_.write_timeout_s));
    const bool last = stopping || c.served + 1 >= limits_.max_requests_per_connection;
    bool closed = false;
    const bool ok = process_request(strm, last, closed, nullptr);
    ++c.served;
    c.keep = ok && !last && !closed;
    hand_back(std::move(c));
  }
}

void Listener::poll_loop() {
  std::vector<pollfd> fds;
  std::vector<int> order;
  for (;;) {
    std::vector<Conn> back;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) break;
      back.swap(returned_);
    }
    const auto now = Clock::now();
    for (Conn& c : back) {
      --at_workers_;
      if (!c.keep) {
        close_conn(c);
        continue;
      }
      // Keep-alive: bytes past the request (a pipelined one) stay for the next.
      c.buf.erase(0, c.pos);
      c.pos = 0;
      c.started = !c.buf.empty();
      c.deadline = now + std::chrono::milliseconds(millis(c.started ? limits_.request_timeout_s
                                                                    : limits_.idle_timeout_s));
      const int fd = c.fd;
      Conn& placed = conns_.emplace(fd, std::move(c)).first->second;
      if (placed.started) on_data(placed);
    }

    fds.clear();
    order.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = now >= accept_pause_until_;
    if (accepting) fds.push_back({listen_fd_, POLLIN, 0});
    auto next = now + std::chrono::seconds(1);
    for (const auto& [fd, c] : conns_) {
      fds.push_back({fd, POLLIN, 0});
      order.push_back(fd);
      next = std::min(next, c.deadline);
    }
    if (!accepting) next = std::min(next, accept_pause_until_);
    const int timeout = static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1));
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) break;

    if (fds[0].revents & POLLIN) {
      uint64_t n;
      [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &n, sizeof(n));
    }
    const size_t first_conn = accepting ? 2 : 1;
    for (size_t i = first_conn; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = conns_.find(order[i - first_conn]);
      Conn& c = it->second;
      char chunk[16384];
      const ssize_t n = ::recv(c.fd, chunk, sizeof(chunk), 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) {  // the client closed or reset
        close_conn(c);
        conns_.erase(it);
        continue;
      }
      if (c.closing) continue;  // discarded
      if (!c.started) {
        c.started = true;
        c.deadline = Clock::now() + std::chrono::milliseconds(millis(limits_.request_timeout_s));
      }
      c.buf.append(chunk, static_cast<size_t>(n));
      on_data(c);
    }
    if (accepting && (fds[1].revents & POLLIN)) accept_all();

    const auto later = Clock::now();
    for (auto it = conns_.begin(); it != conns_.end();) {
      Conn& c = it->second;
      if (later < c.deadline) {
        ++it;
        continue;
      }
      if (c.started && !c.closing) {
        {
          std::lock_guard lock(mutex_);
          ++stats_.timed_out;
        }
        answer_and_close(c, 408, "",
                         "the request did not arrive whole within " +
                             std::to_string(millis(limits_.request_timeout_s) / 1000) + " s");
        ++it;
        continue;
      }
      close_conn(c);
      it = conns_.erase(it);
    }
    std::lock_guard lock(mutex_);
    stats_.open = static_cast<int64_t>(conns_.size()) + at_workers_;
  }
  // Stopping: no new connections; those between requests are closed.
  ::close(listen_fd_);
  svr_sock_ = INVALID_SOCKET;
  for (auto& [fd, c] : conns_) close_conn(c);
  conns_.clear();
  std::lock_guard lock(mutex_);
  poll_done_ = true;
  for (Conn& c : returned_) ::close(c.fd);
  returned_.clear();
}

}  // namespace cujax::cli
